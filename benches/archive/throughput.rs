//! Part 1, index throughput: the extracted bench pages chunked and indexed pass after pass into
//! a fresh directory until the chunk target, timed per run, medians against the chunks/s target.
//! It does not build the big latency index nor judge retrieval.

use std::time::{Duration, Instant};

use trawl_workers::archive::chunk::{ChunkOptions, chunk_markdown, strip_link_destinations};

use crate::summary::Row;
use crate::{
    COMMIT_EVERY, Doc, HEAP_BYTES, TARGET_CHUNKS_PER_S, THROUGHPUT_CHUNKS, add, open_writer,
};

pub(crate) struct Run {
    pub(crate) chunks: usize,
    pub(crate) pages: usize,
    pub(crate) elapsed: Duration,
    pub(crate) chunking: Duration,
    pub(crate) commits: usize,
}

impl Run {
    pub(crate) fn chunks_per_s(&self) -> f64 {
        self.chunks as f64 / self.elapsed.as_secs_f64()
    }
    pub(crate) fn pages_per_s(&self) -> f64 {
        self.pages as f64 / self.elapsed.as_secs_f64()
    }
}

pub(crate) fn throughput(docs: &[Doc], runs: usize, summary: &mut Vec<Row>) {
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
            index.num_docs(),
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
