//! Agent sessions' records and replay logs, for both engines from one source: the queries use
//! `$N` parameters and `ON CONFLICT`, which SQLite and PostgreSQL read alike, and a macro
//! implements them on each engine's store.
//!
//! Not here: live sessions and their browsers (`crate::sessions`).

use super::blob::Blob;
use super::rows::{Columns, now_rfc3339};
use super::{Error, NewSessionStep, SessionHost, SessionRecord, SessionStepRecord};

fn session(row: &impl Columns) -> Result<SessionRecord, Error> {
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

fn step(row: &impl Columns) -> Result<SessionStepRecord, Error> {
    let json = |name: &str, what: &'static str| -> Result<serde_json::Value, Error> {
        let text = row.text(name)?;
        serde_json::from_str(&text).map_err(|error| Error::Corrupt {
            what,
            detail: error.to_string(),
        })
    };
    Ok(SessionStepRecord {
        seq: u64::try_from(row.int("seq")?).unwrap_or(0),
        action: json("action", "session step action")?,
        outcome: json("outcome", "session step outcome")?,
        image_sha256: row.opt_text("image_sha256")?,
        image_type: row.opt_text("image_type")?,
        created_at: row.text("created_at")?,
    })
}

macro_rules! session_queries {
    ($store:ty) => {
        impl $store {
            pub(super) async fn create_session(
                &self,
                id: &str,
                owner: &str,
                profile: &str,
                host: Option<&str>,
            ) -> Result<(), Error> {
                sqlx::query(
                    "INSERT INTO sessions (id, owner, profile, created_at, host) \
                     VALUES ($1, $2, $3, $4, $5)",
                )
                .bind(id)
                .bind(owner)
                .bind(profile)
                .bind(now_rfc3339())
                .bind(host)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            pub(super) async fn close_session(&self, id: &str, reason: &str) -> Result<(), Error> {
                sqlx::query(
                    "UPDATE sessions SET closed_at = $1, close_reason = $2 \
                     WHERE id = $3 AND closed_at IS NULL",
                )
                .bind(now_rfc3339())
                .bind(reason)
                .bind(id)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            pub(super) async fn session(&self, id: &str) -> Result<Option<SessionRecord>, Error> {
                let row = sqlx::query(
                    "SELECT id, owner, profile, created_at, closed_at, close_reason, host \
                     FROM sessions WHERE id = $1",
                )
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|row| session(&row)).transpose()
            }

            pub(super) async fn close_host_sessions(
                &self,
                host: &str,
                reason: &str,
            ) -> Result<u64, Error> {
                let done = sqlx::query(
                    "UPDATE sessions SET closed_at = $1, close_reason = $2 \
                     WHERE host = $3 AND closed_at IS NULL",
                )
                .bind(now_rfc3339())
                .bind(reason)
                .bind(host)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected())
            }

            pub(super) async fn renew_session_host(
                &self,
                host: &SessionHost,
            ) -> Result<(), Error> {
                sqlx::query(
                    "INSERT INTO session_hosts (url, capacity, open, seen_ms) \
                     VALUES ($1, $2, $3, $4) \
                     ON CONFLICT (url) DO UPDATE SET capacity = excluded.capacity, \
                     open = excluded.open, seen_ms = excluded.seen_ms",
                )
                .bind(&host.url)
                .bind(host.capacity as i64)
                .bind(host.open as i64)
                .bind(host.seen_ms)
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            pub(super) async fn remove_session_host(&self, url: &str) -> Result<(), Error> {
                sqlx::query("DELETE FROM session_hosts WHERE url = $1")
                    .bind(url)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            }

            pub(super) async fn session_hosts(
                &self,
                seen_since_ms: i64,
            ) -> Result<Vec<SessionHost>, Error> {
                let rows = sqlx::query(
                    "SELECT url, capacity, open, seen_ms FROM session_hosts \
                     WHERE seen_ms >= $1 ORDER BY capacity - open DESC, url",
                )
                .bind(seen_since_ms)
                .fetch_all(&self.pool)
                .await?;
                rows.iter()
                    .map(|row| {
                        Ok(SessionHost {
                            url: row.text("url")?,
                            capacity: u64::try_from(row.int("capacity")?).unwrap_or(0),
                            open: u64::try_from(row.int("open")?).unwrap_or(0),
                            seen_ms: row.int("seen_ms")?,
                        })
                    })
                    .collect()
            }

            pub(super) async fn add_session_step(
                &self,
                step: &NewSessionStep<'_>,
            ) -> Result<(), Error> {
                let mut tx = self.pool.begin().await?;
                let image = step.image.map(|(bytes, media_type)| (Blob::pack(bytes, 3), media_type));
                if let Some((blob, _)) = &image {
                    sqlx::query(
                        "INSERT INTO blobs (sha256, codec, size, bytes) VALUES ($1, $2, $3, $4) \
                         ON CONFLICT (sha256) DO NOTHING",
                    )
                    .bind(&blob.sha256)
                    .bind(blob.codec)
                    .bind(blob.size as i64)
                    .bind(&blob.bytes)
                    .execute(&mut *tx)
                    .await?;
                }
                sqlx::query(
                    "INSERT INTO session_steps \
                     (session_id, seq, action, outcome, image_sha256, image_type, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7) \
                     ON CONFLICT (session_id, seq) DO NOTHING",
                )
                .bind(step.session_id)
                .bind(step.seq as i64)
                .bind(step.action.to_string())
                .bind(step.outcome.to_string())
                .bind(image.as_ref().map(|(blob, _)| blob.sha256.clone()))
                .bind(image.as_ref().map(|(_, media_type)| (*media_type).to_owned()))
                .bind(now_rfc3339())
                .execute(&mut *tx)
                .await?;
                tx.commit().await?;
                Ok(())
            }

            pub(super) async fn session_steps(
                &self,
                id: &str,
            ) -> Result<Vec<SessionStepRecord>, Error> {
                let rows = sqlx::query(
                    "SELECT seq, action, outcome, image_sha256, image_type, created_at \
                     FROM session_steps WHERE session_id = $1 ORDER BY seq",
                )
                .bind(id)
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(step).collect()
            }
        }
    };
}

session_queries!(super::sqlite::SqliteStore);
session_queries!(super::postgres::PgStore);
