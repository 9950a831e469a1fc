//! Crawl benchmark: `trawl crawl` over a generated local site served by nginx on 127.0.0.1
//! (`testkit::crawl_site`: articles, tag pages, canonical duplicates, pages
//! disallowed by robots.txt, redirects, dead links, a sitemap index), embedded, embedded with
//! `--archive` and distributed, against a peer crawling the same site in the same run
//! (spider-rs, `/work/shared/peers/`), with the crawl's correctness checked on every run.
//!
//! ```text
//! cargo bench --bench crawl                               # 10,000 articles, 3 runs per mode
//! cargo bench --bench crawl -- 2000                       # another site size
//! TRAWL_BENCH_PAGES=100000 TRAWL_BENCH_RUNS=1 TRAWL_BENCH_MODES=embedded cargo bench --bench crawl
//! TRAWL_BENCH_MODES=distributed TRAWL_BENCH_WORKERS=3 cargo bench --bench crawl
//! TRAWL_BENCH_MODES=peer,peer-fetch,embedded,archive cargo bench --bench crawl
//! TRAWL_BENCH_MODES=archive TRAWL_BENCH_RUNS=1 TRAWL_BENCH_PROFILE=1 cargo bench --bench crawl
//! ```
//!
//! The third line is the flat-RSS check, and the scale check: its embedded pages/s should be
//! within 10 % of a 10,000-page run's on the same machine (two runs of the bench, compared by
//! hand; one run has one site size).
//!
//! Modes (`TRAWL_BENCH_MODES`, default `peer,embedded,archive,distributed`), run interleaved:
//! run 1 of every mode in the order given, then run 2 of every mode, and so on.
//!
//! - **embedded** is `trawl crawl http://127.0.0.1:PORT/p/0 --sitemap --max-depth D
//!   --max-pages <big> --allow-private-network -q -c C` on a fresh data directory (SQLite
//!   store and queue).
//! - **archive** is the same with `--archive` (search index and WARC records), on a fresh
//!   data directory; its CPU and peak RSS are those of the one process.
//! - **distributed** starts its own `redis-server` on a free loopback port and creates a
//!   fresh PostgreSQL database on the local server (unix socket `/var/run/postgresql`, user
//!   `postgres`), starts `TRAWL_BENCH_WORKERS` `trawl work --pools fetch=C` processes on them,
//!   runs `trawl crawl --no-pools` with the same arguments (it queues the crawl and follows
//!   it), then stops the workers with SIGTERM; Redis is stopped and the database dropped at
//!   the end of each run, also when it fails.
//! - **peer** is `spider_extract URL C urls.txt INDEX_DIR 2` (spider-rs 2.53 fetching,
//!   dom_smoothie's Readability to Markdown on 2 threads, a tantivy index, in one process; a
//!   fresh index directory per run): the reference of the ratios.
//! - **peer-fetch** is `spiderbench URL C urls.txt` (spider-rs fetching only): reported, not
//!   a target.
//!
//! The peer starts from the same seed as trawl, `/p/0` (nginx answers `/` with 403: the site
//! has no index page; the peer reads robots.txt but no sitemap, so it reaches the site by its
//! links alone), with C = `TRAWL_BENCH_CONCURRENCY` in flight (the peers README measured with
//! 64; the report says which). Its binaries are looked for in `TRAWL_BENCH_PEER_DIR` (default
//! `$HOME/.cache/spiderpeer-target/release`); when a peer mode is asked for and they are
//! missing, the bench fails before it starts and prints the build command of the peers README.
//!
//! Politeness is opened for the one local host: `politeness.max_concurrent_per_host` = every
//! fetch slot of the mode, `politeness.min_delay_ms` = 0 (robots.txt has no Crawl-delay).
//!
//! Each process runs under GNU time. Per run: pages/s (pages fetched / wall time of `trawl
//! crawl`; for the peer, pages it indexed (`indexed=` of spider_extract's `RESULT` line) or
//! pages answering 200 (spiderbench) / its wall time), CPU ms per page ((user + sys) of every
//! process of the run / pages), peak RSS per process, what an embedded or archive run left on
//! disk (the store's SQLite file with its WAL, and the whole data directory), and VmRSS of
//! each fetching process sampled every second (first after a 3 s warm-up, median, last, max,
//! last/first: with 100,000 pages this is the memory check). Then medians per mode (with the
//! store's size), the targets (distributed ≥ 400 pages/s and within 10% of embedded; peak RSS
//! < 300 MB per process; archive ≤ 2.2 ms CPU per page), and trawl's ratios to the peer's
//! medians: embedded / peer pages/s ≥ 1.3, archive / peer ≥ 1.0, distributed / peer ≥ 1.0, and
//! CPU ms per page and peak RSS against the peer's (no target); the same pages/s ratios against
//! peer-fetch, without targets.
//!
//! The peer's pages are not trawl's: spider-rs keeps URLs that differ only by tracking
//! parameters apart (the site's links carry `?utm_*` and `?fbclid=<random>`) and reads no
//! canonical link, so it fetches, extracts and indexes each document several times (about 6×
//! at 1,000 articles). Its pages/s is work done per second, the reference the targets use; the
//! report adds, without a target, the peer's rate in the site's unique documents per second
//! and trawl's pages/s against it.
//!
//! Correctness, checked on every trawl run (a run that breaks a check makes the bench fail
//! after the report): the pages stored are exactly the site's unique documents (`/p/` and
//! `/tag/`, by final URL, one row each), the crawl's counters (fetched = unique documents,
//! failed = dead links, duplicates = `/dup/` pages + redirects (their targets are known from
//! the sitemap), skipped by robots = `/private/` pages), and
//! nginx's access log: no request to `/private/`, every page requested, every redirect
//! requested once, no page requested twice (a redirect to a known page is refused before its
//! target is requested; robots.txt and sitemaps: counted and shown). Archive runs also check
//! the `archived: …` line: pages archived + unchanged = pages fetched, none failed, WARC
//! response records written. Peer runs fail only on a robots.txt violation (a `/private/` URL
//! in its URL list or the access log); the rest is reported: its URL list's statuses, how
//! many of the site's unique documents it got with a 200 (a note when not all), the `/dup/`
//! and query-string variants it fetched as pages of their own, and what the access log shows.
//!
//! Needs nginx, GNU time (`/usr/bin/time`) and `sqlite3`; distributed also `redis-server`
//! and `psql` with a local PostgreSQL server; the peer modes the peer's binaries. Environment:
//! `TRAWL_BENCH_PAGES` (articles, default 10,000; a bare number argument too),
//! `TRAWL_BENCH_RUNS` (runs per mode, default 3), `TRAWL_BENCH_MODES` (any of `peer`,
//! `peer-fetch`, `embedded`, `archive`, `distributed`; default
//! `peer,embedded,archive,distributed`), `TRAWL_BENCH_WORKERS` (distributed worker processes,
//! default 2), `TRAWL_BENCH_CONCURRENCY` (fetch slots per process, and the peer's
//! concurrency, default 32), `TRAWL_BENCH_TIMEOUT` (seconds one crawl may take, default
//! 1800), `TRAWL_BENCH_KEEP=1` (keep the temporary directory and print its path),
//! `TRAWL_BENCH_BIN=PATH` (another trawl binary than this build's), `TRAWL_BENCH_PG_HOST`
//! (PostgreSQL socket directory, default `/var/run/postgresql`), `TRAWL_BENCH_PEER_DIR` (the
//! peer's binaries, default `$HOME/.cache/spiderpeer-target/release`), `TRAWL_BENCH_PROFILE=1`
//! (after the report, one more crawl of each embedded mode asked for under `perf record`, and
//! its CPU by phase: fetch, parse, extraction, markdown, store, queue, zstd, crawl follow-ups,
//! and the archive's index, page text, chunks and WARC; `TRAWL_BENCH_CALLGRAPH=dwarf|fp` as in
//! the pipeline benchmark).

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
#[path = "common/proc_status.rs"]
mod proc_status;
#[path = "common/process.rs"]
mod process;
#[path = "common/profile.rs"]
mod profile;
#[path = "common/redis.rs"]
mod redis_server;
#[path = "common/server.rs"]
mod server;

#[path = "crawl/checks.rs"]
mod checks;
#[path = "crawl/modes.rs"]
mod modes;
#[path = "crawl/peer.rs"]
mod peer;
#[path = "crawl/proc.rs"]
mod proc;
#[path = "crawl/profiled.rs"]
mod profiled;
#[path = "crawl/report.rs"]
mod report;
#[path = "crawl/run.rs"]
mod run;
#[path = "crawl/stores.rs"]
mod stores;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use figures::load_average;
use knobs::{arg_number, env_flag, env_list, env_number};
use nginx::{Nginx, find_in_path};
use profile::Callgraph;
use report::report;
use run::Run;
use testkit::crawl_site::{CrawlSite, Expected};

type Result<T> = std::result::Result<T, String>;

const DEFAULT_PAGES: u64 = 10_000;
const DEFAULT_MODES: &str = "peer,embedded,archive,distributed";
const TARGET_PAGES_PER_SEC: f64 = 400.0;
const TARGET_RSS_MB: f64 = 300.0;
/// Distributed pages/s at least this share of embedded's.
const TARGET_DISTRIBUTED_SHARE: f64 = 0.9;
/// Embedded (`trawl crawl`, no archive) pages/s at least this multiple of the peer's.
const TARGET_EMBEDDED_VS_PEER: f64 = 1.3;
/// `trawl crawl --archive` pages/s at least this multiple of the peer's.
const TARGET_ARCHIVE_VS_PEER: f64 = 1.0;
/// `trawl crawl --archive` CPU ms per page at most.
const TARGET_ARCHIVE_CPU_MS: f64 = 2.2;
/// Distributed pages/s at least this multiple of the peer's.
const TARGET_DISTRIBUTED_VS_PEER: f64 = 1.0;
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
    /// The peer with extraction and indexing (`spider_extract`): the reference of the ratios.
    Peer,
    /// The peer fetching only (`spiderbench`): reported, not a target.
    PeerFetch,
    Embedded,
    /// Embedded with `--archive`.
    Archive,
    Distributed,
}

impl Mode {
    const ALL: [Mode; 5] = [
        Mode::Peer,
        Mode::PeerFetch,
        Mode::Embedded,
        Mode::Archive,
        Mode::Distributed,
    ];

    fn name(self) -> &'static str {
        match self {
            Mode::Peer => "peer",
            Mode::PeerFetch => "peer-fetch",
            Mode::Embedded => "embedded",
            Mode::Archive => "archive",
            Mode::Distributed => "distributed",
        }
    }

    fn is_peer(self) -> bool {
        matches!(self, Mode::Peer | Mode::PeerFetch)
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
    /// Where the peer's binaries are (`TRAWL_BENCH_PEER_DIR`).
    peer_dir: PathBuf,
    /// Profile one more run of each embedded mode (`TRAWL_BENCH_PROFILE`).
    profile: bool,
    callgraph: Callgraph,
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
    let modes = env_list("TRAWL_BENCH_MODES", DEFAULT_MODES, "mode", |name| {
        Mode::ALL
            .into_iter()
            .find(|mode| mode.name() == name)
            .ok_or_else(|| {
                format!(
                    "TRAWL_BENCH_MODES: unknown mode {name:?} ({})",
                    Mode::ALL.map(Mode::name).join(", ")
                )
            })
    })?;
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
        peer_dir: peer::peer_dir(),
        profile: env_flag("TRAWL_BENCH_PROFILE"),
        callgraph: Callgraph::from_env()?,
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
    peer::check_peer_bins(settings)?;
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
    // Interleaved: run i of every mode, then run i + 1, so a drift of the machine's load
    // weighs on every mode alike.
    for i in 1..=settings.runs {
        for &mode in &settings.modes {
            let run = bench.run(mode, i)?;
            eprintln!("{}", run.line());
            runs.push(run);
        }
    }
    let load_after = load_average();
    let failures = report(&bench, &runs, &load_before, &load_after, written.bytes);
    if settings.profile {
        for &mode in &settings.modes {
            if matches!(mode, Mode::Embedded | Mode::Archive) {
                bench.profile(mode)?;
            }
        }
    }
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
