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
use super::code_lang;
use super::normalize::normalize_url;
use super::page_type::{self, Signals};
use super::prune;
use crate::job::{Extractor, Format, Meta, PageType};

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
/// over the parsing budget ([`budget::admit`]) is [`Error::Limit`], found before any tree is
/// built.
pub fn extract_html(html: &str, page_url: &Url, format: Format) -> Result<Extracted, Error> {
    budget::admit(html)?;
    let document = Document::from(html);
    let mut warnings: Vec<String> = Vec::new();
    let flattened = flatten_deep_nesting(&document, MAX_DEPTH);
    if flattened > 0 {
        warnings.push(format!("nesting deeper than {MAX_DEPTH} flattened to text"));
    }
    let links = collect_links(&document, page_url);
    let (mut meta, signals) = read_head(&document, page_url);
    let page_type = page_type::classify(&signals, page_url);
    meta.page_type = Some(page_type);
    let visible = prune::prune(&document);
    if format == Format::Markdown {
        code_lang::label(&visible.pres);
    }
    let noscript_used = uses_noscript(&visible);
    let body_chars = if noscript_used {
        // The page is in its <noscript> elements: they become part of the body (pruned like
        // the rest of it), and the fallback below keeps them too.
        visible.noscript.reveal();
        prune::prune(&document).body
    } else {
        visible.body
    };
    // rs-trafilatura parses the page itself: when the page was in its <noscript>, it reads
    // the page as revealed.
    let source: std::borrow::Cow<'_, str> = if noscript_used {
        document.html().to_string().into()
    } else {
        html.into()
    };
    if page_type != PageType::Article
        && let Some(found) = by_page_type(&source, page_url, format, Some(page_type))
    {
        return Ok(found.into_extracted(format, links, meta, warnings, body_chars));
    }
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
            let text = match format {
                Format::Html => article.content.to_string(),
                Format::Markdown | Format::Text => prune::clean_text(&article.text_content),
            };
            // Readability keeping a small part of the page's text is the mark of a page that
            // is not an article after all (a listing, a category, a service page): then
            // rs-trafilatura, with its own page-type classifier, reads it instead.
            let kept = prune::visible_len(&text);
            if !signals.declares_article()
                && body_chars >= AUTO_MIN_BODY_CHARS
                && (kept as f64) < LOW_SHARE * body_chars as f64
                && let Some(found) = by_page_type(&source, page_url, format, None)
                && prune::visible_len(&found.text) > kept
            {
                return Ok(found.into_extracted(format, links, meta, warnings, body_chars));
            }
            meta.author = meta.author.or(article.byline.clone());
            meta.published = meta.published.or(article.published_time.clone());
            meta.lang = meta.lang.or(article.lang.clone());
            if meta.description.is_none() {
                meta.description = article.excerpt.clone();
            }
            let title = Some(article.title.to_string()).filter(|title| !title.trim().is_empty());
            (title, text, Extractor::Readability)
        }
        _ => {
            if body_chars >= AUTO_MIN_BODY_CHARS
                && let Some(found) = by_page_type(&source, page_url, format, None)
            {
                return Ok(found.into_extracted(format, links, meta, warnings, body_chars));
            }
            warnings.push("no article found: the whole page body was converted".to_owned());
            let (title, text) = convert_whole_body(html, format, noscript_used);
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
    budget::admit(html)?;
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

/// Fewest visible characters the page-type extractor must find for its answer to be used
/// (below it, Readability's answer or the whole body is).
const BY_PAGE_TYPE_MIN_CHARS: usize = 50;

/// Readability's text under this share of the body's visible text sends an "article" to
/// rs-trafilatura. Measured on the WCXB dev split: articles Readability reads keep a median
/// 74 % of their body (a quarter under 59 %), service pages 44 %, listings 37 %, collections
/// 29 %, products 23 %; 0.2–0.6 all gain (0.842–0.847 F1 overall), 0.3 re-reads 10 % of the
/// pages. Not when the page says it is an article (`og:type` `article`): on the Zyte news
/// set Readability was right on nearly all of the 17 such pages it kept under 30 % of, and
/// rerouting them cost 0.011 F1; on the WCXB dev split leaving them to Readability costs
/// 0.004.
const LOW_SHARE: f64 = 0.3;

/// rs-trafilatura with its own classifier is asked about pages with at least this much
/// visible text only: on a page reduced to a few elements (Firecrawl's `includeTags`) or a
/// near-empty one, it answers with the title, where Readability or the whole body is right.
/// When it is asked because Readability kept little, its answer must also be longer than
/// Readability's (measured on the WCXB dev split: both guards together cost under 0.002 F1).
const AUTO_MIN_BODY_CHARS: usize = 500;

/// What the page-type extractor found.
struct ByPageType {
    title: Option<String>,
    text: String,
    page_type: PageType,
    author: Option<String>,
    lang: Option<String>,
    description: Option<String>,
}

impl ByPageType {
    /// The extraction result, the page's own metadata first.
    fn into_extracted(
        self,
        format: Format,
        links: Vec<String>,
        mut meta: Meta,
        warnings: Vec<String>,
        body_chars: usize,
    ) -> Extracted {
        meta.author = meta.author.or(self.author);
        meta.lang = meta.lang.or(self.lang);
        if meta.description.is_none() {
            meta.description = self.description;
        }
        meta.page_type = Some(self.page_type);
        let text = normalize_text(&self.text);
        Extracted {
            title: self
                .title
                .map(|title| collapse_whitespace(&title))
                .filter(|title| !title.is_empty()),
            outline: match format {
                Format::Markdown => markdown_outline(&text),
                Format::Text | Format::Html => Vec::new(),
            },
            text,
            extractor: Extractor::Trafilatura,
            warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
            links,
            meta,
            body_chars,
        }
    }
}

/// The main content of a page that is not an article, by rs-trafilatura's profile for its
/// type (`None`: rs-trafilatura's own classifier picks it): every post of a thread, a
/// product's description and specifications, a listing's items, a service page's sections.
/// Measured on the WCXB dev split, it beats Readability on every type but articles (where
/// the two tie and Readability is several times faster). `None` for HTML output (it has no
/// cleaned HTML for every page), and when it finds (almost) nothing.
fn by_page_type(
    html: &str,
    page_url: &Url,
    format: Format,
    page_type: Option<PageType>,
) -> Option<ByPageType> {
    if format == Format::Html {
        return None;
    }
    let profile = page_type.map(page_type::profile);
    let options = rs_trafilatura::Options {
        url: Some(page_url.to_string()),
        page_type: profile,
        output_markdown: format == Format::Markdown,
        ..rs_trafilatura::Options::default()
    };
    let found = rs_trafilatura::extract_with_options(html, &options).ok()?;
    let text = match format {
        Format::Markdown => found.content_markdown.unwrap_or(found.content_text),
        Format::Text | Format::Html => found.content_text,
    };
    if prune::visible_len(&text) < BY_PAGE_TYPE_MIN_CHARS {
        return None;
    }
    let classified = found
        .metadata
        .page_type
        .as_deref()
        .and_then(PageType::from_name);
    Some(ByPageType {
        title: found.metadata.title,
        text,
        page_type: page_type.or(classified).unwrap_or(PageType::Article),
        author: found.metadata.author,
        lang: found.metadata.language,
        description: found.metadata.description,
    })
}

/// `<noscript>` content holding at least this many visible characters, and more than the rest
/// of the body, is the page: a shell that needs JavaScript outside, the page inside.
/// Discourse forums measured on the WCXB dev split: at most 178 characters outside, 1,800 or
/// more inside; articles and listings that use `<noscript>` for tracking pixels or image
/// fallbacks have thousands of characters outside and a few inside.
const NOSCRIPT_MIN_CHARS: usize = 200;

/// Whether the page's `<noscript>` content is its main content (see [`NOSCRIPT_MIN_CHARS`]).
fn uses_noscript(visible: &prune::Visible<'_>) -> bool {
    visible.noscript.chars >= NOSCRIPT_MIN_CHARS && visible.noscript.chars > visible.body
}

/// Converts the whole body (minus scripts, styles, navigation chrome) when Readability finds
/// no article, `<noscript>` content kept when it is the page. Parses again: Readability
/// consumed the first document.
fn convert_whole_body(html: &str, format: Format, keep_noscript: bool) -> (Option<String>, String) {
    let remove = if keep_noscript {
        "script, style, template, svg, iframe, nav, form, button"
    } else {
        "script, style, noscript, template, svg, iframe, nav, form, button"
    };
    convert_body(html, format, remove)
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

/// Reads description, language, canonical URL, publication date and author, and the page-type
/// signals (JSON-LD, `og:type`). One pass over the `<meta>`, `<link>` and JSON-LD `<script>`
/// elements (each `select` walks the whole tree).
fn read_head(document: &Document, page_url: &Url) -> (Meta, Signals) {
    let mut found: Vec<(String, String)> = Vec::new();
    let mut canonical = None;
    let mut signals = Signals::default();
    for node in document
        .select(r#"meta[content], link[rel][href], script[type="application/ld+json"]"#)
        .nodes()
    {
        if node.has_name("script") {
            signals.add_json_ld(&node.text());
            continue;
        }
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
    signals.og_type = pick(&["og:type"]).map(|og| og.to_ascii_lowercase());
    let meta = Meta {
        description: pick(DESCRIPTION_KEYS),
        lang,
        canonical,
        published: pick(PUBLISHED_KEYS),
        author: pick(AUTHOR_KEYS),
        page_type: None,
    };
    (meta, signals)
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

    /// A page served as a JavaScript shell with the posts inside `<noscript>`, as Discourse
    /// serves its threads (the markup is trawl's own).
    fn shell_with_noscript_posts(posts: usize) -> String {
        let post = "<div class=post><span class=author>ann</span><p>The migration guide says \
                    to bump the schema version before the first start, and it worked for me \
                    on the second try once the cache was cleared.</p></div>";
        format!(
            "<html><head><title>Upgrade help</title><noscript><link rel=stylesheet \
             href=/ns.css></noscript></head><body><div id=app>Loading</div>\
             <noscript data-path=/t/upgrade-help/42><h1>Upgrade help</h1>{}</noscript>\
             <script>start()</script></body></html>",
            post.repeat(posts)
        )
    }

    #[test]
    fn noscript_content_is_the_page_when_the_body_is_a_shell() {
        let html = shell_with_noscript_posts(6);
        for format in [Format::Markdown, Format::Text] {
            let extracted = extract_html(&html, &url(), format).expect("extracts");
            assert!(
                extracted.text.contains("bump the schema version"),
                "{format:?}: {}",
                extracted.text
            );
            assert!(extracted.body_chars > 600, "{}", extracted.body_chars);
        }
    }

    #[test]
    fn noscript_content_is_ignored_beside_a_real_body() {
        let article = "<p>The council approved the new library budget on Tuesday after a long \
                       debate about opening hours, staffing and the roof repairs.</p>"
            .repeat(12);
        let html = format!(
            "<html><body><article><h1>Budget</h1>{article}</article><noscript><p>Please \
             enable JavaScript to see the comments and the related stories of this site, \
             which need it for the widgets that load them from our partners.</p><img \
             src=/pixel.gif></noscript></body></html>"
        );
        let extracted = extract_html(&html, &url(), Format::Text).expect("extracts");
        assert!(extracted.text.contains("library budget"));
        assert!(
            !extracted.text.contains("enable JavaScript"),
            "{}",
            extracted.text
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
