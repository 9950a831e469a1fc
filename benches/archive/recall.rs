//! Part 3, retrieval quality: the bench pages indexed under their ids, each question of
//! `benches/data/questions.json` run as a plain query, scored by whether a top hit holds the
//! answer phrase (recall@5, recall@1, MRR@10, page-level recall, every miss with its reason).
//! It does not measure speed.

use std::collections::HashMap;
use std::path::Path;

use trawl_workers::archive::chunk::{Chunk, ChunkOptions, chunk_markdown, strip_link_destinations};
use trawl_workers::archive::index::SearchQuery;

use crate::summary::Row;
use crate::{Doc, MRR_AT, RECALL_AT, add, open_writer};

#[derive(serde::Deserialize)]
pub(crate) struct Question {
    pub(crate) page: String,
    pub(crate) question: String,
    pub(crate) answer: String,
}

/// Lowercase; every run of non-alphanumerics one space (quotes, markdown marks, `$`, `-`);
/// markdown link and image destinations (`](…)`) dropped, as a reader of the rendered text
/// would not see them.
pub(crate) fn normalise(text: &str) -> String {
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
pub(crate) fn strip_link_targets(text: &str) -> String {
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
pub(crate) fn plain_query(question: &str) -> String {
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

pub(crate) fn recall(docs: &[Doc], summary: &mut Vec<Row>) {
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
        // Passages only: the questions ask for the articles' own text.
        total += add(&mut writer, &doc.page(&doc.id, &doc.url, &chunks, None)).0;
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
