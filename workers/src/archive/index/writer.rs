//! Writing the archive index: [`ArchiveWriter`] adds fetched versions of pages ([`PageDoc`]),
//! keeping each URL's validity windows consistent (the rule is on [`ArchiveWriter::add_page`]),
//! and commits them in batches.
//!
//! Not here: chunking (`archive::chunk`), searching (`search`), or deciding what to archive.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use tantivy::collector::{Count, DocSetCollector};
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::{IndexWriter, Searcher, TantivyDocument, TantivyError, Term};

use super::schema::{Fields, PAGE_DOC, VALID_UNTIL, first_str};
use super::{ArchiveIndex, Error, FAR_FUTURE, date, micros};
use crate::archive::chunk::Chunk;

/// One fetched version of a page, ready to index: its metadata and its chunks.
#[derive(Debug, Clone, Copy)]
pub struct PageDoc<'a> {
    /// Identifier of this version (one fetch of `url`); unique across the archive.
    pub page_id: &'a str,
    /// The page's URL, exactly as stored (versions of a page share it).
    pub url: &'a str,
    /// The URL's host, filterable by exact (ASCII case-insensitive) match.
    pub host: &'a str,
    /// The page title, when it has one.
    pub title: Option<&'a str>,
    /// When this version was fetched.
    pub fetched_at: jiff::Timestamp,
    /// The page's language tag, when known.
    pub lang: Option<&'a str>,
    /// Hash of the page content; a new version with the latest one's hash is not indexed.
    pub content_hash: &'a str,
    /// The page's chunks, one document each.
    pub chunks: &'a [Chunk],
    /// The tenant the page belongs to: searches are filtered by it, and a URL's versions are
    /// each tenant's own.
    pub tenant: &'a str,
    /// The page's visible text outside its extracted content (`archive::page_text`): indexed
    /// as the version's page documents (pieces of about 300 words, cut between lines) when
    /// the index has `page_text`.
    pub rest: Option<&'a str>,
}

/// What [`ArchiveWriter::add_page`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// The version was indexed (visible after the next commit).
    Indexed {
        /// Chunks (passages) of this version written.
        chunks: usize,
        /// Page documents of this version written: pieces of the page's visible text outside
        /// its extracted content (0 without [`PageDoc::rest`] or on an index made before them).
        page_docs: usize,
        /// Documents (chunks and page documents) of the version it superseded whose validity
        /// window was closed (rewritten with the new `valid_until`); 0 for a URL's first
        /// version.
        replaced: usize,
    },
    /// Nothing was written: this `page_id` is already indexed, or the version it would follow
    /// has the same content hash.
    Unchanged,
}

/// One version of a URL as the writer knows it.
#[derive(Debug)]
struct Version {
    page_id: String,
    content_hash: String,
    fetched_at: i64,
    valid_until: i64,
    /// Its documents (chunks and page documents), stored fields only (no `valid_until`), in
    /// chunk order, for a version read from the committed index. `None` for one written since
    /// the last commit: keeping every page's documents until the commit was most of the
    /// writer's memory (`add_page` commits and reads them back in the rare case it needs them).
    docs: Option<Vec<TantivyDocument>>,
}

/// What the writer knows of one URL's versions since the last commit: every version it
/// wrote or rewrote, plus the ones read from the index. `complete` when all committed versions
/// were read; otherwise only the committed latest one was.
#[derive(Debug, Default)]
struct UrlState {
    versions: Vec<Version>,
    complete: bool,
}

impl UrlState {
    fn latest(&self) -> Option<&Version> {
        self.versions
            .iter()
            .filter(|v| v.valid_until == FAR_FUTURE)
            .max_by_key(|v| v.fetched_at)
    }
}

/// The index's one writer: adds versions of pages and commits them in batches. Until
/// [`commit`](Self::commit), adds are invisible to searches and the writer remembers the
/// versions it wrote (not their documents) so that later adds of the same URL build on them.
/// Dropping it without committing discards the uncommitted adds.
pub struct ArchiveWriter {
    index: ArchiveIndex,
    writer: IndexWriter<TantivyDocument>,
    /// URLs written since the last commit, by series (tenant and URL).
    urls: HashMap<String, UrlState>,
    /// page_ids written since the last commit.
    pages: HashSet<String>,
    /// Pages indexed since the last commit.
    pending: usize,
    /// When the first of them was.
    since: Option<Instant>,
}

impl std::fmt::Debug for ArchiveWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveWriter")
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl ArchiveWriter {
    /// The writer of `index`, holding its lock through `writer`.
    pub(super) fn new(index: ArchiveIndex, writer: IndexWriter<TantivyDocument>) -> Self {
        ArchiveWriter {
            index,
            writer,
            urls: HashMap::new(),
            pages: HashSet::new(),
            pending: 0,
            since: None,
        }
    }

    /// Writes one version of a page (visible after the next commit).
    ///
    /// The rule: a `page_id` already indexed (committed, or written since the last commit) is
    /// [`Added::Unchanged`], so re-runs after a crash are harmless. Otherwise the version
    /// `V` of the URL valid at the new `fetched_at` (`V.fetched_at <= fetched_at <
    /// V.valid_until`; for a newer fetch that is the latest version) is looked up:
    /// - same `content_hash` as `V`: [`Added::Unchanged`], nothing written;
    /// - else `V`'s chunks are rewritten with `valid_until` = the new `fetched_at` (deleted by
    ///   their `page_id` term and re-added from their stored fields), and the new chunks get
    ///   `V`'s old `valid_until` (so a newer fetch becomes the latest, an older one is inserted
    ///   into history);
    /// - with no such `V` (a URL's first version, or one older than all its versions): the new
    ///   chunks are valid until the URL's earliest later `fetched_at`, or [`FAR_FUTURE`].
    ///
    /// A page without chunks writes nothing of its own but still closes `V`'s window (the
    /// URL drops out of default search). Ties: a fetch at the same instant as `V` replaces it.
    ///
    /// Each call runs a few term lookups on the committed index and reads the stored chunks of
    /// the version it closes; when that version was written since the last commit, it commits
    /// first (its documents are not kept in memory). After an error the writer's state is
    /// unknown: drop it.
    pub fn add_page(&mut self, page: &PageDoc<'_>) -> Result<Added, Error> {
        if self.pages.contains(page.page_id) {
            return Ok(Added::Unchanged);
        }
        let searcher = self.index.reader.searcher();
        let f = self.index.fields;
        let page_term = Term::from_field_text(f.page_id, page.page_id);
        if searcher.search(&TermQuery::new(page_term, IndexRecordOption::Basic), &Count)? > 0 {
            return Ok(Added::Unchanged);
        }
        let at = micros(page.fetched_at);
        let series = series_key(page.tenant, page.url);
        let url_term = Term::from_field_text(f.series, &series);

        let was_pending = self.urls.contains_key(&series);
        let mut state = match self.urls.remove(&series) {
            Some(state) => state,
            None => {
                let latest = BooleanQuery::new(vec![
                    (
                        Occur::Must,
                        Box::new(TermQuery::new(url_term.clone(), IndexRecordOption::Basic))
                            as Box<dyn Query>,
                    ),
                    (Occur::Must, latest_query(&f)),
                ]);
                UrlState {
                    versions: self.load_versions(&searcher, &latest)?,
                    complete: false,
                }
            }
        };
        let newest = state.latest().is_some_and(|v| v.fetched_at <= at);
        if !newest && !state.complete {
            let all = TermQuery::new(url_term, IndexRecordOption::Basic);
            for version in self.load_versions(&searcher, &all)? {
                if !state.versions.iter().any(|v| v.page_id == version.page_id) {
                    state.versions.push(version);
                }
            }
            state.complete = true;
        }

        let covering = state
            .versions
            .iter()
            .enumerate()
            .filter(|(_, v)| v.fetched_at <= at && at < v.valid_until)
            .max_by_key(|(_, v)| v.fetched_at)
            .map(|(i, _)| i);
        if let Some(i) = covering {
            let v = &state.versions[i];
            if v.docs.is_none() && v.content_hash != page.content_hash {
                // The version this one closes was written since the last commit, and its
                // documents were not kept: commit, and take it from the index like any other
                // (a URL fetched twice, with new content, within one commit's batch).
                self.commit()?;
                return self.add_page(page);
            }
        }
        let result = self.write_version(page, at, &mut state, covering);
        // Keep what was read only when something was written: unchanged pages must not grow
        // the writer's memory between commits.
        if was_pending || matches!(result, Ok(Added::Indexed { .. })) {
            self.urls.insert(series, state);
        }
        result
    }

    fn write_version(
        &mut self,
        page: &PageDoc<'_>,
        at: i64,
        state: &mut UrlState,
        covering: Option<usize>,
    ) -> Result<Added, Error> {
        let f = self.index.fields;
        let (valid_until, replaced) = match covering {
            Some(i) => {
                let v = &mut state.versions[i];
                if v.content_hash == page.content_hash {
                    return Ok(Added::Unchanged);
                }
                // `add_page` commits first when they are not at hand: deleting the version
                // without its documents to write again would lose it.
                let Some(docs) = v.docs.as_ref() else {
                    return Err(Error::Index(TantivyError::InternalError(format!(
                        "closing version {} without its documents",
                        v.page_id
                    ))));
                };
                self.writer
                    .delete_term(Term::from_field_text(f.page_id, &v.page_id));
                for doc in docs {
                    self.add_doc(doc.clone(), at)?;
                }
                let replaced = docs.len();
                let valid_until = std::mem::replace(&mut v.valid_until, at);
                (valid_until, replaced)
            }
            None => {
                let next = state
                    .versions
                    .iter()
                    .map(|v| v.fetched_at)
                    .filter(|&t| t > at)
                    .min()
                    .unwrap_or(FAR_FUTURE);
                (next, 0)
            }
        };
        let mut docs: Vec<TantivyDocument> = page
            .chunks
            .iter()
            .map(|chunk| chunk_doc(&f, page, at, chunk))
            .collect();
        let chunks = docs.len();
        if let (Some(field), Some(rest)) = (f.page_text, page.rest) {
            for (i, piece) in rest_pieces(rest).into_iter().enumerate() {
                docs.push(page_text_doc(&f, field, page, at, i, piece));
            }
        }
        let page_docs = docs.len() - chunks;
        for doc in docs {
            self.add_doc(doc, valid_until)?;
        }
        state.versions.push(Version {
            page_id: page.page_id.to_string(),
            content_hash: page.content_hash.to_string(),
            fetched_at: at,
            valid_until,
            docs: None,
        });
        self.pages.insert(page.page_id.to_string());
        self.pending += 1;
        self.since.get_or_insert_with(Instant::now);
        Ok(Added::Indexed {
            chunks,
            page_docs,
            replaced,
        })
    }

    fn add_doc(&self, mut doc: TantivyDocument, valid_until: i64) -> Result<(), Error> {
        doc.add_date(self.index.fields.valid_until, date(valid_until));
        self.writer.add_document(doc)?;
        Ok(())
    }

    /// The committed versions matching `query`, their documents grouped by `page_id`.
    fn load_versions(&self, searcher: &Searcher, query: &dyn Query) -> Result<Vec<Version>, Error> {
        let f = &self.index.fields;
        let addrs = searcher.search(query, &DocSetCollector)?;
        let mut columns = HashMap::new();
        let mut versions: HashMap<String, (Version, Vec<(u64, TantivyDocument)>)> = HashMap::new();
        for addr in addrs {
            let seg = addr.segment_ord;
            let column = match columns.get(&seg) {
                Some(c) => c,
                None => {
                    let c = searcher
                        .segment_reader(seg)
                        .fast_fields()
                        .date(VALID_UNTIL)?;
                    columns.entry(seg).or_insert(c)
                }
            };
            let valid_until = column
                .first(addr.doc_id)
                .map_or(FAR_FUTURE, |d| d.into_timestamp_micros());
            let doc: TantivyDocument = searcher.doc(addr)?;
            let page_id = first_str(&doc, f.page_id).unwrap_or_default();
            let index = doc
                .get_first(f.chunk_index)
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            let (_, docs) = versions.entry(page_id.clone()).or_insert_with(|| {
                (
                    Version {
                        page_id,
                        content_hash: first_str(&doc, f.content_hash).unwrap_or_default(),
                        fetched_at: doc
                            .get_first(f.fetched_at)
                            .and_then(|v| v.as_datetime())
                            .map_or(0, |d| d.into_timestamp_micros()),
                        valid_until,
                        docs: None,
                    },
                    Vec::new(),
                )
            });
            docs.push((index, doc));
        }
        Ok(versions
            .into_values()
            .map(|(mut version, mut docs)| {
                docs.sort_by_key(|(i, _)| *i);
                version.docs = Some(docs.into_iter().map(|(_, d)| d).collect());
                version
            })
            .collect())
    }

    /// Pages indexed since the last commit.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Makes everything written so far durable and visible to searches (the reader is
    /// reloaded before this returns). After an error, drop the writer and open a new one.
    pub fn commit(&mut self) -> Result<(), Error> {
        self.writer.commit()?;
        self.urls.clear();
        self.pages.clear();
        self.pending = 0;
        self.since = None;
        self.index.reader.reload()?;
        Ok(())
    }

    /// Commits when at least `max_pages` pages are pending, or when the oldest pending page
    /// waited `max_age` or longer; returns whether it committed. Call it after each add and on
    /// a timer (it does not wake up by itself).
    pub fn commit_if_due(&mut self, max_pages: usize, max_age: Duration) -> Result<bool, Error> {
        let due = match self.since {
            None => false,
            Some(since) => self.pending >= max_pages || since.elapsed() >= max_age,
        };
        if due {
            self.commit()?;
        }
        Ok(due)
    }
}

/// A chunk's document, stored fields only (`valid_until` is added when written).
fn chunk_doc(f: &Fields, page: &PageDoc<'_>, at: i64, chunk: &Chunk) -> TantivyDocument {
    let mut doc = version_doc(f, page, at, format!("{}:{}", page.page_id, chunk.index));
    for heading in &chunk.headings {
        doc.add_text(f.headings, heading);
    }
    doc.add_text(f.text, &chunk.text);
    doc.add_u64(f.chunk_index, u64::from(chunk.index));
    doc
}

/// The fields every document of a version has: its ids, URL, host, title, fetch time,
/// language, content hash, tenant and series.
fn version_doc(f: &Fields, page: &PageDoc<'_>, at: i64, chunk_id: String) -> TantivyDocument {
    let mut doc = TantivyDocument::new();
    doc.add_text(f.chunk_id, chunk_id);
    doc.add_text(f.page_id, page.page_id);
    doc.add_text(f.url, page.url);
    doc.add_text(f.host, page.host.to_ascii_lowercase());
    if let Some(title) = page.title.filter(|t| !t.is_empty()) {
        doc.add_text(f.title, title);
    }
    doc.add_date(f.fetched_at, date(at));
    if let Some(lang) = page.lang.filter(|l| !l.is_empty()) {
        doc.add_text(f.lang, lang);
    }
    doc.add_text(f.content_hash, page.content_hash);
    doc.add_text(f.tenant, page.tenant);
    doc.add_text(f.series, series_key(page.tenant, page.url));
    doc
}

/// Words of a page document: the page's rest is cut, between lines, into pieces of about a
/// passage's size, so that BM25 weighs a match in a page's rest as it weighs one in a passage
/// (one long document would rank last for any query) and the words of a query sit close
/// together in one of them.
const REST_PIECE_WORDS: usize = 300;

/// `rest` cut between lines into pieces of at least [`REST_PIECE_WORDS`] words (the last may
/// be shorter); none when it is blank.
pub(super) fn rest_pieces(rest: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let (mut start, mut words) = (0, 0);
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        at += line.len();
        words += line.split_whitespace().count();
        if words >= REST_PIECE_WORDS {
            pieces.push(rest[start..at].trim());
            (start, words) = (at, 0);
        }
    }
    pieces.push(rest[start..].trim());
    pieces.retain(|piece| !piece.is_empty());
    pieces
}

/// A page document of a version: the page's fields and a piece of its rest as `page_text`,
/// no headings, no `text`, no `chunk_index`.
fn page_text_doc(
    f: &Fields,
    field: tantivy::schema::Field,
    page: &PageDoc<'_>,
    at: i64,
    piece_index: usize,
    rest: &str,
) -> TantivyDocument {
    let chunk_id = format!("{}:{PAGE_DOC}:{piece_index}", page.page_id);
    let mut doc = version_doc(f, page, at, chunk_id);
    doc.add_text(field, rest);
    doc
}

/// The key of a URL's versions: the tenant and the URL (a tenant name has no space).
fn series_key(tenant: &str, url: &str) -> String {
    format!("{tenant} {url}")
}

/// Chunks of latest versions: `valid_until` = [`FAR_FUTURE`] (a term of the inverted index).
fn latest_query(f: &Fields) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_date_for_search(f.valid_until, date(FAR_FUTURE)),
        IndexRecordOption::Basic,
    ))
}
