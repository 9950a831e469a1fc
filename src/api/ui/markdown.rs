//! Hostile page content as safe HTML: a page's markdown through pulldown-cmark, its raw HTML
//! shown as text, images replaced by their alt text and address (the viewer never loads a
//! remote image), then ammonia's sanitiser as the last word: no script, no event handler, no
//! style, links only to `http`, `https` and `mailto` (never `javascript:`), opened with
//! `rel="noopener noreferrer nofollow"`. Search snippets keep only their `<b>` marks.
//!
//! Not here: where the markdown comes from (the store), the page around it.

use std::collections::HashSet;

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

/// The sanitiser for rendered markdown.
fn cleaner() -> ammonia::Builder<'static> {
    let mut builder = ammonia::Builder::default();
    builder
        .rm_tags(["img"])
        .url_schemes(HashSet::from(["http", "https", "mailto"]))
        .url_relative(ammonia::UrlRelative::Deny)
        .link_rel(Some("noopener noreferrer nofollow"));
    builder
}

/// A page's markdown (or text) as sanitised HTML.
pub(super) fn render(markdown: &str) -> String {
    let mut options = Options::empty();
    options.insert(Options::ENABLE_TABLES);
    options.insert(Options::ENABLE_STRIKETHROUGH);
    options.insert(Options::ENABLE_TASKLISTS);
    let events = Parser::new_ext(markdown, options).map(|event| match event {
        // Raw HTML in the markdown is the page's: shown, never interpreted.
        Event::Html(html) | Event::InlineHtml(html) => Event::Text(html),
        Event::Start(Tag::Image { dest_url, .. }) => {
            Event::Text(CowStr::from(format!("[image <{dest_url}>: ")))
        }
        Event::End(TagEnd::Image) => Event::Text(CowStr::from("]")),
        other => other,
    });
    let mut html = String::with_capacity(markdown.len() + markdown.len() / 4);
    pulldown_cmark::html::push_html(&mut html, events);
    cleaner().clean(&html).to_string()
}

/// Cleaned HTML of a page (the `html` format) through the same sanitiser.
pub(super) fn clean_html(html: &str) -> String {
    cleaner().clean(html).to_string()
}

/// A search snippet (HTML-escaped text with matched terms in `<b>`) with nothing but its
/// `<b>` marks.
pub(super) fn snippet(html: &str) -> String {
    ammonia::Builder::empty()
        .add_tags(["b"])
        .clean(html)
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The real tags of an HTML text (text is escaped: each `<` starts a tag).
    fn tags(html: &str) -> Vec<String> {
        html.split('<')
            .skip(1)
            .map(|rest| rest.split('>').next().unwrap_or("").to_lowercase())
            .collect()
    }

    #[test]
    fn hostile_markdown_loses_its_script_links_and_images() {
        let hostile = "# Title\n\n<script>alert(1)</script>\n\n\
            [click](javascript:alert(2)) [ok](https://example.com/a) \
            ![x](https://evil.test/track.png) <img src=x onerror=alert(3)>\n\n\
            <a href=\"javascript:alert(4)\" onclick=\"alert(5)\">raw</a>\n\n\
            [data](data:text/html,<script>alert(6)</script>) [rel](/ui/logout)";
        let html = render(hostile);
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        for tag in tags(&html) {
            let name = tag.split_whitespace().next().unwrap_or("");
            assert!(
                ["h1", "/h1", "p", "/p", "a", "/a"].contains(&name),
                "<{tag}> in {html}"
            );
            for banned in ["javascript:", "data:", "on", "src", "/ui", "style"] {
                assert!(
                    !tag.split_whitespace()
                        .skip(1)
                        .any(|attribute| attribute.starts_with(banned)
                            || attribute.contains(&format!("=\"{banned}"))),
                    "{banned} in <{tag}>"
                );
            }
        }
        assert!(html.contains("href=\"https://example.com/a\""), "{html}");
        assert!(html.contains("noopener noreferrer nofollow"), "{html}");
        // Raw HTML is shown as text.
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(
            html.contains("[image &lt;https://evil.test/track.png&gt;: x]"),
            "{html}"
        );
    }

    #[test]
    fn snippets_keep_only_their_marks() {
        assert_eq!(
            snippet("a <b>tokio</b> &lt;x&gt; <i>y</i><script>z</script>"),
            "a <b>tokio</b> &lt;x&gt; y"
        );
    }
}
