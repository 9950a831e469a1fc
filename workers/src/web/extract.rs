//! HTML in, main content out: the parsing budget (`web::budget`: too many or too deeply nested
//! elements are refused before any tree is built), one parse (dom_query), a nesting guard,
//! metadata and links read
//! from the whole page, boilerplate pruning (`web::prune`), Readability (dom_smoothie) to find
//! the article, then markdown, text or HTML, normalised, with its heading outline. When no
//! article is found the whole body is converted and the result says so.
//!
//! Not here: decoding bytes (`web::charset`), judging block pages (`web::blockpage`), or time
//! limits (the caller runs this on a blocking thread under a timeout).

use dom_query::{Document, NodeRef};
use dom_smoothie::{Readability, TextMode};
use serde::{Deserialize, Serialize};
use url::Url;

use super::budget;
use super::normalize::normalize_url;
use super::prune;
use crate::job::{Extractor, Format, Meta};

/// Elements nested deeper than this are flattened to their text before anything recursive
/// runs: Rust's stack overflow aborts the whole process, and real pages stay far below it.
pub const MAX_DEPTH: usize = 256;

/// Most links kept per page.
pub const MAX_LINKS: usize = 5_000;

/// The main content of a page and what came with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    /// The page title.
    pub title: Option<String>,
    /// The content in the requested format, normalised.
    pub text: String,
    /// How the content was found.
    pub extractor: Extractor,
    /// Something the caller should know (fallback used, nesting flattened).
    pub warning: Option<String>,
    /// Absolute, normalised http(s) links in document order, without duplicates.
    pub links: Vec<String>,
    /// Head metadata.
    pub meta: Meta,
    /// The headings of the content, in order.
    pub outline: Vec<Heading>,
    /// Visible (non-whitespace) characters in the whole body before extraction, for block-page
    /// checks.
    pub body_chars: usize,
}

/// One heading of the outline.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heading {
    /// 1 for `#`/`<h1>` through 6.
    pub level: u8,
    /// The heading's text.
    pub text: String,
}

/// Why extraction produced nothing.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The page URL is not absolute (a caller bug; fetched URLs always are).
    #[error("page url is not absolute")]
    BadUrl,
    /// The document is over the parsing budget (`extraction_limit`); no tree was built.
    #[error(transparent)]
    Limit(#[from] budget::Exceeded),
}

/// Extracts the main content of `html`, fetched from `page_url`, as `format`. A document
/// over the parsing budget ([`budget::check`]) is [`Error::Limit`], found before any tree is
/// built.
pub fn extract_html(html: &str, page_url: &Url, format: Format) -> Result<Extracted, Error> {
    budget::check(html)?;
    let document = Document::from(html);
    let mut warnings: Vec<String> = Vec::new();
    let flattened = flatten_deep_nesting(&document, MAX_DEPTH);
    if flattened > 0 {
        warnings.push(format!("nesting deeper than {MAX_DEPTH} flattened to text"));
    }
    let links = collect_links(&document, page_url);
    let mut meta = read_meta(&document, page_url);
    let body_chars = prune::prune(&document);
    let text_mode = match format {
        Format::Markdown => TextMode::Markdown,
        Format::Text | Format::Html => TextMode::Formatted,
    };
    let config = dom_smoothie::Config {
        text_mode,
        // Link density is recomputed less often (dom_smoothie's documented range is 5-10):
        // measured on the labelled set, F1 0.968 -> 0.967 (inside its ±0.004) for about 15 %
        // less extraction time.
        min_score_to_adjust: 10.0,
        ..dom_smoothie::Config::default()
    };
    let mut readability =
        Readability::with_document(document, Some(page_url.as_str()), Some(config))
            .map_err(|_| Error::BadUrl)?;
    let article = readability.parse();
    let (title, text, extractor) = match article {
        Ok(article) if !article.text_content.trim().is_empty() => {
            meta.author = meta.author.or(article.byline.clone());
            meta.published = meta.published.or(article.published_time.clone());
            meta.lang = meta.lang.or(article.lang.clone());
            if meta.description.is_none() {
                meta.description = article.excerpt.clone();
            }
            let text = match format {
                Format::Html => article.content.to_string(),
                Format::Markdown | Format::Text => prune::clean_text(&article.text_content),
            };
            let title = Some(article.title.to_string()).filter(|title| !title.trim().is_empty());
            (title, text, Extractor::Readability)
        }
        _ => {
            warnings.push("no article found: the whole page body was converted".to_owned());
            let (title, text) = convert_whole_body(html, format);
            (title, text, Extractor::Fallback)
        }
    };
    let text = match format {
        Format::Html => text.trim().to_owned(),
        Format::Markdown | Format::Text => normalize_text(&text),
    };
    let outline = match format {
        Format::Markdown => markdown_outline(&text),
        Format::Text | Format::Html => Vec::new(),
    };
    Ok(Extracted {
        title: title.map(|title| collapse_whitespace(&title)),
        text,
        extractor,
        warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
        links,
        meta,
        outline,
        body_chars,
    })
}

/// The whole page's body as `format` (markdown, text or HTML): everything a reader sees,
/// navigation, headers and footers included, without scripts, styles, SVG, frames and
/// templates. What Firecrawl's `onlyMainContent: false` asks for; guarded by the same
/// parsing budget as [`extract_html`].
pub fn extract_whole_page(html: &str, format: Format) -> Result<String, Error> {
    budget::check(html)?;
    let (_, text) = convert_body(
        html,
        format,
        "script, style, noscript, template, svg, iframe",
    );
    Ok(match format {
        Format::Html => text.trim().to_owned(),
        Format::Markdown | Format::Text => normalize_text(&text),
    })
}

/// Converts the whole body (minus scripts, styles, navigation chrome) when Readability finds
/// no article. Parses again: Readability consumed the first document.
fn convert_whole_body(html: &str, format: Format) -> (Option<String>, String) {
    convert_body(
        html,
        format,
        "script, style, noscript, template, svg, iframe, nav, form, button",
    )
}

/// The page's title and its body as `format`, the elements matching `remove` left out.
fn convert_body(html: &str, format: Format, remove: &str) -> (Option<String>, String) {
    let document = Document::from(html);
    flatten_deep_nesting(&document, MAX_DEPTH);
    let title = Some(document.select("title").text().trim().to_owned()).filter(|t| !t.is_empty());
    document.select(remove).remove();
    let body = document.select("body");
    let text = match (format, body.nodes().first()) {
        (_, None) => String::new(),
        (Format::Markdown, Some(node)) => node.md(None).to_string(),
        (Format::Text, Some(node)) => node.formatted_text().to_string(),
        (Format::Html, Some(node)) => node.inner_html().to_string(),
    };
    (title, text)
}

/// Replaces the children of every element at `max_depth` with their text. Iterative, so the
/// guard itself cannot overflow. Returns how many elements were flattened.
fn flatten_deep_nesting(document: &Document, max_depth: usize) -> usize {
    let mut too_deep: Vec<NodeRef<'_>> = Vec::new();
    let mut stack: Vec<(NodeRef<'_>, usize)> = vec![(document.root(), 0)];
    while let Some((node, depth)) = stack.pop() {
        if depth >= max_depth {
            if node.first_child().is_some() {
                too_deep.push(node);
            }
            continue;
        }
        let mut child = node.first_child();
        while let Some(current) = child {
            child = current.next_sibling();
            if current.is_element() {
                stack.push((current, depth + 1));
            }
        }
    }
    for node in &too_deep {
        let text = node.text();
        node.set_text(text);
    }
    too_deep.len()
}

/// Collects absolute, normalised http(s) links in document order, without duplicates.
fn collect_links(document: &Document, page_url: &Url) -> Vec<String> {
    let base = document
        .select("base[href]")
        .attr("href")
        .and_then(|href| page_url.join(href.trim()).ok())
        .unwrap_or_else(|| page_url.clone());
    let mut seen = std::collections::HashSet::new();
    let mut links = Vec::new();
    for anchor in document.select("a[href]").iter() {
        let Some(href) = anchor.attr("href") else {
            continue;
        };
        let href = href.trim();
        if href.is_empty() || href.starts_with('#') {
            continue;
        }
        let Ok(url) = base.join(href) else { continue };
        if !matches!(url.scheme(), "http" | "https") {
            continue;
        }
        let url = normalize_url(&url).to_string();
        if seen.insert(url.clone()) {
            links.push(url);
            if links.len() >= MAX_LINKS {
                break;
            }
        }
    }
    links
}

/// Where each metadata field may come from, in order of preference (`name`, `property` or
/// `itemprop` values of `<meta>`, lowercased).
const DESCRIPTION_KEYS: &[&str] = &["description", "og:description", "twitter:description"];
const PUBLISHED_KEYS: &[&str] = &["article:published_time", "date", "dc.date", "datepublished"];
const AUTHOR_KEYS: &[&str] = &["author", "article:author"];

/// Reads description, language, canonical URL, publication date and author. One pass over
/// the `<meta>` and `<link>` elements (each `select` walks the whole tree).
fn read_meta(document: &Document, page_url: &Url) -> Meta {
    let mut found: Vec<(String, String)> = Vec::new();
    let mut canonical = None;
    for node in document.select("meta[content], link[rel][href]").nodes() {
        if node
            .node_name()
            .is_some_and(|name| name.eq_ignore_ascii_case("link"))
        {
            let is_canonical = node.attr("rel").is_some_and(|rel| {
                rel.split_ascii_whitespace()
                    .any(|token| token.eq_ignore_ascii_case("canonical"))
            });
            if is_canonical && canonical.is_none() {
                canonical = node
                    .attr("href")
                    .and_then(|href| page_url.join(href.trim()).ok())
                    .filter(|url| matches!(url.scheme(), "http" | "https"))
                    .map(|url| url.to_string());
            }
            continue;
        }
        let Some(content) = node
            .attr("content")
            .map(|value| collapse_whitespace(&value))
        else {
            continue;
        };
        if content.is_empty() {
            continue;
        }
        for attribute in ["name", "property", "itemprop"] {
            if let Some(key) = node.attr(attribute) {
                found.push((key.trim().to_ascii_lowercase(), content.clone()));
            }
        }
    }
    let pick = |keys: &[&str]| -> Option<String> {
        keys.iter().find_map(|key| {
            found
                .iter()
                .find(|(found_key, _)| found_key == key)
                .map(|(_, value)| value.clone())
        })
    };
    // The <html> element is a child of the document root: no tree walk needed.
    let lang = document
        .root()
        .element_children()
        .into_iter()
        .find_map(|element| element.attr("lang"))
        .map(|lang| lang.trim().to_owned())
        .filter(|lang| !lang.is_empty());
    Meta {
        description: pick(DESCRIPTION_KEYS),
        lang,
        canonical,
        published: pick(PUBLISHED_KEYS),
        author: pick(AUTHOR_KEYS),
    }
}

/// Normalises extracted text: `\r\n` → `\n`, trailing blanks trimmed, runs of blank lines
/// collapsed to one, consecutive duplicate lines collapsed, and no blank lines at either end.
pub fn normalize_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut previous: Option<&str> = None;
    let mut pending_blank = false;
    for line in text.split('\n') {
        let line = line.trim_end_matches(['\r', ' ', '\t', '\u{a0}']);
        if line.trim().is_empty() {
            pending_blank = !out.is_empty();
            previous = None;
            continue;
        }
        if previous == Some(line) {
            continue;
        }
        if pending_blank {
            out.push('\n');
            pending_blank = false;
        }
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(line);
        previous = Some(line);
    }
    out
}

/// Reads the ATX headings of a markdown text (outside fenced code blocks).
pub fn markdown_outline(markdown: &str) -> Vec<Heading> {
    let mut outline = Vec::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let level = trimmed.bytes().take_while(|&byte| byte == b'#').count();
        if (1..=6).contains(&level) && trimmed[level..].starts_with(' ') {
            let text = trimmed[level..].trim().trim_end_matches('#').trim();
            if !text.is_empty() {
                outline.push(Heading {
                    level: level as u8,
                    text: text.to_owned(),
                });
            }
        }
    }
    outline
}

fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> Url {
        Url::parse("https://example.com/news/story.html").expect("url")
    }

    #[test]
    fn normalisation_collapses_blank_runs_and_duplicate_lines() {
        let text = "\r\n\r\n# Title  \r\n\r\n\r\nSame\nSame\n\nSame\ntail\t\n\n";
        assert_eq!(normalize_text(text), "# Title\n\nSame\n\nSame\ntail");
    }

    #[test]
    fn outline_skips_code_fences_and_hashtags() {
        let md = "# One\n\n#notaheading\n```\n# not either\n```\n### Three ###\n";
        let outline = markdown_outline(md);
        assert_eq!(
            outline,
            vec![
                Heading {
                    level: 1,
                    text: "One".into()
                },
                Heading {
                    level: 3,
                    text: "Three".into()
                },
            ]
        );
    }

    #[test]
    fn deep_nesting_is_flattened_without_recursion() {
        let depth = budget::MAX_NESTING - 10;
        let html = format!(
            "{}deep text{}",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        let extracted = extract_html(&html, &url(), Format::Markdown).expect("extracts");
        assert!(extracted.text.contains("deep text"));
        assert!(extracted.warning.expect("warning").contains("flattened"));
    }

    #[test]
    fn nesting_over_the_budget_is_refused_before_parsing() {
        let depth = 200_000;
        let html = format!(
            "{}deep text{}",
            "<div>".repeat(depth),
            "</div>".repeat(depth)
        );
        let started = std::time::Instant::now();
        let error = extract_html(&html, &url(), Format::Markdown).expect_err("over budget");
        assert!(matches!(error, Error::Limit(_)), "{error}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    #[test]
    fn links_are_absolute_normalised_and_unique() {
        let html = r##"<html><body><a href="/a?utm_source=x">A</a><a href="/a">A again</a>
            <a href="mailto:x@y">mail</a><a href="#top">top</a><a href="other#frag">B</a></body></html>"##;
        let extracted = extract_html(html, &url(), Format::Text).expect("extracts");
        assert_eq!(
            extracted.links,
            vec!["https://example.com/a", "https://example.com/news/other"]
        );
    }

    #[test]
    fn meta_is_read_from_the_head() {
        let html = r#"<html lang="de"><head><title>T</title>
            <meta name="description" content=" A  page ">
            <link rel="canonical" href="/canon">
            <meta property="article:published_time" content="2024-05-01">
            <meta name="author" content="Ann Writer"></head><body><p>x</p></body></html>"#;
        let extracted = extract_html(html, &url(), Format::Markdown).expect("extracts");
        assert_eq!(extracted.meta.description.as_deref(), Some("A page"));
        assert_eq!(extracted.meta.lang.as_deref(), Some("de"));
        assert_eq!(
            extracted.meta.canonical.as_deref(),
            Some("https://example.com/canon")
        );
        assert_eq!(extracted.meta.published.as_deref(), Some("2024-05-01"));
        assert_eq!(extracted.meta.author.as_deref(), Some("Ann Writer"));
    }
}
