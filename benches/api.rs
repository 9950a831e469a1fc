//! API benchmark: cached reads under load. Starts the release `trawl serve` on a free loopback
//! port (its own data directory), stores one article page through `POST /v1/fetch` (from the
//! fixture server, in this process), then drives `wrk` (Debian package) against
//! `POST /v1/fetch` served from the cache and `GET /v1/pages`, three runs each, and prints
//! requests/s and latency percentiles (medians of the runs) against the target of issue 3
//! (>= 5,000 cached reads/s with p99 < 20 ms on 2 cores). wrk runs on the same machine and
//! takes CPU from the server: the figures are a floor.
//!
//! Run: `cargo bench --bench api`. Knobs: `TRAWL_BENCH_SECONDS` (per run, default 10),
//! `TRAWL_BENCH_CONNECTIONS` (default 64).

// A benchmark reads its own knobs from the environment; the rule that only config.rs reads
// the environment is about the application.
#![allow(clippy::disallowed_methods)]

mod common;

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testkit::FixtureServer;

const TARGET_RPS: f64 = 5_000.0;
const TARGET_P99_MS: f64 = 20.0;
const RUNS: usize = 3;

/// Kills the server it holds when dropped, by its PID.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

struct Load {
    rps: f64,
    p50_ms: f64,
    p99_ms: f64,
    errors: u64,
}

fn main() {
    if Command::new("wrk").arg("--version").output().is_err() {
        eprintln!("api bench: wrk is missing (apt-get install wrk)");
        std::process::exit(2);
    }
    let seconds: u64 = std::env::var("TRAWL_BENCH_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10);
    let connections: u64 = std::env::var("TRAWL_BENCH_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime for the fixture server");
    let site = runtime
        .block_on(FixtureServer::start())
        .expect("fixture server");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port();
    let base = format!("http://127.0.0.1:{port}");
    let _server = Server(
        Command::new(env!("CARGO_BIN_EXE_trawl"))
            .arg("--data-dir")
            .arg(dir.path())
            .args([
                "serve",
                "--allow-private-network",
                "--bind",
                &format!("127.0.0.1:{port}"),
            ])
            .env("TRAWL_LOG", "error")
            // wrk is one client with many connections and requests: lift the per-client limits.
            .env("TRAWL_API__MAX_CONNECTIONS_PER_CLIENT", "100000")
            .env("TRAWL_API__RATE_LIMIT_PER_SECOND", "0")
            .env("TRAWL_API__MAX_REQUESTS_IN_FLIGHT", "0")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("trawl serve starts"),
    );
    wait_for(port);
    let article = site.url("/article/1");
    let body = format!("{{\"url\": \"{article}\", \"max_chars\": 2000}}");
    let seeded = Command::new("python3")
        .args(["-c", "import sys, urllib.request; r = urllib.request.urlopen(urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), headers={'content-type': 'application/json'})); print(r.status)"])
        .arg(format!("{base}/v1/fetch"))
        .arg(&body)
        .output()
        .expect("python3 seeds the page");
    assert!(
        String::from_utf8_lossy(&seeded.stdout).trim() == "200",
        "seeding failed: {seeded:?}"
    );

    common::print_machine();
    println!(
        "server: release trawl serve on {base}; wrk: 2 threads, {connections} connections, {seconds} s per run, {RUNS} runs"
    );
    let script = dir.path().join("fetch.lua");
    let mut lua = std::fs::File::create(&script).expect("lua script");
    writeln!(
        lua,
        "wrk.method = \"POST\"\nwrk.body = '{body}'\nwrk.headers[\"Content-Type\"] = \"application/json\""
    )
    .expect("lua script written");
    let encoded: String = url::form_urlencoded::byte_serialize(article.as_bytes()).collect();
    let cases = [
        (
            "POST /v1/fetch (cached)",
            format!("{base}/v1/fetch"),
            Some(script.as_path()),
        ),
        (
            "GET /v1/pages (lines 1-40)",
            format!("{base}/v1/pages?url={encoded}&from=1&to=40"),
            None,
        ),
    ];
    for (name, url, lua) in cases {
        let mut runs: Vec<Load> = (0..RUNS)
            .map(|_| wrk(&url, lua, seconds, connections))
            .collect();
        let errors: u64 = runs.iter().map(|run| run.errors).sum();
        runs.sort_by(|a, b| a.rps.total_cmp(&b.rps));
        let rps = runs[RUNS / 2].rps;
        let mut p99s: Vec<f64> = runs.iter().map(|run| run.p99_ms).collect();
        p99s.sort_by(f64::total_cmp);
        let mut p50s: Vec<f64> = runs.iter().map(|run| run.p50_ms).collect();
        p50s.sort_by(f64::total_cmp);
        let p99 = p99s[RUNS / 2];
        println!(
            "{name:<28} {rps:>8.0} req/s (runs: {}), p50 {:.2} ms, p99 {p99:.2} ms, {errors} errors; vs target: {:.2}x req/s, p99 {:.2}x the limit",
            runs.iter()
                .map(|run| format!("{:.0}", run.rps))
                .collect::<Vec<_>>()
                .join(", "),
            p50s[RUNS / 2],
            rps / TARGET_RPS,
            p99 / TARGET_P99_MS,
        );
    }
}

fn wait_for(port: u16) {
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "trawl serve did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wrk(url: &str, script: Option<&Path>, seconds: u64, connections: u64) -> Load {
    let mut command = Command::new("wrk");
    command
        .args([
            "--latency",
            "-t",
            "2",
            "-c",
            &connections.to_string(),
            "-d",
            &format!("{seconds}s"),
        ])
        .arg(url);
    if let Some(script) = script {
        command.arg("-s").arg(script);
    }
    let output = command.output().expect("wrk runs");
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let field = |prefix: &str| -> Option<String> {
        text.lines()
            .map(str::trim)
            .find(|line| line.starts_with(prefix))
            .and_then(|line| line.split_whitespace().nth(1))
            .map(str::to_owned)
    };
    let errors = text
        .lines()
        .find(|line| line.contains("Non-2xx or 3xx responses"))
        .and_then(|line| line.split(':').nth(1))
        .and_then(|count| count.trim().parse().ok())
        .unwrap_or(0);
    Load {
        rps: field("Requests/sec:")
            .and_then(|value| value.parse().ok())
            .unwrap_or(0.0),
        p50_ms: field("50%").map(|value| millis(&value)).unwrap_or(f64::NAN),
        p99_ms: field("99%").map(|value| millis(&value)).unwrap_or(f64::NAN),
        errors,
    }
}

/// Parses wrk's durations (`812.00us`, `1.23ms`, `2.01s`) into milliseconds.
fn millis(value: &str) -> f64 {
    let (number, factor) = if let Some(number) = value.strip_suffix("us") {
        (number, 0.001)
    } else if let Some(number) = value.strip_suffix("ms") {
        (number, 1.0)
    } else if let Some(number) = value.strip_suffix('s') {
        (number, 1_000.0)
    } else {
        (value, 1.0)
    };
    number
        .parse::<f64>()
        .map_or(f64::NAN, |number| number * factor)
}
