//! Markdown of a stored page → passages ("chunks") for the BM25 full-text index.
//!
//! What it does: parses the markdown once with pulldown-cmark (tables on) only to find the
//! top-level blocks, their byte ranges and the headings, then slices the *original* text, so a
//! chunk's `text` is the page's markdown verbatim (trimmed). Words are whitespace-separated
//! tokens (`str::split_whitespace`). The rules:
//!
//! - Units. Every top-level block is one unit that is never split: a fenced or indented code
//!   block, a table, a block quote, an HTML block, a thematic break, and any text the parser
//!   gives no event for (link reference definitions). A list gives one unit per top-level
//!   item, so a long list may be cut between items but never inside one. A top-level
//!   paragraph longer than `max_words` is cut into pieces of `min_words..=max_words` words
//!   ending at the sentence end (`.`, `?` or `!`, then an uppercase word) nearest
//!   `target_words`; with no such sentence end, at the word boundary after `target_words`.
//! - Headings (ATX and setext) are not units. They form the heading path, a stack where a
//!   level-n heading replaces every heading of level ≥ n; a chunk's `headings` is the path of
//!   its first unit (empty before the first heading; an empty heading only pops). A heading
//!   with nothing under it contributes to paths only.
//! - Packing is greedy, in document order. The next unit always starts a new chunk if adding
//!   it (with any heading lines in between) would pass `max_words`. Inside one section the
//!   chunk takes the rest of the section if that fits in `max_words`; otherwise it stops once
//!   it has `min_words` and stopping leaves it closer to `target_words` than adding would.
//! - At a heading the chunk stops if it already has `min_words`, if a heading passed is
//!   outer to (a smaller level number than) the section the chunk started in, or if the new
//!   section does not fit whole within `max_words`. Otherwise the small section is merged
//!   in whole. A merged chunk keeps its first section's path (for text before the first
//!   heading, the empty path); the heading lines of the sections it absorbed stay in its
//!   `text` (they would be lost otherwise). The chunk's own path headings never appear in
//!   its `text`, and a chunk never starts with a heading line.
//! - A unit larger than `max_words` is a chunk of its own (the only way past `max_words`).
//!   Chunks are never empty; whitespace-only and heading-only documents give no chunks.
//!
//! What it does not do: no overlap between chunks, no rendering or stripping of markdown
//! (the index tokenizes; [`strip_link_destinations`] is a separate step the archive pool
//! runs first), no HTML input, no front-matter handling, no language-aware
//! segmentation (text without spaces, e.g. CJK, counts as one word per run, and a run is
//! never cut), no deduplication. One pass of the parser plus linear slicing: no regexes, no
//! quadratic joins.

use std::ops::Range;

use pulldown_cmark::{CodeBlockKind, Event, Options, Parser, Tag, TagEnd};
use serde::Serialize;

use crate::web::lines::{count_words, words};

/// The markdown with link and image destinations removed, for indexing: `[text](url)` and
/// `[text][ref]` become `text`, `![alt](src)` becomes `alt`; autolinks (`<https://…>`),
/// code spans and code blocks are left alone (the parser gives no links inside code). Link
/// destinations were about an eighth of all tokens of the extraction benchmark's pages:
/// noise for BM25 and in snippets, and rarely what a RAG reader wants in a passage.
pub fn strip_link_destinations(markdown: &str) -> std::borrow::Cow<'_, str> {
    let mut text = std::borrow::Cow::Borrowed(markdown);
    // A link inside a link (an image in a link) is reduced by the next pass.
    for _ in 0..3 {
        let mut spans: Vec<(Range<usize>, Range<usize>)> = Vec::new();
        let mut open: Option<(Range<usize>, Option<Range<usize>>)> = None;
        let mut depth = 0_usize;
        for (event, range) in Parser::new_ext(&text, Options::ENABLE_TABLES).into_offset_iter() {
            match event {
                Event::Start(Tag::Link { link_type, .. })
                    if link_type == pulldown_cmark::LinkType::Autolink
                        || link_type == pulldown_cmark::LinkType::Email =>
                {
                    depth += usize::from(open.is_some());
                }
                Event::Start(Tag::Link { .. } | Tag::Image { .. }) => {
                    if open.is_none() {
                        open = Some((range, None));
                    } else {
                        depth += 1;
                    }
                }
                Event::End(TagEnd::Link | TagEnd::Image) => {
                    if depth > 0 {
                        depth -= 1;
                    } else if let Some((outer, inner)) = open.take() {
                        spans.push((outer, inner.unwrap_or(0..0)));
                    }
                }
                _ => {
                    if let Some((_, inner)) = &mut open {
                        *inner = Some(match inner.take() {
                            Some(seen) => seen.start.min(range.start)..seen.end.max(range.end),
                            None => range,
                        });
                    }
                }
            }
        }
        if spans.is_empty() {
            break;
        }
        let mut out = String::with_capacity(text.len());
        let mut at = 0;
        for (outer, inner) in spans {
            if outer.start < at {
                continue;
            }
            out.push_str(&text[at..outer.start]);
            out.push_str(&text[inner]);
            at = outer.end;
        }
        out.push_str(&text[at..]);
        text = std::borrow::Cow::Owned(out);
        // Every link and image starts with `[` or `![`: without one left there is nothing
        // for another pass to find (most pages end here, after one parse).
        if !text.contains('[') {
            break;
        }
    }
    text
}

/// Chunk size bounds, in words (whitespace-separated tokens).
///
/// Inconsistent values are normalised: `max_words` is at least 1, `target_words` is clamped
/// to `1..=max_words` and `min_words` to at most `target_words`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkOptions {
    /// A chunk smaller than this keeps absorbing following small sections (default 300).
    pub min_words: usize,
    /// The size chunks aim at (default 400).
    pub target_words: usize,
    /// Upper bound, passed only by a single block that must not be split (default 500).
    pub max_words: usize,
}

impl Default for ChunkOptions {
    fn default() -> Self {
        Self {
            min_words: 300,
            target_words: 400,
            max_words: 500,
        }
    }
}

/// One passage of a page, as indexed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Chunk {
    /// Position in the page: 0, 1, 2… in document order.
    pub index: u32,
    /// Heading path of the chunk's first block, outermost first (e.g. `["Install", "On
    /// Debian"]`): heading text only, no `#`; empty before the first heading.
    pub headings: Vec<String>,
    /// The passage's markdown, verbatim from the page, trimmed (except the indentation of an
    /// indented code block it starts with); never empty.
    pub text: String,
    /// Number of whitespace-separated words in `text`.
    pub words: u32,
}

/// Splits `markdown` into chunks along headings, following the rules in the module docs.
pub fn chunk_markdown(markdown: &str, options: &ChunkOptions) -> Vec<Chunk> {
    let limits = Limits::new(options);
    let mut collector = Collector::new(markdown, limits);
    collector.run();
    let Collector {
        mut units, paths, ..
    } = collector;
    fill_rest(&mut units);
    pack(markdown, &units, &paths, limits)
}

/// Normalised [`ChunkOptions`].
#[derive(Debug, Clone, Copy)]
struct Limits {
    min: usize,
    target: usize,
    max: usize,
}

impl Limits {
    fn new(options: &ChunkOptions) -> Self {
        let max = options.max_words.max(1);
        let target = options.target_words.clamp(1, max);
        let min = options.min_words.min(target);
        Self { min, target, max }
    }
}

/// "No heading since the previous unit" for [`Unit::crossed`].
const NO_HEADING: u8 = u8::MAX;

/// A piece of the document that is never split: a block, a list item or a paragraph piece.
#[derive(Debug)]
struct Unit {
    /// Byte range in the document.
    start: usize,
    end: usize,
    /// Words in `start..end`.
    words: usize,
    /// Words of the heading lines between the previous unit and this one.
    gap_words: usize,
    /// Index into the heading paths; changes exactly at section boundaries.
    path: usize,
    /// Level of the heading that opened this unit's section (0 before the first heading).
    level: u8,
    /// Smallest level among the headings since the previous unit, or [`NO_HEADING`].
    crossed: u8,
    /// Words from this unit to the end of its section (filled by [`fill_rest`]).
    rest: usize,
    /// An indented code block: `start` is at its line start and the indentation is kept.
    keep_indent: bool,
}

/// What a top-level block becomes.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// Split when longer than `max_words`.
    Paragraph,
    /// Kept whole, with its first line's indentation.
    IndentedCode,
    /// Kept whole.
    Atomic,
}

/// Turns the parser's top-level events into units and heading paths.
struct Collector<'a> {
    doc: &'a str,
    limits: Limits,
    units: Vec<Unit>,
    paths: Vec<Vec<String>>,
    /// Open headings: (level, text).
    stack: Vec<(u8, String)>,
    /// A heading was seen since the last unit: the next unit starts a new path.
    new_section: bool,
    level: u8,
    crossed: u8,
    heading_words: usize,
    /// Everything before this byte offset has been accounted for.
    pos: usize,
}

impl<'a> Collector<'a> {
    fn new(doc: &'a str, limits: Limits) -> Self {
        Self {
            doc,
            limits,
            units: Vec::new(),
            paths: Vec::new(),
            stack: Vec::new(),
            new_section: true,
            level: 0,
            crossed: NO_HEADING,
            heading_words: 0,
            pos: 0,
        }
    }

    fn run(&mut self) {
        let parser = Parser::new_ext(
            self.doc,
            Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH,
        );
        let mut depth = 0usize;
        let mut in_list = false;
        let mut heading: Option<(u8, Range<usize>)> = None;
        let mut heading_text = String::new();
        for (event, range) in parser.into_offset_iter() {
            match event {
                Event::Start(tag) => {
                    if depth == 0 {
                        match tag {
                            Tag::Heading { level, .. } => {
                                heading = Some((level as u8, range));
                                heading_text.clear();
                            }
                            Tag::List(_) => in_list = true,
                            Tag::Paragraph => self.block(range, Kind::Paragraph),
                            Tag::CodeBlock(CodeBlockKind::Indented) => {
                                self.block(range, Kind::IndentedCode);
                            }
                            _ => self.block(range, Kind::Atomic),
                        }
                    } else if depth == 1 && in_list && matches!(tag, Tag::Item) {
                        self.block(range, Kind::Atomic);
                    }
                    depth += 1;
                }
                Event::End(end) => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        in_list = false;
                        if let (TagEnd::Heading(_), Some((level, range))) = (end, heading.take()) {
                            self.heading(level, &heading_text, range);
                        }
                    }
                }
                Event::Text(text) | Event::Code(text) => {
                    if heading.is_some() {
                        heading_text.push_str(&text);
                    }
                }
                Event::SoftBreak | Event::HardBreak => {
                    if heading.is_some() {
                        heading_text.push(' ');
                    }
                }
                _ => {
                    // A leaf at top level (a thematic break); inline leaves are ignored.
                    if depth == 0 {
                        self.block(range, Kind::Atomic);
                    }
                }
            }
        }
        self.gap(self.doc.len());
    }

    /// Text between `pos` and `upto` that no event covered becomes an atomic unit.
    fn gap(&mut self, upto: usize) {
        if upto > self.pos {
            let range = self.pos..upto;
            let words = count_words(&self.doc[range.clone()]);
            self.push(range, words, false);
            self.pos = upto;
        }
    }

    fn block(&mut self, range: Range<usize>, kind: Kind) {
        let mut start = range.start.max(self.pos);
        let end = range.end.min(self.doc.len());
        if end <= start {
            return;
        }
        if let Kind::IndentedCode = kind {
            // The parser's range starts after the first line's indentation.
            start = self.doc[..start]
                .rfind('\n')
                .map_or(0, |i| i + 1)
                .max(self.pos);
        }
        self.gap(start);
        match kind {
            Kind::Paragraph => {
                let words = count_words(&self.doc[start..end]);
                if words > self.limits.max {
                    self.split_paragraph(start, end);
                } else {
                    self.push(start..end, words, false);
                }
            }
            Kind::IndentedCode => {
                let words = count_words(&self.doc[start..end]);
                self.push(start..end, words, true);
            }
            Kind::Atomic => {
                let words = count_words(&self.doc[start..end]);
                self.push(start..end, words, false);
            }
        }
        self.pos = end;
    }

    fn heading(&mut self, level: u8, raw: &str, range: Range<usize>) {
        let start = range.start.max(self.pos);
        let end = range.end.min(self.doc.len()).max(start);
        self.gap(start);
        self.heading_words += count_words(&self.doc[start..end]);
        while self.stack.last().is_some_and(|(l, _)| *l >= level) {
            self.stack.pop();
        }
        let mut text = String::with_capacity(raw.len());
        for word in words(raw) {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(word);
        }
        if !text.is_empty() {
            self.stack.push((level, text));
        }
        self.new_section = true;
        self.level = level;
        self.crossed = self.crossed.min(level);
        self.pos = end;
    }

    /// Cuts an oversized paragraph into pieces (see the module docs).
    fn split_paragraph(&mut self, start: usize, end: usize) {
        let text = &self.doc[start..end];
        let tokens = token_spans(text);
        let mut i = 0;
        while i < tokens.len() {
            let rest = &tokens[i..];
            let take = if rest.len() <= self.limits.max {
                rest.len()
            } else {
                piece_len(text, rest, self.limits)
            };
            let first = rest[0].start;
            let last = rest[take - 1].end;
            self.push(start + first..start + last, take, false);
            i += take;
        }
    }

    fn push(&mut self, range: Range<usize>, words: usize, keep_indent: bool) {
        if words == 0 {
            return;
        }
        if self.new_section {
            self.paths
                .push(self.stack.iter().map(|(_, t)| t.clone()).collect());
            self.new_section = false;
        }
        self.units.push(Unit {
            start: range.start,
            end: range.end,
            words,
            gap_words: std::mem::take(&mut self.heading_words),
            path: self.paths.len() - 1,
            level: self.level,
            crossed: std::mem::replace(&mut self.crossed, NO_HEADING),
            rest: 0,
            keep_indent,
        });
    }
}

/// Number of words of the first piece of `tokens` (more than `max` of them).
fn piece_len(text: &str, tokens: &[Range<usize>], limits: Limits) -> usize {
    let lo = limits.min.max(1);
    let hi = limits.max.min(tokens.len() - 1);
    let mut best: Option<usize> = None;
    for count in lo..=hi {
        if is_sentence_end(text, tokens, count - 1)
            && best.is_none_or(|b| count.abs_diff(limits.target) < b.abs_diff(limits.target))
        {
            best = Some(count);
        }
    }
    best.unwrap_or(limits.target)
}

/// Whether a sentence ends with token `j` ("." / "?" / "!" then an uppercase word, or the end).
fn is_sentence_end(text: &str, tokens: &[Range<usize>], j: usize) -> bool {
    const CLOSERS: &[char] = &['"', '\'', '”', '’', ')', ']', '*', '_'];
    const OPENERS: &[char] = &['"', '\'', '“', '‘', '(', '[', '*', '_'];
    let word = text[tokens[j].clone()].trim_end_matches(CLOSERS);
    if !word.ends_with(['.', '?', '!']) {
        return false;
    }
    match tokens.get(j + 1) {
        None => true,
        Some(next) => text[next.clone()]
            .trim_start_matches(OPENERS)
            .chars()
            .next()
            .is_some_and(char::is_uppercase),
    }
}

/// Byte ranges of the whitespace-separated tokens of `s` (as `split_whitespace` sees them).
fn token_spans(s: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        if c.is_whitespace() {
            if let Some(st) = start.take() {
                out.push(st..i);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(st) = start {
        out.push(st..s.len());
    }
    out
}

/// Fills [`Unit::rest`]: words from each unit to the end of its section.
fn fill_rest(units: &mut [Unit]) {
    let mut next: Option<(usize, usize)> = None; // (path, rest) of the following unit
    for unit in units.iter_mut().rev() {
        unit.rest = unit.words
            + match next {
                Some((path, rest)) if path == unit.path => rest,
                _ => 0,
            };
        next = Some((unit.path, unit.rest));
    }
}

/// Greedy packing of units into chunks (see the module docs).
fn pack(doc: &str, units: &[Unit], paths: &[Vec<String>], limits: Limits) -> Vec<Chunk> {
    let mut chunks = Vec::new();
    let Some(first_unit) = units.first() else {
        return chunks;
    };
    let mut first = 0;
    let mut words = first_unit.words;
    for (i, unit) in units.iter().enumerate().skip(1) {
        let start = &units[first];
        let total = words + unit.gap_words + unit.words;
        let close = if total > limits.max {
            true
        } else if unit.path != units[i - 1].path {
            // A small section is merged only whole, never into an outer one.
            words >= limits.min
                || unit.crossed < start.level
                || words + unit.gap_words + unit.rest > limits.max
        } else if words + unit.rest <= limits.max || total <= limits.target {
            false
        } else {
            words >= limits.min && words + total > 2 * limits.target
        };
        if close {
            chunks.push(make_chunk(
                doc,
                &units[first..i],
                paths,
                words,
                chunks.len(),
            ));
            first = i;
            words = unit.words;
        } else {
            words = total;
        }
    }
    chunks.push(make_chunk(doc, &units[first..], paths, words, chunks.len()));
    chunks
}

fn make_chunk(
    doc: &str,
    units: &[Unit],
    paths: &[Vec<String>],
    words: usize,
    index: usize,
) -> Chunk {
    let (start, end, keep_indent, path) = match (units.first(), units.last()) {
        (Some(first), Some(last)) => (first.start, last.end, first.keep_indent, first.path),
        _ => (0, 0, false, usize::MAX),
    };
    let slice = &doc[start..end];
    let text = if keep_indent {
        slice.trim_end()
    } else {
        slice.trim()
    };
    Chunk {
        index: u32::try_from(index).unwrap_or(u32::MAX),
        headings: paths.get(path).cloned().unwrap_or_default(),
        text: text.to_owned(),
        words: u32::try_from(words).unwrap_or(u32::MAX),
    }
}

#[cfg(test)]
mod tests;
