//! The archive's full-text index: one tantivy document per chunk, every fetch of a URL kept as a
//! version, BM25 search over the latest versions (or over the archive as it was at a time).
//!
//! Versions: each fetch of a URL is a version with its own `page_id`, and each version is valid
//! from its `fetched_at` until `valid_until` (the next version's `fetched_at`, or [`FAR_FUTURE`]
//! for the latest). A URL's versions are each tenant's own: every chunk carries its page's
//! `tenant`, a search may be restricted to one ([`SearchQuery::tenant`]), and one tenant's
//! fetch never closes another tenant's version. Default search sees the latest version of each URL; `as_of` sees the
//! versions with `fetched_at <= as_of < valid_until`. [`ArchiveWriter::add_page`] keeps these
//! windows consistent, including for versions that arrive out of order; the rule is on that
//! method.
//!
//! This module holds the handle, [`ArchiveIndex`], and the index's [`Error`]. Around it:
//! - `directory`: tantivy's memory-mapped directory, with document stores and positions read
//!   into buffers.
//! - `schema`: the fields of a chunk document and how each is indexed.
//! - `search`: [`SearchQuery`] in, ranked [`Hit`]s out (BM25, per-page collapse, snippets).
//! - `collector`: the top-k collector that applies a search's filters on fast fields.
//! - `writer`: [`ArchiveWriter`], which adds versions of pages ([`PageDoc`]) and commits them.
//!
//! Everything here is blocking CPU and disk work: call it from a blocking thread.
//!
//! Not here: chunking (`archive::chunk`), deciding what to archive, or the HTTP API.

mod collector;
mod directory;
mod schema;
mod search;
#[cfg(test)]
mod tests;
mod writer;

use std::path::Path;
use std::sync::Arc;

use tantivy::directory::error::LockError;
use tantivy::query::QueryParser;
use tantivy::{DateTime, Index, IndexReader, ReloadPolicy, TantivyDocument, TantivyError};

use directory::IndexDirectory;
use schema::{Fields, schema};
pub use search::{Hit, HitKind, MAX_K, SearchQuery};
pub use writer::{Added, ArchiveWriter, PageDoc};

/// `valid_until` of the latest version of a URL: 2200-01-01T00:00:00Z, in microseconds since
/// the Unix epoch (tantivy dates end in 2262). Timestamps at or after it are clamped below it.
pub const FAR_FUTURE: i64 = 7_258_118_400 * 1_000_000;

/// The earliest instant tantivy can hold, in microseconds (earlier timestamps are clamped).
const MIN_MICROS: i64 = i64::MIN / 1_000 + 1;

/// Why an index operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The search query is empty or did not parse; the message is fit for a 400 response.
    #[error("bad query: {0}")]
    Query(String),
    /// Another writer holds the index lock (one writer per index, in any process).
    #[error("the archive index already has a writer")]
    Busy,
    /// The directory holds an index with another schema, or a document did not fit the schema.
    #[error("archive index schema: {0}")]
    Schema(String),
    /// tantivy failed.
    #[error("archive index: {0}")]
    Index(TantivyError),
    /// The filesystem failed.
    #[error("archive index io: {0}")]
    Io(#[from] std::io::Error),
}

impl From<TantivyError> for Error {
    fn from(e: TantivyError) -> Self {
        match e {
            TantivyError::LockFailure(LockError::LockBusy, _) => Error::Busy,
            TantivyError::SchemaError(msg) => Error::Schema(msg),
            other => Error::Index(other),
        }
    }
}

/// Microseconds since the epoch, clamped to what tantivy holds and below [`FAR_FUTURE`].
fn micros(ts: jiff::Timestamp) -> i64 {
    ts.as_microsecond().clamp(MIN_MICROS, FAR_FUTURE - 1)
}

fn date(micros: i64) -> DateTime {
    DateTime::from_timestamp_micros(micros)
}

/// zstd level of a new index's stored fields.
const DOCSTORE_ZSTD_LEVEL: i32 = 1;

/// How an index is made when its directory has none: stored fields (chunk texts, page texts,
/// and each chunk's page fields) compressed by zstd rather than tantivy's default lz4. They are
/// most of an index's bytes, and merging segments reads all of their inputs' stored bytes
/// through mmap, which is where an archiving crawl's peak memory was. An existing index keeps
/// the compressor it was made with (its `meta.json` names it).
fn new_index(schema: tantivy::schema::Schema) -> tantivy::IndexBuilder {
    let settings = tantivy::IndexSettings {
        docstore_compression: tantivy::store::Compressor::Zstd(tantivy::store::ZstdCompressor {
            compression_level: Some(DOCSTORE_ZSTD_LEVEL),
        }),
        ..tantivy::IndexSettings::default()
    };
    Index::builder().schema(schema).settings(settings)
}

/// The archive's chunk index: a cheap, clonable handle for searching, and the way to its one
/// writer.
#[derive(Clone)]
pub struct ArchiveIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    parser: Arc<QueryParser>,
}

impl std::fmt::Debug for ArchiveIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveIndex")
            .field("num_docs", &self.num_docs())
            .finish_non_exhaustive()
    }
}

impl ArchiveIndex {
    /// Opens the index in `dir`, creating the directory and an empty index when there is none.
    /// An index with another schema is [`Error::Schema`].
    pub fn open_or_create(dir: &Path) -> Result<Self, Error> {
        std::fs::create_dir_all(dir)?;
        let directory = IndexDirectory::open(dir)?;
        let (current, mut fields) = schema(true);
        let index = match new_index(current).open_or_create(directory.clone()) {
            Err(TantivyError::SchemaError(msg)) => {
                // An index made before page documents: searched and written as it is, its
                // pages without page documents.
                let (legacy, legacy_fields) = schema(false);
                let index = new_index(legacy)
                    .open_or_create(directory)
                    .map_err(|_| Error::Schema(format!("{}: {msg}", dir.display())))?;
                tracing::warn!(
                    index = %dir.display(),
                    "the archive index predates page documents: searches find what pages' \
                     extracted content holds only (move the directory away and run `trawl \
                     archive --all` to rebuild it)"
                );
                fields = legacy_fields;
                index
            }
            other => other?,
        };
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::OnCommitWithDelay)
            .try_into()?;
        let parser = search::query_parser(&index, &fields);
        Ok(ArchiveIndex {
            index,
            reader,
            fields,
            parser: Arc::new(parser),
        })
    }

    /// Whether the index has page documents (`page_text`); one made before them has not.
    pub fn indexes_page_text(&self) -> bool {
        self.fields.page_text.is_some()
    }

    /// The index's one writer, with `heap_bytes` of indexing memory (at least 15 MB; tantivy
    /// splits it over up to 8 threads of at least 15 MB each). [`Error::Busy`] while another
    /// writer, in this process or another, holds the lock.
    pub fn writer(&self, heap_bytes: usize) -> Result<ArchiveWriter, Error> {
        let writer = self.index.writer::<TantivyDocument>(heap_bytes)?;
        Ok(ArchiveWriter::new(self.clone(), writer))
    }

    /// [`ArchiveIndex::writer`] with `threads` indexing threads sharing `heap_bytes` (each
    /// needs at least 15 MB). Each thread writes a segment of its own at every commit, so on a
    /// machine whose cores are busy fetching and extracting, one thread indexes as fast and
    /// leaves fewer segments to merge.
    pub fn writer_with_threads(
        &self,
        threads: usize,
        heap_bytes: usize,
    ) -> Result<ArchiveWriter, Error> {
        let writer = self
            .index
            .writer_with_num_threads::<TantivyDocument>(threads.max(1), heap_bytes)?;
        Ok(ArchiveWriter::new(self.clone(), writer))
    }

    /// Makes the last commit visible to searches now. [`ArchiveWriter::commit`] already does;
    /// this is for a process that only reads while another one writes (it would otherwise see
    /// the commit after a short delay).
    pub fn reload(&self) -> Result<(), Error> {
        self.reader.reload()?;
        Ok(())
    }

    /// Documents in the index (chunks and page documents), all versions, as of the last
    /// reload.
    pub fn num_docs(&self) -> u64 {
        self.reader.searcher().num_docs()
    }
}
