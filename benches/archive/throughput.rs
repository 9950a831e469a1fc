//! Part 1, index throughput: the extracted bench pages chunked, their page documents made (the
//! visible text outside the content, `archive::page_text`, as the archive pool does by
//! default) and both indexed, pass after pass into a fresh directory until the chunk target,
//! timed per run, medians against the chunks/s target. It does not build the big latency index
//! nor judge retrieval.

use std::time::{Duration, Instant};

use trawl_workers::archive::chunk::{ChunkOptions, chunk_markdown, strip_link_destinations};
use trawl_workers::archive::page_text::rest_of_page;

use crate::summary::Row;
use crate::{
    COMMIT_EVERY, Doc, HEAP_BYTES, TARGET_CHUNKS_PER_S, THROUGHPUT_CHUNKS, add, open_writer,
};

pub(crate) struct Run {
    pub(crate) chunks: usize,
    pub(crate) page_docs: usize,
    pub(crate) pages: usize,
    pub(crate) elapsed: Duration,
    pub(crate) chunking: Duration,
    pub(crate) page_text: Duration,
    pub(crate) commits: usize,
}

impl Run {
    /// Chunks a second of the whole loop (chunking, page text, indexing chunks and page
    /// documents). Not the time making page text left out: tantivy's threads index while the
    /// main one makes it, so that would overstate indexing.
    pub(crate) fn chunks_per_s(&self) -> f64 {
        self.chunks as f64 / self.elapsed.as_secs_f64()
    }
    pub(crate) fn pages_per_s(&self) -> f64 {
        self.pages as f64 / self.elapsed.as_secs_f64()
    }
    pub(crate) fn page_text_ms(&self) -> f64 {
        1_000.0 * self.page_text.as_secs_f64() / self.pages.max(1) as f64
    }
}

pub(crate) fn throughput(docs: &[Doc], runs: usize, summary: &mut Vec<Row>) {
    println!();
    println!(
        "== index throughput: chunk + page text + add_page, {} MB heap, commit every {COMMIT_EVERY} pages, until >= {THROUGHPUT_CHUNKS} chunks",
        HEAP_BYTES >> 20
    );
    let options = ChunkOptions::default();
    let mut results = Vec::new();
    for run in 0..runs {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let (index, mut writer) = open_writer(dir.path());
        let mut result = Run {
            chunks: 0,
            page_docs: 0,
            pages: 0,
            elapsed: Duration::ZERO,
            chunking: Duration::ZERO,
            page_text: Duration::ZERO,
            commits: 0,
        };
        let started = Instant::now();
        'passes: for pass in 0.. {
            for doc in docs {
                let chunking = Instant::now();
                let content = strip_link_destinations(&doc.markdown);
                let chunks = chunk_markdown(&content, &options);
                result.chunking += chunking.elapsed();
                let page_text = Instant::now();
                let rest = rest_of_page(&doc.html, &content);
                result.page_text += page_text.elapsed();
                let page_id = format!("{}-{pass}", doc.id);
                let separator = if doc.url.contains('?') { '&' } else { '?' };
                let url = format!("{}{separator}trawl-pass={pass}", doc.url);
                let (chunks, page_docs) =
                    add(&mut writer, &doc.page(&page_id, &url, &chunks, Some(&rest)));
                result.chunks += chunks;
                result.page_docs += page_docs;
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
            (result.chunks + result.page_docs) as u64,
            "every chunk and page document is searchable"
        );
        println!(
            "   run {}: {} chunks and {} page documents from {} pages in {:.2} s: {:.0} chunks/s, {:.0} pages/s ({} commits; chunking {:.0}% of the time, page text {:.0}%, {:.2} ms a page)",
            run + 1,
            result.chunks,
            result.page_docs,
            result.pages,
            result.elapsed.as_secs_f64(),
            result.chunks_per_s(),
            result.pages_per_s(),
            result.commits,
            100.0 * result.chunking.as_secs_f64() / result.elapsed.as_secs_f64(),
            100.0 * result.page_text.as_secs_f64() / result.elapsed.as_secs_f64(),
            result.page_text_ms()
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
    summary.push(Row::info(
        "page text, ms a page",
        format!("{:.2}", median.page_text_ms()),
    ));
}
