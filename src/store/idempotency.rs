//! Idempotency keys of the API's creating routes, for both engines from one source (`$N`
//! parameters and `ON CONFLICT`, read alike by SQLite and PostgreSQL): a key is claimed by the
//! first request that uses it (per token), then holds that request's answer for replays until
//! it expires.
//!
//! Not here: which routes take keys, hashing requests or building answers (`api::idempotency`).

use super::Error;
use super::rows::Columns;

/// What a request carrying an idempotency key is to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IdempotencyClaim {
    /// The key is new (or had expired): this request runs, and its answer is recorded.
    Claimed,
    /// The same request with this key is still being handled.
    InProgress,
    /// The key was used for another request (another body, route or method).
    Conflict,
    /// The same request was answered: this is its answer.
    Replay {
        /// The HTTP status.
        status: u16,
        /// The body.
        body: String,
    },
}

macro_rules! idempotency_queries {
    ($store:ty) => {
        impl $store {
            pub(super) async fn claim_idempotency_key(
                &self,
                owner: &str,
                key: &str,
                request: &str,
                now_ms: i64,
                expired_before_ms: i64,
            ) -> Result<IdempotencyClaim, Error> {
                // Expired keys go first (this one included): the index on created_ms keeps
                // it cheap.
                sqlx::query("DELETE FROM idempotency_keys WHERE created_ms < $1")
                    .bind(expired_before_ms)
                    .execute(&self.pool)
                    .await?;
                let inserted = sqlx::query(
                    "INSERT INTO idempotency_keys (owner, idem_key, request, created_ms) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                )
                .bind(owner)
                .bind(key)
                .bind(request)
                .bind(now_ms)
                .execute(&self.pool)
                .await?;
                if inserted.rows_affected() == 1 {
                    return Ok(IdempotencyClaim::Claimed);
                }
                let row = sqlx::query(
                    "SELECT request, status, response FROM idempotency_keys \
                     WHERE owner = $1 AND idem_key = $2",
                )
                .bind(owner)
                .bind(key)
                .fetch_optional(&self.pool)
                .await?;
                // Gone between the insert and the read (released by a failed first request):
                // this one may be sent again.
                let Some(row) = row else {
                    return Ok(IdempotencyClaim::InProgress);
                };
                if row.text("request")? != request {
                    return Ok(IdempotencyClaim::Conflict);
                }
                Ok(match row.opt_int("status")? {
                    None => IdempotencyClaim::InProgress,
                    Some(status) => IdempotencyClaim::Replay {
                        status: u16::try_from(status).unwrap_or(500),
                        body: row.opt_text("response")?.unwrap_or_default(),
                    },
                })
            }

            pub(super) async fn complete_idempotency_key(
                &self,
                owner: &str,
                key: &str,
                status: u16,
                body: &str,
            ) -> Result<(), Error> {
                sqlx::query(
                    "UPDATE idempotency_keys SET status = $1, response = $2 \
                     WHERE owner = $3 AND idem_key = $4",
                )
                .bind(i64::from(status))
                .bind(body)
                .bind(owner)
                .bind(key)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            pub(super) async fn release_idempotency_key(
                &self,
                owner: &str,
                key: &str,
            ) -> Result<(), Error> {
                sqlx::query(
                    "DELETE FROM idempotency_keys \
                     WHERE owner = $1 AND idem_key = $2 AND status IS NULL",
                )
                .bind(owner)
                .bind(key)
                .execute(&self.pool)
                .await?;
                Ok(())
            }
        }
    };
}

idempotency_queries!(super::sqlite::SqliteStore);
idempotency_queries!(super::postgres::PgStore);
