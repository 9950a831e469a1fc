//! The parts every job, crawl and API call shares, assembled once by [`crate::app::App`]:
//! the store, the queue, the guarded HTTP client, the page cache, metrics, the crawls'
//! shared policy, webhooks, the browser pool, web search and the runner's settings. [`Deps`] is immutable
//! once built: nothing is filled in later, so what a test builds is what a command runs.
//!
//! Not here: opening these parts from the configuration and closing them (`app`), nor what
//! is done with them (`runner`, `crawl`, `api`).

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use trawl_workers::fetch;

use crate::cache::PageCache;
use crate::crawl_policy::Crawls;
use crate::metrics::Metrics;
use crate::queue::Queue;
use crate::store::Store;
use crate::webhooks::Webhooks;

/// What the pools and the API share.
#[derive(Debug, Clone)]
pub struct Deps {
    /// Where results go.
    pub store: Store,
    /// Where jobs wait, follow-up jobs of crawls included.
    pub queue: Queue,
    /// The fetch pool's dependencies (the guarded client and the fetch options' bounds).
    pub fetch: fetch::Deps,
    /// Retry and pool settings.
    pub config: RunnerConfig,
    /// Fresh pages, in memory and in the store.
    pub cache: PageCache,
    /// Counters and histograms.
    pub metrics: Metrics,
    /// The id of every job that ends in this process (the API waits on these).
    pub ended: broadcast::Sender<String>,
    /// The id of every crawl this process completes (`crawl::announce_completed`): what a
    /// command following a crawl waits on, besides its pause between reads.
    pub completed_crawls: broadcast::Sender<String>,
    /// Where job and batch events are POSTed, when configured.
    pub webhooks: Option<Webhooks>,
    /// What the crawls of this process share: politeness gate, robots.txt, plans.
    pub crawls: Arc<Crawls>,
    /// The browser pool (render and browse jobs); without it such jobs fail with
    /// `browser_failed`.
    pub browser: Option<trawl_workers::browse::Pool>,
    /// Web search: providers, their paces and the answers' cache (`[search]`; the defaults
    /// until [`Deps::with_search`]).
    pub search: crate::search_providers::Searcher,
}

/// The parts [`Deps::new`] takes; the page cache, metrics and the ended-job and
/// completed-crawl channels are made fresh from them.
#[derive(Debug)]
pub struct Parts {
    /// The store.
    pub store: Store,
    /// The queue.
    pub queue: Queue,
    /// The fetch pool's dependencies.
    pub fetch: fetch::Deps,
    /// Retry and pool settings.
    pub config: RunnerConfig,
    /// Webhooks, when configured.
    pub webhooks: Option<Webhooks>,
    /// The crawls' shared policy.
    pub crawls: Crawls,
    /// The browser pool, when this process runs browser work.
    pub browser: Option<trawl_workers::browse::Pool>,
}

impl Deps {
    /// The shared parts, with a fresh page cache, metrics and ended-job and completed-crawl
    /// channels.
    pub fn new(parts: Parts) -> Deps {
        let (ended, _) = broadcast::channel(1_024);
        let (completed_crawls, _) = broadcast::channel(64);
        let metrics = Metrics::new();
        let search = crate::search_providers::Searcher::new(
            &crate::search_providers::Config::default(),
            &parts.fetch.client,
            &metrics,
        )
        .expect("the default search configuration is valid");
        Deps {
            search,
            cache: PageCache::new(parts.store.clone()),
            store: parts.store,
            queue: parts.queue,
            fetch: parts.fetch,
            config: parts.config,
            metrics,
            ended,
            completed_crawls,
            webhooks: parts.webhooks,
            crawls: Arc::new(parts.crawls),
            browser: parts.browser,
        }
    }
}

impl Deps {
    /// The same parts with web search configured by `config` (`[search]`), before the parts
    /// are shared.
    pub fn with_search(mut self, config: &crate::search_providers::Config) -> Result<Deps, String> {
        self.search = self.search.reconfigured(config, &self.fetch.client)?;
        Ok(self)
    }
}

/// How the pools run. Every field is a `trawl.toml` key under `[runner]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RunnerConfig {
    /// Fetch jobs run at once in this process.
    pub concurrency: usize,
    /// Attempts per job before it is `dead` (transient errors and lost workers count).
    pub max_attempts: u32,
    /// First retry delay in milliseconds; doubles per attempt.
    pub retry_base_ms: u64,
    /// Longest retry delay in milliseconds (also caps a server's Retry-After).
    pub retry_max_ms: u64,
    /// How often an idle pool looks for new jobs, in milliseconds.
    pub poll_interval_ms: u64,
    /// Seconds between worker heartbeats.
    pub heartbeat_secs: u64,
    /// Missed heartbeats before a silent worker's jobs are handed to another.
    pub missed_heartbeats: usize,
    /// Longest one attempt's work may take (fetching, rendering, extracting, a browse job's
    /// script), in seconds; beyond, the attempt fails with `timeout` (retried). A crawl's
    /// wait for its host's turn does not count.
    pub job_timeout_secs: u64,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        RunnerConfig {
            concurrency: 32,
            max_attempts: 3,
            retry_base_ms: 500,
            retry_max_ms: 30_000,
            poll_interval_ms: 100,
            heartbeat_secs: 5,
            missed_heartbeats: 3,
            job_timeout_secs: 600,
        }
    }
}

/// A `[runner]` setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RunnerConfigError {
    /// `concurrency` is out of its bounds.
    #[error("runner.concurrency = {0} is outside 1..=4096")]
    Concurrency(usize),
    /// `max_attempts` is out of its bounds.
    #[error("runner.max_attempts = {0} is outside 1..=100")]
    MaxAttempts(u32),
    /// `job_timeout_secs` is out of its bounds.
    #[error("runner.job_timeout_secs = {0} is outside 1..=86400")]
    JobTimeout(u64),
    /// A poll or heartbeat setting is zero.
    #[error("runner.poll_interval_ms, heartbeat_secs and missed_heartbeats must be at least 1")]
    Intervals,
}

impl RunnerConfig {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), RunnerConfigError> {
        if self.concurrency == 0 || self.concurrency > 4_096 {
            return Err(RunnerConfigError::Concurrency(self.concurrency));
        }
        if self.max_attempts == 0 || self.max_attempts > 100 {
            return Err(RunnerConfigError::MaxAttempts(self.max_attempts));
        }
        if self.job_timeout_secs == 0 || self.job_timeout_secs > 86_400 {
            return Err(RunnerConfigError::JobTimeout(self.job_timeout_secs));
        }
        if self.poll_interval_ms == 0 || self.heartbeat_secs == 0 || self.missed_heartbeats == 0 {
            return Err(RunnerConfigError::Intervals);
        }
        Ok(())
    }

    /// The queue settings that go with these pool settings.
    pub fn queue_settings(&self) -> crate::queue::Settings {
        crate::queue::Settings {
            // An apalis worker buffers the tasks it fetched and cannot start yet, and sends
            // no heartbeat for them meanwhile: keep the batch within the concurrency, so no
            // fetched task waits long enough to look orphaned.
            batch_size: self.concurrency.min(16),
            heartbeat: Duration::from_secs(self.heartbeat_secs),
            missed_heartbeats: self.missed_heartbeats,
        }
    }

    pub(crate) fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let max = Duration::from_millis(self.retry_max_ms);
        if let Some(retry_after) = retry_after {
            return retry_after.min(max);
        }
        let delay =
            trawl_workers::backoff::Backoff::new(Duration::from_millis(self.retry_base_ms), max)
                .before_retry(attempt);
        // Up to 25 % jitter, so retries of one failing host spread out.
        let jitter =
            delay.mul_f64(0.25 * (ulid::Ulid::generate().random() % 1_000) as f64 / 1_000.0);
        (delay + jitter).min(max)
    }
}
