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
    reason = "the queue benchmark's report has no verdicts, load average or disk figures"
)]
mod figures;
#[path = "common/knobs.rs"]
#[allow(
    dead_code,
    reason = "the queue benchmark's knobs are positive counts and lists"
)]
mod knobs;
#[path = "common/proc_status.rs"]
mod proc_status;
#[path = "common/redis.rs"]
mod redis_server;
#[path = "common/server.rs"]
mod server;

#[path = "queue/handler.rs"]
mod handler;
#[path = "queue/own_process.rs"]
mod own_process;
#[path = "queue/probe.rs"]
mod probe;
#[path = "queue/report.rs"]
mod report;
#[path = "queue/run.rs"]
mod run;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use knobs::{arg_number, env_list, env_positive};
use own_process::peak_rss_mb;
use probe::Probe;
use redis_server::RedisServer;
use report::report;
use run::run_once;

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
