//! The embedded queue engine: apalis-sqlite in its own SQLite file. In one file, apalis' sqlx
//! migrations and the store's would share `_sqlx_migrations`, and the second migrator would
//! refuse the first one's versions as "previously applied but missing". Workers take and
//! acknowledge tasks through apalis; pushes are trawl's own multi-row inserts of the rows
//! apalis writes (see `SqliteQueue::push`).
//!
//! Not here: the interface callers use (`queue::Queue`).

use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use apalis_core::backend::WireFormatBackend as _;
use apalis_core::backend::codec::Codec as _;
use apalis_sqlite::{SqliteConnectOptions, SqlitePool, SqliteStorage};
use sqlx::sqlite::{SqlitePoolOptions, SqliteSynchronous};

use super::{Envelope, Error, Lane, Settings, browse_queue_name, fetch_queue_name};

/// Tasks inserted by one statement at most (8 bound values each).
const TASKS_PER_INSERT: usize = 100;

/// One row of apalis' `Jobs` table, as [`SqliteQueue::push`] writes it.
struct TaskRow {
    job: Vec<u8>,
    id: String,
    max_attempts: i64,
    run_at: i64,
    priority: i64,
    metadata: String,
    idempotency_key: Option<String>,
}

/// The queue in a SQLite file. Each lane's workers take tasks through a pool of their own,
/// so whether that pool has a connection in use tells whether one of their fetches may be
/// under way (see `runner::idle`); pushes and upkeep go through the shared pool.
#[derive(Debug, Clone)]
pub(super) struct SqliteQueue {
    pub(super) storage: SqliteStorage<Envelope>,
    pub(super) browse: SqliteStorage<Envelope>,
    pool: SqlitePool,
    namespace: String,
    /// How long a worker may be silent before its tasks are taken back.
    orphan_timeout: Duration,
    fetch_pool: SqlitePool,
    browse_pool: SqlitePool,
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
            // Every push, fetch and acknowledgement is on disk when it returns (the WAL synced
            // at each commit). NORMAL (sync at checkpoints only, as the store does) measured
            // the same on the crawl bench (4.30/4.49 against 4.60/4.44 ms CPU a page), so the
            // queue keeps the stronger promise.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(30));
        // Two processes opening a new queue file at once would both run apalis' migrations
        // (and its switch to WAL).
        let lock = crate::store::lock_sqlite_migrations(options.get_filename())
            .await
            .map_err(|error| {
                Error::Backend(format!("locking the queue for its migrations: {error}"))
            })?;
        // apalis' setup sets pragmas on the connection it runs on, and they last as long as
        // that connection: `synchronous = OFF` (the WAL never synced, not even at checkpoints:
        // a power cut could corrupt the file) and a 64,000-page cache. It gets a connection of
        // its own, closed after it, so that every connection that works on the queue has the
        // options above.
        let setup = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options.clone())
            .await?;
        SqliteStorage::<()>::setup(&setup)
            .await
            .map_err(|error| Error::Backend(error.to_string()))?;
        setup.close().await;
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options.clone())
            .await?;
        // A worker's backend runs one statement at a time (fetch, acknowledgements,
        // heartbeat), so two connections leave room to spare.
        let worker_pool = || {
            SqlitePoolOptions::new()
                .max_connections(2)
                .connect_lazy_with(options.clone())
        };
        let (fetch_pool, browse_pool) = (worker_pool(), worker_pool());
        // apalis' index on `Jobs.lock_by` makes SQLite answer each acknowledgement (an UPDATE
        // joining the task ids of a JSON array) by walking every row the worker holds (in flight,
        // and acknowledged rows until the next prune) and reading the whole JSON array again for
        // each: about half the queue's CPU (benches/queue.rs). Without it, the array is read once
        // and each task found by its id. Nothing else of apalis' or trawl's looks tasks up by
        // `lock_by` alone (recovery selects by status first). Dropped on every open, in case a
        // later apalis migration creates it again.
        sqlx::query("DROP INDEX IF EXISTS LIdx")
            .execute(&pool)
            .await?;
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
        let on = |pool: &SqlitePool, name: String| {
            SqliteStorage::<Envelope>::new(pool).with_config(config(name))
        };
        Ok(SqliteQueue {
            storage: on(&fetch_pool, fetch_queue_name(namespace)),
            browse: on(&browse_pool, browse_queue_name(namespace)),
            pool,
            namespace: namespace.to_owned(),
            orphan_timeout: settings.heartbeat * settings.missed_heartbeats as u32,
            fetch_pool,
            browse_pool,
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

    /// Pushes envelopes into a lane's queue in one transaction, many rows per statement; an
    /// envelope whose job is already in the queue is left out (see `keyed_tasks`).
    ///
    /// apalis' own push (`push_all`) runs one INSERT per task inside its transaction, and the
    /// transaction holds the file's write lock throughout: a crawl's sitemap of 100,000 pages
    /// kept the workers from fetching or acknowledging for seconds at a time. The rows are
    /// the ones apalis writes (its `queries/task/sink.sql`): the task encoded by the storage's
    /// codec, its id (a new ULID when it has none), queue name, `Pending`, attempts allowed
    /// (apalis' default 25), run time (now unless set), priority, metadata as JSON and
    /// idempotency key.
    pub(super) async fn push(&self, lane: Lane, envelopes: Vec<Envelope>) -> Result<(), Error> {
        if envelopes.is_empty() {
            return Ok(());
        }
        // The lane's storage only lends its codec (what its workers decode with); the rows
        // go through the shared pool.
        let (storage, queue) = match lane {
            Lane::Fetch => (&self.storage, fetch_queue_name(&self.namespace)),
            Lane::Browse => (&self.browse, browse_queue_name(&self.namespace)),
        };
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |since| since.as_secs());
        let rows = super::keyed_tasks(envelopes)
            .map(|task| {
                let job = storage
                    .codec()
                    .encode(&task.args)
                    .map_err(|error| Error::Backend(format!("encoding a task: {error}")))?;
                Ok(TaskRow {
                    job,
                    id: task
                        .task_id()
                        .map_or_else(|| ulid::Ulid::generate().to_string(), |id| id.to_string()),
                    max_attempts: task.max_attempts().unwrap_or(25) as i64,
                    run_at: task.run_at().unwrap_or(now) as i64,
                    priority: task.priority().unwrap_or_default() as i64,
                    metadata: serde_json::to_string(task.metadata()).unwrap_or_default(),
                    idempotency_key: task.idempotency_key().map(str::to_owned),
                })
            })
            .collect::<Result<Vec<TaskRow>, Error>>()?;
        let mut tx = self.pool.begin_with("BEGIN IMMEDIATE").await?;
        for chunk in rows.chunks(TASKS_PER_INSERT) {
            let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
                "INSERT INTO Jobs (job, id, job_type, status, attempts, max_attempts, run_at, \
                 priority, metadata, idempotency_key) ",
            );
            insert.push_values(chunk, |mut row, task| {
                row.push_bind(task.job.as_slice())
                    .push_bind(task.id.as_str())
                    .push_bind(queue.as_str())
                    .push("'Pending', 0")
                    .push_bind(task.max_attempts)
                    .push_bind(task.run_at)
                    .push_bind(task.priority)
                    .push_bind(task.metadata.as_str())
                    .push_bind(task.idempotency_key.as_deref());
            });
            insert.push(" ON CONFLICT (job_type, idempotency_key) DO NOTHING");
            insert.build().execute(&mut *tx).await?;
        }
        tx.commit().await?;
        Ok(())
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

    /// Whether a connection of a lane's worker pool is in use: a fetch of that lane's worker
    /// may be under way.
    pub(super) fn lane_in_use(&self, lane: Lane) -> Arc<dyn Fn() -> bool + Send + Sync> {
        let pool = match lane {
            Lane::Fetch => self.fetch_pool.clone(),
            Lane::Browse => self.browse_pool.clone(),
        };
        Arc::new(move || pool.size() as usize > pool.num_idle())
    }

    /// Closes the pools.
    pub(super) async fn close(&self) {
        self.fetch_pool.close().await;
        self.browse_pool.close().await;
        self.pool.close().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every connection the queue works through syncs the WAL at each commit (FULL, 2), none
    /// never (OFF, 0, which apalis' setup leaves on the connection it runs on).
    #[tokio::test]
    async fn every_connection_syncs_at_each_commit() {
        let dir = tempfile::tempdir().expect("temp dir");
        let settings = crate::deps::RunnerConfig::default().queue_settings();
        let queue = SqliteQueue::open(&dir.path().join("queue.sqlite"), "sync", settings)
            .await
            .expect("queue opens");
        for pool in [&queue.pool, &queue.fetch_pool, &queue.browse_pool] {
            // All of the pool's connections at once, the one it opened first among them.
            let mut connections = Vec::new();
            for _ in 0..pool.options().get_max_connections() {
                connections.push(pool.acquire().await.expect("a connection"));
            }
            for connection in &mut connections {
                let (synchronous,): (i64,) = sqlx::query_as("PRAGMA synchronous")
                    .fetch_one(&mut **connection)
                    .await
                    .expect("pragma reads");
                assert_eq!(synchronous, 2, "synchronous = FULL on every connection");
            }
        }
    }
}
