//! Crawl benchmark: `trawl crawl` over a generated local site served by nginx on 127.0.0.1
//! (`testkit::crawl_site`: articles, tag pages, canonical duplicates, pages
//! disallowed by robots.txt, redirects, dead links, a sitemap index), embedded and
//! distributed, with the crawl's correctness checked on every run.
//!
//! ```text
//! cargo bench --bench crawl                               # 10,000 articles, 3 runs per mode
//! cargo bench --bench crawl -- 2000                       # another site size
//! TRAWL_BENCH_PAGES=100000 TRAWL_BENCH_RUNS=1 cargo bench --bench crawl   # the flat-RSS check
//! TRAWL_BENCH_MODES=distributed TRAWL_BENCH_WORKERS=3 cargo bench --bench crawl
//! ```
//!
//! Modes: **embedded** is `trawl crawl http://127.0.0.1:PORT/p/0 --sitemap --max-depth D
//! --max-pages <big> --allow-private-network -q -c C` on a fresh data directory (SQLite store
//! and queue). **distributed** starts its own `redis-server` on a free loopback port and
//! creates a fresh PostgreSQL database on the local server (unix socket
//! `/var/run/postgresql`, user `postgres`), starts `TRAWL_BENCH_WORKERS` `trawl work --pools
//! fetch=C` processes on them, runs `trawl crawl --no-pools` with the same arguments (it
//! queues the crawl and follows it), then stops the workers with SIGTERM; Redis is stopped
//! and the database dropped at the end of each run, also when it fails. Politeness is opened
//! for the one local host: `politeness.max_concurrent_per_host` = every fetch slot of the
//! mode, `politeness.min_delay_ms` = 0 (robots.txt has no Crawl-delay).
//!
//! Each process runs under GNU time. Per run: pages/s (pages fetched / wall time of `trawl
//! crawl`), CPU ms per fetched page ((user + sys) of every trawl process of the run / pages),
//! peak RSS per process, and VmRSS of each fetching process sampled every second (first after
//! a 3 s warm-up, median, last, max, last/first: with 100,000 pages this is the memory
//! check). Then medians per mode, the ratio distributed/embedded, and the targets
//! (distributed ≥ 400 pages/s and within 10% of embedded; peak RSS < 300 MB per process).
//!
//! Correctness, checked on every run (a run that breaks a check makes the bench fail after
//! the report): the pages stored are exactly the site's unique documents (`/p/` and `/tag/`,
//! by final URL, one row each), the crawl's counters (fetched = unique documents, failed =
//! dead links, duplicates = `/dup/` pages + redirects (their targets are known from the
//! sitemap), skipped by robots = `/private/` pages), and
//! nginx's access log: no request to `/private/`, every page requested, every redirect
//! requested once, no page requested twice (a redirect to a known page is refused before its
//! target is requested; robots.txt and sitemaps: counted and shown).
//!
//! Needs nginx, GNU time (`/usr/bin/time`) and `sqlite3`; distributed also `redis-server`
//! and `psql` with a local PostgreSQL server. Environment: `TRAWL_BENCH_PAGES` (articles,
//! default 10,000; a bare number argument too), `TRAWL_BENCH_RUNS` (runs per mode, default
//! 3), `TRAWL_BENCH_MODES` (`embedded,distributed`, the default), `TRAWL_BENCH_WORKERS`
//! (distributed worker processes, default 2), `TRAWL_BENCH_CONCURRENCY` (fetch slots per
//! process, default 32), `TRAWL_BENCH_TIMEOUT` (seconds one crawl may take, default 1800),
//! `TRAWL_BENCH_KEEP=1` (keep the temporary directory and print its path),
//! `TRAWL_BENCH_BIN=PATH` (another trawl binary than this build's), `TRAWL_BENCH_PG_HOST`
//! (PostgreSQL socket directory, default `/var/run/postgresql`).

// A benchmark reads its own knobs from the environment; trawl's configuration rule (figment only)
// is for the application.
#![allow(missing_docs, clippy::unwrap_used, clippy::disallowed_methods)]

mod common;
#[path = "common/figures.rs"]
mod figures;
#[path = "common/knobs.rs"]
#[allow(
    dead_code,
    reason = "its counts are checked together, not with env_positive"
)]
mod knobs;
#[path = "common/nginx.rs"]
mod nginx;
#[path = "common/process.rs"]
mod process;
#[path = "common/redis.rs"]
mod redis_server;
#[path = "common/server.rs"]
mod server;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use figures::{against_target, load_average, median, verdict};
use knobs::{arg_number, env_flag, env_list, env_number};
use nginx::{Nginx, find_in_path};
use process::{GNU_TIME, Group, Usage, read_usage, tail, timed_trawl, trawl_bin};
use redis_server::RedisServer;
use testkit::crawl_site::{CrawlSite, Expected};

type Result<T> = std::result::Result<T, String>;

const DEFAULT_PAGES: u64 = 10_000;
const TARGET_PAGES_PER_SEC: f64 = 400.0;
const TARGET_RSS_MB: f64 = 300.0;
/// Distributed pages/s at least this share of embedded's.
const TARGET_DISTRIBUTED_SHARE: f64 = 0.9;
/// RSS samples before this many seconds are the warm-up.
const WARM_UP_SAMPLES: usize = 3;

fn main() -> ExitCode {
    match bench() {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("crawl bench failed: {error}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Embedded,
    Distributed,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Embedded => "embedded",
            Mode::Distributed => "distributed",
        }
    }
}

struct Settings {
    pages: u64,
    runs: usize,
    modes: Vec<Mode>,
    workers: usize,
    concurrency: usize,
    timeout: Duration,
    keep: bool,
    pg_host: String,
}

fn settings() -> Result<Settings> {
    let mut pages = env_number("TRAWL_BENCH_PAGES", DEFAULT_PAGES)?;
    // `cargo bench` passes `--bench`; a bare number is the site size.
    if let Some(n) = arg_number() {
        pages = n;
    }
    if pages == 0 {
        return Err("the site needs at least one page".to_owned());
    }
    let runs = env_number("TRAWL_BENCH_RUNS", 3_usize)?;
    let workers = env_number("TRAWL_BENCH_WORKERS", 2_usize)?;
    let concurrency = env_number("TRAWL_BENCH_CONCURRENCY", 32_usize)?;
    if runs == 0 || workers == 0 || concurrency == 0 {
        return Err(
            "TRAWL_BENCH_RUNS, TRAWL_BENCH_WORKERS and TRAWL_BENCH_CONCURRENCY must be positive"
                .to_owned(),
        );
    }
    if workers * concurrency > 1024 {
        return Err(format!(
            "{workers} workers × {concurrency} fetch slots is above politeness.max_concurrent_per_host's 1024"
        ));
    }
    let modes = env_list(
        "TRAWL_BENCH_MODES",
        "embedded,distributed",
        "mode",
        |mode| match mode {
            "embedded" => Ok(Mode::Embedded),
            "distributed" => Ok(Mode::Distributed),
            other => Err(format!(
                "TRAWL_BENCH_MODES: unknown mode {other:?} (embedded, distributed)"
            )),
        },
    )?;
    Ok(Settings {
        pages,
        runs,
        modes,
        workers,
        concurrency,
        timeout: Duration::from_secs(env_number("TRAWL_BENCH_TIMEOUT", 1_800_u64)?),
        keep: env_flag("TRAWL_BENCH_KEEP"),
        pg_host: std::env::var("TRAWL_BENCH_PG_HOST")
            .unwrap_or_else(|_| "/var/run/postgresql".to_owned()),
    })
}

fn bench() -> Result<()> {
    common::print_machine();
    let settings = settings()?;
    check_tools(&settings)?;
    nginx::with_site_root("trawl-crawl-bench-", settings.keep, |root| {
        bench_in(&settings, root)
    })
}

fn check_tools(settings: &Settings) -> Result<()> {
    let mut needed = vec![
        ("nginx", "apt-get install -y nginx"),
        ("sqlite3", "apt-get install -y sqlite3"),
    ];
    if settings.modes.contains(&Mode::Distributed) {
        needed.push(("redis-server", "apt-get install -y redis-server"));
        needed.push(("psql", "apt-get install -y postgresql-client"));
    }
    for (tool, install) in needed {
        if find_in_path(tool).is_none() {
            return Err(format!("{tool} not found: install it with `{install}`"));
        }
    }
    process::check_gnu_time_and_trawl()
}

fn bench_in(settings: &Settings, root: &Path) -> Result<()> {
    let www = root.join("www");
    std::fs::create_dir_all(&www).map_err(|e| format!("creating {}: {e}", www.display()))?;
    // The site's absolute links name nginx's port: start nginx first (with the redirects,
    // which do not depend on the port), then write the site.
    let site = CrawlSite::new(settings.pages, "http://127.0.0.1");
    let extra = format!(
        "types {{ text/html html; application/xml xml; application/gzip gz; text/plain txt; }}\n{}",
        site.nginx_locations()
    );
    let nginx = Nginx::start(
        root,
        &nginx::Options {
            server_extra: extra,
            access_log: true,
            ready_path: None,
        },
    )?;
    let site = CrawlSite::new(settings.pages, &nginx.origin());
    let started = Instant::now();
    let written = site
        .write(&www)
        .map_err(|e| format!("writing the site under {}: {e}", www.display()))?;
    let expected = site.expected();
    eprintln!(
        "generated {} files ({:.1} MB) in {:.1} s: {} articles, {} tags, {} duplicates, {} private, {} redirects, {} dead links; max depth {}",
        written.files,
        written.bytes as f64 / 1e6,
        started.elapsed().as_secs_f64(),
        expected.pages,
        expected.tags,
        expected.duplicate_pages,
        expected.private_pages,
        expected.redirects,
        expected.dead_links,
        expected.max_depth
    );
    for (path, status) in [("/p/0", 200), ("/old/0", 301), ("/gone/0", 404)] {
        let got = nginx::http_status(nginx.port, path)
            .map_err(|e| format!("GET {path} from nginx: {e}"))?;
        if got != status {
            return Err(format!(
                "nginx answers GET {path} with {got}, not {status}: {}",
                nginx.logs()
            ));
        }
    }

    let bench = Bench {
        settings,
        site: &site,
        expected,
        nginx: &nginx,
        root,
    };
    let load_before = load_average();
    let mut runs: Vec<Run> = Vec::new();
    for &mode in &settings.modes {
        for i in 1..=settings.runs {
            let run = bench.run(mode, i)?;
            eprintln!("{}", run.line());
            runs.push(run);
        }
    }
    let load_after = load_average();
    let failures = report(&bench, &runs, &load_before, &load_after, written.bytes);
    drop(nginx);
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} correctness check(s) failed:\n  {}",
            failures.len(),
            failures.join("\n  ")
        ))
    }
}

struct Bench<'a> {
    settings: &'a Settings,
    site: &'a CrawlSite,
    expected: Expected,
    nginx: &'a Nginx,
    root: &'a Path,
}

/// VmRSS samples of one process, in kB, one a second.
#[derive(Debug, Clone, Default)]
struct Samples(Vec<u64>);

impl Samples {
    fn summary(&self) -> Option<(u64, u64, u64, u64)> {
        let all = &self.0;
        let warm = if all.len() > WARM_UP_SAMPLES {
            &all[WARM_UP_SAMPLES..]
        } else {
            &all[..]
        };
        let first = *warm.first()?;
        let last = *warm.last()?;
        let mut sorted = warm.to_vec();
        sorted.sort_unstable();
        let median = sorted[sorted.len() / 2];
        let max = *sorted.last()?;
        Some((first, median, last, max))
    }

    fn describe(&self) -> String {
        match self.summary() {
            Some((first, median, last, max)) => format!(
                "{} samples: first {:.0} MB, median {:.0} MB, last {:.0} MB, max {:.0} MB, last/first {:.2}",
                self.0.len(),
                first as f64 / 1024.0,
                median as f64 / 1024.0,
                last as f64 / 1024.0,
                max as f64 / 1024.0,
                last as f64 / first.max(1) as f64
            ),
            None => "no samples".to_owned(),
        }
    }
}

/// The summary `trawl crawl` prints.
#[derive(Debug, Clone, Default)]
struct Summary {
    fetched: u64,
    failed: u64,
    discovered: u64,
    queued: u64,
    skipped_scope: u64,
    skipped_robots: u64,
    skipped_depth: u64,
    skipped_limit: u64,
    duplicates: u64,
}

struct Run {
    mode: Mode,
    index: usize,
    crawl: Usage,
    /// The fetching processes: the crawl itself (embedded) or the workers.
    fetchers: Vec<(String, Usage, Samples)>,
    summary: Summary,
    /// Pages in the store: rows, and distinct final URLs.
    stored_rows: u64,
    /// What the access log showed, as lines for the report.
    log_notes: Vec<String>,
    /// Broken correctness checks.
    failures: Vec<String>,
}

impl Run {
    fn pages_per_sec(&self) -> f64 {
        self.summary.fetched as f64 / self.crawl.wall.max(1e-9)
    }

    fn cpu_seconds(&self) -> f64 {
        let mut cpu = self.crawl.user + self.crawl.sys;
        if self.mode == Mode::Distributed {
            cpu += self
                .fetchers
                .iter()
                .map(|(_, usage, _)| usage.user + usage.sys)
                .sum::<f64>();
        }
        cpu
    }

    fn cpu_ms_per_page(&self) -> f64 {
        self.cpu_seconds() * 1e3 / self.summary.fetched.max(1) as f64
    }

    fn max_rss_mb(&self) -> f64 {
        self.fetchers
            .iter()
            .map(|(_, usage, _)| usage.rss_kb)
            .chain([self.crawl.rss_kb])
            .max()
            .unwrap_or(0) as f64
            / 1024.0
    }

    fn line(&self) -> String {
        format!(
            "{} run {}: {:.1} s wall, {} fetched, {:.0} pages/s, {:.2} ms CPU/page, peak RSS {:.0} MB, {}",
            self.mode.name(),
            self.index,
            self.crawl.wall,
            self.summary.fetched,
            self.pages_per_sec(),
            self.cpu_ms_per_page(),
            self.max_rss_mb(),
            if self.failures.is_empty() {
                "checks passed".to_owned()
            } else {
                format!("{} CHECKS FAILED", self.failures.len())
            }
        )
    }
}

impl Bench<'_> {
    fn seed(&self) -> String {
        format!("{}/p/0", self.site.origin())
    }

    /// `trawl crawl …` after the global options.
    fn crawl_args(&self, no_pools: bool) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["crawl".into(), self.seed().into()];
        for arg in ["--sitemap", "--allow-private-network", "-q"] {
            args.push(arg.into());
        }
        args.push("--max-depth".into());
        args.push(self.expected.max_depth.to_string().into());
        // Room for every URL of the site: the budget is not what is measured.
        args.push("--max-pages".into());
        args.push(
            (self.expected.fetchable_pages * 2 + 1_000)
                .to_string()
                .into(),
        );
        if no_pools {
            args.push("--no-pools".into());
        } else {
            args.push("-c".into());
            args.push(self.settings.concurrency.to_string().into());
        }
        args
    }

    /// The environment of every trawl process of a run in `mode`.
    fn trawl_env(&self, mode: Mode) -> Vec<(&'static str, String)> {
        let slots = match mode {
            Mode::Embedded => self.settings.concurrency,
            Mode::Distributed => self.settings.concurrency * self.settings.workers,
        };
        vec![
            (
                "TRAWL_POLITENESS__MAX_CONCURRENT_PER_HOST",
                slots.to_string(),
            ),
            ("TRAWL_POLITENESS__MIN_DELAY_MS", "0".to_owned()),
            (
                "TRAWL_RUNNER__CONCURRENCY",
                self.settings.concurrency.to_string(),
            ),
        ]
    }

    fn run(&self, mode: Mode, index: usize) -> Result<Run> {
        let dir = self.root.join(format!("{}-{index}", mode.name()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        self.nginx.clear_access_log()?;
        let mut run = match mode {
            Mode::Embedded => self.run_embedded(&dir, index)?,
            Mode::Distributed => self.run_distributed(&dir, index)?,
        };
        self.check_access_log(&mut run)?;
        Ok(run)
    }

    fn run_embedded(&self, dir: &Path, index: usize) -> Result<Run> {
        let data = dir.join("data");
        let time_file = dir.join("crawl.time");
        let mut command = timed_trawl(&time_file);
        command
            .arg("--data-dir")
            .arg(&data)
            .args(self.crawl_args(false))
            .envs(self.trawl_env(Mode::Embedded));
        embedded_env(&mut command);
        let crawl = Proc::spawn(command, &time_file, dir, "crawl")?;
        let (crawl, samples) = crawl.wait_sampling(self.settings.timeout, &[])?;
        let summary = parse_summary(&crawl.stdout)
            .map_err(|e| format!("embedded run {index}: {e}\n{}", crawl.output_tail()))?;
        let rows = sqlite_pages(&data.join("trawl.sqlite"))?;
        let fetchers = vec![(
            "trawl crawl".to_owned(),
            crawl.usage.clone(),
            samples.into_iter().next().unwrap_or_default(),
        )];
        Ok(self.checked_run(Mode::Embedded, index, crawl.usage, fetchers, summary, &rows))
    }

    fn run_distributed(&self, dir: &Path, index: usize) -> Result<Run> {
        let redis = RedisServer::start(
            &find_in_path("redis-server").ok_or("redis-server not found")?,
            dir,
            &dir.join("redis.log"),
        )?;
        eprintln!(
            "redis-server (pid {}) on 127.0.0.1:{}",
            redis.pid(),
            redis.port
        );
        let database = Database::create(&self.settings.pg_host, index)?;
        let database_url = format!(
            "postgres://postgres@localhost/{}?host={}",
            database.name, self.settings.pg_host
        );
        let redis_url = redis.url();
        let env = |command: &mut Command| {
            command
                .envs(self.trawl_env(Mode::Distributed))
                .env("DATABASE_URL", &database_url)
                .env("REDIS_URL", &redis_url)
                .env_remove("TRAWL_DATABASE_URL")
                .env_remove("TRAWL_REDIS_URL");
        };
        let mut workers = Vec::new();
        for w in 1..=self.settings.workers {
            let wdir = dir.join(format!("worker{w}"));
            std::fs::create_dir_all(&wdir)
                .map_err(|e| format!("creating {}: {e}", wdir.display()))?;
            let time_file = wdir.join("time.txt");
            let mut command = timed_trawl_verbose(&time_file);
            command
                .arg("--data-dir")
                .arg(wdir.join("data"))
                .args(["work", "--allow-private-network", "--pools"])
                .arg(format!("fetch={}", self.settings.concurrency));
            env(&mut command);
            workers.push(Proc::spawn(
                command,
                &time_file,
                &wdir,
                &format!("worker {w}"),
            )?);
        }
        for worker in &mut workers {
            worker.wait_for_stderr("trawl: working", Duration::from_secs(60))?;
        }
        let worker_pids: Vec<u32> = workers.iter().filter_map(Proc::trawl_pid).collect();
        let time_file = dir.join("crawl.time");
        let mut command = timed_trawl(&time_file);
        command
            .arg("--data-dir")
            .arg(dir.join("crawl-data"))
            .args(self.crawl_args(true));
        env(&mut command);
        let crawl = Proc::spawn(command, &time_file, dir, "crawl --no-pools")?;
        let (crawl, samples) = crawl.wait_sampling(self.settings.timeout, &worker_pids)?;
        let mut fetchers = Vec::new();
        for (k, worker) in workers.into_iter().enumerate() {
            let name = worker.name.clone();
            let done = worker.terminate(Duration::from_secs(60))?;
            let sampled = samples.get(k).cloned().unwrap_or_default();
            fetchers.push((name, done.usage, sampled));
        }
        let summary = parse_summary(&crawl.stdout)
            .map_err(|e| format!("distributed run {index}: {e}\n{}", crawl.output_tail()))?;
        let rows = psql_pages(&self.settings.pg_host, &database.name)?;
        drop(database);
        drop(redis);
        Ok(self.checked_run(
            Mode::Distributed,
            index,
            crawl.usage,
            fetchers,
            summary,
            &rows,
        ))
    }

    /// The run, its counters and stored pages (`rows`) checked by [`Bench::check_store`].
    fn checked_run(
        &self,
        mode: Mode,
        index: usize,
        crawl: Usage,
        fetchers: Vec<(String, Usage, Samples)>,
        summary: Summary,
        rows: &[(String, String)],
    ) -> Run {
        let mut run = Run {
            mode,
            index,
            crawl,
            fetchers,
            summary,
            stored_rows: 0,
            log_notes: Vec::new(),
            failures: Vec::new(),
        };
        self.check_store(&mut run, rows);
        run
    }

    /// Checks the crawl's counters and the stored pages against the site.
    fn check_store(&self, run: &mut Run, rows: &[(String, String)]) {
        let e = &self.expected;
        let s = run.summary.clone();
        let mut failures = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                failures.push(what);
            }
        };
        check(
            s.fetched == e.unique_documents,
            format!(
                "pages fetched {} != unique documents {}",
                s.fetched, e.unique_documents
            ),
        );
        check(
            s.failed == e.dead_links,
            format!("failed {} != dead links {}", s.failed, e.dead_links),
        );
        check(
            s.duplicates == e.duplicates,
            format!(
                "duplicates {} != /dup/ pages {} + redirects to known pages {}",
                s.duplicates, e.duplicate_pages, e.redirects
            ),
        );
        check(
            s.skipped_robots == e.private_pages,
            format!(
                "skipped by robots.txt {} != /private/ pages {}",
                s.skipped_robots, e.private_pages
            ),
        );
        check(
            s.skipped_depth == 0 && s.skipped_limit == 0,
            format!(
                "{} too deep and {} over max_pages (the bench sets both to cover the site)",
                s.skipped_depth, s.skipped_limit
            ),
        );
        let path = |url: &str| {
            url::Url::parse(url)
                .map(|u| u.path().to_owned())
                .unwrap_or_else(|_| url.to_owned())
        };
        let mut by_final: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (url, final_url) in rows {
            by_final.entry(path(final_url)).or_default().push(path(url));
        }
        let stored: BTreeSet<String> = by_final.keys().cloned().collect();
        let unique = self.site.unique_paths();
        let missing: Vec<&String> = unique.difference(&stored).collect();
        let extra: Vec<&String> = stored.difference(&unique).collect();
        check(
            missing.is_empty() && extra.is_empty(),
            format!(
                "stored final URLs differ from the unique documents: {} missing (e.g. {:?}), {} unexpected (e.g. {:?})",
                missing.len(),
                missing.iter().take(5).collect::<Vec<_>>(),
                extra.len(),
                extra.iter().take(5).collect::<Vec<_>>()
            ),
        );
        let repeated: Vec<String> = by_final
            .iter()
            .filter(|(_, urls)| urls.len() > 1)
            .map(|(final_path, urls)| format!("{final_path} ← {}", urls.join(", ")))
            .collect();
        check(
            repeated.is_empty(),
            format!(
                "{} documents stored more than once ({} rows for {} documents), e.g. {:?}",
                repeated.len(),
                rows.len(),
                stored.len(),
                repeated.iter().take(4).collect::<Vec<_>>()
            ),
        );
        run.stored_rows = rows.len() as u64;
        run.failures.extend(failures);
    }

    /// Checks nginx's access log of the run.
    fn check_access_log(&self, run: &mut Run) -> Result<()> {
        let e = &self.expected;
        let log = self.nginx.access_log()?;
        let mut by_path: BTreeMap<String, (u64, BTreeSet<u16>)> = BTreeMap::new();
        let mut with_query = 0;
        for (uri, status) in &log {
            let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
            if !query.is_empty() {
                with_query += 1;
            }
            let entry = by_path.entry(path.to_owned()).or_default();
            entry.0 += 1;
            entry.1.insert(*status);
        }
        let count = |prefix: &str| -> (u64, u64) {
            by_path
                .iter()
                .filter(|(path, _)| path.starts_with(prefix))
                .fold((0, 0), |(paths, requests), (_, (n, _))| {
                    (paths + 1, requests + n)
                })
        };
        let mut failures = Vec::new();
        let (private_paths, private_requests) = count("/private/");
        if private_requests > 0 {
            failures.push(format!(
                "{private_requests} requests to {private_paths} /private/ pages (disallowed by robots.txt)"
            ));
        }
        let mut fetchable: Vec<String> = self.site.unique_paths().into_iter().collect();
        fetchable.extend((0..e.duplicate_pages).map(|d| format!("/dup/{d}")));
        let never: Vec<&String> = fetchable
            .iter()
            .filter(|path| !by_path.contains_key(*path))
            .collect();
        if !never.is_empty() {
            failures.push(format!(
                "{} pages never requested, e.g. {:?}",
                never.len(),
                never.iter().take(5).collect::<Vec<_>>()
            ));
        }
        let (old_paths, old_requests) = count("/old/");
        if old_paths != e.redirects || old_requests != e.redirects {
            failures.push(format!(
                "redirects: {old_requests} requests to {old_paths} /old/ paths, expected each of {} once",
                e.redirects
            ));
        }
        let (gone_paths, gone_requests) = count("/gone/");
        if gone_paths != e.dead_links {
            failures.push(format!(
                "dead links: {gone_paths} of {} requested",
                e.dead_links
            ));
        }
        // Every page once: a redirect whose target the crawl already has (the sitemap names
        // every article) is refused before the target is requested.
        let mut twice = Vec::new();
        for (path, (n, _)) in &by_path {
            let special = path == "/robots.txt" || path.starts_with("/sitemap");
            if !special && *n > 1 {
                twice.push(format!("{path} ×{n}"));
            }
        }
        if !twice.is_empty() {
            failures.push(format!(
                "{} paths requested more than once, e.g. {:?}",
                twice.len(),
                twice.iter().take(8).collect::<Vec<_>>()
            ));
        }
        let specials: Vec<String> = by_path
            .iter()
            .filter(|(path, _)| *path == "/robots.txt" || path.starts_with("/sitemap"))
            .map(|(path, (n, statuses))| format!("{path} ×{n} {statuses:?}"))
            .collect();
        run.log_notes.push(format!(
            "access log: {} requests, {} paths; /gone/ {gone_requests} requests to {gone_paths} paths; {with_query} request URIs with a query",
            log.len(),
            by_path.len()
        ));
        run.log_notes
            .push(format!("robots.txt and sitemaps: {}", specials.join(", ")));
        run.failures.extend(failures);
        Ok(())
    }
}

/// Removes what would make an embedded run use another store or queue, and the bench's own
/// knobs (trawl reads every `TRAWL_*` variable as configuration and refuses unknown keys).
fn embedded_env(command: &mut Command) {
    for name in [
        "DATABASE_URL",
        "REDIS_URL",
        "TRAWL_DATABASE_URL",
        "TRAWL_REDIS_URL",
    ] {
        command.env_remove(name);
    }
}

/// `/usr/bin/time -v -o FILE trawl`.
fn timed_trawl_verbose(time_file: &Path) -> Command {
    let mut command = Command::new(GNU_TIME);
    command.arg("-v").arg("-o").arg(time_file).arg(trawl_bin());
    command
}

/// A process of the run (GNU time and the trawl under it) in its own process group, its
/// output in files; killed with its group if dropped while running.
struct Proc {
    name: String,
    group: Group,
    time_file: PathBuf,
}

/// A process that ended.
struct Done {
    usage: Usage,
    stdout: String,
    stderr: String,
}

impl Done {
    fn output_tail(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            tail(&self.stdout, 20),
            tail(&self.stderr, 30)
        )
    }
}

impl Proc {
    fn spawn(mut command: Command, time_file: &Path, dir: &Path, name: &str) -> Result<Proc> {
        command.current_dir(dir);
        Ok(Proc {
            name: name.to_owned(),
            group: Group::spawn(&mut command, dir, Some(name))?,
            time_file: time_file.to_owned(),
        })
    }

    /// The trawl process under GNU time.
    fn trawl_pid(&self) -> Option<u32> {
        first_child(self.group.child.id())
    }

    fn stderr(&self) -> String {
        self.group.stderr()
    }

    /// Waits until the process writes `needle` to stderr.
    fn wait_for_stderr(&mut self, needle: &str, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if self.stderr().contains(needle) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.group.child.try_wait() {
                return Err(format!(
                    "{} exited with {status} before it was ready:\n{}",
                    self.name,
                    tail(&self.stderr(), 30)
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} not ready within {limit:?}:\n{}",
                    self.name,
                    tail(&self.stderr(), 30)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the process to end (killing its group after `limit`), sampling VmRSS every
    /// second: of `watch`, or when empty of the trawl under GNU time. Returns one series per
    /// watched process.
    fn wait_sampling(mut self, limit: Duration, watch: &[u32]) -> Result<(Done, Vec<Samples>)> {
        let deadline = Instant::now() + limit;
        let mut watch: Vec<u32> = watch.to_vec();
        let mut samples: Vec<Samples> = vec![Samples::default(); watch.len().max(1)];
        let mut next_sample = Instant::now() + Duration::from_secs(1);
        let time_pid = self.group.child.id();
        let tick = || {
            if Instant::now() >= next_sample {
                next_sample += Duration::from_secs(1);
                if watch.is_empty()
                    && let Some(pid) = first_child(time_pid)
                {
                    watch.push(pid);
                }
                for (series, pid) in samples.iter_mut().zip(&watch) {
                    if let Some(kb) = vm_rss_kb(*pid) {
                        series.0.push(kb);
                    }
                }
            }
        };
        let status = self.wait_or_kill(deadline, tick, |stderr| {
            format!(
                "the crawl did not finish within {limit:?} (TRAWL_BENCH_TIMEOUT); killed.\n--- stderr ---\n{}",
                tail(stderr, 40)
            )
        })?;
        let done = self.collect()?;
        if !status.success() {
            return Err(format!(
                "{} failed ({status})\n{}",
                self.name,
                done.output_tail()
            ));
        }
        Ok((done, samples))
    }

    /// SIGTERM to the trawl under GNU time (GNU time itself would die of it without writing
    /// its figures), then waits for both to end (SIGKILL to the group after `limit`).
    fn terminate(mut self, limit: Duration) -> Result<Done> {
        if let Some(pid) = self.trawl_pid() {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let name = self.name.clone();
        let status = self.wait_or_kill(
            Instant::now() + limit,
            || {},
            |stderr| {
                format!(
                    "{name} did not stop within {limit:?} of SIGTERM; killed.\n{}",
                    tail(stderr, 30)
                )
            },
        )?;
        let done = self.collect()?;
        // GNU time reports a child killed by a signal; trawl exits 0 on SIGTERM.
        if !status.success() {
            eprintln!(
                "warning: {} ended with {status}\n{}",
                self.name,
                tail(&done.stderr, 10)
            );
        }
        Ok(done)
    }

    /// Waits for the process to end, calling `tick` meanwhile; at `deadline` kills its group
    /// and fails with `timed_out` of what it wrote to stderr.
    fn wait_or_kill(
        &mut self,
        deadline: Instant,
        tick: impl FnMut(),
        timed_out: impl FnOnce(&str) -> String,
    ) -> Result<std::process::ExitStatus> {
        match self.group.wait_until(deadline, tick) {
            Ok(Some(status)) => Ok(status),
            Ok(None) => {
                let stderr = self.stderr();
                self.group.kill();
                Err(timed_out(&stderr))
            }
            Err(e) => Err(format!("waiting for {}: {e}", self.name)),
        }
    }

    fn collect(&self) -> Result<Done> {
        Ok(Done {
            usage: read_usage(&self.time_file)?,
            stdout: self.group.stdout(),
            stderr: self.stderr(),
        })
    }
}

/// The first child of process `pid` (the trawl under GNU time).
fn first_child(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}

fn vm_rss_kb(pid: u32) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Reads `trawl crawl`'s summary: "… N pages fetched, F failed in …" and "urls: …".
fn parse_summary(stdout: &str) -> Result<Summary> {
    let numbers = |line: &str| -> Vec<u64> {
        line.split(|c: char| !c.is_ascii_digit())
            .filter(|part| !part.is_empty())
            .filter_map(|part| part.parse().ok())
            .collect()
    };
    let done = stdout
        .lines()
        .find(|line| line.starts_with("done: crawl "))
        .ok_or("no `done: crawl …` line in trawl crawl's output")?;
    let (_, counts) = done
        .split_once(": ")
        .and_then(|(_, rest)| rest.split_once(": "))
        .ok_or_else(|| format!("unexpected summary line {done:?}"))?;
    let counts = numbers(counts.split(" in ").next().unwrap_or_default());
    let urls = stdout
        .lines()
        .find(|line| line.starts_with("urls: "))
        .ok_or("no `urls: …` line in trawl crawl's output")?;
    let u = numbers(urls);
    match (&counts[..], &u[..]) {
        ([fetched, failed], [discovered, queued, scope, robots, depth, limit, duplicates]) => {
            Ok(Summary {
                fetched: *fetched,
                failed: *failed,
                discovered: *discovered,
                queued: *queued,
                skipped_scope: *scope,
                skipped_robots: *robots,
                skipped_depth: *depth,
                skipped_limit: *limit,
                duplicates: *duplicates,
            })
        }
        _ => Err(format!("unexpected summary lines {done:?} / {urls:?}")),
    }
}

/// `(url, final_url)` of every stored page of a SQLite store.
fn sqlite_pages(store: &Path) -> Result<Vec<(String, String)>> {
    let output = Command::new("sqlite3")
        .arg("-readonly")
        .arg("-separator")
        .arg("\t")
        .arg(store)
        .arg("SELECT url, final_url FROM pages")
        .output()
        .map_err(|e| format!("running sqlite3: {e}"))?;
    rows(output, "sqlite3")
}

/// `(url, final_url)` of every stored page of a PostgreSQL database.
fn psql_pages(host: &str, database: &str) -> Result<Vec<(String, String)>> {
    let output = Command::new("psql")
        .args([
            "-h", host, "-U", "postgres", "-d", database, "-AtF", "\t", "-c",
        ])
        .arg("SELECT url, final_url FROM pages")
        .output()
        .map_err(|e| format!("running psql: {e}"))?;
    rows(output, "psql")
}

fn rows(output: std::process::Output, tool: &str) -> Result<Vec<(String, String)>> {
    if !output.status.success() {
        return Err(format!(
            "{tool} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| line.split_once('\t'))
        .map(|(url, final_url)| (url.to_owned(), final_url.to_owned()))
        .collect())
}

/// A fresh PostgreSQL database; dropped (FORCE) when this value is.
struct Database {
    host: String,
    name: String,
}

impl Database {
    fn create(host: &str, index: usize) -> Result<Database> {
        let name = format!("trawl_bench_crawl_{}_{index}", std::process::id());
        psql(
            host,
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        )?;
        psql(host, &format!("CREATE DATABASE {name}"))?;
        Ok(Database {
            host: host.to_owned(),
            name,
        })
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Err(error) = psql(
            &self.host,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        ) {
            eprintln!("warning: could not drop database {}: {error}", self.name);
        }
    }
}

fn psql(host: &str, sql: &str) -> Result<()> {
    let output = Command::new("psql")
        .args([
            "-h", host, "-U", "postgres", "-d", "postgres", "-qAt", "-c", sql,
        ])
        .output()
        .map_err(|e| format!("running psql: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "psql -c {sql:?}: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// Prints the report; returns the broken checks of every run.
fn report(
    bench: &Bench<'_>,
    runs: &[Run],
    before: &str,
    after: &str,
    site_bytes: u64,
) -> Vec<String> {
    let e = &bench.expected;
    let settings = bench.settings;
    let mut s = String::new();
    let _ = writeln!(s, "\n== trawl crawl benchmark ==");
    let _ = writeln!(s, "load average before {before}, after {after}");
    let _ = writeln!(
        s,
        "site: {} articles + {} tags = {} unique documents, {} canonical duplicates, {} private, {} redirects, {} dead links; {:.1} MB; max depth {}",
        e.pages,
        e.tags,
        e.unique_documents,
        e.duplicate_pages,
        e.private_pages,
        e.redirects,
        e.dead_links,
        site_bytes as f64 / 1e6,
        e.max_depth
    );
    let _ = writeln!(
        s,
        "trawl {}; fetch slots {} per process, distributed with {} workers; politeness min_delay_ms 0",
        trawl_bin().display(),
        settings.concurrency,
        settings.workers
    );
    let _ = writeln!(
        s,
        "command: trawl crawl {} {}\n",
        bench.seed(),
        bench
            .crawl_args(false)
            .iter()
            .skip(2)
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let _ = writeln!(
        s,
        "{:<14} {:>7} {:>7} {:>7} {:>8} {:>9} {:>8} {:>9} {:>6} {:>5} {:>5}",
        "run",
        "wall s",
        "CPU s",
        "fetched",
        "pages/s",
        "CPU ms/pg",
        "peak MB",
        "stored",
        "fail",
        "dup",
        "robot"
    );
    let mut failures = Vec::new();
    for run in runs {
        let _ = writeln!(
            s,
            "{:<14} {:>7.2} {:>7.2} {:>7} {:>8.0} {:>9.2} {:>8.0} {:>9} {:>6} {:>5} {:>5}",
            format!("{} {}", run.mode.name(), run.index),
            run.crawl.wall,
            run.cpu_seconds(),
            run.summary.fetched,
            run.pages_per_sec(),
            run.cpu_ms_per_page(),
            run.max_rss_mb(),
            run.stored_rows,
            run.summary.failed,
            run.summary.duplicates,
            run.summary.skipped_robots,
        );
        for (name, usage, samples) in &run.fetchers {
            let _ = writeln!(
                s,
                "    {name}: {:.2} s user, {:.2} s sys, peak RSS {:.0} MB; VmRSS {}",
                usage.user,
                usage.sys,
                usage.rss_kb as f64 / 1024.0,
                samples.describe()
            );
        }
        let c = &run.summary;
        let _ = writeln!(
            s,
            "    urls: {} discovered, {} queued; skipped {} scope, {} robots, {} depth, {} limit, {} duplicates",
            c.discovered,
            c.queued,
            c.skipped_scope,
            c.skipped_robots,
            c.skipped_depth,
            c.skipped_limit,
            c.duplicates
        );
        for note in &run.log_notes {
            let _ = writeln!(s, "    {note}");
        }
        for failure in &run.failures {
            let _ = writeln!(s, "    !!! {failure}");
            failures.push(format!("{} run {}: {failure}", run.mode.name(), run.index));
        }
    }
    let medians = |mode: Mode| -> Option<(f64, f64, f64)> {
        let of: Vec<&Run> = runs.iter().filter(|r| r.mode == mode).collect();
        (!of.is_empty()).then(|| {
            (
                median(of.iter().map(|r| r.pages_per_sec()).collect()),
                median(of.iter().map(|r| r.cpu_ms_per_page()).collect()),
                median(of.iter().map(|r| r.max_rss_mb()).collect()),
            )
        })
    };
    let _ = writeln!(
        s,
        "\n{:<34} {:>10} {:>12} {:>24}",
        "metric (median)", "value", "target", "ratio"
    );
    for mode in [Mode::Embedded, Mode::Distributed] {
        let Some((pps, cpu, rss)) = medians(mode) else {
            continue;
        };
        let name = mode.name();
        let _ = writeln!(
            s,
            "{:<34} {:>10.0} {:>12} {:>24}",
            format!("{name} pages/s"),
            pps,
            ">= 400",
            against_target(pps, TARGET_PAGES_PER_SEC, pps >= TARGET_PAGES_PER_SEC)
        );
        let _ = writeln!(
            s,
            "{:<34} {:>10.2} {:>12} {:>24}",
            format!("{name} CPU ms/page (all procs)"),
            cpu,
            "-",
            "-"
        );
        let _ = writeln!(
            s,
            "{:<34} {:>10.0} {:>12} {:>24}",
            format!("{name} peak RSS MB (per process)"),
            rss,
            "< 300",
            against_target(rss, TARGET_RSS_MB, rss < TARGET_RSS_MB)
        );
    }
    if let (Some((embedded, _, _)), Some((distributed, _, _))) =
        (medians(Mode::Embedded), medians(Mode::Distributed))
    {
        let share = distributed / embedded.max(1e-9);
        let _ = writeln!(
            s,
            "{:<34} {:>10.2} {:>12} {:>24}",
            "distributed / embedded pages/s",
            share,
            ">= 0.90",
            verdict(share >= TARGET_DISTRIBUTED_SHARE)
        );
    }
    if failures.is_empty() {
        let _ = writeln!(s, "\ncorrectness: every check passed on every run");
    } else {
        let _ = writeln!(
            s,
            "\n!!!!! CORRECTNESS: {} CHECK(S) FAILED (see the runs above) !!!!!",
            failures.len()
        );
    }
    println!("{s}");
    failures
}
