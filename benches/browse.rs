//! Browser benchmark: the browse pool on the system Chromium against the fixture server on
//! 127.0.0.1 (addressed as `site.test`, dialled to loopback, so the egress proxy runs the
//! default policy), loopback only.
//!
//! ```text
//! cargo bench --bench browse
//! TRAWL_BENCH_RENDERS=300 cargo bench --bench browse      # a shorter memory run
//! TRAWL_BENCH_MEMORY_ONLY=1 cargo bench --bench browse    # only the memory run (4.)
//! TRAWL_BENCH_ACTIONS_ONLY=1 cargo bench --bench browse   # only the session actions (3.)
//! ```
//!
//! 1. Cold start: `Pool::warm` (Chromium launched, CDP connected) for the first browser of the
//!    process, then the median of 3 more launches (each after `Pool::shutdown`).
//! 2. Render throughput: 200 renders of fixture articles (`render: true`: load, network idle,
//!    extraction) with the pool at its default size (4 contexts, 4 renders in flight); median
//!    of 3 runs, in pages/s.
//! 3. Session action latency: one session context (`Pool::lease_session`) on the fixture's
//!    form page; 100 rounds of `click` (a checkbox), `type` (the email field), `snapshot` and
//!    `click` by `{role, name}` (the Sign in button's neighbour, the checkbox), each timed on
//!    its own; p50 and p99 per action.
//! 4. Memory: `TRAWL_BENCH_RENDERS` (default 1,000) renders, 4 in flight, with the default
//!    recycling (every 200 contexts or above 2,048 MB); the memory of the browser's whole
//!    process tree (PSS: shared pages counted once) is sampled every 100 renders. Prints the
//!    samples, the largest, and its ratio to the first sample (bounded: recycling keeps it
//!    flat).
//!
//! Needs `/usr/bin/chromium` (`apt-get install chromium`). Prints the machine first and a
//! summary table last.

// A benchmark reads its own knobs from the environment; the rule that only config.rs reads
// the environment is about the application.
#![allow(clippy::disallowed_methods)]

mod common;
#[path = "common/quantile.rs"]
mod quantile;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use testkit::FixtureServer;
use testkit::browser::site_dns;
use trawl_workers::browse::{self, Action, Credentials, Pool, Profile, render};
use trawl_workers::fetch;
use trawl_workers::job::{FetchJob, Render};
use trawl_workers::web::{self, Dns};

use quantile::percentile;

async fn new_pool(dns: &Dns) -> Pool {
    Pool::new(
        browse::Config::default(),
        Arc::new(web::Policy::default()),
        dns.clone(),
    )
    .await
    .expect("pool starts")
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1_000.0
}

/// Renders `count` articles, `in_flight` at a time; returns the elapsed time and failures.
async fn renders(
    pool: &Pool,
    deps: &fetch::Deps,
    origin: &str,
    count: u64,
    in_flight: usize,
    offset: u64,
    mut samples: Option<&mut Vec<(u64, u64)>>,
) -> (Duration, u64) {
    let started = Instant::now();
    let mut failures = 0;
    let mut done = 0;
    let mut stream = futures_util::stream::iter(0..count)
        .map(|n| {
            let job = FetchJob {
                render: Render::Flag(true),
                ..FetchJob::new(format!("{origin}/article/{}", offset + n))
            };
            // Each render on its own task, as the runner runs jobs: a render future that
            // holds the pool's lock must not wait for this loop (which samples the memory,
            // taking that lock) to poll it again.
            let (pool, deps) = (pool.clone(), deps.clone());
            tokio::spawn(async move { render::render(&pool, &job, &deps).await })
        })
        .buffer_unordered(in_flight);
    while let Some(result) = stream.next().await {
        let result = result.unwrap_or_else(|error| {
            Err(trawl_workers::job::JobError::new(
                trawl_workers::job::ErrorCode::Internal,
                format!("render task failed: {error}"),
            ))
        });
        if let Err(error) = result {
            failures += 1;
            if failures <= 3 {
                eprintln!("render failed: {error}");
            }
        }
        done += 1;
        if done % 100 == 0
            && let Some(samples) = samples.as_deref_mut()
        {
            let rss = pool.memory().await;
            // As it goes: a long run shows its progress.
            println!(
                "after {done} renders: browser tree memory (PSS) {} MB ({:.0} s)",
                rss / (1 << 20),
                started.elapsed().as_secs_f64()
            );
            samples.push((done, rss));
        }
    }
    (started.elapsed(), failures)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    // Logs on stderr when asked (TRAWL_LOG=trawl_workers=debug), as the binary does.
    if let Ok(filter) = std::env::var("TRAWL_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    common::print_machine();
    let fixture = FixtureServer::start().await.expect("fixture starts");
    let origin = format!("http://site.test:{}", fixture.addr().port());
    let dns = site_dns();
    let client = web::Client::with_dns(web::Config::default(), web::Policy::default(), dns.clone())
        .expect("client");
    let deps = fetch::Deps::new(client, fetch::Config::default()).expect("no providers");
    let mut summary: Vec<(String, String)> = Vec::new();

    // 1. Cold start.
    let pool = new_pool(&dns).await;
    let started = Instant::now();
    pool.warm().await.expect("chromium starts");
    let first = started.elapsed();
    let mut later = Vec::new();
    for _ in 0..3 {
        pool.shutdown().await;
        let started = Instant::now();
        pool.warm().await.expect("chromium starts");
        later.push(ms(started.elapsed()));
    }
    let later = median(&mut later);
    println!(
        "cold start: first browser {:.0} ms, then median {later:.0} ms (3 launches)",
        ms(first)
    );
    summary.push((
        "cold start, first".to_owned(),
        format!("{:.0} ms", ms(first)),
    ));
    summary.push((
        "cold start, later (median)".to_owned(),
        format!("{later:.0} ms"),
    ));

    // 2. Render throughput at the default pool size.
    let in_flight = pool.config().max_contexts;
    let memory_only = std::env::var_os("TRAWL_BENCH_MEMORY_ONLY").is_some();
    let actions_only = std::env::var_os("TRAWL_BENCH_ACTIONS_ONLY").is_some();
    if actions_only {
        actions(&pool, &origin, &mut summary).await;
        pool.shutdown().await;
        print_summary(&summary);
        return;
    }
    let mut rates = Vec::new();
    for run in 0..if memory_only { 0 } else { 3 } {
        let (elapsed, failures) =
            renders(&pool, &deps, &origin, 200, in_flight, run * 1_000, None).await;
        let rate = 200.0 / elapsed.as_secs_f64();
        println!(
            "render run {}: 200 pages in {:.1} s = {rate:.1} pages/s ({failures} failed)",
            run + 1,
            elapsed.as_secs_f64()
        );
        rates.push(rate);
    }
    if !memory_only {
        let rate = median(&mut rates);
        summary.push((
            format!("render throughput ({in_flight} contexts, median of 3)"),
            format!("{rate:.1} pages/s"),
        ));
        actions(&pool, &origin, &mut summary).await;
    }

    // 4. Memory over many renders.
    memory(&pool, &deps, &origin, in_flight, &mut summary).await;
    pool.shutdown().await;
    print_summary(&summary);
}

fn print_summary(summary: &[(String, String)]) {
    println!("\nsummary");
    for (name, value) in summary {
        println!("  {name:<48} {value}");
    }
}

/// 3. Session action latency: click, type and snapshot on the form page.
async fn actions(pool: &Pool, origin: &str, summary: &mut Vec<(String, String)>) {
    let mut lease = pool
        .lease_session(Profile::Desktop, &Credentials::default())
        .await
        .expect("lease");
    let goto = Action::Goto {
        url: format!("{origin}/browser/form"),
        wait_until: None,
    };
    assert!(
        browse::actions::run(&mut lease, &goto)
            .await
            .expect("runs")
            .ok
    );
    let click = Action::Click {
        index: None,
        selector: Some("input[name=remember]".to_owned()),
        role: None,
        name: None,
        x: None,
        y: None,
    };
    let type_email = Action::Type {
        index: None,
        selector: Some("#email".to_owned()),
        role: None,
        name: None,
        text: "ada@example.com".to_owned(),
        submit: false,
        secret: false,
    };
    let click_by_role = Action::Click {
        index: None,
        selector: None,
        role: Some("checkbox".to_owned()),
        name: Some("Remember me".to_owned()),
        x: None,
        y: None,
    };
    let mut times: [(&str, &Action, Vec<Duration>); 4] = [
        ("click", &click, Vec::new()),
        ("type", &type_email, Vec::new()),
        ("snapshot", &Action::Snapshot, Vec::new()),
        ("click {role, name}", &click_by_role, Vec::new()),
    ];
    for _ in 0..100 {
        for (name, action, samples) in times.iter_mut() {
            let started = Instant::now();
            let outcome = browse::actions::run(&mut lease, action)
                .await
                .expect("runs");
            assert!(outcome.ok, "{name}: {outcome:?}");
            samples.push(started.elapsed());
        }
    }
    lease.close().await;
    for (name, _, samples) in times.iter_mut() {
        samples.sort();
        let p50 = percentile(samples, 0.50);
        let p99 = percentile(samples, 0.99);
        println!(
            "action {name}: p50 {:.1} ms, p99 {:.1} ms (100 runs)",
            ms(p50),
            ms(p99)
        );
        summary.push((
            format!("action {name} p50 / p99"),
            format!("{:.1} / {:.1} ms", ms(p50), ms(p99)),
        ));
    }
}

/// 4. Memory over many renders.
async fn memory(
    pool: &Pool,
    deps: &fetch::Deps,
    origin: &str,
    in_flight: usize,
    summary: &mut Vec<(String, String)>,
) {
    let count: u64 = std::env::var("TRAWL_BENCH_RENDERS")
        .ok()
        .and_then(|value| value.parse().ok())
        .unwrap_or(1_000);
    let mut samples: Vec<(u64, u64)> = Vec::new();
    let before = pool.stats();
    let (elapsed, failures) = renders(
        pool,
        deps,
        origin,
        count,
        in_flight,
        10_000,
        Some(&mut samples),
    )
    .await;
    let after = pool.stats();
    let first_rss = samples.first().map_or(1, |(_, rss)| (*rss).max(1));
    let max_rss = samples.iter().map(|(_, rss)| *rss).max().unwrap_or(0);
    println!(
        "{count} renders in {:.1} s ({failures} failed), {} browser restarts for age or memory",
        elapsed.as_secs_f64(),
        after.recycles - before.recycles
    );
    summary.push((
        format!("browser tree memory (PSS) over {count} renders, max"),
        format!(
            "{} MB ({:.2}x the first sample)",
            max_rss / (1 << 20),
            max_rss as f64 / first_rss as f64
        ),
    ));
}
