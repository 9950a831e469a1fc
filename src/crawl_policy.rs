//! What the crawls of a process share, and the rules a crawl page must pass before it is
//! fetched: the crawls' plans (spec, seeds, compiled globs, the seen-URL cache), robots.txt
//! per origin (remembered for its max age; an unreachable one makes pages wait and ask again),
//! and per-host politeness turns. Embedded, the politeness gate is this process's, shared by
//! all its crawls; with Redis (distributed mode) it is shared by every worker of the namespace
//! ([`SharedGate`]).
//!
//! Not here: seeding and following links, which need the store and the queue (`crawl`);
//! parsing robots.txt and sitemaps, scope and glob rules (`trawl_workers::crawl`).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lru::LruCache;
use trawl_workers::crawl::politeness::{self, HostGate, host_key};
use trawl_workers::crawl::robots::Access;
use trawl_workers::crawl::{Robots, UrlFilter, robots_url};
use trawl_workers::job::{CrawlSpec, ErrorCode, JobError};
use url::Url;

use crate::store;
use crate::tenant::Tenant;

/// What the crawls of a process share: the politeness gate, robots.txt per origin, and the
/// crawls' plans (spec, seeds, compiled globs).
pub struct Crawls {
    gate: HostGate,
    /// The politeness shared by every process on one Redis (distributed mode); when set, it
    /// is used instead of `gate`.
    shared_gate: Option<SharedGate>,
    /// robots.txt per origin. Each origin's slot is an async lock held while its file is
    /// fetched, so pages of one host waiting for it cause one request, not one each.
    robots: Mutex<LruCache<String, Arc<tokio::sync::Mutex<Option<RobotsEntry>>>>>,
    /// How long a page waits for a robots.txt that cannot be fetched.
    robots_wait: Duration,
    plans: Mutex<LruCache<String, Arc<Plan>>>,
}

/// An origin's robots.txt as this process last fetched it.
#[derive(Debug)]
struct RobotsEntry {
    robots: Arc<Robots>,
    /// Until when it may be used: its max age, or, while unreachable, the next retry.
    valid_until: Instant,
    /// Fetches in a row that found it unreachable.
    failures: u32,
}

/// What a robots.txt says of one URL.
pub(crate) enum Verdict {
    /// It may be fetched, keeping this Crawl-delay.
    Allowed(Option<Duration>),
    /// robots.txt disallows it.
    Disallowed,
    /// robots.txt could not be fetched: nothing may be fetched yet.
    Unreachable,
}

impl Verdict {
    pub(crate) fn of(robots: &Robots, url: &Url) -> Verdict {
        match robots.access() {
            Access::Unreachable => Verdict::Unreachable,
            Access::Parsed | Access::Unavailable if robots.allowed(url) => {
                Verdict::Allowed(robots.crawl_delay())
            }
            Access::Parsed | Access::Unavailable => Verdict::Disallowed,
        }
    }
}

impl std::fmt::Debug for Crawls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Crawls").finish_non_exhaustive()
    }
}

/// A crawl ready to apply to links.
#[derive(Debug)]
pub struct Plan {
    /// The crawl id.
    pub id: String,
    /// The tenant it belongs to (and its pages).
    pub tenant: Tenant,
    /// What was asked.
    pub spec: CrawlSpec,
    pub(crate) seeds: Vec<Url>,
    filter: UrlFilter,
    /// URL keys this process knows the store has recorded as seen.
    pub(crate) seen: Mutex<SeenKeys>,
}

/// URL keys of one crawl known to be in the store's seen-set (`crawl_urls`), so links found
/// again and again (a site's navigation is on every page) are not written to the store each
/// time. Only keys the store has confirmed are remembered: a key found here is seen in the
/// store, so leaving it out of the write changes no answer (it would not be new). Keys are
/// kept as 128-bit digests (16 bytes each; a collision, which would skip one URL, is
/// vanishingly unlikely), at most [`SEEN_CACHE`] of them: when full, the cache starts again.
#[derive(Debug, Default)]
pub(crate) struct SeenKeys {
    digests: std::collections::HashSet<u128>,
}

/// Seen URL keys remembered per crawl and process (about 9 MB when full; a crawl of 100,000
/// pages has about 110,000 keys). Plans, and so these caches, are kept for [`PLAN_CACHE`]
/// crawls at most.
const SEEN_CACHE: usize = 1 << 18;

impl SeenKeys {
    fn digest(key: &str) -> u128 {
        use sha2::Digest as _;
        let hash = sha2::Sha256::digest(key.as_bytes());
        let mut bytes = [0_u8; 16];
        bytes.copy_from_slice(&hash[..16]);
        u128::from_le_bytes(bytes)
    }

    pub(crate) fn contains(&self, key: &str) -> bool {
        self.digests.contains(&SeenKeys::digest(key))
    }

    pub(crate) fn remember<'k>(&mut self, keys: impl IntoIterator<Item = &'k str>) {
        for key in keys {
            if self.digests.len() >= SEEN_CACHE {
                self.digests.clear();
            }
            self.digests.insert(SeenKeys::digest(key));
        }
    }
}

impl Plan {
    pub(crate) fn new(
        id: &str,
        tenant: Tenant,
        spec: CrawlSpec,
        seeds: Vec<Url>,
    ) -> Result<Plan, String> {
        let filter =
            UrlFilter::new(&spec.include, &spec.exclude).map_err(|error| error.to_string())?;
        Ok(Plan {
            id: id.to_owned(),
            tenant,
            spec,
            seeds,
            filter,
            seen: Mutex::new(SeenKeys::default()),
        })
    }

    /// Whether the crawl takes `url`: a seed always (the globs choose which links to follow,
    /// not whether the seeds are fetched); any other URL when it is in a seed's scope and
    /// passes the globs.
    pub(crate) fn in_scope(&self, url: &Url) -> bool {
        if self.seeds.iter().any(|seed| seed == url) {
            return true;
        }
        self.seeds
            .iter()
            .any(|seed| self.spec.scope.contains(seed, url))
            && self.filter.allows(url)
    }
}

/// Origins whose robots.txt is remembered.
const ROBOTS_CACHE: usize = 1_024;
/// Crawl plans remembered.
const PLAN_CACHE: usize = 64;

impl Crawls {
    /// Shared crawl state with this politeness.
    pub fn new(config: &politeness::Config) -> Crawls {
        Crawls {
            gate: HostGate::new(config),
            shared_gate: None,
            robots: Mutex::new(LruCache::new(
                NonZeroUsize::new(ROBOTS_CACHE).unwrap_or(NonZeroUsize::MIN),
            )),
            robots_wait: Duration::from_secs(config.robots_wait_secs),
            plans: Mutex::new(LruCache::new(
                NonZeroUsize::new(PLAN_CACHE).unwrap_or(NonZeroUsize::MIN),
            )),
        }
    }

    /// Shares politeness through Redis with every process using the same namespace (the
    /// distributed mode): concurrency and minimum delay per host then hold across workers.
    pub fn with_shared_gate(mut self, gate: SharedGate) -> Crawls {
        self.shared_gate = Some(gate);
        self
    }

    /// Keeps a new crawl's plan, so its pages need not read it from the store.
    pub(crate) fn remember(&self, plan: Arc<Plan>) {
        if let Ok(mut plans) = self.plans.lock() {
            plans.put(plan.id.clone(), plan);
        }
    }

    /// The in-process politeness gate.
    pub fn gate(&self) -> &HostGate {
        &self.gate
    }

    /// The plan of a crawl, from memory or the store.
    pub async fn plan(
        &self,
        store: &store::Store,
        crawl_id: &str,
    ) -> Result<Option<Arc<Plan>>, store::Error> {
        if let Ok(mut plans) = self.plans.lock()
            && let Some(plan) = plans.get(crawl_id)
        {
            return Ok(Some(plan.clone()));
        }
        let Some(record) = store.crawl(crawl_id).await? else {
            return Ok(None);
        };
        let seeds = record
            .spec
            .seeds
            .iter()
            .filter_map(|seed| Url::parse(seed).ok())
            .collect();
        let tenant = Tenant::new(&record.tenant).map_err(|detail| store::Error::Corrupt {
            what: "crawl tenant",
            detail,
        })?;
        let plan = Plan::new(crawl_id, tenant, record.spec, seeds).map_err(|detail| {
            store::Error::Corrupt {
                what: "crawl spec",
                detail,
            }
        })?;
        let plan = Arc::new(plan);
        if let Ok(mut plans) = self.plans.lock() {
            plans.put(crawl_id.to_owned(), plan.clone());
        }
        Ok(Some(plan))
    }

    /// robots.txt of `url`'s origin: remembered for its max age (an unreachable one until the
    /// next retry: `unreachable_retry`, 1 s doubling to 60 s), else fetched through the guarded client (a failure
    /// is interpreted per RFC 9309 by `Robots::from_fetch`).
    pub async fn robots(&self, client: &trawl_workers::web::Client, url: &Url) -> Arc<Robots> {
        self.robots_until(client, url).await.0
    }

    /// [`Crawls::robots`] and until when the answer holds.
    async fn robots_until(
        &self,
        client: &trawl_workers::web::Client,
        url: &Url,
    ) -> (Arc<Robots>, Instant) {
        let origin = url.origin().ascii_serialization();
        let slot = match self.robots.lock() {
            Ok(mut cache) => cache
                .get_or_insert(origin, || Arc::new(tokio::sync::Mutex::new(None)))
                .clone(),
            // A poisoned cache: fetch without remembering.
            Err(_) => Arc::new(tokio::sync::Mutex::new(None)),
        };
        let mut entry = slot.lock().await;
        if let Some(known) = entry.as_ref()
            && Instant::now() < known.valid_until
        {
            return (known.robots.clone(), known.valid_until);
        }
        // The client's body limit, not `FETCH_MAX_BYTES`: a larger file is still read (its
        // first 500 KiB are parsed) rather than taken for unreachable.
        let fetched = client.get(&robots_url(url), None).await;
        let robots = Arc::new(Robots::from_fetch(&fetched));
        let before = entry.as_ref().map_or(0, |known| known.failures);
        let valid_until = Instant::now() + robots.max_age(before);
        let failures = match robots.access() {
            Access::Unreachable => before + 1,
            Access::Parsed | Access::Unavailable => 0,
        };
        *entry = Some(RobotsEntry {
            robots: robots.clone(),
            valid_until,
            failures,
        });
        (robots, valid_until)
    }

    /// Decides whether a crawl page may be fetched now by its host's robots.txt, which is read
    /// again here (it may have changed, or could not be fetched when the link was found).
    /// While robots.txt cannot be fetched, waits and asks again, up to
    /// `politeness.robots_wait_secs`. Returns the Crawl-delay to keep, or the page's error:
    /// `robots_disallowed` or `robots_unreachable`.
    pub async fn admit(
        &self,
        client: &trawl_workers::web::Client,
        url: &Url,
    ) -> Result<Option<Duration>, JobError> {
        let deadline = Instant::now() + self.robots_wait;
        loop {
            let (robots, valid_until) = self.robots_until(client, url).await;
            match Verdict::of(&robots, url) {
                Verdict::Unreachable => {
                    let now = Instant::now();
                    if now >= deadline {
                        let mut error = JobError::new(
                            ErrorCode::RobotsUnreachable,
                            format!(
                                "robots.txt of {} could not be fetched for {} s \
                                 (politeness.robots_wait_secs); the page was not fetched",
                                url.origin().ascii_serialization(),
                                self.robots_wait.as_secs()
                            ),
                        );
                        error.evidence = Some(robots_url(url).to_string());
                        return Err(error);
                    }
                    tracing::debug!(
                        origin = %url.origin().ascii_serialization(),
                        "robots.txt unreachable; waiting to ask again"
                    );
                    tokio::time::sleep(valid_until.min(deadline).saturating_duration_since(now))
                        .await;
                }
                Verdict::Disallowed => {
                    let mut error = JobError::new(
                        ErrorCode::RobotsDisallowed,
                        "robots.txt disallows this page",
                    );
                    error.evidence = Some(robots_url(url).to_string());
                    return Err(error);
                }
                Verdict::Allowed(crawl_delay) => return Ok(crawl_delay),
            }
        }
    }

    /// Waits for the politeness gate of `url`'s host, keeping at least `crawl_delay` (robots.txt
    /// Crawl-delay, when the crawl obeys it) between starts. Hold the turn while fetching.
    pub async fn wait_turn(&self, url: &Url, crawl_delay: Option<Duration>) -> Turn {
        let host = host_key(url);
        match &self.shared_gate {
            Some(shared) => match shared
                .acquire(&host, self.gate.delay_for(crawl_delay))
                .await
            {
                Ok(turn) => turn,
                Err(error) => {
                    // Redis unreachable: fall back to this process's gate rather than stall.
                    tracing::warn!(error = %error, "shared politeness unavailable; using this process's");
                    Turn::Local(self.gate.acquire_with_delay(&host, crawl_delay).await)
                }
            },
            None => Turn::Local(self.gate.acquire_with_delay(&host, crawl_delay).await),
        }
    }
}

/// A host's turn: hold it while fetching; dropping it frees the host's slot.
#[derive(Debug)]
pub enum Turn {
    /// From this process's gate.
    Local(politeness::Permit),
    /// From the gate shared through Redis.
    Shared(SharedTurn),
}

/// Per-host politeness shared through Redis by every process of a namespace: at most
/// `max_concurrent_per_host` requests in flight to one host and `min_delay_ms` (or the
/// robots.txt Crawl-delay) between two starts, across all workers. Slots are leases (2 min)
/// so a worker that dies cannot hold a host for ever. Times come from the Redis server's
/// clock, so workers' clocks need not agree. Waiting is by polling, not first come first
/// served across workers.
#[derive(Clone)]
pub struct SharedGate {
    connection: redis::aio::ConnectionManager,
    prefix: String,
    max_concurrent: usize,
}

impl std::fmt::Debug for SharedGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedGate")
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

/// A slot of the shared gate, released when dropped.
#[derive(Debug)]
pub struct SharedTurn {
    gate: SharedGate,
    key: String,
    token: String,
}

impl Drop for SharedTurn {
    fn drop(&mut self) {
        let mut connection = self.gate.connection.clone();
        let key = std::mem::take(&mut self.key);
        let token = std::mem::take(&mut self.token);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _: Result<i64, _> = redis::cmd("ZREM")
                    .arg(&key)
                    .arg(&token)
                    .query_async(&mut connection)
                    .await;
            });
        }
    }
}

/// How long a slot is held at most (a fetch takes 30 s at most by default).
const SHARED_LEASE_MS: u64 = 120_000;

/// Takes a slot when the host has one free and its delay has passed; else answers how many
/// milliseconds to wait. KEYS: in-flight set, next-start key. ARGV: token, max concurrent,
/// delay ms, lease ms.
const TAKE_TURN: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then
  return 25
end
local next = tonumber(redis.call('GET', KEYS[2]) or '0')
if now < next then
  return next - now
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[4]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[4]))
redis.call('SET', KEYS[2], now + tonumber(ARGV[3]), 'PX', tonumber(ARGV[3]) + 1000)
return 0
";

impl SharedGate {
    /// Connects to the Redis at `url`; keys go under `{namespace}:polite:`.
    pub async fn connect(
        url: &str,
        namespace: &str,
        config: &politeness::Config,
    ) -> Result<SharedGate, redis::RedisError> {
        let connection = redis::Client::open(url)?.get_connection_manager().await?;
        Ok(SharedGate {
            connection,
            prefix: format!("{namespace}:polite"),
            max_concurrent: config.max_concurrent_per_host,
        })
    }

    /// Waits for a slot of `host` at least `delay` after the previous start on any worker.
    pub async fn acquire(
        &self,
        host: &str,
        delay: std::time::Duration,
    ) -> Result<Turn, redis::RedisError> {
        let key = format!("{}:{host}:inflight", self.prefix);
        let next = format!("{}:{host}:next", self.prefix);
        let token = ulid::Ulid::generate().to_string();
        let script = redis::Script::new(TAKE_TURN);
        let mut connection = self.connection.clone();
        loop {
            let wait: i64 = script
                .key(&key)
                .key(&next)
                .arg(&token)
                .arg(self.max_concurrent)
                .arg(delay.as_millis() as u64)
                .arg(SHARED_LEASE_MS)
                .invoke_async(&mut connection)
                .await?;
            if wait <= 0 {
                return Ok(Turn::Shared(SharedTurn {
                    gate: self.clone(),
                    key,
                    token,
                }));
            }
            tokio::time::sleep(std::time::Duration::from_millis(wait.clamp(5, 1_000) as u64)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seen_keys_remember_what_they_are_told_and_nothing_else() {
        let mut seen = SeenKeys::default();
        seen.remember(["http://a.test/1", "http://a.test/2"]);
        assert!(seen.contains("http://a.test/1") && seen.contains("http://a.test/2"));
        assert!(!seen.contains("http://a.test/3"));
        for n in 0..SEEN_CACHE {
            seen.digests.insert(n as u128);
        }
        seen.remember(["http://a.test/3"]);
        assert_eq!(seen.digests.len(), 1, "a full cache starts again");
        assert!(seen.contains("http://a.test/3") && !seen.contains("http://a.test/1"));
    }
}
