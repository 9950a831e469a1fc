//! Tests of the chunker: link stripping, and the packing rules on hand-written and generated
//! documents, checked against an independent line-based view of each document.

use std::collections::HashMap;

use super::*;

#[test]
fn link_destinations_are_stripped_outside_code() {
    let markdown = "See [the docs](https://a.test/x?utm=1 \"Docs\") and ![a chart](c.png).\n\n\
                    [![logo](l.png)](https://a.test/) <https://kept.test/> [ref link][r]\n\n\
                    `[in](code)`\n\n```\nlet a = [b](c);\n```\n\n[r]: https://r.test/\n";
    let stripped = strip_link_destinations(markdown);
    assert_eq!(
        stripped,
        "See the docs and a chart.\n\nlogo <https://kept.test/> ref link\n\n\
         `[in](code)`\n\n```\nlet a = [b](c);\n```\n\n[r]: https://r.test/\n"
    );
    assert!(matches!(
        strip_link_destinations("no links here"),
        std::borrow::Cow::Borrowed(_)
    ));
    // A link in a link's text: the outer one is a link only once the inner one is gone.
    assert_eq!(strip_link_destinations("[a [b](c) d](e) f"), "a b d f");
    assert_eq!(strip_link_destinations("[x](y) z"), "x z");
}

// ---------- helpers: an independent, line-based view of the fixtures ----------

/// Whether each line is a heading line (ATX, or setext text + underline), fences aware.
fn heading_lines(doc: &str) -> Vec<(&str, bool)> {
    let lines: Vec<&str> = doc.lines().collect();
    let mut out: Vec<(&str, bool)> = lines.iter().map(|l| (*l, false)).collect();
    let mut in_fence = false;
    for (i, line) in lines.iter().enumerate() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        if indent < 4 && t.starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence || indent >= 4 {
            continue;
        }
        let hashes = t.bytes().take_while(|b| *b == b'#').count();
        if (1..=6).contains(&hashes) && (t.len() == hashes || t[hashes..].starts_with([' ', '\t']))
        {
            out[i].1 = true;
            continue;
        }
        let prev_blank = i == 0 || lines[i - 1].trim().is_empty();
        if let Some(next) = lines.get(i + 1) {
            let n = next.trim();
            let underline =
                !n.is_empty() && (n.bytes().all(|b| b == b'=') || n.bytes().all(|b| b == b'-'));
            if underline && prev_blank && !t.is_empty() && !t.starts_with(['-', '|', '>']) {
                out[i].1 = true;
                out[i + 1].1 = true;
            }
        }
    }
    out
}

/// Document tokens, each flagged "in a heading line".
fn doc_tokens(doc: &str) -> Vec<(&str, bool)> {
    heading_lines(doc)
        .into_iter()
        .flat_map(|(line, h)| line.split_whitespace().map(move |w| (w, h)))
        .collect()
}

/// Lines of fenced code blocks, fences included, one string per block.
fn fenced_blocks(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Option<Vec<&str>> = None;
    for line in doc.lines() {
        let is_fence = line.starts_with("```");
        match (&mut cur, is_fence) {
            (None, true) => cur = Some(vec![line]),
            (Some(lines), true) => {
                lines.push(line);
                out.push(lines.join("\n"));
                cur = None;
            }
            (Some(lines), false) => lines.push(line),
            (None, false) => {}
        }
    }
    assert!(cur.is_none(), "fixture has an unclosed fence");
    out
}

/// Tables (runs of lines starting with '|') and list items (a marker line plus its
/// indented continuation lines), outside fences.
fn tables_and_items(doc: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    let mut cur_is_table = false;
    let mut in_fence = false;
    let flush = |cur: &mut Vec<&str>, out: &mut Vec<String>| {
        if !cur.is_empty() {
            out.push(cur.join("\n"));
            cur.clear();
        }
    };
    for line in doc.lines() {
        if line.starts_with("```") {
            in_fence = !in_fence;
            flush(&mut cur, &mut out);
            continue;
        }
        if in_fence {
            continue;
        }
        let is_item = line.starts_with("- ")
            || line
                .split_once(". ")
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if line.starts_with('|') {
            if !cur_is_table {
                flush(&mut cur, &mut out);
            }
            cur_is_table = true;
            cur.push(line);
        } else if is_item {
            flush(&mut cur, &mut out);
            cur_is_table = false;
            cur.push(line);
        } else if line.starts_with("  ") && !cur.is_empty() && !cur_is_table {
            cur.push(line);
        } else {
            flush(&mut cur, &mut out);
        }
    }
    flush(&mut cur, &mut out);
    out
}

/// Properties every chunking must have. `may_exceed` says whether a chunk text over
/// `max_words` is one indivisible block.
fn check(doc: &str, opts: &ChunkOptions, chunks: &[Chunk], may_exceed: &dyn Fn(&str) -> bool) {
    for (i, c) in chunks.iter().enumerate() {
        assert_eq!(c.index as usize, i, "indexes 0..n in order");
        assert!(!c.text.trim().is_empty(), "empty chunk {i}");
        assert_eq!(c.text.trim_end(), c.text, "chunk {i} not trimmed");
        assert!(
            c.text == c.text.trim_start() || c.text.starts_with("    "),
            "chunk {i} not trimmed"
        );
        assert_eq!(
            c.words as usize,
            c.text.split_whitespace().count(),
            "chunk {i} words"
        );
        assert!(c.words > 0);
        if c.words as usize > opts.max_words {
            assert!(
                may_exceed(&c.text),
                "chunk {i} has {} words > max {} and is not one block:\n{}",
                c.words,
                opts.max_words,
                c.text
            );
        }
        // Fences balanced inside every chunk.
        let fences = c
            .text
            .lines()
            .filter(|l| l.trim_start().starts_with("```"))
            .count();
        assert_eq!(
            fences % 2,
            0,
            "chunk {i} has an unbalanced fence:\n{}",
            c.text
        );
        // A chunk never starts with a heading line (its own headings are in `headings`).
        let first_line = c.text.lines().next().unwrap_or_default();
        assert!(
            !heading_lines(&c.text)[0].1,
            "chunk {i} starts with a heading: {first_line}"
        );
    }
    // The chunks' words are the document's words in order, nothing added, nothing lost
    // except heading lines between chunks (the lines that become `headings`).
    let doc = doc_tokens(doc);
    let mut di = 0;
    for (ci, c) in chunks.iter().enumerate() {
        while doc.get(di).is_some_and(|(_, is_heading)| *is_heading) {
            di += 1;
        }
        for tok in c.text.split_whitespace() {
            assert!(di < doc.len(), "chunk {ci}: extra word {tok:?}");
            assert_eq!(doc[di].0, tok, "chunk {ci}: word lost or changed");
            di += 1;
        }
    }
    for (d, is_heading) in &doc[di..] {
        assert!(is_heading, "word {d:?} lost at the end");
    }
}

/// Each block appears whole in exactly one chunk.
fn assert_whole_once(blocks: &[String], chunks: &[Chunk]) {
    for b in blocks {
        let b = b.trim();
        let n = chunks.iter().filter(|c| c.text.contains(b)).count();
        assert_eq!(n, 1, "block found whole in {n} chunks:\n{b}");
    }
}

fn opts(min: usize, target: usize, max: usize) -> ChunkOptions {
    ChunkOptions {
        min_words: min,
        target_words: target,
        max_words: max,
    }
}

fn words(prefix: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("{prefix}{i}"))
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------- hand-written fixtures ----------

const GUIDE: &str = "\
Fetched from a small project site; this line precedes any heading.

# Widgetizer

Widgetizer turns gadgets into widgets. It is fast and small.

## Install

You need a recent toolchain.

### On Debian

- update the package index first
- install the widgetizer package
  and accept the prompt
- check the version

```sh
sudo apt-get install widgetizer
widgetizer --version
```

### On macOS

Use the tap.

```
brew install widgetizer
```

Configuration
-------------

| key | default | meaning |
|-----|---------|---------|
| depth | 3 | how deep to look |
| colour | blue | the widget colour |

## Usage ##

1. write a gadget file
2. run the tool on it

Usage notes
===========

Top level again, via a setext heading.

#### Deep note

Skipped levels are fine.

## Closing

That is all.
";

#[test]
fn heading_paths_on_a_known_document() {
    // min 1: every heading closes the chunk, so each section is its own chunk.
    let o = opts(1, 400, 500);
    let chunks = chunk_markdown(GUIDE, &o);
    check(GUIDE, &o, &chunks, &|_| false);
    let got: Vec<(Vec<&str>, &str)> = chunks
        .iter()
        .map(|c| {
            (
                c.headings.iter().map(String::as_str).collect(),
                c.text.split_whitespace().next().unwrap_or_default(),
            )
        })
        .collect();
    let want: Vec<(Vec<&str>, &str)> = vec![
        (vec![], "Fetched"),
        (vec!["Widgetizer"], "Widgetizer"),
        (vec!["Widgetizer", "Install"], "You"),
        (vec!["Widgetizer", "Install", "On Debian"], "-"),
        (vec!["Widgetizer", "Install", "On macOS"], "Use"),
        (vec!["Widgetizer", "Configuration"], "|"),
        (vec!["Widgetizer", "Usage"], "1."),
        (vec!["Usage notes"], "Top"),
        (vec!["Usage notes", "Deep note"], "Skipped"),
        (vec!["Usage notes", "Closing"], "That"),
    ];
    assert_eq!(got, want);
    assert_whole_once(&fenced_blocks(GUIDE), &chunks);
    assert_whole_once(&tables_and_items(GUIDE), &chunks);
    // The Debian section holds its list and its code block, verbatim.
    assert!(
        chunks[3]
            .text
            .starts_with("- update the package index first\n")
    );
    assert!(chunks[3].text.ends_with("widgetizer --version\n```"));
    assert!(!chunks.iter().any(|c| c.text.contains("# Widgetizer")));
}

#[test]
fn small_sections_merge_but_not_across_an_outer_heading() {
    let o = ChunkOptions::default();
    let chunks = chunk_markdown(GUIDE, &o);
    check(GUIDE, &o, &chunks, &|_| false);
    // The whole page is ~150 words: every section fits whole and none is outer to the
    // preamble (level 0), so it is one chunk with the preamble's (empty) path.
    assert_eq!(chunks.len(), 1, "{chunks:#?}");
    assert!(chunks[0].headings.is_empty());
    assert!(
        chunks[0].text.contains("### On Debian"),
        "absorbed headings stay in text"
    );

    // A chunk started at level 3 stops at a level-2 heading.
    let doc = "# A\n\n### A1\n\nsmall one\n\n## B\n\nsmall two\n\n## C\n\nsmall three\n";
    let chunks = chunk_markdown(doc, &o);
    check(doc, &o, &chunks, &|_| false);
    let paths: Vec<_> = chunks.iter().map(|c| c.headings.join("/")).collect();
    assert_eq!(paths, ["A/A1", "A/B"]);
    // B and C are siblings: C merged whole into B's chunk, its heading kept in the text.
    assert_eq!(chunks[1].text, "small two\n\n## C\n\nsmall three");
    assert_eq!(chunks[1].words, 6);
}

#[test]
fn many_tiny_sections_are_packed() {
    let mut doc = String::new();
    for s in 0..40 {
        doc.push_str(&format!(
            "## Section {s}\n\n{}\n\n",
            words(&format!("s{s}w"), 40)
        ));
    }
    let o = ChunkOptions::default();
    let chunks = chunk_markdown(&doc, &o);
    check(&doc, &o, &chunks, &|_| false);
    assert!(chunks.len() <= 6, "{} chunks", chunks.len());
    for c in &chunks[..chunks.len() - 1] {
        assert!(c.words as usize >= o.min_words, "{} words", c.words);
        assert!(c.words as usize <= o.max_words);
    }
    assert_eq!(chunks[0].headings, ["Section 0"]);
    assert_eq!(chunks[1].headings, ["Section 8"]);
}

#[test]
fn sibling_too_big_to_fit_whole_starts_its_own_chunk() {
    let o = ChunkOptions::default();
    let doc = format!(
        "## Small\n\n{}\n\n## Big\n\n{}\n\n{}\n",
        words("a", 50),
        words("b", 250),
        words("c", 250)
    );
    let chunks = chunk_markdown(&doc, &o);
    check(&doc, &o, &chunks, &|_| false);
    let paths: Vec<_> = chunks.iter().map(|c| c.headings.join("/")).collect();
    assert_eq!(paths, ["Small", "Big"]);
    assert_eq!(chunks[0].words, 50);
    // Deeper: same rule; the rest of a section is taken whole when it fits (500 ≤ max).
    let doc = doc.replace("## Big", "### Deeper");
    let chunks = chunk_markdown(&doc, &o);
    check(&doc, &o, &chunks, &|_| false);
    let paths: Vec<_> = chunks.iter().map(|c| c.headings.join("/")).collect();
    assert_eq!(paths, ["Small", "Small/Deeper"]);
    assert_eq!(chunks[0].words, 50);
    assert_eq!(chunks[1].words, 500);
    // A deeper section that fits whole is merged, its heading line kept in the text.
    let doc = format!(
        "## Small\n\n{}\n\n### Deeper\n\n{}\n",
        words("a", 50),
        words("b", 200)
    );
    let chunks = chunk_markdown(&doc, &o);
    check(&doc, &o, &chunks, &|_| false);
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].headings, ["Small"]);
    assert_eq!(chunks[0].words, 50 + 2 + 200);
}

#[test]
fn odd_blocks_are_kept() {
    let doc = "\
# Misc ##

See [the docs][docs] and the footnote.

[docs]: https://example.org/docs \"Docs\"

> quoted text
> over two lines

<div class=\"note\">raw html block</div>

---

    indented code line one
    indented code line two

- [ ] a task item
- [x] a done item

Trailing paragraph.
";
    let o = opts(1, 3, 4);
    let chunks = chunk_markdown(doc, &o);
    let blocks = [
        "> quoted text\n> over two lines",
        "<div class=\"note\">raw html block</div>",
        "    indented code line one\n    indented code line two",
        "See [the docs][docs] and the footnote.",
        "[docs]: https://example.org/docs \"Docs\"",
        "- [ ] a task item",
        "- [x] a done item",
        "Trailing paragraph.",
    ];
    check(doc, &o, &chunks, &|t| blocks.contains(&t));
    for c in &chunks {
        assert_eq!(c.headings, ["Misc"]);
    }
    assert!(chunks.iter().any(|c| c.text == "---"));
    assert!(
        chunks.iter().any(|c| c.text == blocks[2]),
        "indentation kept: {chunks:#?}"
    );
}

#[test]
fn empty_whitespace_and_heading_only_documents_give_nothing() {
    let o = ChunkOptions::default();
    for doc in [
        "",
        "   \n\n\t \n",
        "# Title\n",
        "# A\n\n## B\n\n### C\n",
        "Setext\n===\n",
    ] {
        assert_eq!(chunk_markdown(doc, &o), [], "{doc:?}");
    }
    // A heading with no body contributes to the path only.
    let chunks = chunk_markdown("# A\n\n## B\n\n### C\n\nbody\n", &o);
    assert_eq!(chunks.len(), 1);
    assert_eq!(chunks[0].headings, ["A", "B", "C"]);
    assert_eq!(chunks[0].text, "body");
    // Heading text only: no '#', inline code and links reduced to their text.
    let chunks = chunk_markdown("## The `run`  [command](https://x.org) ##\n\nbody\n", &o);
    assert_eq!(chunks[0].headings, ["The run command"]);
}

fn long_paragraph(n_words: usize, sentence_len: usize) -> String {
    let mut out = String::new();
    for i in 0..n_words {
        if !out.is_empty() {
            out.push(' ');
        }
        let w = format!("word{i}");
        if sentence_len > 0 && i % sentence_len == 0 {
            out.push_str(&w.to_uppercase());
        } else {
            out.push_str(&w);
        }
        if sentence_len > 0 && i % sentence_len == sentence_len - 1 {
            out.push('.');
        }
    }
    out
}

#[test]
fn a_5000_word_paragraph_is_split_near_target() {
    let o = ChunkOptions::default();
    for sentence_len in [17, 0] {
        let doc = format!("# Long\n\n{}\n", long_paragraph(5000, sentence_len));
        let chunks = chunk_markdown(&doc, &o);
        check(&doc, &o, &chunks, &|_| false);
        assert!((10..=17).contains(&chunks.len()), "{} chunks", chunks.len());
        for c in &chunks[..chunks.len() - 1] {
            let w = c.words as usize;
            assert!((o.min_words..=o.max_words).contains(&w), "{w} words");
            assert!(
                w.abs_diff(o.target_words) <= 17,
                "{w} words, not near target"
            );
            if sentence_len > 0 {
                assert!(
                    c.text.ends_with('.'),
                    "cut inside a sentence: …{}",
                    &c.text[c.text.len() - 20..]
                );
            }
        }
        assert!(chunks.iter().all(|c| c.headings == ["Long"]));
    }
}

#[test]
fn oversized_blocks_are_whole_chunks() {
    let code = format!("```\n{}\n```", words("c", 700).replace(' ', "\n"));
    let table = format!(
        "| a | b |\n|---|---|\n{}",
        (0..150)
            .map(|i| format!("| x{i} | y{i} |"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    let item = format!("- {}", words("i", 600));
    let doc = format!(
        "# T\n\nintro words\n\n{code}\n\n{table}\n\n- short item\n{item}\n- last item\n\nend\n"
    );
    let o = ChunkOptions::default();
    let chunks = chunk_markdown(&doc, &o);
    let whole = [code.as_str(), table.as_str(), item.as_str()];
    check(&doc, &o, &chunks, &|t| whole.contains(&t));
    for w in whole {
        assert!(
            chunks.iter().any(|c| c.text == w),
            "not a chunk of its own: {w:.40}"
        );
    }
    assert_whole_once(&fenced_blocks(&doc), &chunks);
    assert_whole_once(&tables_and_items(&doc), &chunks);
}

#[test]
fn long_lists_split_between_items() {
    let items: Vec<String> = (0..60)
        .map(|i| format!("- {}", words(&format!("l{i}x"), 20)))
        .collect();
    let doc = format!("# L\n\n{}\n", items.join("\n"));
    let o = ChunkOptions::default();
    let chunks = chunk_markdown(&doc, &o);
    check(&doc, &o, &chunks, &|_| false);
    assert!(chunks.len() >= 3);
    assert_whole_once(&items, &chunks);
    for c in &chunks {
        assert!(c.text.starts_with("- "));
    }
}

// ---------- generated documents ----------

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

const VOCAB: &[&str] = &[
    "crawl", "queue", "page", "index", "token", "widget", "river", "stone", "amber", "delta",
    "harbor", "lumen", "orbit", "pixel", "quartz", "signal",
];

/// A generated document and what the generator knows about it.
struct Generated {
    doc: String,
    /// Indivisible blocks (code, tables, list items, quotes) and paragraphs.
    blocks: Vec<(String, usize, bool)>, // (text, words, splittable)
    /// Body word (lowercase, no punctuation) → heading path it was written under.
    owner: HashMap<String, Vec<String>>,
}

struct Gen {
    rng: Rng,
    n: usize,
    stack: Vec<(usize, String)>,
    out: Generated,
}

impl Gen {
    fn word(&mut self) -> String {
        let w = format!("{}{}", VOCAB[self.rng.below(VOCAB.len())], self.n);
        self.n += 1;
        let path = self.stack.iter().map(|(_, t)| t.clone()).collect();
        self.out.owner.insert(w.clone(), path);
        w
    }
    fn sentence(&mut self, lo: usize, hi: usize) -> String {
        let n = self.rng.range(lo, hi);
        let mut s = String::new();
        for i in 0..n {
            let w = self.word();
            if i == 0 {
                let mut c = w.chars();
                s.extend(c.next().map(|c| c.to_ascii_uppercase()));
                s.push_str(c.as_str());
            } else {
                s.push(if self.rng.chance(8) { '\n' } else { ' ' });
                s.push_str(&w);
            }
        }
        s.push(['.', '.', '.', '?', '!'][self.rng.below(5)]);
        s
    }
    fn emit(&mut self, text: String, splittable: bool) {
        let words = text.split_whitespace().count();
        if !self.out.doc.is_empty() {
            self.out.doc.push_str("\n\n");
        }
        self.out.doc.push_str(&text);
        self.out.blocks.push((text, words, splittable));
    }
    fn paragraph(&mut self, sentences: usize) {
        let s: Vec<String> = (0..sentences).map(|_| self.sentence(3, 20)).collect();
        self.emit(s.join(" "), true);
    }
    fn block(&mut self) {
        match self.rng.below(100) {
            0..=39 => {
                let n = self.rng.range(1, 5);
                self.paragraph(n);
            }
            40..=41 => {
                let n = self.rng.range(30, 120);
                self.paragraph(n);
            }
            42..=61 => {
                let ordered = self.rng.chance(30);
                let n = self.rng.range(1, 9);
                let mut items = Vec::new();
                for i in 0..n {
                    let marker = if ordered {
                        format!("{}.", i + 1)
                    } else {
                        "-".to_owned()
                    };
                    let mut item = format!("{marker} {}", self.sentence(2, 25));
                    if self.rng.chance(15) {
                        item.push_str(&format!("\n  {}", self.sentence(2, 10)));
                    }
                    items.push(item);
                }
                self.out
                    .doc
                    .push_str(if self.out.doc.is_empty() { "" } else { "\n\n" });
                self.out.doc.push_str(&items.join("\n"));
                for item in items {
                    let words = item.split_whitespace().count();
                    self.out.blocks.push((item, words, false));
                }
            }
            62..=79 => {
                let lines = if self.rng.chance(5) {
                    self.rng.range(120, 200)
                } else {
                    self.rng.range(1, 15)
                };
                let mut code = String::from("```text\n");
                for _ in 0..lines {
                    let n = self.rng.range(0, 6);
                    let ws: Vec<String> = (0..n).map(|_| self.word()).collect();
                    code.push_str(&format!("    {}\n", ws.join(" ")));
                }
                code.push_str("```");
                self.emit(code, false);
            }
            80..=91 => {
                let rows = self.rng.range(1, 8);
                let mut t = String::from("| name | kind | note |\n|------|:----:|-----:|");
                for _ in 0..rows {
                    let (a, b, c) = (self.word(), self.word(), self.word());
                    t.push_str(&format!("\n| {a} | {b} | {c} |"));
                }
                self.emit(t, false);
            }
            92..=95 => {
                let s = self.sentence(3, 30);
                self.emit(format!("> {}", s.replace('\n', "\n> ")), false);
            }
            _ => {
                let n = self.rng.range(1, 4);
                let lines: Vec<String> = (0..n)
                    .map(|_| {
                        let ws: Vec<String> = (0..3).map(|_| self.word()).collect();
                        format!("    {}", ws.join(" "))
                    })
                    .collect();
                self.emit(lines.join("\n"), false);
            }
        }
    }
    fn heading(&mut self) {
        let level = self.rng.range(1, 4);
        let text = format!("Topic H{} {}", self.n, VOCAB[self.rng.below(VOCAB.len())]);
        self.n += 1;
        let line = if level <= 2 && self.rng.chance(20) {
            let under = if level == 1 { "=" } else { "-" };
            format!("{text}\n{}", under.repeat(self.rng.range(3, 12)))
        } else if self.rng.chance(10) {
            format!("{} {text} {}", "#".repeat(level), "#".repeat(level))
        } else {
            format!("{} {text}", "#".repeat(level))
        };
        if !self.out.doc.is_empty() {
            self.out.doc.push_str("\n\n");
        }
        self.out.doc.push_str(&line);
        while self.stack.last().is_some_and(|(l, _)| *l >= level) {
            self.stack.pop();
        }
        self.stack.push((level, text));
    }
}

fn generate(seed: u64, min_bytes: usize) -> Generated {
    let mut g = Gen {
        rng: Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1),
        n: 0,
        stack: Vec::new(),
        out: Generated {
            doc: String::new(),
            blocks: Vec::new(),
            owner: HashMap::new(),
        },
    };
    if g.rng.chance(50) {
        g.paragraph(2);
    }
    while g.out.doc.len() < min_bytes {
        g.heading();
        let n = if g.rng.chance(15) {
            0
        } else {
            g.rng.range(1, 6)
        };
        for _ in 0..n {
            g.block();
        }
    }
    g.out.doc.push('\n');
    g.out
}

#[test]
fn generated_documents_keep_all_properties() {
    let option_sets = [
        ChunkOptions::default(),
        opts(100, 150, 200),
        opts(30, 40, 50),
    ];
    let mut total_chunks = 0;
    for seed in 1..=12u64 {
        let g = generate(seed, 30_000);
        for o in &option_sets {
            let chunks = chunk_markdown(&g.doc, o);
            let may_exceed = |t: &str| {
                g.blocks
                    .iter()
                    .any(|(b, w, split)| !split && *w > o.max_words && b.trim() == t)
            };
            check(&g.doc, o, &chunks, &may_exceed);
            // Indivisible blocks, and paragraphs that fit, are whole in exactly one chunk.
            let whole: Vec<String> = g
                .blocks
                .iter()
                .filter(|(_, w, split)| !split || *w <= o.max_words)
                .map(|(b, _, _)| b.clone())
                .collect();
            assert_whole_once(&whole, &chunks);
            assert_whole_once(&fenced_blocks(&g.doc), &chunks);
            // Heading path = the path of the chunk's first body word.
            for c in &chunks {
                let first = c
                    .text
                    .split_whitespace()
                    .map(|w| {
                        w.trim_matches(|ch: char| !ch.is_alphanumeric())
                            .to_lowercase()
                    })
                    .find_map(|w| g.owner.get(&w));
                assert_eq!(Some(&c.headings), first, "seed {seed} chunk {}", c.index);
            }
            total_chunks += chunks.len();
        }
    }
    assert!(total_chunks > 500, "{total_chunks}");
}

#[test]
fn generated_chunks_are_mostly_full_size() {
    let o = ChunkOptions::default();
    let g = generate(99, 500_000);
    let chunks = chunk_markdown(&g.doc, &o);
    let doc_words = g.doc.split_whitespace().count();
    let mean = chunks.iter().map(|c| c.words as usize).sum::<usize>() / chunks.len();
    let small = chunks.iter().filter(|c| (c.words as usize) < 100).count();
    eprintln!(
        "{} words, {} chunks, mean {mean} words, {small} under 100 words",
        doc_words,
        chunks.len()
    );
    assert!(mean >= 250, "mean chunk {mean} words");
    // Random heading levels close many chunks early (outer headings; sections that do
    // not fit whole); still, few chunks are tiny.
    assert!(
        small * 100 <= chunks.len() * 15,
        "{small} of {} chunks under 100 words",
        chunks.len()
    );
}

/// `cargo test -p trawl-workers --release --lib archive::chunk::tests::throughput -- --ignored --nocapture`
#[test]
#[ignore = "benchmark; run in release with --ignored --nocapture"]
fn throughput() {
    let g = generate(7, 5 * 1024 * 1024);
    let o = ChunkOptions::default();
    let runs = 5;
    let start = std::time::Instant::now();
    let mut n = 0;
    for _ in 0..runs {
        n = std::hint::black_box(chunk_markdown(std::hint::black_box(&g.doc), &o)).len();
    }
    let secs = start.elapsed().as_secs_f64() / f64::from(runs);
    let mb = g.doc.len() as f64 / 1e6;
    eprintln!(
        "{mb:.2} MB, {n} chunks, {:.1} ms/run: {:.1} MB/s, {:.0} chunks/s",
        secs * 1e3,
        mb / secs,
        n as f64 / secs
    );
}
