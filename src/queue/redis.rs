//! The distributed queue engine: apalis-redis, shared by every worker process. Works around
//! what apalis-redis 1.0.0 leaves to its users: due tasks promoted 1,000 at a time (its own
//! promotion moves every due task in one Lua `unpack`, which fails from about 8,000 on),
//! ended tasks' data deleted (apalis keeps each task's hash and data for ever), the orphan
//! timeout set explicitly (its `Config::default()` allows 10 missed heartbeats), results
//! persisted (without them no Complete event is sent and tasks never leave `inflight`) and an
//! eviction policy that could drop queued jobs refused.
//!
//! Not here: the interface callers use (`queue::Queue`), nor worker names (`runner`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ::redis::Script;
use ::redis::aio::ConnectionManager;
use apalis::prelude::TaskSink;
use apalis_redis::RedisStorage;

use super::{Envelope, Error, Lane, Settings, browse_queue_name, fetch_queue_name};

/// Task ids moved per script call: `unpack` in Lua fails from about 8,000 values on.
const CHUNK: usize = 1_000;

/// How long Redis remembers that a job was pushed (its task's idempotency key).
const IDEMPOTENCY_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Moves up to `ARGV[2]` ids due by `ARGV[1]` from the scheduled set to the active list (the same
/// move apalis' `fetch_next.lua` makes, bounded).
const PROMOTE_DUE: &str = r"
local ids = redis.call('zrangebyscore', KEYS[1], 0, ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
if #ids > 0 then
  redis.call('rpush', KEYS[2], unpack(ids))
  redis.call('zrem', KEYS[1], unpack(ids))
  redis.call('del', KEYS[3])
  redis.call('lpush', KEYS[3], 1)
end
return #ids";

/// Pops up to `ARGV[1]` ids from the done and dead sets and deletes their data, metadata and
/// result (what apalis' `vacuum.lua` deletes, without its walk over the whole data hash and
/// without touching `Failed` tasks, which apalis-redis still retries).
const PRUNE_ENDED: &str = r"
local pruned = 0
for _, set in ipairs({KEYS[1], KEYS[2]}) do
  local ids = redis.call('spop', set, tonumber(ARGV[1]))
  for _, id in ipairs(ids) do
    redis.call('hdel', KEYS[3], id)
    redis.call('del', KEYS[4] .. ':' .. id)
    redis.call('hdel', KEYS[4] .. ':result', id)
    pruned = pruned + 1
  end
end
return pruned";

/// Moves the in-flight tasks of every worker last seen at or before `ARGV[1]` (unix seconds)
/// back to the active list and forgets those workers (their in-flight sets are
/// `ARGV[2]:{worker}`), in chunks of 1,000 ids for Lua's `unpack`. Returns how many.
const RECOVER_ORPHANS: &str = r"
local workers = redis.call('zrangebyscore', KEYS[1], 0, ARGV[1])
local moved = 0
for _, worker in ipairs(workers) do
  local inflight = ARGV[2] .. ':' .. worker
  local ids = redis.call('smembers', inflight)
  for first = 1, #ids, 1000 do
    redis.call('rpush', KEYS[2], unpack(ids, first, math.min(first + 999, #ids)))
  end
  moved = moved + #ids
  redis.call('del', inflight)
  redis.call('zrem', KEYS[1], worker)
end
if moved > 0 then
  redis.call('del', KEYS[3])
  redis.call('lpush', KEYS[3], 1)
end
return moved";

/// The queue in Redis.
#[derive(Debug, Clone)]
pub(super) struct RedisQueue {
    pub(super) storage: RedisStorage<Envelope>,
    pub(super) browse: RedisStorage<Envelope>,
    connection: ConnectionManager,
    config: apalis_redis::Config,
    browse_config: apalis_redis::Config,
}

impl RedisQueue {
    /// Connects (one first connection tried alone within `connect_timeout`: the connection
    /// manager retries a refused connection several times before it reports it), checks the
    /// eviction policy and promotes the tasks already due.
    pub(super) async fn connect(
        url: &str,
        namespace: &str,
        settings: Settings,
        connect_timeout: Duration,
    ) -> Result<RedisQueue, Error> {
        probe(url, connect_timeout).await?;
        let mut connection = apalis_redis::connect(url).await?;
        check_eviction_policy(&mut connection).await?;
        let lane_config = |name: String| {
            apalis_redis::Config::default()
                .queue(name)
                .batch_size(settings.batch_size)
                .heartbeat_interval(settings.heartbeat)
                // apalis_redis::Config::default() allows 10 missed heartbeats (its docs say 2).
                .missed_heartbeats(settings.missed_heartbeats)
                // Without persisted results no Complete event is sent and tasks never leave
                // `inflight`; it is the default, set here so it stays so.
                .persist_results(true)
                // Locking (apalis' default) runs LREM over the whole waiting list for every
                // task started, to remove an id fetch_next already removed: Redis CPU grows
                // with the backlog (172 µs a job with 20,000 queued, against 16 µs without;
                // benches/queue.rs). Nothing trawl relies on needs it: a dead worker's tasks
                // come back through its in-flight set, graceful release too, and the store
                // keeps who runs a job.
                .lock_tasks(false)
                // Tasks are pushed keyed by job id (`keyed_tasks`); a key outlives any
                // delivery of its job, and does not pile up for ever.
                .idempotency_ttl(Some(IDEMPOTENCY_TTL))
        };
        let config = lane_config(fetch_queue_name(namespace));
        let browse_config = lane_config(browse_queue_name(namespace));
        let storage = RedisStorage::<Envelope>::new(connection.clone()).with_config(config.clone());
        let browse =
            RedisStorage::<Envelope>::new(connection.clone()).with_config(browse_config.clone());
        let queue = RedisQueue {
            storage,
            browse,
            connection,
            config,
            browse_config,
        };
        queue.promote_due().await?;
        Ok(queue)
    }

    /// Pushes envelopes into a lane's queue, 1,000 per script call.
    pub(super) async fn push(&self, lane: Lane, envelopes: Vec<Envelope>) -> Result<(), Error> {
        let mut storage = match lane {
            Lane::Fetch => self.storage.clone(),
            Lane::Browse => self.browse.clone(),
        };
        let mut envelopes = envelopes.into_iter().peekable();
        while envelopes.peek().is_some() {
            let chunk: Vec<Envelope> = envelopes.by_ref().take(CHUNK).collect();
            storage
                .push_all(futures_util::stream::iter(super::keyed_tasks(chunk)))
                .await
                .map_err(|error| Error::Backend(error.to_string()))?;
        }
        Ok(())
    }

    /// Moves due tasks from the scheduled set to the active list, 1,000 per call, in both
    /// lanes.
    pub(super) async fn promote_due(&self) -> Result<u64, Error> {
        Ok(self.promote_lane(&self.config).await? + self.promote_lane(&self.browse_config).await?)
    }

    async fn promote_lane(&self, config: &apalis_redis::Config) -> Result<u64, Error> {
        let script = Script::new(PROMOTE_DUE);
        let mut connection = self.connection.clone();
        let mut promoted = 0_u64;
        loop {
            let moved: u64 = script
                .key(config.scheduled_jobs_set())
                .key(config.active_jobs_list())
                .key(config.signal_list())
                .arg(unix_seconds())
                .arg(CHUNK)
                .invoke_async(&mut connection)
                .await?;
            promoted += moved;
            if moved < CHUNK as u64 {
                return Ok(promoted);
            }
        }
    }

    /// Deletes what apalis keeps of tasks that ended (done or dead), 1,000 per call, in both
    /// lanes.
    pub(super) async fn prune_finished(&self) -> Result<u64, Error> {
        Ok(self.prune_lane(&self.config).await? + self.prune_lane(&self.browse_config).await?)
    }

    async fn prune_lane(&self, config: &apalis_redis::Config) -> Result<u64, Error> {
        let script = Script::new(PRUNE_ENDED);
        let mut connection = self.connection.clone();
        let mut pruned = 0_u64;
        loop {
            let deleted: u64 = script
                .key(config.done_jobs_set())
                .key(config.dead_jobs_set())
                .key(config.job_data_hash())
                .key(config.job_meta_hash())
                .arg(CHUNK)
                .invoke_async(&mut connection)
                .await?;
            pruned += deleted;
            if deleted < CHUNK as u64 {
                return Ok(pruned);
            }
        }
    }

    /// Hands the in-flight tasks of a lane's dead workers (not seen for the orphan timeout)
    /// back to the queue.
    pub(super) async fn recover_orphans(&self, lane: Lane) -> Result<u64, Error> {
        let config = match lane {
            Lane::Fetch => &self.config,
            Lane::Browse => &self.browse_config,
        };
        let expired_before = unix_seconds().saturating_sub(config.orphaned_duration().as_secs());
        let mut connection = self.connection.clone();
        Ok(Script::new(RECOVER_ORPHANS)
            .key(config.workers_set())
            .key(config.active_jobs_list())
            .key(config.signal_list())
            .arg(expired_before)
            .arg(config.inflight_jobs_set())
            .invoke_async::<u64>(&mut connection)
            .await?)
    }

    /// Checks that Redis answers.
    pub(super) async fn ping(&self) -> Result<(), Error> {
        let mut connection = self.connection.clone();
        let _: String = ::redis::cmd("PING").query_async(&mut connection).await?;
        Ok(())
    }
}

/// Opens one connection to the Redis at `url` and pings it within `connect_timeout`.
async fn probe(url: &str, connect_timeout: Duration) -> Result<(), Error> {
    let client = ::redis::Client::open(url)?;
    let attempt = async {
        let mut connection = client.get_multiplexed_async_connection().await?;
        ::redis::cmd("PING")
            .query_async::<String>(&mut connection)
            .await
    };
    match tokio::time::timeout(connect_timeout, attempt).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(error)) if error.is_io_error() || error.is_connection_refusal() => {
            Err(Error::Unreachable(error.to_string()))
        }
        Ok(Err(error)) => Err(error.into()),
        Err(_) => Err(Error::Unreachable(format!(
            "no answer within {} s",
            connect_timeout.as_secs_f32()
        ))),
    }
}

/// Refuses a Redis that may evict keys: an evicted task hash or list silently loses jobs.
/// Reads `CONFIG GET maxmemory-policy`, else `INFO memory`; when neither is allowed (managed
/// Redis often disables CONFIG), warns and goes on.
async fn check_eviction_policy(connection: &mut ConnectionManager) -> Result<(), Error> {
    let policy = match ::redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmemory-policy")
        .query_async::<Vec<String>>(connection)
        .await
    {
        Ok(reply) => reply.get(1).cloned(),
        Err(_) => match ::redis::cmd("INFO")
            .arg("memory")
            .query_async::<String>(connection)
            .await
        {
            Ok(info) => info.lines().find_map(|line| {
                line.strip_prefix("maxmemory_policy:")
                    .map(|policy| policy.trim().to_owned())
            }),
            Err(_) => None,
        },
    };
    match policy {
        Some(policy) if policy == "noeviction" => Ok(()),
        Some(policy) => Err(Error::EvictionPolicy { policy }),
        None => {
            tracing::warn!(
                "could not read redis maxmemory-policy (CONFIG and INFO refused); make sure it \
                 is noeviction, or queued jobs may be evicted under memory pressure"
            );
            Ok(())
        }
    }
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}
