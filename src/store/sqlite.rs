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

use super::{
    ArchivePage, CrawlCounters, CrawlRecord, CrawlStatus, EndedJob, Error, JobRecord, NewPage,
    Outcome, PageRecord, Status, WarcRef,
};

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
            params: serde_json::to_value(job).expect("jobs are plain data and serialise to json"),
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

/// The store, cheap to clone (a connection pool).
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    /// Pages on their way to the group-commit writer.
    committer: tokio::sync::mpsc::Sender<PendingPage>,
    /// Attempts on their way to the attempt counter.
    starter: tokio::sync::mpsc::Sender<StartingAttempt>,
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
        let (committer, pending) = tokio::sync::mpsc::channel(GROUP_COMMIT_PAGES * 4);
        tokio::spawn(commit_pages(pool.clone(), pending));
        let (starter, starting) = tokio::sync::mpsc::channel(GROUP_COMMIT_PAGES * 4);
        tokio::spawn(start_attempts(pool.clone(), starting));
        Ok(Store {
            pool,
            committer,
            starter,
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
                "INSERT INTO jobs (id, kind, batch_id, url, params, status, max_attempts, created_at,
                     webhook, crawl_id)
                 VALUES (?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?)",
            )
            .bind(&job.id)
            .bind(job.kind)
            .bind(&job.batch_id)
            .bind(&job.url)
            .bind(job.params.to_string())
            .bind(job.max_attempts)
            .bind(&now)
            .bind(&job.webhook)
            .bind(&job.crawl_id)
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
        // Attempts starting at the same time are counted together, in one statement.
        let (reply, answer) = tokio::sync::oneshot::channel();
        let gone = || Error::Corrupt {
            what: "job",
            detail: "the store's attempt writer stopped".to_owned(),
        };
        self.starter
            .send((id.to_owned(), reply))
            .await
            .map_err(|_| gone())?;
        if let Some((number, max)) = answer.await.map_err(|_| gone())?? {
            return Ok(Attempt::Run { number, max });
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
    /// reverse. `result_for` gives the job's result JSON for the page's content hash.
    /// Returns the content hash and the status this call ended the job with (`None` when
    /// another delivery had ended it).
    ///
    /// Pages finished at the same time are committed together (group commit): a single
    /// writer task takes every page waiting when it is free and writes them with three
    /// multi-row statements in one transaction. Per-statement round trips to SQLite's thread
    /// were the largest cost of the store in the pipeline profile.
    pub async fn finish_with_page(
        &self,
        job_id: &str,
        page: NewPage<'_>,
        result_for: impl FnOnce(&str) -> String,
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
        let fetched_at_ms = jiff::Timestamp::from_str(&page.info.fetched_at)
            .map(|timestamp| timestamp.as_millisecond())
            .unwrap_or_else(|_| jiff::Timestamp::now().as_millisecond());
        let (reply, answer) = tokio::sync::oneshot::channel();
        let pending = PendingPage {
            job_id: job_id.to_owned(),
            url: page.url.to_owned(),
            final_url: page.final_url.to_owned(),
            options_hash: page.options_hash.to_owned(),
            status: page.info.status,
            content_type: page.info.content_type.clone(),
            title: page.info.title.clone(),
            fetched_at: page.info.fetched_at.clone(),
            fetched_at_ms,
            lines: page.text.lines().count() as i64,
            info: to_json(page.info),
            headers: to_json(&page.headers),
            ip: page.ip.map(|ip| ip.to_string()),
            archive: page.archive,
            result: result_for(&content_hash),
            text_blob,
            raw_blob,
            reply,
        };
        let gone = || Error::Corrupt {
            what: "page",
            detail: "the store's writer stopped".to_owned(),
        };
        self.committer.send(pending).await.map_err(|_| gone())?;
        let ended = answer.await.map_err(|_| gone())??;
        if ended.is_some() {
            self.remember_text(&content_hash, page.text);
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

    /// Asks the archive pool to take the newest page of each URL (requested or final URL,
    /// normalised). Returns the URLs with no stored page; nothing is changed when any is
    /// missing.
    pub async fn request_archive(&self, urls: &[String]) -> Result<Vec<String>, Error> {
        let mut tx = self.write_transaction().await?;
        let mut missing = Vec::new();
        for url in urls {
            let changed = sqlx::query(
                "UPDATE pages SET archive_state = 'pending', archived_at = NULL
                 WHERE id = (SELECT id FROM pages WHERE url = ?1 OR final_url = ?1
                             ORDER BY fetched_at_ms DESC LIMIT 1)",
            )
            .bind(url)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if changed == 0 {
                missing.push(url.clone());
            }
        }
        if missing.is_empty() {
            tx.commit().await?;
        } else {
            tx.rollback().await?;
        }
        Ok(missing)
    }

    /// Asks the archive pool to take one page (a cached page served to a job with
    /// `archive: true`), unless it is archived already.
    pub async fn request_archive_page(&self, page_id: &str) -> Result<(), Error> {
        sqlx::query(
            "UPDATE pages SET archive_state = 'pending'
             WHERE id = ? AND archive_state IS NOT 'archived'",
        )
        .bind(page_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Returns up to `limit` pages waiting for the archive pool, oldest first, after the
    /// page at `after_rowid` (a cursor: the second value of the last page returned).
    pub async fn archive_backlog(
        &self,
        after_rowid: i64,
        limit: u32,
    ) -> Result<Vec<(ArchivePage, i64)>, Error> {
        let rows = sqlx::query(
            "SELECT rowid, id, url, content_hash, raw_hash, fetched_at_ms, info, headers, ip,
                    warc_record_id
             FROM pages WHERE archive_state = 'pending' AND rowid > ? ORDER BY rowid LIMIT ?",
        )
        .bind(after_rowid)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((archive_page_from_row(row)?, row.try_get::<i64, _>("rowid")?)))
            .collect()
    }

    /// Counts the pages waiting for the archive pool.
    pub async fn archive_pending(&self) -> Result<u64, Error> {
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM pages WHERE archive_state = 'pending'")
                .fetch_one(&self.pool)
                .await?;
        Ok(count as u64)
    }

    /// Records where the WARC records of pages went (before they are marked archived, so a
    /// crash in between does not write them twice).
    pub async fn record_warc(&self, written: &[WarcRef]) -> Result<(), Error> {
        let mut tx = self.write_transaction().await?;
        for record in written {
            sqlx::query(
                "UPDATE pages SET warc_record_id = ?, warc_file = ?, warc_offset = ? WHERE id = ?",
            )
            .bind(&record.record_id)
            .bind(&record.file)
            .bind(record.offset as i64)
            .bind(&record.page_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Ends the archiving of pages: `archived` after the index committed them, or `failed`.
    pub async fn mark_archived(&self, page_ids: &[String], state: &str) -> Result<(), Error> {
        if page_ids.is_empty() {
            return Ok(());
        }
        let now = now_rfc3339();
        let mut tx = self.write_transaction().await?;
        for id in page_ids {
            sqlx::query("UPDATE pages SET archive_state = ?, archived_at = ? WHERE id = ?")
                .bind(state)
                .bind(&now)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The newest earlier page of `url` with the same raw body whose WARC record was written:
    /// the record a revisit refers to (its id and the page's fetch time in milliseconds).
    pub async fn warc_original(
        &self,
        url: &str,
        raw_hash: &str,
        before_ms: i64,
    ) -> Result<Option<(String, i64)>, Error> {
        let row = sqlx::query(
            "SELECT warc_record_id, fetched_at_ms FROM pages
             WHERE url = ? AND raw_hash = ? AND warc_record_id IS NOT NULL AND fetched_at_ms <= ?
             ORDER BY fetched_at_ms DESC LIMIT 1",
        )
        .bind(url)
        .bind(raw_hash)
        .bind(before_ms)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| Ok((row.try_get(0)?, row.try_get(1)?)))
            .transpose()
    }

    /// Returns up to `limit` stored pages for a WARC export, in fetch order, after the page
    /// at `after_rowid`: those whose URL starts with `url_prefix` and, when given, that the
    /// jobs of `batch_id` or of `crawl_id` fetched.
    pub async fn export_pages(
        &self,
        url_prefix: Option<&str>,
        batch_id: Option<&str>,
        crawl_id: Option<&str>,
        after_rowid: i64,
        limit: u32,
    ) -> Result<Vec<(ArchivePage, i64)>, Error> {
        let rows = sqlx::query(
            "SELECT pages.rowid AS rowid, pages.id AS id, pages.url AS url, content_hash,
                    raw_hash, fetched_at_ms, info, headers, ip, warc_record_id
             FROM pages LEFT JOIN jobs ON jobs.id = pages.id
             WHERE pages.rowid > ?1
               AND (?2 IS NULL OR substr(pages.final_url, 1, length(?2)) = ?2
                    OR substr(pages.url, 1, length(?2)) = ?2)
               AND (?3 IS NULL OR jobs.batch_id = ?3)
               AND (?4 IS NULL OR jobs.crawl_id = ?4)
             ORDER BY pages.rowid LIMIT ?5",
        )
        .bind(after_rowid)
        .bind(url_prefix)
        .bind(batch_id)
        .bind(crawl_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| Ok((archive_page_from_row(row)?, row.try_get::<i64, _>("rowid")?)))
            .collect()
    }

    /// Records a new crawl as running.
    pub async fn create_crawl(&self, id: &str, spec: &serde_json::Value) -> Result<(), Error> {
        sqlx::query(
            "INSERT INTO crawls (id, spec, status, created_at) VALUES (?, ?, 'running', ?)",
        )
        .bind(id)
        .bind(spec.to_string())
        .bind(now_rfc3339())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Returns a crawl's record.
    pub async fn crawl(&self, id: &str) -> Result<Option<CrawlRecord>, Error> {
        let row = sqlx::query("SELECT * FROM crawls WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| {
            let spec: String = row.try_get("spec")?;
            let status: String = row.try_get("status")?;
            let count = |name: &str| row.try_get::<i64, _>(name).map(|n| n as u64);
            Ok(CrawlRecord {
                id: row.try_get("id")?,
                spec: from_json(&spec, "crawl spec")?,
                status: CrawlStatus::parse(&status).ok_or_else(|| Error::Corrupt {
                    what: "crawl status",
                    detail: status.clone(),
                })?,
                counters: CrawlCounters {
                    discovered: count("discovered")?,
                    queued: count("queued")?,
                    fetched: count("fetched")?,
                    failed: count("failed")?,
                    skipped_scope: count("skipped_scope")?,
                    skipped_robots: count("skipped_robots")?,
                    skipped_depth: count("skipped_depth")?,
                    skipped_limit: count("skipped_limit")?,
                    skipped_duplicate: count("skipped_duplicate")?,
                },
                created_at: row.try_get("created_at")?,
                finished_at: row.try_get("finished_at")?,
            })
        })
        .transpose()
    }

    /// Adds URL keys to a crawl's seen set and returns those that were new, in the order given.
    pub async fn add_crawl_urls(
        &self,
        crawl_id: &str,
        keys: &[String],
    ) -> Result<Vec<String>, Error> {
        let mut new = Vec::new();
        if keys.is_empty() {
            return Ok(new);
        }
        let mut tx = self.write_transaction().await?;
        for batch in keys.chunks(400) {
            let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                "INSERT INTO crawl_urls (crawl_id, url_key) ",
            );
            insert.push_values(batch, |mut row, key| {
                row.push_bind(crawl_id).push_bind(key.as_str());
            });
            insert.push(" ON CONFLICT DO NOTHING RETURNING url_key");
            for row in insert.build().fetch_all(&mut *tx).await? {
                new.push(row.try_get::<String, _>(0)?);
            }
        }
        tx.commit().await?;
        // RETURNING gives no order guarantee: keep the caller's.
        let added: std::collections::HashSet<&str> = new.iter().map(String::as_str).collect();
        let mut ordered: Vec<String> = Vec::with_capacity(new.len());
        for key in keys {
            if added.contains(key.as_str()) && !ordered.contains(key) {
                ordered.push(key.clone());
            }
        }
        Ok(ordered)
    }

    /// Adds to a crawl's counters.
    pub async fn count_crawl(&self, crawl_id: &str, delta: &CrawlCounters) -> Result<(), Error> {
        sqlx::query(
            "UPDATE crawls SET discovered = discovered + ?, queued = queued + ?,
                 fetched = fetched + ?, failed = failed + ?, skipped_scope = skipped_scope + ?,
                 skipped_robots = skipped_robots + ?, skipped_depth = skipped_depth + ?,
                 skipped_limit = skipped_limit + ?, skipped_duplicate = skipped_duplicate + ?
             WHERE id = ?",
        )
        .bind(delta.discovered as i64)
        .bind(delta.queued as i64)
        .bind(delta.fetched as i64)
        .bind(delta.failed as i64)
        .bind(delta.skipped_scope as i64)
        .bind(delta.skipped_robots as i64)
        .bind(delta.skipped_depth as i64)
        .bind(delta.skipped_limit as i64)
        .bind(delta.skipped_duplicate as i64)
        .bind(crawl_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Takes up to `wanted` of a crawl's remaining page budget (`max_pages` minus the jobs it
    /// has queued) and counts them as queued. Returns how many were granted (none once the
    /// crawl is no longer running).
    pub async fn reserve_crawl_pages(
        &self,
        crawl_id: &str,
        max_pages: u64,
        wanted: u64,
    ) -> Result<u64, Error> {
        let mut tx = self.write_transaction().await?;
        let queued: Option<i64> =
            sqlx::query_scalar("SELECT queued FROM crawls WHERE id = ? AND status = 'running'")
                .bind(crawl_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some(queued) = queued else {
            return Ok(0);
        };
        let granted = wanted.min(max_pages.saturating_sub(queued.max(0) as u64));
        if granted > 0 {
            sqlx::query("UPDATE crawls SET queued = queued + ? WHERE id = ?")
                .bind(granted as i64)
                .bind(crawl_id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(granted)
    }

    /// Ends a crawl as completed when none of its jobs is queued or running. Returns true when
    /// this call ended it.
    pub async fn complete_crawl_if_done(&self, crawl_id: &str) -> Result<bool, Error> {
        let done = sqlx::query(
            "UPDATE crawls SET status = 'completed', finished_at = ?1
             WHERE id = ?2 AND status = 'running'
               AND NOT EXISTS (SELECT 1 FROM jobs WHERE crawl_id = ?2 AND status IN ('queued', 'running'))",
        )
        .bind(now_rfc3339())
        .bind(crawl_id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(done > 0)
    }

    /// Cancels a running crawl: no new pages are queued; its queued jobs are cancelled and
    /// running ones stop at their next safe point. Returns false when it was not running.
    pub async fn cancel_crawl(&self, crawl_id: &str) -> Result<bool, Error> {
        let mut tx = self.write_transaction().await?;
        let changed = sqlx::query(
            "UPDATE crawls SET status = 'cancelled', finished_at = ? WHERE id = ? AND status = 'running'",
        )
        .bind(now_rfc3339())
        .bind(crawl_id)
        .execute(&mut *tx)
        .await?
        .rows_affected();
        if changed > 0 {
            sqlx::query(
                "UPDATE jobs SET cancel_requested = 1 WHERE crawl_id = ? AND status IN ('queued', 'running')",
            )
            .bind(crawl_id)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(changed > 0)
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
        Ok(self.shared_text(content_hash).await?.to_string())
    }

    /// Like [`Store::text`], without a copy when the text is in memory.
    pub async fn shared_text(&self, content_hash: &str) -> Result<Arc<str>, Error> {
        if let Ok(mut texts) = self.texts.lock()
            && let Some(text) = texts.lru.get(content_hash)
        {
            return Ok(text.clone());
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
        Ok(Arc::from(text))
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
    ) -> Result<Vec<EndedJob>, Error> {
        let rows = sqlx::query(
            "SELECT id, url, status, done_seq, result, error FROM jobs
             WHERE batch_id = ? AND done_seq > ? ORDER BY done_seq LIMIT ?",
        )
        .bind(batch_id)
        .bind(after_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        rows.iter()
            .map(|row| {
                let status: String = row.try_get("status")?;
                let error: Option<String> = row.try_get("error")?;
                Ok(EndedJob {
                    id: row.try_get("id")?,
                    url: row.try_get("url")?,
                    status: Status::parse(&status).ok_or_else(|| Error::Corrupt {
                        what: "job status",
                        detail: status.clone(),
                    })?,
                    done_seq: row.try_get("done_seq")?,
                    result: row.try_get("result")?,
                    error: error
                        .map(|text| from_json(&text, "job error"))
                        .transpose()?,
                })
            })
            .collect()
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

/// A fetched page waiting for the group commit, with the channel its outcome goes back on.
struct PendingPage {
    job_id: String,
    url: String,
    final_url: String,
    options_hash: String,
    status: u16,
    content_type: String,
    title: Option<String>,
    fetched_at: String,
    fetched_at_ms: i64,
    lines: i64,
    info: String,
    headers: String,
    ip: Option<String>,
    archive: bool,
    result: String,
    text_blob: Blob,
    raw_blob: Blob,
    reply: tokio::sync::oneshot::Sender<Result<Option<Status>, Error>>,
}

/// Pages written in one transaction at most (16 bound values per page row).
const GROUP_COMMIT_PAGES: usize = 64;

/// The store's page writer: takes every page waiting (up to [`GROUP_COMMIT_PAGES`]) and
/// commits them together. Ends when every `Store` handle is dropped.
async fn commit_pages(pool: SqlitePool, mut pending: tokio::sync::mpsc::Receiver<PendingPage>) {
    let mut next: Vec<PendingPage> = Vec::new();
    loop {
        if next.is_empty() {
            match pending.recv().await {
                Some(page) => next.push(page),
                None => return,
            }
        }
        while next.len() < GROUP_COMMIT_PAGES {
            match pending.try_recv() {
                Ok(page) => next.push(page),
                Err(_) => break,
            }
        }
        // Two deliveries of one job in one group would match one row twice: the later one
        // waits for the next group (where it finds the job ended).
        let mut batch = Vec::with_capacity(next.len());
        let mut later = Vec::new();
        for page in next.drain(..) {
            if batch
                .iter()
                .any(|queued: &PendingPage| queued.job_id == page.job_id)
            {
                later.push(page);
            } else {
                batch.push(page);
            }
        }
        next = later;
        match commit_group(&pool, &batch).await {
            Ok(ended) => {
                for (page, ended) in batch.into_iter().zip(ended) {
                    let _ = page.reply.send(Ok(ended));
                }
            }
            // One bad page must not fail its neighbours: on an error, each page is tried
            // alone and gets its own answer.
            Err(error) if batch.len() > 1 => {
                tracing::debug!(error = %error, pages = batch.len(), "group commit failed, committing pages one by one");
                for page in batch {
                    let ended = commit_group(&pool, std::slice::from_ref(&page))
                        .await
                        .map(|mut ended| ended.pop().flatten());
                    let _ = page.reply.send(ended);
                }
            }
            Err(error) => {
                for page in batch {
                    let _ = page.reply.send(Err(Error::Corrupt {
                        what: "page",
                        detail: error.to_string(),
                    }));
                }
            }
        }
    }
}

/// A job id whose attempt starts, with the channel its (number, max) goes back on: `None`
/// when the job could not start (ended, cancel requested, unknown).
type StartingAttempt = (
    String,
    tokio::sync::oneshot::Sender<Result<Option<(u32, u32)>, Error>>,
);

/// The attempt counter: takes every attempt waiting (up to [`GROUP_COMMIT_PAGES`]) and
/// starts them with one statement. Ends when every `Store` handle is dropped.
async fn start_attempts(
    pool: SqlitePool,
    mut starting: tokio::sync::mpsc::Receiver<StartingAttempt>,
) {
    while let Some(first) = starting.recv().await {
        let mut batch = vec![first];
        while batch.len() < GROUP_COMMIT_PAGES {
            match starting.try_recv() {
                Ok(next) => batch.push(next),
                Err(_) => break,
            }
        }
        let mut update = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "UPDATE jobs SET attempts = attempts + 1, status = 'running', started_at = ",
        );
        update.push_bind(now_rfc3339());
        update.push(" WHERE status IN ('queued', 'running') AND cancel_requested = 0 AND id IN (");
        let mut ids = update.separated(", ");
        for (id, _) in &batch {
            ids.push_bind(id.as_str());
        }
        update.push(") RETURNING id, attempts, max_attempts");
        match update.build().fetch_all(&pool).await {
            Ok(rows) => {
                let mut started = std::collections::HashMap::with_capacity(rows.len());
                for row in &rows {
                    if let (Ok(id), Ok(number), Ok(max)) = (
                        row.try_get::<String, _>(0),
                        row.try_get::<u32, _>(1),
                        row.try_get::<u32, _>(2),
                    ) {
                        started.insert(id, (number, max));
                    }
                }
                // An id delivered twice in one batch was counted once: both deliveries run
                // (as two deliveries of one job always may), and the first end wins.
                for (id, reply) in batch {
                    let _ = reply.send(Ok(started.get(&id).copied()));
                }
            }
            Err(error) => {
                let detail = error.to_string();
                for (_, reply) in batch {
                    let _ = reply.send(Err(Error::Corrupt {
                        what: "job attempt",
                        detail: detail.clone(),
                    }));
                }
            }
        }
    }
}

/// Ends the jobs of `pages` as succeeded (first end wins; a cancel request wins over the
/// result) and stores the pages of the jobs this call ended as succeeded, blobs first.
/// Returns, per page, the status its job ended with, or `None` when it had already ended.
async fn commit_group(
    pool: &SqlitePool,
    pages: &[PendingPage],
) -> Result<Vec<Option<Status>>, Error> {
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await?;
    let now = now_rfc3339();
    let mut end_jobs = sqlx::QueryBuilder::<sqlx::Sqlite>::new("WITH v(id, result, seq) AS (");
    end_jobs.push_values(pages.iter().enumerate(), |mut row, (seq, page)| {
        row.push_bind(page.job_id.as_str())
            .push_bind(page.result.as_str())
            .push_bind(seq as i64 + 1);
    });
    end_jobs.push(
        ") UPDATE jobs SET status = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE 'succeeded' END,
             result = CASE WHEN cancel_requested = 1 THEN NULL ELSE v.result END,
             page_id = CASE WHEN cancel_requested = 1 THEN NULL ELSE jobs.id END,
             finished_at = ",
    );
    end_jobs.push_bind(now.as_str());
    end_jobs.push(
        ", done_seq = (SELECT COALESCE(MAX(done_seq), 0) FROM jobs) + v.seq
         FROM v WHERE jobs.id = v.id AND jobs.status IN ('queued', 'running')
         RETURNING jobs.id, jobs.status",
    );
    let rows = end_jobs.build().fetch_all(&mut *tx).await?;
    let mut ended: Vec<Option<Status>> = vec![None; pages.len()];
    for row in &rows {
        let id: String = row.try_get(0)?;
        let status: String = row.try_get(1)?;
        let status = Status::parse(&status).ok_or_else(|| Error::Corrupt {
            what: "job status",
            detail: status,
        })?;
        if let Some(index) = pages.iter().position(|page| page.job_id == id) {
            ended[index] = Some(status);
        }
    }
    let stored: Vec<&PendingPage> = pages
        .iter()
        .zip(&ended)
        .filter(|(_, ended)| **ended == Some(Status::Succeeded))
        .map(|(page, _)| page)
        .collect();
    if !stored.is_empty() {
        let mut blobs: Vec<&Blob> = Vec::with_capacity(stored.len() * 2);
        for page in &stored {
            for blob in [&page.text_blob, &page.raw_blob] {
                if !blobs.iter().any(|seen| seen.sha256 == blob.sha256) {
                    blobs.push(blob);
                }
            }
        }
        let mut insert_blobs = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT OR IGNORE INTO blobs (sha256, codec, size, bytes) ",
        );
        insert_blobs.push_values(blobs, |mut row, blob| {
            row.push_bind(blob.sha256.as_str())
                .push_bind(blob.codec)
                .push_bind(blob.size as i64)
                .push_bind(blob.bytes.as_slice());
        });
        insert_blobs.build().execute(&mut *tx).await?;
        let mut insert_pages = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT OR IGNORE INTO pages (id, url, final_url, options_hash, status, content_type,
                 title, fetched_at, fetched_at_ms, content_hash, raw_hash, lines, info,
                 headers, ip, archive_state) ",
        );
        insert_pages.push_values(&stored, |mut row, page| {
            row.push_bind(page.job_id.as_str())
                .push_bind(page.url.as_str())
                .push_bind(page.final_url.as_str())
                .push_bind(page.options_hash.as_str())
                .push_bind(page.status)
                .push_bind(page.content_type.as_str())
                .push_bind(page.title.as_deref())
                .push_bind(page.fetched_at.as_str())
                .push_bind(page.fetched_at_ms)
                .push_bind(page.text_blob.sha256.as_str())
                .push_bind(page.raw_blob.sha256.as_str())
                .push_bind(page.lines)
                .push_bind(page.info.as_str())
                .push_bind(page.headers.as_str())
                .push_bind(page.ip.as_deref())
                .push_bind(page.archive.then_some("pending"));
        });
        insert_pages.build().execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(ended)
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

fn archive_page_from_row(row: &sqlx::sqlite::SqliteRow) -> Result<ArchivePage, Error> {
    let info: String = row.try_get("info")?;
    let headers: Option<String> = row.try_get("headers")?;
    Ok(ArchivePage {
        id: row.try_get("id")?,
        url: row.try_get("url")?,
        info: from_json(&info, "page info")?,
        content_hash: row.try_get("content_hash")?,
        raw_hash: row.try_get("raw_hash")?,
        fetched_at_ms: row.try_get("fetched_at_ms")?,
        headers: headers
            .map(|text| from_json(&text, "page headers"))
            .transpose()?
            .unwrap_or_default(),
        ip: row.try_get("ip")?,
        warc_record_id: row.try_get("warc_record_id")?,
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
