//! DOM pruning before Readability and line-level cleaning after it.
//!
//! Pipeline: `Document::from(html)` -> [`prune`] -> `dom_smoothie::Readability::with_document`
//! -> `parse()` -> [`clean_text`] on `article.text_content` (and on rs-trafilatura's answers
//! for the other page types: `extract`). `markdown_plain` reads markdown output line by line
//! the same way, so that its length compares with plain text's.
//!
//! Every rule here is deliberately conservative. Readability already removes most page chrome;
//! what it lets through are small blocks *inside* the article container (image captions and
//! credits, gallery counters, "Advertisement" labels, timestamps). The rules target those and
//! carry guards (size, share of the page's text, code/table content) so that pages whose main
//! content is not an article -- forums, documentation, product pages, listings -- are left alone.

use dom_query::{Document, NodeData, NodeId, NodeRef, local_name};

use crate::web::lines::{self, Lines, Role};

/// A figure/aside holding at least this share of the page's text is treated as main content
/// (some sites wrap the whole article, or a long pull-out, in `<figure>`/`<aside>`).
const FIGURE_MAX_PAGE_SHARE: f64 = 0.3;

/// Captions and credits are short. A "caption" block larger than this (in non-whitespace
/// characters) is more likely a mis-named content wrapper, so it is kept.
/// Measured plateau: 250..2000 give the same score on the benchmark, 150 is too small.
const CAPTION_MAX_CHARS: usize = 400;

/// A caption block must also be a small part of the page (share of the body's text).
/// Measured plateau: 0.05..0.5 give the same score; 0.03 is too strict.
const CAPTION_MAX_PAGE_SHARE: f64 = 0.1;

/// Class/id words that name a caption or a photo credit.
const CAPTION_WORDS: &[&str] = &["caption", "credit", "credits", "figcaption"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Any element that no rule targets directly.
    Other,
    /// `<body>`: its text length is the page total used by the share guards.
    Body,
    /// `<figure>`, `<figcaption>`, `<aside>`.
    Figure,
    /// An element whose class or id contains a caption/credit word.
    Caption,
    /// `<pre>`, `<code>`, `<table>`: content that must never be pruned as "caption".
    Code,
    /// `<script>`, `<style>`, `<template>`, `<head>`: text that is not visible.
    Hidden,
    /// `<noscript>`: not visible to a browser running scripts; counted apart in the body.
    NoScript,
}

/// Per-element subtree counts, gathered in one pass.
struct Item<'a> {
    node: NodeRef<'a>,
    parent: Option<usize>,
    kind: Kind,
    /// Visible (non-whitespace) characters of text in the subtree.
    text: usize,
    /// Whether the subtree contains `<pre>`, `<code>` or `<table>`.
    has_code: bool,
}

/// Removes caption-like blocks from the DOM before Readability scores it.
///
/// Two rules, both applied with guards computed from one bottom-up pass over the tree:
///
/// 1. `<figure>`, `<figcaption>` and `<aside>` are removed unless they contain code or a table
///    or hold >= 30 % of the page's text. Why: Readability keeps figures inside the article
///    container, and their captions/credits are the single largest source of extra text on
///    news pages (+0.006 F1 alone on the benchmark). The guards exist because documentation
///    generators (e.g. Jekyll/Rouge) wrap code listings in `<figure class="highlight">`, and
///    some sites wrap the entire article in `<figure>`/`<aside>`.
/// 2. Elements whose class or id contains the *word* `caption` or `credit` (split on
///    punctuation and camelCase, never a raw substring) are removed when they are short
///    (<= 400 characters), hold <= 10 % of the page's text and contain no code/table.
///    Why: many sites render captions and photo credits in plain `<div>`/`<span>`/`<p>`
///    elements (`newsCaption`, `wp-caption-text`, `image-credit`) that rule 1 cannot see.
///    Whole-word matching plus the size guards avoids the failure of substring selectors,
///    which also hit wrappers of the main content.
///
/// Deliberately *not* pruned here (measured, see the lab report): share/social widgets,
/// "related"/"newsletter" link lists and ad slots (neutral or harmful: removing them changes
/// which candidate Readability picks), and author/date blocks (they also hold content on
/// some pages).
///
/// Returns what it counted of the page before pruning (the body's visible characters, which
/// the block-page checks use, and its `<noscript>` content), so nobody walks the tree again
/// to count them.
pub fn prune(doc: &Document) -> Visible<'_> {
    prune_with(doc, None)
}

/// [`prune`], reading the page's visible lines (`web::lines`) in the same walk, before
/// anything is removed: [`Visible::lines`].
pub fn prune_reading_lines(doc: &Document) -> Visible<'_> {
    let mut lines = Lines::default();
    let mut visible = prune_with(doc, Some(&mut lines));
    visible.lines = Some(lines.finish());
    visible
}

fn prune_with<'a>(doc: &'a Document, lines: Option<&mut Lines>) -> Visible<'a> {
    let (items, noscript, pres) = collect(doc, lines);
    let body_text = items
        .iter()
        .find(|it| it.kind == Kind::Body)
        .map_or(0, |it| it.text);
    let total = body_text.max(1);
    for it in &items {
        if should_remove(it, total) {
            it.node.remove_from_parent();
        }
    }
    Visible {
        body: body_text,
        noscript,
        pres,
        lines: None,
    }
}

/// What [`prune`] counted of a page before it removed anything.
pub struct Visible<'a> {
    /// Visible (non-whitespace) characters of the body's text, `<noscript>` content left out.
    pub body: usize,
    /// The body's `<noscript>` content. dom_query parses with scripting disabled, as a
    /// client without JavaScript does, so it is markup: some sites (Discourse forums, for
    /// one) serve the whole page there and an empty shell outside.
    pub noscript: NoScript<'a>,
    /// The visible `<pre>` elements, in document order (for `web::code_lang`; one inside a
    /// pruned figure is detached, and labelling it changes nothing).
    pub pres: Vec<NodeRef<'a>>,
    /// The page's visible text, one line per block, joined by newlines, when
    /// [`prune_reading_lines`] read it.
    pub lines: Option<String>,
}

/// The body's `<noscript>` content, as [`prune`] counts it.
#[derive(Default)]
pub struct NoScript<'a> {
    /// Visible characters inside the body's `<noscript>` elements.
    pub chars: usize,
    /// The body's outermost `<noscript>` elements, in document order.
    pub elements: Vec<NodeRef<'a>>,
}

impl NoScript<'_> {
    /// Makes the `<noscript>` content part of the body: each element's children take its
    /// place.
    pub fn reveal(&self) {
        for element in &self.elements {
            // dom_query's `unwrap_node` unwraps a node's parent.
            match element.first_child() {
                Some(child) => child.unwrap_node(),
                None => element.remove_from_parent(),
            }
        }
    }
}

/// Decides from an element's subtree counts whether [`prune`] removes it.
fn should_remove(it: &Item<'_>, page_text: usize) -> bool {
    // Exact for any realistic page size; only used for a ratio.
    #[allow(clippy::cast_precision_loss)]
    let share = it.text as f64 / page_text as f64;
    match it.kind {
        Kind::Figure => !it.has_code && share < FIGURE_MAX_PAGE_SHARE,
        Kind::Caption => {
            !it.has_code && it.text <= CAPTION_MAX_CHARS && share <= CAPTION_MAX_PAGE_SHARE
        }
        _ => false,
    }
}

/// Walks the document once in pre-order and returns every element with its subtree counts.
///
/// Parent links come from a stack of open ancestors, so no hashing is needed; counts are
/// then summed bottom-up by walking the vector backwards (children always follow parents).
///
/// With `lines`, the visible text is read into them too: an element's start and end break
/// the line as its [`lines::role`] says, and nothing inside a hidden one is read.
fn collect<'a>(
    doc: &'a Document,
    mut lines: Option<&mut Lines>,
) -> (Vec<Item<'a>>, NoScript<'a>, Vec<NodeRef<'a>>) {
    let mut items: Vec<Item<'_>> = Vec::new();
    let mut noscript = NoScript::default();
    let mut pres = Vec::new();
    // Open ancestors: (node id, index into `items`, what the text inside them is, how the
    // lines read it).
    let mut stack: Vec<(NodeId, usize, Inside, Read)> = Vec::new();
    for node in doc.root().descendants_it() {
        let parent_id = node.parent().map(|p| p.id);
        while let Some(&(id, _, _, read)) = stack.last() {
            if Some(id) == parent_id {
                break;
            }
            stack.pop();
            if read.block
                && let Some(lines) = lines.as_deref_mut()
            {
                lines.break_line();
            }
        }
        let (parent, inside, read) = stack.last().map_or(
            (None, Inside::Visible, Read::default()),
            |&(_, idx, inside, read)| (Some(idx), inside, read),
        );
        let lines = lines.as_deref_mut();
        let info = node.query(|n| match &n.data {
            NodeData::Text { contents } => {
                if let Some(lines) = lines
                    && read.shown
                {
                    lines.text(contents);
                }
                Some((None, visible_len(contents), read))
            }
            NodeData::Element(el) => {
                let read = match lines {
                    Some(lines) => {
                        let role = lines::role(&el.name.local);
                        if role == Role::Block {
                            lines.break_line();
                        }
                        Read {
                            shown: read.shown && role != Role::Hidden,
                            block: role == Role::Block,
                        }
                    }
                    None => read,
                };
                Some((Some(element_kind(el)), 0, read))
            }
            _ => None,
        });
        match info.flatten() {
            Some((None, len, _)) => match inside {
                Inside::Visible => {
                    if let Some(p) = parent {
                        items[p].text += len;
                    }
                }
                Inside::NoScript => noscript.chars += len,
                Inside::Hidden => {}
            },
            Some((Some(kind), _, read)) => {
                if kind == Kind::NoScript && inside == Inside::Visible {
                    noscript.elements.push(node);
                }
                let inside = match (inside, kind) {
                    (Inside::Visible, Kind::NoScript) => Inside::NoScript,
                    (Inside::Visible | Inside::NoScript, Kind::Hidden | Kind::NoScript) => {
                        Inside::Hidden
                    }
                    (inside, _) => inside,
                };
                let hidden = inside != Inside::Visible;
                if kind == Kind::Code && !hidden && node.has_name("pre") {
                    pres.push(node);
                }
                stack.push((node.id, items.len(), inside, read));
                items.push(Item {
                    node,
                    parent,
                    kind: if hidden { Kind::Hidden } else { kind },
                    text: 0,
                    has_code: kind == Kind::Code,
                });
            }
            None => {}
        }
    }
    for i in (0..items.len()).rev() {
        let (text, has_code, parent) = (items[i].text, items[i].has_code, items[i].parent);
        if let Some(p) = parent {
            items[p].text += text;
            items[p].has_code |= has_code;
        }
    }
    (items, noscript, pres)
}

/// How [`collect`] reads the text under an element into lines.
#[derive(Clone, Copy)]
struct Read {
    /// Its text is read (no hidden element around it).
    shown: bool,
    /// It is a block: its end breaks the line.
    block: bool,
}

impl Default for Read {
    /// The document's root: shown, no block.
    fn default() -> Read {
        Read {
            shown: true,
            block: false,
        }
    }
}

/// What the text under an element is, for [`collect`]'s counts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Inside {
    /// Visible text.
    Visible,
    /// Inside a `<noscript>` outside `<head>`: counted apart.
    NoScript,
    /// Inside `<head>`, `<script>`, `<style>`, `<template>`: not counted.
    Hidden,
}

/// Classifies an element by tag name, then by caption words in its class/id.
fn element_kind(el: &dom_query::Element) -> Kind {
    match el.name.local {
        local_name!("body") => Kind::Body,
        local_name!("figure") | local_name!("figcaption") | local_name!("aside") => Kind::Figure,
        local_name!("pre") | local_name!("code") | local_name!("table") => Kind::Code,
        local_name!("noscript") => Kind::NoScript,
        local_name!("script")
        | local_name!("style")
        | local_name!("template")
        | local_name!("head") => Kind::Hidden,
        _ => {
            let named_caption = [local_name!("class"), local_name!("id")]
                .into_iter()
                .filter_map(|a| el.attr_ref(a))
                .any(|value| has_word(value, CAPTION_WORDS));
            if named_caption {
                Kind::Caption
            } else {
                Kind::Other
            }
        }
    }
}

/// True if an attribute value (a class list, an id) contains one of `words` as a whole word:
/// words are split at non-alphanumerics and at lower-to-upper case changes, and compared
/// case-insensitively: for the caption words, `wp-caption-text`, `newsCaption`,
/// `photo_credit` match; `captioned-article`, `incredible` do not. Substring matching is what
/// made class selectors harmful in earlier measurements.
pub(crate) fn has_word(value: &str, words: &[&str]) -> bool {
    let bytes = value.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i <= bytes.len() {
        let at_end = i == bytes.len();
        let boundary = at_end
            || !bytes[i].is_ascii_alphanumeric()
            || (i > start && bytes[i].is_ascii_uppercase() && bytes[i - 1].is_ascii_lowercase());
        if boundary {
            if i > start {
                let word = &value[start..i];
                if words.iter().any(|w| w.eq_ignore_ascii_case(word)) {
                    return true;
                }
            }
            start = if !at_end && bytes[i].is_ascii_alphanumeric() {
                i
            } else {
                i + 1
            };
        }
        i += 1;
    }
    false
}

/// Counts non-whitespace characters: markup indentation must not count as text.
pub(crate) fn visible_len(s: &str) -> usize {
    // Most text is ASCII: counting bytes is several times faster than decoding chars. ASCII
    // whitespace as `char::is_whitespace` sees it is 0x09-0x0d (the vertical tab included,
    // which `u8::is_ascii_whitespace` leaves out) and 0x20: two plain compares, which the
    // compiler turns into vector code (a `match` on the values showed in the crawl profile).
    if s.is_ascii() {
        s.bytes()
            .filter(|&b| b != b' ' && !(0x09..=0x0d).contains(&b))
            .count()
    } else {
        s.chars().filter(|c| !c.is_whitespace()).count()
    }
}

// ------------------------------------------------------------------------------------------
// Output cleaning
// ------------------------------------------------------------------------------------------

/// Whole lines that are interface labels, not content, in any page type: ad labels, widget
/// headings and buttons, share-button captions, shop buttons. Compared after [`plain_line`]
/// normalisation (lower-case, markdown and trailing punctuation removed), so only a line
/// consisting of exactly this text is dropped -- never a sentence that contains it.
const STOP_LINES: &[&str] = &[
    "advertisement",
    "advert",
    "ad",
    "ads",
    "sponsored",
    "sponsored content",
    "caption",
    "close",
    "comments",
    "comment",
    "subscribe",
    "share",
    "share this",
    "share this article",
    "share this story",
    "sharing is caring",
    "you may also like",
    "related",
    "related articles",
    "related posts",
    "related stories",
    "recommended",
    "read more",
    "continue reading",
    "continue reading below",
    "story continues below",
    "story continues below advertisement",
    "scroll to continue with content",
    "see more",
    "more",
    "trending",
    "tags",
    "print",
    "email",
    "facebook",
    "twitter",
    "whatsapp",
    "linkedin",
    "pinterest",
    "skip ad",
    "don't miss",
    "top stories",
    "most popular",
    "most read",
    // shop buttons and states, inside a product's or a listing's block
    "add to cart",
    "add to bag",
    "add to basket",
    "add to wishlist",
    "add to wish list",
    "buy now",
    "buy it now",
    "in stock",
    "out of stock",
    "sold out",
    "notify me",
    "notify me when available",
    "notify me when back in stock",
    "write a review",
    "be the first to review this product",
    "no reviews yet",
    "quick view",
    "quick shop",
    "size guide",
    "size chart",
    "decrease quantity",
    "increase quantity",
    "continue shopping",
    "view cart",
    "loading",
    // Not "skip to content": a skip link atop Readability's answer says it took the whole
    // page (`extract::opens_with_skip_link`), read after this cleaning.
    // "advertisement" in languages common on the web
    "iklan",
    "publicidade",
    "publicidad",
    "anzeige",
    "werbung",
    "publicité",
    "pubblicità",
    "реклама",
];

/// Removes boilerplate lines from extracted text (plain or Markdown).
///
/// Dropped lines (each compared on its `plain_line` form):
/// * exact interface labels from `STOP_LINES` ("Advertisement", "Comments", "Close", ...):
///   Readability keeps them because they sit inside the article container;
/// * gallery counters ("Image 1 of 8", "3 / 12"): slideshow chrome;
/// * short publish/update stamps ("Updated 5:27 am CST, Nov 20, 2019"): page metadata
///   rather than content, recognised by a leading keyword *and* a digit
///   *and* at most 14 words so prose starting with "Published" survives.
///
/// Lines inside fenced code blocks are never touched (documentation pages), and runs of blank
/// lines left behind are collapsed so the Markdown structure stays valid.
pub fn clean_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut in_fence = false;
    let mut blank_run = 0usize;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
        } else if !in_fence && is_boilerplate(line) {
            continue;
        }
        if line.trim().is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    let kept = out.trim();
    if kept.len() == out.len() {
        out
    } else {
        kept.to_string()
    }
}

/// True if a single output line is boilerplate (see [`clean_text`]).
fn is_boilerplate(line: &str) -> bool {
    // Every rule matches short lines only (at most 14 words once markup is gone); skipping
    // long lines here spares lower-casing every paragraph (measured: ~12 % of a pipeline
    // run's CPU before this check).
    if line.split_whitespace().nth(20).is_some() {
        return false;
    }
    let plain = plain_line(line);
    if plain.is_empty() {
        return false;
    }
    STOP_LINES.contains(&plain.as_str()) || is_gallery_counter(&plain) || is_timestamp(&plain)
}

/// What a reader sees of `markdown`, for counting it like the plain text of the same answer
/// (`TextMode::Formatted` has no images and no table rules): each line's markup left out as
/// [`plain_line`] leaves it (its case kept), images (alt text and all), table rule lines and
/// cell bars too.
pub(crate) fn markdown_plain(markdown: &str) -> String {
    let mut out = String::with_capacity(markdown.len());
    for line in markdown.lines() {
        let trimmed = line.trim();
        if !trimmed.is_empty() && trimmed.chars().all(|c| matches!(c, '|' | '-' | ':' | ' ')) {
            continue;
        }
        read_line(line, Images::Dropped, &mut out);
        out.push('\n');
    }
    out
}

/// What [`read_line`] makes of a markdown image.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Images {
    /// Its alt text is kept (a boilerplate line may be an image's caption).
    Alt,
    /// Left out, and table cell bars with it: text as `TextMode::Formatted` renders it.
    Dropped,
}

/// Reduces a line to comparable plain text: strips Markdown block markers (headings, quotes,
/// list bullets), emphasis/code markers, link/image syntax (`[text](url)` -> `text`), then
/// trailing punctuation such as "..." or ":", and lower-cases it. This lets one rule set serve
/// both `TextMode::Formatted` and `TextMode::Markdown` output.
fn plain_line(line: &str) -> String {
    let mut read = String::with_capacity(line.len());
    read_line(line, Images::Alt, &mut read);
    let out = read.to_lowercase();
    let t = out
        .trim()
        .trim_end_matches(['.', ':', '!', '…', '|', '»', '›'])
        .trim_end();
    if t.len() == out.len() {
        out
    } else {
        t.to_string()
    }
}

/// Appends `line` without its markdown, in its own case, to `out`: [`plain_line`] before it
/// lower-cases and cuts trailing punctuation, with `images` read as said. The text between
/// markup characters is copied a run at a time (markup characters are ASCII, so byte offsets
/// are character boundaries), into the caller's buffer: [`markdown_plain`] reads every line of
/// every markdown answer, and a character-by-character copy that lower-cased was 9 % of a
/// crawl's CPU.
fn read_line(line: &str, images: Images, out: &mut String) {
    let mut s = line.trim();
    loop {
        let before = s;
        s = s.trim_start_matches(['#', '>']).trim_start();
        for bullet in ["- ", "* ", "+ "] {
            if let Some(rest) = s.strip_prefix(bullet) {
                s = rest.trim_start();
            }
        }
        if s == before {
            break;
        }
    }
    let mut rest = s;
    while let Some(at) = rest
        .bytes()
        .position(|b| matches!(b, b'*' | b'_' | b'`' | b'[' | b']' | b'\\' | b'!' | b'|'))
    {
        out.push_str(&rest[..at]);
        let mark = rest.as_bytes()[at];
        let after = &rest[at + 1..];
        rest = match mark {
            b']' if after.starts_with('(') => skip_bracketed(after, b'(', b')'),
            b'!' if images == Images::Dropped && after.starts_with('[') => {
                let after_alt = skip_bracketed(after, b'[', b']');
                if after_alt.starts_with('(') {
                    skip_bracketed(after_alt, b'(', b')')
                } else {
                    after_alt
                }
            }
            b'|' if images == Images::Dropped => after,
            // the "!" of an image (its alt text is read on)
            b'!' if after.starts_with('[') => after,
            b'!' | b'|' => {
                out.push(char::from(mark));
                after
            }
            // emphasis/code/escape markers, link brackets
            _ => after,
        };
    }
    out.push_str(rest);
}

/// What follows the `close` that ends the `open` which `s` starts with (nested pairs
/// included); empty when it is never closed.
fn skip_bracketed(s: &str, open: u8, close: u8) -> &str {
    let mut depth = 0usize;
    for (at, b) in s.bytes().enumerate() {
        if b == open {
            depth += 1;
        } else if b == close {
            depth = depth.saturating_sub(1);
            if depth == 0 {
                return &s[at + 1..];
            }
        }
    }
    ""
}

/// Slideshow counters: two numbers plus at most the words image/photo/picture/slide/of,
/// e.g. "image 1 of 8", "1 of / 8", "3 / 12".
fn is_gallery_counter(plain: &str) -> bool {
    let mut numbers = 0;
    let mut words = 0;
    for w in plain
        .split(|c: char| c.is_whitespace() || c == '/')
        .filter(|w| !w.is_empty())
    {
        words += 1;
        if w.bytes().all(|b| b.is_ascii_digit()) {
            numbers += 1;
        } else if !matches!(
            w,
            "image" | "photo" | "picture" | "slide" | "of" | "foto" | "bild"
        ) {
            return false;
        }
    }
    numbers == 2 && words <= 5
}

/// Publish/update stamps: a leading stamp keyword, a digit, and a short line.
fn is_timestamp(plain: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "published",
        "updated",
        "posted",
        "last updated",
        "| updated",
        "first published",
        "modified",
    ];
    plain.split_whitespace().count() <= 14
        && PREFIXES.iter().any(|p| plain.starts_with(p))
        && plain.bytes().any(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn visible_len_counts_like_chars_whatever_the_text() {
        for text in [
            "",
            "  a b\tc\n",
            "\u{b}x\u{c}y\r",
            "\u{0}\u{8}\u{e}\u{1f} \u{7f}~!",
            "caf\u{e9} \u{a0}na\u{ef}ve\u{2003}!",
            "\u{3000}\u{65e5}\u{672c}",
        ] {
            let chars = text.chars().filter(|c| !c.is_whitespace()).count();
            assert_eq!(visible_len(text), chars, "{text:?}");
        }
    }

    fn pruned(html: &str) -> String {
        let doc = Document::from(html);
        prune(&doc);
        doc.select("body")
            .text()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    const FILLER: &str = "<p>Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do \
        eiusmod tempor incididunt ut labore et dolore magna aliqua. Ut enim ad minim veniam, \
        quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat.</p>";

    #[test]
    fn removes_small_figure_keeps_code_figure() {
        let html = format!(
            "<body>{FILLER}{FILLER}<figure><img src=a.jpg><figcaption>A cat. Photo: AP\
             </figcaption></figure><figure class=highlight><pre>fn main() {{}}</pre></figure>\
             </body>"
        );
        let t = pruned(&html);
        assert!(!t.contains("Photo: AP"));
        assert!(t.contains("fn main()"));
    }

    #[test]
    fn keeps_figure_that_holds_the_page() {
        let html = format!("<body><p>Menu</p><figure>{FILLER}</figure></body>");
        assert!(pruned(&html).contains("Lorem ipsum"));
    }

    #[test]
    fn removes_caption_classes_by_whole_word() {
        let html = format!(
            "<body>{FILLER}{FILLER}{FILLER}<span class=newsCaption>Protesters march \
             (Image: GETTY)</span><div class=\"photo_credit\">Jane Doe</div>\
             <div class=incredible>Incredible text stays</div></body>"
        );
        let t = pruned(&html);
        assert!(!t.contains("Protesters march"));
        assert!(!t.contains("Jane Doe"));
        assert!(t.contains("Incredible text stays"));
    }

    #[test]
    fn keeps_large_caption_named_wrapper() {
        let body = FILLER.repeat(5);
        let html = format!("<body><div class=caption-wrap>{body}</div></body>");
        assert!(pruned(&html).contains("Lorem ipsum"));
    }

    #[test]
    fn caption_word_matching() {
        assert!(has_word("wp-caption-text", CAPTION_WORDS));
        assert!(has_word("newsCaption", CAPTION_WORDS));
        assert!(has_word("image_credit", CAPTION_WORDS));
        assert!(has_word("CAPTION", CAPTION_WORDS));
        assert!(!has_word("captioned", CAPTION_WORDS));
        assert!(!has_word("incredible", CAPTION_WORDS));
        assert!(!has_word("", CAPTION_WORDS));
        // non-ASCII characters act as separators and never split a UTF-8 sequence
        assert!(has_word("légende—caption", CAPTION_WORDS));
        assert!(has_word("ñcaptionñ-é", CAPTION_WORDS));
        assert!(!has_word("éé-captioned", CAPTION_WORDS));
    }

    #[test]
    fn clean_text_drops_labels_and_counters() {
        let input = "Title\n\nAdvertisement\n\nFirst paragraph.\n\nImage 1 of 8\n\
                     Updated 5:27 am CST, Wednesday, November 20, 2019\n\nComments\n\nLast.";
        assert_eq!(clean_text(input), "Title\n\nFirst paragraph.\n\nLast.");
    }

    #[test]
    fn markdown_is_read_as_its_reader_sees_it() {
        let markdown = "# Boots\n\n![A boot](https://img.example/boot-1200x800.jpg) \
                        **Waterproof** [leather](https://shop.example/materials/leather_(full)) \
                        and `mesh`.\n\n- one\n+ two\n\n| a | b |\n|---|:-:|\n| c | d |\n\
                        > quoted [open](https://x.example/a";
        assert_eq!(
            markdown_plain(markdown),
            "Boots\n\n Waterproof leather and mesh.\n\none\ntwo\n\n a  b \n c  d \nquoted open\n"
        );
        // Marks between multi-byte characters, and a "!" that starts no image, kept as text.
        assert_eq!(
            markdown_plain("**Café** [naïve](https://x.example/é) — ü! `ß`|ø\n"),
            "Café naïve — ü! ßø\n"
        );
        // Plain text without markdown's marks keeps every visible character.
        let plain = "Boots, 2 pairs.\n";
        assert_eq!(visible_len(&markdown_plain(plain)), visible_len(plain));
    }

    #[test]
    fn clean_text_handles_markdown() {
        let input = "## Related articles\n\n* [Share](https://x.example/s)\n\nBody text.\n\n\
                     **Advertisement**";
        assert_eq!(clean_text(input), "Body text.");
    }

    #[test]
    fn clean_text_keeps_sentences_and_code() {
        let input = "Published in 1998, the book sold well across many countries and was \
                     translated into more than twenty languages over the next decades.\n\
                     Read more about it below.\n```\nComments\n```";
        assert_eq!(clean_text(input), input);
    }

    #[test]
    fn gallery_counter_and_timestamp() {
        assert!(is_gallery_counter("image 1 of 8"));
        assert!(is_gallery_counter("1 of / 8"));
        assert!(!is_gallery_counter("1 of 8 people agree"));
        assert!(is_timestamp(
            "published 4:00 am cst, wednesday, november 20, 2019"
        ));
        assert!(!is_timestamp("published by penguin"));
    }
}
