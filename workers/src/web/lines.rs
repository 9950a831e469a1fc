//! A page's visible text as lines: one line per block element, whitespace collapsed, what a
//! reader sees of the page without its layout. Two readers feed [`Lines`] the same way: the
//! extraction's walk of its DOM (`web::prune`, when the fetch asks for them: the page is to be
//! archived, and the tree is already built) and the archive's lol_html pass over a raw body
//! (`archive::page_text`, for a page whose lines were not handed over). [`BLOCKS`] and
//! [`HIDDEN`] name the elements both readers treat alike. [`words`] and [`count_words`] split
//! text into words as `str::split_whitespace` does, byte by byte for ASCII text: the lines
//! and the archive's chunker (`archive::chunk`) both use them.
//!
//! Not here: reading markup, or deciding which lines are the page's main content
//! (`archive::page_text`).

use dom_query::{LocalName, local_name};

/// Elements that start and end a line of text.
pub const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "details",
    "dialog",
    "div",
    "dl",
    "dt",
    "fieldset",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "summary",
    "table",
    "td",
    "th",
    "tr",
    "ul",
    "option",
    "button",
    "label",
];

/// Elements whose content is markup but not shown as text.
pub const HIDDEN: &[&str] = &["head", "template", "svg", "math", "select"];

/// Elements whose content the tokenizer reads as raw text up to their end tag, not markup
/// (`<plaintext>` has none: nothing can close it, and no page uses it): skipped like
/// [`HIDDEN`]. lol_html hands their text over as raw text; a DOM holds it as text nodes;
/// `web::noscript` closes one a `<noscript>` leaves open.
pub const RAW_TEXT: &[&str] = &[
    "script", "style", "title", "textarea", "iframe", "noembed", "noframes", "xmp",
];

/// How a reader of lines treats an element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Its start and end break the line ([`BLOCKS`]).
    Block,
    /// Nothing inside it is read ([`HIDDEN`], [`RAW_TEXT`]).
    Hidden,
    /// Its text joins the line.
    Inline,
}

/// The [`Role`] of an element named `name` (an HTML element's local name), as the lists say:
/// a `match` on interned names, for a DOM walk that asks once per element.
pub fn role(name: &LocalName) -> Role {
    match *name {
        local_name!("address")
        | local_name!("article")
        | local_name!("aside")
        | local_name!("blockquote")
        | local_name!("br")
        | local_name!("dd")
        | local_name!("details")
        | local_name!("dialog")
        | local_name!("div")
        | local_name!("dl")
        | local_name!("dt")
        | local_name!("fieldset")
        | local_name!("figcaption")
        | local_name!("figure")
        | local_name!("footer")
        | local_name!("form")
        | local_name!("h1")
        | local_name!("h2")
        | local_name!("h3")
        | local_name!("h4")
        | local_name!("h5")
        | local_name!("h6")
        | local_name!("header")
        | local_name!("hr")
        | local_name!("li")
        | local_name!("main")
        | local_name!("nav")
        | local_name!("ol")
        | local_name!("p")
        | local_name!("pre")
        | local_name!("section")
        | local_name!("summary")
        | local_name!("table")
        | local_name!("td")
        | local_name!("th")
        | local_name!("tr")
        | local_name!("ul")
        | local_name!("option")
        | local_name!("button")
        | local_name!("label") => Role::Block,
        local_name!("head")
        | local_name!("template")
        | local_name!("svg")
        | local_name!("math")
        | local_name!("select")
        | local_name!("script")
        | local_name!("style")
        | local_name!("title")
        | local_name!("textarea")
        | local_name!("iframe")
        | local_name!("noembed")
        | local_name!("noframes")
        | local_name!("xmp") => Role::Hidden,
        _ => Role::Inline,
    }
}

/// Lines being built: text arrives in pieces (text nodes) between line breaks (block
/// elements' starts and ends).
#[derive(Debug, Default)]
pub struct Lines {
    /// The finished lines, each followed by a newline.
    done: String,
    line: String,
    /// Whitespace came after the line's last word.
    space: bool,
}

impl Lines {
    /// Adds a text node's text (entities decoded) to the current line: words separated by
    /// one space; runs split by inline tags (`ab<b>c</b>`) join without one.
    pub fn text(&mut self, text: &str) {
        if text.is_empty() {
            return;
        }
        self.space |= text.starts_with(char::is_whitespace);
        for word in words(text) {
            if self.space && !self.line.is_empty() {
                self.line.push(' ');
            }
            self.line.push_str(word);
            self.space = true;
        }
        self.space = text.ends_with(char::is_whitespace);
    }

    /// Ends the current line (a block element starts or ends); an empty line is no line.
    pub fn break_line(&mut self) {
        if !self.line.is_empty() {
            self.done.push_str(&self.line);
            self.done.push('\n');
            self.line.clear();
        }
        self.space = false;
    }

    /// Adds lines built elsewhere (`<noscript>` markup read on its own), after a break.
    pub fn extend(&mut self, lines: &str) {
        self.break_line();
        for line in lines.lines().filter(|line| !line.is_empty()) {
            self.done.push_str(line);
            self.done.push('\n');
        }
    }

    /// The lines, joined by newlines.
    pub fn finish(mut self) -> String {
        self.break_line();
        if self.done.ends_with('\n') {
            self.done.pop();
        }
        self.done
    }
}

/// The words of `text`: the tokens [`str::split_whitespace`] gives, read byte by byte when
/// the text is ASCII (most text nodes; `split_whitespace` decodes every character).
pub fn words(text: &str) -> impl Iterator<Item = &str> {
    let mut other = (!text.is_ascii()).then(|| text.split_whitespace());
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        if let Some(other) = &mut other {
            return other.next();
        }
        while at < bytes.len() && is_ascii_space(bytes[at]) {
            at += 1;
        }
        let start = at;
        while at < bytes.len() && !is_ascii_space(bytes[at]) {
            at += 1;
        }
        (at > start).then(|| &text[start..at])
    })
}

/// How many words `text` has (as [`words`] splits it), counted byte by byte when the text is
/// ASCII.
pub fn count_words(text: &str) -> usize {
    if !text.is_ascii() {
        return text.split_whitespace().count();
    }
    let mut count = 0;
    let mut after_space = true;
    for &byte in text.as_bytes() {
        let space = is_ascii_space(byte);
        count += usize::from(after_space && !space);
        after_space = space;
    }
    count
}

/// The ASCII characters that are Unicode white space (what `char::is_whitespace` says of
/// them): tab, line feed, vertical tab, form feed, carriage return, space. Not
/// `u8::is_ascii_whitespace`, which leaves out the vertical tab.
fn is_ascii_space(byte: u8) -> bool {
    matches!(byte, b'\t'..=b'\r' | b' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_as_split_whitespace_does() {
        for text in [
            "",
            " ",
            "one",
            "  two words  ",
            "a\tb\nc\x0bd\x0ce\rf g",
            "\x1cnot\x1fspace",
            "caf\u{e9} au\u{a0}lait\u{2003}chaud ",
            "\u{3000}wide\u{3000}",
        ] {
            let expected: Vec<&str> = text.split_whitespace().collect();
            assert_eq!(words(text).collect::<Vec<_>>(), expected, "{text:?}");
            assert_eq!(count_words(text), expected.len(), "{text:?}");
        }
    }

    #[test]
    fn roles_are_the_lists() {
        for (names, expected) in [
            (BLOCKS, Role::Block),
            (HIDDEN, Role::Hidden),
            (RAW_TEXT, Role::Hidden),
        ] {
            for name in names {
                assert_eq!(role(&LocalName::from(*name)), expected, "{name}");
            }
        }
        for name in [
            "span", "a", "b", "em", "code", "noscript", "body", "html", "img",
        ] {
            assert_eq!(role(&LocalName::from(name)), Role::Inline, "{name}");
        }
        let listed = BLOCKS.len() + HIDDEN.len() + RAW_TEXT.len();
        assert_eq!(
            listed,
            40 + 5 + 8,
            "a name added to a list is added to `role` too"
        );
    }

    #[test]
    fn words_join_runs_and_blocks_break() {
        let mut lines = Lines::default();
        lines.text("  Blue ");
        lines.text("kettle,");
        lines.text("\n  now");
        lines.text("2");
        lines.break_line();
        lines.break_line();
        lines.text(" \t ");
        lines.break_line();
        lines.text("Second");
        lines.extend("a\n\nb");
        lines.text("c");
        assert_eq!(lines.finish(), "Blue kettle, now2\nSecond\na\nb\nc");
        assert_eq!(Lines::default().finish(), "");
    }
}
