//! The runner feeds the pools: dequeue → run → persist the result keyed by job id → ack.
//! It alone decides what to do with an error: transient ones are retried with exponential
//! backoff (or the server's Retry-After) up to `max_attempts`, then the job is `dead`;
//! permanent ones fail at once. A job whose worker died on every attempt ends `dead` too
//! (`worker_lost`), so a poison job cannot loop forever.
//!
//! Not here: the work itself (`trawl_workers::fetch`), nor storage details (`store`).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apalis::prelude::*;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::sync::broadcast;
use tracing::Instrument as _;
use trawl_workers::fetch;
use trawl_workers::job::{ErrorCode, FetchJob, FetchResult, Job, JobError};
use trawl_workers::web::normalize::normalize_url;

use crate::cache::{CachedPage, PageCache};
use crate::metrics::Metrics;
use crate::queue::{Envelope, Lane, Queue, Storage};
use crate::store::{self, Attempt, NewPage, Outcome, PageRecord, Status, Store};
use crate::webhooks::{Event, EventType, Webhooks};

/// How the pools run. Every field is a `trawl.toml` key under `[runner]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
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

impl Default for Config {
    fn default() -> Self {
        Config {
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
pub enum ConfigError {
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

impl Config {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.concurrency == 0 || self.concurrency > 4_096 {
            return Err(ConfigError::Concurrency(self.concurrency));
        }
        if self.max_attempts == 0 || self.max_attempts > 100 {
            return Err(ConfigError::MaxAttempts(self.max_attempts));
        }
        if self.job_timeout_secs == 0 || self.job_timeout_secs > 86_400 {
            return Err(ConfigError::JobTimeout(self.job_timeout_secs));
        }
        if self.poll_interval_ms == 0 || self.heartbeat_secs == 0 || self.missed_heartbeats == 0 {
            return Err(ConfigError::Intervals);
        }
        Ok(())
    }

    /// The queue settings that go with these pool settings.
    pub fn queue_settings(&self) -> crate::queue::Settings {
        crate::queue::Settings {
            // A worker buffers what it fetched and cannot start yet, and sends no heartbeat
            // meanwhile (stack notes, pitfall 10): keep the batch within the concurrency.
            batch_size: self.concurrency.min(16),
            heartbeat: Duration::from_secs(self.heartbeat_secs),
            missed_heartbeats: self.missed_heartbeats,
        }
    }

    fn backoff(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let max = Duration::from_millis(self.retry_max_ms);
        if let Some(retry_after) = retry_after {
            return retry_after.min(max);
        }
        let exponent = attempt.saturating_sub(1).min(20);
        let delay = Duration::from_millis(self.retry_base_ms.saturating_mul(1 << exponent));
        // Up to 25 % jitter, so retries of one failing host spread out.
        let jitter =
            delay.mul_f64(0.25 * (ulid::Ulid::generate().random() % 1_000) as f64 / 1_000.0);
        (delay + jitter).min(max)
    }
}

/// What the pools need, shared by every job.
#[derive(Debug, Clone)]
pub struct Context {
    /// Where results go.
    pub store: Store,
    /// The fetch pool's dependencies.
    pub fetch: fetch::Deps,
    /// Retry and pool settings.
    pub config: Config,
    /// Fresh pages, in memory and in the store.
    pub cache: PageCache,
    /// Counters and histograms.
    pub metrics: Metrics,
    /// The id of every job that ends in this process (the API waits on these).
    pub ended: broadcast::Sender<String>,
    /// Where job and batch events are POSTed, when configured.
    pub webhooks: Option<Webhooks>,
    /// Where follow-up jobs go (crawls); without it, crawl pages queue no links.
    pub queue: Option<Queue>,
    /// What the crawls of this process share: politeness gate, robots.txt, plans.
    pub crawls: Arc<crate::crawl::Crawls>,
    /// The browser pool (render and browse jobs); without it such jobs fail with
    /// `browser_failed`.
    pub browser: Option<trawl_workers::browse::Pool>,
}

impl Context {
    /// A context with a fresh page cache and metrics, no webhooks, no queue for follow-ups and
    /// the default politeness.
    pub fn new(store: Store, fetch: fetch::Deps, config: Config) -> Context {
        let (ended, _) = broadcast::channel(1_024);
        Context {
            cache: PageCache::new(store.clone()),
            store,
            fetch,
            config,
            metrics: Metrics::new(),
            ended,
            webhooks: None,
            queue: None,
            crawls: Arc::new(crate::crawl::Crawls::new(
                &trawl_workers::crawl::politeness::Config::default(),
            )),
            browser: None,
        }
    }
}

/// Runs the fetch pool on `queue` (either engine) until `shutdown` completes, and, when the
/// context has a browser, the browse pool on the queue's browse lane beside it (as many jobs at
/// once as the browser has contexts). Jobs not yet started stay in the queue; a job interrupted
/// mid-way is delivered again later (at least once) and its writes are idempotent. A worker
/// that stops on a backend error (Redis restarted or unreachable, a database error) is started
/// again under a new name after a pause, so a pool outlives outages; its unacknowledged jobs
/// are recovered by the queue.
pub async fn run_pool(
    context: Arc<Context>,
    queue: &Queue,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let signal = tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let stopped = |stop: &tokio::sync::watch::Receiver<bool>| {
        let mut stop = stop.clone();
        async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
        }
    };
    let fetch = run_lane(
        context.clone(),
        queue,
        Lane::Fetch,
        context.config.concurrency,
        stopped(&stop_rx),
    );
    let outcome = match context
        .browser
        .as_ref()
        .map(|browser| browser.config().max_contexts)
    {
        Some(contexts) => {
            let browse = run_lane(
                context.clone(),
                queue,
                Lane::Browse,
                contexts,
                stopped(&stop_rx),
            );
            let (fetch, browse) = tokio::join!(fetch, browse);
            fetch.and(browse)
        }
        None => fetch.await,
    };
    signal.abort();
    outcome
}

/// Runs one lane's workers until `shutdown` completes.
async fn run_lane(
    context: Arc<Context>,
    queue: &Queue,
    lane: Lane,
    concurrency: usize,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let poll = Duration::from_millis(context.config.poll_interval_ms);
    // The same worker on either engine: their storage types differ, hence a macro.
    macro_rules! supervise_on {
        ($storage:expr) => {{
            let storage = $storage;
            supervise(
                context,
                queue,
                lane,
                shutdown,
                move |name, context, stop| {
                    WorkerBuilder::new(name)
                        .backend(storage.clone().poll_with_interval(poll))
                        .concurrency(concurrency)
                        .data(context)
                        .build(handle)
                        .run_until(stop)
                },
            )
            .await
        }};
    }
    match queue.lane_storage(lane) {
        Storage::Sqlite(storage) => supervise_on!(storage),
        Storage::Redis(storage) => supervise_on!(storage),
    }
}

/// The part of `run_pool` common to both engines: a side task that prunes ended tasks and
/// promotes due ones (stack notes, pitfalls 1 and 9), and the worker, started by `start`
/// under a unique name (a name reused within the orphan timeout is refused by both engines)
/// and started again when it stops on an error before `shutdown`. Generic over the starter
/// because apalis' `Worker::run_until` bounds are too long to spell over a backend type.
async fn supervise<Start, Run>(
    context: Arc<Context>,
    queue: &Queue,
    lane: Lane,
    shutdown: impl Future<Output = ()> + Send + 'static,
    start: Start,
) -> Result<(), String>
where
    Start: Fn(String, Arc<Context>, StopSignal) -> Run,
    Run: Future<Output = Result<(), WorkerError>>,
{
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let signal = tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let upkeep_queue = queue.clone();
    let upkeep_store = context.store.clone();
    // One lane keeps the queue tidy for both, and ends the crawls whose pages have all ended
    // (a page's end does not check its crawl: one write fewer per page).
    let upkeep = tokio::spawn(async move {
        if lane != Lane::Fetch {
            return;
        }
        loop {
            if let Err(error) = upkeep_queue.promote_due().await {
                tracing::debug!(error = %error, "promoting due queue tasks failed");
            }
            if let Err(error) = upkeep_queue.prune_finished().await {
                tracing::debug!(error = %error, "pruning ended queue tasks failed");
            }
            for _ in 0..4 {
                if let Err(error) = upkeep_store.complete_idle_crawls().await {
                    tracing::debug!(error = %error, "completing idle crawls failed");
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    });
    // Tasks already due are made fetchable before the first worker fetches.
    if let Err(error) = queue.promote_due().await {
        tracing::warn!(error = %error, "promoting due queue tasks failed");
    }
    let mut pause = Duration::from_millis(250);
    let outcome = loop {
        let name = format!(
            "trawl-{}-{}",
            std::process::id(),
            ulid::Ulid::generate().to_string().to_ascii_lowercase()
        );
        let mut stop = stop_rx.clone();
        let stop_signal: StopSignal = Box::pin(async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
            Ok(())
        });
        let result = start(name.clone(), context.clone(), stop_signal).await;
        if *stop_rx.borrow() {
            break result.map_err(|error| format!("{} pool stopped: {error}", lane.as_str()));
        }
        match result {
            Ok(()) => {
                tracing::warn!(worker = %name, lane = lane.as_str(), "worker stopped; starting another")
            }
            Err(error) => tracing::warn!(
                worker = %name,
                lane = lane.as_str(),
                error = %error,
                "worker stopped on an error; starting another"
            ),
        }
        let mut stop = stop_rx.clone();
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stop.wait_for(|stopped| *stopped) => break Ok(()),
        }
        pause = (pause * 2).min(Duration::from_secs(5));
    };
    upkeep.abort();
    signal.abort();
    outcome
}

/// Completes when the pool is asked to stop.
type StopSignal = std::pin::Pin<Box<dyn Future<Output = Result<(), std::io::Error>> + Send>>;

/// The apalis handler. Each job runs on its own tokio task, so jobs spread over every core
/// (an apalis worker otherwise polls its jobs inside its own future) and a panic ends that
/// task, not the pool. A store failure or a panic is returned, so the queue delivers the job
/// again; every job outcome is recorded by `process` itself.
async fn handle(envelope: Envelope, context: Data<Arc<Context>>) -> Result<(), BoxDynError> {
    let context: Arc<Context> = (*context).clone();
    let id = envelope.id.clone();
    let outcome = tokio::spawn(async move { process(&context, &envelope).await }).await;
    match outcome {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => {
            tracing::error!(job_id = %id, error = %error, "could not record job outcome");
            Err(Box::new(error))
        }
        Err(join_error) => {
            tracing::error!(job_id = %id, error = %join_error, "job panicked");
            Err(format!("job panicked: {join_error}").into())
        }
    }
}

/// Runs one delivered job to its end (or to the next retry) and records the outcome.
pub async fn process(context: &Context, envelope: &Envelope) -> Result<(), store::Error> {
    // Logs carry the URL's origin only: paths and queries may hold tokens.
    let origin = url::Url::parse(envelope.job.url())
        .map(|url| trawl_workers::web::client::origin_of(&url))
        .unwrap_or_else(|_| "invalid-url".to_owned());
    let span = tracing::debug_span!("job", job_id = %envelope.id, kind = envelope.job.kind(), origin = %origin);
    process_in_span(context, envelope).instrument(span).await
}

async fn process_in_span(context: &Context, envelope: &Envelope) -> Result<(), store::Error> {
    let started = Instant::now();
    let attempt = context.store.begin_attempt(&envelope.id).await?;
    if let Attempt::Run { number: 1, .. } = attempt {
        announce_start(context, envelope);
    }
    if let Some(status) = run_attempts(context, envelope, attempt).await? {
        announce_end(context, envelope, status, started).await?;
    }
    Ok(())
}

/// Runs attempts until the job ends or another delivery owns it. Returns the status when this
/// delivery ended the job (so its end is announced once).
async fn run_attempts(
    context: &Context,
    envelope: &Envelope,
    first: Attempt,
) -> Result<Option<Status>, store::Error> {
    let mut attempt = first;
    loop {
        let (number, max) = match attempt {
            Attempt::Run { number, max } => (number, max),
            Attempt::Cancelled => return Ok(Some(Status::Cancelled)),
            Attempt::AlreadyEnded | Attempt::Unknown => return Ok(None),
        };
        if number > max {
            let error = JobError::new(
                ErrorCode::WorkerLost,
                format!("the worker running this job was lost in each of its {max} attempts"),
            );
            return context
                .store
                .finish(&envelope.id, &Outcome::Dead(error))
                .await;
        }
        let error = match &envelope.job {
            Job::Fetch(job) => match run_fetch(context, envelope, number, job).await? {
                Ok(ended) => return Ok(ended),
                Err(error) => error,
            },
            Job::Browse(job) => match run_browse(context, envelope, number, job).await? {
                Ok(ended) => return Ok(ended),
                Err(error) => error,
            },
        };
        if !error.transient {
            tracing::debug!(code = %error.code, "job failed");
            return context
                .store
                .finish_attempt(&envelope.id, number, &Outcome::Failed(error))
                .await;
        }
        if number >= max {
            tracing::warn!(code = %error.code, attempts = number, "job dead after its last attempt");
            return context
                .store
                .finish_attempt(&envelope.id, number, &Outcome::Dead(error))
                .await;
        }
        let retry_after = error.retry_after.map(Duration::from_secs);
        let delay = context.config.backoff(number, retry_after);
        tracing::warn!(code = %error.code, attempt = number, delay_ms = delay.as_millis() as u64, "fetch failed, will retry");
        context.store.record_retry(&envelope.id, &error).await?;
        tokio::time::sleep(delay).await;
        attempt = context.store.begin_attempt(&envelope.id).await?;
    }
}

/// Serves a fetch from the cache or fetches it, stores the page and ends the job (returning
/// the status this call ended it with; `None` also when `attempt` is no longer the job's
/// latest: another worker took the job over). Returns the job error when the fetch failed (the
/// caller decides on retries); `Err` is a store failure.
async fn run_fetch(
    context: &Context,
    envelope: &Envelope,
    attempt: u32,
    job: &FetchJob,
) -> Result<Result<Option<Status>, JobError>, store::Error> {
    let job_id = envelope.id.as_str();
    let (url, options_hash) = match cache_key(&context.fetch.client, job) {
        Ok(key) => key,
        Err(error) => return Ok(Err(error)),
    };
    let max_chars = context.fetch.config.max_chars_for(job);
    let ttl = context.fetch.config.cache_ttl_for(job);
    // A crawl's page follows its links (from the cache too), waits for its host's turn
    // (politeness) when fetched, and its plan says what to follow.
    let crawl = match &envelope.crawl {
        Some(crawl) => context
            .crawls
            .plan(&context.store, &crawl.id)
            .await?
            .map(|plan| (plan, crawl.depth)),
        None => None,
    };
    if let Some(hit) = fresh_page(context, job, &url, &options_hash).await? {
        if let Some((plan, depth)) = &crawl
            && let Some(duplicate) =
                follow_links(context, plan, *depth, &url, &hit.page.info, attempt > 1).await?
        {
            return Ok(Err(duplicate));
        }
        let result = cached_result(job, &hit, max_chars);
        let outcome = Outcome::Succeeded {
            result: serde_json::to_value(&result).expect("results serialise"),
            page_id: Some(hit.page.id.clone()),
        };
        context.metrics.cache_hit();
        if job.archive {
            context.store.request_archive_page(&hit.page.id).await?;
        }
        return Ok(Ok(context
            .store
            .finish_attempt(job_id, attempt, &outcome)
            .await?));
    }
    // A crawl page asks robots.txt again (waiting while it cannot be fetched), then waits
    // for its host's turn.
    let permit = match &crawl {
        Some((plan, _)) => {
            let crawl_delay = if plan.spec.robots {
                match context.crawls.admit(&context.fetch.client, &url).await {
                    Ok(delay) => delay,
                    Err(error) => return Ok(Err(error)),
                }
            } else {
                None
            };
            Some(context.crawls.wait_turn(&url, crawl_delay).await)
        }
        None => None,
    };
    // A crawl page follows only redirects to pages new to the crawl that robots.txt allows.
    let guard = crawl.as_ref().map(|(plan, _)| {
        crate::crawl::redirect_guard(context, plan, trawl_workers::crawl::crawl_key(&url))
    });
    let fetched = within_job_timeout(context, fetch_or_render(context, job, guard.as_ref())).await;
    drop(permit);
    let fetched = match fetched {
        Ok(fetched) => fetched,
        Err(error) => return Ok(Err(error)),
    };
    if let Some((plan, depth)) = &crawl
        && let Some(duplicate) =
            follow_links(context, plan, *depth, &url, &fetched.info, attempt > 1).await?
    {
        return Ok(Err(duplicate));
    }
    let final_url = url::Url::parse(&fetched.info.final_url)
        .map(|final_url| normalize_url(&final_url).to_string())
        .unwrap_or_else(|_| fetched.info.final_url.clone());
    // A zero TTL bypasses the cache for writing too: the page is stored (read and grep reach
    // it) under a key no cache lookup matches.
    let stored_hash = if ttl.is_zero() {
        format!("{options_hash}:uncached")
    } else {
        options_hash
    };
    let page = NewPage {
        url: url.as_str(),
        final_url: &final_url,
        options_hash: &stored_hash,
        info: &fetched.info,
        text: &fetched.text,
        raw: &fetched.raw,
        headers: &fetched.headers,
        ip: fetched.ip,
        archive: job.archive,
        attempt: Some(attempt),
    };
    let info = &fetched.info;
    let text = &fetched.text;
    let (content_hash, ended) = context
        .store
        .finish_with_page(job_id, page, |content_hash| {
            let result = fetch::build_result(info, text, job_id, content_hash, false, max_chars);
            serde_json::to_string(&result).expect("results serialise")
        })
        .await?;
    context.metrics.fetched(fetched.raw.len());
    if ended.is_some() && !ttl.is_zero() {
        let page = PageRecord {
            id: job_id.to_owned(),
            content_hash,
            lines: fetched.text.lines().count() as u64,
            fetched_at_ms: jiff::Timestamp::now().as_millisecond(),
            info: fetched.info,
        };
        context.cache.insert(url.as_str(), &stored_hash, page);
    }
    Ok(Ok(ended))
}

/// Runs an attempt's work within `runner.job_timeout_secs`: beyond, the work is dropped (a
/// browser context goes back to its pool, a connection closes) and the attempt fails with a
/// transient `timeout`.
async fn within_job_timeout<T>(
    context: &Context,
    work: impl Future<Output = Result<T, JobError>>,
) -> Result<T, JobError> {
    let limit = Duration::from_secs(context.config.job_timeout_secs);
    match tokio::time::timeout(limit, work).await {
        Ok(result) => result,
        Err(_) => Err(JobError {
            transient: true,
            ..JobError::new(
                ErrorCode::Timeout,
                format!(
                    "the job's work took longer than runner.job_timeout_secs ({} s)",
                    limit.as_secs()
                ),
            )
        }),
    }
}

/// Fetches over plain HTTP or renders in the browser, as the job asks: `render: true` in the
/// browser; `"auto"` over HTTP first, then in the browser when the page looks built by
/// JavaScript (an app shell, or little text and scripts). `guard` is asked before each redirect
/// of a plain fetch (the browser follows redirects itself).
async fn fetch_or_render(
    context: &Context,
    job: &FetchJob,
    guard: Option<&trawl_workers::web::client::RedirectGuard>,
) -> Result<fetch::Fetched, JobError> {
    use trawl_workers::browse::render;
    if job.render.is_on() {
        let pool = browser(context)?;
        return render::render(pool, job, &context.fetch).await;
    }
    let plain = fetch::run_guarded(job, &context.fetch, guard)
        .await
        .map_err(|error| error.to_job_error());
    match &context.browser {
        Some(pool) if job.render.is_auto() && render::looks_js_built(&plain) => {
            tracing::debug!("the page looks built by JavaScript; rendering it");
            render::render(pool, job, &context.fetch).await
        }
        _ => plain,
    }
}

fn browser(context: &Context) -> Result<&trawl_workers::browse::Pool, JobError> {
    context.browser.as_ref().ok_or_else(|| {
        JobError::new(
            ErrorCode::BrowserFailed,
            "this worker runs no browser pool (start it with --pools browse=N)",
        )
    })
}

/// Runs a browse job's script and ends the job with its steps.
async fn run_browse(
    context: &Context,
    envelope: &Envelope,
    attempt: u32,
    job: &trawl_workers::job::BrowseJob,
) -> Result<Result<Option<Status>, JobError>, store::Error> {
    let pool = match browser(context) {
        Ok(pool) => pool,
        Err(error) => return Ok(Err(error)),
    };
    let script = trawl_workers::browse::script::run_script(pool, job);
    match within_job_timeout(context, script).await {
        Ok(result) => {
            let outcome = Outcome::Succeeded {
                result: serde_json::to_value(&result).expect("results serialise"),
                page_id: None,
            };
            Ok(Ok(context
                .store
                .finish_attempt(&envelope.id, attempt, &outcome)
                .await?))
        }
        Err(error) => Ok(Err(error)),
    }
}

/// A crawl's page (requested as `url`) was fetched (or found fresh in the cache): records its
/// final and canonical URLs as seen (a page whose canonical URL, or whose redirect target, the
/// crawl already has is a duplicate: returned as the job's error, and not stored), then queues
/// its links (one level deeper) before the page's job ends. `again`: this is not the job's
/// first attempt, so an earlier one may have died between recording the links and queueing
/// their jobs: those still queued are pushed again.
async fn follow_links(
    context: &Context,
    plan: &crate::crawl::Plan,
    depth: u32,
    url: &url::Url,
    info: &fetch::PageInfo,
    again: bool,
) -> Result<Option<JobError>, store::Error> {
    let Some(queue) = &context.queue else {
        return Ok(None);
    };
    let final_url = url::Url::parse(&info.final_url).ok();
    let canonical = info
        .meta
        .canonical
        .as_deref()
        .and_then(|canonical| url::Url::parse(canonical).ok());
    let key = |url: &url::Url| trawl_workers::crawl::crawl_key(url);
    // The write that records the page's links as seen records two more keys: the final URL
    // (so no other link fetches a redirect's target again) and a canonical URL other than it
    // (already seen: this page is a duplicate). A duplicate's links are followed all the same:
    // once recorded as seen, they would not be queued from the canonical page either.
    let final_key = final_url.as_ref().map(key);
    let canonical_key = canonical
        .as_ref()
        .map(key)
        .filter(|canonical| Some(canonical) != final_key.as_ref());
    let page_keys: Vec<String> = final_key.iter().chain(&canonical_key).cloned().collect();
    let links: Vec<(url::Url, u32)> = info
        .links
        .iter()
        .filter_map(|link| url::Url::parse(link).ok())
        .map(|link| (link, depth + 1))
        .collect();
    let new = match crate::crawl::follow_from(context, queue, plan, &page_keys, links, again).await
    {
        Ok((_, new)) => new,
        Err(crate::crawl::StartError::Store(error)) => return Err(error),
        Err(error) => {
            return Err(store::Error::Corrupt {
                what: "crawl follow-ups",
                detail: error.to_string(),
            });
        }
    };
    // A redirect whose target the crawl already has (another link to it, another redirect)
    // is that page again.
    let redirected_to_known = match (&final_key, &final_url) {
        (Some(final_key), Some(final_url))
            if *final_key != key(url) && !new.contains(final_key) =>
        {
            Some((
                final_url,
                "the redirect's target is a page this crawl already has",
            ))
        }
        _ => None,
    };
    let known_canonical = match (&canonical_key, &canonical) {
        (Some(canonical_key), Some(canonical)) if !new.contains(canonical_key) => Some((
            canonical,
            "the page's canonical URL is a page this crawl already has",
        )),
        _ => None,
    };
    if let Some((evidence, message)) = redirected_to_known.or(known_canonical) {
        let mut error = JobError::new(ErrorCode::DuplicateContent, message);
        error.evidence = Some(evidence.to_string());
        return Ok(Some(error));
    }
    Ok(None)
}

/// Checks a fetch job's URL and returns its cache key: the normalised URL and the hash of the
/// options that change the page.
pub fn cache_key(
    client: &trawl_workers::web::Client,
    job: &FetchJob,
) -> Result<(url::Url, String), JobError> {
    let url = fetch::check_url(client, &job.url)?;
    Ok((normalize_url(&url), options_hash(job)))
}

/// Returns the fresh cached page for a fetch job, if any (none when its TTL is 0).
pub async fn fresh_page(
    context: &Context,
    job: &FetchJob,
    url: &url::Url,
    options_hash: &str,
) -> Result<Option<CachedPage>, store::Error> {
    let ttl = context.fetch.config.cache_ttl_for(job);
    if ttl.is_zero() {
        return Ok(None);
    }
    // A TTL longer than the epoch reaches back to its start (no overflow on absurd values).
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    let since = jiff::Timestamp::now()
        .as_millisecond()
        .saturating_sub(ttl_ms);
    context.cache.fresh(url.as_str(), options_hash, since).await
}

/// The result of a job served from the cache: the stored page, with the job's own URL and
/// `max_chars`.
pub fn cached_result(job: &FetchJob, hit: &CachedPage, max_chars: usize) -> FetchResult {
    let mut info = hit.page.info.clone();
    info.url = job.url.clone();
    fetch::build_result(
        &info,
        &hit.text,
        &hit.page.id,
        &hit.page.content_hash,
        true,
        max_chars,
    )
}

/// Sends the `started` event of a job with a webhook.
fn announce_start(context: &Context, envelope: &Envelope) {
    let (Some(webhooks), Some(webhook)) = (&context.webhooks, &envelope.webhook) else {
        return;
    };
    if let Ok(url) = url::Url::parse(webhook) {
        let event = webhook_event(
            EventType::Started,
            envelope,
            serde_json::json!({ "url": envelope.job.url() }),
        );
        webhooks.deliver(url, event);
    }
}

/// Publishes a job's end: the in-process signal, metrics, and, when webhooks are configured,
/// the job's event and the batch's `completed` event when this was its last job.
async fn announce_end(
    context: &Context,
    envelope: &Envelope,
    status: Status,
    started: Instant,
) -> Result<(), store::Error> {
    let _ = context.ended.send(envelope.id.clone());
    context.metrics.job_ended(
        envelope.job.kind(),
        status.as_str(),
        Some(started.elapsed().as_secs_f64()),
    );
    let needs_record = status != Status::Succeeded || context.webhooks.is_some();
    if !needs_record {
        return Ok(());
    }
    let Some(record) = context.store.job(&envelope.id).await? else {
        return Ok(());
    };
    if let Some(error) = &record.error
        && error.code == ErrorCode::BlockedDestination
    {
        context
            .metrics
            .ssrf_blocked(error.evidence.as_deref().unwrap_or("unknown"));
    }
    let Some(webhooks) = &context.webhooks else {
        return Ok(());
    };
    if let Some(url) = envelope
        .webhook
        .as_deref()
        .and_then(|url| url::Url::parse(url).ok())
    {
        let (kind, data) = match (&record.result, &record.error) {
            (Some(result), _) => (EventType::Page, result.clone()),
            (None, error) => (
                EventType::Failed,
                serde_json::json!({ "status": record.status, "error": error }),
            ),
        };
        webhooks.deliver(url, webhook_event(kind, envelope, data));
    }
    if let Some(batch_id) = &record.batch_id
        && let Some(summary) = context.store.claim_batch_completion(batch_id).await?
        && let Some(url) = summary
            .webhook
            .as_deref()
            .and_then(|url| url::Url::parse(url).ok())
    {
        let counts: serde_json::Map<String, serde_json::Value> = summary
            .counts
            .iter()
            .map(|(status, count)| (status.as_str().to_owned(), (*count).into()))
            .collect();
        let event = Event {
            r#type: EventType::Completed,
            job_id: None,
            batch_id: Some(batch_id.clone()),
            at: jiff::Timestamp::now().to_string(),
            data: serde_json::json!({ "counts": counts }),
        };
        webhooks.deliver(url, event);
    }
    Ok(())
}

fn webhook_event(kind: EventType, envelope: &Envelope, data: serde_json::Value) -> Event {
    Event {
        r#type: kind,
        job_id: Some(envelope.id.clone()),
        batch_id: envelope.batch_id.clone(),
        at: jiff::Timestamp::now().to_string(),
        data,
    }
}

/// Hashes the options that change a fetched page (the second half of the cache key).
pub fn options_hash(job: &FetchJob) -> String {
    let mut key = format!("fetch;extract={}", job.extract.as_str());
    if !job.render.is_off() {
        key.push_str(";render=");
        key.push_str(job.render.as_str());
    }
    hex::encode(&Sha256::digest(key.as_bytes())[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let config = Config {
            retry_base_ms: 100,
            retry_max_ms: 1_000,
            ..Config::default()
        };
        let first = config.backoff(1, None);
        assert!(first >= Duration::from_millis(100) && first <= Duration::from_millis(125));
        let third = config.backoff(3, None);
        assert!(third >= Duration::from_millis(400) && third <= Duration::from_millis(500));
        assert_eq!(config.backoff(30, None), Duration::from_millis(1_000));
        assert_eq!(
            config.backoff(1, Some(Duration::from_secs(60))),
            Duration::from_millis(1_000)
        );
    }

    #[test]
    fn options_that_change_the_page_change_the_hash() {
        let markdown = FetchJob::new("https://a.test/");
        let mut text = markdown.clone();
        text.extract = trawl_workers::job::Format::Text;
        let mut longer = markdown.clone();
        longer.max_chars = Some(5);
        assert_ne!(options_hash(&markdown), options_hash(&text));
        assert_eq!(options_hash(&markdown), options_hash(&longer));
    }
}
