//! One crawl run's figures: the VmRSS samples of a fetching process, the counters `trawl crawl`
//! prints (parsed from its output, with the `archived: …` line of `--archive`), the peer's
//! `RESULT` line and URL list, and the [`Run`] that gathers them with the run's broken checks
//! and its one-line description. It does not start processes, check the crawl or print the
//! report.

use crate::process::Usage;
use crate::{Mode, Result, WARM_UP_SAMPLES};

/// VmRSS samples of one process, in kB, one a second.
#[derive(Debug, Clone, Default)]
pub(crate) struct Samples(pub(crate) Vec<u64>);

impl Samples {
    pub(crate) fn summary(&self) -> Option<(u64, u64, u64, u64)> {
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

    pub(crate) fn describe(&self) -> String {
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
pub(crate) struct Summary {
    pub(crate) fetched: u64,
    pub(crate) failed: u64,
    pub(crate) discovered: u64,
    pub(crate) queued: u64,
    pub(crate) skipped_scope: u64,
    pub(crate) skipped_robots: u64,
    pub(crate) skipped_depth: u64,
    pub(crate) skipped_limit: u64,
    pub(crate) duplicates: u64,
}

/// The `archived: N pages, M chunks, D page documents (U unchanged, F failed); WARC: R
/// responses, V revisits` line `trawl crawl --archive` prints.
#[derive(Debug, Clone, Default)]
pub(crate) struct Archived {
    pub(crate) pages: u64,
    pub(crate) chunks: u64,
    pub(crate) page_docs: u64,
    pub(crate) unchanged: u64,
    pub(crate) failed: u64,
    pub(crate) warc_responses: u64,
    pub(crate) warc_revisits: u64,
}

/// What a peer run did: its `RESULT` line and what its URL list shows.
#[derive(Debug, Clone, Default)]
pub(crate) struct PeerResult {
    /// The `RESULT …` line as printed.
    pub(crate) line: String,
    /// The pages its pages/s counts: `indexed=` (spider_extract) or the pages answering 200
    /// (spiderbench).
    pub(crate) pages: u64,
    /// Lines of its URL list, and those with status 200.
    pub(crate) listed: u64,
    pub(crate) ok: u64,
    /// Distinct paths (query and fragment dropped) of the 200 pages.
    pub(crate) unique_ok_paths: u64,
    /// How many of the site's unique documents (`/p/`, `/tag/`) it got with a 200.
    pub(crate) unique_documents: u64,
}

impl PeerResult {
    /// The site's unique documents it got per second of `wall`: its rate counted as trawl's
    /// is (it fetches a document again under each tracking-parameter spelling of its URL).
    pub(crate) fn unique_documents_per_sec(&self, wall: f64) -> f64 {
        self.unique_documents as f64 / wall.max(1e-9)
    }
}

pub(crate) struct Run {
    pub(crate) mode: Mode,
    pub(crate) index: usize,
    /// GNU time's figures of the crawl (`trawl crawl`, or the peer).
    pub(crate) crawl: Usage,
    /// The fetching processes: the crawl itself (embedded) or the workers.
    pub(crate) fetchers: Vec<(String, Usage, Samples)>,
    pub(crate) summary: Summary,
    /// Pages in the store: rows, and distinct final URLs.
    pub(crate) stored_rows: u64,
    /// What the access log showed, as lines for the report.
    pub(crate) log_notes: Vec<String>,
    /// Broken correctness checks.
    pub(crate) failures: Vec<String>,
    /// Archive mode: the `archived: …` line.
    pub(crate) archived: Option<Archived>,
    /// Peer modes: what the peer did (`summary` and `stored_rows` stay empty).
    pub(crate) peer: Option<PeerResult>,
    /// Embedded and archive modes: what the run left on disk.
    pub(crate) disk: Option<Disk>,
}

/// What an embedded run left in its data directory, in bytes.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Disk {
    /// The whole data directory: store, queue, and with `--archive` the search index and WARC
    /// files.
    pub(crate) data: u64,
    /// The store's SQLite file with its write-ahead log.
    pub(crate) store: u64,
}

impl Disk {
    /// Measures the data directory `data`, whose store is `trawl.sqlite`.
    pub(crate) fn of(data: &std::path::Path) -> Disk {
        let file = |name: &str| std::fs::metadata(data.join(name)).map_or(0, |m| m.len());
        Disk {
            data: crate::figures::dir_size(data),
            store: file("trawl.sqlite") + file("trawl.sqlite-wal"),
        }
    }
}

impl Run {
    /// The pages the rate counts: trawl's fetched pages, or the peer's.
    pub(crate) fn pages(&self) -> u64 {
        self.peer
            .as_ref()
            .map_or(self.summary.fetched, |peer| peer.pages)
    }

    pub(crate) fn pages_per_sec(&self) -> f64 {
        self.pages() as f64 / self.crawl.wall.max(1e-9)
    }

    pub(crate) fn cpu_seconds(&self) -> f64 {
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

    pub(crate) fn cpu_ms_per_page(&self) -> f64 {
        self.cpu_seconds() * 1e3 / self.pages().max(1) as f64
    }

    pub(crate) fn max_rss_mb(&self) -> f64 {
        self.fetchers
            .iter()
            .map(|(_, usage, _)| usage.rss_kb)
            .chain([self.crawl.rss_kb])
            .max()
            .unwrap_or(0) as f64
            / 1024.0
    }

    pub(crate) fn line(&self) -> String {
        format!(
            "{} run {}: {:.1} s wall, {} {}, {:.0} pages/s, {:.2} ms CPU/page, peak RSS {:.0} MB, {}{}",
            self.mode.name(),
            self.index,
            self.crawl.wall,
            self.pages(),
            match self.mode {
                Mode::Peer => "indexed",
                Mode::PeerFetch => "fetched (200)",
                _ => "fetched",
            },
            self.pages_per_sec(),
            self.cpu_ms_per_page(),
            self.max_rss_mb(),
            self.disk.map_or(String::new(), |disk| format!(
                "store {:.0} MB of {:.0} MB on disk, ",
                disk.store as f64 / 1e6,
                disk.data as f64 / 1e6
            )),
            if self.failures.is_empty() {
                "checks passed".to_owned()
            } else {
                format!("{} CHECKS FAILED", self.failures.len())
            }
        )
    }
}

/// Reads `trawl crawl`'s summary: "… N pages fetched, C from cache, F failed in …" and
/// "urls: …".
pub(crate) fn parse_summary(stdout: &str) -> Result<Summary> {
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
        // "N pages fetched, C from cache, F failed"
        (
            [fetched, _cached, failed],
            [discovered, queued, scope, robots, depth, limit, duplicates],
        ) => Ok(Summary {
            fetched: *fetched,
            failed: *failed,
            discovered: *discovered,
            queued: *queued,
            skipped_scope: *scope,
            skipped_robots: *robots,
            skipped_depth: *depth,
            skipped_limit: *limit,
            duplicates: *duplicates,
        }),
        _ => Err(format!("unexpected summary lines {done:?} / {urls:?}")),
    }
}

/// The numbers of a line, in order.
fn numbers(line: &str) -> Vec<u64> {
    line.split(|c: char| !c.is_ascii_digit())
        .filter(|part| !part.is_empty())
        .filter_map(|part| part.parse().ok())
        .collect()
}

/// Reads the `archived: …` line `trawl crawl --archive` prints (`archive::Stats`'s Display).
pub(crate) fn parse_archived(stdout: &str) -> Result<Archived> {
    let line = stdout
        .lines()
        .find_map(|line| line.strip_prefix("archived: "))
        .ok_or("no `archived: …` line in trawl crawl --archive's output")?;
    match numbers(line)[..] {
        [
            pages,
            chunks,
            page_docs,
            unchanged,
            failed,
            warc_responses,
            warc_revisits,
        ] => Ok(Archived {
            pages,
            chunks,
            page_docs,
            unchanged,
            failed,
            warc_responses,
            warc_revisits,
        }),
        _ => Err(format!("unexpected archive line {line:?}")),
    }
}

/// The `key=value` fields of the peer's `RESULT tool=… pages=N …` line.
pub(crate) fn parse_peer_result(stdout: &str) -> Result<(String, Vec<(String, String)>)> {
    let line = stdout
        .lines()
        .find(|line| line.starts_with("RESULT "))
        .ok_or("no `RESULT …` line in the peer's output")?;
    let fields = line
        .split_whitespace()
        .skip(1)
        .filter_map(|field| field.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect();
    Ok((line.to_owned(), fields))
}
