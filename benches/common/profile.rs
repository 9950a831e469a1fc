//! CPU profiles of a benchmark's trawl process by phase: `perf record` of one run, then perf's
//! flat report and a breakdown that gives each sample to the innermost frame naming a phase
//! (fetch, parse, extraction, markdown, store, queue, compression, archive index, page text,
//! chunks, WARC, crawl follow-ups). The pipeline and crawl benchmarks use it.
//!
//! Not here: running the benchmark's timed runs, or deciding which run to profile.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

/// How perf unwinds stacks (`TRAWL_BENCH_CALLGRAPH`): DWARF by default (the release build
/// has no frame pointers), or frame pointers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Callgraph {
    Dwarf,
    FramePointers,
}

impl Callgraph {
    /// `TRAWL_BENCH_CALLGRAPH`: `dwarf` (default) or `fp`.
    pub(crate) fn from_env() -> Result<Callgraph, String> {
        match std::env::var("TRAWL_BENCH_CALLGRAPH").as_deref() {
            Err(_) | Ok("dwarf") => Ok(Callgraph::Dwarf),
            Ok("fp") => Ok(Callgraph::FramePointers),
            Ok(other) => Err(format!("TRAWL_BENCH_CALLGRAPH={other:?}: use dwarf or fp")),
        }
    }

    /// perf record's sampling arguments, as the report names them.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            Callgraph::FramePointers => "-F 999 -g",
            Callgraph::Dwarf => "-F 499 --call-graph dwarf",
        }
    }
}

/// `perf record -e cpu-clock … -o DATA --`'s arguments, for the caller to put after perf and
/// before the program and its arguments.
pub(crate) fn record_args(callgraph: Callgraph, data: &Path) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["record", "-e", "cpu-clock"].map(OsString::from).into();
    // DWARF unwinding copies the stack per sample: sample less often to bound the file.
    let sampling: &[&str] = match callgraph {
        Callgraph::FramePointers => &["-F", "999", "-g"],
        Callgraph::Dwarf => &["-F", "499", "--call-graph", "dwarf,16384"],
    };
    args.extend(sampling.iter().map(OsString::from));
    args.push("-o".into());
    args.push(data.into());
    args.push("--".into());
    args
}

/// Prints the flat report and the phase breakdown of a perf.data file. `main_thread`: the
/// phase of every sample of the process's main thread (`trawl`), when the benchmark knows what
/// that thread does; else its samples are read by their frames like the others.
pub(crate) fn analyse(
    perf: &Path,
    data: &Path,
    main_thread: Option<&'static str>,
) -> Result<(), String> {
    // Flat self time by object and symbol.
    let flat = Command::new(perf)
        .arg("report")
        .arg("-i")
        .arg(data)
        .args([
            "--stdio",
            "--no-children",
            "--sort",
            "dso,symbol",
            "-g",
            "none",
        ])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("perf report: {e}"))?;
    let flat = String::from_utf8_lossy(&flat.stdout);
    println!(
        "\n-- perf report --stdio --no-children --sort dso,symbol (self time, first 80 lines) --"
    );
    for line in flat.lines().take(80) {
        // Drop the empty IPC columns and the padding.
        let line = line.trim_end();
        let line = line.strip_suffix("-      -").unwrap_or(line).trim_end();
        let line: String = line.chars().take(160).collect();
        println!("{}", line.trim_end());
    }

    // Phases from whole call stacks.
    let script = Command::new(perf)
        .arg("script")
        .arg("-i")
        .arg(data)
        .args(["-F", "comm,period,ip,sym,dso", "--no-inline"])
        .stderr(Stdio::null())
        .output()
        .map_err(|e| format!("perf script: {e}"))?;
    let script = String::from_utf8_lossy(&script.stdout);
    let phases = phases_from_script(&script, main_thread);
    print_phases(&phases);
    Ok(())
}

/// The phase a sample belongs to: the innermost frame (leaf first) that names one. Generic
/// frames (allocator, memcpy, std, tokio scheduler, dom_query tree/selector helpers) name no
/// phase, so their time goes to the caller that does.
fn phase_of_frame(sym: &str, dso: &str) -> Option<&'static str> {
    let has = |needle: &str| sym.contains(needle);
    if has("ZSTD_") || has("zstd::") || has("zstd_safe") || dso.contains("libzstd") {
        return Some("compress (zstd)");
    }
    // SQLite's JSON functions run only in apalis-sqlite's queue statements (ack, lock,
    // fetch: `json_each(?)`, `value ->> 'task_id'`); trawl's store uses none.
    if sym.starts_with("json") {
        return Some("queue (apalis SQL: sqlite json_each/->>)");
    }
    if has("sqlite3") || has("sqlx") || dso.contains("libsqlite") {
        return Some("store (sqlite/sqlx)");
    }
    if has("apalis") {
        return Some("queue (apalis)");
    }
    if has("tantivy") {
        return Some("archive: index (tantivy)");
    }
    // lol_html streams a page for its page text (and reduces an oversize body as it
    // arrives, which the benchmarks' pages never are).
    if has("lol_html") || has("trawl_workers::archive::page_text") {
        return Some("archive: page text (lol_html)");
    }
    if has("trawl_workers::archive::chunk") {
        return Some("archive: chunks");
    }
    if has("trawl_workers::archive::warc")
        || has("flate2")
        || has("miniz_oxide")
        || dso.contains("libz.so")
    {
        return Some("archive: WARC (gzip)");
    }
    if has("dom_query::serializing::md") || has("MDSerializer") {
        return Some("markdown (dom_query md)");
    }
    if has("html5ever::serialize") || has("SerializableNodeRef") || has("::serialize_html") {
        return Some("extract: article HTML serialisation");
    }
    if has("text_formatting") || has("formatted_text") {
        return Some("markdown (dom_query md)");
    }
    if has("html5ever")
        || has("markup5ever")
        || has("tendril")
        || has("encoding_rs")
        || has("trawl_workers::web::charset")
        || has("dom_query::document::Document::from")
        || has("dom_query::document::Document as core::convert::From")
    {
        return Some("parse (html5ever/dom_query)");
    }
    if has("dom_smoothie") {
        return Some("extract (dom_smoothie)");
    }
    if has("rs_trafilatura") {
        return Some("extract (rs-trafilatura)");
    }
    if has("trawl_workers::web::prune") {
        return Some("extract: prune (trawl)");
    }
    if has("trawl_workers::web::extract") || has("trawl_workers::web::blockpage") {
        return Some("extract: links/meta/outline (trawl)");
    }
    if has("reqwest")
        || has("hyper")
        || has("h2::")
        || has("rustls")
        || has("aws_lc")
        || has("tokio::net")
        || has("mio::")
        || has("http_body")
        || has("async_compression")
        || has("trawl_workers::web::client")
        || has("trawl_workers::web::dns")
        || has("trawl_workers::web::ssrf")
        || has("tokio::io::poll_evented")
    {
        return Some("fetch (reqwest/hyper/tokio io)");
    }
    if has("trawl::store") {
        return Some("store (sqlite/sqlx)");
    }
    if has("trawl::archive") {
        return Some("archive: pool (trawl::archive)");
    }
    if has("trawl::crawl") {
        return Some("crawl: links, plans, follow-ups (trawl::crawl)");
    }
    if has("trawl::cli::run") {
        return Some("run loop (trawl::cli::run)");
    }
    if has("trawl::runner") || has("trawl_workers::fetch") {
        return Some("runner (results, JSON)");
    }
    None
}

struct Phases {
    total: u64,
    by_phase: HashMap<&'static str, u64>,
    by_comm: HashMap<String, u64>,
    leaves: HashMap<&'static str, HashMap<String, u64>>,
    depths: Vec<usize>,
}

fn phases_from_script(script: &str, main_thread: Option<&'static str>) -> Phases {
    let mut phases = Phases {
        total: 0,
        by_phase: HashMap::new(),
        by_comm: HashMap::new(),
        leaves: HashMap::new(),
        depths: Vec::new(),
    };
    let mut comm = String::new();
    let mut period = 1_u64;
    let mut frames: Vec<(String, String)> = Vec::new();
    let mut flush = |comm: &str, period: u64, frames: &mut Vec<(String, String)>| {
        if comm.is_empty() && frames.is_empty() {
            return;
        }
        phases.total += period;
        *phases.by_comm.entry(comm_group(comm)).or_default() += period;
        phases.depths.push(frames.len());
        let phase = main_thread
            .filter(|_| comm == "trawl")
            .or_else(|| {
                frames
                    .iter()
                    .find_map(|(sym, dso)| phase_of_frame(sym, dso))
            })
            .unwrap_or_else(|| {
                if comm.starts_with("sqlx-sqlite") {
                    "store (sqlite/sqlx)"
                } else if frames
                    .iter()
                    .any(|(sym, _)| sym.contains("tokio::runtime") || sym.contains("std::thread"))
                {
                    "other: runtime/scheduler/alloc"
                } else {
                    "other: unattributed"
                }
            });
        let leaf = frames
            .first()
            .map(|(sym, dso)| format!("{} [{}]", short_symbol(sym), short_dso(dso)))
            .unwrap_or_else(|| "(no frames)".to_owned());
        *phases
            .leaves
            .entry(phase)
            .or_default()
            .entry(leaf)
            .or_default() += period;
        *phases.by_phase.entry(phase).or_default() += period;
        frames.clear();
    };
    for line in script.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if !line.starts_with(char::is_whitespace) {
            // A sample header: "comm  period" (period last).
            flush(&comm, period, &mut frames);
            let mut words: Vec<&str> = line.split_whitespace().collect();
            period = words
                .last()
                .and_then(|w| w.trim_end_matches(':').parse().ok())
                .unwrap_or(1);
            if words.len() > 1 {
                words.pop();
            }
            comm = words.join(" ");
            continue;
        }
        // A frame: "<ip> <symbol+off> (<dso>)".
        let line = line.trim();
        let rest = line.split_once(' ').map_or("", |(_, rest)| rest);
        let (sym, dso) = match rest.rfind(" (") {
            Some(at) => (&rest[..at], rest[at + 2..].trim_end_matches(')')),
            None => (rest, ""),
        };
        frames.push((sym.to_owned(), dso.to_owned()));
    }
    flush(&comm, period, &mut frames);
    phases
}

fn comm_group(comm: &str) -> String {
    let trimmed = comm.trim_end_matches(|c: char| c.is_ascii_digit() || c == '-');
    if trimmed.is_empty() {
        comm.to_owned()
    } else {
        trimmed.to_owned()
    }
}

fn short_symbol(sym: &str) -> String {
    let sym = sym.split('+').next().unwrap_or(sym);
    let sym = match sym.rfind("::h") {
        Some(at) if sym[at + 3..].chars().all(|c| c.is_ascii_hexdigit()) => &sym[..at],
        _ => sym,
    };
    sym.chars().take(90).collect()
}

fn short_dso(dso: &str) -> String {
    Path::new(dso)
        .file_name()
        .map_or(dso.to_owned(), |name| name.to_string_lossy().into_owned())
}

fn print_phases(phases: &Phases) {
    if phases.total == 0 {
        println!("perf script gave no samples: no phase breakdown.");
        return;
    }
    let pct = |v: u64| 100.0 * v as f64 / phases.total as f64;
    let mut depths = phases.depths.clone();
    depths.sort_unstable();
    let median_depth = depths.get(depths.len() / 2).copied().unwrap_or(0);
    println!(
        "\n-- where the time goes (CPU samples, user and kernel, by phase; each sample goes to the innermost frame that names a phase) --"
    );
    println!(
        "{} samples, median stack depth {median_depth}{}",
        phases.depths.len(),
        if median_depth < 6 {
            " (shallow stacks: unwinding failed, phases are unreliable; try TRAWL_BENCH_CALLGRAPH=dwarf)"
        } else {
            ""
        }
    );
    let mut rows: Vec<(&str, u64)> = phases.by_phase.iter().map(|(k, v)| (*k, *v)).collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.1));
    for (phase, value) in &rows {
        println!("  {:<44} {:>6.1} %", phase, pct(*value));
    }
    println!("\n  by thread:");
    let mut threads: Vec<(&String, &u64)> = phases.by_comm.iter().collect();
    threads.sort_by(|a, b| b.1.cmp(a.1));
    for (comm, value) in threads.iter().take(8) {
        println!("  {:<44} {:>6.1} %", comm, pct(**value));
    }
    println!("\n  top self-time symbols within each phase (% of all samples):");
    for (phase, _) in &rows {
        println!("  {phase}");
        let mut leaves: Vec<(&String, &u64)> = phases
            .leaves
            .get(phase)
            .map(|m| m.iter().collect())
            .unwrap_or_default();
        leaves.sort_by(|a, b| b.1.cmp(a.1));
        for (leaf, value) in leaves.iter().take(4) {
            println!("    {:>5.1} %  {}", pct(**value), leaf);
        }
    }
}
