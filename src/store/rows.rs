//! Rows into records, the same for every store engine: both keep the same columns, integers
//! as 64-bit, JSON as text, so one decoder per record reads either.
//!
//! Not here: the queries (`jobs`, `pages`, `crawls`, `sessions`, and each engine's file).

use sqlx::Row;

use super::{
    ArchivePage, CrawlCounters, CrawlRecord, CrawlStatus, EndedJob, Error, JobEntry, JobRecord,
    PageEntry, PageRecord, Status,
};

/// The columns of a row, by name, as the few types the store uses.
pub(super) trait Columns {
    /// A text column.
    fn text(&self, name: &str) -> Result<String, Error>;
    /// A nullable text column.
    fn opt_text(&self, name: &str) -> Result<Option<String>, Error>;
    /// An integer column.
    fn int(&self, name: &str) -> Result<i64, Error>;
    /// A nullable integer column.
    fn opt_int(&self, name: &str) -> Result<Option<i64>, Error>;
}

macro_rules! columns {
    ($row:ty) => {
        impl Columns for $row {
            fn text(&self, name: &str) -> Result<String, Error> {
                Ok(self.try_get(name)?)
            }
            fn opt_text(&self, name: &str) -> Result<Option<String>, Error> {
                Ok(self.try_get(name)?)
            }
            fn int(&self, name: &str) -> Result<i64, Error> {
                Ok(self.try_get(name)?)
            }
            fn opt_int(&self, name: &str) -> Result<Option<i64>, Error> {
                Ok(self.try_get(name)?)
            }
        }
    };
}

columns!(sqlx::sqlite::SqliteRow);
columns!(sqlx::postgres::PgRow);

/// The columns [`job`] reads.
pub(super) const JOB_COLUMNS: &str = "SELECT id, kind, batch_id, url, status, attempts, \
     max_attempts, result, error, created_at, finished_at, done_seq, tenant FROM jobs";

/// The columns [`page`] reads.
pub(super) const PAGE_COLUMNS: &str =
    "SELECT id, content_hash, lines, fetched_at_ms, info, tenant FROM pages";

/// Parses a stored job status.
pub(super) fn status(text: String) -> Result<Status, Error> {
    Status::parse(&text).ok_or(Error::Corrupt {
        what: "job status",
        detail: text,
    })
}

/// A stored count or attempt number as `u32` (negative values read as 0).
pub(super) fn small_count(value: i64) -> u32 {
    u32::try_from(value.max(0)).unwrap_or(u32::MAX)
}

/// A row of [`JOB_COLUMNS`].
pub(super) fn job(row: &impl Columns) -> Result<JobRecord, Error> {
    Ok(JobRecord {
        id: row.text("id")?,
        kind: row.text("kind")?,
        batch_id: row.opt_text("batch_id")?,
        url: row.text("url")?,
        status: status(row.text("status")?)?,
        attempts: small_count(row.int("attempts")?),
        max_attempts: small_count(row.int("max_attempts")?),
        result: row
            .opt_text("result")?
            .map(|text| from_json(&text, "job result"))
            .transpose()?,
        error: row
            .opt_text("error")?
            .map(|text| from_json(&text, "job error"))
            .transpose()?,
        created_at: row.text("created_at")?,
        finished_at: row.opt_text("finished_at")?,
        done_seq: row.opt_int("done_seq")?,
        tenant: row.text("tenant")?,
    })
}

/// A row of `id, url, status, done_seq, result, error` of an ended job.
pub(super) fn ended_job(row: &impl Columns) -> Result<EndedJob, Error> {
    Ok(EndedJob {
        id: row.text("id")?,
        url: row.text("url")?,
        status: status(row.text("status")?)?,
        done_seq: row.int("done_seq")?,
        result: row.opt_text("result")?,
        error: row
            .opt_text("error")?
            .map(|text| from_json(&text, "job error"))
            .transpose()?,
    })
}

/// A row of [`PAGE_COLUMNS`].
pub(super) fn page(row: &impl Columns) -> Result<PageRecord, Error> {
    Ok(PageRecord {
        id: row.text("id")?,
        content_hash: row.text("content_hash")?,
        lines: row.int("lines")?.max(0) as u64,
        fetched_at_ms: row.int("fetched_at_ms")?,
        info: from_json(&row.text("info")?, "page info")?,
        tenant: row.text("tenant")?,
    })
}

/// A row of `rowid, id, url, content_hash, raw_hash, fetched_at_ms, info, headers, ip,
/// warc_record_id, tenant`: the page and its cursor.
pub(super) fn archive_page(row: &impl Columns) -> Result<(ArchivePage, i64), Error> {
    let page = ArchivePage {
        id: row.text("id")?,
        url: row.text("url")?,
        info: from_json(&row.text("info")?, "page info")?,
        content_hash: row.text("content_hash")?,
        raw_hash: row.text("raw_hash")?,
        fetched_at_ms: row.int("fetched_at_ms")?,
        headers: row
            .opt_text("headers")?
            .map(|text| from_json(&text, "page headers"))
            .transpose()?
            .unwrap_or_default(),
        ip: row.opt_text("ip")?,
        warc_record_id: row.opt_text("warc_record_id")?,
        tenant: row.text("tenant")?,
    };
    Ok((page, row.int("rowid")?))
}

/// A row of `crawls`.
pub(super) fn crawl(row: &impl Columns) -> Result<CrawlRecord, Error> {
    let status = row.text("status")?;
    let count = |name: &str| row.int(name).map(|n| n.max(0) as u64);
    Ok(CrawlRecord {
        id: row.text("id")?,
        spec: from_json(&row.text("spec")?, "crawl spec")?,
        status: CrawlStatus::parse(&status).ok_or(Error::Corrupt {
            what: "crawl status",
            detail: status.clone(),
        })?,
        counters: CrawlCounters {
            discovered: count("discovered")?,
            queued: count("queued")?,
            fetched: count("fetched")?,
            cached: count("cached")?,
            failed: count("failed")?,
            skipped_scope: count("skipped_scope")?,
            skipped_robots: count("skipped_robots")?,
            skipped_depth: count("skipped_depth")?,
            skipped_limit: count("skipped_limit")?,
            skipped_duplicate: count("skipped_duplicate")?,
        },
        created_at: row.text("created_at")?,
        finished_at: row.opt_text("finished_at")?,
        tenant: row.text("tenant")?,
    })
}

/// The columns [`job_entry`] reads, from `jobs` joined with their pages.
pub(super) const JOB_ENTRY_COLUMNS: &str = "SELECT jobs.id AS id, jobs.url AS url, \
     jobs.status AS status, jobs.error_code AS error_code, jobs.page_id AS page_id, \
     pages.final_url AS final_url, pages.title AS title \
     FROM jobs LEFT JOIN pages ON pages.id = jobs.page_id";

/// A row of [`JOB_ENTRY_COLUMNS`].
pub(super) fn job_entry(row: &impl Columns) -> Result<JobEntry, Error> {
    let job_id = row.text("id")?;
    let page_id = row.opt_text("page_id")?;
    Ok(JobEntry {
        cached: page_id.as_ref().is_some_and(|page| *page != job_id),
        url: row.text("url")?,
        final_url: row.opt_text("final_url")?,
        status: status(row.text("status")?)?,
        error_code: row.opt_text("error_code")?,
        page_id,
        title: row.opt_text("title")?,
        job_id,
    })
}

/// The columns [`page_entry`] reads.
pub(super) const PAGE_ENTRY_COLUMNS: &str = "SELECT id, url, final_url, title, \
     CAST(status AS BIGINT) AS http_status, content_type, fetched_at, \
     CAST(lines AS BIGINT) AS n_lines FROM pages";

/// A row of [`PAGE_ENTRY_COLUMNS`].
pub(super) fn page_entry(row: &impl Columns) -> Result<PageEntry, Error> {
    Ok(PageEntry {
        page_id: row.text("id")?,
        url: row.text("url")?,
        final_url: row.text("final_url")?,
        title: row.opt_text("title")?,
        status: u16::try_from(row.int("http_status")?).unwrap_or_default(),
        content_type: row.text("content_type")?,
        fetched_at: row.text("fetched_at")?,
        lines: row.int("n_lines")?.max(0) as u64,
    })
}

/// A row of `status, n` (jobs by status).
pub(super) fn status_count(row: &impl Columns) -> Result<(Status, u64), Error> {
    Ok((status(row.text("status")?)?, row.int("n")?.max(0) as u64))
}

/// A row of `error_code, n` (failed jobs by error code).
pub(super) fn error_count(row: &impl Columns) -> Result<(String, u64), Error> {
    let code = row
        .opt_text("error_code")?
        .unwrap_or_else(|| "unknown".to_owned());
    Ok((code, row.int("n")?.max(0) as u64))
}

/// A value as stored JSON text.
pub(super) fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("store types serialise to json")
}

/// Stored JSON text as a value.
pub(super) fn from_json<T: serde::de::DeserializeOwned>(
    text: &str,
    what: &'static str,
) -> Result<T, Error> {
    serde_json::from_str(text).map_err(|error| Error::Corrupt {
        what,
        detail: error.to_string(),
    })
}

/// The time now, as stored.
pub(super) fn now_rfc3339() -> String {
    jiff::Timestamp::now().to_string()
}
