//! `<noscript>` markup read as a browser without scripts reads it, but ended where a browser
//! running scripts ends it. trawl builds its tree with scripting disabled (dom_query), so that
//! a page served inside `<noscript>` for clients without JavaScript (Discourse's forums, for
//! one) is markup it can extract; a browser running scripts reads everything up to
//! `</noscript>` as text instead. The two readings part when the markup inside opens an
//! element whose content is raw text (`<iframe>`, `<textarea>`, `<xmp>`, ...) and never closes
//! it: React and Next.js render Google Tag Manager's `<noscript><iframe …/></noscript>`
//! self-closed, which HTML does not allow for `<iframe>`, and a parser with scripting disabled
//! then reads the rest of the page as the iframe's text, so the page's content is lost (a
//! browser shows it: its `<noscript>` ended first). [`close_raw_text`] closes such an element
//! where its `<noscript>` ends.
//!
//! Not here: parsing, or deciding whether a page's `<noscript>` content is used
//! (`web::extract`).

use std::borrow::Cow;

use super::lines::RAW_TEXT;

/// `html` with an end tag added before each `</noscript>` whose element holds a raw-text
/// element it never closes; `html` itself (no copy) when none does.
pub fn close_raw_text(html: &str) -> Cow<'_, str> {
    let mut fixed = String::new();
    let mut copied = 0;
    let mut from = 0;
    while let Some(open) = find_tag(html, from, b"<", "noscript") {
        let inside = open + "<noscript".len();
        let Some(close) = find_tag(html, inside, b"</", "noscript") else {
            // Never closed: a browser running scripts reads the rest of the page as its text,
            // one without scripts as markup; there is no end to close anything at.
            break;
        };
        if let Some(name) = unclosed_raw_text(&html[inside..close]) {
            fixed.push_str(&html[copied..close]);
            fixed.push_str("</");
            fixed.push_str(name);
            fixed.push('>');
            copied = close;
        }
        from = close + "</noscript".len();
    }
    if copied == 0 {
        return Cow::Borrowed(html);
    }
    fixed.push_str(&html[copied..]);
    Cow::Owned(fixed)
}

/// The raw-text element `markup` leaves open, read as the tokenizer reads it: from a raw-text
/// start tag to its end tag nothing is markup.
fn unclosed_raw_text(markup: &str) -> Option<&'static str> {
    let mut at = 0;
    loop {
        let (start, name) = RAW_TEXT
            .iter()
            .filter_map(|&name| find_tag(markup, at, b"<", name).map(|start| (start, name)))
            .min_by_key(|&(start, _)| start)?;
        let text = start + 1 + name.len();
        match find_tag(markup, text, b"</", name) {
            Some(end) => at = end + 2 + name.len(),
            None => return Some(name),
        }
    }
}

/// Where `opener` (`<` or `</`) and then `name` (lower case) start in `html` at or after
/// `from`: the name in any case, and ended (by whitespace, `/`, `>` or the end of `html`).
pub(super) fn find_tag(html: &str, from: usize, opener: &[u8], name: &str) -> Option<usize> {
    let bytes = html.as_bytes();
    let name = name.as_bytes();
    memchr::memchr_iter(b'<', bytes.get(from..)?)
        .map(|at| from + at)
        .find(|&at| {
            let rest = &bytes[at..];
            let after = opener.len() + name.len();
            rest.starts_with(opener)
                && rest
                    .get(opener.len()..after)
                    .is_some_and(|found| found.eq_ignore_ascii_case(name))
                && rest
                    .get(after)
                    .is_none_or(|&b| b.is_ascii_whitespace() || b == b'/' || b == b'>')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_closed_iframe_is_closed_where_its_noscript_ends() {
        let html = r#"<body><noscript><iframe src="https://tags.example/ns.html" height="0" /></noscript><main><p>Content</p></main></body>"#;
        assert_eq!(
            close_raw_text(html),
            r#"<body><noscript><iframe src="https://tags.example/ns.html" height="0" /></iframe></noscript><main><p>Content</p></main></body>"#
        );
        // Any case; in <head> too; each <noscript> on its own.
        let html =
            "<HEAD><NoScript><IFRAME SRC=x/></NOSCRIPT></head><noscript><textarea>a</noscript><p>b";
        assert_eq!(
            close_raw_text(html),
            "<HEAD><NoScript><IFRAME SRC=x/></iframe></NOSCRIPT></head><noscript><textarea>a</textarea></noscript><p>b"
        );
    }

    #[test]
    fn markup_that_closes_what_it_opens_is_left_alone() {
        for html in [
            "<body><p>No noscript at all</p></body>",
            "<noscript><iframe src=x></iframe></noscript><p>a</p>",
            "<noscript><style>p{}</style><img src=x></noscript>",
            // Not a raw-text element: <iframes>, <titles> are other names.
            "<noscript><iframes><titles></noscript>",
            // A start tag inside raw text is text: the style's end closes it.
            "<noscript><style>/* <iframe> */</style></noscript>",
            // A <noscript> never closed: nothing to close it at.
            "<noscript><iframe src=x/><p>rest",
            "<noscripts><iframe/></noscript>",
        ] {
            assert!(matches!(close_raw_text(html), Cow::Borrowed(_)), "{html}");
        }
    }

    #[test]
    fn the_parser_then_keeps_the_page() {
        let html = r#"<html><head><title>T</title></head><body><noscript><iframe src="https://tags.example/ns.html" style="display:none"/></noscript><main><h1>Heading</h1><p>The content of the page.</p></main></body></html>"#;
        let text = |html: &str| {
            dom_query::Document::from(html)
                .select("main")
                .text()
                .to_string()
        };
        assert_eq!(text(html), "", "the iframe took the page");
        assert_eq!(
            text(&close_raw_text(html)),
            "HeadingThe content of the page."
        );
    }
}
