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
//!    timed), then chunked (`ChunkOptions::default()`) and indexed through
//!    `ArchiveWriter::add_page` (128 MB writer heap, `commit_if_due` every 1,000 pages, a final
//!    commit), pass after pass with distinct page ids and URLs until >= 20,000 chunks. Median of
//!    3 runs, each into a fresh temporary directory; target >= 2,000 chunks/s.
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

use knobs::env_number;
use labelled::{Page, load};

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use trawl_workers::archive::chunk::{Chunk, ChunkOptions, chunk_markdown, strip_link_destinations};
use trawl_workers::archive::index::{Added, ArchiveIndex, ArchiveWriter, PageDoc, SearchQuery};
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
        }
    }

    fn page<'a>(&'a self, page_id: &'a str, url: &'a str, chunks: &'a [Chunk]) -> PageDoc<'a> {
        PageDoc {
            page_id,
            url,
            host: &self.host,
            title: self.title.as_deref(),
            fetched_at: timestamp(FETCHED_AT),
            lang: self.lang.as_deref(),
            content_hash: &self.id,
            chunks,
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

/// Adds a page that must be new; returns its chunk count.
fn add(writer: &mut ArchiveWriter, page: &PageDoc<'_>) -> usize {
    match writer.add_page(page).expect("add_page") {
        Added::Indexed { chunks, .. } => chunks,
        Added::Unchanged => panic!("page {} was not indexed", page.page_id),
    }
}

// ---------- 1. index throughput ----------

struct Run {
    chunks: usize,
    pages: usize,
    elapsed: Duration,
    chunking: Duration,
    commits: usize,
}

impl Run {
    fn chunks_per_s(&self) -> f64 {
        self.chunks as f64 / self.elapsed.as_secs_f64()
    }
    fn pages_per_s(&self) -> f64 {
        self.pages as f64 / self.elapsed.as_secs_f64()
    }
}

fn throughput(docs: &[Doc], runs: usize, summary: &mut Vec<Row>) {
    println!();
    println!(
        "== index throughput: chunk + add_page, {} MB heap, commit every {COMMIT_EVERY} pages, until >= {THROUGHPUT_CHUNKS} chunks",
        HEAP_BYTES >> 20
    );
    let options = ChunkOptions::default();
    let mut results = Vec::new();
    for run in 0..runs {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (index, mut writer) = open_writer(dir.path());
        let mut result = Run {
            chunks: 0,
            pages: 0,
            elapsed: Duration::ZERO,
            chunking: Duration::ZERO,
            commits: 0,
        };
        let started = Instant::now();
        'passes: for pass in 0.. {
            for doc in docs {
                let chunking = Instant::now();
                let chunks = chunk_markdown(&strip_link_destinations(&doc.markdown), &options);
                result.chunking += chunking.elapsed();
                let page_id = format!("{}-{pass}", doc.id);
                let separator = if doc.url.contains('?') { '&' } else { '?' };
                let url = format!("{}{separator}trawl-pass={pass}", doc.url);
                result.chunks += add(&mut writer, &doc.page(&page_id, &url, &chunks));
                result.pages += 1;
                if writer
                    .commit_if_due(COMMIT_EVERY, Duration::MAX)
                    .expect("commit")
                {
                    result.commits += 1;
                }
                if result.chunks >= THROUGHPUT_CHUNKS {
                    break 'passes;
                }
            }
        }
        writer.commit().expect("final commit");
        result.commits += 1;
        result.elapsed = started.elapsed();
        drop(writer);
        assert_eq!(
            index.num_chunks(),
            result.chunks as u64,
            "every chunk is searchable"
        );
        println!(
            "   run {}: {} chunks from {} pages in {:.2} s: {:.0} chunks/s, {:.0} pages/s ({} commits; chunking {:.0}% of the time)",
            run + 1,
            result.chunks,
            result.pages,
            result.elapsed.as_secs_f64(),
            result.chunks_per_s(),
            result.pages_per_s(),
            result.commits,
            100.0 * result.chunking.as_secs_f64() / result.elapsed.as_secs_f64()
        );
        results.push(result);
    }
    results.sort_by(|a, b| a.chunks_per_s().total_cmp(&b.chunks_per_s()));
    let median = &results[results.len() / 2];
    println!(
        "   median of {runs}: {:.0} chunks/s, {:.0} pages/s ({:.1} chunks/page); target >= {TARGET_CHUNKS_PER_S:.0} chunks/s (ratio {:.2})",
        median.chunks_per_s(),
        median.pages_per_s(),
        median.chunks as f64 / median.pages as f64,
        median.chunks_per_s() / TARGET_CHUNKS_PER_S
    );
    summary.push(Row::at_least(
        "index throughput, chunks/s",
        median.chunks_per_s(),
        TARGET_CHUNKS_PER_S,
        0,
    ));
    summary.push(Row::info(
        "index throughput, pages/s",
        format!("{:.0}", median.pages_per_s()),
    ));
}

// ---------- 2. query latency on a big synthetic index ----------

/// splitmix64: small, seeded, good enough to shuffle text.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What the synthetic chunks are made of, all taken from the extracted bench pages.
struct Corpus {
    sentences: Vec<String>,
    headings: Vec<String>,
    titles: Vec<String>,
    hosts: Vec<String>,
    /// Index words (as tantivy's default tokenizer sees them) by frequency in `sentences`.
    frequent: Vec<String>,
    mid: Vec<String>,
    rare: Vec<String>,
}

impl Corpus {
    fn new(docs: &[Doc]) -> Corpus {
        let options = ChunkOptions::default();
        let mut sentences = Vec::new();
        let mut headings = HashSet::new();
        for doc in docs {
            for chunk in chunk_markdown(&strip_link_destinations(&doc.markdown), &options) {
                headings.extend(chunk.headings.iter().cloned());
                let prose: Vec<&str> = chunk
                    .text
                    .lines()
                    .map(str::trim)
                    .filter(|line| {
                        !line.is_empty()
                            && !line.starts_with(['#', '|', '`', '>', '<'])
                            && !line.starts_with("    ")
                    })
                    .collect();
                split_sentences(&prose.join(" "), &mut sentences);
            }
        }
        let mut headings: Vec<String> = headings.into_iter().filter(|h| h.len() < 80).collect();
        headings.sort();
        let mut titles: Vec<String> = docs.iter().filter_map(|d| d.title.clone()).collect();
        titles.sort();
        let mut hosts: Vec<String> = docs.iter().map(|d| d.host.clone()).collect();
        hosts.sort();
        hosts.dedup();

        let mut counts: HashMap<String, usize> = HashMap::new();
        for sentence in &sentences {
            for token in tokens(sentence) {
                *counts.entry(token).or_insert(0) += 1;
            }
        }
        let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let frequent = ranked.iter().take(200).map(|(w, _)| w.clone()).collect();
        let mid = ranked
            .iter()
            .skip(200)
            .take(4_800)
            .filter(|(_, n)| *n >= 3)
            .map(|(w, _)| w.clone())
            .collect();
        let rare = ranked
            .iter()
            .filter(|(_, n)| *n == 1)
            .map(|(w, _)| w.clone())
            .collect();
        Corpus {
            sentences,
            headings,
            titles,
            hosts,
            frequent,
            mid,
            rare,
        }
    }
}

/// Sentences of 4 to 60 words: cut after a word ending in `.`, `?` or `!` (or at 60 words).
fn split_sentences(text: &str, out: &mut Vec<String>) {
    let mut current: Vec<&str> = Vec::new();
    for word in text.split_whitespace() {
        current.push(word);
        let end = word
            .trim_end_matches(['"', '\'', '”', '’', ')', ']', '*', '_'])
            .ends_with(['.', '?', '!']);
        if (end && current.len() >= 4) || current.len() >= 60 {
            out.push(current.join(" "));
            current.clear();
        }
    }
    if current.len() >= 4 {
        out.push(current.join(" "));
    }
}

/// Lowercased alphanumeric runs of at most 40 bytes: tantivy's `default` tokenizer.
fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty() && t.len() <= 40)
        .map(str::to_lowercase)
}

/// One synthetic page and its chunks.
struct SynthPage {
    page_id: String,
    url: String,
    host: String,
    title: String,
    fetched_at: jiff::Timestamp,
    chunks: Vec<Chunk>,
}

/// Deterministic generator of synthetic pages (same seed, same corpus: same index).
struct Synth<'a> {
    corpus: &'a Corpus,
    rng: Rng,
    /// `rareN` tokens are drawn from `0..tail`: about 7 chunks each.
    tail: usize,
}

impl<'a> Synth<'a> {
    fn new(corpus: &'a Corpus, chunks: usize) -> Self {
        Synth {
            corpus,
            rng: Rng(0x7472_6177_6c21),
            tail: tail_range(chunks),
        }
    }

    fn page(&mut self, n: usize, max_chunks: usize) -> SynthPage {
        let c = self.corpus;
        let h = self.rng.below(HOSTS);
        let host = format!("s{h:04}.{}", c.hosts[h % c.hosts.len()]);
        let count = self.rng.range(1, 8).min(max_chunks);
        let mut chunks = Vec::with_capacity(count);
        let mut path: Vec<String> = Vec::new();
        for index in 0..count {
            // The heading path drifts from chunk to chunk as it does in a page.
            let depth = if c.headings.is_empty() {
                0
            } else {
                self.rng.below(4)
            };
            path.truncate(depth.min(path.len()));
            while path.len() < depth {
                path.push(self.rng.pick(&c.headings).clone());
            }
            let target = self.rng.range(150, 400);
            let mut text = String::with_capacity(target * 7);
            let mut words = 0;
            let mut in_paragraph = 0;
            while words < target {
                let sentence = self.rng.pick(&c.sentences);
                if !text.is_empty() {
                    text.push_str(if in_paragraph >= self.rng.range(3, 6) {
                        in_paragraph = 0;
                        "\n\n"
                    } else {
                        " "
                    });
                }
                in_paragraph += 1;
                let inject = self
                    .rng
                    .chance(10)
                    .then(|| self.rng.below(sentence.split_whitespace().count()));
                for (i, word) in sentence.split_whitespace().enumerate() {
                    if i > 0 {
                        text.push(' ');
                    }
                    if inject == Some(i) {
                        text.push_str(&format!("rare{} ", self.rng.below(self.tail)));
                        words += 1;
                    }
                    text.push_str(word);
                    words += 1;
                }
            }
            chunks.push(Chunk {
                index: index as u32,
                headings: path.clone(),
                text,
                words: words as u32,
            });
        }
        SynthPage {
            page_id: format!("syn-{n:08}"),
            url: format!("https://{host}/articles/{n}"),
            host,
            title: if c.titles.is_empty() {
                format!("Page {n}")
            } else {
                self.rng.pick(&c.titles).clone()
            },
            fetched_at: timestamp(FETCHED_AT + self.rng.below(365 * 86_400) as i64),
            chunks,
        }
    }
}

fn tail_range(chunks: usize) -> usize {
    (chunks / 5).max(1_000)
}

/// What a finished build of the latency index recorded (`complete.json`).
#[derive(serde::Serialize, serde::Deserialize)]
struct Built {
    version: String,
    chunks: usize,
    pages: usize,
    text_bytes: u64,
    indexed_bytes: u64,
    build_secs: f64,
    generate_secs: f64,
}

fn latency(docs: &[Doc], settings: &Settings, summary: &mut Vec<Row>) {
    let corpus = Corpus::new(docs);
    let dir = settings
        .index_dir
        .join(format!("{}-chunks", settings.chunks));
    println!();
    println!(
        "== query latency: {} synthetic chunks at {} ({} sentences, {} headings, {} hosts; query words: {} frequent, {} mid, {} rare + rareN tokens)",
        settings.chunks,
        dir.display(),
        corpus.sentences.len(),
        corpus.headings.len(),
        HOSTS,
        corpus.frequent.len(),
        corpus.mid.len(),
        corpus.rare.len()
    );
    let marker = dir.join("complete.json");
    let cached = if settings.rebuild {
        None
    } else {
        std::fs::read_to_string(&marker)
            .ok()
            .and_then(|json| serde_json::from_str::<Built>(&json).ok())
            .filter(|built| built.version == INDEX_VERSION && built.chunks == settings.chunks)
    };
    let built = match cached {
        Some(built) => {
            println!("   reusing the cached index (TRAWL_BENCH_REBUILD=1 rebuilds it)");
            built
        }
        None => build(&corpus, &dir, settings.chunks),
    };
    let on_disk = dir_bytes(&dir).saturating_sub(std::fs::metadata(&marker).map_or(0, |m| m.len()));
    let build_rate = built.chunks as f64 / built.build_secs;
    println!(
        "   build: {} chunks in {} pages in {:.0} s: {:.0} chunks/s (generation, {:.0} s, excluded); {} segments",
        built.chunks,
        built.pages,
        built.build_secs,
        build_rate,
        built.generate_secs,
        segments(&dir).map_or_else(|| "?".to_owned(), |n| n.to_string())
    );
    println!(
        "   size: {:.0} MB on disk for {:.0} MB of chunk text ({:.0} MB with headings and title per chunk): {:.2}x the text",
        on_disk as f64 / 1e6,
        built.text_bytes as f64 / 1e6,
        built.indexed_bytes as f64 / 1e6,
        on_disk as f64 / built.text_bytes as f64
    );
    summary.push(Row::info(
        "latency index build, chunks/s",
        format!("{build_rate:.0} ({} chunks)", built.chunks),
    ));
    summary.push(Row::info(
        "latency index size / chunk text",
        format!(
            "{:.2}x ({:.0} MB)",
            on_disk as f64 / built.text_bytes as f64,
            on_disk as f64 / 1e6
        ),
    ));

    let index = ArchiveIndex::open_or_create(&dir).expect("the latency index opens");
    assert_eq!(
        index.num_chunks(),
        built.chunks as u64,
        "the cached index is whole"
    );
    let tail = tail_range(built.chunks);
    println!(
        "   {} queries per row (after {WARMUP} unmeasured), k = 10, per_page default; ms:",
        settings.queries
    );
    println!(
        "   {:<34} {:>7} {:>7} {:>7} {:>7} {:>9} {:>8}",
        "row", "p50", "p90", "p99", "max", "mean hits", "no hits"
    );
    let rows: [(&str, usize, Mix, bool); 6] = [
        ("1 word (mixed)", 1, Mix::Mixed, false),
        ("2 words (mixed)", 2, Mix::Mixed, false),
        ("3 words (mixed)", 3, Mix::Mixed, false),
        ("3 frequent words", 3, Mix::Frequent, false),
        ("8 words, question-like", 8, Mix::Question, false),
        ("2 words (mixed) + host filter", 2, Mix::Mixed, true),
    ];
    let mut slowest_rows = Vec::new();
    for (n, (label, words, mix, host)) in rows.into_iter().enumerate() {
        let mut rng = Rng(0xA5A5_0000 + n as u64);
        let make = |rng: &mut Rng| {
            let text: Vec<String> = (0..words)
                .map(|_| query_word(rng, &corpus, tail, mix))
                .collect();
            SearchQuery {
                text: text.join(" "),
                host: host.then(|| {
                    let h = rng.below(HOSTS);
                    format!("s{h:04}.{}", corpus.hosts[h % corpus.hosts.len()])
                }),
                ..SearchQuery::default()
            }
        };
        for _ in 0..WARMUP {
            let query = make(&mut rng);
            index.search(&query).expect("a query runs");
        }
        let mut times = Vec::with_capacity(settings.queries);
        let mut slowest: Vec<(Duration, String)> = Vec::new();
        let (mut hits, mut empty) = (0usize, 0usize);
        for _ in 0..settings.queries {
            let query = make(&mut rng);
            let started = Instant::now();
            let found = index
                .search(&query)
                .unwrap_or_else(|e| panic!("query {:?}: {e}", query.text));
            let took = started.elapsed();
            times.push(took);
            hits += found.len();
            empty += usize::from(found.is_empty());
            slowest.push((took, describe(&query)));
            if slowest.len() > 3 * SLOWEST {
                slowest.sort_by_key(|entry| std::cmp::Reverse(entry.0));
                slowest.truncate(SLOWEST);
            }
        }
        slowest.sort_by_key(|entry| std::cmp::Reverse(entry.0));
        slowest.truncate(SLOWEST);
        slowest_rows.push((label, slowest));
        times.sort();
        let ms = |q: f64| percentile(&times, q).as_secs_f64() * 1e3;
        println!(
            "   {label:<34} {:>7.2} {:>7.2} {:>7.2} {:>7.2} {:>9.1} {:>8}",
            ms(0.50),
            ms(0.90),
            ms(0.99),
            ms(1.0),
            hits as f64 / times.len() as f64,
            empty
        );
        summary.push(Row::at_most(
            &format!("p99 ms, {label}"),
            ms(0.99),
            TARGET_P99_MS,
            2,
        ));
    }
    println!("   slowest queries of each row (ms):");
    for (label, slowest) in slowest_rows {
        let list: Vec<String> = slowest
            .iter()
            .map(|(took, query)| format!("{:.1} {query}", took.as_secs_f64() * 1e3))
            .collect();
        println!("   {label}: {}", list.join(" | "));
    }
}

/// A query as the slowest list shows it: its text, and its host filter if any.
fn describe(query: &SearchQuery) -> String {
    match &query.host {
        Some(host) => format!("{:?} host={host}", query.text),
        None => format!("{:?}", query.text),
    }
}

#[derive(Clone, Copy)]
enum Mix {
    /// 35% frequent (top 200), 35% mid (rank 200-5,000), 15% rare in the pages, 15% `rareN`.
    Mixed,
    /// Top 200 only (the, of, and, …): the worst case for a disjunction.
    Frequent,
    /// Half top 200, half [`Mix::Mixed`]: the shape of a natural-language question.
    Question,
}

fn query_word(rng: &mut Rng, corpus: &Corpus, tail: usize, mix: Mix) -> String {
    match mix {
        Mix::Frequent => rng.pick(&corpus.frequent).clone(),
        Mix::Question if rng.chance(50) => rng.pick(&corpus.frequent).clone(),
        Mix::Mixed | Mix::Question => match rng.below(100) {
            0..35 => rng.pick(&corpus.frequent).clone(),
            35..70 => rng.pick(&corpus.mid).clone(),
            70..85 => rng.pick(&corpus.rare).clone(),
            _ => format!("rare{}", rng.below(tail)),
        },
    }
}

fn build(corpus: &Corpus, dir: &Path, target: usize) -> Built {
    if dir.exists() {
        std::fs::remove_dir_all(dir).expect("remove the old index");
    }
    println!("   building (once; cached for later runs)…");
    let (index, mut writer) = open_writer(dir);
    let mut synth = Synth::new(corpus, target);
    let mut built = Built {
        version: INDEX_VERSION.to_owned(),
        chunks: 0,
        pages: 0,
        text_bytes: 0,
        indexed_bytes: 0,
        build_secs: 0.0,
        generate_secs: 0.0,
    };
    let mut generating = Duration::ZERO;
    let started = Instant::now();
    let mut reported = 0;
    while built.chunks < target {
        let generation = Instant::now();
        let page = synth.page(built.pages, target - built.chunks);
        generating += generation.elapsed();
        for chunk in &page.chunks {
            built.text_bytes += chunk.text.len() as u64;
            built.indexed_bytes += (chunk.text.len()
                + page.title.len()
                + chunk.headings.iter().map(String::len).sum::<usize>())
                as u64;
        }
        built.chunks += add(
            &mut writer,
            &PageDoc {
                page_id: &page.page_id,
                url: &page.url,
                host: &page.host,
                title: Some(&page.title),
                fetched_at: page.fetched_at,
                lang: Some("en"),
                content_hash: &page.page_id,
                chunks: &page.chunks,
            },
        );
        built.pages += 1;
        writer
            .commit_if_due(COMMIT_EVERY, Duration::MAX)
            .expect("commit");
        if built.chunks >= reported + 100_000 {
            reported = built.chunks / 100_000 * 100_000;
            let secs = (started.elapsed() - generating).as_secs_f64();
            eprintln!(
                "   … {} chunks, {:.0} s, {:.0} chunks/s",
                built.chunks,
                secs,
                built.chunks as f64 / secs
            );
        }
    }
    writer.commit().expect("final commit");
    drop(writer);
    let elapsed = started.elapsed();
    built.generate_secs = generating.as_secs_f64();
    built.build_secs = (elapsed - generating).as_secs_f64();
    assert_eq!(index.num_chunks(), built.chunks as u64);
    std::fs::write(
        dir.join("complete.json"),
        serde_json::to_string_pretty(&built).expect("json"),
    )
    .expect("write the build marker");
    built
}

fn dir_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .filter(std::fs::Metadata::is_file)
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Segments of the last commit, from tantivy's `meta.json`.
fn segments(dir: &Path) -> Option<usize> {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).ok()?).ok()?;
    meta.get("segments")?.as_array().map(Vec::len)
}

/// The `q` quantile of sorted `times` (nearest rank).
fn percentile(times: &[Duration], q: f64) -> Duration {
    let i = ((times.len() - 1) as f64 * q).round() as usize;
    times[i.min(times.len() - 1)]
}

// ---------- 3. retrieval quality ----------

#[derive(serde::Deserialize)]
struct Question {
    page: String,
    question: String,
    answer: String,
}

/// Lowercase; every run of non-alphanumerics one space (quotes, markdown marks, `$`, `-`);
/// markdown link and image destinations (`](…)`) dropped, as a reader of the rendered text
/// would not see them.
fn normalise(text: &str) -> String {
    let text = strip_link_targets(text);
    let mut out = String::with_capacity(text.len());
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// `text` without the `(destination)` after each `]` of a markdown link or image (nested
/// parentheses counted, an unclosed one kept as text).
fn strip_link_targets(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        out.push_str(&rest[..=at]);
        let after = &rest[at + 2..];
        let mut depth = 1usize;
        let close = after.char_indices().find_map(|(i, c)| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => {}
            }
            (depth == 0).then_some(i)
        });
        match close {
            Some(i) => rest = &after[i + 1..],
            None => {
                out.push('(');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The question as a plain query: lowercased letters, digits and spaces only, so it always
/// parses (no `+`, `-`, `"`, `:`, `AND`…).
fn plain_query(question: &str) -> String {
    question
        .chars()
        .map(|c| {
            if c.is_alphanumeric() {
                c.to_lowercase().next().unwrap_or(c)
            } else {
                ' '
            }
        })
        .collect::<String>()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn recall(docs: &[Doc], summary: &mut Vec<Row>) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/data/questions.json");
    let questions: Vec<Question> = serde_json::from_str(
        &std::fs::read_to_string(&path).expect("benches/data/questions.json readable"),
    )
    .expect("questions.json is a list of {page, question, answer}");
    println!();
    println!(
        "== retrieval quality: {} questions ({}) over the {} pages, k = {MRR_AT}, per_page default",
        questions.len(),
        path.display(),
        docs.len()
    );
    let options = ChunkOptions::default();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (index, mut writer) = open_writer(dir.path());
    let mut chunked: HashMap<&str, Vec<Chunk>> = HashMap::new();
    let mut total = 0;
    for doc in docs {
        let chunks = chunk_markdown(&strip_link_destinations(&doc.markdown), &options);
        total += add(&mut writer, &doc.page(&doc.id, &doc.url, &chunks));
        chunked.insert(&doc.id, chunks);
    }
    writer.commit().expect("commit");
    drop(writer);
    let sizes: Vec<u32> = chunked.values().flatten().map(|c| c.words).collect();
    println!(
        "   {total} chunks, {:.0} words on average (smallest {}, largest {})",
        sizes.iter().map(|&w| f64::from(w)).sum::<f64>() / sizes.len().max(1) as f64,
        sizes.iter().min().copied().unwrap_or(0),
        sizes.iter().max().copied().unwrap_or(0)
    );
    let by_id: HashMap<&str, &Doc> = docs.iter().map(|d| (d.id.as_str(), d)).collect();

    let (mut at1, mut at5, mut page_at5, mut rr) = (0usize, 0usize, 0usize, 0.0f64);
    let mut misses = Vec::new();
    for (n, q) in questions.iter().enumerate() {
        let doc = by_id
            .get(q.page.as_str())
            .unwrap_or_else(|| panic!("question {}: no bench page {}", n + 1, q.page));
        let answer = normalise(&q.answer);
        let hits = index
            .search(&SearchQuery {
                text: plain_query(&q.question),
                k: MRR_AT,
                ..SearchQuery::default()
            })
            .unwrap_or_else(|e| panic!("question {}: {e}", n + 1));
        let passage = hits
            .iter()
            .position(|h| h.page_id == q.page && normalise(&h.text).contains(&answer));
        let page_rank = hits.iter().position(|h| h.page_id == q.page);
        if passage == Some(0) {
            at1 += 1;
        }
        if let Some(rank) = passage {
            rr += 1.0 / (rank + 1) as f64;
        }
        if page_rank.is_some_and(|r| r < RECALL_AT) {
            page_at5 += 1;
        }
        if passage.is_some_and(|r| r < RECALL_AT) {
            at5 += 1;
            continue;
        }
        let chunks = &chunked[q.page.as_str()];
        let why = if !normalise(&doc.markdown).contains(&answer) {
            "answer not in the extracted markdown".to_owned()
        } else if !chunks.iter().any(|c| normalise(&c.text).contains(&answer)) {
            "answer split across chunks".to_owned()
        } else {
            match (passage, page_rank) {
                (Some(rank), _) => format!("right passage at rank {}", rank + 1),
                (None, Some(rank)) if rank < RECALL_AT => format!(
                    "page at rank {}, but not the passage with the answer",
                    rank + 1
                ),
                (None, Some(rank)) => format!("page only at rank {}", rank + 1),
                (None, None) => format!("page not in the top {MRR_AT}"),
            }
        };
        misses.push(format!(
            "   miss {:>2} [{}] {:?} -> {:?}: {why}",
            n + 1,
            &q.page[..8.min(q.page.len())],
            q.question,
            q.answer
        ));
    }
    let count = questions.len().max(1) as f64;
    println!(
        "   recall@{RECALL_AT} {:.3} ({at5}/{}), recall@1 {:.3} ({at1}), MRR@{MRR_AT} {:.3}, page-level recall@{RECALL_AT} {:.3} ({page_at5})",
        at5 as f64 / count,
        questions.len(),
        at1 as f64 / count,
        rr / count,
        page_at5 as f64 / count
    );
    for miss in &misses {
        println!("{miss}");
    }
    summary.push(Row::info(
        "recall@5 (passage)",
        format!("{:.3} ({at5}/{})", at5 as f64 / count, questions.len()),
    ));
    summary.push(Row::info(
        "recall@1 (passage)",
        format!("{:.3}", at1 as f64 / count),
    ));
    summary.push(Row::info("MRR@10 (passage)", format!("{:.3}", rr / count)));
    summary.push(Row::info(
        "recall@5 (page)",
        format!("{:.3}", page_at5 as f64 / count),
    ));
}

// ---------- summary ----------

struct Row {
    name: String,
    value: String,
    target: String,
    /// Value over target, and whether it meets the target.
    verdict: Option<(f64, bool)>,
}

impl Row {
    fn at_least(name: &str, value: f64, target: f64, decimals: usize) -> Row {
        Row {
            name: name.to_owned(),
            value: format!("{value:.decimals$}"),
            target: format!(">= {target:.0}"),
            verdict: Some((value / target, value >= target)),
        }
    }
    fn at_most(name: &str, value: f64, target: f64, decimals: usize) -> Row {
        Row {
            name: name.to_owned(),
            value: format!("{value:.decimals$}"),
            target: format!("< {target:.0}"),
            verdict: Some((value / target, value < target)),
        }
    }
    fn info(name: &str, value: String) -> Row {
        Row {
            name: name.to_owned(),
            value,
            target: String::new(),
            verdict: None,
        }
    }
}

fn print_summary(rows: &[Row]) {
    println!();
    println!("== summary");
    println!(
        "   {:<44} {:>20} {:>8} {:>14}",
        "figure", "value", "target", "value/target"
    );
    for row in rows {
        let verdict = row.verdict.map_or_else(String::new, |(ratio, ok)| {
            format!("{ratio:.2} {}", if ok { "ok" } else { "MISSED" })
        });
        println!(
            "   {:<44} {:>20} {:>8} {:>14}",
            row.name, row.value, row.target, verdict
        );
    }
}
