//! The embedded queue engine: apalis-sqlite in its own SQLite file. In one file, apalis' sqlx
//! migrations and the store's would share `_sqlx_migrations`, and the second migrator would
//! refuse the first one's versions as "previously applied but missing".
//!
//! Not here: the interface callers use (`queue::Queue`).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use apalis::prelude::TaskSink;
use apalis_sqlite::{SqliteConnectOptions, SqlitePool, SqliteStorage};
use sqlx::sqlite::SqlitePoolOptions;

use super::{Envelope, Error, Lane, Settings, browse_queue_name, fetch_queue_name};

/// The queue in a SQLite file.
#[derive(Debug, Clone)]
pub(super) struct SqliteQueue {
    pub(super) storage: SqliteStorage<Envelope>,
    pub(super) browse: SqliteStorage<Envelope>,
    pool: SqlitePool,
    namespace: String,
    /// How long a worker may be silent before its tasks are taken back.
    orphan_timeout: Duration,
}

impl SqliteQueue {
    /// Opens (creating if needed) the queue file at `path` for `namespace`.
    pub(super) async fn open(
        path: &Path,
        namespace: &str,
        settings: Settings,
    ) -> Result<SqliteQueue, Error> {
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            .busy_timeout(Duration::from_secs(30));
        // Two processes opening a new queue file at once would both run apalis' migrations
        // (and its switch to WAL).
        let lock = crate::store::lock_sqlite_migrations(options.get_filename())
            .await
            .map_err(|error| {
                Error::Backend(format!("locking the queue for its migrations: {error}"))
            })?;
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.clone())
            .await?;
        SqliteStorage::<()>::setup(&pool)
            .await
            .map_err(|error| Error::Backend(error.to_string()))?;
        drop(lock);
        let config = |name: String| {
            apalis_sqlite::Config::default()
                .queue(name)
                .batch_size(settings.batch_size)
                .heartbeat_interval(settings.heartbeat)
                .missed_heartbeats(settings.missed_heartbeats)
                // Locking (apalis' default) marks each task Running as it starts with a query
                // whose status condition SQLite answers by scanning every pending task: the
                // cost of starting a task grew with the backlog (208 no-op jobs/s with 20,000
                // queued; benches/queue.rs). Fetched tasks stay Queued under this worker's
                // name until acknowledged, which is what orphan recovery and graceful release
                // look for; the store keeps who runs a job.
                .lock_tasks(false)
        };
        let storage =
            SqliteStorage::<Envelope>::new(&pool).with_config(config(fetch_queue_name(namespace)));
        let browse =
            SqliteStorage::<Envelope>::new(&pool).with_config(config(browse_queue_name(namespace)));
        Ok(SqliteQueue {
            storage,
            browse,
            pool,
            namespace: namespace.to_owned(),
            orphan_timeout: settings.heartbeat * settings.missed_heartbeats as u32,
        })
    }

    /// Hands the tasks of a lane's dead workers (silent for the orphan timeout) back to the
    /// queue. apalis does it only from a live worker's heartbeat, the first one a heartbeat
    /// interval after the worker starts: a short `trawl run` after a killed one would end
    /// before it, and leave the dead worker's jobs held for ever.
    pub(super) async fn recover_orphans(&self, lane: Lane) -> Result<u64, Error> {
        let queue = match lane {
            Lane::Fetch => fetch_queue_name(&self.namespace),
            Lane::Browse => browse_queue_name(&self.namespace),
        };
        let recovered = sqlx::query(
            "UPDATE Jobs
             SET status = 'Pending', done_at = NULL, lock_by = NULL, lock_at = NULL,
                 attempts = attempts + 1,
                 last_result = '{\"Err\": \"re-enqueued: its worker stopped sending heartbeats\"}'
             WHERE status IN ('Queued', 'Running')
               AND lock_by IN (
                 SELECT id FROM Workers
                 WHERE worker_type = ?1 AND strftime('%s', 'now') - last_seen >= ?2)",
        )
        .bind(queue)
        .bind(self.orphan_timeout.as_secs() as i64)
        .execute(&self.pool)
        .await?;
        Ok(recovered.rows_affected())
    }

    /// Pushes envelopes into a lane's queue in one transaction; an envelope whose job is
    /// already in the queue is left out (see `keyed_tasks`).
    pub(super) async fn push(&self, lane: Lane, envelopes: Vec<Envelope>) -> Result<(), Error> {
        let mut storage = match lane {
            Lane::Fetch => self.storage.clone(),
            Lane::Browse => self.browse.clone(),
        };
        storage
            .push_all(futures_util::stream::iter(super::keyed_tasks(envelopes)))
            .await
            .map_err(|error| Error::Backend(error.to_string()))
    }

    /// Deletes the rows of tasks that ended.
    pub(super) async fn prune_finished(&self) -> Result<u64, Error> {
        let deleted = sqlx::query("DELETE FROM Jobs WHERE status IN ('Done', 'Killed')")
            .execute(&self.pool)
            .await?;
        Ok(deleted.rows_affected())
    }

    /// Checks that the queue database answers.
    pub(super) async fn ping(&self) -> Result<(), Error> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Closes the pool.
    pub(super) async fn close(&self) {
        self.pool.close().await;
    }
}
