//! Queue benchmark: the queue's own overhead, in no-op jobs per second, through trawl's queue
//! layer (`trawl::queue::Queue`) on apalis-redis (the distributed engine, target ≥ 5,000
//! jobs/s) and on apalis-sqlite (the embedded engine, for comparison).
//!
//! ```text
//! cargo bench --bench queue                                # 20,000 jobs, 3 runs per row
//! cargo bench --bench queue -- 50000                       # another job count
//! TRAWL_BENCH_ENGINES=redis TRAWL_BENCH_SHAPES=1x64 cargo bench --bench queue
//! ```
//!
//! Starts its own `redis-server` on a free loopback port (`--save '' --appendonly no
//! --maxmemory-policy noeviction`, a child process stopped by its PID at the end, on failure
//! too) and keeps the SQLite queue file in a temporary directory. Each row is one engine and
//! one pool shape, `WxC`: W apalis workers of concurrency C in this process, each built the way
//! `trawl::runner` builds its pool workers (`runner::Config::default()` with the shape's
//! concurrency: its queue settings, so `batch_size = min(C, 16)`, its poll interval, heartbeat
//! and missed heartbeats; `poll_with_interval`, `.concurrency(C)`, `.data(..)`, a handler that
//! runs the job on its own tokio task, the default persisted-results ack path), beside the
//! runner's upkeep task (`promote_due` + `prune_finished` every second). The handler does
//! nothing but note the envelope id, so what is measured is the queue, not the store or the
//! fetching. Each run:
//!
//! 1. enqueue: N envelopes (fetch jobs, ULID ids) pushed with `Queue::push`, in calls of
//!    `TRAWL_BENCH_PUSH_BATCH` envelopes (Redis: one script call per 1,000 within a call;
//!    SQLite: one transaction per call); jobs/s over the push calls only. On Redis the
//!    `promote_due` that makes them fetchable (done by the runner before its first fetch) is
//!    timed on its own;
//! 2. consume: the workers started on the backlog; jobs/s from the first job handed to the
//!    handler to the moment the backend shows all N acknowledged (Redis: done set + pruned;
//!    SQLite: `Done` rows + pruned), and, beside it, to the last handler return;
//! 3. checks: every pushed id handled exactly once (ids counted in a set), nothing left in
//!    the queue once the workers stopped and `prune_finished` ran (Redis: active, scheduled,
//!    done, dead, data, metadata and in-flight keys; SQLite: `Jobs` rows); the Redis server's
//!    `used_memory` (INFO memory) before the push, after it, and after the prune; the bench
//!    process's peak RSS (VmHWM, reset per run through `/proc/self/clear_refs` when allowed).
//!
//! Every run of an engine uses one queue (namespace `trawlbench`, one SQLite file), as one
//! deployment would, so anything a run leaves behind shows in the next run's figures. Prints
//! the machine, each run, a table of medians with their ratio to the 5,000 jobs/s target, and
//! what the queue keeps after all runs (Redis keys by pattern, SQLite rows). Fails (exit 1)
//! when a check fails.
//!
//! Environment: `TRAWL_BENCH_JOBS` (N, default 20,000), `TRAWL_BENCH_RUNS` (runs per row,
//! default 3), `TRAWL_BENCH_ENGINES` (comma-separated subset of `redis,sqlite`),
//! `TRAWL_BENCH_SHAPES` (comma-separated `WxC`, default `1x1,1x32,1x64,4x16`),
//! `TRAWL_BENCH_PUSH_BATCH` (envelopes per `Queue::push` call, default 1,000),
//! `TRAWL_BENCH_TIMEOUT` (seconds one run's consume may take, default 300),
//! `TRAWL_BENCH_REDIS_SERVER` (the redis-server binary, default `redis-server` on the PATH),
//! `TRAWL_BENCH_REDIS_LOCK_TASKS=false|true` (diagnostic: overrides apalis-redis' `lock_tasks`,
//! default true, on the workers' storage; its lock script `LREM`s each started task from the
//! whole active list, a scan as long as the backlog).

// A benchmark reads its own knobs from the environment; trawl's configuration rule (figment only)
// is for the application.
#![allow(missing_docs, clippy::unwrap_used, clippy::disallowed_methods)]

mod common;
#[path = "common/figures.rs"]
#[allow(
    dead_code,
    reason = "the queue benchmark's report has no verdicts or load average"
)]
mod figures;
#[path = "common/knobs.rs"]
#[allow(
    dead_code,
    reason = "the queue benchmark's knobs are positive counts and lists"
)]
mod knobs;
#[path = "common/redis.rs"]
mod redis_server;
#[path = "common/server.rs"]
mod server;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::str::FromStr as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use apalis::prelude::*;
use apalis_redis::ConnectionManager;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use trawl::queue::{Envelope, Queue, Storage, fetch_queue_name};
use trawl_workers::job::{FetchJob, Job};

use figures::median;
use knobs::{arg_number, env_list, env_positive};
use redis_server::RedisServer;

type Result<T> = std::result::Result<T, String>;

/// Jobs per run unless `TRAWL_BENCH_JOBS` or a bare number says otherwise.
const DEFAULT_JOBS: usize = 20_000;
/// Pool shapes measured unless `TRAWL_BENCH_SHAPES` says otherwise.
const DEFAULT_SHAPES: &str = "1x1,1x32,1x64,4x16";
/// The consume rate the queue must sustain (jobs/s).
const TARGET_JOBS_PER_SEC: f64 = 5_000.0;
/// The queue namespace every run uses (queues `trawlbench:fetch`, `trawlbench:browse`).
const NAMESPACE: &str = "trawlbench";
/// How often the waits look at the counters and the backend.
const PROBE_EVERY: Duration = Duration::from_millis(2);

fn main() -> ExitCode {
    match bench() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("queue bench: a check failed (see above)");
            ExitCode::FAILURE
        }
        Err(error) => {
            eprintln!("queue bench failed: {error}");
            ExitCode::FAILURE
        }
    }
}

/// The two queue engines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Redis,
    Sqlite,
}

impl Engine {
    fn as_str(self) -> &'static str {
        match self {
            Engine::Redis => "redis",
            Engine::Sqlite => "sqlite",
        }
    }
}

/// A pool shape: `workers` apalis workers of `concurrency` each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shape {
    workers: usize,
    concurrency: usize,
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}x{}", self.workers, self.concurrency)
    }
}

/// The knobs.
struct Settings {
    jobs: usize,
    runs: usize,
    engines: Vec<Engine>,
    shapes: Vec<Shape>,
    push_batch: usize,
    timeout: Duration,
    redis_server: PathBuf,
    /// A diagnostic override of apalis-redis' `lock_tasks` on the workers' storage.
    redis_lock_tasks: Option<bool>,
}

fn settings() -> Result<Settings> {
    let mut jobs = env_positive("TRAWL_BENCH_JOBS", DEFAULT_JOBS)?;
    // `cargo bench` passes `--bench`; a bare number is the job count.
    if let Some(n) = arg_number() {
        if n == 0 {
            return Err("the job count must be at least 1".to_owned());
        }
        jobs = n;
    }
    let engines = env_list(
        "TRAWL_BENCH_ENGINES",
        "redis,sqlite",
        "engine",
        |name| match name {
            "redis" => Ok(Engine::Redis),
            "sqlite" => Ok(Engine::Sqlite),
            other => Err(format!(
                "TRAWL_BENCH_ENGINES: {other:?} is neither redis nor sqlite"
            )),
        },
    )?;
    let shapes = env_list("TRAWL_BENCH_SHAPES", DEFAULT_SHAPES, "shape", |shape| {
        let parsed = shape.split_once(['x', 'X']).and_then(|(w, c)| {
            Some(Shape {
                workers: w.trim().parse().ok()?,
                concurrency: c.trim().parse().ok()?,
            })
        });
        match parsed {
            Some(shape) if shape.workers > 0 && (1..=4_096).contains(&shape.concurrency) => {
                Ok(shape)
            }
            _ => Err(format!(
                "TRAWL_BENCH_SHAPES: {shape:?} is not WORKERSxCONCURRENCY (e.g. 4x16)"
            )),
        }
    })?;
    Ok(Settings {
        jobs,
        runs: env_positive("TRAWL_BENCH_RUNS", 3)?,
        engines,
        shapes,
        push_batch: env_positive("TRAWL_BENCH_PUSH_BATCH", 1_000)?,
        timeout: Duration::from_secs(env_positive("TRAWL_BENCH_TIMEOUT", 300)? as u64),
        redis_server: std::env::var_os("TRAWL_BENCH_REDIS_SERVER")
            .map_or_else(|| PathBuf::from("redis-server"), PathBuf::from),
        redis_lock_tasks: match std::env::var("TRAWL_BENCH_REDIS_LOCK_TASKS") {
            Ok(value) => match value.trim() {
                "0" | "false" | "no" => Some(false),
                "1" | "true" | "yes" => Some(true),
                other => {
                    return Err(format!(
                        "TRAWL_BENCH_REDIS_LOCK_TASKS={other:?} is neither true nor false"
                    ));
                }
            },
            Err(_) => None,
        },
    })
}

/// Runs everything; `Ok(false)` when a check failed.
fn bench() -> Result<bool> {
    let settings = settings()?;
    common::print_machine();
    let runner = trawl::runner::Config::default();
    println!(
        "queue bench: {} jobs per run, {} runs per row, engines {}, shapes {}, {} envelopes per \
         push call; runner defaults: poll {} ms, heartbeat {} s x {} missed, batch_size = \
         min(concurrency, 16)",
        settings.jobs,
        settings.runs,
        settings
            .engines
            .iter()
            .map(|engine| engine.as_str())
            .collect::<Vec<_>>()
            .join(","),
        settings
            .shapes
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(","),
        settings.push_batch,
        runner.poll_interval_ms,
        runner.heartbeat_secs,
        runner.missed_heartbeats,
    );
    if let Some(lock) = settings.redis_lock_tasks {
        println!(
            "DIAGNOSTIC: apalis-redis lock_tasks forced to {lock} on the workers' storage (not \
             how trawl runs)"
        );
    }
    let dir = tempfile::Builder::new()
        .prefix("trawl-queue-bench-")
        .tempdir()
        .map_err(|error| format!("creating a temporary directory: {error}"))?;
    // The server is stopped when `redis` drops: at the end, on an error, or on a panic.
    let redis = if settings.engines.contains(&Engine::Redis) {
        let server = RedisServer::start(
            &settings.redis_server,
            &dir.path().join("redis"),
            &dir.path().join("redis.log"),
        )?;
        println!(
            "redis-server {} pid {} on 127.0.0.1:{}",
            redis_version(&settings.redis_server),
            server.pid(),
            server.port
        );
        Some(server)
    } else {
        None
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| format!("starting tokio: {error}"))?;
    let outcome = runtime.block_on(bench_all(&settings, dir.path(), redis.as_ref()));
    runtime.shutdown_timeout(Duration::from_secs(5));
    drop(redis);
    outcome
}

/// One measured run.
struct Run {
    engine: Engine,
    shape: Shape,
    push_secs: f64,
    promote_secs: f64,
    /// First job handed to a handler → all acknowledged in the backend.
    consume_secs: f64,
    /// First job handed to a handler → last handler return.
    handled_secs: f64,
    /// Workers started → first job handed to a handler.
    first_job_secs: f64,
    peak_rss_mb: f64,
    memory: Option<RedisMemory>,
    ok: bool,
}

/// The Redis server's `used_memory` around a run, in bytes.
#[derive(Debug, Clone, Copy)]
struct RedisMemory {
    before: u64,
    after_push: u64,
    after_prune: u64,
}

async fn bench_all(settings: &Settings, dir: &Path, redis: Option<&RedisServer>) -> Result<bool> {
    let mut runs = Vec::new();
    let mut ok = true;
    let mut remains = Vec::new();
    for &engine in &settings.engines {
        let probe = match engine {
            Engine::Redis => {
                let server = redis.ok_or("no redis server")?;
                Probe::redis(&server.url()).await?
            }
            Engine::Sqlite => Probe::sqlite(&dir.join("queue.sqlite")),
        };
        let baseline = probe.used_memory().await?;
        if let Some(breakdown) = probe.memory_breakdown().await? {
            println!("redis before the first run: {breakdown}");
        }
        for &shape in &settings.shapes {
            for i in 1..=settings.runs {
                let run = run_once(settings, engine, shape, i, dir, redis, &probe).await?;
                ok &= run.ok;
                runs.push(run);
            }
        }
        let left = probe.remains().await?;
        if engine == Engine::Redis {
            // Redis shrinks its emptied hash tables from its cron (10 times a second).
            tokio::time::sleep(Duration::from_secs(2)).await;
            if let Some(breakdown) = probe.memory_breakdown().await? {
                println!("redis 2 s after the last run: {breakdown}");
            }
        }
        remains.push((engine, baseline, left, probe.used_memory().await?));
        probe.close().await;
    }
    report(settings, &runs);
    for (engine, baseline, remains, memory) in remains {
        match (baseline, memory) {
            (Some(before), Some(after)) => println!(
                "{}: used_memory {} B before the first run, {} B 2 s after the last ({:+} B); \
                 left in the server: {}",
                engine.as_str(),
                before,
                after,
                after as i64 - before as i64,
                remains
            ),
            _ => println!("{}: left in the queue file: {}", engine.as_str(), remains),
        }
    }
    println!(
        "bench process peak RSS: {:.0} MB (largest of the runs' peaks)",
        runs.iter()
            .map(|run| run.peak_rss_mb)
            .filter(|rss| rss.is_finite())
            .fold(peak_rss_mb(), f64::max)
    );
    Ok(ok)
}

/// What the handlers saw in one run.
#[derive(Debug, Default)]
struct Tally {
    /// When the first job reached a handler.
    first: OnceLock<Instant>,
    /// When the last handler returned.
    last: Mutex<Option<Instant>>,
    /// The envelope ids handled.
    seen: Mutex<HashSet<String>>,
    handled: AtomicU64,
    duplicates: AtomicU64,
    /// `tenths[k]`: when the `(k + 1)`-th tenth of the jobs had been handled.
    tenths: [OnceLock<Instant>; 10],
    /// Jobs per tenth.
    tenth: u64,
}

impl Tally {
    fn new(jobs: usize) -> Tally {
        Tally {
            tenth: (jobs as u64 / 10).max(1),
            ..Tally::default()
        }
    }

    /// Jobs/s in each tenth of the run (from the first job), showing whether the rate depends
    /// on how many jobs are queued.
    fn tenth_rates(&self) -> Vec<f64> {
        let Some(&first) = self.first.get() else {
            return Vec::new();
        };
        let mut previous = first;
        self.tenths
            .iter()
            .map_while(OnceLock::get)
            .map(|&at| {
                let secs = at.duration_since(previous).as_secs_f64();
                previous = at;
                self.tenth as f64 / secs
            })
            .collect()
    }

    fn record(&self, id: String) {
        let now = Instant::now();
        let _ = self.first.set(now);
        if !self.seen.lock().unwrap().insert(id) {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        let now = Instant::now();
        *self.last.lock().unwrap() = Some(now);
        let handled = self.handled.fetch_add(1, Ordering::Release) + 1;
        if handled.is_multiple_of(self.tenth)
            && let Some(mark) = self.tenths.get((handled / self.tenth - 1) as usize)
        {
            let _ = mark.set(now);
        }
    }
}

/// The no-op job: shaped like `trawl::runner`'s handler (the job runs on its own tokio task,
/// its outcome goes back to apalis, which acknowledges it), but the job itself only notes its
/// envelope id.
async fn handle(
    envelope: Envelope,
    tally: Data<Arc<Tally>>,
) -> std::result::Result<(), BoxDynError> {
    let tally: Arc<Tally> = (*tally).clone();
    tokio::spawn(async move { tally.record(envelope.id) })
        .await
        .map_err(|join_error| format!("job panicked: {join_error}").into())
}

/// A worker name as the runner makes them: unique, since both engines refuse a name reused
/// within the orphan timeout.
fn worker_name() -> String {
    format!(
        "trawl-{}-{}",
        std::process::id(),
        ulid::Ulid::generate().to_string().to_ascii_lowercase()
    )
}

/// Completes when the workers are asked to stop (the runner's `StopSignal`).
type StopSignal = std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>;

#[allow(clippy::too_many_arguments)]
async fn run_once(
    settings: &Settings,
    engine: Engine,
    shape: Shape,
    i: usize,
    dir: &Path,
    redis: Option<&RedisServer>,
    probe: &Probe,
) -> Result<Run> {
    let n = settings.jobs;
    let runner = trawl::runner::Config {
        concurrency: shape.concurrency,
        ..trawl::runner::Config::default()
    };
    let queue_settings = runner.queue_settings();
    let poll = Duration::from_millis(runner.poll_interval_ms);
    let queue = match engine {
        Engine::Redis => {
            let url = redis.ok_or("no redis server")?.url();
            Queue::connect_redis(&url, NAMESPACE, queue_settings).await
        }
        Engine::Sqlite => Queue::open(&dir.join("queue.sqlite"), NAMESPACE, queue_settings).await,
    }
    .map_err(|error| format!("opening the {} queue: {error}", engine.as_str()))?;

    // Envelopes are built before the clock starts.
    let batches: Vec<Vec<Envelope>> = (0..n)
        .map(|k| {
            Envelope::new(
                ulid::Ulid::generate().to_string(),
                Job::Fetch(FetchJob::new(format!("http://127.0.0.1:9/page/{k}"))),
            )
        })
        .collect::<Vec<_>>()
        .chunks(settings.push_batch)
        .map(<[Envelope]>::to_vec)
        .collect();
    let pushed: HashSet<String> = batches
        .iter()
        .flatten()
        .map(|envelope| envelope.id.clone())
        .collect();
    reset_peak_rss();
    let memory_before = probe.used_memory().await?;

    // 1. Enqueue.
    let start = Instant::now();
    for batch in batches {
        queue
            .push(batch)
            .await
            .map_err(|error| format!("pushing: {error}"))?;
    }
    let push_secs = start.elapsed().as_secs_f64();
    let memory_after_push = probe.used_memory().await?;
    let start = Instant::now();
    let promoted = queue
        .promote_due()
        .await
        .map_err(|error| format!("promoting: {error}"))?;
    let promote_secs = start.elapsed().as_secs_f64();
    let backlog = probe.backlog().await?;
    let mut problems = Vec::new();
    if backlog != n as u64 {
        problems.push(format!("{backlog} jobs waiting after the push, not {n}"));
    }
    if engine == Engine::Redis && promoted != n as u64 {
        problems.push(format!("promote_due moved {promoted} jobs, not {n}"));
    }

    // 2. Consume: the runner's upkeep task beside the workers.
    let tally = Arc::new(Tally::new(n));
    probe.reset_stats().await?;
    let server_cpu_before = probe.server_cpu_secs().await?;
    let cpu_before = process_cpu_secs();
    let pruned = Arc::new(AtomicU64::new(0));
    let upkeep = {
        let queue = queue.clone();
        let pruned = pruned.clone();
        tokio::spawn(async move {
            loop {
                if let Err(error) = queue.promote_due().await {
                    eprintln!("upkeep: promoting due queue tasks failed: {error}");
                }
                match queue.prune_finished().await {
                    Ok(deleted) => {
                        pruned.fetch_add(deleted, Ordering::AcqRel);
                    }
                    Err(error) => eprintln!("upkeep: pruning ended queue tasks failed: {error}"),
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stop_signal = || -> StopSignal {
        let mut stop = stop_rx.clone();
        Box::pin(async move {
            let _ = stop.wait_for(|stopped| *stopped).await;
            Ok(())
        })
    };
    let started = Instant::now();
    // The runner's worker, on either engine (their storage types differ, hence a macro).
    macro_rules! start_workers {
        ($storage:expr) => {{
            let storage = $storage;
            (0..shape.workers)
                .map(|_| {
                    let worker = WorkerBuilder::new(worker_name())
                        .backend(storage.clone().poll_with_interval(poll))
                        .concurrency(shape.concurrency)
                        .data(tally.clone())
                        .build(handle);
                    tokio::spawn(worker.run_until(stop_signal()))
                })
                .collect::<Vec<_>>()
        }};
    }
    let workers = match queue.storage() {
        Storage::Sqlite(storage) => start_workers!(storage),
        Storage::Redis(storage) => match settings.redis_lock_tasks {
            Some(lock) => {
                let config = storage.get_config().clone().lock_tasks(lock);
                start_workers!(storage.with_config(config))
            }
            None => start_workers!(storage),
        },
    };
    let deadline = started + settings.timeout;
    let mut timed_out = false;
    while tally.handled.load(Ordering::Acquire) < n as u64 {
        if Instant::now() > deadline || workers.iter().all(tokio::task::JoinHandle::is_finished) {
            timed_out = true;
            break;
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
    let mut acked = 0;
    while !timed_out {
        // Pruned first: a prune between the two reads can only make the sum smaller.
        let before = pruned.load(Ordering::Acquire);
        acked = before + probe.ended().await?;
        if acked >= n as u64 {
            break;
        }
        if Instant::now() > deadline {
            timed_out = true;
            break;
        }
        tokio::time::sleep(PROBE_EVERY).await;
    }
    let acked_at = Instant::now();
    let cpu = process_cpu_secs() - cpu_before;
    let server_cpu = probe
        .server_cpu_secs()
        .await?
        .zip(server_cpu_before)
        .map(|(after, before)| after - before);
    let commands = probe.command_stats().await?;
    let handled = tally.handled.load(Ordering::Acquire);
    if timed_out {
        problems.push(format!(
            "consume did not finish within {} s: {handled} handled, {acked} acknowledged",
            settings.timeout.as_secs()
        ));
    }

    let _ = stop_tx.send(true);
    for (k, worker) in workers.into_iter().enumerate() {
        match tokio::time::timeout(Duration::from_secs(30), worker).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => problems.push(format!("worker {k} stopped on: {error}")),
            Ok(Err(join_error)) => problems.push(format!("worker {k} panicked: {join_error}")),
            Err(_) => problems.push(format!("worker {k} did not stop within 30 s")),
        }
    }
    upkeep.abort();
    let _ = upkeep.await;
    queue
        .prune_finished()
        .await
        .map_err(|error| format!("pruning: {error}"))?;
    let memory_after_prune = probe.used_memory().await?;
    let peak_rss_mb = peak_rss_mb();

    // 3. Checks.
    let duplicates = tally.duplicates.load(Ordering::Relaxed);
    let seen = std::mem::take(&mut *tally.seen.lock().unwrap());
    if duplicates > 0 {
        problems.push(format!("{duplicates} jobs handled more than once"));
    }
    let missing = pushed.difference(&seen).count();
    let unknown = seen.difference(&pushed).count();
    if missing > 0 {
        problems.push(format!("{missing} pushed jobs never handled"));
    }
    if unknown > 0 {
        problems.push(format!("{unknown} handled jobs were never pushed"));
    }
    let left = probe.left_in_queue().await?;
    let kept_keys = probe.namespace_keys().await?;
    if !left.is_empty() {
        problems.push(format!("left in the queue: {}", left.join(", ")));
    }
    queue.close().await;

    let first = tally.first.get().copied();
    let last = *tally.last.lock().unwrap();
    let (consume_secs, handled_secs, first_job_secs) = match (first, last) {
        (Some(first), Some(last)) => (
            acked_at.duration_since(first).as_secs_f64(),
            last.duration_since(first).as_secs_f64(),
            first.duration_since(started).as_secs_f64(),
        ),
        _ => (f64::NAN, f64::NAN, f64::NAN),
    };
    let memory = match (memory_before, memory_after_push, memory_after_prune) {
        (Some(before), Some(after_push), Some(after_prune)) => Some(RedisMemory {
            before,
            after_push,
            after_prune,
        }),
        _ => None,
    };
    let run = Run {
        engine,
        shape,
        push_secs,
        promote_secs,
        consume_secs,
        handled_secs,
        first_job_secs,
        peak_rss_mb,
        memory,
        ok: problems.is_empty(),
    };
    let n = n as f64;
    let memory_text = memory.map_or_else(String::new, |m| {
        format!(
            ", used_memory {:.1} → {:.1} → {:.1} MB ({:+} B)",
            mb(m.before),
            mb(m.after_push),
            mb(m.after_prune),
            m.after_prune as i64 - m.before as i64
        )
    });
    println!(
        "{} {} run {i}: push {:.0} jobs/s ({:.2} s{}), consume {:.0} jobs/s acked ({:.2} s), \
         {:.0} jobs/s handled, first job {:.0} ms after start, peak RSS {:.0} MB{}; {}",
        engine.as_str(),
        shape,
        n / push_secs,
        push_secs,
        if engine == Engine::Redis {
            format!(" + promote {:.3} s", promote_secs)
        } else {
            String::new()
        },
        n / consume_secs,
        consume_secs,
        n / handled_secs,
        first_job_secs * 1_000.0,
        peak_rss_mb,
        memory_text,
        if problems.is_empty() {
            format!("{} handled once each, queue empty", seen.len())
        } else {
            format!("FAILED: {}", problems.join("; "))
        }
    );
    println!(
        "    consume CPU: bench process {:.0} µs/job{}; jobs/s per tenth: {}{}{}",
        cpu * 1e6 / n,
        server_cpu.map_or_else(String::new, |secs| format!(
            ", redis-server {:.0} µs/job",
            secs * 1e6 / n
        )),
        tally
            .tenth_rates()
            .iter()
            .map(|rate| format!("{rate:.0}"))
            .collect::<Vec<_>>()
            .join(" "),
        commands.map_or_else(String::new, |commands| format!("; redis {commands}")),
        kept_keys.map_or_else(String::new, |(keys, bytes)| format!(
            "; {keys} keys ({bytes} B) under {NAMESPACE}:* after the prune"
        )),
    );
    Ok(run)
}

/// Bytes to MB.
fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

/// Prints the medians of each row and their ratio to the target.
fn report(settings: &Settings, runs: &[Run]) {
    let n = settings.jobs as f64;
    println!();
    println!(
        "medians of {} runs, {} jobs each (consume = first job taken → last acknowledged; target \
         {:.0} jobs/s):",
        settings.runs, settings.jobs, TARGET_JOBS_PER_SEC
    );
    println!(
        "{:<7} {:>6} {:>10} {:>8} {:>10} {:>8} {:>10} {:>9} {:>10} {:>7} {:>14} {:>8}",
        "engine",
        "shape",
        "push/s",
        "x target",
        "consume/s",
        "x target",
        "handled/s",
        "promote s",
        "1st job ms",
        "RSS MB",
        "redis KB kept",
        "checks"
    );
    for &engine in &settings.engines {
        for &shape in &settings.shapes {
            let rows: Vec<&Run> = runs
                .iter()
                .filter(|run| run.engine == engine && run.shape == shape)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let push = median(rows.iter().map(|run| n / run.push_secs).collect());
            let consume = median(rows.iter().map(|run| n / run.consume_secs).collect());
            let handled = median(rows.iter().map(|run| n / run.handled_secs).collect());
            let promote = median(rows.iter().map(|run| run.promote_secs).collect());
            let rss = median(rows.iter().map(|run| run.peak_rss_mb).collect());
            let first_job = median(
                rows.iter()
                    .map(|run| run.first_job_secs * 1_000.0)
                    .collect(),
            );
            let kept = median(
                rows.iter()
                    .filter_map(|run| run.memory)
                    .map(|m| (m.after_prune as f64 - m.before as f64) / 1_024.0)
                    .collect(),
            );
            let passed = rows.iter().filter(|run| run.ok).count();
            println!(
                "{:<7} {:>6} {:>10.0} {:>8.2} {:>10.0} {:>8.2} {:>10.0} {:>9} {:>10.1} {:>7.0} {:>14} {:>8}",
                engine.as_str(),
                shape.to_string(),
                push,
                push / TARGET_JOBS_PER_SEC,
                consume,
                consume / TARGET_JOBS_PER_SEC,
                handled,
                if engine == Engine::Redis {
                    format!("{promote:.3}")
                } else {
                    "-".to_owned()
                },
                first_job,
                rss,
                if kept.is_finite() {
                    format!("{kept:+.1}")
                } else {
                    "-".to_owned()
                },
                format!("{passed}/{} ok", rows.len())
            );
        }
    }
    println!();
}

/// Peak RSS of this process so far (VmHWM), in MB.
fn peak_rss_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status.lines().find_map(|line| {
                line.strip_prefix("VmHWM:").and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<f64>()
                        .ok()
                })
            })
        })
        .map_or(f64::NAN, |kb| kb / 1_024.0)
}

/// CPU time (user + system) of this process so far, in seconds (`/proc/self/stat`, at the
/// usual 100 ticks per second).
fn process_cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            // Fields after the parenthesised command name; utime and stime are the 14th and
            // 15th fields, the 12th and 13th after it.
            let rest = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let user: f64 = fields.get(11)?.parse().ok()?;
            let system: f64 = fields.get(12)?.parse().ok()?;
            Some((user + system) / 100.0)
        })
        .unwrap_or(f64::NAN)
}

/// Resets VmHWM to the current RSS (Linux: `5` into `/proc/self/clear_refs`), so each run's
/// peak is its own; where that is refused, the peak is the process's so far.
fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The bench's own view of the backend, beside trawl's queue: counts, memory, leftovers.
enum Probe {
    Redis {
        connection: ConnectionManager,
        config: apalis_redis::Config,
        browse_config: apalis_redis::Config,
    },
    Sqlite {
        pool: SqlitePool,
    },
}

impl Probe {
    async fn redis(url: &str) -> Result<Probe> {
        let connection = apalis_redis::connect(url)
            .await
            .map_err(|error| format!("connecting to redis: {error}"))?;
        let config = |name: String| apalis_redis::Config::default().queue(name);
        Ok(Probe::Redis {
            connection,
            config: config(fetch_queue_name(NAMESPACE)),
            browse_config: config(trawl::queue::browse_queue_name(NAMESPACE)),
        })
    }

    /// A lazy pool on the queue file (opened once `Queue::open` has created it).
    fn sqlite(path: &Path) -> Probe {
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .unwrap()
            .busy_timeout(Duration::from_secs(30));
        Probe::Sqlite {
            pool: SqlitePoolOptions::new()
                .max_connections(1)
                .connect_lazy_with(options),
        }
    }

    async fn close(&self) {
        if let Probe::Sqlite { pool } = self {
            pool.close().await;
        }
    }

    /// The Redis server's `used_memory`; `None` on SQLite.
    async fn used_memory(&self) -> Result<Option<u64>> {
        Ok(self
            .info("memory")
            .await?
            .and_then(|info| info_field(&info, "used_memory")?.parse().ok()))
    }

    /// The Redis server's `INFO {section}`; `None` on SQLite.
    async fn info(&self, section: &str) -> Result<Option<String>> {
        let Probe::Redis { connection, .. } = self else {
            return Ok(None);
        };
        ::redis::cmd("INFO")
            .arg(section)
            .query_async(&mut connection.clone())
            .await
            .map(Some)
            .map_err(|error| format!("INFO {section}: {error}"))
    }

    /// `used_memory` and what it is made of (INFO memory, DBSIZE); `None` on SQLite.
    async fn memory_breakdown(&self) -> Result<Option<String>> {
        let (Some(info), Probe::Redis { connection, .. }) = (self.info("memory").await?, self)
        else {
            return Ok(None);
        };
        let keys: u64 = ::redis::cmd("DBSIZE")
            .query_async(&mut connection.clone())
            .await
            .map_err(|error| format!("DBSIZE: {error}"))?;
        let field = |name: &str| info_field(&info, name).unwrap_or("?").to_owned();
        Ok(Some(format!(
            "used_memory {} B (dataset {} B, overhead {} B, scripts {} B for {} cached scripts), \
             {keys} keys",
            field("used_memory"),
            field("used_memory_dataset"),
            field("used_memory_overhead"),
            field("used_memory_scripts"),
            field("number_of_cached_scripts"),
        )))
    }

    /// Resets Redis' command statistics (our own server); nothing on SQLite.
    async fn reset_stats(&self) -> Result<()> {
        if let Probe::Redis { connection, .. } = self {
            let _: () = ::redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query_async(&mut connection.clone())
                .await
                .map_err(|error| format!("CONFIG RESETSTAT: {error}"))?;
        }
        Ok(())
    }

    /// The Redis server's CPU time so far (INFO cpu, user + system), in seconds.
    async fn server_cpu_secs(&self) -> Result<Option<f64>> {
        let Some(info) = self.info("cpu").await? else {
            return Ok(None);
        };
        let field = |name: &str| -> Option<f64> { info_field(&info, name)?.parse().ok() };
        Ok(field("used_cpu_user")
            .zip(field("used_cpu_sys"))
            .map(|(user, system)| user + system))
    }

    /// The commands Redis spent most time on since the last reset (INFO commandstats).
    async fn command_stats(&self) -> Result<Option<String>> {
        let Some(info) = self.info("commandstats").await? else {
            return Ok(None);
        };
        let mut commands: Vec<(String, u64, u64)> = info
            .lines()
            .filter_map(|line| {
                let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
                let stat = |key: &str| -> Option<u64> {
                    stats
                        .split(',')
                        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))?
                        .parse()
                        .ok()
                };
                Some((name.to_owned(), stat("calls")?, stat("usec")?))
            })
            .collect();
        commands.sort_by_key(|(_, _, usec)| std::cmp::Reverse(*usec));
        Ok(Some(
            commands
                .iter()
                .take(3)
                .map(|(name, calls, usec)| {
                    format!(
                        "{name} {calls} calls {:.0} µs/call",
                        *usec as f64 / (*calls).max(1) as f64
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
        ))
    }

    /// How many keys, and bytes (MEMORY USAGE), are under the namespace; `None` on SQLite.
    async fn namespace_keys(&self) -> Result<Option<(u64, u64)>> {
        let Probe::Redis { connection, .. } = self else {
            return Ok(None);
        };
        let mut connection = connection.clone();
        let keys = scan_keys(&mut connection, &format!("{NAMESPACE}:*")).await?;
        let mut bytes = 0;
        for key in &keys {
            bytes += memory_usage(&mut connection, key).await;
        }
        Ok(Some((keys.len() as u64, bytes)))
    }

    /// Jobs waiting to be taken (Redis: scheduled + active; SQLite: `Pending` rows).
    async fn backlog(&self) -> Result<u64> {
        match self {
            Probe::Redis {
                connection, config, ..
            } => {
                let (scheduled, active): (u64, u64) = ::redis::pipe()
                    .cmd("ZCARD")
                    .arg(config.scheduled_jobs_set())
                    .cmd("LLEN")
                    .arg(config.active_jobs_list())
                    .query_async(&mut connection.clone())
                    .await
                    .map_err(|error| format!("counting the backlog: {error}"))?;
                Ok(scheduled + active)
            }
            Probe::Sqlite { pool } => sqlite_count(pool, Some("Pending")).await,
        }
    }

    /// Jobs acknowledged and not yet pruned (Redis: the done set; SQLite: `Done` rows).
    async fn ended(&self) -> Result<u64> {
        match self {
            Probe::Redis {
                connection, config, ..
            } => ::redis::cmd("SCARD")
                .arg(config.done_jobs_set())
                .query_async(&mut connection.clone())
                .await
                .map_err(|error| format!("counting done jobs: {error}")),
            Probe::Sqlite { pool } => sqlite_count(pool, Some("Done")).await,
        }
    }

    /// What is left of jobs in the queue after a run (empty when it is clean).
    async fn left_in_queue(&self) -> Result<Vec<String>> {
        let mut left = Vec::new();
        match self {
            Probe::Redis {
                connection,
                config,
                browse_config,
            } => {
                let mut connection = connection.clone();
                for config in [config, browse_config] {
                    let counts: [(&str, String, &str); 6] = [
                        ("active", config.active_jobs_list(), "LLEN"),
                        ("scheduled", config.scheduled_jobs_set(), "ZCARD"),
                        ("done", config.done_jobs_set(), "SCARD"),
                        ("dead", config.dead_jobs_set(), "SCARD"),
                        ("failed", config.failed_jobs_set(), "ZCARD"),
                        ("data", config.job_data_hash(), "HLEN"),
                    ];
                    for (what, key, command) in counts {
                        // `failed` may be of another type in another apalis version.
                        let count: u64 = ::redis::cmd(command)
                            .arg(&key)
                            .query_async(&mut connection)
                            .await
                            .unwrap_or(0);
                        if count > 0 {
                            left.push(format!("{count} in {what} ({key})"));
                        }
                    }
                    let metas =
                        scan_keys(&mut connection, &format!("{}:*", config.job_meta_hash()))
                            .await?;
                    if !metas.is_empty() {
                        left.push(format!("{} task metadata hashes", metas.len()));
                    }
                    let mut inflight = 0_u64;
                    for key in scan_keys(
                        &mut connection,
                        &format!("{}:*", config.inflight_jobs_set()),
                    )
                    .await?
                    {
                        inflight += ::redis::cmd("SCARD")
                            .arg(&key)
                            .query_async::<u64>(&mut connection)
                            .await
                            .unwrap_or(0);
                    }
                    if inflight > 0 {
                        left.push(format!("{inflight} in in-flight sets"));
                    }
                }
            }
            Probe::Sqlite { pool } => {
                let rows: Vec<(String, i64)> =
                    sqlx::query_as("SELECT status, COUNT(*) FROM Jobs GROUP BY status")
                        .fetch_all(pool)
                        .await
                        .map_err(|error| format!("counting queue rows: {error}"))?;
                for (status, count) in rows {
                    left.push(format!("{count} {status} rows"));
                }
            }
        }
        Ok(left)
    }

    /// Everything the queue keeps after all runs: Redis keys under the namespace grouped by
    /// pattern (ids and worker names as `*`), or SQLite rows per table.
    async fn remains(&self) -> Result<String> {
        match self {
            Probe::Redis { connection, .. } => {
                let mut connection = connection.clone();
                let keys = scan_keys(&mut connection, &format!("{NAMESPACE}:*")).await?;
                let mut patterns: BTreeMap<String, (u64, u64)> = BTreeMap::new();
                for key in &keys {
                    let pattern = key
                        .split(':')
                        .map(|part| {
                            if part.starts_with("trawl-")
                                || (part.len() == 26 && part.chars().all(|c| c.is_alphanumeric()))
                            {
                                "*"
                            } else {
                                part
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(":");
                    let bytes = memory_usage(&mut connection, key).await;
                    let entry = patterns.entry(pattern).or_default();
                    entry.0 += 1;
                    entry.1 += bytes;
                }
                if patterns.is_empty() {
                    return Ok("no keys".to_owned());
                }
                Ok(patterns
                    .into_iter()
                    .map(|(pattern, (count, bytes))| format!("{pattern} x{count} ({bytes} B)"))
                    .collect::<Vec<_>>()
                    .join(", "))
            }
            Probe::Sqlite { pool } => {
                let jobs = sqlite_count(pool, None).await?;
                let (workers,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM Workers")
                    .fetch_one(pool)
                    .await
                    .map_err(|error| format!("counting worker rows: {error}"))?;
                Ok(format!("{jobs} Jobs rows, {workers} Workers rows"))
            }
        }
    }
}

/// The value of the field `name` in the text of an INFO command, trimmed.
fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Counts the `Jobs` rows with `status`, or all of them.
async fn sqlite_count(pool: &SqlitePool, status: Option<&str>) -> Result<u64> {
    let query = match status {
        Some(status) => sqlx::query_as("SELECT COUNT(*) FROM Jobs WHERE status = ?").bind(status),
        None => sqlx::query_as("SELECT COUNT(*) FROM Jobs"),
    };
    let (count,): (i64,) = query
        .fetch_one(pool)
        .await
        .map_err(|error| format!("counting queue rows: {error}"))?;
    Ok(count.max(0) as u64)
}

/// The bytes `key` takes in Redis (MEMORY USAGE); 0 when unknown.
async fn memory_usage(connection: &mut ConnectionManager, key: &str) -> u64 {
    ::redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .query_async::<Option<u64>>(connection)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// Every key matching `pattern` (SCAN, not KEYS).
async fn scan_keys(connection: &mut ConnectionManager, pattern: &str) -> Result<Vec<String>> {
    let mut cursor = 0_u64;
    let mut keys = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = ::redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1_000)
            .query_async(connection)
            .await
            .map_err(|error| format!("SCAN {pattern}: {error}"))?;
        keys.extend(batch);
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}

/// The version `redis-server --version` reports.
fn redis_version(binary: &Path) -> String {
    Command::new(binary)
        .arg("--version")
        .output()
        .ok()
        .and_then(|output| {
            String::from_utf8_lossy(&output.stdout)
                .split_whitespace()
                .find_map(|word| word.strip_prefix("v=").map(str::to_owned))
        })
        .unwrap_or_else(|| "(unknown version)".to_owned())
}
