//! The plain values the store accepts and returns: jobs, batches, pages, sessions and WARC
//! references, and the statuses they carry. Re-exported from `store`, so each is named
//! `crate::store::X`.
//!
//! Not here: the crawl records (`crawls`), the queries (each capability's file) and the
//! decoding of rows into these values (`rows`).

use serde::{Deserialize, Serialize};
use trawl_workers::job::JobError;
use utoipa::ToSchema;

use super::rows;
use crate::tenant::Tenant;

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
    /// The tenant it belongs to.
    pub tenant: Tenant,
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
            tenant: Tenant::default(),
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
    /// The tenant it belongs to.
    pub tenant: Tenant,
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
    /// The tenant it belongs to (internal: not shown).
    #[serde(skip)]
    pub tenant: String,
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
    /// The tenant it belongs to.
    pub tenant: String,
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

/// The error a cancelled job ends with, as stored (a `JobError`'s JSON): it replaces the
/// error of an earlier failed attempt, so a cancelled job never shows `connect_error`.
/// `pages::END_PAGES` holds the same text (a test checks it).
pub(super) const CANCELLED_ERROR: &str =
    r#"{"code":"cancelled","message":"the job was cancelled","transient":false}"#;

impl Outcome {
    /// The values an engine writes to end a job with this outcome.
    pub(super) fn ending(&self) -> Ending {
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
pub(super) struct Ending {
    pub(super) status: &'static str,
    pub(super) result: Option<String>,
    pub(super) page_id: Option<String>,
    pub(super) error: Option<String>,
    pub(super) error_code: Option<&'static str>,
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
    /// Its visible lines, one per block, as its fetch read them (`Fetched::lines`): held for
    /// this process's archive pool with the page, never stored.
    pub lines: Option<&'a str>,
    /// The attempt that fetched it: the page is stored and the job ends only if this is
    /// still the job's latest attempt (`None`: no check).
    pub attempt: Option<u32>,
    /// The tenant it belongs to (its job's).
    pub tenant: &'a str,
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
    /// The tenant it belongs to.
    pub tenant: String,
}

/// An agent session as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SessionRecord {
    /// The session id (ULID).
    pub id: String,
    /// The tenant that opened it (sessions are visible to its tokens only).
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

/// A step to record.
#[derive(Debug, Clone)]
pub struct NewSessionStep<'a> {
    /// The session.
    pub session_id: &'a str,
    /// Its number in the session (1, 2, …).
    pub seq: u64,
    /// The action's JSON form.
    pub action: &'a serde_json::Value,
    /// The outcome's JSON form, without its image.
    pub outcome: &'a serde_json::Value,
    /// The step's screenshot and its media type.
    pub image: Option<(&'a [u8], &'a str)>,
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

/// Which jobs a listing takes (every condition given must hold). Listings are paged by job
/// id (ULIDs: creation order), a keyset cursor.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    /// Only the jobs of this batch.
    pub batch_id: Option<String>,
    /// Only the jobs of this crawl.
    pub crawl_id: Option<String>,
    /// Only jobs with this status.
    pub status: Option<Status>,
    /// Only the jobs of this tenant (`Scope::filter`; `None`: every tenant's).
    pub tenant: Option<String>,
}

/// A job in a listing: how it ended and where its page is.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct JobEntry {
    /// The job id (also the listing's cursor).
    pub job_id: String,
    /// The URL it was asked for.
    pub url: String,
    /// The page's final URL (normalised), once it has a page.
    pub final_url: Option<String>,
    /// How it stands.
    pub status: Status,
    /// The error code, when it failed or died (or the last one, while retried).
    pub error_code: Option<String>,
    /// Its page (`GET /v1/pages?url=`, `trawl read`); a job served from the cache names the
    /// page it was served.
    pub page_id: Option<String>,
    /// The page's title.
    pub title: Option<String>,
    /// True when it was served from the cache (its page was fetched by another job).
    pub cached: bool,
}

/// Which stored pages a listing takes.
#[derive(Debug, Clone, Default)]
pub struct PageFilter {
    /// Only pages whose requested URL is on this host (`host` or `host:port`).
    pub host: Option<String>,
    /// Only pages the jobs of this crawl fetched or were served from the cache.
    pub crawl_id: Option<String>,
    /// Only the pages of this tenant (`Scope::filter`; `None`: every tenant's).
    pub tenant: Option<String>,
}

/// A stored page in a listing (each fetch of a URL is one).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PageEntry {
    /// The page id (the job that fetched it; also the listing's cursor).
    pub page_id: String,
    /// The requested URL (normalised).
    pub url: String,
    /// The final URL (normalised).
    pub final_url: String,
    /// The page's title.
    pub title: Option<String>,
    /// The HTTP status.
    pub status: u16,
    /// The content type.
    pub content_type: String,
    /// When it was fetched (RFC 3339).
    pub fetched_at: String,
    /// Lines in its text.
    pub lines: u64,
}
