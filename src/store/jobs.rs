//! Jobs and batches, for both engines from one source (see `dialect`): submitting, starting
//! attempts, cancelling, ending (first end wins), and reading jobs back and counting them.
//!
//! Not here: storing a fetched page with its job's end (`pages`), a crawl's jobs (`crawls`),
//! and deciding what to retry (`runner`).

use std::collections::HashMap;

use trawl_workers::job::JobError;

use super::dialect::{Db, Dialect, Tx};
use super::rows::{self, Columns as _, JOB_COLUMNS, JOB_ENTRY_COLUMNS, now_rfc3339, to_json};
use super::writer::{Batches, CacheLookup, PendingPage};
use super::{
    BatchSummary, Cancel, EndedJob, Error, JobEntry, JobFilter, JobRecord, NewBatch, NewJob,
    Outcome, PageRecord, Status,
};

/// Jobs inserted by one statement at most (11 values each: within both engines' limits).
pub(super) const JOBS_PER_INSERT: usize = 1_000;

/// The statement that records `jobs` (at most [`JOBS_PER_INSERT`]) as queued at `now`.
pub(super) fn insert_jobs<'a, DB>(
    jobs: impl IntoIterator<Item = &'a NewJob>,
    now: &str,
) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    <DB as sqlx::Database>::Arguments: Default,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> Option<String>: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let mut insert = sqlx::QueryBuilder::new(
        "INSERT INTO jobs (id, kind, batch_id, url, params, status, max_attempts, created_at,
             webhook, crawl_id, tenant) ",
    );
    insert.push_values(jobs, |mut row, job| {
        row.push_bind(job.id.clone())
            .push_bind(job.kind.to_owned())
            .push_bind(job.batch_id.clone())
            .push_bind(job.url.clone())
            .push_bind(job.params.to_string())
            .push_bind("queued".to_owned())
            .push_bind(i64::from(job.max_attempts))
            .push_bind(now.to_owned())
            .push_bind(job.webhook.clone())
            .push_bind(job.crawl_id.clone())
            .push_bind(job.tenant.as_str().to_owned());
    });
    insert
}

macro_rules! job_queries {
    ($store:ty) => {
        impl $store {
            pub(super) async fn ping(&self) -> Result<(), Error> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            pub(super) async fn close(&self) {
                self.pool.close().await;
            }

            pub(super) async fn submit(
                &self,
                batch: Option<&NewBatch>,
                jobs: &[NewJob],
            ) -> Result<(), Error> {
                let now = now_rfc3339();
                let mut tx = self.write_transaction().await?;
                if let Some(batch) = batch {
                    sqlx::query(
                        "INSERT INTO batches (id, webhook, total, created_at, tenant)
                         VALUES ($1, $2, $3, $4, $5)",
                    )
                    .bind(&batch.id)
                    .bind(&batch.webhook)
                    .bind(batch.total as i64)
                    .bind(&now)
                    .bind(batch.tenant.as_str())
                    .execute(&mut *tx)
                    .await?;
                }
                for chunk in jobs.chunks(JOBS_PER_INSERT) {
                    insert_jobs::<Db<Self>>(chunk, &now)
                        .build()
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            pub(super) async fn add_follow_up_jobs(
                &self,
                batch_id: Option<&str>,
                jobs: &[NewJob],
            ) -> Result<(), Error> {
                let now = now_rfc3339();
                let mut tx = self.write_transaction().await?;
                for chunk in jobs.chunks(JOBS_PER_INSERT) {
                    let mut insert = insert_jobs::<Db<Self>>(chunk, &now);
                    insert.push(" ON CONFLICT DO NOTHING");
                    insert.build().execute(&mut *tx).await?;
                }
                if let Some(batch_id) = batch_id {
                    sqlx::query(
                        "UPDATE batches SET total = (SELECT COUNT(*) FROM jobs WHERE batch_id = $1)
                         WHERE id = $1",
                    )
                    .bind(batch_id)
                    .execute(&mut *tx)
                    .await?;
                }
                tx.commit().await?;
                Ok(())
            }

            pub(super) async fn request_cancel(&self, id: &str) -> Result<Cancel, Error> {
                let mut tx = self.write_transaction().await?;
                let select = format!("SELECT status FROM jobs WHERE id = $1{}", Self::FOR_UPDATE);
                let row = sqlx::query(sqlx::AssertSqlSafe(select))
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
                        Self::finish_in(&mut tx, id, &Outcome::Cancelled, None).await?;
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
                // Two claimers on PostgreSQL: the second waits for the first one's row lock,
                // then re-checks `completed_notified` on the updated row and matches nothing.
                let claimed = sqlx::query(CLAIM_BATCH_COMPLETION)
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

            pub(super) async fn record_retry(
                &self,
                id: &str,
                error: &JobError,
            ) -> Result<(), Error> {
                sqlx::query(
                    "UPDATE jobs SET error = $1, error_code = $2
                     WHERE id = $3 AND status = 'running'",
                )
                .bind(to_json(error))
                .bind(error.code.as_str())
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            pub(super) async fn release_attempt(
                &self,
                id: &str,
                attempt: u32,
                give_back: bool,
            ) -> Result<(), Error> {
                sqlx::query(
                    "UPDATE jobs SET status = 'queued', attempts = attempts - $1
                     WHERE id = $2 AND status = 'running' AND attempts = $3",
                )
                .bind(i64::from(give_back))
                .bind(id)
                .bind(i64::from(attempt))
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
                let ended = Self::finish_in(&mut tx, id, outcome, attempt).await?;
                tx.commit().await?;
                Ok(ended)
            }

            /// Ends a job in `tx`, first end wins (see `Store::finish`), and numbers it.
            async fn finish_in(
                tx: &mut Tx<Self>,
                id: &str,
                outcome: &Outcome,
                attempt: Option<u32>,
            ) -> Result<Option<Status>, Error> {
                let ending = outcome.ending();
                // A cancel request wins over whatever the attempt produced. The casts give
                // PostgreSQL the parameters' types where nothing else does.
                let update = format!(
                    "UPDATE jobs SET status = CASE WHEN cancel_requested = 1 THEN 'cancelled'
                             ELSE CAST($1 AS TEXT) END,
                         result = CASE WHEN cancel_requested = 1 THEN NULL
                             ELSE CAST($2 AS TEXT) END,
                         page_id = CASE WHEN cancel_requested = 1 THEN NULL
                             ELSE CAST($3 AS TEXT) END,
                         error = CASE WHEN cancel_requested = 1 THEN '{}'
                             ELSE COALESCE(CAST($4 AS TEXT), error) END,
                         error_code = CASE WHEN cancel_requested = 1 THEN 'cancelled'
                             ELSE COALESCE(CAST($5 AS TEXT), error_code) END,
                         finished_at = $6{}
                     WHERE id = $7 AND status IN ('queued', 'running')
                       AND (CAST($8 AS BIGINT) IS NULL OR attempts = CAST($8 AS BIGINT))
                     RETURNING status",
                    super::records::CANCELLED_ERROR,
                    Self::DONE_SEQ
                );
                let done = sqlx::query(sqlx::AssertSqlSafe(update))
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
                Self::count_crawl_ends(tx, &[id]).await?;
                Self::number_ended(tx, &[id]).await?;
                Ok(Some(status))
            }

            pub(super) async fn job(&self, id: &str) -> Result<Option<JobRecord>, Error> {
                let select = format!("{JOB_COLUMNS} WHERE id = $1");
                let row = sqlx::query(sqlx::AssertSqlSafe(select))
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|row| rows::job(&row)).transpose()
            }

            /// The jobs whose `column` (`batch_id` or `crawl_id`: a name, never input) is
            /// `id` that ended after `after_seq`, in the order they ended, their results as
            /// stored (`Store::ended_since` and `Store::crawl_ended_since` put texts back).
            pub(super) async fn ended_in(
                &self,
                column: &'static str,
                id: &str,
                after_seq: i64,
                limit: u32,
            ) -> Result<Vec<EndedJob>, Error> {
                let select = format!(
                    "SELECT id, url, status, done_seq, result, error FROM jobs
                     WHERE {column} = $1 AND done_seq > $2 ORDER BY done_seq LIMIT $3"
                );
                let found = sqlx::query(sqlx::AssertSqlSafe(select))
                    .bind(id)
                    .bind(after_seq)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await?;
                found.iter().map(rows::ended_job).collect()
            }

            pub(super) async fn list_jobs(
                &self,
                filter: &JobFilter,
                after: Option<&str>,
                limit: u32,
            ) -> Result<Vec<JobEntry>, Error> {
                // Conditions only for what is asked, so each can use its index.
                let mut select = sqlx::QueryBuilder::<Db<Self>>::new(JOB_ENTRY_COLUMNS);
                select.push(" WHERE 1 = 1");
                if let Some(after) = after {
                    select.push(" AND jobs.id > ").push_bind(after.to_owned());
                }
                if let Some(batch_id) = &filter.batch_id {
                    select
                        .push(" AND jobs.batch_id = ")
                        .push_bind(batch_id.clone());
                }
                if let Some(crawl_id) = &filter.crawl_id {
                    select
                        .push(" AND jobs.crawl_id = ")
                        .push_bind(crawl_id.clone());
                }
                if let Some(status) = filter.status {
                    select
                        .push(" AND jobs.status = ")
                        .push_bind(status.as_str().to_owned());
                }
                if let Some(tenant) = &filter.tenant {
                    select.push(" AND jobs.tenant = ").push_bind(tenant.clone());
                }
                // The cursor's comparison and the order use the same collation.
                select.push(" ORDER BY jobs.id");
                select.push(" LIMIT ").push_bind(i64::from(limit));
                let found = select.build().fetch_all(&self.pool).await?;
                found.iter().map(rows::job_entry).collect()
            }

            pub(super) async fn count_by_status(
                &self,
                batch_id: Option<&str>,
            ) -> Result<Vec<(Status, u64)>, Error> {
                let select = format!(
                    "SELECT status, COUNT(*) AS n FROM jobs
                     WHERE CAST($1 AS TEXT) IS NULL OR batch_id = CAST($1 AS TEXT)
                     GROUP BY status ORDER BY status{}",
                    Self::BYTE_ORDER
                );
                let found = sqlx::query(sqlx::AssertSqlSafe(select))
                    .bind(batch_id)
                    .fetch_all(&self.pool)
                    .await?;
                found.iter().map(rows::status_count).collect()
            }

            pub(super) async fn count_errors(
                &self,
                batch_id: &str,
            ) -> Result<Vec<(String, u64)>, Error> {
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

            pub(super) async fn count_retries(&self, batch_id: &str) -> Result<u64, Error> {
                let row = sqlx::query(
                    "SELECT CAST(COALESCE(SUM(attempts - 1), 0) AS BIGINT) AS n FROM jobs
                     WHERE batch_id = $1 AND attempts > 1",
                )
                .bind(batch_id)
                .fetch_one(&self.pool)
                .await?;
                Ok(row.int("n")?.max(0) as u64)
            }

            /// The statement of [`Batches::start_group`]: starts an attempt of each job of
            /// `ids` that may run, returning `id, attempts, max_attempts` of each.
            pub(super) fn start_attempts(ids: &[&str]) -> sqlx::QueryBuilder<Db<Self>> {
                let mut update = sqlx::QueryBuilder::<Db<Self>>::new(
                    "UPDATE jobs SET attempts = attempts + 1, status = 'running', started_at = ",
                );
                update.push_bind(now_rfc3339());
                update.push(" WHERE ");
                update.push(Self::STATUS_BESIDE_IDS);
                update.push(" IN ('queued', 'running') AND cancel_requested = 0 AND id");
                Self::push_in(&mut update, ids);
                update.push(" RETURNING id, attempts, max_attempts");
                update
            }
        }

        impl Batches for $store {
            async fn start_group(
                &self,
                ids: &[&str],
            ) -> Result<HashMap<String, (u32, u32)>, Error> {
                let found = Self::start_attempts(ids)
                    .build()
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

            async fn commit_group(
                &self,
                pages: &[PendingPage],
            ) -> Result<Vec<Option<Status>>, Error> {
                self.store_pages(pages).await
            }

            async fn look_up_group(
                &self,
                wanted: &[CacheLookup],
            ) -> Result<Vec<Option<PageRecord>>, Error> {
                self.cached_pages(wanted).await
            }
        }
    };
}

/// Marks batch `$1` as announced when none of its jobs is left to end, returning its webhook.
/// Run after every job of a batch ends: its `NOT EXISTS` is answered by `jobs_batch_open`
/// (the batch's jobs not ended, migration 0021), so it costs the same at the first job's end
/// and at the millionth.
const CLAIM_BATCH_COMPLETION: &str = "UPDATE batches SET completed_notified = 1
     WHERE id = $1 AND completed_notified = 0
       AND NOT EXISTS (SELECT 1 FROM jobs
                       WHERE batch_id = $1 AND status IN ('queued', 'running'))
     RETURNING webhook";

job_queries!(super::sqlite::SqliteStore);
job_queries!(super::postgres::PgStore);

#[cfg(test)]
mod tests {
    use super::super::sqlite::SqliteStore;

    /// A new SQLite store (its schema, no rows: SQLite plans without statistics either way),
    /// with the directory that holds it.
    async fn empty_store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let store = SqliteStore::open(&dir.path().join("store.sqlite"))
            .await
            .expect("the store opens");
        (dir, store)
    }

    /// The steps of SQLite's plan for `sql` (`EXPLAIN QUERY PLAN`'s detail column).
    async fn query_plan(store: &SqliteStore, sql: &str) -> Vec<String> {
        let explain = format!("EXPLAIN QUERY PLAN {sql}");
        let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(sqlx::AssertSqlSafe(explain))
            .fetch_all(&store.pool)
            .await
            .expect("the statement plans");
        rows.into_iter().map(|(_, _, _, detail)| detail).collect()
    }

    /// Starting the attempts of a batch of jobs looks each job up by its id: SQLite's planner,
    /// left to itself, walks the status index for ten ids or more, reading every queued job.
    #[tokio::test]
    async fn starting_attempts_looks_jobs_up_by_id() {
        let (_dir, store) = empty_store().await;
        for n in [1_usize, 10, 64] {
            let ids: Vec<String> = (0..n).map(|i| format!("job-{i}")).collect();
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let update = SqliteStore::start_attempts(&ids);
            let plan = query_plan(&store, update.sql().as_str()).await;
            assert!(
                plan.iter()
                    .any(|step| step.contains("jobs") && step.contains("(id=?)")),
                "{n} ids: the jobs looked up by id, not {plan:?}"
            );
            assert!(
                !plan.iter().any(|step| step.contains("jobs_status")),
                "{n} ids: the status index left alone, not {plan:?}"
            );
        }
        store.pool.close().await;
    }

    /// The reads that look pages up by URL go through `pages_url`: a group of page cache
    /// lookups (1, 10, 64 of them), and a page's versions for one tenant or for all (the
    /// tenant-led URL indexes were dropped by migration 0022, two more random inserts a page).
    #[tokio::test]
    async fn reads_by_url_go_through_the_url_index() {
        let (_dir, store) = empty_store().await;
        let mut selects: Vec<(String, String)> = [1_usize, 10, 64]
            .into_iter()
            .map(|n| {
                let lookups: Vec<super::super::writer::CacheLookup> = (0..n)
                    .map(|i| super::super::writer::CacheLookup {
                        url: format!("https://example.com/{i}"),
                        options_hash: "o".to_owned(),
                        since_ms: 0,
                    })
                    .collect();
                let select = SqliteStore::select_cached(&lookups);
                (
                    format!("{n} cache lookups"),
                    select.sql().as_str().to_owned(),
                )
            })
            .collect();
        for tenant in [None, Some("acme")] {
            let select = SqliteStore::page_versions(tenant, "page-1", 20);
            selects.push((
                format!("versions, tenant {tenant:?}"),
                select.sql().as_str().to_owned(),
            ));
        }
        for (read, sql) in selects {
            let plan = query_plan(&store, &sql).await;
            assert!(
                plan.iter()
                    .any(|step| step.contains("USING INDEX pages_url (url=?")),
                "{read}: the pages read by URL, not {plan:?}"
            );
        }
        store.pool.close().await;
    }

    /// The check made after each job of a batch ends reads the batch's jobs not ended, through
    /// their partial index, not every job of the batch in id order (quadratic over a batch).
    #[tokio::test]
    async fn claiming_a_batch_completion_reads_only_its_open_jobs() {
        let (_dir, store) = empty_store().await;
        let plan = query_plan(&store, super::CLAIM_BATCH_COMPLETION).await;
        assert!(
            plan.iter()
                .any(|step| step.contains("USING INDEX jobs_batch_open (batch_id=?)")),
            "the batch's open jobs read through their index, not {plan:?}"
        );
        store.pool.close().await;
    }
}
