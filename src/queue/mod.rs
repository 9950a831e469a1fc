//! The queue: delivers job envelopes (id + job) to worker pools, at least once. Two engines
//! behind one `Queue`: apalis-sqlite in its own SQLite file (embedded, the default) and
//! apalis-redis (distributed: many worker processes on many machines share one Redis).
//!
//! Not here: what happened to a job (`store` records that), nor running it (`runner`).

mod redis;
mod sqlite;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use apalis_redis::RedisStorage;
use apalis_sqlite::SqliteStorage;
use serde::{Deserialize, Serialize};
use trawl_workers::job::Job;

/// How long [`Queue::connect_redis`] waits for Redis to answer a first connection.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

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
    /// The tenant it belongs to: its page is stored for it, and its cache lookups are its
    /// (envelopes queued before tenants existed are the default tenant's).
    #[serde(default)]
    pub tenant: crate::tenant::Tenant,
}

/// The envelopes as queue tasks keyed by their job id (apalis' idempotency key): the queue
/// holds a job once however often it is pushed, as long as it holds it (until its task is
/// pruned after it ended; on Redis, for at most a day).
fn keyed_tasks(envelopes: Vec<Envelope>) -> impl Iterator<Item = apalis::prelude::Task<Envelope>> {
    envelopes.into_iter().map(|envelope| {
        let key = envelope.id.clone();
        apalis::prelude::TaskBuilder::new(envelope)
            .idempotency_key(key)
            .build()
    })
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
            tenant: crate::tenant::Tenant::default(),
        }
    }
}

/// The name of the fetch queue under a namespace. Queue names are never derived from Rust
/// type paths (apalis' default), so renaming a type cannot strand queued jobs.
pub fn fetch_queue_name(namespace: &str) -> String {
    format!("{namespace}:fetch")
}

/// The name of the browse queue under a namespace: jobs that need the browser (browse jobs,
/// fetches with `render: true`), taken only by workers that run one.
pub fn browse_queue_name(namespace: &str) -> String {
    format!("{namespace}:browse")
}

/// Queue failures.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The queue database said no.
    #[error("queue: {0}")]
    Database(#[from] sqlx::Error),
    /// Redis said no (or could not be reached).
    #[error("queue: redis: {0}")]
    Redis(#[from] ::redis::RedisError),
    /// Redis could not be reached: down, refusing, an unknown host, or no answer in time.
    #[error("queue: Redis cannot be reached: {0}")]
    Unreachable(String),
    /// Redis may evict keys under memory pressure, which would silently drop queued jobs.
    #[error(
        "queue: redis runs with maxmemory-policy {policy}, which may evict queued jobs; \
         set it to noeviction (`CONFIG SET maxmemory-policy noeviction`, or \
         `maxmemory-policy noeviction` in redis.conf)"
    )]
    EvictionPolicy {
        /// The policy Redis reported.
        policy: String,
    },
    /// apalis said no.
    #[error("queue: {0}")]
    Backend(String),
}

/// The queue, on one of its engines.
#[derive(Debug, Clone)]
pub struct Queue {
    engine: Engine,
    /// Woken after each push into a lane by this process, so its idle workers look at once.
    pushed: Arc<[Arc<tokio::sync::Notify>; 2]>,
}

#[derive(Debug, Clone)]
enum Engine {
    Sqlite(Box<sqlite::SqliteQueue>),
    Redis(Box<redis::RedisQueue>),
}

/// The apalis storage a worker takes tasks from, per engine (for the runner).
#[derive(Debug, Clone)]
pub enum Storage {
    /// The embedded engine.
    Sqlite(SqliteStorage<Envelope>),
    /// The distributed engine.
    Redis(RedisStorage<Envelope>),
}

/// The two queues of a namespace: plain work, and work that needs the browser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lane {
    /// Fetch jobs over plain HTTP (and `render: "auto"`, which escalates in place).
    Fetch,
    /// Browse jobs and `render: true` fetches: only workers with a browser take them.
    Browse,
}

impl Lane {
    /// `fetch` or `browse`.
    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Fetch => "fetch",
            Lane::Browse => "browse",
        }
    }
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
    /// Opens (creating if needed) the embedded queue file at `path` for `namespace`.
    pub async fn open(path: &Path, namespace: &str, settings: Settings) -> Result<Queue, Error> {
        let engine = Engine::Sqlite(Box::new(
            sqlite::SqliteQueue::open(path, namespace, settings).await?,
        ));
        Ok(Queue::on(engine))
    }

    /// Connects to the Redis at `url` for `namespace`. Refuses a Redis whose
    /// `maxmemory-policy` is not `noeviction` ([`Error::EvictionPolicy`]); when the policy
    /// cannot be read (CONFIG and INFO disabled, as on some managed Redis), warns and goes on.
    pub async fn connect_redis(
        url: &str,
        namespace: &str,
        settings: Settings,
    ) -> Result<Queue, Error> {
        Queue::connect_redis_within(url, namespace, settings, DEFAULT_CONNECT_TIMEOUT).await
    }

    /// Like [`Queue::connect_redis`], giving Redis `connect_timeout` to answer a first
    /// connection: a Redis that is down, refuses or does not answer fails with
    /// [`Error::Unreachable`] within that time (the connection manager would retry first).
    pub async fn connect_redis_within(
        url: &str,
        namespace: &str,
        settings: Settings,
        connect_timeout: Duration,
    ) -> Result<Queue, Error> {
        let engine = Engine::Redis(Box::new(
            redis::RedisQueue::connect(url, namespace, settings, connect_timeout).await?,
        ));
        Ok(Queue::on(engine))
    }

    fn on(engine: Engine) -> Queue {
        Queue {
            engine,
            pushed: Arc::new([
                Arc::new(tokio::sync::Notify::new()),
                Arc::new(tokio::sync::Notify::new()),
            ]),
        }
    }

    /// Woken each time this process (this `Queue` or a clone) has pushed tasks into `lane`:
    /// the pools wait on it rather than polling fast (pushes from other processes are seen
    /// at the next, slower, poll).
    pub fn pushed(&self, lane: Lane) -> Arc<tokio::sync::Notify> {
        self.pushed[lane as usize].clone()
    }

    /// Pushes envelopes in bulk (one transaction on SQLite, one script call per 1,000 on
    /// Redis): jobs that need the browser to the browse queue, the rest to the fetch queue.
    /// Tasks are keyed by job id: pushing a job the queue still holds adds nothing (a crawl
    /// page delivered again pushes its follow-ups again).
    pub async fn push(&self, envelopes: Vec<Envelope>) -> Result<(), Error> {
        let (browse, fetch): (Vec<Envelope>, Vec<Envelope>) = envelopes
            .into_iter()
            .partition(|envelope| envelope.job.needs_browser());
        for (lane, envelopes) in [(Lane::Fetch, fetch), (Lane::Browse, browse)] {
            if envelopes.is_empty() {
                continue;
            }
            match &self.engine {
                Engine::Sqlite(queue) => queue.push(lane, envelopes).await?,
                Engine::Redis(queue) => queue.push(lane, envelopes).await?,
            }
            self.pushed[lane as usize].notify_waiters();
        }
        Ok(())
    }

    /// Deletes the queue's data of tasks that ended. The store keeps every job's record; apalis
    /// keeps its own forever. On SQLite its ack query walks every row the worker ever locked,
    /// so without this a long run slows down quadratically (measured: sqlite JSON functions
    /// grew from 2 % to 16 % of CPU between a 500- and a 5,000-page run); on Redis the task
    /// data and metadata would grow without bound (apalis-redis sets no expiry on them).
    pub async fn prune_finished(&self) -> Result<u64, Error> {
        match &self.engine {
            Engine::Sqlite(queue) => queue.prune_finished().await,
            Engine::Redis(queue) => queue.prune_finished().await,
        }
    }

    /// Makes due tasks fetchable. apalis-redis moves *all* due tasks in one Lua `unpack`, which
    /// fails from about 8,000 on (Lua's stack limit) and wedges the queue; this moves
    /// them 1,000 at a time. Call before starting workers and periodically while they run.
    /// Nothing to do on SQLite. Returns how many were moved.
    pub async fn promote_due(&self) -> Result<u64, Error> {
        match &self.engine {
            Engine::Sqlite(_) => Ok(0),
            Engine::Redis(queue) => queue.promote_due().await,
        }
    }

    /// Hands the tasks held by the lane's dead workers (silent for `heartbeat ×
    /// missed_heartbeats`) back to the queue, at once rather than at a live worker's next
    /// heartbeat. Returns how many. Call when a pool starts.
    pub async fn recover_orphans(&self, lane: Lane) -> Result<u64, Error> {
        match &self.engine {
            Engine::Sqlite(queue) => queue.recover_orphans(lane).await,
            Engine::Redis(queue) => queue.recover_orphans(lane).await,
        }
    }

    /// Checks that the queue backend answers.
    pub async fn ping(&self) -> Result<(), Error> {
        match &self.engine {
            Engine::Sqlite(queue) => queue.ping().await,
            Engine::Redis(queue) => queue.ping().await,
        }
    }

    /// Returns the apalis storage of the fetch queue, for the runner's workers.
    pub fn storage(&self) -> Storage {
        self.lane_storage(Lane::Fetch)
    }

    /// Returns the apalis storage of a lane, for the runner's workers.
    pub fn lane_storage(&self, lane: Lane) -> Storage {
        match (&self.engine, lane) {
            (Engine::Sqlite(queue), Lane::Fetch) => Storage::Sqlite(queue.storage.clone()),
            (Engine::Sqlite(queue), Lane::Browse) => Storage::Sqlite(queue.browse.clone()),
            (Engine::Redis(queue), Lane::Fetch) => Storage::Redis(queue.storage.clone()),
            (Engine::Redis(queue), Lane::Browse) => Storage::Redis(queue.browse.clone()),
        }
    }

    /// On the embedded queue, whether a fetch of `lane`'s workers may be under way (a
    /// connection of their own pool is in use): the runner passes their polls on only then
    /// or when it means to look (`runner::idle`). `None` on Redis.
    pub fn lane_in_use(&self, lane: Lane) -> Option<Arc<dyn Fn() -> bool + Send + Sync>> {
        match &self.engine {
            Engine::Sqlite(queue) => Some(queue.lane_in_use(lane)),
            Engine::Redis(_) => None,
        }
    }

    /// Closes the connections (Redis connections close when the last clone is dropped).
    pub async fn close(&self) {
        match &self.engine {
            Engine::Sqlite(queue) => queue.close().await,
            Engine::Redis(_) => {}
        }
    }
}
