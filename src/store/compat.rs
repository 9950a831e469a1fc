//! What the Firecrawl-compatible API keeps beside trawl's own records, for both engines from
//! one source: the document options of a crawl or a batch scrape (its formats), by the
//! crawl's or the batch's id, and the raw body's hash of a stored page (its `rawHtml`).
//!
//! Not here: what the options mean or how documents are built (`api::firecrawl`).

use super::Error;
use super::rows::Columns;

macro_rules! compat_queries {
    ($store:ty) => {
        impl $store {
            pub(super) async fn put_compat_options(
                &self,
                id: &str,
                options: &str,
                now_ms: i64,
            ) -> Result<(), Error> {
                sqlx::query(
                    "INSERT INTO compat_options (id, options, created_ms) VALUES ($1, $2, $3) \
                     ON CONFLICT (id) DO UPDATE SET options = excluded.options",
                )
                .bind(id)
                .bind(options)
                .bind(now_ms)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            pub(super) async fn compat_options(&self, id: &str) -> Result<Option<String>, Error> {
                let row = sqlx::query("SELECT options FROM compat_options WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|row| row.text("options")).transpose()
            }

            pub(super) async fn page_raw_hash(
                &self,
                page_id: &str,
            ) -> Result<Option<String>, Error> {
                let row = sqlx::query("SELECT raw_hash FROM pages WHERE id = $1")
                    .bind(page_id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|row| row.text("raw_hash")).transpose()
            }
        }
    };
}

compat_queries!(super::sqlite::SqliteStore);
compat_queries!(super::postgres::PgStore);
