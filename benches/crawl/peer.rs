//! The peer the crawl bench compares trawl against (`/work/shared/peers/README.md`): spider-rs
//! 2.53 crawling the same site, fetch only (`spiderbench`, mode `peer-fetch`) or with
//! dom_smoothie (Readability, Markdown) and a tantivy index in the same process
//! (`spider_extract`, mode `peer`, the reference of the ratios). Where its binaries are, the
//! command of a run under GNU time, its `RESULT` line and its URL list (`STATUS URL` a line):
//! the pages its rate counts, the site's unique documents it got, and no `/private/` URL
//! (disallowed by robots.txt). The peer is built outside the project; this module only runs it.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::proc::Proc;
use crate::process::timed;
use crate::run::{PeerResult, Run, Summary, parse_peer_result};
use crate::{Bench, Mode, Result, Settings};

/// Extraction threads of `spider_extract` (the peers README's figure).
pub(crate) const EXTRACT_THREADS: usize = 2;

/// The concurrency the peers README measured the peer with (the bench uses its own).
pub(crate) const README_CONCURRENCY: usize = 64;

/// How to build the peer (the peers README).
const BUILD: &str = "cp -r /work/shared/peers/spider \"$HOME/.cache/spiderpeer-src\" && \
                     (cd \"$HOME/.cache/spiderpeer-src\" && \
                     CARGO_TARGET_DIR=$HOME/.cache/spiderpeer-target cargo build --release)";

/// `TRAWL_BENCH_PEER_DIR`, or `$HOME/.cache/spiderpeer-target/release`.
pub(crate) fn peer_dir() -> PathBuf {
    std::env::var_os("TRAWL_BENCH_PEER_DIR").map_or_else(
        || {
            std::env::var_os("HOME")
                .map_or_else(|| PathBuf::from("."), PathBuf::from)
                .join(".cache/spiderpeer-target/release")
        },
        PathBuf::from,
    )
}

/// The peer's binary for `mode`.
pub(crate) fn peer_bin(mode: Mode) -> &'static str {
    if mode == Mode::Peer {
        "spider_extract"
    } else {
        "spiderbench"
    }
}

/// Fails, saying how to build it, when a peer mode is asked for and its binary is missing.
pub(crate) fn check_peer_bins(settings: &Settings) -> Result<()> {
    for &mode in settings.modes.iter().filter(|mode| mode.is_peer()) {
        let bin = settings.peer_dir.join(peer_bin(mode));
        if !bin.is_file() {
            return Err(format!(
                "mode {}: the peer's {} is missing (TRAWL_BENCH_PEER_DIR={}); build it with\n  {BUILD}\nor leave the peer modes out of TRAWL_BENCH_MODES",
                mode.name(),
                bin.display(),
                settings.peer_dir.display()
            ));
        }
    }
    Ok(())
}

impl Bench<'_> {
    /// The peer's arguments after its binary: seed, concurrency, URL list (and for
    /// `spider_extract` the index directory and the extraction threads).
    pub(crate) fn peer_args(&self, mode: Mode, dir: &Path) -> Vec<OsString> {
        // The seed trawl starts from: nginx answers `/` with 403 (no index page), and the peer
        // reads no sitemap, so it has to start from the page that links the site.
        let mut args: Vec<OsString> = vec![
            self.seed().into(),
            self.settings.concurrency.to_string().into(),
            dir.join("urls.txt").into(),
        ];
        if mode == Mode::Peer {
            args.push(dir.join("index").into());
            args.push(EXTRACT_THREADS.to_string().into());
        }
        args
    }

    /// One run of the peer under GNU time, a fresh index directory each time.
    pub(crate) fn run_peer(&self, mode: Mode, dir: &Path, index: usize) -> Result<Run> {
        let bin = self.settings.peer_dir.join(peer_bin(mode));
        let time_file = dir.join("peer.time");
        let mut command = timed(&bin, &time_file);
        command.args(self.peer_args(mode, dir));
        let peer = Proc::spawn(command, &time_file, dir, peer_bin(mode))?;
        let (done, samples) = peer.wait_sampling(self.settings.timeout, &[])?;
        let what = |e: String| format!("{} run {index}: {e}\n{}", mode.name(), done.output_tail());
        let (line, fields) = parse_peer_result(&done.stdout).map_err(what)?;
        let field = |key: &str| -> Result<u64> {
            fields
                .iter()
                .find(|(k, _)| k == key)
                .and_then(|(_, value)| value.parse().ok())
                .ok_or_else(|| what(format!("no number {key}= in {line:?}")))
        };
        let urls_file = dir.join("urls.txt");
        let urls = std::fs::read_to_string(&urls_file)
            .map_err(|e| format!("reading {}: {e}", urls_file.display()))?;
        let mut run = Run {
            mode,
            index,
            crawl: done.usage.clone(),
            fetchers: vec![(
                peer_bin(mode).to_owned(),
                done.usage.clone(),
                samples.into_iter().next().unwrap_or_default(),
            )],
            summary: Summary::default(),
            stored_rows: 0,
            log_notes: Vec::new(),
            failures: Vec::new(),
            archived: None,
            peer: None,
            disk: None,
        };
        let mut result = self.read_peer_urls(&mut run, &urls);
        result.pages = if mode == Mode::Peer {
            field("indexed")?
        } else {
            result.ok
        };
        let lagged = if mode == Mode::Peer {
            field("lagged")?
        } else {
            // spiderbench prints `lagged N` to stderr when its channel dropped pages.
            done.stderr
                .lines()
                .filter_map(|line| line.strip_prefix("lagged "))
                .filter_map(|n| n.trim().parse::<u64>().ok())
                .sum()
        };
        result.line = line;
        if lagged > 0 {
            run.log_notes.push(format!(
                "NOTE: the peer's channel lagged: {lagged} pages not seen by its counter"
            ));
        }
        run.peer = Some(result);
        Ok(run)
    }

    /// The peer's URL list (`STATUS URL` a line): what it fetched; a `/private/` URL is a
    /// broken check, other differences from the site are notes.
    fn read_peer_urls(&self, run: &mut Run, urls: &str) -> PeerResult {
        let e = &self.expected;
        let mut result = PeerResult::default();
        let mut ok_paths = BTreeSet::new();
        let mut ok_with_query = 0;
        let mut private = Vec::new();
        let mut statuses: std::collections::BTreeMap<String, u64> = Default::default();
        for line in urls.lines().filter(|line| !line.trim().is_empty()) {
            result.listed += 1;
            let (status, url) = line.split_once(' ').unwrap_or(("?", line));
            *statuses.entry(status.to_owned()).or_default() += 1;
            let parsed = url::Url::parse(url.trim()).ok();
            let path = parsed
                .as_ref()
                .map_or_else(|| url.to_owned(), |u| u.path().to_owned());
            if path.starts_with("/private/") {
                private.push(url.to_owned());
            }
            if status == "200" {
                result.ok += 1;
                if parsed.as_ref().is_some_and(|u| u.query().is_some()) {
                    ok_with_query += 1;
                }
                ok_paths.insert(path);
            }
        }
        let unique = self.site.unique_paths();
        result.unique_ok_paths = ok_paths.len() as u64;
        result.unique_documents = unique.intersection(&ok_paths).count() as u64;
        let dup_paths = ok_paths.iter().filter(|p| p.starts_with("/dup/")).count();
        if !private.is_empty() {
            run.failures.push(format!(
                "the peer fetched {} /private/ URLs (disallowed by robots.txt), e.g. {:?}",
                private.len(),
                private.iter().take(3).collect::<Vec<_>>()
            ));
        }
        run.log_notes.push(format!(
            "urls: {} listed ({}); {} with 200, of them {ok_with_query} with a query; {} distinct 200 paths: {} of the {} unique documents, {dup_paths} /dup/",
            result.listed,
            statuses
                .iter()
                .map(|(status, n)| format!("{status} ×{n}"))
                .collect::<Vec<_>>()
                .join(", "),
            result.ok,
            result.unique_ok_paths,
            result.unique_documents,
            e.unique_documents
        ));
        if result.ok > result.unique_documents {
            run.log_notes.push(format!(
                "NOTE: the peer fetched {} pages with a 200 for the site's {} unique documents: it keeps URLs that differ only by tracking parameters (?utm_*, ?fbclid=<random>) apart and reads no canonical link (/dup/); its pages/s counts them all",
                result.ok, e.unique_documents
            ));
        }
        if result.unique_documents != e.unique_documents {
            let missing: Vec<&String> = unique.difference(&ok_paths).take(5).collect();
            run.log_notes.push(format!(
                "NOTE: the peer got {} of the site's {} unique documents (missing e.g. {missing:?}); not a failure",
                result.unique_documents, e.unique_documents
            ));
        }
        result
    }
}
