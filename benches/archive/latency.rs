//! Part 2, query latency: builds (or reuses from its cache directory) a big synthetic index,
//! reports its build rate and size, then times `ArchiveIndex::search` over rows of query shapes
//! (percentiles and the slowest queries). It does not generate the pages (see `synth`).

use std::path::Path;
use std::time::{Duration, Instant};

use trawl_workers::archive::index::{ArchiveIndex, PageDoc, SearchQuery};

use crate::quantile::percentile;
use crate::summary::Row;
use crate::synth::{Corpus, Rng, Synth, tail_range};
use crate::{
    COMMIT_EVERY, Doc, HOSTS, INDEX_VERSION, SLOWEST, Settings, TARGET_P99_MS, WARMUP, add,
    open_writer,
};

/// What a finished build of the latency index recorded (`complete.json`).
#[derive(serde::Serialize, serde::Deserialize)]
pub(crate) struct Built {
    pub(crate) version: String,
    pub(crate) chunks: usize,
    pub(crate) pages: usize,
    pub(crate) text_bytes: u64,
    pub(crate) indexed_bytes: u64,
    pub(crate) build_secs: f64,
    pub(crate) generate_secs: f64,
}

pub(crate) fn latency(docs: &[Doc], settings: &Settings, summary: &mut Vec<Row>) {
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
        index.num_docs(),
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
pub(crate) fn describe(query: &SearchQuery) -> String {
    match &query.host {
        Some(host) => format!("{:?} host={host}", query.text),
        None => format!("{:?}", query.text),
    }
}

#[derive(Clone, Copy)]
pub(crate) enum Mix {
    /// 35% frequent (top 200), 35% mid (rank 200-5,000), 15% rare in the pages, 15% `rareN`.
    Mixed,
    /// Top 200 only (the, of, and, …): the worst case for a disjunction.
    Frequent,
    /// Half top 200, half [`Mix::Mixed`]: the shape of a natural-language question.
    Question,
}

pub(crate) fn query_word(rng: &mut Rng, corpus: &Corpus, tail: usize, mix: Mix) -> String {
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

pub(crate) fn build(corpus: &Corpus, dir: &Path, target: usize) -> Built {
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
                tenant: "default",
                rest: None,
            },
        )
        .0;
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
    assert_eq!(index.num_docs(), built.chunks as u64);
    std::fs::write(
        dir.join("complete.json"),
        serde_json::to_string_pretty(&built).expect("json"),
    )
    .expect("write the build marker");
    built
}

pub(crate) fn dir_bytes(dir: &Path) -> u64 {
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
pub(crate) fn segments(dir: &Path) -> Option<usize> {
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json")).ok()?).ok()?;
    meta.get("segments")?.as_array().map(Vec::len)
}
