//! The store: jobs (what was asked and how it ended), pages (each fetch of a URL, a version)
//! and blobs (raw bodies and texts, zstd-compressed, content-addressed by sha256, stored once).
//! Writes are keyed by job id, so a job delivered twice stores one result.
//!
//! [`Store`] is the interface; two engines sit behind it with the same behaviour: SQLite
//! (`sqlite.rs`, one file, the embedded default) and PostgreSQL (`postgres.rs`, shared by
//! many worker processes). What both engines share lives in `blob` (blob packing, the text
//! cache), `rows` (row decoding) and `writer` (group commit, attempt batching).
//!
//! Not here: delivering jobs to workers (`queue`), or deciding what to retry (`runner`).

mod blob;
mod postgres;
mod rows;
mod sessions;
mod sqlite;
mod writer;

use std::path::Path;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use trawl_workers::job::{ErrorCode, JobError};
use utoipa::ToSchema;

use blob::Texts;

/// The start of the query both engines use to count crawl pages as they end, in the
/// transaction that ends them (so a crawl's counters and its jobs never disagree, and no write
/// of its own per page, and a page delivered twice counted once): per crawl, pages stored
/// (`fetched`), pages failed or dead (`failed`), pages robots.txt turned away when their turn
/// came (`skipped_robots`) and duplicates (`skipped_duplicate`). Cancelled pages count
/// nowhere. Each engine appends its condition on the ended job ids.
const CRAWL_ENDS: &str = "SELECT crawl_id,
        SUM(CASE WHEN status = 'succeeded' THEN 1 ELSE 0 END) AS n_fetched,
        SUM(CASE WHEN status IN ('failed', 'dead') AND COALESCE(error_code, '')
            NOT IN ('duplicate_content', 'robots_disallowed', 'robots_unreachable')
            THEN 1 ELSE 0 END) AS n_failed,
        SUM(CASE WHEN status IN ('failed', 'dead')
            AND error_code IN ('robots_disallowed', 'robots_unreachable')
            THEN 1 ELSE 0 END) AS n_robots,
        SUM(CASE WHEN status IN ('failed', 'dead') AND error_code = 'duplicate_content'
            THEN 1 ELSE 0 END) AS n_duplicates
    FROM jobs WHERE crawl_id IS NOT NULL AND ";

/// Ends every running crawl that has jobs and none of them queued or running (both engines).
const COMPLETE_IDLE_CRAWLS: &str = "UPDATE crawls SET status = 'completed', finished_at = {now}
    WHERE status = 'running'
      AND EXISTS (SELECT 1 FROM jobs WHERE jobs.crawl_id = crawls.id)
      AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.crawl_id = crawls.id
                      AND jobs.status IN ('queued', 'running'))";
use postgres::PgStore;
use sqlite::SqliteStore;
use writer::Writer;

/// The store, cheap to clone: a connection pool of one engine, the handles of its batching
/// writers and the text cache.
#[derive(Debug, Clone)]
pub struct Store {
    engine: Engine,
    writer: Writer,
    /// Recently read or written page texts by content hash.
    texts: Arc<Texts>,
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
    /// created if needed) or `postgres://…` / `postgresql://…` (the database must exist).
    pub async fn connect(url: &str) -> Result<Store, Error> {
        let scheme = url.split_once(':').map(|(scheme, _)| scheme).unwrap_or("");
        let engine = match scheme {
            "sqlite" => Engine::Sqlite(SqliteStore::connect(url).await?),
            "postgres" | "postgresql" => Engine::Postgres(PgStore::connect(url).await?),
            // The URL itself may hold a password: only its scheme is named.
            _ => return Err(Error::UnsupportedUrl(scheme.to_owned())),
        };
        Ok(Store::with(engine))
    }

    fn with(engine: Engine) -> Store {
        let writer = match &engine {
            Engine::Sqlite(engine) => Writer::spawn(engine.clone()),
            Engine::Postgres(engine) => Writer::spawn(engine.clone()),
        };
        Store {
            engine,
            writer,
            texts: Arc::new(Texts::new()),
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
            .finish_with_page(&self.texts, job_id, page, result_for)
            .await
    }

    /// Returns a page's whole text (from memory when it was read or written recently).
    pub async fn page_text(&self, page: &PageRecord) -> Result<String, Error> {
        self.text(&page.content_hash).await
    }

    /// Returns the text stored under a content hash.
    pub async fn text(&self, content_hash: &str) -> Result<String, Error> {
        Ok(self.shared_text(content_hash).await?.to_string())
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

    /// Records a new agent session of `owner` (a token fingerprint), living on `host` (a
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

    /// Cancels a queued job at once, or asks a running one to stop at its next safe point.
    pub async fn request_cancel(&self, id: &str) -> Result<Cancel, Error>;

    /// Claims the announcement of a batch's completion: returns its summary exactly once,
    /// to the first caller after its last job ended; `None` otherwise.
    pub async fn claim_batch_completion(&self, batch_id: &str) -> Result<Option<BatchSummary>, Error>;

    /// Records a failed attempt that will be retried.
    pub async fn record_retry(&self, id: &str, error: &JobError) -> Result<(), Error>;


    /// Returns the newest page of `url` fetched with `options_hash` at or after `since_ms`.
    pub async fn cached_page(&self, url: &str, options_hash: &str, since_ms: i64) -> Result<Option<PageRecord>, Error>;

    /// Returns the newest page of `url` (requested or final), whatever its options.
    pub async fn latest_page(&self, url: &str) -> Result<Option<PageRecord>, Error>;

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

    /// The newest earlier page of `url` with the same raw body whose WARC record was written:
    /// the record a revisit refers to (its id and the page's fetch time in milliseconds).
    pub async fn warc_original(&self, url: &str, raw_hash: &str, before_ms: i64) -> Result<Option<(String, i64)>, Error>;

    /// Returns up to `limit` stored pages for a WARC export, in fetch order, after the page
    /// at `after_rowid`: those whose URL starts with `url_prefix` and, when given, that the
    /// jobs of `batch_id` or of `crawl_id` fetched.
    pub async fn export_pages(&self, url_prefix: Option<&str>, batch_id: Option<&str>, crawl_id: Option<&str>, after_rowid: i64, limit: u32) -> Result<Vec<(ArchivePage, i64)>, Error>;

    /// Records a new crawl as running.
    pub async fn create_crawl(&self, id: &str, spec: &serde_json::Value) -> Result<(), Error>;

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
    /// its crawl. Returns how many crawls it ended.
    pub async fn complete_idle_crawls(&self) -> Result<u64, Error>;

    /// Cancels a running crawl: no new pages are queued; its queued jobs are cancelled and
    /// running ones stop at their next safe point. Returns false when it was not running.
    pub async fn cancel_crawl(&self, crawl_id: &str) -> Result<bool, Error>;

    /// Returns the page with this id.
    pub async fn page(&self, id: &str) -> Result<Option<PageRecord>, Error>;

    /// Returns a blob's bytes, decompressed.
    pub async fn blob(&self, sha256: &str) -> Result<Option<Vec<u8>>, Error>;

    /// Returns one job.
    pub async fn job(&self, id: &str) -> Result<Option<JobRecord>, Error>;

    /// Returns the jobs of a batch that ended after `after_seq`, in the order they ended.
    pub async fn ended_since(&self, batch_id: &str, after_seq: i64, limit: u32) -> Result<Vec<EndedJob>, Error>;

    /// Counts jobs by status, over all jobs or one batch.
    pub async fn count_by_status(&self, batch_id: Option<&str>) -> Result<Vec<(Status, u64)>, Error>;

    /// Counts the failed and dead jobs of a batch by error code.
    pub async fn count_errors(&self, batch_id: &str) -> Result<Vec<(String, u64)>, Error>;
}

impl Store {
    /// Closes the pool, waiting for connections to finish.
    pub async fn close(&self) {
        match &self.engine {
            Engine::Sqlite(engine) => engine.close().await,
            Engine::Postgres(engine) => engine.close().await,
        }
    }
}

/// A job to record before it is queued.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// The job id (ULID).
    pub id: String,
    /// The job kind.
    pub kind: &'static str,
    /// The batch it belongs to.
    pub batch_id: Option<String>,
    /// The URL it is about.
    pub url: String,
    /// The job's JSON form, credentials redacted.
    pub params: serde_json::Value,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Where the job's events are POSTed.
    pub webhook: Option<String>,
    /// The crawl it belongs to.
    pub crawl_id: Option<String>,
}

impl NewJob {
    /// The record of `job` under `id`: kind, URL and JSON form taken from the job.
    pub fn new(id: &str, job: &trawl_workers::job::Job, max_attempts: u32) -> NewJob {
        NewJob {
            id: id.to_owned(),
            kind: job.kind(),
            batch_id: None,
            url: job.url().to_owned(),
            params: job.redacted_json(),
            max_attempts,
            webhook: None,
            crawl_id: None,
        }
    }
}

/// A batch of jobs submitted together.
#[derive(Debug, Clone)]
pub struct NewBatch {
    /// The batch id (ULID).
    pub id: String,
    /// Where the batch's completion is announced.
    pub webhook: Option<String>,
    /// Jobs in the batch.
    pub total: u64,
}

/// What a cancel request found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    /// The job was queued and is now cancelled.
    Cancelled,
    /// The job is running; it stops at its next safe point.
    Requested,
    /// The job had already ended, with this status.
    AlreadyEnded(Status),
    /// No such job.
    Unknown,
}

/// How a batch ended, counted when its completion is claimed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchSummary {
    /// The batch id.
    pub id: String,
    /// Where to announce it.
    pub webhook: Option<String>,
    /// Jobs by final status.
    pub counts: Vec<(Status, u64)>,
}

/// What `begin_attempt` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attempt {
    /// Go ahead: this is attempt `number` of `max`.
    Run {
        /// This attempt's number, from 1.
        number: u32,
        /// Attempts allowed.
        max: u32,
    },
    /// The job already ended (a duplicate delivery): nothing to do.
    AlreadyEnded,
    /// The job had been asked to stop; it is now cancelled.
    Cancelled,
    /// No such job.
    Unknown,
}

/// How a job stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Waiting in the queue.
    Queued,
    /// Taken by a worker (possibly between retries).
    Running,
    /// Ended with a result.
    Succeeded,
    /// Ended with a permanent error.
    Failed,
    /// Ended after its attempts ran out (transient errors or a worker lost every time).
    Dead,
    /// Cancelled before it ended.
    Cancelled,
}

impl Status {
    /// Returns the snake_case name, as stored.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Queued => "queued",
            Status::Running => "running",
            Status::Succeeded => "succeeded",
            Status::Failed => "failed",
            Status::Dead => "dead",
            Status::Cancelled => "cancelled",
        }
    }

    /// Parses a stored name.
    pub fn parse(text: &str) -> Option<Status> {
        Some(match text {
            "queued" => Status::Queued,
            "running" => Status::Running,
            "succeeded" => Status::Succeeded,
            "failed" => Status::Failed,
            "dead" => Status::Dead,
            "cancelled" => Status::Cancelled,
            _ => return None,
        })
    }

    /// True once the job has ended and will not change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Succeeded | Status::Failed | Status::Dead | Status::Cancelled
        )
    }
}

/// A job as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobRecord {
    /// The job id (ULID).
    pub id: String,
    /// The job kind.
    pub kind: String,
    /// The batch it belongs to.
    pub batch_id: Option<String>,
    /// The URL it is about.
    pub url: String,
    /// How it stands.
    pub status: Status,
    /// Attempts started so far.
    pub attempts: u32,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// The result, once succeeded (a fetch job's is a `FetchResult`).
    #[schema(value_type = Option<Object>)]
    pub result: Option<serde_json::Value>,
    /// The last error (final once failed or dead).
    pub error: Option<JobError>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When it ended.
    pub finished_at: Option<String>,
    /// Its place in the order jobs ended.
    pub done_seq: Option<i64>,
}

/// A job of a batch that ended, as `trawl run` reports it: the result as its stored JSON text
/// (written out as is, never parsed into a tree and printed again).
#[derive(Debug, Clone, PartialEq)]
pub struct EndedJob {
    /// The job id.
    pub id: String,
    /// The URL it was about.
    pub url: String,
    /// How it ended.
    pub status: Status,
    /// Its place in the order jobs ended.
    pub done_seq: i64,
    /// The result JSON, when it succeeded.
    pub result: Option<String>,
    /// The last error, when it did not.
    pub error: Option<JobError>,
}

/// A stored page, without its text.
#[derive(Debug, Clone, PartialEq)]
pub struct PageRecord {
    /// The page id (the id of the job that fetched it).
    pub id: String,
    /// sha256 of the text, also the key of its blob.
    pub content_hash: String,
    /// Lines in the text.
    pub lines: u64,
    /// When it was fetched, milliseconds since the epoch.
    pub fetched_at_ms: i64,
    /// Its description.
    pub info: trawl_workers::fetch::PageInfo,
}

/// How a job ended, as the runner reports it.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// A result (and the page it stored, if any).
    Succeeded {
        /// The job result JSON.
        result: serde_json::Value,
        /// The page written for it.
        page_id: Option<String>,
    },
    /// A permanent error.
    Failed(JobError),
    /// Attempts exhausted.
    Dead(JobError),
    /// Cancelled.
    Cancelled,
}

impl Outcome {
    /// The values an engine writes to end a job with this outcome.
    fn ending(&self) -> Ending {
        let status = match self {
            Outcome::Succeeded { .. } => Status::Succeeded,
            Outcome::Failed(_) => Status::Failed,
            Outcome::Dead(_) => Status::Dead,
            Outcome::Cancelled => Status::Cancelled,
        };
        let (result, page_id, error) = match self {
            Outcome::Succeeded { result, page_id } => {
                (Some(result.to_string()), page_id.clone(), None)
            }
            Outcome::Failed(error) | Outcome::Dead(error) => (None, None, Some(error)),
            Outcome::Cancelled => (None, None, None),
        };
        Ending {
            status: status.as_str(),
            result,
            page_id,
            error: error.map(rows::to_json),
            error_code: error.map(|error| error.code.as_str()),
        }
    }
}

/// The column values that end a job (a cancel request, checked in SQL, wins over them).
struct Ending {
    status: &'static str,
    result: Option<String>,
    page_id: Option<String>,
    error: Option<String>,
    error_code: Option<&'static str>,
}

/// What a page write needs: the description, the text, the raw body and the cache key.
#[derive(Debug, Clone)]
pub struct NewPage<'a> {
    /// Normalised requested URL.
    pub url: &'a str,
    /// Normalised final URL.
    pub final_url: &'a str,
    /// Hash of the options that change the page.
    pub options_hash: &'a str,
    /// The description.
    pub info: &'a trawl_workers::fetch::PageInfo,
    /// The whole text.
    pub text: &'a str,
    /// The raw body.
    pub raw: &'a [u8],
    /// The final response's headers (kept for WARC records).
    pub headers: &'a [(String, String)],
    /// The address the final response came from.
    pub ip: Option<std::net::IpAddr>,
    /// Whether the archive pool should take the page.
    pub archive: bool,
    /// The attempt that fetched it: the page is stored and the job ends only if this is
    /// still the job's latest attempt (`None`: no check).
    pub attempt: Option<u32>,
}

/// A stored page as the archive pool takes it: what the index and the WARC records need.
#[derive(Debug, Clone, PartialEq)]
pub struct ArchivePage {
    /// The page id (the id of the job that fetched it).
    pub id: String,
    /// Normalised requested URL.
    pub url: String,
    /// The page's description.
    pub info: trawl_workers::fetch::PageInfo,
    /// Hash of the text blob.
    pub content_hash: String,
    /// Hash of the raw body blob.
    pub raw_hash: String,
    /// When it was fetched, in milliseconds since the epoch.
    pub fetched_at_ms: i64,
    /// The final response's headers, when they were kept.
    pub headers: Vec<(String, String)>,
    /// The address the response came from, when known.
    pub ip: Option<String>,
    /// Its WARC record, once written.
    pub warc_record_id: Option<String>,
}

/// How a crawl stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CrawlStatus {
    /// Pages are being fetched (or wait in the queue).
    Running,
    /// Every page it queued has ended.
    Completed,
    /// Stopped on request.
    Cancelled,
}

impl CrawlStatus {
    /// Parses the stored name.
    pub fn parse(text: &str) -> Option<CrawlStatus> {
        match text {
            "running" => Some(CrawlStatus::Running),
            "completed" => Some(CrawlStatus::Completed),
            "cancelled" => Some(CrawlStatus::Cancelled),
            _ => None,
        }
    }
}

/// A crawl's progress. As a delta, what to add.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CrawlCounters {
    /// Distinct URLs seen (seeds, links, sitemap entries).
    pub discovered: u64,
    /// Fetch jobs created.
    pub queued: u64,
    /// Pages fetched and stored.
    pub fetched: u64,
    /// Fetch jobs that failed or died.
    pub failed: u64,
    /// Links out of scope or filtered out by the globs.
    pub skipped_scope: u64,
    /// URLs disallowed by robots.txt.
    pub skipped_robots: u64,
    /// Links beyond `max_depth`.
    pub skipped_depth: u64,
    /// URLs beyond `max_pages`.
    pub skipped_limit: u64,
    /// Pages whose `rel=canonical` names a page the crawl already has.
    pub skipped_duplicate: u64,
}

/// What becomes of a URL key a crawl page found, when the key is new to the crawl.
#[derive(Debug, Clone, Copy)]
pub enum Fate<'a> {
    /// One of the page's own keys (its final or canonical URL): recorded, not counted.
    Own,
    /// Out of scope or filtered out by the globs (`skipped_scope`).
    Scope,
    /// Disallowed by robots.txt (`skipped_robots`).
    Robots,
    /// To fetch: this job is created when the page budget allows (`queued`), else the key
    /// counts as `skipped_limit`.
    Queue(&'a NewJob),
}

/// A URL key a crawl page found, and what becomes of it when it is new.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// `trawl_workers::crawl::crawl_key` of the URL.
    pub key: &'a str,
    /// What becomes of it.
    pub fate: Fate<'a>,
}

/// What [`Store::follow_crawl`] recorded.
#[derive(Debug, Default)]
pub struct Followed {
    /// The keys that were new to the crawl.
    pub new: std::collections::HashSet<String>,
    /// The ids of the jobs created, in the order found: the caller queues them.
    pub created: Vec<String>,
    /// What was added to the crawl's counters.
    pub counters: CrawlCounters,
}

impl Followed {
    /// The tally once the seen set answered (`new`): the counters of the new keys, and the
    /// jobs wanted (new keys to queue), in the order found. Shared by both engines.
    fn tally<'a>(
        found: &[Found<'a>],
        new: std::collections::HashSet<String>,
        counted: &CrawlCounters,
    ) -> (Followed, Vec<&'a NewJob>) {
        let mut counters = *counted;
        let mut wanted = Vec::new();
        let mut tallied = std::collections::HashSet::new();
        for found in found {
            if !new.contains(found.key) || !tallied.insert(found.key) {
                continue;
            }
            match found.fate {
                Fate::Own => continue,
                Fate::Scope => counters.skipped_scope += 1,
                Fate::Robots => counters.skipped_robots += 1,
                Fate::Queue(job) => wanted.push(job),
            }
            counters.discovered += 1;
        }
        let followed = Followed {
            new,
            created: Vec::new(),
            counters,
        };
        (followed, wanted)
    }

    /// Keeps the first `granted` wanted jobs: they are created and counted as queued, the
    /// rest as beyond the budget. Returns the jobs to create.
    fn grant<'a>(&mut self, mut wanted: Vec<&'a NewJob>, granted: u64) -> Vec<&'a NewJob> {
        let granted = usize::try_from(granted)
            .unwrap_or(usize::MAX)
            .min(wanted.len());
        self.counters.skipped_limit += (wanted.len() - granted) as u64;
        self.counters.queued += granted as u64;
        wanted.truncate(granted);
        self.created = wanted.iter().map(|job| job.id.clone()).collect();
        wanted
    }
}

pub use sessions::NewSessionStep;

/// An agent session as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SessionRecord {
    /// The session id (ULID).
    pub id: String,
    /// Fingerprint of the token that opened it.
    #[serde(skip)]
    pub owner: String,
    /// `desktop` or `mobile`.
    pub profile: String,
    /// When it was opened (RFC 3339).
    pub created_at: String,
    /// When it was closed.
    pub closed_at: Option<String>,
    /// Why: `closed`, `expired`, `browser_failed`, `shutdown` or `host_lost`.
    pub close_reason: Option<String>,
    /// The session host it lives on (internal: not shown).
    #[serde(skip)]
    pub host: Option<String>,
}

/// A worker that hosts agent sessions for API processes elsewhere.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionHost {
    /// Where the API reaches it.
    pub url: String,
    /// Sessions it takes at most.
    pub capacity: u64,
    /// Sessions open on it at its last renewal.
    pub open: u64,
    /// Its last renewal, Unix milliseconds.
    pub seen_ms: i64,
}

/// One step of a session's replay log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionStepRecord {
    /// Its number (1, 2, …).
    pub seq: u64,
    /// The action.
    pub action: serde_json::Value,
    /// What it did (without its image).
    pub outcome: serde_json::Value,
    /// The screenshot's blob.
    pub image_sha256: Option<String>,
    /// The screenshot's media type.
    pub image_type: Option<String>,
    /// When it ran.
    pub created_at: String,
}

/// A crawl as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CrawlRecord {
    /// The crawl id (ULID).
    pub id: String,
    /// What was asked.
    pub spec: trawl_workers::job::CrawlSpec,
    /// How it stands.
    pub status: CrawlStatus,
    /// Its progress.
    pub counters: CrawlCounters,
    /// When it started (RFC 3339).
    pub created_at: String,
    /// When it ended.
    pub finished_at: Option<String>,
}

/// Where a page's WARC record went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WarcRef {
    /// The page id.
    pub page_id: String,
    /// The WARC-Record-ID of its response or revisit record.
    pub record_id: String,
    /// The file it is in.
    pub file: String,
    /// The record's offset in that file.
    pub offset: u64,
}

/// Takes an exclusive lock on a file beside the SQLite database `db_file` (held until the
/// returned file is dropped), so that one process runs the migrations of a new database while
/// another opening it at the same moment waits: sqlx and apalis take no lock of their own on
/// SQLite. `None` for an in-memory database.
pub(crate) async fn lock_sqlite_migrations(
    db_file: &Path,
) -> std::io::Result<Option<std::fs::File>> {
    if db_file.as_os_str() == ":memory:" {
        return Ok(None);
    }
    let mut lock_path = db_file.as_os_str().to_owned();
    lock_path.push(".migrate-lock");
    tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)?;
        file.lock()?;
        Ok(Some(file))
    })
    .await
    .map_err(std::io::Error::other)?
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
