//! The store: jobs (what was asked and how it ended), pages (each fetch of a URL, a version)
//! and blobs (raw bodies and texts, zstd-compressed, content-addressed by sha256, stored once).
//! Writes are keyed by job id, so a job delivered twice stores one result.
//!
//! Not here: delivering jobs to workers (`queue`), or deciding what to retry (`runner`).
//! Today the store is SQLite (`sqlite.rs`); PostgreSQL comes with distributed mode behind the
//! same methods.

mod sqlite;

use serde::{Deserialize, Serialize};
use trawl_workers::job::{ErrorCode, JobError};
use utoipa::ToSchema;

pub use sqlite::{Attempt, BatchSummary, Cancel, NewBatch, NewJob, Store};

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
    fn status(&self) -> Status {
        match self {
            Outcome::Succeeded { .. } => Status::Succeeded,
            Outcome::Failed(_) => Status::Failed,
            Outcome::Dead(_) => Status::Dead,
            Outcome::Cancelled => Status::Cancelled,
        }
    }
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

/// Store failures: all internal from a job's point of view.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The database said no.
    #[error("store: {0}")]
    Database(#[from] sqlx::Error),
    /// Migrations failed.
    #[error("store migrations: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
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
