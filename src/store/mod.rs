//! The store: jobs (what was asked and how it ended), pages (each fetch of a URL, a version)
//! and blobs (raw bodies and texts, zstd-compressed, content-addressed by sha256, stored once).
//! Writes are keyed by job id, so a job delivered twice stores one result.
//!
//! [`Store`] is the interface; two engines sit behind it with the same behaviour: SQLite
//! (`sqlite`, one file, the embedded default) and PostgreSQL (`postgres`, shared by many
//! worker processes). Their queries are written once, by capability: `jobs`, `pages`,
//! `crawls` and `sessions`, each implemented on both engines; `dialect` names what differs,
//! and each engine's file has its answers and its few statements of its own. Also shared:
//! `records` (the values the store takes and returns), `rows` (row decoding), `blob` (blob
//! packing, the text cache), `writer` (group commit, attempt batching), `idempotency` (the
//! API's idempotency keys and the answers they replay) and `compat` (what the
//! Firecrawl-compatible API keeps beside trawl's records).
//!
//! Not here: delivering jobs to workers (`queue`), or deciding what to retry (`runner`).

mod blob;
mod compat;
mod crawls;
mod dialect;
mod idempotency;
mod jobs;
mod overview;
mod pages;
mod postgres;
mod records;
mod results;
mod rows;
mod sessions;
mod sqlite;
mod writer;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use trawl_workers::job::{ErrorCode, JobError};

pub use blob::RawBodies;
use blob::{ForArchive, Texts};
pub use crawls::{CrawlCounters, CrawlRecord, CrawlStatus, Fate, Followed, Found};
pub use idempotency::IdempotencyClaim;
pub use overview::PageFiles;
use postgres::PgStore;
pub use records::{
    ArchivePage, Attempt, BatchSummary, Cancel, EndedJob, JobEntry, JobFilter, JobRecord, NewBatch,
    NewJob, NewPage, NewSessionStep, Outcome, PageEntry, PageFilter, PageRecord, SessionHost,
    SessionRecord, SessionStepRecord, Status, WarcRef,
};
pub use results::stored_fetch_result;
use sqlite::SqliteStore;
pub(crate) use sqlite::lock_sqlite_migrations;
use writer::Writer;

use crate::tenant::{Scope, Tenant};
/// How long [`Store::connect`] waits for PostgreSQL to accept a first connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The store, cheap to clone: a connection pool of one engine, the handles of its batching
/// writers and the text cache.
#[derive(Debug, Clone)]
pub struct Store {
    engine: Engine,
    writer: Writer,
    /// Recently read page texts by content hash (and written ones, when asked).
    texts: Arc<Texts>,
    /// Texts and raw bodies of pages just stored, held for this process's archive pool.
    for_archive: Arc<ForArchive>,
}

/// The engine behind a [`Store`].
#[derive(Debug, Clone)]
enum Engine {
    Sqlite(SqliteStore),
    Postgres(PgStore),
}

impl Store {
    /// Opens (creating if needed) the SQLite store at `path` and runs the migrations.
    pub async fn open(path: &Path) -> Result<Store, Error> {
        let engine = SqliteStore::open(path).await?;
        Ok(Store::with(Engine::Sqlite(engine)))
    }

    /// Connects to the store at `url` and runs its migrations: `sqlite://PATH` (the file is
    /// created if needed) or `postgres://…` / `postgresql://…` (the database must exist),
    /// waiting up to [`DEFAULT_CONNECT_TIMEOUT`] for PostgreSQL to answer.
    pub async fn connect(url: &str) -> Result<Store, Error> {
        Store::connect_within(url, DEFAULT_CONNECT_TIMEOUT).await
    }

    /// Like [`Store::connect`], giving PostgreSQL `connect_timeout` to accept a first
    /// connection: a server that is down, refuses or does not answer fails with
    /// [`Error::Unreachable`] within that time, instead of after the pool's retries.
    pub async fn connect_within(url: &str, connect_timeout: Duration) -> Result<Store, Error> {
        let scheme = url.split_once(':').map(|(scheme, _)| scheme).unwrap_or("");
        let engine = match scheme {
            "sqlite" => Engine::Sqlite(SqliteStore::connect(url).await?),
            "postgres" | "postgresql" => {
                Engine::Postgres(PgStore::connect(url, connect_timeout).await?)
            }
            // The URL itself may hold a password: only its scheme is named.
            _ => return Err(Error::UnsupportedUrl(scheme.to_owned())),
        };
        Ok(Store::with(engine))
    }

    fn with(engine: Engine) -> Store {
        let writer = match &engine {
            Engine::Sqlite(engine) => Writer::spawn(engine.for_batches()),
            Engine::Postgres(engine) => Writer::spawn(engine.clone()),
        };
        Store {
            engine,
            writer,
            texts: Arc::new(Texts::new()),
            for_archive: Arc::new(ForArchive::new()),
        }
    }

    /// The engine's name: `sqlite` or `postgres`.
    pub fn engine_name(&self) -> &'static str {
        match self.engine {
            Engine::Sqlite(_) => "sqlite",
            Engine::Postgres(_) => "postgres",
        }
    }

    /// Records jobs as queued, all or none.
    pub async fn create_jobs(&self, jobs: &[NewJob]) -> Result<(), Error> {
        self.submit(None, jobs).await
    }

    /// Records a job that was refused before queueing (bad input): it ends at once as failed,
    /// so that every input is accounted for.
    pub async fn create_failed_job(&self, job: &NewJob, error: &JobError) -> Result<(), Error> {
        self.create_jobs(std::slice::from_ref(job)).await?;
        self.finish(&job.id, &Outcome::Failed(error.clone()))
            .await?;
        Ok(())
    }

    /// Starts an attempt: counts it and marks the job running. A job that already ended is
    /// left alone (the queue delivers at least once).
    pub async fn begin_attempt(&self, id: &str) -> Result<Attempt, Error> {
        // Attempts starting at the same time are counted together, in one statement.
        if let Some((number, max)) = self.writer.start_attempt(id).await? {
            return Ok(Attempt::Run { number, max });
        }
        // A job asked to stop between attempts ends here, as cancelled.
        if self.finish(id, &Outcome::Cancelled).await?.is_some() {
            return Ok(Attempt::Cancelled);
        }
        Ok(if self.job(id).await?.is_some() {
            Attempt::AlreadyEnded
        } else {
            Attempt::Unknown
        })
    }

    /// Returns the newest page of `url` fetched with `options_hash` at or after `since_ms`.
    pub async fn cached_page(
        &self,
        url: &str,
        options_hash: &str,
        since_ms: i64,
    ) -> Result<Option<PageRecord>, Error> {
        // Lookups asked at the same time (every fetch of a crawl asks first) are answered
        // together, by one statement.
        self.writer.cached_page(url, options_hash, since_ms).await
    }

    /// Ends a job. The first end wins: returns the status it ended with (`cancelled` when a
    /// cancel was requested meanwhile), or `None` when the job had already ended (so a
    /// duplicate delivery cannot overwrite or double a result).
    ///
    /// The job gets the next `done_seq`: unique, and increasing in the order the ends were
    /// committed (with gaps on PostgreSQL), so a reader paging by `done_seq` misses none.
    pub async fn finish(&self, id: &str, outcome: &Outcome) -> Result<Option<Status>, Error> {
        self.finish_fenced(id, outcome, None).await
    }

    /// Ends a job like [`Store::finish`], but only if `attempt` is still its latest attempt:
    /// a worker that lost its job (paused past the recovery time while another worker took
    /// the job over) cannot commit late. Returns `None` when refused.
    pub async fn finish_attempt(
        &self,
        id: &str,
        attempt: u32,
        outcome: &Outcome,
    ) -> Result<Option<Status>, Error> {
        self.finish_fenced(id, outcome, Some(attempt)).await
    }

    async fn finish_fenced(
        &self,
        id: &str,
        outcome: &Outcome,
        attempt: Option<u32>,
    ) -> Result<Option<Status>, Error> {
        match &self.engine {
            Engine::Sqlite(engine) => engine.finish(id, outcome, attempt).await,
            Engine::Postgres(engine) => engine.finish(id, outcome, attempt).await,
        }
    }

    /// Stores a fetched page (blobs once, page row keyed by the job id) and ends the job with
    /// its result, in one transaction: there is never a result without its page, or the
    /// reverse. `result_for` gives the job's result JSON for the page's content hash.
    /// Returns the content hash and the status this call ended the job with (`None` when
    /// another delivery had ended it).
    ///
    /// Pages finished at the same time are committed together (group commit): a single
    /// writer task takes every page waiting when it is free and writes them with three
    /// multi-row statements in one transaction. Per-statement round trips were the largest
    /// cost of the store in the pipeline profile.
    pub async fn finish_with_page(
        &self,
        job_id: &str,
        page: NewPage<'_>,
        result_for: impl FnOnce(&str) -> String,
    ) -> Result<(String, Option<Status>), Error> {
        self.writer
            .finish_with_page((&self.texts, &self.for_archive), job_id, page, result_for)
            .await
    }

    /// Returns a job visible in `scope` (another tenant's job is `None`, like an unknown one).
    pub async fn job_in(&self, scope: &Scope, id: &str) -> Result<Option<JobRecord>, Error> {
        Ok(self.job(id).await?.filter(|job| scope.sees(&job.tenant)))
    }

    /// Returns a crawl visible in `scope` (another tenant's crawl is `None`).
    pub async fn crawl_in(&self, scope: &Scope, id: &str) -> Result<Option<CrawlRecord>, Error> {
        Ok(self
            .crawl(id)
            .await?
            .filter(|crawl| scope.sees(&crawl.tenant)))
    }

    /// Returns a page's whole text (from memory when it was read recently, or written since
    /// [`Store::keep_written_texts`]).
    pub async fn page_text(&self, page: &PageRecord) -> Result<String, Error> {
        self.text(&page.content_hash).await
    }

    /// Returns the text stored under a content hash.
    pub async fn text(&self, content_hash: &str) -> Result<String, Error> {
        Ok(self.shared_text(content_hash).await?.to_string())
    }

    /// Keeps the texts of pages stored from now on in the read cache (bounded, the least
    /// recently used dropped first), for a reader of what was just written: `--out` writes each
    /// page's file from it instead of reading back and decompressing its blob.
    pub fn keep_written_texts(&self) {
        self.texts.keep_written();
    }

    /// Keeps the texts, the raw bodies the pool reads (`raws`) and, with `lines`, HTML pages'
    /// visible lines as their fetch read them, of pages to archive stored from now on (bounded
    /// in memory), for [`Store::text_to_archive`], [`Store::raw_to_archive`] and
    /// [`Store::lines_to_archive`]: the archive pool of this process calls it as it opens. A
    /// process without a pool keeps none.
    pub fn hold_for_archive(&self, raws: RawBodies, lines: bool) {
        self.for_archive.hold(raws, lines);
    }

    /// The archive pool of this process found nothing to archive: what was held for it before
    /// its previous such look is of pages it will not take, and would crowd out the next ones
    /// (see [`Store::room_to_archive`]); it is dropped, and what comes next is still held.
    pub fn drop_unclaimed_for_archive(&self) {
        self.for_archive.drop_unclaimed();
    }

    /// The archive pool of this process is gone: nothing is held for it from now on, and no
    /// page waits for it ([`Store::room_to_archive`]).
    pub fn release_archive_hold(&self) {
        self.for_archive.release();
    }

    /// Waits while what is held for this process's archive pool fills most of its bound (the
    /// pool lags far behind), at most a few seconds; returns at once without a pool here. A
    /// page to archive waits here before it is fetched, so the pool archives it from memory
    /// instead of reading back a page pushed out of what is held.
    pub async fn room_to_archive(&self) {
        self.for_archive.room().await;
    }

    /// A text to archive: the text just stored by this process when it is still held (each is
    /// handed out once), else as [`Store::text`] reads it, without keeping it in memory (a
    /// backlog is read once).
    pub async fn text_to_archive(&self, content_hash: &str) -> Result<String, Error> {
        if let Some(text) = self.for_archive.take_text(content_hash) {
            return Ok(text);
        }
        if let Some(text) = self.texts.get(content_hash) {
            return Ok(text.to_string());
        }
        Texts::decode(content_hash, self.blob(content_hash).await?)
    }

    /// How many texts, and raw bodies or visible lines, are held for this process's archive
    /// pool, not yet taken (diagnostics, and the tests' view of what is in memory).
    pub fn held_for_archive(&self) -> (usize, usize) {
        self.for_archive.counts()
    }

    /// A raw body to archive: the bytes just stored by this process when they are still held
    /// (each is handed out once), else the blob read back (`None`: it is missing).
    pub async fn raw_to_archive(&self, raw_hash: &str) -> Result<Option<Vec<u8>>, Error> {
        match self.for_archive.take_raw(raw_hash) {
            Some(raw) => Ok(Some(raw)),
            None => self.blob(raw_hash).await,
        }
    }

    /// The visible lines (`web::lines`) of the page whose raw body is `raw_hash`, as its fetch
    /// read them, when this process still holds them (each is handed out once); `None` tells
    /// the pool to read them from the raw body.
    pub fn lines_to_archive(&self, raw_hash: &str) -> Option<String> {
        self.for_archive.take_lines(raw_hash)
    }

    /// Like [`Store::text`], without a copy when the text is in memory.
    pub async fn shared_text(&self, content_hash: &str) -> Result<Arc<str>, Error> {
        if let Some(text) = self.texts.get(content_hash) {
            return Ok(text);
        }
        let bytes = self.blob(content_hash).await?;
        self.texts.load(content_hash, bytes)
    }
}

/// Methods that each engine implements, delegated to the engine in use.
macro_rules! delegate {
    ($(
        $(#[$meta:meta])*
        pub async fn $name:ident(&self $(, $arg:ident: $ty:ty)*) -> $ret:ty;
    )*) => {
        impl Store {
            $(
                $(#[$meta])*
                pub async fn $name(&self $(, $arg: $ty)*) -> $ret {
                    match &self.engine {
                        Engine::Sqlite(engine) => engine.$name($($arg),*).await,
                        Engine::Postgres(engine) => engine.$name($($arg),*).await,
                    }
                }
            )*
        }
    };
}

delegate! {
    /// Checks that the store answers.
    pub async fn ping(&self) -> Result<(), Error>;

    /// Claims idempotency key `key` of `owner` for a request (its hash `request`), after
    /// deleting the keys created before `expired_before_ms`: new → claimed; the same request →
    /// its recorded answer, or in progress; another request → conflict.
    pub async fn claim_idempotency_key(&self, owner: &str, key: &str, request: &str, now_ms: i64, expired_before_ms: i64) -> Result<IdempotencyClaim, Error>;

    /// Records the answer of the request that claimed a key.
    pub async fn complete_idempotency_key(&self, owner: &str, key: &str, status: u16, body: &str) -> Result<(), Error>;

    /// Gives up a claimed key whose request got no answer worth keeping (a server fault), so
    /// the request can be sent again.
    pub async fn release_idempotency_key(&self, owner: &str, key: &str) -> Result<(), Error>;

    /// Records the Firecrawl-compatible document options (JSON) of a crawl or a batch, by its
    /// id (replacing any recorded before).
    pub async fn put_compat_options(&self, id: &str, options: &str, now_ms: i64) -> Result<(), Error>;

    /// The Firecrawl-compatible document options recorded for a crawl or a batch.
    pub async fn compat_options(&self, id: &str) -> Result<Option<String>, Error>;

    /// The sha256 of a stored page's raw body (its blob's key).
    pub async fn page_raw_hash(&self, page_id: &str) -> Result<Option<String>, Error>;

    /// Records a new agent session of `owner` (a tenant), living on `host` (a
    /// session host's url; `None`: the process that opened it).
    pub async fn create_session(&self, id: &str, owner: &str, profile: &str, host: Option<&str>) -> Result<(), Error>;

    /// Marks every open session on `host` closed (its worker restarted or is gone); returns
    /// how many.
    pub async fn close_host_sessions(&self, host: &str, reason: &str) -> Result<u64, Error>;

    /// Registers a session host or renews its registration.
    pub async fn renew_session_host(&self, host: &SessionHost) -> Result<(), Error>;

    /// Removes a session host's registration.
    pub async fn remove_session_host(&self, url: &str) -> Result<(), Error>;

    /// The session hosts renewed at or after `seen_since_ms`, most free places first.
    pub async fn session_hosts(&self, seen_since_ms: i64) -> Result<Vec<SessionHost>, Error>;

    /// Marks a session closed, with why (`closed`, `expired`, `browser_failed`, `shutdown`).
    pub async fn close_session(&self, id: &str, reason: &str) -> Result<(), Error>;

    /// A session's record.
    pub async fn session(&self, id: &str) -> Result<Option<SessionRecord>, Error>;

    /// Appends a step to a session's replay log (its screenshot into the blobs).
    pub async fn add_session_step(&self, step: &NewSessionStep<'_>) -> Result<(), Error>;

    /// A session's replay log, in order.
    pub async fn session_steps(&self, id: &str) -> Result<Vec<SessionStepRecord>, Error>;

    /// Records a batch and its jobs as queued, all or none.
    pub async fn submit(&self, batch: Option<&NewBatch>, jobs: &[NewJob]) -> Result<(), Error>;

    /// Records jobs a job made (a search job's fetches) as queued, in `batch_id` when given
    /// (whose total then counts them); jobs already recorded are left as they are, so a job
    /// delivered again makes its follow-ups once.
    pub async fn add_follow_up_jobs(&self, batch_id: Option<&str>, jobs: &[NewJob]) -> Result<(), Error>;

    /// Cancels a queued job at once, or asks a running one to stop at its next safe point.
    pub async fn request_cancel(&self, id: &str) -> Result<Cancel, Error>;

    /// Claims the announcement of a batch's completion: returns its summary exactly once,
    /// to the first caller after its last job ended; `None` otherwise.
    pub async fn claim_batch_completion(&self, batch_id: &str) -> Result<Option<BatchSummary>, Error>;

    /// Records a failed attempt that will be retried.
    pub async fn record_retry(&self, id: &str, error: &JobError) -> Result<(), Error>;

    /// Hands a running job back to the queue (its worker stopped before the attempt could
    /// run, or between attempts): the job is queued again, and with `give_back` the attempt
    /// `attempt` is not counted. Nothing changes unless `attempt` is the job's latest.
    pub async fn release_attempt(&self, id: &str, attempt: u32, give_back: bool) -> Result<(), Error>;


    /// Returns the newest page of `url` (requested or final) visible in `scope`, whatever
    /// its options.
    pub async fn latest_page(&self, scope: &Scope, url: &str) -> Result<Option<PageRecord>, Error>;

    /// Gives `tenant` its own copy of a stored page (another tenant's plain public fetch
    /// served from the cache) under `new_id`, on the same blobs; returns the copy (the one
    /// made earlier, when `new_id` exists already). `None` when `page_id` is unknown.
    pub async fn adopt_page(&self, page_id: &str, new_id: &str, tenant: &Tenant) -> Result<Option<PageRecord>, Error>;

    /// Asks the archive pool to take the newest page of each URL (requested or final URL,
    /// normalised). Returns the URLs with no stored page; nothing is changed when any is
    /// missing.
    pub async fn request_archive(&self, urls: &[String]) -> Result<Vec<String>, Error>;

    /// Asks the archive pool to take one page (a cached page served to a job with
    /// `archive: true`), unless it is archived already.
    pub async fn request_archive_page(&self, page_id: &str) -> Result<(), Error>;

    /// Returns up to `limit` pages waiting for the archive pool, oldest first, after the
    /// page at `after_rowid` (a cursor: the second value of the last page returned).
    pub async fn archive_backlog(&self, after_rowid: i64, limit: u32) -> Result<Vec<(ArchivePage, i64)>, Error>;

    /// Counts the pages waiting for the archive pool.
    pub async fn archive_pending(&self) -> Result<u64, Error>;

    /// Records where the WARC records of pages went (before they are marked archived, so a
    /// crash in between does not write them twice).
    pub async fn record_warc(&self, written: &[WarcRef]) -> Result<(), Error>;

    /// Ends the archiving of pages: `archived` after the index committed them, or `failed`.
    pub async fn mark_archived(&self, page_ids: &[String], state: &str) -> Result<(), Error>;

    /// For each page, the newest page of its URL with the same raw body, fetched no later,
    /// whose WARC record was written: the record a revisit refers to (its id and the page's
    /// fetch time in milliseconds), in the order of `pages`.
    pub async fn warc_originals(&self, pages: &[&ArchivePage]) -> Result<Vec<Option<(String, i64)>>, Error>;

    /// Returns up to `limit` stored pages for a WARC export, in fetch order, after the page
    /// at `after_rowid`: those whose URL starts with `url_prefix` and, when given, that the
    /// jobs of `batch_id` or of `crawl_id` fetched.
    pub async fn export_pages(&self, url_prefix: Option<&str>, batch_id: Option<&str>, crawl_id: Option<&str>, after_rowid: i64, limit: u32) -> Result<Vec<(ArchivePage, i64)>, Error>;

    /// Records a new crawl of `tenant` as running.
    pub async fn create_crawl(&self, id: &str, tenant: &Tenant, spec: &serde_json::Value) -> Result<(), Error>;

    /// Returns a crawl's record.
    pub async fn crawl(&self, id: &str) -> Result<Option<CrawlRecord>, Error>;

    /// Returns true when a URL key is in a crawl's seen set.
    pub async fn crawl_url_seen(&self, crawl_id: &str, key: &str) -> Result<bool, Error>;

    /// Records what a crawl page found, in one transaction: every key of `found` joins the
    /// crawl's seen set; of those new to it, the ones to queue get their jobs created as far
    /// as the page budget (`max_pages` minus the jobs the crawl has queued) allows; the
    /// crawl's counters get `counted` plus what happened to the new keys. Seen keys and the
    /// jobs of the new ones are written together, so a worker that dies after this call
    /// leaves jobs to queue (see [`Store::queued_jobs`]), never keys seen without their job.
    pub async fn follow_crawl(&self, crawl_id: &str, max_pages: u64, found: &[Found<'_>], counted: &CrawlCounters) -> Result<Followed, Error>;

    /// Returns which of these jobs are still queued (a crawl page delivered again queues its
    /// follow-ups again: pushing a job twice is harmless, the queue keys tasks by job id).
    pub async fn queued_jobs(&self, ids: &[String]) -> Result<Vec<String>, Error>;

    /// Ends a crawl as completed when none of its jobs is queued or running. Returns true when
    /// this call ended it.
    pub async fn complete_crawl_if_done(&self, crawl_id: &str) -> Result<bool, Error>;

    /// Ends every running crawl whose jobs have all ended (a crawl with no job yet is being
    /// seeded, and is left alone). The pools call it periodically: a page's end does not check
    /// its crawl. Returns the ids of the crawls this call ended.
    pub async fn complete_idle_crawls(&self) -> Result<Vec<String>, Error>;

    /// Cancels a running crawl: no new pages are queued; its queued jobs are cancelled and
    /// running ones stop at their next safe point. Returns false when it was not running.
    pub async fn cancel_crawl(&self, crawl_id: &str) -> Result<bool, Error>;

    /// Returns the page with this id.
    pub async fn page(&self, id: &str) -> Result<Option<PageRecord>, Error>;

    /// Returns a blob's bytes, decompressed.
    pub async fn blob(&self, sha256: &str) -> Result<Option<Vec<u8>>, Error>;

    /// Returns the jobs `filter` takes after the job `after` (a cursor: the last `job_id`
    /// returned), in id order, at most `limit`.
    pub async fn list_jobs(&self, filter: &JobFilter, after: Option<&str>, limit: u32) -> Result<Vec<JobEntry>, Error>;

    /// Returns the stored pages `filter` takes after the page `after` (a cursor: the last
    /// `page_id` returned), in id order, at most `limit`.
    pub async fn list_pages(&self, filter: &PageFilter, after: Option<&str>, limit: u32) -> Result<Vec<PageEntry>, Error>;

    /// Asks the archive pool to take every stored page not archived yet, or those of one
    /// crawl (fetched by its jobs or served to them from the cache). Returns how many.
    pub async fn request_archive_all(&self, crawl_id: Option<&str>) -> Result<u64, Error>;

    /// Counts jobs by status, over all jobs or one batch.
    pub async fn count_by_status(&self, batch_id: Option<&str>) -> Result<Vec<(Status, u64)>, Error>;

    /// Counts the failed and dead jobs of a batch by error code.
    pub async fn count_errors(&self, batch_id: &str) -> Result<Vec<(String, u64)>, Error>;

    /// Counts the attempts of a batch's jobs beyond their first (retries, and deliveries
    /// again after a lost worker).
    pub async fn count_retries(&self, batch_id: &str) -> Result<u64, Error>;

    /// Counts jobs by status, of one tenant (`None`: every tenant's).
    pub async fn status_counts_in(&self, tenant: Option<&str>) -> Result<Vec<(Status, u64)>, Error>;

    /// Counts the failed and dead jobs by error code, of one tenant (`None`: every tenant's).
    pub async fn error_counts_in(&self, tenant: Option<&str>) -> Result<Vec<(String, u64)>, Error>;

    /// Counts the jobs of one tenant (`None`: every tenant's) that ended at or after a time.
    pub async fn ended_after_in(&self, tenant: Option<&str>, since_rfc3339: &str) -> Result<u64, Error>;

    /// The newest jobs of one tenant (`None`: every tenant's), newest first.
    pub async fn newest_jobs_in(&self, tenant: Option<&str>, limit: u32) -> Result<Vec<JobEntry>, Error>;

    /// The newest crawls of one tenant (`None`: every tenant's), newest first.
    pub async fn newest_crawls_in(&self, tenant: Option<&str>, limit: u32) -> Result<Vec<CrawlRecord>, Error>;

    /// The newest sessions of one owner (a tenant; `None`: every owner's), newest first.
    pub async fn newest_sessions_of(&self, owner: Option<&str>, limit: u32) -> Result<Vec<SessionRecord>, Error>;

    /// The stored versions (fetches) of the requested URL of page `page_id`, of one tenant
    /// (`None`: every tenant's), newest first.
    pub async fn versions_in(&self, tenant: Option<&str>, page_id: &str, limit: u32) -> Result<Vec<PageEntry>, Error>;

    /// Where a page's raw body and WARC record are.
    pub async fn page_files(&self, id: &str) -> Result<Option<PageFiles>, Error>;
}

impl Store {
    /// Closes the engine's pools, waiting for connections to finish.
    pub async fn close(&self) {
        match &self.engine {
            Engine::Sqlite(engine) => {
                engine.close().await;
                engine.close_batches().await;
            }
            Engine::Postgres(engine) => engine.close().await,
        }
    }
}

/// Store failures: all internal from a job's point of view.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database said no.
    #[error("store: {0}")]
    Database(#[from] sqlx::Error),
    /// Migrations failed.
    #[error("store migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// The lock file that serialises SQLite migrations between processes failed.
    #[error("store: cannot lock the database for its migrations: {0}")]
    Lock(std::io::Error),
    /// PostgreSQL could not be reached: down, refusing, unknown host, or no answer in time.
    #[error("store: PostgreSQL cannot be reached: {0}")]
    Unreachable(String),
    /// The store URL names no engine trawl has.
    #[error("store: unsupported database url scheme {0:?} (expected sqlite:// or postgres://)")]
    UnsupportedUrl(String),
    /// A stored value could not be read back.
    #[error("store: corrupt {what}: {detail}")]
    Corrupt {
        /// Which value.
        what: &'static str,
        /// Why.
        detail: String,
    },
}

impl Error {
    /// The public code of a store failure.
    pub fn code(&self) -> ErrorCode {
        ErrorCode::Internal
    }
}
