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
//! Not here: the queries both engines share (`jobs`, `pages`, `crawls`, `sessions`), and
//! the interface (`Store`).

use std::str::FromStr;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPoolOptions};
use sqlx::{Connection as _, PgPool, Postgres};

use super::Error;
use super::dialect::{Dialect, Tx};
use super::pages::{END_PAGES, END_PAGES_WHERE};
use super::rows::now_rfc3339;
use super::writer::PendingPage;

/// The advisory lock that orders `done_seq` by commit (any constant; advisory locks are per
/// database, so stores in other databases do not share it).
const DONE_SEQ_LOCK: i64 = 0x7472_6177_6c64_6f6e;

/// The PostgreSQL engine, cheap to clone (a connection pool).
#[derive(Debug, Clone)]
pub(super) struct PgStore {
    pub(super) pool: PgPool,
}

impl PgStore {
    /// Connects to the database at a `postgres://` URL and runs the migrations. One first
    /// connection is tried alone within `connect_timeout`: the pool would retry a refused
    /// connection until its acquire timeout (30 s, long enough for busy moments later) and
    /// then report only that it timed out.
    pub(super) async fn connect(url: &str, connect_timeout: Duration) -> Result<PgStore, Error> {
        let options = PgConnectOptions::from_str(url)?;
        match tokio::time::timeout(connect_timeout, PgConnection::connect_with(&options)).await {
            Ok(Ok(connection)) => {
                // Closing politely is not worth waiting for.
                drop(connection);
            }
            Ok(Err(error)) if is_unreachable(&error) => {
                return Err(Error::Unreachable(error.to_string()));
            }
            Ok(Err(error)) => return Err(error.into()),
            Err(_) => {
                return Err(Error::Unreachable(format!(
                    "no answer within {} s",
                    connect_timeout.as_secs_f32()
                )));
            }
        }
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await?;
        // The migrator holds an advisory lock: processes starting together migrate once.
        sqlx::migrate!("./migrations/postgres").run(&pool).await?;
        Ok(PgStore { pool })
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

    pub(super) async fn queued_jobs(&self, ids: &[String]) -> Result<Vec<String>, Error> {
        Ok(
            sqlx::query_scalar("SELECT id FROM jobs WHERE id = ANY($1) AND status = 'queued'")
                .bind(ids)
                .fetch_all(&self.pool)
                .await?,
        )
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
}

impl Dialect for PgStore {
    type Db = Postgres;

    const FOR_UPDATE: &'static str = " FOR UPDATE";

    const BYTE_ORDER: &'static str = " COLLATE \"C\"";

    const STATUS_BESIDE_IDS: &'static str = "status";

    const DONE_SEQ: &'static str = "";

    async fn write_transaction(&self) -> Result<Tx<Self>, Error> {
        Ok(self.pool.begin().await?)
    }

    fn push_in(builder: &mut sqlx::QueryBuilder<Postgres>, ids: &[&str]) {
        builder.push(" = ANY(");
        builder.push_bind(ids);
        builder.push(")");
    }

    fn starts_with(column: &str, prefix: &str) -> String {
        format!("starts_with({column}, {prefix})")
    }

    /// Numbers the jobs under [`DONE_SEQ_LOCK`] (see the module documentation).
    async fn number_ended(tx: &mut Tx<Self>, ids: &[&str]) -> Result<(), Error> {
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

    fn end_pages(pages: &[PendingPage]) -> sqlx::QueryBuilder<Postgres> {
        let mut end_jobs = sqlx::QueryBuilder::new(END_PAGES);
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
        end_jobs.push(") AS v(id, result, attempt)");
        end_jobs.push(END_PAGES_WHERE);
        end_jobs
    }

    const CRAWL_KEYS_PER_INSERT: usize = 1_000;

    fn add_crawl_keys(crawl_id: &str, keys: &[&str]) -> sqlx::QueryBuilder<Postgres> {
        let mut insert =
            sqlx::QueryBuilder::new("INSERT INTO crawl_urls (crawl_id, url_key) SELECT ");
        insert.push_bind(crawl_id);
        insert.push(", url_key FROM unnest(");
        insert.push_bind(keys);
        insert.push("::text[]) AS keys(url_key) ON CONFLICT DO NOTHING RETURNING url_key");
        insert
    }
}

/// Whether a failed connection means the server is not there (down, refusing, an unknown
/// host, TLS failing) rather than refusing us (credentials, a missing database).
fn is_unreachable(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Io(_) | sqlx::Error::Tls(_))
}
