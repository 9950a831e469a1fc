//! The synthetic pages of the latency index: a seeded PRNG, the corpus of sentences and index
//! words taken from the extracted bench pages, and a deterministic generator of pages and their
//! chunks (same seed and corpus, same index). It does not write an index.

use std::collections::{HashMap, HashSet};

use trawl_workers::archive::chunk::{Chunk, ChunkOptions, chunk_markdown, strip_link_destinations};

use crate::{Doc, FETCHED_AT, HOSTS, timestamp};

/// splitmix64: small, seeded, good enough to shuffle text.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    /// Uniform in `lo..=hi`.
    pub(crate) fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    pub(crate) fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// What the synthetic chunks are made of, all taken from the extracted bench pages.
pub(crate) struct Corpus {
    pub(crate) sentences: Vec<String>,
    pub(crate) headings: Vec<String>,
    pub(crate) titles: Vec<String>,
    pub(crate) hosts: Vec<String>,
    /// Index words (as tantivy's default tokenizer sees them) by frequency in `sentences`.
    pub(crate) frequent: Vec<String>,
    pub(crate) mid: Vec<String>,
    pub(crate) rare: Vec<String>,
}

impl Corpus {
    pub(crate) fn new(docs: &[Doc]) -> Corpus {
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
pub(crate) fn split_sentences(text: &str, out: &mut Vec<String>) {
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
pub(crate) fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty() && t.len() <= 40)
        .map(str::to_lowercase)
}

/// One synthetic page and its chunks.
pub(crate) struct SynthPage {
    pub(crate) page_id: String,
    pub(crate) url: String,
    pub(crate) host: String,
    pub(crate) title: String,
    pub(crate) fetched_at: jiff::Timestamp,
    pub(crate) chunks: Vec<Chunk>,
}

/// Deterministic generator of synthetic pages (same seed, same corpus: same index).
pub(crate) struct Synth<'a> {
    pub(crate) corpus: &'a Corpus,
    pub(crate) rng: Rng,
    /// `rareN` tokens are drawn from `0..tail`: about 7 chunks each.
    pub(crate) tail: usize,
}

impl<'a> Synth<'a> {
    pub(crate) fn new(corpus: &'a Corpus, chunks: usize) -> Self {
        Synth {
            corpus,
            rng: Rng(0x7472_6177_6c21),
            tail: tail_range(chunks),
        }
    }

    pub(crate) fn page(&mut self, n: usize, max_chunks: usize) -> SynthPage {
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

pub(crate) fn tail_range(chunks: usize) -> usize {
    (chunks / 5).max(1_000)
}
