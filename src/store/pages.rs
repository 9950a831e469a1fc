//! Pages and blobs, for both engines from one source (see `dialect`): storing fetched pages
//! with their jobs' ends (the group commit's statements), the page cache's lookups, and the
//! archive pool's backlog and WARC references.
//!
//! Not here: the batching itself (`writer`), packing blobs (`blob`), and marking pages
//! archived (each engine's file: one statement on PostgreSQL, one per page on SQLite).

use sqlx::Row as _;

use super::blob::Blob;
use super::dialect::{Db, Dialect};
use super::rows::{self, Columns as _, PAGE_COLUMNS, PAGE_ENTRY_COLUMNS};
use super::writer::{PendingPage, ended_ids, ended_per_page};
use super::{ArchivePage, Error, PageEntry, PageFilter, PageRecord, Status, WarcRef};
use crate::tenant::{Scope, Tenant};

/// The columns of `pages` that [`rows::archive_page`] reads.
const ARCHIVE_COLUMNS: &str = "SELECT pages.rowid AS rowid, pages.id AS id, pages.url AS url,
    content_hash, raw_hash, fetched_at_ms, info, headers, ip, warc_record_id,
    pages.tenant AS tenant FROM pages";

/// The start of the statement that ends the jobs of a group commit's pages (see
/// `Dialect::end_pages`), up to the value of `finished_at`; `v` holds the pages' `id`,
/// `result` and `attempt`. A cancel request wins over the result.
pub(super) const END_PAGES: &str = r#"UPDATE jobs SET
         status = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE 'succeeded' END,
         result = CASE WHEN cancel_requested = 1 THEN NULL ELSE v.result END,
         page_id = CASE WHEN cancel_requested = 1 THEN NULL ELSE jobs.id END,
         error = CASE WHEN cancel_requested = 1
             THEN '{"code":"cancelled","message":"the job was cancelled","transient":false}'
             ELSE error END,
         error_code = CASE WHEN cancel_requested = 1 THEN 'cancelled' ELSE error_code END,
         finished_at = "#;

/// The end of the statement that ends the jobs of a group commit's pages: first end wins, and
/// only the attempt that fetched the page may end its job.
pub(super) const END_PAGES_WHERE: &str = " WHERE jobs.id = v.id
       AND jobs.status IN ('queued', 'running')
       AND (v.attempt IS NULL OR jobs.attempts = v.attempt)
     RETURNING jobs.id AS id, jobs.status AS status";

macro_rules! page_queries {
    ($store:ty) => {
        impl $store {
            /// Ends the jobs of `pages` and stores the pages of those it ended as succeeded,
            /// blobs first, in one transaction (see `Batches::commit_group`).
            pub(super) async fn store_pages(
                &self,
                pages: &[PendingPage],
            ) -> Result<Vec<Option<Status>>, Error> {
                let mut tx = self.write_transaction().await?;
                let found = Self::end_pages(pages).build().fetch_all(&mut *tx).await?;
                let ended = ended_per_page(pages, &found)?;
                let stored: Vec<&PendingPage> = pages
                    .iter()
                    .zip(&ended)
                    .filter(|(_, ended)| **ended == Some(Status::Succeeded))
                    .map(|(page, _)| page)
                    .collect();
                if !stored.is_empty() {
                    let mut insert_blobs = sqlx::QueryBuilder::<Db<Self>>::new(
                        "INSERT INTO blobs (sha256, codec, size, bytes) ",
                    );
                    insert_blobs.push_values(
                        PendingPage::distinct_blobs(&stored),
                        |mut row, blob| {
                            row.push_bind(blob.sha256.as_str())
                                .push_bind(blob.codec)
                                .push_bind(blob.size as i64)
                                .push_bind(blob.bytes.as_slice());
                        },
                    );
                    insert_blobs.push(" ON CONFLICT DO NOTHING");
                    insert_blobs.build().execute(&mut *tx).await?;
                    let mut insert_pages = sqlx::QueryBuilder::<Db<Self>>::new(
                        "INSERT INTO pages (id, url, final_url, options_hash, status, content_type,
                             title, fetched_at, fetched_at_ms, content_hash, raw_hash, lines, info,
                             headers, ip, archive_state, tenant) ",
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
                            .push_bind(page.archive_state())
                            .push_bind(page.tenant.as_str());
                    });
                    insert_pages.push(" ON CONFLICT DO NOTHING");
                    insert_pages.build().execute(&mut *tx).await?;
                }
                let ended_jobs = ended_ids(pages, &ended);
                Self::count_crawl_ends(&mut tx, &ended_jobs).await?;
                Self::number_ended(&mut tx, &ended_jobs).await?;
                tx.commit().await?;
                Ok(ended)
            }

            pub(super) async fn page(&self, id: &str) -> Result<Option<PageRecord>, Error> {
                let select = format!("{PAGE_COLUMNS} WHERE id = $1");
                let row = sqlx::query(sqlx::AssertSqlSafe(select))
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

            pub(super) async fn cached_page(
                &self,
                url: &str,
                options_hash: &str,
                since_ms: i64,
            ) -> Result<Option<PageRecord>, Error> {
                let select = format!(
                    "{PAGE_COLUMNS} WHERE url = $1 AND options_hash = $2 AND fetched_at_ms >= $3
                     ORDER BY fetched_at_ms DESC LIMIT 1"
                );
                let row = sqlx::query(sqlx::AssertSqlSafe(select))
                    .bind(url)
                    .bind(options_hash)
                    .bind(since_ms)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|row| rows::page(&row)).transpose()
            }

            pub(super) async fn latest_page(
                &self,
                scope: &Scope,
                url: &str,
            ) -> Result<Option<PageRecord>, Error> {
                let select = format!(
                    "{PAGE_COLUMNS} WHERE (url = $1 OR final_url = $1)
                       AND (CAST($2 AS TEXT) IS NULL OR tenant = CAST($2 AS TEXT))
                     ORDER BY fetched_at_ms DESC LIMIT 1"
                );
                let row = sqlx::query(sqlx::AssertSqlSafe(select))
                    .bind(url)
                    .bind(scope.filter())
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|row| rows::page(&row)).transpose()
            }

            pub(super) async fn adopt_page(
                &self,
                page_id: &str,
                new_id: &str,
                tenant: &Tenant,
            ) -> Result<Option<PageRecord>, Error> {
                sqlx::query(
                    "INSERT INTO pages (id, url, final_url, options_hash, status, content_type,
                         title, fetched_at, fetched_at_ms, content_hash, raw_hash, lines, info,
                         headers, ip, tenant)
                     SELECT $2, url, final_url, options_hash, status, content_type, title,
                         fetched_at, fetched_at_ms, content_hash, raw_hash, lines, info,
                         headers, ip, $3
                     FROM pages WHERE id = $1
                     ON CONFLICT DO NOTHING",
                )
                .bind(page_id)
                .bind(new_id)
                .bind(tenant.as_str())
                .execute(&self.pool)
                .await?;
                self.page(new_id).await
            }

            pub(super) async fn request_archive(
                &self,
                urls: &[String],
            ) -> Result<Vec<String>, Error> {
                let mut tx = self.write_transaction().await?;
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
                // On PostgreSQL `rowid` is an identity column: numbered at insert, so a page
                // committed late may fall behind the cursor; the archive pool resets its
                // cursor at every commit.
                let select = format!(
                    "{ARCHIVE_COLUMNS} WHERE archive_state = 'pending' AND rowid > $1
                     ORDER BY rowid LIMIT $2"
                );
                let found = sqlx::query(sqlx::AssertSqlSafe(select))
                    .bind(after_rowid)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await?;
                found.iter().map(rows::archive_page).collect()
            }

            pub(super) async fn archive_pending(&self) -> Result<u64, Error> {
                let row =
                    sqlx::query("SELECT COUNT(*) AS n FROM pages WHERE archive_state = 'pending'")
                        .fetch_one(&self.pool)
                        .await?;
                Ok(row.int("n")?.max(0) as u64)
            }

            pub(super) async fn record_warc(&self, written: &[WarcRef]) -> Result<(), Error> {
                let mut tx = self.write_transaction().await?;
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

            pub(super) async fn list_pages(
                &self,
                filter: &PageFilter,
                after: Option<&str>,
                limit: u32,
            ) -> Result<Vec<PageEntry>, Error> {
                // Conditions only for what is asked.
                let mut select = sqlx::QueryBuilder::<Db<Self>>::new(PAGE_ENTRY_COLUMNS);
                select.push(" WHERE 1 = 1");
                if let Some(after) = after {
                    select.push(" AND id > ").push_bind(after.to_owned());
                }
                if let Some(host) = &filter.host {
                    // Stored URLs are normalised: scheme://host[:port]/…
                    select.push(" AND (");
                    for (n, scheme) in ["http", "https"].into_iter().enumerate() {
                        if n > 0 {
                            select.push(" OR ");
                        }
                        let prefix = format!("{scheme}://{}/", host.to_lowercase());
                        let length = i32::try_from(prefix.chars().count()).unwrap_or(i32::MAX);
                        select
                            .push("substr(url, 1, ")
                            .push_bind(length)
                            .push(") = ")
                            .push_bind(prefix);
                    }
                    select.push(")");
                }
                if let Some(crawl_id) = &filter.crawl_id {
                    select
                        .push(" AND id IN (SELECT page_id FROM jobs WHERE crawl_id = ")
                        .push_bind(crawl_id.clone())
                        .push(")");
                }
                if let Some(tenant) = &filter.tenant {
                    select.push(" AND tenant = ").push_bind(tenant.clone());
                }
                select.push(" ORDER BY id LIMIT ").push_bind(i64::from(limit));
                let found = select.build().fetch_all(&self.pool).await?;
                found.iter().map(rows::page_entry).collect()
            }

            pub(super) async fn request_archive_all(
                &self,
                crawl_id: Option<&str>,
            ) -> Result<u64, Error> {
                let changed = sqlx::query(
                    "UPDATE pages SET archive_state = 'pending'
                     WHERE archive_state IS DISTINCT FROM 'archived'
                       AND archive_state IS DISTINCT FROM 'pending'
                       AND (CAST($1 AS TEXT) IS NULL
                            OR id IN (SELECT page_id FROM jobs
                                      WHERE crawl_id = CAST($1 AS TEXT)))",
                )
                .bind(crawl_id)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(changed)
            }

            pub(super) async fn export_pages(
                &self,
                url_prefix: Option<&str>,
                batch_id: Option<&str>,
                crawl_id: Option<&str>,
                after_rowid: i64,
                limit: u32,
            ) -> Result<Vec<(ArchivePage, i64)>, Error> {
                let prefix = "CAST($2 AS TEXT)";
                let select = format!(
                    "{ARCHIVE_COLUMNS}
                     WHERE pages.rowid > $1
                       AND ({prefix} IS NULL OR {} OR {})
                       AND (CAST($3 AS TEXT) IS NULL OR pages.id IN (SELECT page_id FROM jobs
                            WHERE batch_id = CAST($3 AS TEXT)))
                       AND (CAST($4 AS TEXT) IS NULL OR pages.id IN (SELECT page_id FROM jobs
                            WHERE crawl_id = CAST($4 AS TEXT)))
                     ORDER BY pages.rowid LIMIT $5",
                    Self::starts_with("pages.final_url", prefix),
                    Self::starts_with("pages.url", prefix),
                );
                let found = sqlx::query(sqlx::AssertSqlSafe(select))
                    .bind(after_rowid)
                    .bind(url_prefix)
                    .bind(batch_id)
                    .bind(crawl_id)
                    .bind(i64::from(limit))
                    .fetch_all(&self.pool)
                    .await?;
                found.iter().map(rows::archive_page).collect()
            }
        }
    };
}

page_queries!(super::sqlite::SqliteStore);
page_queries!(super::postgres::PgStore);

#[cfg(test)]
mod tests {
    #[test]
    fn a_cancelled_page_job_ends_with_the_one_cancelled_error() {
        let quoted = format!("'{}'", super::super::records::CANCELLED_ERROR);
        assert!(super::END_PAGES.contains(&quoted));
        let error: trawl_workers::job::JobError =
            serde_json::from_str(super::super::records::CANCELLED_ERROR).expect("a job error");
        assert_eq!(error.code, trawl_workers::job::ErrorCode::Cancelled);
    }
}
