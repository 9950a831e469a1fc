//! One measured run of an engine and a pool shape: push the envelopes, start the workers the way
//! `trawl::runner` does, wait until the backend shows every job acknowledged, stop, prune and
//! check that each job ran once and nothing is left. It prints the run's line; it does not
//! aggregate runs (see `report`).

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use apalis::prelude::*;
use trawl::queue::{Envelope, Queue, Storage};
use trawl_workers::job::{FetchJob, Job};

use crate::handler::{StopSignal, Tally, handle, worker_name};
use crate::own_process::{peak_rss_mb, process_cpu_secs, reset_peak_rss};
use crate::probe::Probe;
use crate::redis_server::RedisServer;
use crate::report::mb;
use crate::{Engine, NAMESPACE, PROBE_EVERY, RedisMemory, Result, Run, Settings, Shape};

#[allow(clippy::too_many_arguments)]
pub(crate) async fn run_once(
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
