//! The archive pool: stored pages waiting to be archived → chunks → the tantivy index, and
//! their responses → WARC records in rolling `.warc.gz` files. One pool per index (tantivy
//! allows one writer, in any process).
//!
//! The store is the pool's work list, so nothing is lost in a crash: a page is `pending`
//! until the index commit that holds it, then `archived`. After a crash the pending pages
//! are taken again; the index skips page ids it already has and the WARC records of a page
//! are written once (their place is recorded before the page is marked archived; a crash
//! between writing a record and recording it can repeat that one record). Commits are
//! batched by pages or time (`commit_pages`, `commit_ms`), so a search sees a page within
//! about `commit_ms` of its turn.
//!
//! Not here: chunking, the index and the WARC format (`trawl_workers::archive`), nor which
//! pages are archived (fetch jobs with `archive: true`, `trawl archive`, `trawl run
//! --archive`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use trawl_workers::archive::chunk::{ChunkOptions, chunk_markdown, strip_link_destinations};
use trawl_workers::archive::index::{self, Added, ArchiveIndex, ArchiveWriter, PageDoc};
use trawl_workers::archive::page_text::{rest_of_lines, rest_of_page};
use trawl_workers::archive::warc::{self, Exchange, Revisit, RollingWriter};
use trawl_workers::web::charset;

use crate::shutdown::Shutdown;
use crate::store::{self, ArchivePage, Store, WarcRef};

/// How the archive pool works. Every field is a `trawl.toml` key under `[archive]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Write WARC records of archived responses (under `data_dir/warc`).
    pub warc: bool,
    /// Size at which a WARC file is closed and the next one started, in megabytes.
    pub warc_max_file_mb: u64,
    /// Commit the index after this many pages...
    pub commit_pages: usize,
    /// ...or when the oldest uncommitted page waited this long, in milliseconds.
    pub commit_ms: u64,
    /// Memory of the index writer, in megabytes (shared by its threads, 15 each at least).
    pub writer_heap_mb: usize,
    /// Indexing threads of the index writer (1–8). One keeps up with a crawl on a machine
    /// whose other cores fetch and extract, and leaves half the segments to merge that two
    /// would; more pay only when archiving stored pages on an otherwise idle machine.
    pub writer_threads: usize,
    /// Chunks smaller than this (in words) are merged with their neighbours when possible.
    pub chunk_min_words: usize,
    /// Preferred chunk size, in words.
    pub chunk_target_words: usize,
    /// Largest chunk, in words (a single code block, table or list item may exceed it).
    pub chunk_max_words: usize,
    /// Most chunks of one page in a search's hits (0: no limit).
    pub per_page: usize,
    /// Index each HTML page's visible text outside its extracted content (navigation,
    /// sidebars, what extraction left out) as a page document beside its passages, weighted
    /// half as much, so that searches find the page by words extraction dropped.
    pub page_text: bool,
}

impl Default for Config {
    fn default() -> Self {
        let chunks = ChunkOptions::default();
        Config {
            warc: true,
            warc_max_file_mb: 1_000,
            commit_pages: 1_000,
            commit_ms: 2_000,
            writer_heap_mb: 128,
            writer_threads: 1,
            chunk_min_words: chunks.min_words,
            chunk_target_words: chunks.target_words,
            chunk_max_words: chunks.max_words,
            per_page: 2,
            page_text: true,
        }
    }
}

/// An `[archive]` setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The chunk sizes are out of order or out of bounds.
    #[error(
        "archive chunk sizes must satisfy 1 <= chunk_min_words ({min}) <= chunk_target_words ({target}) <= chunk_max_words ({max}) <= 100000"
    )]
    ChunkSizes {
        /// `chunk_min_words`.
        min: usize,
        /// `chunk_target_words`.
        target: usize,
        /// `chunk_max_words`.
        max: usize,
    },
    /// `writer_heap_mb` is out of its bounds.
    #[error("archive.writer_heap_mb = {0} is outside 15..=4096")]
    WriterHeap(usize),
    /// `writer_threads` is out of its bounds, or the heap is too small for them.
    #[error(
        "archive.writer_threads = {threads} must be 1..=8, with archive.writer_heap_mb ({heap_mb}) at least 15 per thread"
    )]
    WriterThreads {
        /// `writer_threads`.
        threads: usize,
        /// `writer_heap_mb`.
        heap_mb: usize,
    },
    /// A commit or file size limit is zero.
    #[error("archive.commit_pages, commit_ms and warc_max_file_mb must be at least 1")]
    Limits,
}

impl Config {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.chunk_min_words <= self.chunk_target_words
            && self.chunk_target_words <= self.chunk_max_words
            && self.chunk_min_words >= 1
            && self.chunk_max_words <= 100_000)
        {
            return Err(ConfigError::ChunkSizes {
                min: self.chunk_min_words,
                target: self.chunk_target_words,
                max: self.chunk_max_words,
            });
        }
        if !(15..=4_096).contains(&self.writer_heap_mb) {
            return Err(ConfigError::WriterHeap(self.writer_heap_mb));
        }
        if !(1..=8).contains(&self.writer_threads) || self.writer_heap_mb < 15 * self.writer_threads
        {
            return Err(ConfigError::WriterThreads {
                threads: self.writer_threads,
                heap_mb: self.writer_heap_mb,
            });
        }
        if self.commit_pages == 0 || self.commit_ms == 0 || self.warc_max_file_mb == 0 {
            return Err(ConfigError::Limits);
        }
        Ok(())
    }

    fn chunk_options(&self) -> ChunkOptions {
        ChunkOptions {
            min_words: self.chunk_min_words,
            target_words: self.chunk_target_words,
            max_words: self.chunk_max_words,
        }
    }
}

/// Where the index of a data directory lives: `index-v2` since chunks carry their tenant (the
/// store's migration 0012 sent every archived page back to the archive pool, which fills it;
/// an `index` directory left by an earlier version may be deleted).
pub fn index_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("index-v2")
}

/// Where the rolling WARC files of a data directory go.
pub fn warc_dir(data_dir: &Path) -> PathBuf {
    data_dir.join("warc")
}

/// Parses a date (`2026-01-31`, midnight UTC) or an RFC 3339 instant.
pub fn parse_instant(text: &str) -> Result<jiff::Timestamp, String> {
    let text = text.trim();
    if let Ok(timestamp) = text.parse::<jiff::Timestamp>() {
        return Ok(timestamp);
    }
    text.parse::<jiff::civil::Date>()
        .ok()
        .and_then(|date| date.to_zoned(jiff::tz::TimeZone::UTC).ok())
        .map(|zoned| zoned.timestamp())
        .ok_or_else(|| {
            format!(
                "{text:?} is not a date (2026-01-31) or an RFC 3339 instant (2026-01-31T12:00:00Z)"
            )
        })
}

/// Why archiving failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// The index failed (or another process holds its writer: [`index::Error::Busy`]).
    #[error(transparent)]
    Index(#[from] index::Error),
    /// Writing WARC records failed.
    #[error("writing WARC records: {0}")]
    Warc(#[from] std::io::Error),
    /// The blocking part of the pool panicked or was cancelled.
    #[error("archive task failed: {0}")]
    Task(String),
}

/// What the pool did, counted since it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Pages indexed.
    pub pages: u64,
    /// Chunks (passages of the extracted content) indexed.
    pub chunks: u64,
    /// Page documents indexed: pieces of each page's visible text outside its content.
    pub page_docs: u64,
    /// Pages not indexed again: same content as the URL's latest version, or already there.
    pub unchanged: u64,
    /// Pages that could not be archived (logged; marked `failed` in the store).
    pub failed: u64,
    /// WARC response records written.
    pub warc_responses: u64,
    /// WARC revisit records written (an unchanged re-fetch of a URL).
    pub warc_revisits: u64,
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} pages, {} chunks, {} page documents ({} unchanged, {} failed); WARC: {} responses, {} revisits",
            self.pages,
            self.chunks,
            self.page_docs,
            self.unchanged,
            self.failed,
            self.warc_responses,
            self.warc_revisits
        )
    }
}

/// When [`Archiver::run`] stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Archive every pending page, commit, then stop (`trawl run --archive`, `trawl archive`).
    Drain,
    /// Commit what was indexed and stop; pending pages wait for the next start (`serve`).
    Now,
}

/// The parts the blocking work owns while it runs.
struct Work {
    writer: ArchiveWriter,
    warc: Option<RollingWriter>,
}

/// The archive pool of one index.
pub struct Archiver {
    store: Store,
    index: ArchiveIndex,
    work: Option<Work>,
    config: Config,
    request_headers: Vec<(String, String)>,
    /// Pages taken since the last commit: marked archived (or failed) at the next commit.
    uncommitted: Vec<String>,
    failed: Vec<String>,
    oldest_uncommitted: Option<Instant>,
    /// The backlog cursor (store rowid): pages taken but not yet committed are not taken
    /// again. Reset at each commit.
    cursor: i64,
    stats: Stats,
}

impl std::fmt::Debug for Archiver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Archiver")
            .field("index", &self.index)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Drop for Archiver {
    /// Lets go of what the store holds for this pool, so that no page waits for it.
    fn drop(&mut self) {
        self.store.release_archive_hold();
    }
}

/// Pages read from the store per step.
const STEP_PAGES: u32 = 64;

/// The first pause of an idle pool before it looks for pages again.
const IDLE_PAUSE_MIN: Duration = Duration::from_millis(200);
/// The longest pause of an idle pool.
const IDLE_PAUSE_MAX: Duration = Duration::from_secs(1);

impl Archiver {
    /// Opens the index of `data_dir` (creating it) and takes its writer; fails with
    /// [`index::Error::Busy`] when another process archives into it. `request_headers` are
    /// the headers trawl's client sends (the WARC request records show them).
    pub fn open(
        store: Store,
        data_dir: &Path,
        config: Config,
        request_headers: Vec<(String, String)>,
    ) -> Result<Archiver, Error> {
        let index = ArchiveIndex::open_or_create(&index_dir(data_dir))?;
        let writer =
            index.writer_with_threads(config.writer_threads, config.writer_heap_mb << 20)?;
        let warc = if config.warc {
            let dir = warc_dir(data_dir);
            std::fs::create_dir_all(&dir)?;
            Some(
                RollingWriter::new(dir, "trawl", &software())?
                    .with_max_bytes(config.warc_max_file_mb.saturating_mul(1_000_000)),
            )
        } else {
            None
        };
        // Only a pool that opened has pages held for it (another process may hold the writer).
        let page_text = config.page_text && index.indexes_page_text();
        store.hold_for_archive(
            if config.warc {
                store::RawBodies::All
            } else if page_text {
                store::RawBodies::Html
            } else {
                store::RawBodies::None
            },
            page_text,
        );
        Ok(Archiver {
            store,
            index,
            work: Some(Work { writer, warc }),
            config,
            request_headers,
            uncommitted: Vec::new(),
            failed: Vec::new(),
            oldest_uncommitted: None,
            cursor: 0,
            stats: Stats::default(),
        })
    }

    /// The index, for searching it.
    pub fn index(&self) -> &ArchiveIndex {
        &self.index
    }

    /// What the pool did so far.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Archives the next pending pages (up to 64) and commits when a commit is due. Returns
    /// how many pages it took (0: nothing was pending).
    pub async fn step(&mut self) -> Result<usize, Error> {
        let backlog = self.store.archive_backlog(self.cursor, STEP_PAGES).await?;
        let taken = backlog.len();
        if let Some((_, rowid)) = backlog.last() {
            self.cursor = *rowid;
        }
        // The earlier captures the pages' revisit records refer to, for the step's pages at
        // once (one statement, not one a page).
        let warc_due: Vec<&ArchivePage> = backlog
            .iter()
            .map(|(page, _)| page)
            .filter(|page| self.warc_due(page))
            .collect();
        let mut originals = self.store.warc_originals(&warc_due).await?.into_iter();
        let mut inputs = Vec::with_capacity(taken);
        for (page, _) in backlog {
            let original = if self.warc_due(&page) {
                originals.next().flatten()
            } else {
                None
            };
            inputs.push(self.gather(page, original).await?);
        }
        if !inputs.is_empty() {
            let mut work = self.take_work()?;
            let options = self.config.chunk_options();
            let request_headers = self.request_headers.clone();
            let (work, outcomes) = tokio::task::spawn_blocking(move || {
                let outcomes: Vec<PageOutcome> = inputs
                    .iter()
                    .map(|input| archive_one(&mut work, input, &options, &request_headers))
                    .collect();
                let synced = match &mut work.warc {
                    Some(warc) => warc.sync(),
                    None => Ok(()),
                };
                (work, (outcomes, synced))
            })
            .await
            .map_err(|error| Error::Task(error.to_string()))?;
            self.work = Some(work);
            let (outcomes, synced) = outcomes;
            synced?;
            let mut warc_refs = Vec::new();
            for outcome in outcomes {
                self.oldest_uncommitted.get_or_insert_with(Instant::now);
                match outcome.result {
                    Ok(added) => {
                        match added {
                            Added::Indexed {
                                chunks, page_docs, ..
                            } => {
                                self.stats.pages += 1;
                                self.stats.chunks += chunks as u64;
                                self.stats.page_docs += page_docs as u64;
                            }
                            Added::Unchanged => self.stats.unchanged += 1,
                        }
                        self.uncommitted.push(outcome.page_id.clone());
                    }
                    Err(error) => {
                        tracing::warn!(page_id = %outcome.page_id, error = %error, "page not archived");
                        self.stats.failed += 1;
                        self.failed.push(outcome.page_id.clone());
                    }
                }
                if let Some(written) = outcome.warc {
                    if written.revisit {
                        self.stats.warc_revisits += 1;
                    } else {
                        self.stats.warc_responses += 1;
                    }
                    warc_refs.push(WarcRef {
                        page_id: outcome.page_id,
                        record_id: written.response_record_id,
                        file: written
                            .file
                            .file_name()
                            .map(|name| name.to_string_lossy().into_owned())
                            .unwrap_or_default(),
                        offset: written.offset,
                    });
                }
            }
            if !warc_refs.is_empty() {
                self.store.record_warc(&warc_refs).await?;
            }
        }
        let due = self.uncommitted.len() + self.failed.len() >= self.config.commit_pages
            || self.oldest_uncommitted.is_some_and(|oldest| {
                oldest.elapsed() >= Duration::from_millis(self.config.commit_ms)
            });
        if due {
            self.commit().await?;
        }
        Ok(taken)
    }

    /// Commits the index and marks the pages it now holds archived.
    pub async fn commit(&mut self) -> Result<(), Error> {
        let mut work = self.take_work()?;
        let (work, committed) = tokio::task::spawn_blocking(move || {
            let committed = work.writer.commit();
            (work, committed)
        })
        .await
        .map_err(|error| Error::Task(error.to_string()))?;
        self.work = Some(work);
        committed?;
        let archived = std::mem::take(&mut self.uncommitted);
        self.store.mark_archived(&archived, "archived").await?;
        let failed = std::mem::take(&mut self.failed);
        self.store.mark_archived(&failed, "failed").await?;
        self.oldest_uncommitted = None;
        self.cursor = 0;
        Ok(())
    }

    /// Runs the pool until `stop` says so: with [`Stop::Drain`], until `shutdown` is
    /// triggered and nothing is pending; with [`Stop::Now`], until `shutdown` is triggered.
    /// Always ends with a commit, and closes the current WARC file.
    pub async fn run(mut self, stop: Stop, shutdown: Shutdown) -> Result<Stats, Error> {
        let mut stopping = shutdown.is_triggered();
        // An idle pool looks less and less often, up to once a second (an idle server stays
        // idle); pages found bring the pause back down.
        let mut pause = IDLE_PAUSE_MIN;
        loop {
            if stopping && stop == Stop::Now {
                break;
            }
            let taken = self.step().await?;
            if taken > 0 {
                pause = IDLE_PAUSE_MIN;
                continue;
            }
            // Nothing pending: what was held before the last such look is of pages this pool
            // will not take.
            self.store.drop_unclaimed_for_archive();
            if stopping {
                // Drain: nothing was pending after the producers stopped.
                break;
            }
            tokio::select! {
                _ = tokio::time::sleep(pause) => pause = (pause * 2).min(IDLE_PAUSE_MAX),
                _ = shutdown.wait() => stopping = true,
            }
        }
        self.finish().await
    }

    /// Commits, closes the current WARC file and returns the counts.
    pub async fn finish(mut self) -> Result<Stats, Error> {
        self.commit().await?;
        if let Some(work) = self.work.take()
            && let Some(warc) = work.warc
        {
            tokio::task::spawn_blocking(move || warc.finish())
                .await
                .map_err(|error| Error::Task(error.to_string()))??;
        }
        Ok(self.stats)
    }

    fn take_work(&mut self) -> Result<Work, Error> {
        self.work
            .take()
            .ok_or_else(|| Error::Task("an earlier archive step failed midway".to_owned()))
    }

    /// Whether a page's WARC records are still to be written.
    fn warc_due(&self, page: &ArchivePage) -> bool {
        self.config.warc && page.warc_record_id.is_none()
    }

    /// Reads what archiving a page needs from the store: its text; for its page documents,
    /// its visible lines as its fetch read them when they are still held, else its raw body;
    /// for its WARC records, its raw body. `original` is the earlier record of the same body,
    /// if any (see [`Store::warc_originals`]).
    async fn gather(
        &self,
        page: ArchivePage,
        original: Option<(String, i64)>,
    ) -> Result<Input, Error> {
        let text = self.store.text_to_archive(&page.content_hash).await?;
        let warc_due = self.warc_due(&page);
        // An index made before page documents has nowhere to put them: no raw body read for
        // them.
        let page_text =
            self.config.page_text && self.index.indexes_page_text() && page.info.is_html();
        let lines = if page_text {
            self.store.lines_to_archive(&page.raw_hash)
        } else {
            None
        };
        let raw = if warc_due || (page_text && lines.is_none()) {
            Some(
                self.store
                    .raw_to_archive(&page.raw_hash)
                    .await?
                    .unwrap_or_default(),
            )
        } else {
            None
        };
        Ok(Input {
            page,
            text,
            raw,
            lines,
            warc_due,
            page_text,
            original,
        })
    }
}

/// A page with what archiving it needs.
struct Input {
    page: ArchivePage,
    text: String,
    /// The raw body, when its WARC records are still to be written or its page text indexed
    /// without its lines.
    raw: Option<Vec<u8>>,
    /// Its visible lines as its fetch read them, when they were held.
    lines: Option<String>,
    /// Its WARC records are still to be written.
    warc_due: bool,
    /// Its visible text outside the extracted content is to be indexed.
    page_text: bool,
    /// The WARC record and fetch time (ms) of an earlier capture with the same body.
    original: Option<(String, i64)>,
}

struct PageOutcome {
    page_id: String,
    result: Result<Added, Error>,
    warc: Option<warc::Written>,
}

/// Chunks and indexes one page and writes its WARC records (blocking).
fn archive_one(
    work: &mut Work,
    input: &Input,
    options: &ChunkOptions,
    request_headers: &[(String, String)],
) -> PageOutcome {
    let page = &input.page;
    let fetched_at = jiff::Timestamp::from_millisecond(page.fetched_at_ms)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let mut warc_written = None;
    if let (Some(warc), Some(raw), true) = (&mut work.warc, &input.raw, input.warc_due) {
        match write_warc(warc, page, raw, input.original.as_ref(), request_headers) {
            Ok(written) => warc_written = Some(written),
            Err(error) => {
                return PageOutcome {
                    page_id: page.id.clone(),
                    result: Err(Error::Warc(error)),
                    warc: None,
                };
            }
        }
    }
    let content = strip_link_destinations(&input.text);
    let chunks = chunk_markdown(&content, options);
    let rest = match (&input.lines, &input.raw) {
        _ if !input.page_text => String::new(),
        (Some(lines), _) => rest_of_lines(lines, &content),
        (None, Some(raw)) => {
            let html = charset::decode(raw, Some(&page.info.content_type), true).text;
            rest_of_page(&html, &content)
        }
        (None, None) => String::new(),
    };
    let host = url::Url::parse(&page.url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
        .unwrap_or_default();
    let doc = PageDoc {
        page_id: &page.id,
        url: &page.url,
        host: &host,
        title: page.info.title.as_deref(),
        fetched_at,
        lang: page.info.meta.lang.as_deref(),
        content_hash: &page.content_hash,
        chunks: &chunks,
        tenant: &page.tenant,
        rest: Some(&rest),
    };
    PageOutcome {
        page_id: page.id.clone(),
        result: work.writer.add_page(&doc).map_err(Error::from),
        warc: warc_written,
    }
}

/// Writes the request, response (or revisit) and metadata records of a stored page.
pub fn write_warc(
    sink: &mut impl WarcSink,
    page: &ArchivePage,
    raw: &[u8],
    original: Option<&(String, i64)>,
    request_headers: &[(String, String)],
) -> std::io::Result<warc::Written> {
    let date = jiff::Timestamp::from_millisecond(page.fetched_at_ms)
        .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let ip = page.ip.as_deref().and_then(|ip| ip.parse().ok());
    let metadata = vec![
        ("trawl-page-id".to_owned(), page.id.clone()),
        ("requestedURI".to_owned(), page.info.url.clone()),
        ("fetchTimeMs".to_owned(), page.info.took_ms.to_string()),
    ];
    // Pages stored before headers were kept still say what they are.
    let fallback_headers;
    let response_headers = if page.headers.is_empty() {
        fallback_headers = vec![("Content-Type".to_owned(), page.info.content_type.clone())];
        &fallback_headers
    } else {
        &page.headers
    };
    let exchange = Exchange {
        url: &page.info.final_url,
        ip,
        date,
        method: "GET",
        request_headers,
        status: page.info.status,
        reason: None,
        response_headers,
        body: raw,
        // A page cut at the limit was reduced first.
        truncated: page.info.reduced.then_some("length"),
        metadata: &metadata,
    };
    let revisit_date = original.and_then(|(_, ms)| jiff::Timestamp::from_millisecond(*ms).ok());
    let revisit = match (original, revisit_date) {
        (Some((record_id, _)), Some(refers_to_date)) => Some(Revisit {
            refers_to_uri: &page.info.final_url,
            refers_to_date,
            refers_to_record_id: Some(record_id.as_str()),
        }),
        _ => None,
    };
    sink.write_exchange(&exchange, revisit.as_ref())
}

/// Where WARC exchanges go: rolling files or one export file.
pub trait WarcSink {
    /// Writes one exchange's records.
    fn write_exchange(
        &mut self,
        exchange: &Exchange<'_>,
        revisit: Option<&Revisit<'_>>,
    ) -> std::io::Result<warc::Written>;
}

impl WarcSink for RollingWriter {
    fn write_exchange(
        &mut self,
        exchange: &Exchange<'_>,
        revisit: Option<&Revisit<'_>>,
    ) -> std::io::Result<warc::Written> {
        RollingWriter::write_exchange(self, exchange, revisit)
    }
}

impl<W: std::io::Write> WarcSink for warc::RecordWriter<W> {
    fn write_exchange(
        &mut self,
        exchange: &Exchange<'_>,
        revisit: Option<&Revisit<'_>>,
    ) -> std::io::Result<warc::Written> {
        warc::RecordWriter::write_exchange(self, exchange, revisit)
    }
}

/// The `software` field of trawl's warcinfo records.
pub fn software() -> String {
    format!("trawl/{}", env!("CARGO_PKG_VERSION"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_threads_need_their_heap() {
        assert_eq!(Config::default().validate(), Ok(()));
        for (threads, heap_mb, ok) in [
            (1, 15, true),
            (2, 30, true),
            (8, 128, true),
            (0, 128, false),
            (9, 4_096, false),
            (3, 44, false),
        ] {
            let config = Config {
                writer_threads: threads,
                writer_heap_mb: heap_mb,
                ..Config::default()
            };
            assert_eq!(
                config.validate().is_ok(),
                ok,
                "{threads} threads, {heap_mb} MB"
            );
        }
    }
}
