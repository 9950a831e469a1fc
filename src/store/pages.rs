//! Pages and blobs, for both engines from one source (see `dialect`): storing fetched pages
//! with their jobs' ends (the group commit's statements), the page cache's lookups, and the
//! archive pool's backlog and WARC references (one statement for a step's pages).
//!
//! Not here: the batching itself (`writer`), packing blobs (`blob`), and marking pages
//! archived (each engine's file: one statement on PostgreSQL, one per 400 pages on SQLite).

use std::collections::HashMap;

use sqlx::Row as _;

use super::blob::Blob;
use super::dialect::{Db, Dialect};
use super::rows::{self, Columns as _, PAGE_COLUMNS, PAGE_ENTRY_COLUMNS};
use super::writer::{CacheLookup, PendingPage, ended_ids, ended_per_page};
use super::{ArchivePage, Error, PageEntry, PageFilter, PageRecord, Status, WarcRef};
use crate::tenant::{Scope, Tenant};

/// WARC references written by one statement at most (four bound values each).
const WARC_REFS_PER_UPDATE: usize = 100;

/// Pages whose earlier WARC captures one statement looks up at most (two bound values each).
const WARC_ORIGINALS_PER_SELECT: usize = 200;

/// Page cache lookups answered by one statement at most (two bound values each).
const CACHE_LOOKUPS_PER_SELECT: usize = 200;

/// Where each (URL, second key) of a batch of lookups stands in the whole list (the batch
/// starts at `start`): the rows one statement read for the batch go back to the lookups that
/// asked for them.
fn positions<'a>(
    keys: impl Iterator<Item = (&'a str, &'a str)>,
    start: usize,
) -> HashMap<(&'a str, &'a str), Vec<usize>> {
    let mut positions: HashMap<(&str, &str), Vec<usize>> = HashMap::new();
    for (at, key) in keys.enumerate() {
        positions.entry(key).or_default().push(start + at);
    }
    positions
}

/// Offers a row read for a batch of lookups to those asking for its key (`asking`, from
/// [`positions`]): each keeps the newest row it `accepts`, by `fetched_at_ms` (of two fetched
/// in the same millisecond, the first read: one lookup's own `ORDER BY … LIMIT 1` took
/// either). `value` reads what a lookup keeps of the row, only when one keeps it.
fn offer<T>(
    kept: &mut [Option<(T, i64)>],
    asking: &[usize],
    fetched_at_ms: i64,
    accepts: impl Fn(usize) -> bool,
    value: impl Fn() -> Result<T, Error>,
) -> Result<(), Error> {
    for &at in asking {
        let newer = kept[at]
            .as_ref()
            .is_none_or(|(_, best)| fetched_at_ms > *best);
        if newer && accepts(at) {
            kept[at] = Some((value()?, fetched_at_ms));
        }
    }
    Ok(())
}

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

            /// The statement that reads the pages of these lookups' URLs with one of their
            /// options, fetched since the earliest time asked: a superset of each lookup's
            /// answer, narrowed by [`Self::cached_pages`].
            pub(super) fn select_cached(batch: &[CacheLookup]) -> sqlx::QueryBuilder<Db<Self>> {
                let columns = PAGE_COLUMNS.replacen("SELECT ", "SELECT url, options_hash, ", 1);
                let mut select = sqlx::QueryBuilder::<Db<Self>>::new(columns);
                select.push(" WHERE url");
                let urls: Vec<&str> = batch.iter().map(|lookup| lookup.url.as_str()).collect();
                Self::push_in(&mut select, &urls);
                select.push(" AND options_hash");
                let options: Vec<&str> = batch
                    .iter()
                    .map(|lookup| lookup.options_hash.as_str())
                    .collect();
                Self::push_in(&mut select, &options);
                let since = batch.iter().map(|lookup| lookup.since_ms).min().unwrap_or(0);
                select.push(" AND fetched_at_ms >= ").push_bind(since);
                select
            }

            pub(super) async fn cached_pages(
                &self,
                wanted: &[CacheLookup],
            ) -> Result<Vec<Option<PageRecord>>, Error> {
                let mut found = vec![None; wanted.len()];
                for (n, batch) in wanted.chunks(CACHE_LOOKUPS_PER_SELECT).enumerate() {
                    let start = n * CACHE_LOOKUPS_PER_SELECT;
                    let asked = positions(
                        batch
                            .iter()
                            .map(|lookup| (lookup.url.as_str(), lookup.options_hash.as_str())),
                        start,
                    );
                    let mut select = Self::select_cached(batch);
                    for row in select.build().fetch_all(&self.pool).await? {
                        let (url, options_hash) = (row.text("url")?, row.text("options_hash")?);
                        if let Some(asking) = asked.get(&(url.as_str(), options_hash.as_str())) {
                            // The newest page since the lookup's time.
                            let fetched_at_ms = row.int("fetched_at_ms")?;
                            offer(
                                &mut found,
                                asking,
                                fetched_at_ms,
                                |at| fetched_at_ms >= wanted[at].since_ms,
                                || rows::page(&row),
                            )?;
                        }
                    }
                }
                Ok(found.into_iter().map(|kept| kept.map(|(page, _)| page)).collect())
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
                // One statement per WARC_REFS_PER_UPDATE records (an archive step writes up to
                // 64), each a round trip to the engine; no transaction around them: each
                // record's reference stands alone, and a page whose reference was not written
                // is still pending, so its records are written again.
                for batch in written.chunks(WARC_REFS_PER_UPDATE) {
                    let mut update = sqlx::QueryBuilder::<Db<Self>>::new(
                        "WITH v(id, record_id, file, off) AS (",
                    );
                    // VALUES has no column types of its own on PostgreSQL: the casts give them.
                    update.push_values(batch, |mut row, record| {
                        row.push("CAST(")
                            .push_bind_unseparated(record.page_id.as_str())
                            .push_unseparated(" AS TEXT)")
                            .push("CAST(")
                            .push_bind_unseparated(record.record_id.as_str())
                            .push_unseparated(" AS TEXT)")
                            .push("CAST(")
                            .push_bind_unseparated(record.file.as_str())
                            .push_unseparated(" AS TEXT)")
                            .push("CAST(")
                            .push_bind_unseparated(record.offset as i64)
                            .push_unseparated(" AS BIGINT)");
                    });
                    update.push(
                        ") UPDATE pages SET warc_record_id = v.record_id, warc_file = v.file,
                             warc_offset = v.off
                         FROM v WHERE pages.id = v.id",
                    );
                    update.build().execute(&self.pool).await?;
                }
                Ok(())
            }

            pub(super) async fn warc_originals(
                &self,
                pages: &[&ArchivePage],
            ) -> Result<Vec<Option<(String, i64)>>, Error> {
                let mut originals = vec![None; pages.len()];
                for (n, batch) in pages.chunks(WARC_ORIGINALS_PER_SELECT).enumerate() {
                    let start = n * WARC_ORIGINALS_PER_SELECT;
                    // The captures of these URLs with a record and one of these bodies: a
                    // superset of each page's own (a URL's with another page's body), narrowed
                    // here.
                    let mut select = sqlx::QueryBuilder::<Db<Self>>::new(
                        "SELECT url, raw_hash, warc_record_id, fetched_at_ms FROM pages
                         WHERE warc_record_id IS NOT NULL AND url",
                    );
                    let urls: Vec<&str> = batch.iter().map(|page| page.url.as_str()).collect();
                    Self::push_in(&mut select, &urls);
                    select.push(" AND raw_hash");
                    let hashes: Vec<&str> =
                        batch.iter().map(|page| page.raw_hash.as_str()).collect();
                    Self::push_in(&mut select, &hashes);
                    let asked = positions(
                        batch
                            .iter()
                            .map(|page| (page.url.as_str(), page.raw_hash.as_str())),
                        start,
                    );
                    for row in select.build().fetch_all(&self.pool).await? {
                        let (url, raw_hash) = (row.text("url")?, row.text("raw_hash")?);
                        if let Some(asking) = asked.get(&(url.as_str(), raw_hash.as_str())) {
                            // The newest capture fetched no later than the page itself.
                            let fetched_at_ms = row.int("fetched_at_ms")?;
                            offer(
                                &mut originals,
                                asking,
                                fetched_at_ms,
                                |at| fetched_at_ms <= pages[at].fetched_at_ms,
                                || row.text("warc_record_id"),
                            )?;
                        }
                    }
                }
                Ok(originals)
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
