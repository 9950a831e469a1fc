//! The embedded store engine: one SQLite file (WAL, `synchronous=NORMAL`), migrations from
//! `migrations/sqlite`. A separate file from the queue's, because apalis and trawl would
//! otherwise share one `_sqlx_migrations` table.
//!
//! Not here: what both engines share (`blob`, `rows`, `writer`), and the interface (`Store`).

use std::collections::HashMap;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use trawl_workers::job::JobError;

use super::blob::Blob;
use super::rows::{self, Columns as _, JOB_COLUMNS, PAGE_COLUMNS, now_rfc3339, to_json};
use super::writer::{Batches, PendingPage, ended_ids, ended_per_page};
use super::{
    ArchivePage, BatchSummary, Cancel, CrawlCounters, CrawlRecord, EndedJob, Error, Followed,
    Found, JobRecord, NewBatch, NewJob, Outcome, PageRecord, Status, WarcRef,
};

/// The SQLite engine, cheap to clone (a connection pool).
#[derive(Debug, Clone)]
pub(super) struct SqliteStore {
    pub(super) pool: SqlitePool,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path` and runs the migrations.
    pub(super) async fn open(path: &Path) -> Result<SqliteStore, Error> {
        SqliteStore::connect(&format!("sqlite://{}", path.display())).await
    }

    /// Opens (creating if needed) the store at a `sqlite://` URL and runs the migrations.
    pub(super) async fn connect(url: &str) -> Result<SqliteStore, Error> {
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(30));
        // sqlx takes no lock for SQLite migrations: two processes opening a new store at once
        // (`trawl serve --no-pools` and `trawl work` started together) would both create the
        // tables, and switching a new file to WAL fails while another connection holds it. A
        // file lock beside the database lets one connect and migrate while the others wait.
        let lock = super::lock_sqlite_migrations(options.get_filename())
            .await
            .map_err(Error::Lock)?;
        let pool = SqlitePoolOptions::new()
            // Few connections: writes are serialised anyway, and each connection's page cache
            // is dropped whenever another one writes.
            .max_connections(4)
            .connect_with(options.clone())
            .await?;
        sqlx::migrate!("./migrations/sqlite").run(&pool).await?;
        // Closing the file releases the lock.
        drop(lock);
        Ok(SqliteStore { pool })
    }

    /// Begins a transaction that takes the write lock at once. A deferred transaction that
    /// reads first and writes later fails with SQLITE_BUSY, without waiting, when another
    /// writer committed in between; an immediate one waits for the lock (busy_timeout).
    async fn write_transaction(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>, Error> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    pub(super) async fn ping(&self) -> Result<(), Error> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    pub(super) async fn submit(
        &self,
        batch: Option<&NewBatch>,
        jobs: &[NewJob],
    ) -> Result<(), Error> {
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
        for chunk in jobs.chunks(rows::JOBS_PER_INSERT) {
            rows::insert_jobs::<sqlx::Sqlite>(chunk, &now)
                .build()
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn request_cancel(&self, id: &str) -> Result<Cancel, Error> {
        let mut tx = self.write_transaction().await?;
        let row = sqlx::query("SELECT status FROM jobs WHERE id = ?")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Ok(Cancel::Unknown);
        };
        let status = rows::status(row.text("status")?)?;
        if !status.is_terminal() {
            sqlx::query("UPDATE jobs SET cancel_requested = 1 WHERE id = ?")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        let outcome = match status {
            Status::Queued => {
                finish_in(&mut tx, id, &Outcome::Cancelled, None).await?;
                Cancel::Cancelled
            }
            Status::Running => Cancel::Requested,
            ended => Cancel::AlreadyEnded(ended),
        };
        tx.commit().await?;
        Ok(outcome)
    }

    pub(super) async fn claim_batch_completion(
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
            webhook: row.opt_text("webhook")?,
            counts: self.count_by_status(Some(batch_id)).await?,
        }))
    }

    pub(super) async fn record_retry(&self, id: &str, error: &JobError) -> Result<(), Error> {
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

    pub(super) async fn finish(
        &self,
        id: &str,
        outcome: &Outcome,
        attempt: Option<u32>,
    ) -> Result<Option<Status>, Error> {
        let mut tx = self.write_transaction().await?;
        let ended = finish_in(&mut tx, id, outcome, attempt).await?;
        tx.commit().await?;
        Ok(ended)
    }

    pub(super) async fn cached_page(
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
        row.map(|row| rows::page(&row)).transpose()
    }

    pub(super) async fn latest_page(&self, url: &str) -> Result<Option<PageRecord>, Error> {
        let row = sqlx::query(
            "SELECT id, content_hash, lines, fetched_at_ms, info FROM pages
             WHERE url = ?1 OR final_url = ?1
             ORDER BY fetched_at_ms DESC LIMIT 1",
        )
        .bind(url)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| rows::page(&row)).transpose()
    }

    pub(super) async fn request_archive(&self, urls: &[String]) -> Result<Vec<String>, Error> {
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

    pub(super) async fn request_archive_page(&self, page_id: &str) -> Result<(), Error> {
        sqlx::query(
            "UPDATE pages SET archive_state = 'pending'
             WHERE id = ? AND archive_state IS DISTINCT FROM 'archived'",
        )
        .bind(page_id)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(super) async fn archive_backlog(
        &self,
        after_rowid: i64,
        limit: u32,
    ) -> Result<Vec<(ArchivePage, i64)>, Error> {
        let found = sqlx::query(
            "SELECT rowid, id, url, content_hash, raw_hash, fetched_at_ms, info, headers, ip,
                    warc_record_id
             FROM pages WHERE archive_state = 'pending' AND rowid > ? ORDER BY rowid LIMIT ?",
        )
        .bind(after_rowid)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(rows::archive_page).collect()
    }

    pub(super) async fn archive_pending(&self) -> Result<u64, Error> {
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM pages WHERE archive_state = 'pending'")
                .fetch_one(&self.pool)
                .await?;
        Ok(count as u64)
    }

    pub(super) async fn record_warc(&self, written: &[WarcRef]) -> Result<(), Error> {
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

    pub(super) async fn mark_archived(
        &self,
        page_ids: &[String],
        state: &str,
    ) -> Result<(), Error> {
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

    pub(super) async fn warc_original(
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

    pub(super) async fn export_pages(
        &self,
        url_prefix: Option<&str>,
        batch_id: Option<&str>,
        crawl_id: Option<&str>,
        after_rowid: i64,
        limit: u32,
    ) -> Result<Vec<(ArchivePage, i64)>, Error> {
        let found = sqlx::query(
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
        found.iter().map(rows::archive_page).collect()
    }

    pub(super) async fn create_crawl(
        &self,
        id: &str,
        spec: &serde_json::Value,
    ) -> Result<(), Error> {
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

    pub(super) async fn crawl(&self, id: &str) -> Result<Option<CrawlRecord>, Error> {
        let row = sqlx::query("SELECT * FROM crawls WHERE id = ?")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| rows::crawl(&row)).transpose()
    }

    pub(super) async fn crawl_url_seen(&self, crawl_id: &str, key: &str) -> Result<bool, Error> {
        let row = sqlx::query("SELECT 1 FROM crawl_urls WHERE crawl_id = ? AND url_key = ?")
            .bind(crawl_id)
            .bind(key)
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.is_some())
    }

    pub(super) async fn follow_crawl(
        &self,
        crawl_id: &str,
        max_pages: u64,
        found: &[Found<'_>],
        counted: &CrawlCounters,
    ) -> Result<Followed, Error> {
        let mut tx = self.write_transaction().await?;
        let mut keys: Vec<&str> = found.iter().map(|found| found.key).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut new = std::collections::HashSet::new();
        for batch in keys.chunks(400) {
            let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                "INSERT INTO crawl_urls (crawl_id, url_key) ",
            );
            insert.push_values(batch, |mut row, key| {
                row.push_bind(crawl_id).push_bind(*key);
            });
            insert.push(" ON CONFLICT DO NOTHING RETURNING url_key");
            for row in insert.build().fetch_all(&mut *tx).await? {
                new.insert(row.try_get::<String, _>(0)?);
            }
        }
        let (mut followed, wanted) = Followed::tally(found, new, counted);
        let granted = if wanted.is_empty() {
            0
        } else {
            let queued: Option<i64> =
                sqlx::query_scalar("SELECT queued FROM crawls WHERE id = ? AND status = 'running'")
                    .bind(crawl_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            queued.map_or(0, |queued| max_pages.saturating_sub(queued.max(0) as u64))
        };
        let jobs = followed.grant(wanted, granted);
        let now = now_rfc3339();
        for chunk in jobs.chunks(rows::JOBS_PER_INSERT) {
            rows::insert_jobs::<sqlx::Sqlite>(chunk.iter().copied(), &now)
                .build()
                .execute(&mut *tx)
                .await?;
        }
        if followed.counters != CrawlCounters::default() {
            rows::add_crawl_counters::<sqlx::Sqlite>(crawl_id, &followed.counters)
                .build()
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(followed)
    }

    pub(super) async fn queued_jobs(&self, ids: &[String]) -> Result<Vec<String>, Error> {
        let mut queued = Vec::new();
        for batch in ids.chunks(400) {
            let mut select = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                "SELECT id FROM jobs WHERE status = 'queued' AND id IN (",
            );
            let mut list = select.separated(", ");
            for id in batch {
                list.push_bind(id.as_str());
            }
            select.push(")");
            for row in select.build().fetch_all(&self.pool).await? {
                queued.push(row.try_get::<String, _>(0)?);
            }
        }
        Ok(queued)
    }

    pub(super) async fn complete_crawl_if_done(&self, crawl_id: &str) -> Result<bool, Error> {
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

    pub(super) async fn complete_idle_crawls(&self) -> Result<u64, Error> {
        let query = super::COMPLETE_IDLE_CRAWLS.replace("{now}", "?");
        Ok(sqlx::query(sqlx::AssertSqlSafe(query))
            .bind(now_rfc3339())
            .execute(&self.pool)
            .await?
            .rows_affected())
    }

    pub(super) async fn cancel_crawl(&self, crawl_id: &str) -> Result<bool, Error> {
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

    pub(super) async fn page(&self, id: &str) -> Result<Option<PageRecord>, Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("{PAGE_COLUMNS} WHERE id = ?")))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| rows::page(&row)).transpose()
    }

    pub(super) async fn blob(&self, sha256: &str) -> Result<Option<Vec<u8>>, Error> {
        let row = sqlx::query("SELECT codec, bytes FROM blobs WHERE sha256 = ?")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        Blob::unpack(&row.text("codec")?, row.try_get("bytes")?).map(Some)
    }

    pub(super) async fn job(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("{JOB_COLUMNS} WHERE id = ?")))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| rows::job(&row)).transpose()
    }

    pub(super) async fn ended_since(
        &self,
        batch_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<EndedJob>, Error> {
        let found = sqlx::query(
            "SELECT id, url, status, done_seq, result, error FROM jobs
             WHERE batch_id = ? AND done_seq > ? ORDER BY done_seq LIMIT ?",
        )
        .bind(batch_id)
        .bind(after_seq)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(rows::ended_job).collect()
    }

    pub(super) async fn count_by_status(
        &self,
        batch_id: Option<&str>,
    ) -> Result<Vec<(Status, u64)>, Error> {
        let found = sqlx::query(
            "SELECT status, COUNT(*) AS n FROM jobs WHERE ?1 IS NULL OR batch_id = ?1
             GROUP BY status ORDER BY status",
        )
        .bind(batch_id)
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(rows::status_count).collect()
    }

    pub(super) async fn count_errors(&self, batch_id: &str) -> Result<Vec<(String, u64)>, Error> {
        let found = sqlx::query(
            "SELECT error_code, COUNT(*) AS n FROM jobs
             WHERE batch_id = ? AND status IN ('failed', 'dead')
             GROUP BY error_code ORDER BY COUNT(*) DESC",
        )
        .bind(batch_id)
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(rows::error_count).collect()
    }

    pub(super) async fn close(&self) {
        self.pool.close().await;
    }
}

impl Batches for SqliteStore {
    async fn start_group(&self, ids: &[&str]) -> Result<HashMap<String, (u32, u32)>, Error> {
        let mut update = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "UPDATE jobs SET attempts = attempts + 1, status = 'running', started_at = ",
        );
        update.push_bind(now_rfc3339());
        update.push(" WHERE status IN ('queued', 'running') AND cancel_requested = 0 AND id IN (");
        let mut separated = update.separated(", ");
        for id in ids {
            separated.push_bind(*id);
        }
        update.push(") RETURNING id, attempts, max_attempts");
        let found = update.build().fetch_all(&self.pool).await?;
        found
            .iter()
            .map(|row| {
                let attempts = rows::small_count(row.int("attempts")?);
                let max_attempts = rows::small_count(row.int("max_attempts")?);
                Ok((row.text("id")?, (attempts, max_attempts)))
            })
            .collect()
    }

    async fn commit_group(&self, pages: &[PendingPage]) -> Result<Vec<Option<Status>>, Error> {
        let mut tx = self.write_transaction().await?;
        let now = now_rfc3339();
        let mut end_jobs =
            sqlx::QueryBuilder::<sqlx::Sqlite>::new("WITH v(id, result, seq, attempt) AS (");
        end_jobs.push_values(pages.iter().enumerate(), |mut row, (seq, page)| {
            row.push_bind(page.job_id.as_str())
                .push_bind(page.result.as_str())
                .push_bind(seq as i64 + 1)
                .push_bind(page.attempt);
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
               AND (v.attempt IS NULL OR jobs.attempts = v.attempt)
             RETURNING jobs.id AS id, jobs.status AS status",
        );
        let found = end_jobs.build().fetch_all(&mut *tx).await?;
        let ended = ended_per_page(pages, &found)?;
        let stored: Vec<&PendingPage> = pages
            .iter()
            .zip(&ended)
            .filter(|(_, ended)| **ended == Some(Status::Succeeded))
            .map(|(page, _)| page)
            .collect();
        if !stored.is_empty() {
            let mut insert_blobs = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                "INSERT OR IGNORE INTO blobs (sha256, codec, size, bytes) ",
            );
            insert_blobs.push_values(PendingPage::distinct_blobs(&stored), |mut row, blob| {
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
                    .push_bind(page.archive_state());
            });
            insert_pages.build().execute(&mut *tx).await?;
        }
        let ended_jobs = ended_ids(pages, &ended);
        count_crawl_ends(&mut tx, &ended_jobs).await?;
        tx.commit().await?;
        Ok(ended)
    }
}

/// Ends a job in `tx`, first end wins (see `Store::finish`).
async fn finish_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    id: &str,
    outcome: &Outcome,
    attempt: Option<u32>,
) -> Result<Option<Status>, Error> {
    let ending = outcome.ending();
    // A cancel request wins over whatever the attempt produced.
    let done = sqlx::query(
        "UPDATE jobs SET status = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE ?1 END,
             result = CASE WHEN cancel_requested = 1 THEN NULL ELSE ?2 END,
             page_id = CASE WHEN cancel_requested = 1 THEN NULL ELSE ?3 END,
             error = COALESCE(?4, error), error_code = COALESCE(?5, error_code),
             finished_at = ?6, done_seq = (SELECT COALESCE(MAX(done_seq), 0) + 1 FROM jobs)
         WHERE id = ?7 AND status IN ('queued', 'running') AND (?8 IS NULL OR attempts = ?8)
         RETURNING status",
    )
    .bind(ending.status)
    .bind(ending.result)
    .bind(ending.page_id)
    .bind(ending.error)
    .bind(ending.error_code)
    .bind(now_rfc3339())
    .bind(id)
    .bind(attempt.map(i64::from))
    .fetch_optional(&mut **tx)
    .await?;
    let Some(row) = done else { return Ok(None) };
    let status = rows::status(row.text("status")?)?;
    count_crawl_ends(tx, &[id]).await?;
    Ok(Some(status))
}

/// Counts the crawl pages among the jobs `ids`, just ended in `tx`, in their crawls' counters
/// (see `CRAWL_ENDS`).
async fn count_crawl_ends(
    tx: &mut sqlx::Transaction<'_, sqlx::Sqlite>,
    ids: &[&str],
) -> Result<(), Error> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut update = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
        "UPDATE crawls SET fetched = crawls.fetched + c.n_fetched,
             failed = crawls.failed + c.n_failed,
             skipped_robots = crawls.skipped_robots + c.n_robots,
             skipped_duplicate = crawls.skipped_duplicate + c.n_duplicates FROM (",
    );
    update.push(super::CRAWL_ENDS);
    update.push("id IN (");
    let mut separated = update.separated(", ");
    for id in ids {
        separated.push_bind(*id);
    }
    update.push(") GROUP BY crawl_id) AS c WHERE crawls.id = c.crawl_id");
    update.build().execute(&mut **tx).await?;
    Ok(())
}
