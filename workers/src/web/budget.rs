//! The parsing budget of one HTML document, measured before its tree is built: how many
//! elements it has, how deep they nest, and how much work building the tree would take.
//! html5ever's tree builder looks through the stack of open elements for many start tags, so
//! its time grows with elements × depth: a 200,000-deep page takes minutes and cannot be
//! stopped once started. [`check`] runs html5ever's tokenizer alone (linear time, the same
//! tokenizer the parser uses) over the document, keeps an estimate of the open-element stack,
//! and stops at the first limit crossed, so such a page fails in milliseconds instead.
//!
//! Not here: flattening moderately deep trees (`web::extract` does it on the built tree) or
//! time limits (the caller's).

use std::cell::RefCell;
use std::collections::HashMap;

use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};
use html5ever::{LocalName, TokenizerResult, local_name};

/// Most elements (start tags) a document may have.
pub const MAX_ELEMENTS: usize = 500_000;

/// Deepest nesting of elements a document may have (elements whose end tag is optional, like
/// `<p>` and `<li>`, are not counted: the parser closes them by itself).
pub const MAX_NESTING: usize = 4_096;

/// Most tree-building work a document may take: the sum, over its start tags, of the depth
/// they open at (what html5ever's scope checks walk through).
pub const MAX_WORK: u64 = 200_000_000;

/// The limit a document crossed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Exceeded {
    /// More than [`MAX_ELEMENTS`] elements.
    #[error("the document has more than {limit} elements")]
    Elements {
        /// The limit.
        limit: usize,
    },
    /// Nesting deeper than [`MAX_NESTING`].
    #[error("the document nests elements deeper than {limit}")]
    Nesting {
        /// The limit.
        limit: usize,
    },
    /// More than [`MAX_WORK`] steps of tree building.
    #[error("the document's nesting would cost more than {limit} parser steps")]
    Work {
        /// The limit.
        limit: u64,
    },
}

/// What [`check`] measured of a document within the budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Measure {
    /// Elements (start tags).
    pub elements: usize,
    /// Deepest nesting estimated.
    pub depth: usize,
}

/// Whether `html` is within the budget, as [`check`] says, without tokenizing it when it
/// cannot cross any limit. Every start tag is a `<` followed by an ASCII letter, so a document
/// with at most [`MAX_NESTING`] of those has at most that many elements, nests at most that
/// deep, and costs at most `MAX_NESTING²` (≤ [`MAX_WORK`]) steps; most pages are that small,
/// and counting the bytes is far cheaper than the tokenizer's pass (which still measures
/// every larger document). Extraction calls this before building a tree.
pub fn admit(html: &str) -> Result<(), Exceeded> {
    if start_tags_at_most(html, MAX_NESTING) <= MAX_NESTING {
        return Ok(());
    }
    check(html).map(|_| ())
}

// What `admit`'s shortcut relies on.
const _: () = assert!(MAX_NESTING <= MAX_ELEMENTS);
const _: () = assert!((MAX_NESTING as u64) * (MAX_NESTING as u64) <= MAX_WORK);

/// An upper bound on `html`'s start tags (each `<` followed by an ASCII letter, in text,
/// comments and scripts too), counted up to `cap + 1`.
fn start_tags_at_most(html: &str, cap: usize) -> usize {
    let bytes = html.as_bytes();
    let mut count = 0;
    for at in memchr::memchr_iter(b'<', bytes) {
        if bytes.get(at + 1).is_some_and(u8::is_ascii_alphabetic) {
            count += 1;
            if count > cap {
                break;
            }
        }
    }
    count
}

/// Measures `html` against the budget; stops at the first limit crossed.
pub fn check(html: &str) -> Result<Measure, Exceeded> {
    let tokenizer = Tokenizer::new(Counter::default(), TokenizerOpts::default());
    let input = BufferQueue::default();
    input.push_back(StrTendril::from_slice(html));
    // The sink stops the tokenizer with `Script` when a limit is crossed.
    if let TokenizerResult::Done = tokenizer.feed(&input) {
        tokenizer.end();
    }
    let state = tokenizer.sink.state.into_inner();
    match state.exceeded {
        Some(exceeded) => Err(exceeded),
        None => Ok(Measure {
            elements: state.elements,
            depth: state.deepest,
        }),
    }
}

/// The token sink that counts.
#[derive(Default)]
struct Counter {
    state: RefCell<State>,
}

/// The estimate of the parser's open elements, and the counts so far.
#[derive(Default)]
struct State {
    open: Vec<LocalName>,
    /// How many of each name are in `open`, so an end tag for a name that is not open (which
    /// the parser ignores) costs no walk through `open`.
    open_names: HashMap<LocalName, usize>,
    /// Open `svg` and `math` elements: inside them `<x/>` closes itself.
    foreign: usize,
    elements: usize,
    deepest: usize,
    work: u64,
    exceeded: Option<Exceeded>,
}

impl State {
    fn start(&mut self, name: LocalName, self_closing: bool) -> Result<(), Exceeded> {
        self.elements += 1;
        if self.elements > MAX_ELEMENTS {
            return Err(Exceeded::Elements {
                limit: MAX_ELEMENTS,
            });
        }
        if !opens_scope(&name) || (self_closing && self.foreign > 0) {
            return Ok(());
        }
        if matches!(name, local_name!("svg") | local_name!("math")) {
            self.foreign += 1;
        }
        *self.open_names.entry(name.clone()).or_default() += 1;
        self.open.push(name);
        let depth = self.open.len();
        self.deepest = self.deepest.max(depth);
        self.work += depth as u64;
        if depth > MAX_NESTING {
            return Err(Exceeded::Nesting { limit: MAX_NESTING });
        }
        if self.work > MAX_WORK {
            return Err(Exceeded::Work { limit: MAX_WORK });
        }
        Ok(())
    }

    /// Closes the innermost open element named `name` and those opened inside it, as the
    /// parser does; an end tag for a name that is not open is ignored, as the parser does.
    fn end(&mut self, name: &LocalName) {
        if self.open_names.get(name).copied().unwrap_or(0) == 0 {
            return;
        }
        while let Some(popped) = self.open.pop() {
            if matches!(popped, local_name!("svg") | local_name!("math")) {
                self.foreign = self.foreign.saturating_sub(1);
            }
            if let Some(count) = self.open_names.get_mut(&popped) {
                *count -= 1;
            }
            if &popped == name {
                break;
            }
        }
    }
}

impl TokenSink for Counter {
    type Handle = ();

    fn process_token(&self, token: Token, _line_number: u64) -> TokenSinkResult<()> {
        let Token::TagToken(tag) = token else {
            return TokenSinkResult::Continue;
        };
        let mut state = self.state.borrow_mut();
        match tag.kind {
            TagKind::StartTag => {
                let in_html = state.foreign == 0;
                let switch_to = in_html.then(|| text_mode(&tag.name)).flatten();
                if let Err(exceeded) = state.start(tag.name, tag.self_closing) {
                    state.exceeded = Some(exceeded);
                    // Pauses the tokenizer: `check` stops feeding it.
                    return TokenSinkResult::Script(());
                }
                switch_to.unwrap_or(TokenSinkResult::Continue)
            }
            TagKind::EndTag => {
                state.end(&tag.name);
                TokenSinkResult::Continue
            }
        }
    }
}

/// Whether a start tag opens an element that stays open until its end tag: not the void
/// elements, and not those the parser closes by itself when a sibling starts (`p`, `li`,
/// table rows and cells, ...) or that it never nests (`a`, `button`, `form`, `nobr`).
fn opens_scope(name: &LocalName) -> bool {
    !matches!(
        *name,
        local_name!("area")
            | local_name!("base")
            | local_name!("basefont")
            | local_name!("bgsound")
            | local_name!("br")
            | local_name!("col")
            | local_name!("embed")
            | local_name!("frame")
            | local_name!("hr")
            | local_name!("img")
            | local_name!("input")
            | local_name!("keygen")
            | local_name!("link")
            | local_name!("meta")
            | local_name!("param")
            | local_name!("source")
            | local_name!("track")
            | local_name!("wbr")
            | local_name!("html")
            | local_name!("head")
            | local_name!("body")
            | local_name!("p")
            | local_name!("li")
            | local_name!("dt")
            | local_name!("dd")
            | local_name!("option")
            | local_name!("optgroup")
            | local_name!("tr")
            | local_name!("td")
            | local_name!("th")
            | local_name!("tbody")
            | local_name!("thead")
            | local_name!("tfoot")
            | local_name!("colgroup")
            | local_name!("caption")
            | local_name!("rb")
            | local_name!("rt")
            | local_name!("rtc")
            | local_name!("rp")
            | local_name!("a")
            | local_name!("button")
            | local_name!("form")
            | local_name!("nobr")
    )
}

/// The tokenizer state the parser switches to after these start tags (their content is
/// text, not markup), as html5ever's tree builder does with scripting disabled, the way
/// dom_query parses: `<noscript>` content is markup there, so its elements count.
fn text_mode(name: &LocalName) -> Option<TokenSinkResult<()>> {
    let mode = match *name {
        local_name!("title") | local_name!("textarea") => TokenSinkResult::RawData(RawKind::Rcdata),
        local_name!("style")
        | local_name!("xmp")
        | local_name!("iframe")
        | local_name!("noembed")
        | local_name!("noframes") => TokenSinkResult::RawData(RawKind::Rawtext),
        local_name!("script") => TokenSinkResult::RawData(RawKind::ScriptData),
        local_name!("plaintext") => TokenSinkResult::Plaintext,
        _ => return None,
    };
    Some(mode)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(open: &str, close: &str, n: usize) -> String {
        format!(
            "<!doctype html><html><body>{}deep{}</body></html>",
            open.repeat(n),
            close.repeat(n)
        )
    }

    #[test]
    fn ordinary_pages_pass_and_are_measured() {
        let page = "<!doctype html><html><head><title>t <b>not a tag</b></title></head><body>\
                    <div><p>one<p>two<ul><li>a<li>b</ul><img src=x><br></div>\
                    <script>if (a < b) { document.write('<div><div><div>') }</script>\
                    </body></html>";
        let measure = check(page).expect("within budget");
        assert_eq!(
            measure.depth, 2,
            "div > ul; p, li, void elements not counted"
        );
        // html head title body div p p ul li li img br script: 13 start tags (the `<b>` in
        // the title and the divs in the script are text).
        assert_eq!(measure.elements, 13);
    }

    #[test]
    fn admit_agrees_with_check_around_its_shortcut() {
        // At and just over the shortcut's bound, nested (the deepest such documents can be)
        // and flat; then over the nesting limit, which only the tokenizer can see.
        for n in [
            MAX_NESTING - 10,
            MAX_NESTING - 4,
            MAX_NESTING - 3,
            MAX_NESTING + 1,
            MAX_NESTING + 100,
        ] {
            for page in [
                nested("<div>", "</div>", n),
                nested("<span>", "", n),
                nested("<p>x", "", n),
            ] {
                assert_eq!(
                    admit(&page).is_ok(),
                    check(&page).is_ok(),
                    "{n} start tags in {}…",
                    &page[..60]
                );
            }
        }
        // html, body and MAX_NESTING - 2 divs: within the bound, admitted unread.
        let page = nested("<div>", "</div>", MAX_NESTING - 2);
        assert_eq!(start_tags_at_most(&page, MAX_NESTING), MAX_NESTING);
        assert!(admit(&page).is_ok());
        // 5,000 nested divs: over the nesting limit, refused.
        assert!(matches!(
            admit(&nested("<div>", "</div>", 5_000)),
            Err(Exceeded::Nesting { .. })
        ));
        // `<` not followed by a letter opens no tag, and the count stops past the cap.
        assert_eq!(start_tags_at_most("a < b <1 <> </p> <!-- --> <x", 10), 1);
        assert_eq!(start_tags_at_most(&"<a>".repeat(100), 10), 11);
    }

    #[test]
    fn deep_nesting_is_refused_before_any_tree_is_built() {
        let started = std::time::Instant::now();
        let error = check(&nested("<div>", "</div>", 200_000)).expect_err("too deep");
        assert_eq!(error, Exceeded::Nesting { limit: MAX_NESTING });
        assert!(started.elapsed() < std::time::Duration::from_secs(2));
        assert!(check(&nested("<div>", "</div>", MAX_NESTING - 10)).is_ok());
        assert!(check(&nested("<ul><li>", "</li></ul>", 100_000)).is_err());
    }

    #[test]
    fn stray_end_tags_do_not_hide_depth() {
        // The parser ignores `</span>` when no span is open; the estimate must too.
        let page = "<div></span>".repeat(MAX_NESTING + 1);
        assert_eq!(check(&page), Err(Exceeded::Nesting { limit: MAX_NESTING }));
        // Self-closing syntax does not close an HTML element either.
        let page = "<div/>".repeat(MAX_NESTING + 1);
        assert!(check(&page).is_err());
        // But it does inside svg.
        let page = format!("<svg>{}</svg>", "<path/>".repeat(MAX_NESTING + 1));
        assert!(check(&page).is_ok());
    }

    #[test]
    fn an_end_tag_closes_what_was_opened_inside_it() {
        let page = "<section><b><i></section>".repeat(MAX_NESTING);
        assert!(check(&page).is_ok());
    }

    #[test]
    fn noscript_content_is_markup_and_counted() {
        // dom_query builds <noscript>'s content as elements (scripting disabled): a bomb
        // inside it must not pass as text.
        let page = format!(
            "<body><noscript>{}</noscript></body>",
            "<div>".repeat(MAX_NESTING + 1)
        );
        assert_eq!(check(&page), Err(Exceeded::Nesting { limit: MAX_NESTING }));
        let page = "<noscript><p>a</p><p>b</p></noscript>";
        assert_eq!(check(page).expect("within budget").elements, 3);
    }

    #[test]
    fn too_many_elements_are_refused() {
        let page = "<br>".repeat(MAX_ELEMENTS + 1);
        assert_eq!(
            check(&page),
            Err(Exceeded::Elements {
                limit: MAX_ELEMENTS
            })
        );
    }

    #[test]
    fn costly_shapes_below_the_depth_limit_are_refused_by_work() {
        // 4,000 deep, then 60,000 elements at that depth: 240 million scope steps.
        let page = format!(
            "{}{}",
            "<div>".repeat(4_000),
            "<span></span>".repeat(60_000)
        );
        assert_eq!(check(&page), Err(Exceeded::Work { limit: MAX_WORK }));
    }
}
