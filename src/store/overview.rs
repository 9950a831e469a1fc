//! What the web UI shows at a glance, for both engines from one source: jobs by status and
//! by error code, jobs ended lately, the newest jobs, crawls and sessions, a page's versions
//! and where a page's raw body and WARC record are. Every query takes the caller's tenant
//! filter (`Scope::filter`: `None` for the admin), bound as `(CAST($1 AS TEXT) IS NULL OR
//! tenant = CAST($1 AS TEXT))`.
//!
//! Not here: the listings the API pages through by cursor (`jobs`, `pages`), or rendering.

use super::dialect::Db;
use super::rows::{self, Columns as _, JOB_ENTRY_COLUMNS, PAGE_ENTRY_COLUMNS};
use super::{CrawlRecord, Error, JobEntry, PageEntry, SessionRecord, Status};

/// Where a stored page's raw body and WARC record are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageFiles {
    /// The raw body's blob.
    pub raw_hash: String,
    /// Its WARC record's id, once written.
    pub warc_record_id: Option<String>,
    /// The WARC file holding it.
    pub warc_file: Option<String>,
    /// The record's offset in that file.
    pub warc_offset: Option<u64>,
}

fn session(row: &impl super::rows::Columns) -> Result<SessionRecord, Error> {
    Ok(SessionRecord {
        host: row.opt_text("host")?,
        id: row.text("id")?,
        owner: row.text("owner")?,
        profile: row.text("profile")?,
        created_at: row.text("created_at")?,
        closed_at: row.opt_text("closed_at")?,
        close_reason: row.opt_text("close_reason")?,
    })
}

macro_rules! overview_queries {
    ($store:ty) => {
        impl $store {
            pub(super) async fn status_counts_in(
                &self,
                tenant: Option<&str>,
            ) -> Result<Vec<(Status, u64)>, Error> {
                let found = sqlx::query(
                    "SELECT status, COUNT(*) AS n FROM jobs \
                     WHERE (CAST($1 AS TEXT) IS NULL OR tenant = CAST($1 AS TEXT)) \
                     GROUP BY status ORDER BY status",
                )
                .bind(tenant)
                .fetch_all(&self.pool)
                .await?;
                found.iter().map(rows::status_count).collect()
            }

            pub(super) async fn error_counts_in(
                &self,
                tenant: Option<&str>,
            ) -> Result<Vec<(String, u64)>, Error> {
                let found = sqlx::query(
                    "SELECT error_code, COUNT(*) AS n FROM jobs \
                     WHERE status IN ('failed', 'dead') \
                       AND (CAST($1 AS TEXT) IS NULL OR tenant = CAST($1 AS TEXT)) \
                     GROUP BY error_code ORDER BY n DESC, error_code",
                )
                .bind(tenant)
                .fetch_all(&self.pool)
                .await?;
                found.iter().map(rows::error_count).collect()
            }

            pub(super) async fn ended_after_in(
                &self,
                tenant: Option<&str>,
                since_rfc3339: &str,
            ) -> Result<u64, Error> {
                let row = sqlx::query(
                    "SELECT COUNT(*) AS n FROM jobs \
                     WHERE finished_at >= $2 \
                       AND (CAST($1 AS TEXT) IS NULL OR tenant = CAST($1 AS TEXT))",
                )
                .bind(tenant)
                .bind(since_rfc3339)
                .fetch_one(&self.pool)
                .await?;
                Ok(row.int("n")?.max(0) as u64)
            }

            pub(super) async fn newest_jobs_in(
                &self,
                tenant: Option<&str>,
                limit: u32,
            ) -> Result<Vec<JobEntry>, Error> {
                let mut select = sqlx::QueryBuilder::<Db<Self>>::new(JOB_ENTRY_COLUMNS);
                select.push(" WHERE 1 = 1");
                if let Some(tenant) = tenant {
                    select
                        .push(" AND jobs.tenant = ")
                        .push_bind(tenant.to_owned());
                }
                select
                    .push(" ORDER BY jobs.id DESC LIMIT ")
                    .push_bind(i64::from(limit));
                let found = select.build().fetch_all(&self.pool).await?;
                found.iter().map(rows::job_entry).collect()
            }

            pub(super) async fn newest_crawls_in(
                &self,
                tenant: Option<&str>,
                limit: u32,
            ) -> Result<Vec<CrawlRecord>, Error> {
                let found = sqlx::query(
                    "SELECT * FROM crawls \
                     WHERE (CAST($1 AS TEXT) IS NULL OR tenant = CAST($1 AS TEXT)) \
                     ORDER BY id DESC LIMIT $2",
                )
                .bind(tenant)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?;
                found.iter().map(rows::crawl).collect()
            }

            pub(super) async fn newest_sessions_of(
                &self,
                owner: Option<&str>,
                limit: u32,
            ) -> Result<Vec<SessionRecord>, Error> {
                let found = sqlx::query(
                    "SELECT id, owner, profile, created_at, closed_at, close_reason, host \
                     FROM sessions \
                     WHERE (CAST($1 AS TEXT) IS NULL OR owner = CAST($1 AS TEXT)) \
                     ORDER BY id DESC LIMIT $2",
                )
                .bind(owner)
                .bind(i64::from(limit))
                .fetch_all(&self.pool)
                .await?;
                found.iter().map(session).collect()
            }

            pub(super) async fn versions_in(
                &self,
                tenant: Option<&str>,
                page_id: &str,
                limit: u32,
            ) -> Result<Vec<PageEntry>, Error> {
                let found = Self::page_versions(tenant, page_id, limit)
                    .build()
                    .fetch_all(&self.pool)
                    .await?;
                found.iter().map(rows::page_entry).collect()
            }

            /// The statement of `versions_in`: the newest `limit` pages of page `page_id`'s
            /// URL, `tenant`'s only when given. Read through `pages_url` (the URL's few
            /// versions, the tenant checked on each), with a tenant or without.
            pub(super) fn page_versions(
                tenant: Option<&str>,
                page_id: &str,
                limit: u32,
            ) -> sqlx::QueryBuilder<Db<Self>> {
                let mut select = sqlx::QueryBuilder::<Db<Self>>::new(PAGE_ENTRY_COLUMNS);
                select
                    .push(" WHERE url = (SELECT url FROM pages WHERE id = ")
                    .push_bind(page_id.to_owned())
                    .push(")");
                if let Some(tenant) = tenant {
                    select.push(" AND tenant = ").push_bind(tenant.to_owned());
                }
                select
                    .push(" ORDER BY fetched_at_ms DESC, id DESC LIMIT ")
                    .push_bind(i64::from(limit));
                select
            }

            pub(super) async fn page_files(&self, id: &str) -> Result<Option<PageFiles>, Error> {
                let row = sqlx::query(
                    "SELECT raw_hash, warc_record_id, warc_file, warc_offset FROM pages \
                     WHERE id = $1",
                )
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
                row.map(|row| {
                    Ok(PageFiles {
                        raw_hash: row.text("raw_hash")?,
                        warc_record_id: row.opt_text("warc_record_id")?,
                        warc_file: row.opt_text("warc_file")?,
                        warc_offset: row.opt_int("warc_offset")?.map(|n| n.max(0) as u64),
                    })
                })
                .transpose()
            }
        }
    };
}

overview_queries!(super::sqlite::SqliteStore);
overview_queries!(super::postgres::PgStore);
