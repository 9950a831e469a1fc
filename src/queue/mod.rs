//! The queue: delivers job envelopes (id + job) to worker pools, at least once. Today the
//! embedded engine, apalis-sqlite in its own SQLite file; apalis-redis comes with distributed
//! mode behind the same methods.
//!
//! Not here: what happened to a job (`store` records that), nor running it (`runner`).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use apalis::prelude::TaskSink;
use apalis_sqlite::{SqliteConnectOptions, SqlitePool, SqliteStorage};
use serde::{Deserialize, Serialize};
use sqlx::sqlite::SqlitePoolOptions;
use trawl_workers::job::Job;

/// What travels through the queue: the job id (a ULID, the key of every write), the job, and
/// where its events go.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The job id.
    pub id: String,
    /// The job.
    pub job: Job,
    /// The batch it belongs to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<String>,
    /// Where its events are POSTed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
    /// The crawl it belongs to, and how many links from a seed it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crawl: Option<CrawlRef>,
}

/// A job's place in a crawl.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrawlRef {
    /// The crawl id.
    pub id: String,
    /// Links followed from a seed to reach this page (0 for a seed or a sitemap entry).
    pub depth: u32,
}

impl Envelope {
    /// An envelope for a job outside any batch, without a webhook.
    pub fn new(id: String, job: Job) -> Envelope {
        Envelope {
            id,
            job,
            batch_id: None,
            webhook: None,
            crawl: None,
        }
    }
}

/// The name of the fetch queue under a namespace. Queue names are never derived from Rust
/// type paths (apalis' default), so renaming a type cannot strand queued jobs.
pub fn fetch_queue_name(namespace: &str) -> String {
    format!("{namespace}:fetch")
}

/// Queue failures.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The queue database said no.
    #[error("queue: {0}")]
    Database(#[from] sqlx::Error),
    /// apalis said no.
    #[error("queue: {0}")]
    Backend(String),
}

/// The embedded queue.
#[derive(Debug, Clone)]
pub struct Queue {
    storage: SqliteStorage<Envelope>,
    pool: SqlitePool,
}

/// How the pools take work from the queue.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Tasks fetched per poll (kept at or below the pool's concurrency).
    pub batch_size: usize,
    /// Heartbeat of a worker; a worker silent for `heartbeat * missed_heartbeats` is presumed
    /// dead and its jobs are handed to another.
    pub heartbeat: Duration,
    /// Missed heartbeats before a worker's jobs are recovered.
    pub missed_heartbeats: usize,
}

impl Queue {
    /// Opens (creating if needed) the queue file at `path` for `namespace`.
    pub async fn open(path: &Path, namespace: &str, settings: Settings) -> Result<Queue, Error> {
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))?
            .create_if_missing(true)
            .busy_timeout(Duration::from_secs(30));
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await?;
        SqliteStorage::<()>::setup(&pool)
            .await
            .map_err(|error| Error::Backend(error.to_string()))?;
        let config = apalis_sqlite::Config::default()
            .queue(fetch_queue_name(namespace))
            .batch_size(settings.batch_size)
            .heartbeat_interval(settings.heartbeat)
            .missed_heartbeats(settings.missed_heartbeats);
        let storage = SqliteStorage::<Envelope>::new(&pool).with_config(config);
        Ok(Queue { storage, pool })
    }

    /// Pushes envelopes in one transaction.
    pub async fn push(&self, envelopes: Vec<Envelope>) -> Result<(), Error> {
        if envelopes.is_empty() {
            return Ok(());
        }
        let mut storage = self.storage.clone();
        storage
            .push_bulk(envelopes)
            .await
            .map_err(|error| Error::Backend(error.to_string()))
    }

    /// Deletes the queue's rows of tasks that ended. The store keeps every job's record; apalis
    /// keeps its own rows forever, and its ack query walks every row the worker ever locked,
    /// so without this a long run slows down quadratically (measured: sqlite JSON functions
    /// grew from 2 % to 16 % of CPU between a 500- and a 5,000-page run).
    pub async fn prune_finished(&self) -> Result<u64, Error> {
        let deleted = sqlx::query("DELETE FROM Jobs WHERE status IN ('Done', 'Killed')")
            .execute(&self.pool)
            .await?;
        Ok(deleted.rows_affected())
    }

    /// Checks that the queue database answers.
    pub async fn ping(&self) -> Result<(), Error> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    /// Returns the apalis storage, for the runner's workers.
    pub fn storage(&self) -> SqliteStorage<Envelope> {
        self.storage.clone()
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}
