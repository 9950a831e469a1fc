//! Archive benchmark: the chunk index (`trawl_workers::archive::chunk` + `archive::index`) on
//! three questions: how fast pages are chunked and indexed, how fast a big index answers, and
//! whether the right passage comes back for a natural-language question.
//!
//! ```text
//! cargo bench --bench archive                                  # all three parts
//! TRAWL_BENCH_PARTS=recall cargo bench --bench archive         # only retrieval quality
//! TRAWL_BENCH_CHUNKS=200000 cargo bench --bench archive        # a smaller latency index
//! ```
//!
//! 1. Index throughput: the labelled set's 181 pages are extracted to markdown once (not
//!    timed), then chunked (`ChunkOptions::default()`), their page text made
//!    (`archive::page_text::rest_of_page` over the page's HTML, timed apart) and indexed
//!    through `ArchiveWriter::add_page` (128 MB writer heap, `commit_if_due` every 1,000 pages,
//!    a final commit), pass after pass with distinct page ids and URLs until >= 20,000 chunks.
//!    Median of 3 runs, each into a fresh temporary directory; target >= 2,000 chunks/s, with
//!    page text's milliseconds a page beside it.
//! 2. Query latency: an index of `TRAWL_BENCH_CHUNKS` (default 1,000,000) synthetic chunks:
//!    sentences of the extracted pages shuffled with a seeded PRNG into 150-400 word chunks,
//!    1-8 chunks per page, 3,000 hosts, headings and titles from the set, and a sprinkle of rare
//!    tokens (`rareN`, about 7 chunks each). Built once through the same writer path and cached
//!    under `$CARGO_TARGET_DIR/bench-archive-index-v2/<chunks>` (else `target/…`; a
//!    `complete.json` marks a finished build: an interrupted one is rebuilt). Reports build
//!    rate, size on disk against the raw text, then p50/p99/max of `ArchiveIndex::search` (k =
//!    10, default per-page collapse, snippets included) over 1,000 queries per row: 1, 2 and 3
//!    words mixing frequent, mid-frequency and rare words, 3 frequent words, 8 question-like
//!    words (half frequent), and 2 words with a host filter; the slowest queries of each row
//!    are listed. Target p99 < 20 ms.
//! 3. Retrieval quality: the 181 pages indexed with their bench id as `page_id`, then each
//!    question of `benches/data/questions.json` run as a plain query (lowercased, everything
//!    but letters, digits and spaces blanked so it always parses). A question scores when a
//!    top-5 hit is from its page and the hit's text contains the answer phrase (case,
//!    whitespace and punctuation normalised, markdown link destinations ignored). Prints recall@5, recall@1, MRR@10, page-level
//!    recall@5 and every miss with a reason (answer lost by extraction, split across chunks,
//!    page found but another passage ranked, page not found).
//!
//! Needs the labelled set at `../shared/extraction-bench/scrapinghub-aeb` (or
//! `TRAWL_EXTRACTION_BENCH`, as for `cargo bench --bench extract`; its pages are not copied
//! into the project) and, for the default latency index, about 3 GB of disk. Prints the
//! machine first and a summary table with the ratio of each figure to its target last.
//!
//! Environment: `TRAWL_EXTRACTION_BENCH` (the labelled set's parent directory),
//! `TRAWL_BENCH_PARTS` (comma-separated subset of `throughput,latency,recall`),
//! `TRAWL_BENCH_RUNS` (throughput runs, default 3), `TRAWL_BENCH_CHUNKS` (latency index size,
//! default 1,000,000), `TRAWL_BENCH_QUERIES` (queries per latency row, default 1,000),
//! `TRAWL_BENCH_INDEX_DIR` (where cached latency indexes live, default
//! `$CARGO_TARGET_DIR/bench-archive-index-v2`), `TRAWL_BENCH_REBUILD=1` (rebuild the cached
//! index). Change `INDEX_VERSION` when the generator or the index schema changes.

// A benchmark reads its own knobs (paths, sizes) from the environment; the rule that only
// config.rs reads the environment is about the application.
#![allow(clippy::disallowed_methods)]

mod common;
#[path = "common/knobs.rs"]
#[allow(dead_code, reason = "the archive benchmark reads only counts")]
mod knobs;
#[path = "common/labelled.rs"]
mod labelled;
#[path = "common/quantile.rs"]
mod quantile;

#[path = "archive/latency.rs"]
mod latency;
#[path = "archive/recall.rs"]
mod recall;
#[path = "archive/summary.rs"]
mod summary;
#[path = "archive/synth.rs"]
mod synth;
#[path = "archive/throughput.rs"]
mod throughput;

use knobs::env_number;
use labelled::{Page, load};
use latency::latency;
use recall::recall;
use summary::print_summary;
use throughput::throughput;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::Instant;

use trawl_workers::archive::chunk::Chunk;
use trawl_workers::archive::index::{Added, ArchiveIndex, ArchiveWriter, PageDoc};
use trawl_workers::job::Format;
use trawl_workers::web::extract;

const TARGET_CHUNKS_PER_S: f64 = 2_000.0;
const TARGET_P99_MS: f64 = 20.0;

/// Indexing memory of the writer, as the archive pool would give it.
const HEAP_BYTES: usize = 128 * 1024 * 1024;
/// Pages between commits.
const COMMIT_EVERY: usize = 1_000;
/// Chunks one throughput run indexes at least.
const THROUGHPUT_CHUNKS: usize = 20_000;
/// Bump when the synthetic generator or the index schema changes: cached indexes are keyed by it.
const INDEX_VERSION: &str = "v2";
const DEFAULT_CHUNKS: usize = 1_000_000;
const DEFAULT_QUERIES: usize = 1_000;
const DEFAULT_RUNS: usize = 3;
/// Distinct hosts of the synthetic index.
const HOSTS: usize = 3_000;
/// Queries run before each latency row, not measured.
const WARMUP: usize = 50;
/// Slowest queries listed per latency row.
const SLOWEST: usize = 3;
/// Hits a question may be found in (recall@5) and ranked over (MRR@10).
const RECALL_AT: usize = 5;
const MRR_AT: usize = 10;
/// Fixed fetch time of the indexed pages (2024-01-01T00:00:00Z).
const FETCHED_AT: i64 = 1_704_067_200;

fn main() {
    let settings = Settings::from_env();
    let set = settings.root.join("scrapinghub-aeb");
    if !set.join("ground-truth.json").exists() {
        eprintln!(
            "archive bench: no labelled set at {} (set TRAWL_EXTRACTION_BENCH)",
            set.display()
        );
        std::process::exit(2);
    }
    common::print_machine();
    let started = Instant::now();
    let docs: Vec<Doc> = load(&set).into_iter().map(Doc::extract).collect();
    println!(
        "labelled set: {} pages from {} extracted to markdown in {:.1} s ({} KB of markdown)",
        docs.len(),
        set.display(),
        started.elapsed().as_secs_f64(),
        docs.iter().map(|d| d.markdown.len()).sum::<usize>() / 1024
    );
    let mut summary = Vec::new();
    if settings.parts.contains("throughput") {
        throughput(&docs, settings.runs, &mut summary);
    }
    if settings.parts.contains("latency") {
        latency(&docs, &settings, &mut summary);
    }
    if settings.parts.contains("recall") {
        recall(&docs, &mut summary);
    }
    print_summary(&summary);
}

// ---------- settings ----------

struct Settings {
    root: PathBuf,
    parts: HashSet<String>,
    runs: usize,
    chunks: usize,
    queries: usize,
    index_dir: PathBuf,
    rebuild: bool,
}

impl Settings {
    fn from_env() -> Self {
        let root = std::env::var_os("TRAWL_EXTRACTION_BENCH")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/extraction-bench")
            });
        let parts: HashSet<String> = std::env::var("TRAWL_BENCH_PARTS")
            .unwrap_or_else(|_| "throughput,latency,recall".to_owned())
            .split(',')
            .map(|part| part.trim().to_ascii_lowercase())
            .filter(|part| !part.is_empty())
            .collect();
        for part in &parts {
            if !["throughput", "latency", "recall"].contains(&part.as_str()) {
                eprintln!(
                    "archive bench: TRAWL_BENCH_PARTS has {part:?}; parts are throughput, latency, recall"
                );
                std::process::exit(2);
            }
        }
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
        let index_dir = std::env::var_os("TRAWL_BENCH_INDEX_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| target.join(format!("bench-archive-index-{INDEX_VERSION}")));
        Settings {
            root,
            parts,
            runs: number("TRAWL_BENCH_RUNS", DEFAULT_RUNS).max(1),
            chunks: number("TRAWL_BENCH_CHUNKS", DEFAULT_CHUNKS).max(1),
            queries: number("TRAWL_BENCH_QUERIES", DEFAULT_QUERIES).max(1),
            index_dir,
            rebuild: std::env::var("TRAWL_BENCH_REBUILD").is_ok_and(|v| v == "1"),
        }
    }
}

/// A count from the environment (`1_000_000` and `1,000,000` accepted), or `default`; exits
/// with the error when it is not a number.
fn number(name: &str, default: usize) -> usize {
    env_number(name, default).unwrap_or_else(|error| {
        eprintln!("archive bench: {error}");
        std::process::exit(2);
    })
}

// ---------- the labelled set ----------

/// A page after extraction: what the archive pool would read from the store.
struct Doc {
    id: String,
    url: String,
    host: String,
    title: Option<String>,
    lang: Option<String>,
    markdown: String,
    /// The page as fetched, for its page documents (the text outside its content).
    html: String,
}

impl Doc {
    fn extract(page: Page) -> Doc {
        let (title, lang, markdown) =
            match extract::extract_html(&page.html, &page.url, Format::Markdown) {
                Ok(extracted) => (extracted.title, extracted.meta.lang, extracted.text),
                Err(_) => (None, None, String::new()),
            };
        Doc {
            host: page.url.host_str().unwrap_or("localhost").to_owned(),
            url: page.url.to_string(),
            id: page.id,
            title,
            lang,
            markdown,
            html: page.html,
        }
    }

    fn page<'a>(
        &'a self,
        page_id: &'a str,
        url: &'a str,
        chunks: &'a [Chunk],
        rest: Option<&'a str>,
    ) -> PageDoc<'a> {
        PageDoc {
            page_id,
            url,
            host: &self.host,
            title: self.title.as_deref(),
            fetched_at: timestamp(FETCHED_AT),
            lang: self.lang.as_deref(),
            content_hash: &self.id,
            chunks,
            tenant: "default",
            rest,
        }
    }
}

fn timestamp(second: i64) -> jiff::Timestamp {
    jiff::Timestamp::from_second(second).expect("a valid timestamp")
}

fn open_writer(dir: &Path) -> (ArchiveIndex, ArchiveWriter) {
    let index = ArchiveIndex::open_or_create(dir).expect("the archive index opens");
    let writer = index.writer(HEAP_BYTES).expect("the index writer");
    (index, writer)
}

/// Adds a page that must be new; returns its chunk and page document counts.
fn add(writer: &mut ArchiveWriter, page: &PageDoc<'_>) -> (usize, usize) {
    match writer.add_page(page).expect("add_page") {
        Added::Indexed {
            chunks, page_docs, ..
        } => (chunks, page_docs),
        Added::Unchanged => panic!("page {} was not indexed", page.page_id),
    }
}
