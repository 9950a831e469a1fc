//! The rest of a page: its visible text outside what extraction kept, for the archive's page
//! documents. Extraction is tuned to keep main content and drop the rest, and on pages that
//! are not articles (products, listings, forums, service pages) it drops some of what a
//! reader saw there and later searches for; the archive indexes this remainder beside the
//! page's passages, at a lower weight, so a search still finds the page (measured on the WCXB
//! dev split's known-item check: 60 of the 66 queries trawl missed asked for words the
//! extracted text lacked).
//!
//! How: the page's visible lines (`web::lines`: one per block element, outside `<head>`,
//! scripts, styles, templates and SVG) come from the fetch that extracted the page, read from
//! its DOM as it was built anyway ([`rest_of_lines`]); for a page whose lines were not handed
//! over (a page read back from the store), lol_html streams its raw body once (no tree,
//! linear time, attributes never parsed: 1.8x faster than html5ever's tokenizer on the WCXB
//! dev pages) into the same lines ([`rest_of_page`]); `<noscript>` content is read as markup,
//! as extraction reads it. A line whose words are a line of the extracted content is
//! dropped, and so is a line seen before. At most [`MAX_CHARS`] characters are kept.
//!
//! Not here: decoding bytes (`web::charset`), extraction, or indexing (`archive::index`).

use std::cell::RefCell;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::rc::Rc;
use std::sync::LazyLock;

use lol_html::html_content::TextType;
use lol_html::{HtmlRewriter, Settings, doc_text, element, end_tag};

use crate::web::lines::{BLOCKS, HIDDEN, Lines};

/// Most characters of a page's rest kept: a page's navigation and sidebars are a few
/// thousand; a big listing, thread or catalogue page holds tens of thousands outside what
/// extraction kept.
pub const MAX_CHARS: usize = 100_000;

/// The visible lines of `html` that are not lines of `content` (the page's extracted
/// markdown or text, link destinations stripped), each once, joined by newlines; empty when
/// there are none.
pub fn rest_of_page(html: &str, content: &str) -> String {
    rest_of_lines(&visible_lines(html), content)
}

/// [`rest_of_page`] of a page whose visible lines (`web::lines`, newline-separated) are in
/// hand.
pub fn rest_of_lines(lines: &str, content: &str) -> String {
    let mut keys = LineKeys::default();
    let known: HashSet<u64> = content.lines().filter_map(|line| keys.key(line)).collect();
    let mut seen: HashSet<u64> = HashSet::new();
    let mut rest = String::new();
    for line in lines.lines() {
        let Some(key) = keys.key(line) else {
            continue;
        };
        if known.contains(&key) || !seen.insert(key) {
            continue;
        }
        if rest.len() + line.len() + 1 > MAX_CHARS {
            break;
        }
        if !rest.is_empty() {
            rest.push('\n');
        }
        rest.push_str(line);
    }
    rest
}

/// The comparison key of a line: its words, lowercased and space-joined (markdown's markup and
/// punctuation gone), hashed. Two lines with the same words have the same key; two different
/// ones the same key by chance once in about 2^64, which would only leave a line out of the
/// page's rest. Hashing into a reused buffer spares an allocation per line. Computing the keys
/// of every line of every page was most of page text's time: an ASCII line is read a byte at
/// a time without a branch ([`WORD_BYTES`]), any other a character at a time, not a word at a
/// time (both about twice as fast, three times for the other lines, as splitting into words).
#[derive(Default)]
struct LineKeys {
    words: Vec<u8>,
}

/// What an ASCII byte becomes in a line's key: a letter in lower case, a digit itself, anything
/// else a space.
static WORD_BYTES: [u8; 256] = {
    let mut bytes = [b' '; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        if b.is_ascii_alphanumeric() {
            bytes[byte] = b.to_ascii_lowercase();
        }
        byte += 1;
    }
    bytes
};

impl LineKeys {
    /// `None` for a line without letters or digits.
    fn key(&mut self, line: &str) -> Option<u64> {
        let words = &mut self.words;
        words.clear();
        let bytes = line.as_bytes();
        if bytes.is_ascii() {
            // Each byte is written where the key has got to; the key moves on past a word's
            // byte, and past the first space after a word: runs of other bytes leave one space.
            words.resize(bytes.len(), 0);
            let mut kept = 0;
            let mut after_word = false;
            for &byte in bytes {
                let mapped = WORD_BYTES[usize::from(byte)];
                words[kept] = mapped;
                let in_word = mapped != b' ';
                kept += usize::from(in_word || after_word);
                after_word = in_word;
            }
            if kept > 0 && words[kept - 1] == b' ' {
                kept -= 1;
            }
            words.truncate(kept);
        } else {
            let mut utf8 = [0; 4];
            let mut gap = false;
            for c in line.chars() {
                if !c.is_alphanumeric() {
                    gap = true;
                    continue;
                }
                if gap && !words.is_empty() {
                    words.push(b' ');
                }
                gap = false;
                if c.is_ascii() {
                    words.push(c.to_ascii_lowercase() as u8);
                } else {
                    for lower in c.to_lowercase() {
                        words.extend_from_slice(lower.encode_utf8(&mut utf8).as_bytes());
                    }
                }
            }
        }
        Self::hash(words)
    }

    fn hash(words: &[u8]) -> Option<u64> {
        (!words.is_empty()).then(|| {
            let mut hasher = std::hash::DefaultHasher::new();
            words.hash(&mut hasher);
            hasher.finish()
        })
    }
}

/// The document's visible text, one line per block, whitespace collapsed, joined by newlines.
fn visible_lines(html: &str) -> String {
    lines_in(html, 0)
}

/// [`BLOCKS`] and [`HIDDEN`] as lol_html selectors.
static SELECTORS: LazyLock<(String, String)> =
    LazyLock::new(|| (BLOCKS.join(", "), HIDDEN.join(", ")));

/// How deep `<noscript>` markup is read inside `<noscript>` markup: lol_html reads a nested
/// start tag as text, so each reading peels one off, and a page of nested `<noscript>`s would
/// otherwise be read again once per level.
const MAX_NOSCRIPT_DEPTH: usize = 2;

/// [`visible_lines`] of markup `depth` `<noscript>` elements deep.
fn lines_in(html: &str, depth: usize) -> String {
    let (blocks, hidden) = &*SELECTORS;
    let state = Rc::new(RefCell::new(State::default()));
    let blocks = {
        let state = Rc::clone(&state);
        element!(blocks, move |el| {
            state.borrow_mut().break_line();
            if el.can_have_content() {
                let state = Rc::clone(&state);
                el.on_end_tag(end_tag!(move |_| {
                    state.borrow_mut().break_line();
                    Ok(())
                }))?;
            }
            Ok(())
        })
    };
    let hidden = {
        let state = Rc::clone(&state);
        element!(hidden, move |el| {
            if el.can_have_content() {
                state.borrow_mut().hidden += 1;
                let state = Rc::clone(&state);
                el.on_end_tag(end_tag!(move |_| {
                    let mut state = state.borrow_mut();
                    state.hidden = state.hidden.saturating_sub(1);
                    Ok(())
                }))?;
            }
            Ok(())
        })
    };
    // A page whose `</head>` is missing still shows its body.
    let body = {
        let state = Rc::clone(&state);
        element!("body", move |_| {
            let mut state = state.borrow_mut();
            state.hidden = 0;
            state.break_line();
            Ok(())
        })
    };
    // lol_html reads `<noscript>` as text (scripting on); a page for clients without
    // JavaScript is there (Discourse's forums put every post in it), and extraction reads it
    // as markup: so does this, once its end tag is reached.
    let noscript = {
        let state = Rc::clone(&state);
        element!("noscript", move |el| {
            if depth >= MAX_NOSCRIPT_DEPTH {
                return Ok(());
            }
            state.borrow_mut().noscript = Some(String::new());
            let state = Rc::clone(&state);
            el.on_end_tag(end_tag!(move |_| {
                state.borrow_mut().read_noscript(depth);
                Ok(())
            }))?;
            Ok(())
        })
    };
    let text = {
        let state = Rc::clone(&state);
        doc_text!(move |chunk| {
            let mut state = state.borrow_mut();
            if chunk.text_type() == TextType::Data {
                // Hidden text ends with its text node: `hidden` changes only at tags.
                if state.hidden == 0 {
                    state.raw.push_str(chunk.as_str());
                }
                if chunk.last_in_text_node() {
                    state.flush();
                }
            } else if let Some(markup) = state.noscript.as_mut() {
                markup.push_str(chunk.as_str());
            }
            Ok(())
        })
    };
    // Not strict: on markup only a tree could read for sure (`<select><xmp>...`), a guess
    // about which text is shown is fine here, where stopping would lose the rest of the page.
    let settings = Settings::new()
        .append_element_content_handler(blocks)
        .append_element_content_handler(hidden)
        .append_element_content_handler(body)
        .append_element_content_handler(noscript)
        .append_document_content_handler(text)
        .with_strict(false);
    let mut rewriter = HtmlRewriter::new(settings, |_: &[u8]| {});
    // An error (a parsing ambiguity lol_html will not guess at) ends the page where it was.
    if rewriter.write(html.as_bytes()).is_ok() {
        let _ = rewriter.end();
    }
    let mut state = state.borrow_mut();
    state.flush();
    state.break_line();
    // A `<noscript>` never closed held the rest of the page: a browser without scripting
    // shows it, so it is read as markup too.
    state.read_noscript(depth);
    std::mem::take(&mut state.lines).finish()
}

/// What the handlers share while the page streams through.
#[derive(Default)]
struct State {
    lines: Lines,
    /// The current text node as written (entities not yet decoded: lol_html may hand it over
    /// in pieces, and an entity may straddle two).
    raw: String,
    /// Open elements whose text is not shown (`template`, `svg`, `select`, ...): text counts
    /// only when none is open.
    hidden: usize,
    /// The markup of the `<noscript>` element being read.
    noscript: Option<String>,
}

impl State {
    /// Reads the `<noscript>` markup gathered so far (of an element `depth` deep) as lines of
    /// their own, unless it is inside hidden content.
    fn read_noscript(&mut self, depth: usize) {
        if let Some(markup) = self.noscript.take()
            && self.hidden == 0
        {
            self.lines.extend(&lines_in(&markup, depth + 1));
        }
    }

    fn break_line(&mut self) {
        self.lines.break_line();
    }

    /// Ends the current text node: its text, entities decoded, joins the line (the buffer is
    /// kept for the next node).
    fn flush(&mut self) {
        self.lines
            .text(&html_escape::decode_html_entities(&self.raw));
        self.raw.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::job::Format;
    use crate::web::extract::{extract_html, extract_html_reading_lines};

    fn lines_of(html: &str) -> Vec<String> {
        visible_lines(html).lines().map(str::to_owned).collect()
    }

    const PAGE: &str = r#"<!doctype html><html><head><title>Shop</title>
        <style>.a { color: red }</style><script>var x = "<p>not text</p>";</script></head>
        <body><nav><a href="/">Home</a> | <a href="/cart">Cart</a></nav>
        <main><h1>Blue kettle</h1><p>A <b>sturdy</b> kettle for the stove.</p>
        <table><tr><th>Weight</th><td>1.2 kg</td></tr></table></main>
        <div class="reviews"><p>Boils fast, handle&nbsp;stays cool.</p></div>
        <svg><text>icon</text></svg><template><p>hidden</p></template>
        <footer><p>Home</p><p>© Kettles Ltd</p></footer></body></html>"#;

    #[test]
    fn line_keys_compare_words_not_markup_case_or_punctuation() {
        let mut keys = LineKeys::default();
        let key = |keys: &mut LineKeys, line: &str| keys.key(line);
        let plain = key(&mut keys, "blue kettle now 2");
        assert!(plain.is_some());
        assert_eq!(key(&mut keys, "## Blue **kettle**, NOW! (2)"), plain);
        assert_eq!(key(&mut keys, "  blue\tkettle   now-2 "), plain);
        assert_ne!(key(&mut keys, "blue kettles now 2"), plain);
        assert_ne!(key(&mut keys, "bluekettle now 2"), plain);
        assert_eq!(key(&mut keys, "ÉTÉ Straße"), key(&mut keys, "été straße"));
        assert_ne!(key(&mut keys, "été"), key(&mut keys, "ete"));
        // The ASCII path and the char path agree.
        assert_eq!(key(&mut keys, "→ Blue kettle, now 2 ✓"), plain);
        assert_eq!(key(&mut keys, "--- | --- | ***"), None);
        assert_eq!(key(&mut keys, ""), None);
        // Any ASCII line: a ✓ (no word) sends it down the char path, and the key is the same.
        for line in [
            "a",
            " a ",
            "--a--b--",
            "A1 b2\tC3",
            "x.y,,z",
            "  ",
            "9",
            "a  b",
            "Zz-Top!",
            "~",
        ] {
            let checked = format!("{line}✓");
            assert_eq!(key(&mut keys, line), key(&mut keys, &checked), "{line:?}");
        }
        assert_eq!(key(&mut keys, "--a--b--"), key(&mut keys, "a b"));
    }

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
    fn noscript_markup_is_read_and_a_missing_head_end_hides_nothing() {
        // A forum that puts its posts in <noscript> for clients without JavaScript.
        let html = r#"<html><head><title>Thread</title><body><div id="app"></div>
            <noscript><div class="post"><p>First post &amp; its <b>reply</b></p></div></noscript>
            <p>5 &lt; 7 &#x26; done</p></body></html>"#;
        assert_eq!(lines_of(html), ["First post & its reply", "5 < 7 & done"]);
    }

    #[test]
    fn an_unclosed_noscript_is_read_to_the_end() {
        let html = "<body><p>Before</p><noscript><div><p>Post one</p><p>Post &amp; two";
        assert_eq!(lines_of(html), ["Before", "Post one", "Post & two"]);
    }

    #[test]
    fn nested_noscripts_are_read_a_bounded_number_of_times() {
        // Each reading peels one `<noscript>` off: without a bound, 20,000 nested ones would
        // be read 20,000 times, each call deeper on the stack, and "Deep" found at the end.
        let html = format!("<p>Top</p>{}<p>Deep</p>", "<noscript>".repeat(20_000));
        assert_eq!(lines_of(&html), ["Top"]);
        let html = "<noscript><noscript><p>Two deep</p></noscript></noscript>";
        assert_eq!(lines_of(html), ["Two deep"]);
    }

    #[test]
    fn the_extractions_lines_are_the_raw_bodys() {
        // The fetch reads a page's lines from the tree it extracts from; the pool reads a page
        // without them from its raw body: the same lines either way.
        let pages = [
            PAGE,
            r#"<html><head><title>Thread</title><body><div id="app"></div>
            <noscript><div class="post"><p>First post &amp; its <b>reply</b></p></div></noscript>
            <p>5 &lt; 7 &#x26; done</p></body></html>"#,
            "<body><p>Before</p><noscript><div><p>Post one</p><p>Post &amp; two",
            r#"<body><div>a<span>b</span> c<br>d<select><option>x</option></select>
            <textarea>typed</textarea><iframe>frame</iframe><math><mi>m</mi></math>
            <ul><li>one<li>two <em>and</em> three</ul><table><tr><td>1<td>2</table>
            <script>var s = "<p>no</p>";</script><style>p{}</style><button>Buy</button>"#,
        ];
        let url = url::Url::parse("https://shop.example/kettle").expect("url");
        for html in pages {
            for format in [Format::Markdown, Format::Text] {
                let extracted = extract_html_reading_lines(html, &url, format).expect("extracts");
                assert_eq!(
                    extracted.lines.as_deref(),
                    Some(visible_lines(html).as_str()),
                    "{html}"
                );
                let plain = extract_html(html, &url, format).expect("extracts");
                assert_eq!(plain.lines, None, "read only when asked");
                assert_eq!(
                    plain.text, extracted.text,
                    "and extraction the same either way"
                );
            }
        }
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
