//! The bodies of a page's scripts and style sheets cut before its tree is built for
//! extraction. They are about half of the bytes of real pages (53 % of the Zyte set's), the
//! HTML tokenizer reads them a character at a time, and nothing extraction does reads them:
//! Readability and the whole-body fallback drop them, the visible text leaves them out. What
//! is read is kept: JSON-LD (`<script type="application/ld+json">`, the page's metadata and
//! `articleBody`) and the page's other JSON scripts, and every start and end tag (a script's
//! `src`, a style's `media`).
//!
//! The scan reads markup as the tokenizer does, only as far as it needs: comments,
//! attribute values and the text of the other raw-text and RCDATA elements (`<title>`,
//! `<textarea>`, `<xmp>`, …) are skipped whole, so that `<script>` written inside them is not
//! taken for a script. Where it cannot be sure where a body ends, it stops cutting and keeps
//! the rest of the page as it is: a script with `<!--` and then `<script` in it (the
//! tokenizer's double-escaped state runs past the first `</script>`), an element or comment
//! never closed, `<plaintext>`.
//!
//! Not here: `<noscript>` (`web::noscript`), parsing, or anything the crawl stores: the page's
//! raw body and its WARC record keep every byte.

use std::borrow::Cow;

use memchr::memmem;

use super::lines::RAW_TEXT;
use super::noscript::find_tag;

/// Shortest body worth cutting: a copy of the page costs more than a few bytes save.
const MIN_CUT: usize = 64;

/// `html` with the bodies of its scripts (JSON scripts kept whole) and style sheets removed,
/// their start and end tags kept; `html` itself (no copy) when nothing is worth cutting.
pub fn cut_bodies(html: &str) -> Cow<'_, str> {
    let bytes = html.as_bytes();
    let mut cut = String::new();
    let mut copied = 0;
    let mut at = 0;
    while let Some(found) = memchr::memchr(b'<', &bytes[at..]) {
        let open = at + found;
        let rest = &bytes[open..];
        if rest.starts_with(b"<!--") {
            let Some(end) = comment_end(bytes, open + 4) else {
                break;
            };
            at = end;
            continue;
        }
        let closing = rest.get(1) == Some(&b'/');
        let name_start = open + 1 + usize::from(closing);
        let starts_name = bytes.get(name_start).is_some_and(u8::is_ascii_alphabetic);
        if rest.starts_with(b"<!") || rest.starts_with(b"<?") || (closing && !starts_name) {
            // A bogus comment (`<!DOCTYPE …>`, `<![CDATA[…`, `<?xml …>`, `</ …>`): up to the
            // next `>`, whatever it holds.
            let Some(end) = memchr::memchr(b'>', &bytes[open + 2..]) else {
                break;
            };
            at = open + 2 + end + 1;
            continue;
        }
        if !starts_name {
            // Not a tag: a `<` in text.
            at = open + 1;
            continue;
        }
        // A tag's name runs to whitespace, `/` or `>` (`<script-box>` is not a script).
        let name_len = bytes[name_start..]
            .iter()
            .take_while(|&&b| !(b.is_ascii_whitespace() || b == b'/' || b == b'>'))
            .count();
        let Some(tag_end) = tag_end(bytes, name_start + name_len) else {
            break;
        };
        at = tag_end + 1;
        if closing {
            continue;
        }
        let name = &html[name_start..name_start + name_len];
        if name.eq_ignore_ascii_case("plaintext") {
            break;
        }
        // A raw-text or RCDATA element's text runs to its end tag and is not markup; of them,
        // only scripts' and style sheets' text is cut (`<title>`, `<textarea>`, … read over).
        let Some(&raw_text) = RAW_TEXT.iter().find(|raw| name.eq_ignore_ascii_case(raw)) else {
            continue;
        };
        let Some(end) = find_tag(html, at, b"</", raw_text) else {
            break;
        };
        let is_script = raw_text == "script";
        if !is_script && raw_text != "style" {
            at = end;
            continue;
        }
        let body = &bytes[at..end];
        if is_script && escapes_twice(body) {
            break;
        }
        let keep = is_script && holds_json(&bytes[open..at]);
        if !keep && body.len() >= MIN_CUT {
            cut.push_str(&html[copied..at]);
            copied = end;
        }
        at = end;
    }
    if copied == 0 {
        return Cow::Borrowed(html);
    }
    cut.push_str(&html[copied..]);
    Cow::Owned(cut)
}

/// Where the comment whose text starts at `from` (after `<!--`) ends, as the tokenizer ends
/// it: the index after its `-->` or `--!>`, or after `<!-->` and `<!--->`, which end at once.
fn comment_end(bytes: &[u8], from: usize) -> Option<usize> {
    let text = &bytes[from..];
    if text.starts_with(b">") {
        return Some(from + 1);
    }
    if text.starts_with(b"->") {
        return Some(from + 2);
    }
    let dashes = memmem::find(text, b"-->").map(|at| at + 3);
    let bang = memmem::find(text, b"--!>").map(|at| at + 4);
    Some(from + dashes.into_iter().chain(bang).min()?)
}

/// Where the tag whose name ends at `from` ends: the index of its `>`, attribute values in
/// quotes read over (a `>` inside one does not end the tag). `None` when it never ends.
fn tag_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    let mut after_equals = false;
    while let Some(&byte) = bytes.get(at) {
        match byte {
            b'>' => return Some(at),
            b'=' => after_equals = true,
            b'"' | b'\'' if after_equals => {
                at += 1 + memchr::memchr(byte, bytes.get(at + 1..)?)?;
                after_equals = false;
            }
            byte if byte.is_ascii_whitespace() => {}
            _ => after_equals = false,
        }
        at += 1;
    }
    None
}

/// Whether a script's text up to the first `</script` may not be all of it: after `<!--`, a
/// `<script` puts the tokenizer in its double-escaped state, where that `</script` ends the
/// inner one only. `<!--` alone (an old page's `<!-- … //-->` around its code) does not.
fn escapes_twice(body: &[u8]) -> bool {
    let Some(comment) = memmem::find(body, b"<!--") else {
        return false;
    };
    body[comment..]
        .windows(b"<script".len())
        .any(|window| window.eq_ignore_ascii_case(b"<script"))
}

/// Whether a script's start tag says JSON: JSON-LD (`type="application/ld+json"`, also
/// written `ld&#x2B;json`, in any case) and the other data islands (`application/json`) are
/// kept whole.
fn holds_json(start_tag: &[u8]) -> bool {
    start_tag
        .windows(b"json".len())
        .any(|window| window.eq_ignore_ascii_case(b"json"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn long(text: &str) -> String {
        text.repeat(MIN_CUT)
    }

    #[test]
    fn script_and_style_bodies_are_cut_and_their_tags_kept() {
        let js = long("var a = 1 < 2;");
        let css = long("p{color:red}");
        let html = format!(
            r#"<html><head><style media="print">{css}</style><script src="/a.js" async>{js}</SCRIPT ></head><body><p>Text</p><script>{js}</script></body></html>"#
        );
        assert_eq!(
            cut_bodies(&html),
            r#"<html><head><style media="print"></style><script src="/a.js" async></SCRIPT ></head><body><p>Text</p><script></script></body></html>"#
        );
    }

    #[test]
    fn json_ld_and_short_bodies_are_kept() {
        let json = long(r#"{"@type":"Article"}"#);
        let html = format!(
            r#"<head><script type="application/LD+JSON">{json}</script><script type="application/ld&#x2B;json">{json}</script><script>go()</script></head>"#
        );
        assert!(matches!(cut_bodies(&html), Cow::Borrowed(_)));
    }

    #[test]
    fn markup_that_only_looks_like_a_script_is_left_alone() {
        let js = long("x();");
        for html in [
            // A custom element named like one is not a script.
            format!("<script-box><p>Content {js}</p></script-box>"),
            // In a comment, an attribute value, a title, a textarea: text, not a script.
            format!("<!-- <script> --><p>Content</p><script>{js}</script><p>More</p>"),
            format!(r#"<div title="<script>"><p>Content</p></div><p>{js}</p></script>"#),
            format!("<title><script></title><p>Content {js}</p></script>"),
            format!("<textarea><style></textarea><p>Content {js}</p></style>"),
            // After a comment that ends at once, a textarea's text is not markup.
            format!(
                "<!--><textarea><!-- --><script></textarea><p>Content {js}</p><script>x</script>"
            ),
            // In a bogus comment: `<![CDATA[` and `</ ` run to the next `>`.
            format!("<![CDATA[ <script>]]><p>Content {js}</p></script>"),
            format!("</ <script><p>Content {js}</p></script>"),
        ] {
            let kept = cut_bodies(&html);
            let first = html.find("<p>Content").expect("content");
            assert!(kept.contains(&html[first..first + 20]), "{html}");
            if !html.starts_with("<!--") {
                assert!(matches!(kept, Cow::Borrowed(_)), "{html}");
            }
        }
    }

    #[test]
    fn where_a_body_may_end_elsewhere_the_rest_is_kept() {
        let js = long("y();");
        for html in [
            // The double-escaped state: the first </script> may not end this script.
            format!(
                r#"<script>{js}<!-- document.write("<script>a()</script>") --></script><p>T</p>"#
            ),
            // Never closed, or a comment never closed before it.
            format!("<p>T</p><script>{js}"),
            format!("<!-- <p>T</p><script>{js}</script>"),
            format!("<plaintext><script>{js}</script>"),
        ] {
            assert!(matches!(cut_bodies(&html), Cow::Borrowed(_)), "{html}");
        }
    }

    #[test]
    fn an_old_comment_around_a_script_is_cut_with_it() {
        let js = long("z();");
        let html =
            format!("<script><!-- {js} //--></script><p>T</p><!DOCTYPE x><style>{js}</style>");
        assert_eq!(
            cut_bodies(&html),
            "<script></script><p>T</p><!DOCTYPE x><style></style>"
        );
    }

    #[test]
    fn the_parsed_page_reads_the_same() {
        let js = long("if (a < b && c > d) { e('</div>'); }");
        let html = format!(
            r#"<html><head><title>T &lt;script&gt;</title><script>{js}</script><style>{}</style></head><body><main><h1>Heading</h1><script>{js}</script><p>The content of <b>the page</b>.</p></main></body></html>"#,
            long("main{display:block}")
        );
        let text = |html: &str| {
            let document = dom_query::Document::from(html);
            document.select("script, style").remove();
            (
                document.select("title").text().to_string(),
                document.select("body").text().to_string(),
            )
        };
        let cut = cut_bodies(&html);
        assert!(cut.len() < html.len() / 3);
        assert_eq!(text(&cut), text(&html));
    }
}
