//! Pipeline benchmark: `trawl run` end to end (fetch, extract, store, markdown out) over a
//! generated local site served by nginx on 127.0.0.1.
//!
//! ```text
//! cargo bench --bench pipeline                      # 5,000 pages, 3 timed runs
//! cargo bench --bench pipeline -- 10000             # another site size
//! TRAWL_BENCH_PAGES=2000 TRAWL_BENCH_RUNS=5 cargo bench --bench pipeline
//! TRAWL_BENCH_PROFILE=1 cargo bench --bench pipeline   # then a perf profile by phase
//! ```
//!
//! Needs nginx (`apt-get install nginx`) and GNU time (`/usr/bin/time`); the profile also
//! needs `perf` (skipped with a note when missing). Each run uses a fresh data directory and
//! `--cache-ttl 0`; every run's data and output stay on disk until the end (about 120 KB per
//! page per run). Prints the machine, per-run and median pages/s, CPU ms per page
//! ((user + sys) / pages) and peak RSS, and the ratio of each median to its target
//! (issue 2: ≥ 400 pages/s, ≤ 2.5 ms CPU per page, < 300 MB peak RSS).
//!
//! Environment: `TRAWL_BENCH_PAGES` (site size), `TRAWL_BENCH_RUNS` (timed runs, default 3),
//! `TRAWL_BENCH_PROFILE=1` (profile after the timed runs), `TRAWL_BENCH_CALLGRAPH=dwarf|fp`
//! (perf unwinding for the phase breakdown, default dwarf: the release build has no frame
//! pointers), `TRAWL_BENCH_TIMEOUT` (seconds one trawl run may take, default 600),
//! `TRAWL_BENCH_KEEP=1` (keep the temporary directory and print its path),
//! `TRAWL_BENCH_BIN=PATH` (measure another trawl binary than this build's),
//! `TRAWL_BENCH_PERF_DATA=PATH` (only analyse a kept `profile/perf.data` by phase).

// A benchmark reads its own knobs from the environment; trawl's configuration rule (figment only)
// is for the application.
#![allow(missing_docs, clippy::unwrap_used, clippy::disallowed_methods)]

use std::collections::HashMap;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

#[path = "common/figures.rs"]
mod figures;
#[path = "common/knobs.rs"]
#[allow(dead_code, reason = "the pipeline benchmark has no list knob")]
mod knobs;
#[path = "common/nginx.rs"]
#[allow(
    dead_code,
    reason = "the access log and origin are for the crawl benchmark"
)]
mod nginx;
#[path = "common/process.rs"]
mod process;
#[path = "common/profile.rs"]
mod profile;
#[path = "common/server.rs"]
mod server;

use figures::{against_target, load_average, median};
use knobs::{arg_number, env_flag, env_number, env_positive};
use nginx::{Nginx, find_in_path};
use process::{Group, Usage, read_usage, tail, timed_trawl, trawl_bin};
use profile::{Callgraph, analyse, record_args};

type Result<T> = std::result::Result<T, String>;

const DEFAULT_PAGES: u64 = 5_000;

const TARGET_PAGES_PER_SEC: f64 = 400.0;
const TARGET_CPU_MS_PER_PAGE: f64 = 2.5;
const TARGET_RSS_MB: f64 = 300.0;

fn main() -> ExitCode {
    match bench() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("pipeline bench failed: {error}");
            ExitCode::FAILURE
        }
    }
}

struct Settings {
    pages: u64,
    runs: usize,
    profile: bool,
    callgraph: Callgraph,
    timeout: Duration,
    keep: bool,
}

fn settings() -> Result<Settings> {
    let mut pages = env_number("TRAWL_BENCH_PAGES", DEFAULT_PAGES)?;
    // `cargo bench` passes `--bench`; a bare number is the site size.
    if let Some(n) = arg_number() {
        pages = n;
    }
    let profile =
        env_flag("TRAWL_BENCH_PROFILE") || std::env::args().skip(1).any(|arg| arg == "--profile");
    if pages == 0 {
        return Err("the site needs at least one page".to_owned());
    }
    let runs = env_positive("TRAWL_BENCH_RUNS", 3)?;
    let timeout = Duration::from_secs(env_number("TRAWL_BENCH_TIMEOUT", 600)?);
    let callgraph = Callgraph::from_env()?;
    Ok(Settings {
        pages,
        runs,
        profile,
        callgraph,
        timeout,
        keep: env_flag("TRAWL_BENCH_KEEP"),
    })
}

fn bench() -> Result<()> {
    if let Some(data) = std::env::var_os("TRAWL_BENCH_PERF_DATA") {
        // Only analyse a kept profile (see TRAWL_BENCH_KEEP).
        let perf = find_in_path("perf").ok_or("perf is not installed")?;
        println!("== profile of {} ==", Path::new(&data).display());
        return analyse(&perf, Path::new(&data), Some(MAIN_THREAD));
    }
    let settings = settings()?;
    check_tools()?;
    nginx::with_site_root("trawl-bench-", settings.keep, |root| {
        bench_in(&settings, root)
    })
}

fn check_tools() -> Result<()> {
    if find_in_path("nginx").is_none() {
        return Err(
            "nginx not found: install it with `apt-get update && apt-get install -y nginx`"
                .to_owned(),
        );
    }
    process::check_gnu_time_and_trawl()
}

fn bench_in(settings: &Settings, root: &Path) -> Result<()> {
    let n = settings.pages;
    let started = Instant::now();
    let site_bytes = write_site(root, n)?;
    eprintln!(
        "generated {n} pages ({:.1} MB, mean {:.1} KB) in {:.1} s",
        site_bytes as f64 / 1e6,
        site_bytes as f64 / n as f64 / 1e3,
        started.elapsed().as_secs_f64()
    );

    let nginx = Nginx::start(
        root,
        &nginx::Options {
            ready_path: Some("/site/0".to_owned()),
            ..nginx::Options::default()
        },
    )?;
    let urls = root.join("urls.txt");
    {
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(&urls).map_err(|e| format!("creating urls.txt: {e}"))?,
        );
        for i in 0..n {
            writeln!(file, "http://127.0.0.1:{}/site/{i}", nginx.port)
                .map_err(|e| format!("writing urls.txt: {e}"))?;
        }
        file.flush().map_err(|e| format!("writing urls.txt: {e}"))?;
    }

    let load_before = load_average();
    let mut runs = Vec::with_capacity(settings.runs);
    for i in 1..=settings.runs {
        let run = timed_run(settings, root, &urls, i)?;
        eprintln!(
            "run {i}: {:.1} s wall, {:.0} pages/s, {:.2} ms CPU/page, {:.0} MB peak RSS, {}/{} succeeded",
            run.wall,
            run.pages_per_sec(n),
            run.cpu_ms_per_page(n),
            run.rss_mb(),
            run.succeeded,
            n
        );
        runs.push(run);
    }
    let load_after = load_average();
    report(settings, site_bytes, &runs, &load_before, &load_after);

    if settings.profile {
        profile(settings, root, &urls)?;
    }
    drop(nginx);
    Ok(())
}

/// Writes `site/{i}` for every page; returns the total size.
fn write_site(root: &Path, n: u64) -> Result<u64> {
    let site = root.join("www").join("site");
    std::fs::create_dir_all(&site).map_err(|e| format!("creating {}: {e}", site.display()))?;
    let mut total = 0_u64;
    for i in 0..n {
        let page = testkit::site_page(i);
        total += page.len() as u64;
        let path = site.join(i.to_string());
        std::fs::write(&path, page).map_err(|e| format!("writing {}: {e}", path.display()))?;
    }
    Ok(total)
}

struct Run {
    wall: f64,
    user: f64,
    sys: f64,
    rss_kb: u64,
    succeeded: u64,
}

impl Run {
    fn pages_per_sec(&self, n: u64) -> f64 {
        n as f64 / self.wall.max(1e-9)
    }
    fn cpu_ms_per_page(&self, n: u64) -> f64 {
        (self.user + self.sys) * 1e3 / n as f64
    }
    fn rss_mb(&self) -> f64 {
        self.rss_kb as f64 / 1024.0
    }
}

fn trawl_args(data: &Path, urls: &Path, out: &Path) -> Vec<std::ffi::OsString> {
    let mut args: Vec<std::ffi::OsString> = vec!["--data-dir".into(), data.into()];
    for arg in ["run", "--quiet", "--allow-private-network", "--file"] {
        args.push(arg.into());
    }
    args.push(urls.into());
    args.push("--out".into());
    args.push(out.into());
    args.push("--cache-ttl".into());
    args.push("0".into());
    args
}

fn timed_run(settings: &Settings, root: &Path, urls: &Path, i: usize) -> Result<Run> {
    let dir = root.join(format!("run{i}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let (data, out) = (dir.join("data"), dir.join("out"));
    let time_file = dir.join("time.txt");
    let mut command = timed_trawl(&time_file);
    command.args(trawl_args(&data, urls, &out));
    let (status, stdout, stderr) = run_bounded(command, &dir, settings.timeout)?;
    if !status {
        return Err(format!(
            "run {i}: trawl failed\n--- stdout ---\n{}\n--- stderr ---\n{}",
            tail(&stdout, 40),
            tail(&stderr, 40)
        ));
    }
    let Usage {
        wall,
        user,
        sys,
        rss_kb,
    } = read_usage(&time_file)?;
    if !stderr.trim().is_empty() {
        eprintln!("run {i}: trawl stderr:\n{}", tail(&stderr, 20));
    }
    let last_stdout = stdout.lines().rev().take(3).collect::<Vec<_>>();
    for line in last_stdout.iter().rev() {
        eprintln!("run {i}: trawl: {line}");
    }

    let (lines, succeeded, errors) = check_output(&out.join("pages.jsonl"))?;
    let n = settings.pages;
    if lines != n {
        return Err(format!(
            "run {i}: pages.jsonl has {lines} lines for {n} URLs (errors: {errors:?})"
        ));
    }
    if succeeded != n {
        eprintln!(
            "\n!!!!! run {i}: ONLY {succeeded} OF {n} PAGES SUCCEEDED; errors by code: {errors:?} !!!!!\n"
        );
    }
    let data_mb = figures::dir_size(&data) as f64 / 1e6;
    eprintln!(
        "run {i}: data dir {data_mb:.1} MB, out dir {:.1} MB",
        figures::dir_size(&out) as f64 / 1e6
    );
    // The run's files stay until the end: deleting thousands of files just before the next
    // run makes ext4 spend that run's CPU on inode allocation (`recently_deleted`), which a
    // user writing into a fresh directory would not pay.
    Ok(Run {
        wall,
        user,
        sys,
        rss_kb,
        succeeded,
    })
}

/// Runs `command` in its own process group with stdout and stderr to files in `dir`; kills
/// the group after `limit`. Returns (success, stdout, stderr).
fn run_bounded(
    mut command: Command,
    dir: &Path,
    limit: Duration,
) -> Result<(bool, String, String)> {
    let mut group = Group::spawn(&mut command, dir, None)?;
    let status = match group.wait_until(Instant::now() + limit, || {}) {
        Ok(Some(status)) => status,
        Ok(None) => {
            group.kill();
            return Err(format!(
                "{command:?} did not finish within {limit:?} (TRAWL_BENCH_TIMEOUT); killed.\n--- stderr ---\n{}",
                tail(&group.stderr(), 40)
            ));
        }
        Err(e) => return Err(format!("waiting for {command:?}: {e}")),
    };
    Ok((status.success(), group.stdout(), group.stderr()))
}

/// Returns (lines, succeeded, errors by code) of a pages.jsonl.
fn check_output(path: &Path) -> Result<(u64, u64, HashMap<String, u64>)> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let (mut lines, mut succeeded) = (0, 0);
    let mut errors: HashMap<String, u64> = HashMap::new();
    for line in text.lines().filter(|line| !line.trim().is_empty()) {
        lines += 1;
        let value: serde_json::Value = serde_json::from_str(line)
            .map_err(|e| format!("{}: line {lines} is not JSON: {e}", path.display()))?;
        match value.get("error") {
            None | Some(serde_json::Value::Null) => succeeded += 1,
            Some(error) => {
                let code = error["code"].as_str().unwrap_or("?").to_owned();
                *errors.entry(code).or_default() += 1;
            }
        }
    }
    Ok((lines, succeeded, errors))
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find(|line| line.starts_with("model name"))
                .and_then(|line| line.split_once(':'))
                .map(|(_, model)| model.trim().to_owned())
        })
        .unwrap_or_else(|| "?".to_owned())
}

fn report(settings: &Settings, site_bytes: u64, runs: &[Run], before: &str, after: &str) {
    let n = settings.pages;
    let cores = std::thread::available_parallelism().map_or(0, |c| c.get());
    let mut s = String::new();
    let _ = writeln!(s, "\n== trawl pipeline benchmark ==");
    let _ = writeln!(
        s,
        "machine: {cores} cores, {}; load average before {before}, after {after}",
        cpu_model()
    );
    let _ = writeln!(
        s,
        "site: {n} pages, {:.1} MB (mean {:.1} KB), nginx on 127.0.0.1; trawl {}",
        site_bytes as f64 / 1e6,
        site_bytes as f64 / n as f64 / 1e3,
        trawl_bin().display()
    );
    let _ = writeln!(
        s,
        "command: trawl --data-dir <fresh> run --quiet --allow-private-network --file urls.txt --out <dir> --cache-ttl 0\n"
    );
    let _ = writeln!(
        s,
        "{:<8} {:>8} {:>8} {:>8} {:>8} {:>10} {:>12} {:>12}",
        "run", "wall s", "user s", "sys s", "pages/s", "CPU ms/pg", "peak RSS MB", "succeeded"
    );
    for (i, run) in runs.iter().enumerate() {
        let _ = writeln!(
            s,
            "{:<8} {:>8.2} {:>8.2} {:>8.2} {:>8.0} {:>10.2} {:>12.0} {:>12}",
            i + 1,
            run.wall,
            run.user,
            run.sys,
            run.pages_per_sec(n),
            run.cpu_ms_per_page(n),
            run.rss_mb(),
            format!("{}/{n}", run.succeeded),
        );
    }
    let med = |f: &dyn Fn(&Run) -> f64| median(runs.iter().map(f).collect());
    let (wall, user, sys) = (med(&|r| r.wall), med(&|r| r.user), med(&|r| r.sys));
    let pps = med(&|r| r.pages_per_sec(n));
    let cpu = med(&|r| r.cpu_ms_per_page(n));
    let rss = med(&|r| r.rss_mb());
    let _ = writeln!(
        s,
        "{:<8} {:>8.2} {:>8.2} {:>8.2} {:>8.0} {:>10.2} {:>12.0}",
        "median", wall, user, sys, pps, cpu, rss
    );
    let _ = writeln!(
        s,
        "\n{:<22} {:>10} {:>10} {:>22}",
        "metric (median)", "value", "target", "ratio"
    );
    let _ = writeln!(
        s,
        "{:<22} {:>10.0} {:>10} {:>22}",
        "pages/s",
        pps,
        ">= 400",
        against_target(pps, TARGET_PAGES_PER_SEC, pps >= TARGET_PAGES_PER_SEC)
    );
    let _ = writeln!(
        s,
        "{:<22} {:>10.2} {:>10} {:>22}",
        "CPU ms/page",
        cpu,
        "<= 2.5",
        against_target(cpu, TARGET_CPU_MS_PER_PAGE, cpu <= TARGET_CPU_MS_PER_PAGE)
    );
    let _ = writeln!(
        s,
        "{:<22} {:>10.0} {:>10} {:>22}",
        "peak RSS MB",
        rss,
        "< 300",
        against_target(rss, TARGET_RSS_MB, rss < TARGET_RSS_MB)
    );
    let failed: Vec<String> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| r.succeeded != n)
        .map(|(i, r)| format!("run {}: {}/{n}", i + 1, r.succeeded))
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(
            s,
            "\n!!!!! NOT ALL PAGES SUCCEEDED: {} !!!!!",
            failed.join(", ")
        );
    }
    println!("{s}");
}

// ---------------------------------------------------------------------------------------
// Profile

fn profile(settings: &Settings, root: &Path, urls: &Path) -> Result<()> {
    println!("== profile ==");
    let Some(perf) = find_in_path("perf") else {
        println!("perf is not installed (apt-get install linux-perf): no profile.");
        return Ok(());
    };
    let dir = root.join("profile");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let data = dir.join("perf.data");
    let mut command = Command::new(&perf);
    command
        .args(record_args(settings.callgraph, &data))
        .arg(trawl_bin())
        .args(trawl_args(&dir.join("data"), urls, &dir.join("out")));
    let started = Instant::now();
    let (ok, _, stderr) = run_bounded(command, &dir, settings.timeout * 2)?;
    if !ok || !data.exists() {
        println!(
            "perf record failed (is perf_event_paranoid too strict, or perf unsupported here?):\n{}",
            tail(&stderr, 20)
        );
        return Ok(());
    }
    let (lines, succeeded, _) = check_output(&dir.join("out").join("pages.jsonl"))?;
    println!(
        "perf record -e cpu-clock ({}) over the same {} URLs: {:.1} s, {succeeded}/{lines} succeeded, {:.0} MB of samples",
        settings.callgraph.describe(),
        settings.pages,
        started.elapsed().as_secs_f64(),
        std::fs::metadata(&data).map_or(0, |m| m.len()) as f64 / 1e6
    );
    if let Some(note) = stderr
        .lines()
        .find(|l| l.contains("kernel") || l.contains("paranoid"))
    {
        println!("perf: {note}");
    }

    analyse(&perf, &data, Some(MAIN_THREAD))
}

/// The main thread runs `trawl run`'s loop: it follows ended jobs and, with --out, reads each
/// page back (query on a sqlx thread, zstd decompress here) and writes pages.jsonl and the
/// page file. Startup (clap, migrations) is negligible.
const MAIN_THREAD: &str = "output (main thread: read back, decompress, write --out)";
