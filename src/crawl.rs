//! Crawls: seeds → fetch jobs of the crawl; each fetched page's links → follow-up fetch jobs
//! when they are new to the crawl, in scope, pass the globs and robots.txt, are within
//! `max_depth` and the page budget (`max_pages`). Counters record what happened to every
//! URL (a page's end is counted by the store in the transaction that ends it); the crawl
//! completes when none of its jobs is queued or running (the pools look every 250 ms).
//!
//! The frontier is durable: follow-ups are jobs in the queue, and every URL the crawl has seen
//! is in the store (`crawl_urls`), so a crawl survives a restart of its workers. A page's new
//! URLs and the jobs of those to fetch are recorded in one transaction, then queued, before
//! the page's job ends, so a crawl never looks finished while one of its pages still has
//! links to queue. A follow-up's job id comes from the crawl and the URL: a page delivered
//! again (its worker died before queueing) pushes its still-queued follow-ups again, and the
//! queue holds each job once. Each process remembers the URLs the store has confirmed seen
//! (`SeenKeys`), so links found on every page are not written again.
//!
//! Politeness: fetches of crawl pages wait for a per-host gate (concurrent requests and
//! minimum delay between starts, raised by robots.txt Crawl-delay). Embedded, the gate is
//! this process's, shared by all its crawls; with Redis (distributed mode) it is shared by
//! every worker of the namespace ([`SharedGate`]).
//!
//! Not here: parsing robots.txt and sitemaps, scope and glob rules (`trawl_workers::crawl`),
//! fetching and storing pages (`runner`).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lru::LruCache;
use trawl_workers::crawl::politeness::{self, HostGate, host_key};
use trawl_workers::crawl::robots::Access;
use trawl_workers::crawl::sitemap::{SitemapLimits, parse_sitemap, sitemap_candidates};
use trawl_workers::crawl::{Robots, UrlFilter, crawl_key, robots_url};
use trawl_workers::job::{CrawlSpec, ErrorCode, FetchJob, Job, JobError};
use url::Url;

use crate::queue::{CrawlRef, Envelope, Queue};
use crate::runner::Context;
use crate::store::{self, CrawlCounters, NewJob};

/// Why a crawl could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The spec or a seed is not acceptable (a 4xx for the API).
    #[error("{0}")]
    Invalid(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// The queue failed.
    #[error(transparent)]
    Queue(#[from] crate::queue::Error),
}

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
enum Verdict {
    /// It may be fetched, keeping this Crawl-delay.
    Allowed(Option<Duration>),
    /// robots.txt disallows it.
    Disallowed,
    /// robots.txt could not be fetched: nothing may be fetched yet.
    Unreachable,
}

impl Verdict {
    fn of(robots: &Robots, url: &Url) -> Verdict {
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
    /// What was asked.
    pub spec: CrawlSpec,
    seeds: Vec<Url>,
    filter: UrlFilter,
    /// URL keys this process knows the store has recorded as seen.
    seen: Mutex<SeenKeys>,
}

/// URL keys of one crawl known to be in the store's seen-set (`crawl_urls`), so links found
/// again and again (a site's navigation is on every page) are not written to the store each
/// time. Only keys the store has confirmed are remembered: a key found here is seen in the
/// store, so leaving it out of the write changes no answer (it would not be new). Keys are
/// kept as 128-bit digests (16 bytes each; a collision, which would skip one URL, is
/// vanishingly unlikely), at most [`SEEN_CACHE`] of them: when full, the cache starts again.
#[derive(Debug, Default)]
struct SeenKeys {
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

    fn contains(&self, key: &str) -> bool {
        self.digests.contains(&SeenKeys::digest(key))
    }

    fn remember<'k>(&mut self, keys: impl IntoIterator<Item = &'k str>) {
        for key in keys {
            if self.digests.len() >= SEEN_CACHE {
                self.digests.clear();
            }
            self.digests.insert(SeenKeys::digest(key));
        }
    }
}

impl Plan {
    fn new(id: &str, spec: CrawlSpec, seeds: Vec<Url>) -> Result<Plan, String> {
        let filter =
            UrlFilter::new(&spec.include, &spec.exclude).map_err(|error| error.to_string())?;
        Ok(Plan {
            id: id.to_owned(),
            spec,
            seeds,
            filter,
            seen: Mutex::new(SeenKeys::default()),
        })
    }

    fn in_scope(&self, url: &Url) -> bool {
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
/// Seeds and sitemap pages recorded and queued per transaction.
const SEED_PART: usize = 5_000;
/// Sitemap files fetched per crawl at most (indexes included).
const MAX_SITEMAPS: usize = 50;
/// Largest sitemap file fetched (before decompression; the parser caps what it inflates).
const SITEMAP_MAX_BYTES: u64 = 10 << 20;

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
        let plan =
            Plan::new(crawl_id, record.spec, seeds).map_err(|detail| store::Error::Corrupt {
                what: "crawl spec",
                detail,
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

/// The check a crawl page's fetch makes before following a redirect: a target the crawl
/// already has (other than the page's own URL, `own_key`) is refused as `duplicate_content`
/// (it is fetched, or will be, by its own job); when the crawl obeys robots.txt, the target's
/// robots.txt must allow it. It does not wait for a robots.txt that cannot be fetched (the
/// fetch's own time limit runs): the target is refused as `robots_unreachable`. A store
/// failure lets the redirect through (the page's dedupe after the fetch still holds).
pub fn redirect_guard(
    context: &Context,
    plan: &Plan,
    own_key: String,
) -> trawl_workers::web::client::RedirectGuard {
    let crawls = context.crawls.clone();
    let client = context.fetch.client.clone();
    let store = context.store.clone();
    let crawl_id = plan.id.clone();
    let robots = plan.spec.robots;
    Arc::new(move |target: Url| {
        let crawls = crawls.clone();
        let client = client.clone();
        let store = store.clone();
        let crawl_id = crawl_id.clone();
        let own_key = own_key.clone();
        Box::pin(async move {
            let key = crawl_key(&target);
            if key != own_key && store.crawl_url_seen(&crawl_id, &key).await.unwrap_or(false) {
                return Err((
                    ErrorCode::DuplicateContent,
                    "the redirect's target is a page this crawl already has".to_owned(),
                ));
            }
            if !robots {
                return Ok(());
            }
            let target_robots = crawls.robots(&client, &target).await;
            match Verdict::of(&target_robots, &target) {
                Verdict::Unreachable => Err((
                    ErrorCode::RobotsUnreachable,
                    format!(
                        "robots.txt of {} could not be fetched",
                        target.origin().ascii_serialization()
                    ),
                )),
                Verdict::Disallowed => Err((
                    ErrorCode::RobotsDisallowed,
                    "robots.txt disallows the target".to_owned(),
                )),
                Verdict::Allowed(_) => Ok(()),
            }
        })
    })
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

/// Starts a crawl: records it, reads sitemaps when asked, and queues its first pages.
/// Returns the crawl id once its first pages are queued.
pub async fn start(
    context: &Context,
    queue: &Queue,
    spec: CrawlSpec,
) -> Result<String, StartError> {
    let plan = create(context, spec).await?;
    seed(context, queue, &plan).await?;
    Ok(plan.id.clone())
}

/// Checks a crawl and records it as running, without queueing anything yet (see [`seed`]).
/// The API answers after this and seeds in the background: reading robots.txt and sitemaps
/// of remote sites may take a while.
pub async fn create(context: &Context, spec: CrawlSpec) -> Result<Arc<Plan>, StartError> {
    spec.validate().map_err(StartError::Invalid)?;
    let mut seeds = Vec::with_capacity(spec.seeds.len());
    for seed in &spec.seeds {
        let url = trawl_workers::fetch::check_url(&context.fetch.client, seed)
            .map_err(|error| StartError::Invalid(format!("seed {seed:?}: {}", error.message)))?;
        seeds.push(url);
    }
    let id = ulid::Ulid::generate().to_string();
    let spec_json = serde_json::to_value(&spec).expect("crawl specs serialise");
    let plan = Arc::new(Plan::new(&id, spec, seeds).map_err(StartError::Invalid)?);
    context.store.create_crawl(&id, &spec_json).await?;
    if let Ok(mut plans) = context.crawls.plans.lock() {
        plans.put(id.clone(), plan.clone());
    }
    Ok(plan)
}

/// Queues a created crawl's first pages: its seeds and, when asked, its sitemaps' pages. A
/// crawl with nothing to queue (all disallowed, say) completes here.
pub async fn seed(context: &Context, queue: &Queue, plan: &Plan) -> Result<(), StartError> {
    let mut first: Vec<(Url, u32)> = plan.seeds.iter().map(|seed| (seed.clone(), 0)).collect();
    if plan.spec.sitemap {
        first.extend(
            sitemap_urls(context, plan)
                .await
                .into_iter()
                .map(|url| (url, 0)),
        );
    }
    // In parts, so a sitemap of 100,000 pages is not held as 100,000 jobs at once.
    let followed = async {
        for part in first.chunks(SEED_PART) {
            follow(context, queue, plan, part.to_vec()).await?;
        }
        Ok(())
    }
    .await;
    // Whatever happened, a crawl with no job left is complete (so a failed seeding does not
    // leave it running for ever).
    context.store.complete_crawl_if_done(&plan.id).await?;
    followed
}

/// The page URLs of the sitemaps of the seeds' sites (robots.txt Sitemap lines, then
/// /sitemap.xml and /sitemap_index.xml), following sitemap indexes, at most
/// [`MAX_SITEMAPS`] files. Unreadable sitemaps are skipped (logged).
async fn sitemap_urls(context: &Context, plan: &Plan) -> Vec<Url> {
    let client = &context.fetch.client;
    let mut pending: Vec<Url> = Vec::new();
    for seed in &plan.seeds {
        let robots = context.crawls.robots(client, seed).await;
        pending.extend(sitemap_candidates(seed, Some(&robots)));
    }
    let mut seen = std::collections::HashSet::new();
    let mut urls = Vec::new();
    let limits = SitemapLimits::default();
    let mut fetched = 0;
    while let Some(sitemap) = pending.pop() {
        if fetched >= MAX_SITEMAPS || !seen.insert(crawl_key(&sitemap)) {
            continue;
        }
        fetched += 1;
        let body = match client.get(&sitemap, Some(SITEMAP_MAX_BYTES)).await {
            Ok(response) if (200..300).contains(&response.status) => response.body,
            Ok(response) => {
                tracing::debug!(status = response.status, "sitemap not there");
                continue;
            }
            Err(error) => {
                tracing::debug!(error = %error, "sitemap not fetched");
                continue;
            }
        };
        match parse_sitemap(&body, &limits) {
            Ok(parsed) => {
                urls.extend(parsed.urls.into_iter().map(|entry| entry.loc));
                // Nested sitemaps go first, in the order listed.
                pending.extend(parsed.sitemaps.into_iter().rev());
            }
            Err(error) => tracing::warn!(error = %error, "sitemap not readable"),
        }
    }
    urls
}

/// Queues the URLs a crawl found (with their depth) that are new to it, in scope, allowed by
/// robots.txt and within its budget, and counts what happened to each.
pub async fn follow(
    context: &Context,
    queue: &Queue,
    plan: &Plan,
    found: Vec<(Url, u32)>,
) -> Result<CrawlCounters, StartError> {
    follow_from(context, queue, plan, &[], found, false)
        .await
        .map(|(counters, _)| counters)
}

/// [`follow`] for the links of a fetched page, recording the page's own keys (`page_keys`: its
/// final URL, its canonical URL) as seen in the same write; they are never queued from its
/// links. Returns the counters and which page keys were new to the crawl.
pub async fn follow_from(
    context: &Context,
    queue: &Queue,
    plan: &Plan,
    page_keys: &[String],
    found: Vec<(Url, u32)>,
    again: bool,
) -> Result<(CrawlCounters, std::collections::HashSet<String>), StartError> {
    let mut counted = CrawlCounters::default();
    let mut candidates: Vec<(String, Url, u32)> = Vec::with_capacity(found.len());
    let mut distinct: std::collections::HashSet<String> = page_keys.iter().cloned().collect();
    for (url, depth) in found {
        if depth > plan.spec.max_depth {
            counted.skipped_depth += 1;
            continue;
        }
        if !matches!(url.scheme(), "http" | "https") {
            continue;
        }
        let key = crawl_key(&url);
        if distinct.insert(key.clone()) {
            candidates.push((key, url, depth));
        }
    }
    // Keys this process already knows are seen are not new: they are left out of the write.
    // A page delivered again (`again`) keeps its links all the same: its first delivery may
    // have died after their jobs were created and before they were queued.
    let (own, candidates) = {
        let known = plan
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let own: Vec<&String> = page_keys
            .iter()
            .filter(|key| !known.contains(key))
            .collect();
        let candidates: Vec<(String, Url, u32)> = candidates
            .into_iter()
            .filter(|(key, _, _)| again || !known.contains(key))
            .collect();
        (own, candidates)
    };
    // What becomes of each link if it is new: scope and robots.txt first (a host whose
    // robots.txt cannot be fetched now is not decided here: its pages are queued and wait for
    // it when their turn comes, `Crawls::admit`), then a job with an id of its own (the same
    // for the same URL of the same crawl, so the queue holds it once however often it is
    // pushed).
    let mut jobs: Vec<NewJob> = Vec::new();
    let mut envelopes: Vec<Envelope> = Vec::new();
    // Per candidate: skipped (scope, robots), or the index of its job.
    let mut fates: Vec<Result<usize, store::Fate<'static>>> = Vec::with_capacity(candidates.len());
    for (key, url, depth) in &candidates {
        if !plan.in_scope(url) {
            fates.push(Err(store::Fate::Scope));
            continue;
        }
        if plan.spec.robots {
            let robots = context.crawls.robots(&context.fetch.client, url).await;
            if matches!(Verdict::of(&robots, url), Verdict::Disallowed) {
                fates.push(Err(store::Fate::Robots));
                continue;
            }
        }
        let id = follow_up_id(&plan.id, key);
        let job = Job::Fetch(FetchJob {
            extract: plan.spec.extract,
            archive: plan.spec.archive,
            render: plan.spec.render,
            proxy: plan.spec.proxy.clone(),
            ..FetchJob::new(url.to_string())
        });
        jobs.push(NewJob {
            crawl_id: Some(plan.id.clone()),
            ..NewJob::new(&id, &job, context.config.max_attempts)
        });
        envelopes.push(Envelope {
            crawl: Some(CrawlRef {
                id: plan.id.clone(),
                depth: *depth,
            }),
            ..Envelope::new(id, job)
        });
        fates.push(Ok(jobs.len() - 1));
    }
    let found: Vec<store::Found<'_>> = own
        .iter()
        .map(|key| store::Found {
            key: key.as_str(),
            fate: store::Fate::Own,
        })
        .chain(
            candidates
                .iter()
                .zip(&fates)
                .map(|((key, _, _), fate)| store::Found {
                    key: key.as_str(),
                    fate: match fate {
                        Ok(job) => store::Fate::Queue(&jobs[*job]),
                        Err(skipped) => *skipped,
                    },
                }),
        )
        .collect();
    // Most pages of a crawl find no link new to this process: then nothing is written.
    let followed = if found.is_empty() && counted == CrawlCounters::default() {
        store::Followed::default()
    } else {
        context
            .store
            .follow_crawl(&plan.id, plan.spec.max_pages, &found, &counted)
            .await?
    };
    plan.seen
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .remember(found.iter().map(|found| found.key));
    let mut to_queue: std::collections::HashSet<String> =
        followed.created.iter().cloned().collect();
    if again {
        let not_new: Vec<String> = found
            .iter()
            .filter_map(|found| match found.fate {
                store::Fate::Queue(job) if !followed.new.contains(found.key) => {
                    Some(job.id.clone())
                }
                _ => None,
            })
            .collect();
        if !not_new.is_empty() {
            to_queue.extend(context.store.queued_jobs(&not_new).await?);
        }
    }
    if !to_queue.is_empty() {
        envelopes.retain(|envelope| to_queue.contains(&envelope.id));
        queue.push(envelopes).await?;
    }
    let new_page_keys: std::collections::HashSet<String> = page_keys
        .iter()
        .filter(|key| followed.new.contains(*key))
        .cloned()
        .collect();
    Ok((followed.counters, new_page_keys))
}

/// The id of the job that fetches `key` for a crawl: a ULID with the crawl's time and 80
/// bits of a digest of the crawl and the key, so that a page delivered again (its first
/// worker died) queues the same jobs, and the queue, keyed by job id, holds each once.
fn follow_up_id(crawl_id: &str, key: &str) -> String {
    use sha2::Digest as _;
    let time = ulid::Ulid::from_string(crawl_id).map_or(0, |id| id.timestamp_ms());
    let mut hasher = sha2::Sha256::new();
    hasher.update(crawl_id.as_bytes());
    hasher.update([0]);
    hasher.update(key.as_bytes());
    let digest = hasher.finalize();
    let mut random = [0_u8; 16];
    random[6..].copy_from_slice(&digest[..10]);
    ulid::Ulid::from_parts(time, u128::from_be_bytes(random)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follow_up_ids_are_the_same_for_the_same_url_of_the_same_crawl() {
        let crawl = ulid::Ulid::generate();
        let id = follow_up_id(&crawl.to_string(), "http://a.test/p/1");
        assert_eq!(id, follow_up_id(&crawl.to_string(), "http://a.test/p/1"));
        assert_ne!(id, follow_up_id(&crawl.to_string(), "http://a.test/p/2"));
        let other = ulid::Ulid::generate().to_string();
        assert_ne!(id, follow_up_id(&other, "http://a.test/p/1"));
        let parsed = ulid::Ulid::from_string(&id).expect("a ULID");
        assert_eq!(parsed.timestamp_ms(), crawl.timestamp_ms());
    }

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
