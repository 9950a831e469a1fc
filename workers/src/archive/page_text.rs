//! The rest of a page: its visible text outside what extraction kept, for the archive's page
//! documents. Extraction is tuned to keep main content and drop the rest, and on pages that
//! are not articles (products, listings, forums, service pages) it drops some of what a
//! reader saw there and later searches for; the archive indexes this remainder beside the
//! page's passages, at a lower weight, so a search still finds the page (measured on the WCXB
//! dev split's known-item check: 60 of the 66 queries trawl missed asked for words the
//! extracted text lacked).
//!
//! How: html5ever's tokenizer alone (no tree, linear time) reads the text outside `<head>`,
//! scripts, styles, templates and SVG, one line per block element; a line whose words are a
//! line of the extracted content is dropped, and so is a line seen before. At most
//! [`MAX_CHARS`] characters are kept.
//!
//! Not here: decoding bytes (`web::charset`), extraction, or indexing (`archive::index`).

use std::cell::RefCell;
use std::collections::HashSet;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::{LocalName, TokenizerResult, local_name};

use crate::web::budget;

/// Most characters of a page's rest kept: a page's navigation and sidebars are a few
/// thousand; a big listing, thread or catalogue page holds tens of thousands outside what
/// extraction kept.
pub const MAX_CHARS: usize = 100_000;

/// The visible lines of `html` that are not lines of `content` (the page's extracted
/// markdown or text, link destinations stripped), each once, joined by newlines; empty when
/// there are none.
pub fn rest_of_page(html: &str, content: &str) -> String {
    let known: HashSet<String> = content.lines().filter_map(words_of).collect();
    let mut seen: HashSet<String> = HashSet::new();
    let mut rest = String::new();
    for line in visible_lines(html) {
        let Some(words) = words_of(&line) else {
            continue;
        };
        if known.contains(&words) || !seen.insert(words) {
            continue;
        }
        if rest.len() + line.len() + 1 > MAX_CHARS {
            break;
        }
        if !rest.is_empty() {
            rest.push('\n');
        }
        rest.push_str(&line);
    }
    rest
}

/// A line's words, lowercased and space-joined (markdown's markup and punctuation gone), as
/// the comparison key; `None` for a line without letters or digits.
fn words_of(line: &str) -> Option<String> {
    let mut key = String::with_capacity(line.len());
    for word in line
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !key.is_empty() {
            key.push(' ');
        }
        key.extend(word.chars().flat_map(char::to_lowercase));
    }
    (!key.is_empty()).then_some(key)
}

/// The document's visible text, one line per block, whitespace collapsed.
fn visible_lines(html: &str) -> Vec<String> {
    let tokenizer = Tokenizer::new(Lines::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    if let TokenizerResult::Done = tokenizer.feed(&input) {
        tokenizer.end();
    }
    let mut state = tokenizer.sink.state.into_inner();
    state.break_line();
    state.lines
}

#[derive(Default)]
struct Lines {
    state: RefCell<State>,
}

#[derive(Default)]
struct State {
    lines: Vec<String>,
    line: String,
    /// Open elements whose text is not shown (`head`, `script`, `style`, `template`, `svg`,
    /// ...), by name: text counts only when none is open.
    hidden: Vec<LocalName>,
    /// Whitespace came after the line's last word.
    space: bool,
}

impl State {
    fn break_line(&mut self) {
        if !self.line.is_empty() {
            self.lines.push(std::mem::take(&mut self.line));
        }
        self.space = false;
    }

    fn text(&mut self, text: &str) {
        if !self.hidden.is_empty() || text.is_empty() {
            return;
        }
        self.space |= text.starts_with(char::is_whitespace);
        for word in text.split_whitespace() {
            if self.space && !self.line.is_empty() {
                self.line.push(' ');
            }
            self.line.push_str(word);
            self.space = true;
        }
        // Text runs split by inline tags (`ab<b>c</b>`) join without a space.
        self.space = text.ends_with(char::is_whitespace);
    }
}

impl TokenSink for Lines {
    type Handle = ();

    fn process_token(&self, token: Token, _line_number: u64) -> TokenSinkResult<()> {
        let mut state = self.state.borrow_mut();
        match token {
            Token::CharacterTokens(text) => state.text(&text),
            Token::TagToken(tag) => {
                let name = tag.name;
                match tag.kind {
                    TagKind::StartTag => {
                        if breaks_line(&name) {
                            state.break_line();
                        }
                        if hides_text(&name) && !tag.self_closing {
                            state.hidden.push(name.clone());
                        }
                        if let Some(mode) = budget::text_mode(&name) {
                            return mode;
                        }
                    }
                    TagKind::EndTag => {
                        if let Some(at) = state.hidden.iter().rposition(|open| *open == name) {
                            state.hidden.truncate(at);
                        }
                        if breaks_line(&name) {
                            state.break_line();
                        }
                    }
                }
            }
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

/// Elements whose content is not shown as text.
fn hides_text(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("head")
            | local_name!("title")
            | local_name!("script")
            | local_name!("style")
            | local_name!("template")
            | local_name!("svg")
            | local_name!("math")
            | local_name!("iframe")
            | local_name!("textarea")
            | local_name!("select")
            | local_name!("noembed")
            | local_name!("noframes")
    )
}

/// Elements that start and end a line of text.
fn breaks_line(name: &LocalName) -> bool {
    matches!(
        *name,
        local_name!("address")
            | local_name!("article")
            | local_name!("aside")
            | local_name!("blockquote")
            | local_name!("body")
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
            | local_name!("label")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<!doctype html><html><head><title>Shop</title>
        <style>.a { color: red }</style><script>var x = "<p>not text</p>";</script></head>
        <body><nav><a href="/">Home</a> | <a href="/cart">Cart</a></nav>
        <main><h1>Blue kettle</h1><p>A <b>sturdy</b> kettle for the stove.</p>
        <table><tr><th>Weight</th><td>1.2 kg</td></tr></table></main>
        <div class="reviews"><p>Boils fast, handle&nbsp;stays cool.</p></div>
        <svg><text>icon</text></svg><template><p>hidden</p></template>
        <footer><p>Home</p><p>© Kettles Ltd</p></footer></body></html>"#;

    #[test]
    fn keeps_the_visible_lines_extraction_left_out_once_each() {
        let content = "# Blue kettle\n\nA **sturdy** kettle for the stove.\n";
        let rest = rest_of_page(PAGE, content);
        let lines: Vec<&str> = rest.lines().collect();
        assert_eq!(
            lines,
            [
                "Home | Cart",
                "Weight",
                "1.2 kg",
                "Boils fast, handle stays cool.",
                "Home",
                "© Kettles Ltd"
            ]
        );
        assert!(!rest.contains("not text") && !rest.contains("icon") && !rest.contains("hidden"));
        assert!(!rest.contains("color") && !rest.contains("Shop"));
    }

    #[test]
    fn nothing_left_when_extraction_kept_everything() {
        let html = "<body><p>One line.</p><p>Two <a href=x>lines</a>.</p></body>";
        let content =
            crate::archive::chunk::strip_link_destinations("One line.\n\nTwo [lines](x).");
        assert_eq!(rest_of_page(html, &content), "");
        assert_eq!(rest_of_page("", "anything"), "");
    }

    #[test]
    fn the_rest_is_bounded() {
        let html: String = (0..30_000)
            .map(|i| format!("<p>line number {i} of a long page</p>"))
            .collect();
        let rest = rest_of_page(&html, "");
        assert!(rest.len() <= MAX_CHARS, "{}", rest.len());
        assert!(rest.starts_with("line number 0 of a long page\nline number 1"));
    }
}
