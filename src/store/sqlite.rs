//! The embedded store: one SQLite file (WAL, `synchronous=NORMAL`), migrations from
//! `migrations/sqlite`. A separate file from the queue's, because apalis and trawl would
//! otherwise share one `_sqlx_migrations` table.

use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lru::LruCache;
use serde::Serialize;
use sha2::{Digest, Sha256};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use trawl_workers::job::JobError;

use super::{Error, JobRecord, NewPage, Outcome, PageRecord, Status};

/// Largest blob decompressed on read: a guard against a corrupt or hostile database file.
const MAX_BLOB_BYTES: usize = 256 << 20;

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
    /// The job's JSON form.
    pub params: serde_json::Value,
    /// Attempts allowed.
    pub max_attempts: u32,
    /// Where the job's events are POSTed.
    pub webhook: Option<String>,
}

impl NewJob {
    /// The record of `job` under `id`: kind, URL and JSON form taken from the job.
    pub fn new(id: &str, job: &trawl_workers::job::Job, max_attempts: u32) -> NewJob {
        NewJob {
            id: id.to_owned(),
            kind: job.kind(),
            batch_id: None,
            url: job.url().to_owned(),
            params: serde_json::to_value(job).expect("jobs are plain data and serialise to json"),
            max_attempts,
            webhook: None,
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

/// The store, cheap to clone (a connection pool).
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    /// Recently read page texts by content hash. Blobs never change, so entries never go
    /// stale; bounded in bytes.
    texts: Arc<Mutex<TextCache>>,
}

#[derive(Debug)]
struct TextCache {
    lru: LruCache<String, Arc<str>>,
    bytes: usize,
}

/// Bytes of decompressed page text kept by [`Store::page_text`].
const TEXT_CACHE_BYTES: usize = 32 << 20;

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

impl Store {
    /// Opens (creating if needed) the store at `path` and runs the migrations.
    pub async fn open(path: &Path) -> Result<Store, Error> {
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            // Few connections: writes are serialised anyway, and each connection's page cache
            // is dropped whenever another one writes.
            .max_connections(4)
            .connect_with(options)
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        Ok(Store {
            pool,
            texts: Arc::new(Mutex::new(TextCache {
                lru: LruCache::unbounded(),
                bytes: 0,
            })),
        })
    }

    /// Begins a transaction that takes the write lock at once. A deferred transaction that
    /// reads first and writes later fails with SQLITE_BUSY, without waiting, when another
    /// writer committed in between; an immediate one waits for the lock (busy_timeout).
    async fn write_transaction(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, Error> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Checks that the store answers.
    pub async fn ping(&self) -> Result<(), Error> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Records jobs as queued, all or none.
    pub async fn create_jobs(&self, jobs: &[NewJob]) -> Result<(), Error> {
        self.submit(None, jobs).await
    }

    /// Records a batch and its jobs as queued, all or none.
    pub async fn submit(&self, batch: Option<&NewBatch>, jobs: &[NewJob]) -> Result<(), Error> {
        let now = now_rfc3339();
        let mut tx = self.write_transaction().await?;
        if let Some(batch) = batch {
            sqlx::query("INSERT INTO batches (id, webhook, total, created_at) VALUES (?, ?, ?, ?)")
                .bind(&batch.id)
                .bind(&batch.webhook)
                .bind(batch.total as i64)
                .bind(&now)
                .execute(&mut *tx)
                .await?;
        }
        for job in jobs {
            sqlx::query(
                "INSERT INTO jobs (id, kind, batch_id, url, params, status, max_attempts, created_at, webhook)
                 VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?)",
            )
            .bind(&job.id)
            .bind(job.kind)
            .bind(&job.batch_id)
            .bind(&job.url)
            .bind(job.params.to_string())
            .bind(job.max_attempts)
            .bind(&now)
            .bind(&job.webhook)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Cancels a queued job at once, or asks a running one to stop at its next safe point.
    pub async fn request_cancel(&self, id: &str) -> Result<Cancel, Error> {
        let mut tx = self.write_transaction().await?;
        let row = sqlx::query("SELECT status FROM jobs WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Ok(Cancel::Unknown);
        };
        let status: String = row.try_get(0)?;
        let status = Status::parse(&status).ok_or_else(|| Error::Corrupt {
            what: "job status",
            detail: status.clone(),
        })?;
        let outcome = match status {
            Status::Queued => {
                sqlx::query("UPDATE jobs SET cancel_requested = 1 WHERE id = ?")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                finish_in(&mut tx, id, &Outcome::Cancelled).await?;
                Cancel::Cancelled
            }
            Status::Running => {
                sqlx::query("UPDATE jobs SET cancel_requested = 1 WHERE id = ?")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
                Cancel::Requested
            }
            ended => Cancel::AlreadyEnded(ended),
        };
        tx.commit().await?;
        Ok(outcome)
    }

    /// Claims the announcement of a batch's completion: returns its summary exactly once,
    /// to the first caller after its last job ended; `None` otherwise.
    pub async fn claim_batch_completion(
        &self,
        batch_id: &str,
    ) -> Result<Option<BatchSummary>, Error> {
        let claimed = sqlx::query(
            "UPDATE batches SET completed_notified = 1
             WHERE id = ?1 AND completed_notified = 0
               AND NOT EXISTS (SELECT 1 FROM jobs WHERE batch_id = ?1 AND status IN ('queued', 'running'))
             RETURNING webhook",
        )
        .bind(batch_id)
        .fetch_optional(&self.pool)
        .await?;
        let Some(row) = claimed else { return Ok(None) };
        Ok(Some(BatchSummary {
            id: batch_id.to_owned(),
            webhook: row.try_get(0)?,
            counts: self.count_by_status(Some(batch_id)).await?,
        }))
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
        let row = sqlx::query(
            "UPDATE jobs SET attempts = attempts + 1, status = 'running', started_at = ?
             WHERE id = ? AND status IN ('queued', 'running') AND cancel_requested = 0
             RETURNING attempts, max_attempts",
        )
        .bind(now_rfc3339())
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        if let Some(row) = row {
            return Ok(Attempt::Run {
                number: row.try_get::<u32, _>(0)?,
                max: row.try_get::<u32, _>(1)?,
            });
        }
        // A job asked to stop between attempts ends here, as cancelled.
        if self.finish(id, &Outcome::Cancelled).await?.is_some() {
            return Ok(Attempt::Cancelled);
        }
        let exists = sqlx::query("SELECT 1 FROM jobs WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        Ok(if exists.is_some() {
            Attempt::AlreadyEnded
        } else {
            Attempt::Unknown
        })
    }

    /// Records a failed attempt that will be retried.
    pub async fn record_retry(&self, id: &str, error: &JobError) -> Result<(), Error> {
        sqlx::query(
            "UPDATE jobs SET error = ?, error_code = ? WHERE id = ? AND status = 'running'",
        )
        .bind(to_json(error))
        .bind(error.code.as_str())
        .bind(id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Ends a job. The first end wins: returns the status it ended with (`cancelled` when a
    /// cancel was requested meanwhile), or `None` when the job had already ended (so a
    /// duplicate delivery cannot overwrite or double a result).
    pub async fn finish(&self, id: &str, outcome: &Outcome) -> Result<Option<Status>, Error> {
        let mut tx = self.write_transaction().await?;
        let ended = finish_in(&mut tx, id, outcome).await?;
        tx.commit().await?;
        Ok(ended)
    }

    /// Stores a fetched page (blobs once, page row keyed by the job id) and ends the job with
    /// its result, in one transaction: there is never a result without its page, or the
    /// reverse. Returns the content hash and the status this call ended the job with (`None`
    /// when another delivery had ended it).
    pub async fn finish_with_page(
        &self,
        job_id: &str,
        page: NewPage<'_>,
        result_for: impl FnOnce(&str) -> serde_json::Value,
    ) -> Result<(String, Option<Status>), Error> {
        let text = page.text.as_bytes().to_vec();
        let raw = page.raw.to_vec();
        // Level 1, the fastest: level 3 cost twice the CPU for a few percent smaller blobs.
        let (text_blob, raw_blob) =
            tokio::task::spawn_blocking(move || (Blob::pack(&text, 1), Blob::pack(&raw, 1)))
                .await
                .map_err(|error| Error::Corrupt {
                    what: "blob",
                    detail: format!("compression task failed: {error}"),
                })?;
        let content_hash = text_blob.sha256.clone();
        let info = to_json(page.info);
        let fetched_at_ms = jiff::Timestamp::from_str(&page.info.fetched_at)
            .map(|timestamp| timestamp.as_millisecond())
            .unwrap_or_else(|_| jiff::Timestamp::now().as_millisecond());
        let lines = page.text.lines().count() as i64;
        let result = result_for(&content_hash);

        // Three statements in one transaction (each statement is a round trip to sqlx's
        // connection thread, which is most of the store's cost). A job asked to stop gets no
        // page: the page insert is guarded, and `finish_in` ends the job as cancelled.
        let mut tx = self.write_transaction().await?;
        sqlx::query(
            "INSERT OR IGNORE INTO blobs (sha256, codec, size, bytes) VALUES (?, ?, ?, ?), (?, ?, ?, ?)",
        )
        .bind(&text_blob.sha256)
        .bind(text_blob.codec)
        .bind(text_blob.size as i64)
        .bind(&text_blob.bytes)
        .bind(&raw_blob.sha256)
        .bind(raw_blob.codec)
        .bind(raw_blob.size as i64)
        .bind(&raw_blob.bytes)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT OR IGNORE INTO pages (id, url, final_url, options_hash, status, content_type,
                 title, fetched_at, fetched_at_ms, content_hash, raw_hash, lines, info)
             SELECT ?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13
             WHERE NOT EXISTS (SELECT 1 FROM jobs WHERE id = ?1 AND cancel_requested = 1)",
        )
        .bind(job_id)
        .bind(page.url)
        .bind(page.final_url)
        .bind(page.options_hash)
        .bind(page.info.status)
        .bind(&page.info.content_type)
        .bind(&page.info.title)
        .bind(&page.info.fetched_at)
        .bind(fetched_at_ms)
        .bind(&content_hash)
        .bind(&raw_blob.sha256)
        .bind(lines)
        .bind(info)
        .execute(&mut *tx)
        .await?;
        let outcome = Outcome::Succeeded {
            result,
            page_id: Some(job_id.to_owned()),
        };
        let ended = finish_in(&mut tx, job_id, &outcome).await?;
        if ended.is_some() {
            tx.commit().await?;
            self.remember_text(&content_hash, page.text);
        } else {
            // Another delivery of this job ended it first: keep its page, not this one.
            tx.rollback().await?;
        }
        Ok((content_hash, ended))
    }

    /// Returns the newest page of `url` fetched with `options_hash` at or after `since_ms`.
    pub async fn cached_page(
        &self,
        url: &str,
        options_hash: &str,
        since_ms: i64,
    ) -> Result<Option<PageRecord>, Error> {
        let row = sqlx::query(
            "SELECT id, content_hash, lines, fetched_at_ms, info FROM pages
             WHERE url = ? AND options_hash = ? AND fetched_at_ms >= ?
             ORDER BY fetched_at_ms DESC LIMIT 1",
        )
        .bind(url)
        .bind(options_hash)
        .bind(since_ms)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| page_from_row(&row)).transpose()
    }

    /// Returns the newest page of `url` (requested or final), whatever its options.
    pub async fn latest_page(&self, url: &str) -> Result<Option<PageRecord>, Error> {
        let row = sqlx::query(
            "SELECT id, content_hash, lines, fetched_at_ms, info FROM pages
             WHERE url = ?1 OR final_url = ?1
             ORDER BY fetched_at_ms DESC LIMIT 1",
        )
        .bind(url)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| page_from_row(&row)).transpose()
    }

    /// Returns the page with this id.
    pub async fn page(&self, id: &str) -> Result<Option<PageRecord>, Error> {
        let row = sqlx::query(
            "SELECT id, content_hash, lines, fetched_at_ms, info FROM pages WHERE id = ?",
        )
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| page_from_row(&row)).transpose()
    }

    /// Returns a blob's bytes, decompressed.
    pub async fn blob(&self, sha256: &str) -> Result<Option<Vec<u8>>, Error> {
        let row = sqlx::query("SELECT codec, bytes FROM blobs WHERE sha256 = ?")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        let codec: String = row.try_get(0)?;
        let bytes: Vec<u8> = row.try_get(1)?;
        let unpacked = match codec.as_str() {
            "zstd" => {
                zstd::bulk::decompress(&bytes, MAX_BLOB_BYTES).map_err(|error| Error::Corrupt {
                    what: "blob",
                    detail: error.to_string(),
                })?
            }
            _ => bytes,
        };
        Ok(Some(unpacked))
    }

    /// Returns a page's whole text (from memory when it was read or written recently).
    pub async fn page_text(&self, page: &PageRecord) -> Result<String, Error> {
        self.text(&page.content_hash).await
    }

    /// Returns the text stored under a content hash.
    pub async fn text(&self, content_hash: &str) -> Result<String, Error> {
        if let Ok(mut texts) = self.texts.lock()
            && let Some(text) = texts.lru.get(content_hash)
        {
            return Ok(text.to_string());
        }
        let bytes = self
            .blob(content_hash)
            .await?
            .ok_or_else(|| Error::Corrupt {
                what: "page",
                detail: format!("text blob {content_hash} missing"),
            })?;
        let text = String::from_utf8(bytes).map_err(|error| Error::Corrupt {
            what: "page text",
            detail: error.to_string(),
        })?;
        self.remember_text(content_hash, &text);
        Ok(text)
    }

    /// Keeps a text in the bounded in-memory cache.
    fn remember_text(&self, content_hash: &str, text: &str) {
        if text.len() > TEXT_CACHE_BYTES / 16 {
            return;
        }
        let Ok(mut texts) = self.texts.lock() else {
            return;
        };
        texts.bytes += text.len();
        if let Some(old) = texts.lru.put(content_hash.to_owned(), Arc::from(text)) {
            texts.bytes -= old.len();
        }
        while texts.bytes > TEXT_CACHE_BYTES {
            match texts.lru.pop_lru() {
                Some((_, evicted)) => texts.bytes -= evicted.len(),
                None => break,
            }
        }
    }

    /// Returns one job.
    pub async fn job(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("{JOB_COLUMNS} WHERE id = ?")))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| job_from_row(&row)).transpose()
    }

    /// Returns the jobs of a batch that ended after `after_seq`, in the order they ended.
    pub async fn ended_since(
        &self,
        batch_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<JobRecord>, Error> {
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{JOB_COLUMNS} WHERE batch_id = ? AND done_seq > ? ORDER BY done_seq LIMIT ?"
        )))
        .bind(batch_id)
        .bind(after_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(job_from_row).collect()
    }

    /// Counts jobs by status, over all jobs or one batch.
    pub async fn count_by_status(
        &self,
        batch_id: Option<&str>,
    ) -> Result<Vec<(Status, u64)>, Error> {
        let rows = sqlx::query(
            "SELECT status, COUNT(*) FROM jobs WHERE ?1 IS NULL OR batch_id = ?1 GROUP BY status ORDER BY status",
        )
        .bind(batch_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let status: String = row.try_get(0)?;
                let count: i64 = row.try_get(1)?;
                let status = Status::parse(&status).ok_or_else(|| Error::Corrupt {
                    what: "job status",
                    detail: status.clone(),
                })?;
                Ok((status, count as u64))
            })
            .collect()
    }

    /// Counts the failed and dead jobs of a batch by error code.
    pub async fn count_errors(&self, batch_id: &str) -> Result<Vec<(String, u64)>, Error> {
        let rows = sqlx::query(
            "SELECT error_code, COUNT(*) FROM jobs WHERE batch_id = ? AND status IN ('failed', 'dead')
             GROUP BY error_code ORDER BY COUNT(*) DESC",
        )
        .bind(batch_id)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let code: Option<String> = row.try_get(0)?;
                let count: i64 = row.try_get(1)?;
                Ok((code.unwrap_or_else(|| "unknown".to_owned()), count as u64))
            })
            .collect()
    }

    /// Closes the pool, waiting for connections to finish.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

const JOB_COLUMNS: &str = "SELECT id, kind, batch_id, url, status, attempts, max_attempts, result, error, \
                           created_at, finished_at, done_seq FROM jobs";

async fn finish_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    id: &str,
    outcome: &Outcome,
) -> Result<Option<Status>, Error> {
    let (result, page_id, error) = match outcome {
        Outcome::Succeeded { result, page_id } => (Some(result.to_string()), page_id.clone(), None),
        Outcome::Failed(error) | Outcome::Dead(error) => (None, None, Some(error.clone())),
        Outcome::Cancelled => (None, None, None),
    };
    // A cancel request wins over whatever the attempt produced.
    let done = sqlx::query(
        "UPDATE jobs SET status = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE ?1 END,
             result = CASE WHEN cancel_requested = 1 THEN NULL ELSE ?2 END,
             page_id = CASE WHEN cancel_requested = 1 THEN NULL ELSE ?3 END,
             error = COALESCE(?4, error), error_code = COALESCE(?5, error_code),
             finished_at = ?6, done_seq = (SELECT COALESCE(MAX(done_seq), 0) + 1 FROM jobs)
         WHERE id = ?7 AND status IN ('queued', 'running')
         RETURNING status",
    )
    .bind(outcome.status().as_str())
    .bind(result)
    .bind(page_id)
    .bind(error.as_ref().map(to_json))
    .bind(error.as_ref().map(|error| error.code.as_str()))
    .bind(now_rfc3339())
    .bind(id)
    .fetch_optional(&mut **tx)
    .await?;
    done.map(|row| {
        let status: String = row.try_get(0)?;
        Status::parse(&status).ok_or_else(|| Error::Corrupt {
            what: "job status",
            detail: status,
        })
    })
    .transpose()
}

fn job_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<JobRecord, Error> {
    let status: String = row.try_get("status")?;
    let result: Option<String> = row.try_get("result")?;
    let error: Option<String> = row.try_get("error")?;
    Ok(JobRecord {
        id: row.try_get("id")?,
        kind: row.try_get("kind")?,
        batch_id: row.try_get("batch_id")?,
        url: row.try_get("url")?,
        status: Status::parse(&status).ok_or_else(|| Error::Corrupt {
            what: "job status",
            detail: status.clone(),
        })?,
        attempts: row.try_get("attempts")?,
        max_attempts: row.try_get("max_attempts")?,
        result: result
            .map(|text| from_json(&text, "job result"))
            .transpose()?,
        error: error
            .map(|text| from_json(&text, "job error"))
            .transpose()?,
        created_at: row.try_get("created_at")?,
        finished_at: row.try_get("finished_at")?,
        done_seq: row.try_get("done_seq")?,
    })
}

fn page_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<PageRecord, Error> {
    let info: String = row.try_get("info")?;
    Ok(PageRecord {
        id: row.try_get("id")?,
        content_hash: row.try_get("content_hash")?,
        lines: row.try_get::<i64, _>("lines")? as u64,
        fetched_at_ms: row.try_get("fetched_at_ms")?,
        info: from_json(&info, "page info")?,
    })
}

/// A blob ready to insert.
struct Blob {
    sha256: String,
    codec: &'static str,
    size: usize,
    bytes: Vec<u8>,
}

thread_local! {
    /// One zstd context per blocking thread: creating and zeroing a context per blob showed up
    /// in the pipeline profile.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

impl Blob {
    fn pack(bytes: &[u8], level: i32) -> Blob {
        let sha256 = hex::encode(Sha256::digest(bytes));
        let packed = COMPRESSOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = zstd::bulk::Compressor::new(level).ok();
            }
            let compressor = slot.as_mut()?;
            compressor.set_compression_level(level).ok()?;
            compressor.compress(bytes).ok()
        });
        match packed.ok_or(()) {
            Ok(packed) if packed.len() < bytes.len() => Blob {
                sha256,
                codec: "zstd",
                size: bytes.len(),
                bytes: packed,
            },
            _ => Blob {
                sha256,
                codec: "none",
                size: bytes.len(),
                bytes: bytes.to_vec(),
            },
        }
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> String {
    serde_json::to_string(value).expect("store types serialise to json")
}

fn from_json<T: serde::de::DeserializeOwned>(text: &str, what: &'static str) -> Result<T, Error> {
    serde_json::from_str(text).map_err(|error| Error::Corrupt {
        what,
        detail: error.to_string(),
    })
}

fn now_rfc3339() -> String {
    jiff::Timestamp::now().to_string()
}
