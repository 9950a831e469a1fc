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
use sha2::{Digest, Sha256};
use tracing::Instrument as _;
use trawl_workers::backoff::Backoff;
use trawl_workers::fetch;
use trawl_workers::job::{ErrorCode, FetchJob, FetchResult, Job, JobError};
use trawl_workers::web::normalize::normalize_url;

use crate::cache::CachedPage;
use crate::deps::Deps;
pub use crate::deps::{RunnerConfig as Config, RunnerConfigError as ConfigError};
use crate::queue::{Envelope, Lane, Storage};
use crate::shutdown::Shutdown;
use crate::store::{self, Attempt, NewPage, Outcome, PageRecord, Status};
use crate::tenant::Tenant;
use crate::webhooks::{Event, EventType};

mod idle;

/// Why a pool stopped other than by its shutdown.
#[derive(Debug, thiserror::Error)]
#[error("{lane} pool stopped: {source}")]
pub struct PoolError {
    /// The lane whose worker failed.
    pub lane: &'static str,
    /// What apalis reported.
    #[source]
    pub source: WorkerError,
}

/// Runs the fetch pool on the queue of `deps` (either engine) until `shutdown` is triggered,
/// and, when `deps` has a browser, the browse pool on the queue's browse lane beside it (as
/// many jobs at once as the browser has contexts). Jobs not yet started stay in the queue; a
/// job interrupted mid-way is delivered again later (at least once) and its writes are
/// idempotent. A worker that stops on a backend error (Redis restarted or unreachable, a
/// database error) is started again under a new name after a pause, so a pool outlives
/// outages; its unacknowledged jobs are recovered by the queue.
pub async fn run_pool(deps: Arc<Deps>, shutdown: Shutdown) -> Result<(), PoolError> {
    let fetch = run_lane(
        deps.clone(),
        Lane::Fetch,
        deps.config.concurrency,
        shutdown.clone(),
    );
    match deps
        .browser
        .as_ref()
        .map(|browser| browser.config().max_contexts)
    {
        Some(contexts) => {
            let browse = run_lane(deps.clone(), Lane::Browse, contexts, shutdown);
            let (fetch, browse) = tokio::join!(fetch, browse);
            fetch.and(browse)
        }
        None => fetch.await,
    }
}

/// Runs one lane's workers until `shutdown` is triggered.
async fn run_lane(
    deps: Arc<Deps>,
    lane: Lane,
    concurrency: usize,
    shutdown: Shutdown,
) -> Result<(), PoolError> {
    let poll = Duration::from_millis(deps.config.poll_interval_ms);
    let queue = deps.queue.clone();
    let pushed = queue.pushed(lane);
    let jobs_stop = shutdown.clone();
    // The same worker on either engine: their storage types differ, hence a macro. An idle
    // worker looks at the queue when woken by a push or when its pause ends (`idle`); on the
    // embedded queue only then (`Gated`).
    macro_rules! supervise_on {
        ($backend:expr) => {{
            supervise(deps, lane, shutdown, move |name, deps, stop| {
                WorkerBuilder::new(name)
                    .backend($backend)
                    .concurrency(concurrency)
                    .data(deps)
                    .data(jobs_stop.clone())
                    .build(handle)
                    .run_until(stop)
            })
            .await
        }};
    }
    let wake = move || idle::WakeOrBackoff::new(pushed.clone(), poll);
    match (queue.lane_storage(lane), queue.lane_in_use(lane)) {
        (Storage::Sqlite(storage), Some(in_use)) => {
            supervise_on!(idle::Gated::new(storage.clone(), wake(), in_use.clone()))
        }
        (Storage::Sqlite(storage), None) => {
            supervise_on!(storage.clone().poll_with_strategy(wake()))
        }
        (Storage::Redis(storage), _) => supervise_on!(storage.clone().poll_with_strategy(wake())),
    }
}

/// The part of `run_pool` common to both engines: a side task that promotes due tasks and
/// prunes ended ones (neither apalis backend does either on its own: a retry scheduled for
/// later is not fetched until promoted, and ended task data would grow without bound), and
/// the worker, started by `start` under a unique name (a name reused within the orphan
/// timeout is refused by both engines) and started again when it stops on an error before
/// `shutdown`. Generic over the starter because apalis' `Worker::run_until` bounds are too
/// long to spell over a backend type.
async fn supervise<Start, Run>(
    deps: Arc<Deps>,
    lane: Lane,
    shutdown: Shutdown,
    start: Start,
) -> Result<(), PoolError>
where
    Start: Fn(String, Arc<Deps>, StopSignal) -> Run,
    Run: Future<Output = Result<(), WorkerError>>,
{
    let queue = deps.queue.clone();
    let upkeep_queue = queue.clone();
    let upkeep_deps = deps.clone();
    // One lane keeps the queue tidy for both, and ends the crawls whose pages have all ended
    // (a page's end does not check its crawl: one write fewer per page).
    // Every 100 ms while jobs end in this process (a crawl's command learns it ended that
    // soon: `Deps::completed_crawls`); when none has for a while, once a second (an idle
    // server stays idle: `UPKEEP_IDLE`).
    let mut ended = deps.ended.subscribe();
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
                match upkeep_deps.store.complete_idle_crawls().await {
                    Ok(ended) => crate::crawl::announce_completed(&upkeep_deps, &ended).await,
                    Err(error) => tracing::debug!(error = %error, "completing idle crawls failed"),
                }
                tokio::time::sleep(UPKEEP_BUSY).await;
                if !drain_ended(&mut ended) {
                    // Nothing ended lately: wait for a job to end, or the idle pause.
                    tokio::select! {
                        _ = ended.recv() => {}
                        _ = tokio::time::sleep(UPKEEP_IDLE - UPKEEP_BUSY) => {}
                    }
                }
            }
        }
    });
    // Tasks already due are made fetchable before the first worker fetches, and so are the
    // tasks of workers that died (a killed process): apalis would take them back only at
    // a live worker's heartbeat, which a short `trawl run` may end before.
    match queue.recover_orphans(lane).await {
        Ok(0) => {}
        Ok(recovered) => tracing::info!(
            lane = lane.as_str(),
            recovered,
            "took back the jobs of workers that stopped"
        ),
        Err(error) => tracing::warn!(error = %error, "recovering orphaned queue tasks failed"),
    }
    if let Err(error) = queue.promote_due().await {
        tracing::warn!(error = %error, "promoting due queue tasks failed");
    }
    let restart = Backoff::new(Duration::from_millis(250), Duration::from_secs(5));
    let mut restarts = 0;
    let outcome = loop {
        let name = format!(
            "trawl-{}-{}",
            std::process::id(),
            ulid::Ulid::generate().to_string().to_ascii_lowercase()
        );
        let stop = shutdown.waiter();
        let stop_signal: StopSignal = Box::pin(async move {
            stop.await;
            Ok(())
        });
        let result = start(name.clone(), deps.clone(), stop_signal).await;
        if shutdown.is_triggered() {
            break result.map_err(|source| PoolError {
                lane: lane.as_str(),
                source,
            });
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
        tokio::select! {
            _ = tokio::time::sleep(restart.delay(restarts)) => {}
            _ = shutdown.wait() => break Ok(()),
        }
        restarts += 1;
    };
    upkeep.abort();
    outcome
}

/// The pause between upkeep rounds while jobs end in this process.
const UPKEEP_BUSY: Duration = Duration::from_millis(100);
/// The pause between upkeep rounds when none has.
const UPKEEP_IDLE: Duration = Duration::from_secs(1);

/// Empties the ended-jobs receiver; says whether any job ended since the last call.
fn drain_ended(ended: &mut tokio::sync::broadcast::Receiver<String>) -> bool {
    let mut any = false;
    loop {
        match ended.try_recv() {
            Ok(_) | Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) => any = true,
            Err(_) => return any,
        }
    }
}

/// Completes when the pool is asked to stop.
type StopSignal = std::pin::Pin<Box<dyn Future<Output = Result<(), std::io::Error>> + Send>>;

/// The apalis handler. Each job runs on its own tokio task, so jobs spread over every core
/// (an apalis worker otherwise polls its jobs inside its own future) and a panic ends that
/// task, not the pool. A store failure or a panic is returned, so the queue delivers the job
/// again; every job outcome is recorded by `process` itself.
async fn handle(
    envelope: Envelope,
    deps: Data<Arc<Deps>>,
    stop: Data<Shutdown>,
) -> Result<(), BoxDynError> {
    let deps: Arc<Deps> = (*deps).clone();
    let stop: Shutdown = (*stop).clone();
    let id = envelope.id.clone();
    let outcome = tokio::spawn(async move { process_until(&deps, &envelope, &stop).await }).await;
    match outcome {
        Ok(Ok(Delivery::Done)) => Ok(()),
        // An error, so the queue keeps the task and delivers it again.
        Ok(Ok(Delivery::Released)) => {
            tracing::debug!(job_id = %id, "job handed back to the queue at shutdown");
            Err("the pool stopped before the job could run; it goes back to the queue".into())
        }
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
pub async fn process(deps: &Deps, envelope: &Envelope) -> Result<(), store::Error> {
    process_until(deps, envelope, &Shutdown::new())
        .await
        .map(|_| ())
}

/// What became of a delivery.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The job ended, or will be retried by this delivery's queue entry as usual.
    Done,
    /// `stop` was triggered while the job waited (for its host's politeness turn, for
    /// robots.txt, or between attempts): the job is queued again in the store, and the queue
    /// must deliver it again.
    Released,
}

/// Why an attempt did not go on here.
#[derive(Debug)]
enum Halt {
    /// The store failed.
    Store(store::Error),
    /// The pool is stopping: the job goes back to the queue. `used`: the attempt ran (and
    /// failed) and keeps counting.
    Released { attempt: u32, used: bool },
}

impl From<store::Error> for Halt {
    fn from(error: store::Error) -> Halt {
        Halt::Store(error)
    }
}

/// [`process`] for a pool that may stop: a job still waiting when `stop` is triggered is
/// handed back at once instead of waiting out its turn.
pub async fn process_until(
    deps: &Deps,
    envelope: &Envelope,
    stop: &Shutdown,
) -> Result<Delivery, store::Error> {
    // Logs carry the URL's origin only: paths and queries may hold tokens (and a search's
    // query is never logged).
    let origin = match &envelope.job {
        Job::Search(_) => "search".to_owned(),
        job => url::Url::parse(job.url())
            .map(|url| trawl_workers::web::client::origin_of(&url))
            .unwrap_or_else(|_| "invalid-url".to_owned()),
    };
    let span = tracing::debug_span!("job", job_id = %envelope.id, kind = envelope.job.kind(), origin = %origin);
    process_in_span(deps, envelope, stop).instrument(span).await
}

async fn process_in_span(
    deps: &Deps,
    envelope: &Envelope,
    stop: &Shutdown,
) -> Result<Delivery, store::Error> {
    let started = Instant::now();
    let attempt = deps.store.begin_attempt(&envelope.id).await?;
    if let Attempt::Run { number: 1, .. } = attempt {
        announce_start(deps, envelope);
    }
    match run_attempts(deps, envelope, attempt, stop).await {
        Ok(Some(status)) => announce_end(deps, envelope, status, started).await?,
        Ok(None) => {}
        Err(Halt::Store(error)) => return Err(error),
        Err(Halt::Released { attempt, used }) => {
            deps.store
                .release_attempt(&envelope.id, attempt, !used)
                .await?;
            return Ok(Delivery::Released);
        }
    }
    Ok(Delivery::Done)
}

/// Runs attempts until the job ends or another delivery owns it. Returns the status when this
/// delivery ended the job (so its end is announced once).
async fn run_attempts(
    deps: &Deps,
    envelope: &Envelope,
    first: Attempt,
    stop: &Shutdown,
) -> Result<Option<Status>, Halt> {
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
            return Ok(deps
                .store
                .finish(&envelope.id, &Outcome::Dead(error))
                .await?);
        }
        let error = match &envelope.job {
            Job::Fetch(job) => match run_fetch(deps, envelope, number, job, stop).await? {
                Ok(ended) => return Ok(ended),
                Err(error) => error,
            },
            Job::Browse(job) => match run_browse(deps, envelope, number, job).await? {
                Ok(ended) => return Ok(ended),
                Err(error) => error,
            },
            Job::Search(job) => match run_search(deps, envelope, number, job).await? {
                Ok(ended) => return Ok(ended),
                Err(error) => error,
            },
        };
        if !error.transient {
            tracing::debug!(code = %error.code, "job failed");
            return Ok(deps
                .store
                .finish_attempt(&envelope.id, number, &Outcome::Failed(error))
                .await?);
        }
        if number >= max {
            // An outcome, not a fault of trawl: the job's record and the run's summary say it.
            tracing::debug!(code = %error.code, attempts = number, "job dead after its last attempt");
            return Ok(deps
                .store
                .finish_attempt(&envelope.id, number, &Outcome::Dead(error))
                .await?);
        }
        let retry_after = error.retry_after.map(Duration::from_secs);
        let delay = deps.config.backoff(number, retry_after);
        // Detail: the run's summary counts the retries.
        tracing::debug!(code = %error.code, attempt = number, delay_ms = delay.as_millis() as u64, "fetch failed, will retry");
        deps.store.record_retry(&envelope.id, &error).await?;
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop.wait() => {
                return Err(Halt::Released {
                    attempt: number,
                    used: true,
                });
            }
        }
        attempt = deps.store.begin_attempt(&envelope.id).await?;
    }
}

/// Serves a fetch from the cache or fetches it, stores the page and ends the job (returning
/// the status this call ended it with; `None` also when `attempt` is no longer the job's
/// latest: another worker took the job over). Returns the job error when the fetch failed (the
/// caller decides on retries); `Err` is a store failure.
async fn run_fetch(
    deps: &Deps,
    envelope: &Envelope,
    attempt: u32,
    job: &FetchJob,
    stop: &Shutdown,
) -> Result<Result<Option<Status>, JobError>, Halt> {
    let job_id = envelope.id.as_str();
    let (url, options_hash) = match cache_key(&deps.fetch.client, job, &envelope.tenant) {
        Ok(key) => key,
        Err(error) => return Ok(Err(error)),
    };
    let max_chars = deps.fetch.config.max_chars_for(job);
    let ttl = deps.fetch.config.cache_ttl_for(job);
    // A crawl's page follows its links (from the cache too), waits for its host's turn
    // (politeness) when fetched, and its plan says what to follow.
    let crawl = match &envelope.crawl {
        Some(crawl) => deps
            .crawls
            .plan(&deps.store, &crawl.id)
            .await?
            .map(|plan| (plan, crawl.depth)),
        None => None,
    };
    if let Some(hit) = fresh_page(deps, job, &url, &options_hash).await? {
        let hit = serve_hit_to(deps, hit, &envelope.tenant, job_id).await?;
        if let Some((plan, depth)) = &crawl
            && let Some(duplicate) =
                follow_links(deps, plan, *depth, &url, &hit.page.info, attempt > 1).await?
        {
            return Ok(Err(duplicate));
        }
        let result = cached_result(job, &hit, max_chars);
        let outcome = Outcome::Succeeded {
            result: store::stored_fetch_result(&result),
            page_id: Some(hit.page.id.clone()),
        };
        deps.metrics.cache_hit();
        if job.archive {
            deps.store.request_archive_page(&hit.page.id).await?;
        }
        return Ok(Ok(deps
            .store
            .finish_attempt(job_id, attempt, &outcome)
            .await?));
    }
    // A page to archive waits while this process's archive pool lags far behind, so that
    // the pool takes it from memory; a pool that stops meanwhile hands the job back.
    if job.archive {
        tokio::select! {
            biased;
            _ = stop.wait() => return Err(Halt::Released { attempt, used: false }),
            _ = deps.store.room_to_archive() => {}
        }
    }
    // A crawl page asks robots.txt again (waiting while it cannot be fetched), then waits
    // for its host's turn; a pool that stops meanwhile hands the job back at once.
    let permit = match &crawl {
        Some((plan, _)) => {
            let turn = async {
                let crawl_delay = if plan.spec.robots {
                    deps.crawls.admit(&deps.fetch.client, &url).await?
                } else {
                    None
                };
                Ok::<_, JobError>(deps.crawls.wait_turn(&url, crawl_delay).await)
            };
            let released = Halt::Released {
                attempt,
                used: false,
            };
            tokio::select! {
                biased;
                _ = stop.wait() => return Err(released),
                turn = turn => match turn {
                    Ok(turn) => Some(turn),
                    Err(error) => return Ok(Err(error)),
                },
            }
        }
        None => None,
    };
    // A crawl page follows only redirects to pages new to the crawl that robots.txt allows.
    let guard = crawl.as_ref().map(|(plan, _)| {
        crate::crawl::redirect_guard(deps, plan, trawl_workers::crawl::crawl_key(&url))
    });
    let fetched = within_job_timeout(deps, fetch_or_render(deps, job, guard.as_ref())).await;
    drop(permit);
    let fetched = match fetched {
        Ok(fetched) => fetched,
        Err(error) => return Ok(Err(error)),
    };
    if let Some((plan, depth)) = &crawl
        && let Some(duplicate) =
            follow_links(deps, plan, *depth, &url, &fetched.info, attempt > 1).await?
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
        lines: fetched.lines.as_deref(),
        attempt: Some(attempt),
        tenant: envelope.tenant.as_str(),
    };
    let info = &fetched.info;
    let text = &fetched.text;
    let (content_hash, ended) = deps
        .store
        .finish_with_page(job_id, page, |content_hash| {
            let result = fetch::build_result(info, text, job_id, content_hash, false, max_chars);
            store::stored_fetch_result(&result).to_string()
        })
        .await?;
    deps.metrics.fetched(fetched.raw.len());
    if ended.is_some() && !ttl.is_zero() {
        let page = PageRecord {
            id: job_id.to_owned(),
            content_hash,
            lines: fetched.text.lines().count() as u64,
            fetched_at_ms: jiff::Timestamp::now().as_millisecond(),
            info: fetched.info,
            tenant: envelope.tenant.as_str().to_owned(),
        };
        deps.cache.insert(url.as_str(), &stored_hash, page);
    }
    Ok(Ok(ended))
}

/// Runs an attempt's work within `runner.job_timeout_secs`: beyond, the work is dropped (a
/// browser context goes back to its pool, a connection closes) and the attempt fails with a
/// transient `timeout`.
async fn within_job_timeout<T>(
    deps: &Deps,
    work: impl Future<Output = Result<T, JobError>>,
) -> Result<T, JobError> {
    let limit = Duration::from_secs(deps.config.job_timeout_secs);
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

/// Reads a fetch job's page: trawl's own fetch and extraction ([`own_fetch_or_render`]), a
/// page without readable content rescued by a fallback provider when one is chosen
/// (`fetch::rescue`); or, with `fetch.readability = false`, the provider alone
/// (`fetch::by_provider`). `guard` is asked before each redirect of a plain fetch and about
/// where a provider ended.
async fn fetch_or_render(
    deps: &Deps,
    job: &FetchJob,
    guard: Option<&trawl_workers::web::client::RedirectGuard>,
) -> Result<fetch::Fetched, JobError> {
    if deps.fetch.providers.straight(job.fallback_choice()) {
        return fetch::by_provider(&deps.fetch, job).await;
    }
    let outcome = own_fetch_or_render(deps, job, guard).await;
    fetch::rescue(&deps.fetch, job, outcome, guard).await
}

/// Fetches over plain HTTP or renders in the browser, as the job asks: `render: true` in the
/// browser; `"auto"` over HTTP first, then in the browser when the page looks built by
/// JavaScript (an app shell, or little text and scripts). `guard` is asked before each redirect
/// of a plain fetch (the browser follows redirects itself).
async fn own_fetch_or_render(
    deps: &Deps,
    job: &FetchJob,
    guard: Option<&trawl_workers::web::client::RedirectGuard>,
) -> Result<fetch::Fetched, JobError> {
    use trawl_workers::browse::render;
    if job.render.is_on() {
        let pool = browser(deps)?;
        return render::render(pool, job, &deps.fetch).await;
    }
    let plain = fetch::run_guarded(job, &deps.fetch, guard)
        .await
        .map_err(|error| error.to_job_error());
    match &deps.browser {
        Some(pool) if job.render.is_auto() && render::looks_js_built(&plain) => {
            tracing::debug!("the page looks built by JavaScript; rendering it");
            render::render(pool, job, &deps.fetch).await
        }
        _ => plain,
    }
}

fn browser(deps: &Deps) -> Result<&trawl_workers::browse::Pool, JobError> {
    deps.browser.as_ref().ok_or_else(|| {
        JobError::new(
            ErrorCode::BrowserFailed,
            "this worker runs no browser pool (start it with --pools browse=N)",
        )
    })
}

/// Runs a browse job's script and ends the job with its steps and, with `store` (the
/// default), the page it ended on: extracted like a rendered fetch and stored under the job's
/// id, in the same transaction as the job's end (queued for the archive with `archive`). A
/// final page that cannot be extracted (an empty page, say) is a `page_warning` of the
/// result, not a failure of the job.
async fn run_browse(
    deps: &Deps,
    envelope: &Envelope,
    attempt: u32,
    job: &trawl_workers::job::BrowseJob,
) -> Result<Result<Option<Status>, JobError>, store::Error> {
    let pool = match browser(deps) {
        Ok(pool) => pool,
        Err(error) => return Ok(Err(error)),
    };
    let started = Instant::now();
    let script = trawl_workers::browse::script::run_script(pool, job);
    let mut result = match within_job_timeout(deps, script).await {
        Ok(result) => result,
        Err(error) => return Ok(Err(error)),
    };
    // The pages `archive` actions took, each stored under a job of its own (an action whose
    // page cannot be extracted is failed afterwards, with the extraction's code).
    for (number, step) in result.steps.iter_mut().enumerate() {
        if step.taken.is_none() {
            continue;
        }
        let from = serde_json::json!({"job": envelope.id, "step": number + 1});
        crate::browser_pages::archive_step(&deps.fetch, &deps.store, &envelope.tenant, from, step)
            .await?;
        result.completed &= step.ok;
    }
    let fetched = match result.page.take() {
        Some(page) => {
            match crate::browser_pages::extract(&deps.fetch, &job.url, page, started).await {
                Ok(fetched) => Some(fetched),
                Err(error) => {
                    result.page_warning = Some(format!(
                        "the final page was not stored: {}: {}",
                        error.code, error.message
                    ));
                    None
                }
            }
        }
        None => None,
    };
    let Some(fetched) = fetched else {
        let outcome = Outcome::Succeeded {
            result: serde_json::to_value(&result).expect("results serialise"),
            page_id: None,
        };
        return Ok(Ok(deps
            .store
            .finish_attempt(&envelope.id, attempt, &outcome)
            .await?));
    };
    let row = crate::browser_pages::PageRow::new(&envelope.id, &job.url, &fetched);
    let page = row.page(
        &fetched,
        job.archive,
        Some(attempt),
        envelope.tenant.as_str(),
    );
    result.page_id = Some(envelope.id.clone());
    let (_, ended) = deps
        .store
        .finish_with_page(&envelope.id, page, |_| {
            serde_json::to_string(&result).expect("results serialise")
        })
        .await?;
    Ok(Ok(ended))
}

/// Runs a search job: the search (from the cache when fresh), then its top `fetch_top`
/// results as fetch jobs of its batch (recorded before the search ends, so the batch is not
/// complete meanwhile), and ends the job with the results and the fetch jobs' ids.
async fn run_search(
    deps: &Deps,
    envelope: &Envelope,
    attempt: u32,
    job: &trawl_workers::job::SearchJob,
) -> Result<Result<Option<Status>, JobError>, store::Error> {
    let scope = crate::tenant::Scope::of(envelope.tenant.clone());
    let search = crate::web_search::search(deps, &scope, job.clone());
    let mut result = match within_job_timeout(deps, async {
        search.await.map_err(|error| error.to_job_error())
    })
    .await
    {
        Ok(result) => result,
        Err(error) => return Ok(Err(error)),
    };
    if job.fetch_top > 0 {
        result.fetch_jobs = match crate::web_search::fetch_top(
            deps,
            envelope,
            &result.hits,
            job.fetch_top,
            job.archive,
        )
        .await
        {
            Ok(fetched) => fetched,
            Err(crate::web_search::FetchTopError::Store(error)) => return Err(error),
            Err(crate::web_search::FetchTopError::Queue(error)) => {
                return Ok(Err(JobError {
                    transient: true,
                    ..JobError::new(
                        ErrorCode::Internal,
                        format!("queueing the top results failed: {error}"),
                    )
                }));
            }
        };
    }
    let outcome = Outcome::Succeeded {
        result: serde_json::to_value(&result).expect("results serialise"),
        page_id: None,
    };
    Ok(Ok(deps
        .store
        .finish_attempt(&envelope.id, attempt, &outcome)
        .await?))
}

/// A crawl's page (requested as `url`) was fetched (or found fresh in the cache): records its
/// final and canonical URLs as seen (a page whose canonical URL, or whose redirect target, the
/// crawl already has is a duplicate: returned as the job's error, and not stored), then queues
/// its links (one level deeper) before the page's job ends. `again`: this is not the job's
/// first attempt, so an earlier one may have died between recording the links and queueing
/// their jobs: those still queued are pushed again.
async fn follow_links(
    deps: &Deps,
    plan: &crate::crawl::Plan,
    depth: u32,
    url: &url::Url,
    info: &fetch::PageInfo,
    again: bool,
) -> Result<Option<JobError>, store::Error> {
    let queue = &deps.queue;
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
    let new = match crate::crawl::follow_from(deps, queue, plan, &page_keys, links, again).await {
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
/// options that change the page (and of `tenant`, unless the job is a plain public fetch:
/// see [`FetchJob::shares_cache`]).
pub fn cache_key(
    client: &trawl_workers::web::Client,
    job: &FetchJob,
    tenant: &Tenant,
) -> Result<(url::Url, String), JobError> {
    let url = fetch::check_url(client, &job.url)?;
    Ok((normalize_url(&url), options_hash(job, tenant)))
}

/// A cached page as `tenant` may be served it: its own page as it is; another tenant's (a
/// plain public fetch: the only pages whose cache key has no tenant) as a copy of its own
/// under `new_id`, on the same blobs, so that what the result names (its page id, the page
/// read and grep find) is the tenant's.
pub async fn serve_hit_to(
    deps: &Deps,
    hit: CachedPage,
    tenant: &Tenant,
    new_id: &str,
) -> Result<CachedPage, store::Error> {
    if hit.page.tenant == tenant.as_str() {
        return Ok(hit);
    }
    let page = deps
        .store
        .adopt_page(&hit.page.id, new_id, tenant)
        .await?
        .ok_or_else(|| store::Error::Corrupt {
            what: "cached page",
            detail: format!("page {} vanished while it was served", hit.page.id),
        })?;
    Ok(CachedPage {
        page,
        text: hit.text,
    })
}

/// Returns the fresh cached page for a fetch job, if any (none when its TTL is 0).
pub async fn fresh_page(
    deps: &Deps,
    job: &FetchJob,
    url: &url::Url,
    options_hash: &str,
) -> Result<Option<CachedPage>, store::Error> {
    let ttl = deps.fetch.config.cache_ttl_for(job);
    if ttl.is_zero() {
        return Ok(None);
    }
    // A TTL longer than the epoch reaches back to its start (no overflow on absurd values).
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    let since = jiff::Timestamp::now()
        .as_millisecond()
        .saturating_sub(ttl_ms);
    deps.cache.fresh(url.as_str(), options_hash, since).await
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
fn announce_start(deps: &Deps, envelope: &Envelope) {
    let (Some(webhooks), Some(webhook)) = (&deps.webhooks, &envelope.webhook) else {
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
    deps: &Deps,
    envelope: &Envelope,
    status: Status,
    started: Instant,
) -> Result<(), store::Error> {
    let _ = deps.ended.send(envelope.id.clone());
    deps.metrics.job_ended(
        envelope.job.kind(),
        status.as_str(),
        Some(started.elapsed().as_secs_f64()),
    );
    // The job's event: only when webhooks are configured and the job names one.
    let event_to = deps.webhooks.as_ref().and_then(|webhooks| {
        let url = url::Url::parse(envelope.webhook.as_deref()?).ok()?;
        Some((webhooks, url))
    });
    // The record is read back only for what needs it: a failure's error (metrics) and the
    // job's event (its result or error). A succeeded job without an event reads nothing.
    if status != Status::Succeeded || event_to.is_some() {
        let Some(record) = deps.store.job(&envelope.id).await? else {
            return Ok(());
        };
        if let Some(error) = &record.error
            && error.code == ErrorCode::BlockedDestination
        {
            deps.metrics
                .ssrf_blocked(error.evidence.as_deref().unwrap_or("unknown"));
        }
        if let Some((webhooks, url)) = event_to {
            let (kind, data) = match (&record.result, &record.error) {
                (Some(result), _) => (EventType::Page, result.clone()),
                (None, error) => (
                    EventType::Failed,
                    serde_json::json!({ "status": record.status, "error": error }),
                ),
            };
            webhooks.deliver(url, webhook_event(kind, envelope, data));
        }
    }
    let Some(webhooks) = &deps.webhooks else {
        return Ok(());
    };
    if let Some(batch_id) = &envelope.batch_id
        && let Some(summary) = deps.store.claim_batch_completion(batch_id).await?
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
            crawl_id: None,
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
        crawl_id: envelope.crawl.as_ref().map(|crawl| crawl.id.clone()),
        at: jiff::Timestamp::now().to_string(),
        data,
    }
}

/// Hashes the options that change a fetched page (the second half of the cache key), and the
/// tenant when the page is its own (not a plain public fetch).
pub fn options_hash(job: &FetchJob, tenant: &Tenant) -> String {
    let mut key = format!("fetch;extract={}", job.format.as_str());
    if !job.render.is_off() {
        key.push_str(";render=");
        key.push_str(job.render.as_str());
    }
    if let Some(fallback) = job.fallback {
        // A job's own choice of provider may read another text than the configured one.
        key.push_str(";fallback=");
        key.push_str(fallback.as_str());
    }
    if !job.headers.is_empty() {
        // Another token may see another page: the headers are part of the key (as a digest).
        key.push_str(";headers=");
        key.push_str(&job.headers.digest());
    }
    if !job.credentials.is_empty() {
        // So are the credentials.
        key.push_str(";credentials=");
        key.push_str(&job.credentials.digest());
    }
    if !job.shares_cache() {
        key.push_str(";tenant=");
        key.push_str(tenant.as_str());
    }
    hex::encode(&Sha256::digest(key.as_bytes())[..8])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_are_part_of_the_cache_key() {
        let tenant = Tenant::default();
        let plain = FetchJob::new("https://example.com/");
        let with = |value: &str| FetchJob {
            headers: [("X-Token", value)].into_iter().collect(),
            ..plain.clone()
        };
        assert_ne!(
            options_hash(&plain, &tenant),
            options_hash(&with("a"), &tenant)
        );
        assert_ne!(
            options_hash(&with("a"), &tenant),
            options_hash(&with("b"), &tenant)
        );
        assert_eq!(
            options_hash(&with("a"), &tenant),
            options_hash(&with("a"), &tenant)
        );
    }

    #[test]
    fn credentials_are_part_of_the_cache_key_and_keep_the_page_private() {
        let rendered = FetchJob {
            render: trawl_workers::job::Render::Flag(true),
            ..FetchJob::new("https://example.com/")
        };
        let signed_in = |token: &str| FetchJob {
            credentials: serde_json::from_value(serde_json::json!({
                "local_storage": {"https://example.com": {"token": token, "theme": "dark"}},
            }))
            .expect("credentials"),
            ..rendered.clone()
        };
        assert!(rendered.shares_cache() && !signed_in("a").shares_cache());
        let (a, b) = (Tenant::default(), Tenant::new("b").expect("a tenant"));
        assert_ne!(
            options_hash(&rendered, &a),
            options_hash(&signed_in("a"), &a)
        );
        assert_ne!(
            options_hash(&signed_in("a"), &a),
            options_hash(&signed_in("b"), &a)
        );
        assert_ne!(
            options_hash(&signed_in("a"), &a),
            options_hash(&signed_in("a"), &b)
        );
        // Map order is not part of it (the entries' digest is canonical).
        for _ in 0..8 {
            assert_eq!(
                options_hash(&signed_in("a"), &a),
                options_hash(&signed_in("a"), &a)
            );
        }
    }

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
        text.format = trawl_workers::job::Format::Text;
        let mut longer = markdown.clone();
        longer.max_chars = Some(5);
        let tenant = Tenant::default();
        assert_ne!(
            options_hash(&markdown, &tenant),
            options_hash(&text, &tenant)
        );
        assert_eq!(
            options_hash(&markdown, &tenant),
            options_hash(&longer, &tenant)
        );
    }

    #[test]
    fn only_plain_public_fetches_share_their_cache_key_across_tenants() {
        let acme = Tenant::new("acme").expect("valid");
        let public = FetchJob::new("https://a.test/");
        assert_eq!(
            options_hash(&public, &acme),
            options_hash(&public, &Tenant::default())
        );
        let direct = FetchJob {
            proxy: Some("direct".to_owned()),
            ..public.clone()
        };
        assert_eq!(
            options_hash(&direct, &acme),
            options_hash(&direct, &Tenant::default())
        );
        let proxied = FetchJob {
            proxy: Some("http://user:pw@proxy.test:3128".to_owned()),
            ..public
        };
        assert_ne!(
            options_hash(&proxied, &acme),
            options_hash(&proxied, &Tenant::default())
        );
    }
}
