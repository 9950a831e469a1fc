//! Extraction benchmark: quality (precision, recall, F1 with the labelled set's own scorer)
//! and speed (pages/s, one thread, extraction only: the HTML is decoded in memory first) of
//! `trawl_workers::web::extract::extract_html`, the function `trawl run` uses.
//!
//! Run: `cargo bench --bench extract` (release profile). The labelled set is read from
//! `../shared/extraction-bench` (or `TRAWL_EXTRACTION_BENCH`); its pages are not copied into
//! the project. Needs python3 for the scorer. Prints the machine, the median of 3 timed
//! passes per format, and the scorer's report; compares against the targets of issue 2
//! (F1 >= 0.96 at >= 150 pages/s).

// A benchmark reads its own knobs (the labelled set's path) from the environment; the rule
// that only config.rs reads the environment is about the application.
#![allow(clippy::disallowed_methods)]

mod common;
#[path = "common/labelled.rs"]
mod labelled;

use labelled::load;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use trawl_workers::job::Format;
use trawl_workers::web::extract;

const RUNS: usize = 3;
const TARGET_F1: f64 = 0.96;
const TARGET_PAGES_PER_S: f64 = 150.0;

fn main() {
    let root = std::env::var_os("TRAWL_EXTRACTION_BENCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/extraction-bench")
        });
    let set = root.join("scrapinghub-aeb");
    if !set.join("ground-truth.json").exists() {
        eprintln!(
            "extract bench: no labelled set at {} (set TRAWL_EXTRACTION_BENCH)",
            set.display()
        );
        std::process::exit(2);
    }
    common::print_machine();
    let pages = load(&set);
    println!("labelled set: {} pages from {}", pages.len(), set.display());
    let out = tempfile::tempdir().expect("a temporary directory");
    for (format, extension, markdown_flag) in
        [(Format::Text, "txt", false), (Format::Markdown, "md", true)]
    {
        let dir = out.path().join(extension);
        std::fs::create_dir_all(&dir).expect("output directory");
        let mut rates = Vec::new();
        let mut fallbacks = 0;
        for run in 0..RUNS {
            let mut busy = Duration::ZERO;
            for page in &pages {
                let started = Instant::now();
                let extracted = extract::extract_html(&page.html, &page.url, format);
                busy += started.elapsed();
                let text = match extracted {
                    Ok(extracted) => {
                        if run == 0
                            && extracted.extractor == trawl_workers::job::Extractor::Fallback
                        {
                            fallbacks += 1;
                        }
                        extracted.text
                    }
                    Err(_) => String::new(),
                };
                if run == 0 {
                    std::fs::write(dir.join(format!("{}.{extension}", page.id)), text)
                        .expect("write a prediction");
                }
            }
            rates.push(pages.len() as f64 / busy.as_secs_f64());
        }
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        println!();
        println!(
            "== {} output: {:.0} pages/s median of {RUNS} (runs: {}), {:.2} ms/page, {fallbacks} fallbacks",
            format.as_str(),
            median,
            rates
                .iter()
                .map(|rate| format!("{rate:.0}"))
                .collect::<Vec<_>>()
                .join(", "),
            1_000.0 / median
        );
        let f1 = score(&root, &set, &dir, markdown_flag, format.as_str());
        if let Some(f1) = f1 {
            println!(
                "   F1 {f1:.3} vs target {TARGET_F1} (ratio {:.3}); speed {:.0} vs target {TARGET_PAGES_PER_S} pages/s (ratio {:.2})",
                f1 / TARGET_F1,
                median,
                median / TARGET_PAGES_PER_S
            );
        }
    }
}

/// Runs the set's scorer on a directory of predictions, prints its report, returns F1.
fn score(root: &Path, set: &Path, predictions: &Path, markdown: bool, name: &str) -> Option<f64> {
    let json = predictions.join("score.json");
    let mut command = Command::new("python3");
    command
        .arg(root.join("score.py"))
        .arg("--truth")
        .arg(set.join("ground-truth.json"))
        .arg("--pred-dir")
        .arg(predictions)
        .arg("--name")
        .arg(format!("trawl-{name}"))
        .arg("--json")
        .arg(&json);
    if markdown {
        command.arg("--markdown");
    }
    match command.output() {
        Ok(output) if output.status.success() => {
            for line in String::from_utf8_lossy(&output.stdout).lines() {
                println!("   {line}");
            }
            let summary: serde_json::Value =
                serde_json::from_str(&std::fs::read_to_string(&json).ok()?).ok()?;
            find_f1(&summary)
        }
        Ok(output) => {
            eprintln!(
                "   scorer failed: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            None
        }
        Err(error) => {
            eprintln!("   cannot run python3 for the scorer: {error}");
            None
        }
    }
}

fn find_f1(value: &serde_json::Value) -> Option<f64> {
    match value {
        serde_json::Value::Object(map) => map
            .get("f1")
            .and_then(serde_json::Value::as_f64)
            .or_else(|| map.values().find_map(find_f1)),
        serde_json::Value::Array(items) => items.iter().find_map(find_f1),
        _ => None,
    }
}
