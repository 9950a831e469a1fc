//! The distributed store engine: one PostgreSQL database shared by every trawl process,
//! migrations from `migrations/postgres` (the same numbers and names as SQLite's).
//!
//! Transactions run at READ COMMITTED. Where SQLite relies on its single writer, this engine
//! locks what it reads before writing (`SELECT … FOR UPDATE`), and lets a job's `UPDATE …
//! WHERE status IN ('queued', 'running')` decide the first end: a second end waits for the
//! first one's row lock, then finds the job ended.
//!
//! `done_seq`: a transaction that ends jobs draws their numbers from the `jobs_done_seq`
//! sequence as its last statement, while holding a transaction-scoped advisory lock
//! ([`DONE_SEQ_LOCK`]) that is released at commit. So numbers are unique and increase in the
//! order the ends were committed: a reader paging by `done_seq` never sees a later number
//! before an earlier one is visible. A rolled-back transaction leaves a gap. The lock is
//! taken after every row lock of the transaction, and nothing waits on a row while holding
//! it, so it adds no deadlock.
//!
//! Not here: what both engines share (`blob`, `rows`, `writer`), and the interface (`Store`).

use std::collections::HashMap;
use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres, Row};
use trawl_workers::job::JobError;

use super::blob::Blob;
use super::rows::{self, Columns as _, JOB_COLUMNS, PAGE_COLUMNS, now_rfc3339, to_json};
use super::writer::{Batches, PendingPage, ended_ids, ended_per_page};
use super::{
    ArchivePage, BatchSummary, Cancel, CrawlCounters, CrawlRecord, EndedJob, Error, Followed,
    Found, JobRecord, NewBatch, NewJob, Outcome, PageRecord, Status, WarcRef,
};

/// The advisory lock that orders `done_seq` by commit (any constant; advisory locks are per
/// database, so stores in other databases do not share it).
const DONE_SEQ_LOCK: i64 = 0x7472_6177_6c64_6f6e;

/// Crawl URL keys inserted by one statement at most.
const CRAWL_URLS_PER_INSERT: usize = 1_000;

/// The PostgreSQL engine, cheap to clone (a connection pool).
#[derive(Debug, Clone)]
pub(super) struct PgStore {
    pub(super) pool: PgPool,
}

type Transaction = sqlx::Transaction<'static, Postgres>;

impl PgStore {
    /// Connects to the database at a `postgres://` URL and runs the migrations.
    pub(super) async fn connect(url: &str) -> Result<PgStore, Error> {
        let options = PgConnectOptions::from_str(url)?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await?;
        // The migrator holds an advisory lock: processes starting together migrate once.
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(PgStore { pool })
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
        let mut tx = self.pool.begin().await?;
        if let Some(batch) = batch {
            sqlx::query(
                "INSERT INTO batches (id, webhook, total, created_at) VALUES ($1, $2, $3, $4)",
            )
            .bind(&batch.id)
            .bind(&batch.webhook)
            .bind(batch.total as i64)
            .bind(&now)
            .execute(&mut *tx)
            .await?;
        }
        for chunk in jobs.chunks(rows::JOBS_PER_INSERT) {
            rows::insert_jobs::<Postgres>(chunk, &now)
                .build()
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn request_cancel(&self, id: &str) -> Result<Cancel, Error> {
        let mut tx = self.pool.begin().await?;
        let row = sqlx::query("SELECT status FROM jobs WHERE id = $1 FOR UPDATE")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(row) = row else {
            return Ok(Cancel::Unknown);
        };
        let status = rows::status(row.text("status")?)?;
        if !status.is_terminal() {
            sqlx::query("UPDATE jobs SET cancel_requested = 1 WHERE id = $1")
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
        // Two claimers: the second waits for the first one's row lock, then re-checks
        // `completed_notified` on the updated row and matches nothing.
        let claimed = sqlx::query(
            "UPDATE batches SET completed_notified = 1
             WHERE id = $1 AND completed_notified = 0
               AND NOT EXISTS (SELECT 1 FROM jobs WHERE batch_id = $1 AND status IN ('queued', 'running'))
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
            "UPDATE jobs SET error = $1, error_code = $2 WHERE id = $3 AND status = 'running'",
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
        let mut tx = self.pool.begin().await?;
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
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{PAGE_COLUMNS} WHERE url = $1 AND options_hash = $2 AND fetched_at_ms >= $3
             ORDER BY fetched_at_ms DESC LIMIT 1"
        )))
        .bind(url)
        .bind(options_hash)
        .bind(since_ms)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| rows::page(&row)).transpose()
    }

    pub(super) async fn latest_page(&self, url: &str) -> Result<Option<PageRecord>, Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "{PAGE_COLUMNS} WHERE url = $1 OR final_url = $1 ORDER BY fetched_at_ms DESC LIMIT 1"
        )))
        .bind(url)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| rows::page(&row)).transpose()
    }

    pub(super) async fn request_archive(&self, urls: &[String]) -> Result<Vec<String>, Error> {
        let mut tx = self.pool.begin().await?;
        let mut missing = Vec::new();
        for url in urls {
            let changed = sqlx::query(
                "UPDATE pages SET archive_state = 'pending', archived_at = NULL
                 WHERE id = (SELECT id FROM pages WHERE url = $1 OR final_url = $1
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
             WHERE id = $1 AND archive_state IS DISTINCT FROM 'archived'",
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
        // `rowid` is an identity column: numbered at insert, so a page committed late may
        // fall behind the cursor; the archive pool resets its cursor at every commit.
        let found = sqlx::query(
            "SELECT rowid, id, url, content_hash, raw_hash, fetched_at_ms, info, headers, ip,
                    warc_record_id
             FROM pages WHERE archive_state = 'pending' AND rowid > $1 ORDER BY rowid LIMIT $2",
        )
        .bind(after_rowid)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(rows::archive_page).collect()
    }

    pub(super) async fn archive_pending(&self) -> Result<u64, Error> {
        let count: i64 =
            sqlx::query_scalar("SELECT COUNT(*) FROM pages WHERE archive_state = 'pending'")
                .fetch_one(&self.pool)
                .await?;
        Ok(count.max(0) as u64)
    }

    pub(super) async fn record_warc(&self, written: &[WarcRef]) -> Result<(), Error> {
        let mut tx = self.pool.begin().await?;
        for record in written {
            sqlx::query(
                "UPDATE pages SET warc_record_id = $1, warc_file = $2, warc_offset = $3
                 WHERE id = $4",
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
        sqlx::query("UPDATE pages SET archive_state = $1, archived_at = $2 WHERE id = ANY($3)")
            .bind(state)
            .bind(now_rfc3339())
            .bind(page_ids)
            .execute(&self.pool)
            .await?;
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
             WHERE url = $1 AND raw_hash = $2 AND warc_record_id IS NOT NULL
               AND fetched_at_ms <= $3
             ORDER BY fetched_at_ms DESC LIMIT 1",
        )
        .bind(url)
        .bind(raw_hash)
        .bind(before_ms)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|row| Ok((row.text("warc_record_id")?, row.int("fetched_at_ms")?)))
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
             WHERE pages.rowid > $1
               AND ($2::text IS NULL OR starts_with(pages.final_url, $2::text)
                    OR starts_with(pages.url, $2::text))
               AND ($3::text IS NULL OR jobs.batch_id = $3::text)
               AND ($4::text IS NULL OR jobs.crawl_id = $4::text)
             ORDER BY pages.rowid LIMIT $5",
        )
        .bind(after_rowid)
        .bind(url_prefix)
        .bind(batch_id)
        .bind(crawl_id)
        .bind(i64::from(limit))
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
            "INSERT INTO crawls (id, spec, status, created_at) VALUES ($1, $2, 'running', $3)",
        )
        .bind(id)
        .bind(spec.to_string())
        .bind(now_rfc3339())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    pub(super) async fn crawl(&self, id: &str) -> Result<Option<CrawlRecord>, Error> {
        let row = sqlx::query("SELECT * FROM crawls WHERE id = $1")
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| rows::crawl(&row)).transpose()
    }

    pub(super) async fn crawl_url_seen(&self, crawl_id: &str, key: &str) -> Result<bool, Error> {
        let row = sqlx::query("SELECT 1 FROM crawl_urls WHERE crawl_id = $1 AND url_key = $2")
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
        // Keys are inserted in one fixed order, so two workers adding overlapping sets wait on
        // each other instead of deadlocking; the crawl row is locked after them.
        let mut keys: Vec<&str> = found.iter().map(|found| found.key).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut tx = self.pool.begin().await?;
        let mut new = std::collections::HashSet::new();
        for chunk in keys.chunks(CRAWL_URLS_PER_INSERT) {
            let added: Vec<String> = sqlx::query_scalar(
                "INSERT INTO crawl_urls (crawl_id, url_key)
                 SELECT $1, url_key FROM unnest($2::text[]) AS keys(url_key)
                 ON CONFLICT DO NOTHING RETURNING url_key",
            )
            .bind(crawl_id)
            .bind(chunk)
            .fetch_all(&mut *tx)
            .await?;
            new.extend(added);
        }
        let (mut followed, wanted) = Followed::tally(found, new, counted);
        let granted = if wanted.is_empty() {
            0
        } else {
            let queued: Option<i64> = sqlx::query_scalar(
                "SELECT queued FROM crawls WHERE id = $1 AND status = 'running' FOR UPDATE",
            )
            .bind(crawl_id)
            .fetch_optional(&mut *tx)
            .await?;
            queued.map_or(0, |queued| max_pages.saturating_sub(queued.max(0) as u64))
        };
        let jobs = followed.grant(wanted, granted);
        let now = now_rfc3339();
        for chunk in jobs.chunks(rows::JOBS_PER_INSERT) {
            rows::insert_jobs::<Postgres>(chunk.iter().copied(), &now)
                .build()
                .execute(&mut *tx)
                .await?;
        }
        if followed.counters != CrawlCounters::default() {
            rows::add_crawl_counters::<Postgres>(crawl_id, &followed.counters)
                .build()
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(followed)
    }

    pub(super) async fn queued_jobs(&self, ids: &[String]) -> Result<Vec<String>, Error> {
        Ok(
            sqlx::query_scalar("SELECT id FROM jobs WHERE id = ANY($1) AND status = 'queued'")
                .bind(ids)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    pub(super) async fn complete_crawl_if_done(&self, crawl_id: &str) -> Result<bool, Error> {
        let done = sqlx::query(
            "UPDATE crawls SET status = 'completed', finished_at = $1
             WHERE id = $2 AND status = 'running'
               AND NOT EXISTS (SELECT 1 FROM jobs WHERE crawl_id = $2 AND status IN ('queued', 'running'))",
        )
        .bind(now_rfc3339())
        .bind(crawl_id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        Ok(done > 0)
    }

    pub(super) async fn complete_idle_crawls(&self) -> Result<u64, Error> {
        let query = super::COMPLETE_IDLE_CRAWLS.replace("{now}", "$1");
        Ok(sqlx::query(sqlx::AssertSqlSafe(query))
            .bind(now_rfc3339())
            .execute(&self.pool)
            .await?
            .rows_affected())
    }

    pub(super) async fn cancel_crawl(&self, crawl_id: &str) -> Result<bool, Error> {
        // The crawl first, in a transaction of its own: a page's end locks its job and then
        // its crawl (the counters), so holding the crawl while waiting for jobs could deadlock.
        let changed = sqlx::query(
            "UPDATE crawls SET status = 'cancelled', finished_at = $1
             WHERE id = $2 AND status = 'running'",
        )
        .bind(now_rfc3339())
        .bind(crawl_id)
        .execute(&self.pool)
        .await?
        .rows_affected();
        if changed == 0 {
            return Ok(false);
        }
        // Then its jobs, never waiting on a row another transaction holds (SKIP LOCKED: no
        // lock cycle with a group of pages ending), until none is left unmarked.
        for _ in 0..100 {
            sqlx::query(
                "UPDATE jobs SET cancel_requested = 1 WHERE id IN (
                     SELECT id FROM jobs WHERE crawl_id = $1 AND status IN ('queued', 'running')
                       AND cancel_requested = 0
                     FOR UPDATE SKIP LOCKED)",
            )
            .bind(crawl_id)
            .execute(&self.pool)
            .await?;
            let left: i64 = sqlx::query_scalar(
                "SELECT COUNT(*) FROM jobs WHERE crawl_id = $1 AND status IN ('queued', 'running')
                   AND cancel_requested = 0",
            )
            .bind(crawl_id)
            .fetch_one(&self.pool)
            .await?;
            if left == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(true)
    }

    pub(super) async fn page(&self, id: &str) -> Result<Option<PageRecord>, Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("{PAGE_COLUMNS} WHERE id = $1")))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(|row| rows::page(&row)).transpose()
    }

    pub(super) async fn blob(&self, sha256: &str) -> Result<Option<Vec<u8>>, Error> {
        let row = sqlx::query("SELECT codec, bytes FROM blobs WHERE sha256 = $1")
            .bind(sha256)
            .fetch_optional(&self.pool)
            .await?;
        let Some(row) = row else { return Ok(None) };
        Blob::unpack(&row.text("codec")?, row.try_get("bytes")?).map(Some)
    }

    pub(super) async fn job(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!("{JOB_COLUMNS} WHERE id = $1")))
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
             WHERE batch_id = $1 AND done_seq > $2 ORDER BY done_seq LIMIT $3",
        )
        .bind(batch_id)
        .bind(after_seq)
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(rows::ended_job).collect()
    }

    pub(super) async fn count_by_status(
        &self,
        batch_id: Option<&str>,
    ) -> Result<Vec<(Status, u64)>, Error> {
        // COLLATE "C": the byte order SQLite sorts text in.
        let found = sqlx::query(
            "SELECT status, COUNT(*) AS n FROM jobs WHERE $1::text IS NULL OR batch_id = $1::text
             GROUP BY status ORDER BY status COLLATE \"C\"",
        )
        .bind(batch_id)
        .fetch_all(&self.pool)
        .await?;
        found.iter().map(rows::status_count).collect()
    }

    pub(super) async fn count_errors(&self, batch_id: &str) -> Result<Vec<(String, u64)>, Error> {
        let found = sqlx::query(
            "SELECT error_code, COUNT(*) AS n FROM jobs
             WHERE batch_id = $1 AND status IN ('failed', 'dead')
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

impl Batches for PgStore {
    async fn start_group(&self, ids: &[&str]) -> Result<HashMap<String, (u32, u32)>, Error> {
        let found = sqlx::query(
            "UPDATE jobs SET attempts = attempts + 1, status = 'running', started_at = $1
             WHERE id = ANY($2) AND status IN ('queued', 'running') AND cancel_requested = 0
             RETURNING id, attempts, max_attempts",
        )
        .bind(now_rfc3339())
        .bind(ids)
        .fetch_all(&self.pool)
        .await?;
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
        let mut tx = self.pool.begin().await?;
        let mut end_jobs = sqlx::QueryBuilder::<Postgres>::new(
            "UPDATE jobs SET status = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE 'succeeded' END,
                 result = CASE WHEN cancel_requested = 1 THEN NULL ELSE v.result END,
                 page_id = CASE WHEN cancel_requested = 1 THEN NULL ELSE jobs.id END,
                 finished_at = ",
        );
        end_jobs.push_bind(now_rfc3339());
        end_jobs.push(" FROM (");
        // VALUES has no column types of its own: the casts give them.
        end_jobs.push_values(pages, |mut row, page| {
            row.push_bind(page.job_id.as_str())
                .push_unseparated("::text")
                .push_bind(page.result.as_str())
                .push_unseparated("::text")
                .push_bind(page.attempt)
                .push_unseparated("::bigint");
        });
        end_jobs.push(
            ") AS v(id, result, attempt)
             WHERE jobs.id = v.id AND jobs.status IN ('queued', 'running')
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
            let mut insert_blobs = sqlx::QueryBuilder::<Postgres>::new(
                "INSERT INTO blobs (sha256, codec, size, bytes) ",
            );
            insert_blobs.push_values(PendingPage::distinct_blobs(&stored), |mut row, blob| {
                row.push_bind(blob.sha256.as_str())
                    .push_bind(blob.codec)
                    .push_bind(blob.size as i64)
                    .push_bind(blob.bytes.as_slice());
            });
            insert_blobs.push(" ON CONFLICT DO NOTHING");
            insert_blobs.build().execute(&mut *tx).await?;
            let mut insert_pages = sqlx::QueryBuilder::<Postgres>::new(
                "INSERT INTO pages (id, url, final_url, options_hash, status, content_type,
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
            insert_pages.push(" ON CONFLICT DO NOTHING");
            insert_pages.build().execute(&mut *tx).await?;
        }
        let ended_jobs = ended_ids(pages, &ended);
        count_crawl_ends(&mut tx, &ended_jobs).await?;
        number_ended(&mut tx, &ended_jobs).await?;
        tx.commit().await?;
        Ok(ended)
    }
}

/// Ends a job in `tx`, first end wins (see `Store::finish`), and numbers it.
async fn finish_in(
    tx: &mut Transaction,
    id: &str,
    outcome: &Outcome,
    attempt: Option<u32>,
) -> Result<Option<Status>, Error> {
    let ending = outcome.ending();
    // A cancel request wins over whatever the attempt produced.
    let done = sqlx::query(
        "UPDATE jobs SET status = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE $1::text END,
             result = CASE WHEN cancel_requested = 1 THEN NULL ELSE $2::text END,
             page_id = CASE WHEN cancel_requested = 1 THEN NULL ELSE $3::text END,
             error = COALESCE($4::text, error), error_code = COALESCE($5::text, error_code),
             finished_at = $6
         WHERE id = $7 AND status IN ('queued', 'running')
           AND ($8::bigint IS NULL OR attempts = $8::bigint)
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
    number_ended(tx, &[id]).await?;
    Ok(Some(status))
}

/// Counts the crawl pages among the jobs `ids`, just ended in `tx`, in their crawls' counters
/// (see `CRAWL_ENDS`).
async fn count_crawl_ends(tx: &mut Transaction, ids: &[&str]) -> Result<(), Error> {
    if ids.is_empty() {
        return Ok(());
    }
    let mut update = sqlx::QueryBuilder::<Postgres>::new(
        "UPDATE crawls SET fetched = crawls.fetched + c.n_fetched,
             failed = crawls.failed + c.n_failed,
             skipped_robots = crawls.skipped_robots + c.n_robots,
             skipped_duplicate = crawls.skipped_duplicate + c.n_duplicates FROM (",
    );
    update.push(super::CRAWL_ENDS);
    update.push("id = ANY(");
    update.push_bind(ids);
    update.push(") GROUP BY crawl_id) AS c WHERE crawls.id = c.crawl_id");
    update.build().execute(&mut **tx).await?;
    Ok(())
}

/// Gives the jobs `ids`, ended by `tx`, their `done_seq`: the last statement before the
/// commit, under [`DONE_SEQ_LOCK`] (see the module documentation).
async fn number_ended(tx: &mut Transaction, ids: &[&str]) -> Result<(), Error> {
    if ids.is_empty() {
        return Ok(());
    }
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(DONE_SEQ_LOCK)
        .execute(&mut **tx)
        .await?;
    sqlx::query("UPDATE jobs SET done_seq = nextval('jobs_done_seq') WHERE id = ANY($1)")
        .bind(ids)
        .execute(&mut **tx)
        .await?;
    Ok(())
}
