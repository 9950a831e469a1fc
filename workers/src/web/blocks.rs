//! Blocks of a parsed page written out, and what of a text is already said: one element as
//! plain text or markdown with its links made absolute (what extraction adds to an answer or
//! puts in its place), a text's runs of four words in a row (how the extraction benchmarks
//! compare texts), and the runs said so far by an answer and the blocks added to it.
//!
//! Not here: choosing the blocks (`extract` for a product's, `thread` for a thread's posts),
//! or converting the answers of the extractors themselves.

use std::collections::HashSet;
use std::hash::{BuildHasher as _, BuildHasherDefault, DefaultHasher};

use dom_query::NodeRef;
use url::Url;

use crate::job::Format;

/// A block of the page as `format`: its scripts, styles, `<noscript>`s and templates left
/// out (removed from the document), its links made absolute against `base`. `None` for HTML
/// output (rs-trafilatura, whose answer the block joins or replaces, is not asked for it).
pub(crate) fn block_as(block: NodeRef<'_>, format: Format, base: &Url) -> Option<String> {
    let block = dom_query::Selection::from(block);
    block.select("script, style, noscript, template").remove();
    let block = block.nodes().first().copied()?;
    match format {
        Format::Markdown => {
            for link in dom_query::Selection::from(block)
                .select("a[href], img[src]")
                .nodes()
            {
                let attribute = if link.has_name("img") { "src" } else { "href" };
                if let Some(absolute) = link
                    .attr(attribute)
                    .and_then(|value| base.join(value.trim()).ok())
                {
                    link.set_attr(attribute, absolute.as_str());
                }
            }
            Some(block.md(None).to_string())
        }
        Format::Text => Some(block.formatted_text().to_string()),
        Format::Html => None,
    }
}

/// How many of `part`'s runs of four words in a row (words: letters, digits and `_`, as the
/// extraction benchmarks compare texts) are in `whole`, and how many runs `part` has.
pub(crate) fn runs_held(part: &str, whole: &str) -> (usize, usize) {
    let in_whole: HashSet<[&str; 4]> = word_runs(whole).collect();
    word_runs(part).fold((0, 0), |(held, all), run| {
        (held + usize::from(in_whole.contains(&run)), all + 1)
    })
}

/// A text's runs of four words in a row (words: letters, digits and `_`).
pub(crate) fn word_runs(text: &str) -> impl Iterator<Item = [&str; 4]> {
    let words: Vec<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
        .collect();
    (0..words.len().saturating_sub(3))
        .map(move |at| [words[at], words[at + 1], words[at + 2], words[at + 3]])
}

/// Hashes the runs [`Said`] keeps (fixed keys: the same answer on every run).
const RUNS_HASHER: BuildHasherDefault<DefaultHasher> = BuildHasherDefault::new();

/// The runs of four words said so far (an answer's, then each block's added), hashed and kept
/// as one set, so that a page of many blocks costs no more than its text.
#[derive(Default)]
pub(crate) struct Said(HashSet<u64>);

impl Said {
    /// The runs `text` says.
    pub(crate) fn of(text: &str) -> Self {
        Self(Self::runs(text).into_iter().collect())
    }

    /// `text`'s runs, hashed, in order (a text of n words, four or more, has n - 3).
    pub(crate) fn runs(text: &str) -> Vec<u64> {
        word_runs(text)
            .map(|run| RUNS_HASHER.hash_one(run))
            .collect()
    }

    /// How many of `runs` are said already.
    pub(crate) fn held(&self, runs: &[u64]) -> usize {
        runs.iter().filter(|run| self.0.contains(run)).count()
    }

    /// `runs` said from now on.
    pub(crate) fn add(&mut self, runs: Vec<u64>) {
        self.0.extend(runs);
    }
}
