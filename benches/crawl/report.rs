//! The crawl bench's report: the site and settings, one row per run with its processes, access
//! log notes and broken checks, then the medians per mode against the targets. It prints and
//! collects the failures; it does not run or check anything.

use std::fmt::Write as _;

use crate::figures::{against_target, median, verdict};
use crate::process::trawl_bin;
use crate::run::Run;
use crate::{Bench, Mode, TARGET_DISTRIBUTED_SHARE, TARGET_PAGES_PER_SEC, TARGET_RSS_MB};

/// Prints the report; returns the broken checks of every run.
pub(crate) fn report(
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
