//! The crawl bench's report: the site and settings (the commands, trawl's and the peer's), one
//! row per run with its processes, archive line, access log notes and broken checks, then the
//! medians per mode, the targets, and trawl's ratios to the peer's medians. It prints and
//! collects the failures; it does not run or check anything.

use std::fmt::Write as _;

use crate::figures::{against_target, median, verdict};
use crate::peer::{EXTRACT_THREADS, README_CONCURRENCY, peer_bin};
use crate::process::trawl_bin;
use crate::run::Run;
use crate::{
    Bench, Mode, TARGET_ARCHIVE_CPU_MS, TARGET_ARCHIVE_VS_PEER, TARGET_DISTRIBUTED_SHARE,
    TARGET_DISTRIBUTED_VS_PEER, TARGET_EMBEDDED_VS_PEER, TARGET_PAGES_PER_SEC, TARGET_RSS_MB,
};

/// The medians of one mode's runs.
struct Medians {
    pages_per_sec: f64,
    cpu_ms: f64,
    rss_mb: f64,
    /// The store file's size after the run (NaN where none was measured).
    store_mb: f64,
}

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
    let trawl_args = bench
        .crawl_args(false)
        .iter()
        .skip(2)
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ");
    let _ = writeln!(s, "command: trawl crawl {} {trawl_args}", bench.seed());
    if settings.modes.contains(&Mode::Archive) {
        let _ = writeln!(
            s,
            "archive: trawl crawl {} {trawl_args} --archive",
            bench.seed()
        );
    }
    for mode in [Mode::Peer, Mode::PeerFetch] {
        if settings.modes.contains(&mode) {
            let args = bench
                .peer_args(mode, std::path::Path::new("RUN"))
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" ");
            let _ = writeln!(
                s,
                "{}: {} {args}",
                mode.name(),
                settings.peer_dir.join(peer_bin(mode)).display()
            );
        }
    }
    if settings.modes.iter().any(|mode| mode.is_peer()) {
        let _ = writeln!(
            s,
            "peer: spider-rs 2.53 (robots.txt obeyed, no sitemap, from the same seed), {} in flight (TRAWL_BENCH_CONCURRENCY; the peers README measured with {README_CONCURRENCY}), spider_extract with {EXTRACT_THREADS} extraction threads; its pages/s counts indexed pages (spider_extract) or pages answering 200 (spiderbench) over GNU time's wall",
            settings.concurrency
        );
    }
    let _ = writeln!(
        s,
        "runs interleaved: run i of every mode ({}), then run i + 1\n",
        settings
            .modes
            .iter()
            .map(|mode| mode.name())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        s,
        "{:<14} {:>7} {:>7} {:>7} {:>8} {:>9} {:>8} {:>9} {:>6} {:>5} {:>5}",
        "run",
        "wall s",
        "CPU s",
        "pages",
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
        let (stored, fail, dup, robot) = match &run.peer {
            // For the peer: the site's unique documents it got; the other counters are trawl's.
            Some(peer) => (
                format!("{}", peer.unique_documents),
                "-".to_owned(),
                "-".to_owned(),
                "-".to_owned(),
            ),
            None => (
                run.stored_rows.to_string(),
                run.summary.failed.to_string(),
                run.summary.duplicates.to_string(),
                run.summary.skipped_robots.to_string(),
            ),
        };
        let _ = writeln!(
            s,
            "{:<14} {:>7.2} {:>7.2} {:>7} {:>8.0} {:>9.2} {:>8.0} {:>9} {:>6} {:>5} {:>5}",
            format!("{} {}", run.mode.name(), run.index),
            run.crawl.wall,
            run.cpu_seconds(),
            run.pages(),
            run.pages_per_sec(),
            run.cpu_ms_per_page(),
            run.max_rss_mb(),
            stored,
            fail,
            dup,
            robot,
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
        if let Some(peer) = &run.peer {
            let _ = writeln!(s, "    {}", peer.line);
        } else {
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
        }
        if let Some(a) = &run.archived {
            let _ = writeln!(
                s,
                "    archived: {} pages, {} chunks, {} page documents ({} unchanged, {} failed); WARC: {} responses, {} revisits",
                a.pages,
                a.chunks,
                a.page_docs,
                a.unchanged,
                a.failed,
                a.warc_responses,
                a.warc_revisits
            );
        }
        if let Some(disk) = &run.disk {
            let _ = writeln!(
                s,
                "    on disk: store {:.0} MB (SQLite file and WAL), data directory {:.0} MB",
                disk.store as f64 / 1e6,
                disk.data as f64 / 1e6
            );
        }
        for note in &run.log_notes {
            let _ = writeln!(s, "    {note}");
        }
        for failure in &run.failures {
            let _ = writeln!(s, "    !!! {failure}");
            failures.push(format!("{} run {}: {failure}", run.mode.name(), run.index));
        }
    }
    let medians = |mode: Mode| -> Option<Medians> {
        let of: Vec<&Run> = runs.iter().filter(|r| r.mode == mode).collect();
        (!of.is_empty()).then(|| Medians {
            pages_per_sec: median(of.iter().map(|r| r.pages_per_sec()).collect()),
            cpu_ms: median(of.iter().map(|r| r.cpu_ms_per_page()).collect()),
            rss_mb: median(of.iter().map(|r| r.max_rss_mb()).collect()),
            store_mb: median(
                of.iter()
                    .filter_map(|r| r.disk)
                    .map(|disk| disk.store as f64 / 1e6)
                    .collect(),
            ),
        })
    };
    let _ = writeln!(
        s,
        "\n{:<14} {:>5} {:>9} {:>10} {:>8} {:>9}",
        "median", "runs", "pages/s", "CPU ms/pg", "peak MB", "store MB"
    );
    for &mode in &settings.modes {
        if let Some(m) = medians(mode) {
            let _ = writeln!(
                s,
                "{:<14} {:>5} {:>9.0} {:>10.2} {:>8.0} {:>9}",
                mode.name(),
                runs.iter().filter(|r| r.mode == mode).count(),
                m.pages_per_sec,
                m.cpu_ms,
                m.rss_mb,
                if m.store_mb.is_finite() {
                    format!("{:.0}", m.store_mb)
                } else {
                    "-".to_owned()
                }
            );
        }
    }
    let line = |s: &mut String, metric: &str, value: String, target: &str, verdict: String| {
        let _ = writeln!(s, "{metric:<38} {value:>10} {target:>12} {verdict:>24}");
    };
    let _ = writeln!(
        s,
        "\n{:<38} {:>10} {:>12} {:>24}",
        "metric (median)", "value", "target", "ratio"
    );
    for mode in [Mode::Embedded, Mode::Archive, Mode::Distributed] {
        let Some(m) = medians(mode) else {
            continue;
        };
        let name = mode.name();
        if mode == Mode::Archive {
            line(
                &mut s,
                &format!("{name} pages/s"),
                format!("{:.0}", m.pages_per_sec),
                "-",
                "-".to_owned(),
            );
            line(
                &mut s,
                &format!("{name} CPU ms/page"),
                format!("{:.2}", m.cpu_ms),
                "<= 2.2",
                against_target(
                    m.cpu_ms,
                    TARGET_ARCHIVE_CPU_MS,
                    m.cpu_ms <= TARGET_ARCHIVE_CPU_MS,
                ),
            );
        } else {
            line(
                &mut s,
                &format!("{name} pages/s"),
                format!("{:.0}", m.pages_per_sec),
                ">= 400",
                against_target(
                    m.pages_per_sec,
                    TARGET_PAGES_PER_SEC,
                    m.pages_per_sec >= TARGET_PAGES_PER_SEC,
                ),
            );
            line(
                &mut s,
                &format!("{name} CPU ms/page (all procs)"),
                format!("{:.2}", m.cpu_ms),
                "-",
                "-".to_owned(),
            );
        }
        line(
            &mut s,
            &format!("{name} peak RSS MB (per process)"),
            format!("{:.0}", m.rss_mb),
            "< 300",
            against_target(m.rss_mb, TARGET_RSS_MB, m.rss_mb < TARGET_RSS_MB),
        );
    }
    if let (Some(embedded), Some(distributed)) =
        (medians(Mode::Embedded), medians(Mode::Distributed))
    {
        let share = distributed.pages_per_sec / embedded.pages_per_sec.max(1e-9);
        line(
            &mut s,
            "distributed / embedded pages/s",
            format!("{share:.2}"),
            ">= 0.90",
            verdict(share >= TARGET_DISTRIBUTED_SHARE).to_owned(),
        );
    }
    if let Some(peer) = medians(Mode::Peer) {
        let _ = writeln!(
            s,
            "\nagainst the peer (spider_extract median: {:.0} pages/s, {:.2} CPU ms/page, {:.0} MB peak RSS)",
            peer.pages_per_sec, peer.cpu_ms, peer.rss_mb
        );
        let targets = [
            (Mode::Embedded, TARGET_EMBEDDED_VS_PEER, ">= 1.3"),
            (Mode::Archive, TARGET_ARCHIVE_VS_PEER, ">= 1.0"),
            (Mode::Distributed, TARGET_DISTRIBUTED_VS_PEER, ">= 1.0"),
        ];
        for (mode, target, shown) in targets {
            let Some(m) = medians(mode) else {
                continue;
            };
            let ratio = m.pages_per_sec / peer.pages_per_sec.max(1e-9);
            line(
                &mut s,
                &format!("{} / peer pages/s", mode.name()),
                format!("{ratio:.2}"),
                shown,
                against_target(ratio, target, ratio >= target),
            );
        }
        for (mode, _, _) in targets {
            let Some(m) = medians(mode) else {
                continue;
            };
            line(
                &mut s,
                &format!("{} / peer CPU ms/page", mode.name()),
                format!("{:.2}", m.cpu_ms / peer.cpu_ms.max(1e-9)),
                "-",
                "-".to_owned(),
            );
        }
        for (mode, _, _) in targets {
            let Some(m) = medians(mode) else {
                continue;
            };
            line(
                &mut s,
                &format!("{} / peer peak RSS", mode.name()),
                format!("{:.2}", m.rss_mb / peer.rss_mb.max(1e-9)),
                "-",
                "-".to_owned(),
            );
        }
    } else if settings
        .modes
        .iter()
        .any(|mode| matches!(mode, Mode::Embedded | Mode::Archive | Mode::Distributed))
    {
        let _ = writeln!(
            s,
            "\nno peer run (mode `peer` not in TRAWL_BENCH_MODES): no ratios against the peer"
        );
    }
    let peer_unique = |mode: Mode| -> Option<f64> {
        let of: Vec<f64> = runs
            .iter()
            .filter(|r| r.mode == mode)
            .filter_map(|r| {
                r.peer
                    .as_ref()
                    .map(|peer| peer.unique_documents_per_sec(r.crawl.wall))
            })
            .collect();
        (!of.is_empty()).then(|| median(of))
    };
    if let Some(unique) = peer_unique(Mode::Peer) {
        let _ = writeln!(
            s,
            "
the peer per unique document (the site's unique documents it got / wall; no target): {unique:.0} documents/s"
        );
        for mode in [Mode::Embedded, Mode::Archive, Mode::Distributed] {
            let Some(m) = medians(mode) else {
                continue;
            };
            line(
                &mut s,
                &format!("{} / peer unique documents/s", mode.name()),
                format!("{:.2}", m.pages_per_sec / unique.max(1e-9)),
                "-",
                "-".to_owned(),
            );
        }
    }
    if let Some(fetch) = medians(Mode::PeerFetch) {
        let _ = writeln!(
            s,
            "\nagainst the peer fetching only (spiderbench median: {:.0} pages/s, {:.2} CPU ms/page, {:.0} MB peak RSS; no target)",
            fetch.pages_per_sec, fetch.cpu_ms, fetch.rss_mb
        );
        for mode in [Mode::Embedded, Mode::Archive, Mode::Distributed] {
            let Some(m) = medians(mode) else {
                continue;
            };
            line(
                &mut s,
                &format!("{} / peer-fetch pages/s", mode.name()),
                format!("{:.2}", m.pages_per_sec / fetch.pages_per_sec.max(1e-9)),
                "-",
                "-".to_owned(),
            );
        }
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
