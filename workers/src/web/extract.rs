//! HTML in, main content out: the parsing budget (`web::budget`: too many or too deeply nested
//! elements are refused before any tree is built), the bodies of scripts and style sheets cut
//! (`web::scripts`), one parse (dom_query), a nesting guard,
//! metadata and links read
//! from the whole page, boilerplate pruning (`web::prune`), Readability (dom_smoothie) to find
//! the article, then markdown, text or HTML, normalised, with its heading outline. Pages of
//! another type (`web::page_type`), and articles whose Readability answer looks wrong (a small
//! share of the page, the whole page from its skip link on, or one section of an undated page
//! made of several), are read by rs-trafilatura's profiles (its article profile when a type's
//! keeps almost nothing); a product page by its named description block when that holds half
//! or more of the answer, followed by its questions-and-answers blocks and `<details>`
//! disclosures that say something new; a thread by its posts (`web::thread`), each with its
//! author and date, when their microdata names them. The page's JSON-LD `articleBody`
//! replaces the answer when it is longer and tells the same story. When no article is found
//! the whole body is converted and the result says so.
//!
//! Not here: decoding bytes (`web::charset`), judging block pages (`web::blockpage`), or time
//! limits (the caller runs this on a blocking thread under a timeout).

use dom_query::{Document, NodeId, NodeRef};
use dom_smoothie::{Readability, TextMode};
use serde::{Deserialize, Serialize};
use url::Url;

use super::blocks::{Said, block_as, runs_held};
use super::budget;
use super::code_lang;
use super::normalize::normalize_url;
use super::noscript;
use super::page_type::{self, Signals};
use super::prune;
use super::scripts;
use super::thread;
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
    /// The page's visible text before extraction, one line per block (`web::lines`), joined
    /// by newlines: read when asked ([`extract_html_reading_lines`]).
    pub lines: Option<String>,
}

impl Extracted {
    fn with_lines(mut self, lines: Option<String>) -> Extracted {
        self.lines = lines;
        self
    }

    /// No text when the answer says a few words again and again ([`says_little_again`]): a
    /// page whose content comes from its scripts, of which the answer read only the header
    /// the page repeats (and which the block-page check then reports as empty).
    fn without_shell_words(mut self, format: Format) -> Extracted {
        if says_little_again(&self.text, format) {
            self.text.clear();
            self.outline.clear();
        }
        self
    }

    /// The longest of the page's JSON-LD `articleBody` strings that is longer than the text and
    /// tells the same story ([`prefers_article_body`]) in its place; not for HTML output.
    fn with_article_body(mut self, bodies: &[ArticleBody], format: Format) -> Extracted {
        if bodies.is_empty() || format == Format::Html {
            return self;
        }
        let answer: std::borrow::Cow<'_, str> = match format {
            Format::Markdown => prune::markdown_plain(&self.text).into(),
            Format::Text | Format::Html => self.text.as_str().into(),
        };
        // A string has at least as many bytes as visible characters once read: one too short
        // for the factor is not parsed at all (most news pages' `articleBody` is their
        // article, as long as the answer or shorter).
        let shortest_worth_reading = ARTICLE_BODY_FACTOR * prune::visible_len(&answer) as f64;
        let mut bodies: Vec<&ArticleBody> = bodies.iter().collect();
        bodies.sort_by_key(|body| std::cmp::Reverse(body.body.len()));
        let Some(body) = bodies
            .into_iter()
            .take_while(|body| body.body.len() as f64 >= shortest_worth_reading)
            .find_map(|body| {
                let text = article_body_text(&body.body)?;
                prefers_article_body(&text, &answer, body.own).then_some(text)
            })
        else {
            return self;
        };
        self.text = normalize_text(&body);
        self.extractor = Extractor::JsonLd;
        self.outline = Vec::new();
        // The whole body is no longer the answer.
        self.warning = self.warning.and_then(|warning| {
            let rest: Vec<&str> = warning
                .split("; ")
                .filter(|part| *part != WHOLE_BODY_WARNING)
                .collect();
            (!rest.is_empty()).then(|| rest.join("; "))
        });
        self
    }
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
    extract(html, page_url, format, false)
}

/// [`extract_html`], also reading the page's visible lines ([`Extracted::lines`]) from the
/// tree it builds anyway: for a page going to the archive, whose page document holds the
/// lines extraction left out (`archive::page_text`).
pub fn extract_html_reading_lines(
    html: &str,
    page_url: &Url,
    format: Format,
) -> Result<Extracted, Error> {
    extract(html, page_url, format, true)
}

fn extract(
    html: &str,
    page_url: &Url,
    format: Format,
    read_lines: bool,
) -> Result<Extracted, Error> {
    budget::admit(html)?;
    // A raw-text element left open in <noscript> would take the rest of the page; the bodies
    // of scripts and style sheets are never read (`web::scripts`).
    let closed = noscript::close_raw_text(html);
    let cut = scripts::cut_bodies(&closed);
    let html: &str = &cut;
    let document = Document::from(html);
    let mut warnings: Vec<String> = Vec::new();
    let flattened = flatten_deep_nesting(&document, MAX_DEPTH);
    if flattened > 0 {
        warnings.push(format!("nesting deeper than {MAX_DEPTH} flattened to text"));
    }
    let links = collect_links(&document, page_url);
    let (mut meta, signals, article_bodies) = read_head(&document, page_url);
    let page_type = page_type::classify(&signals, page_url);
    meta.page_type = Some(page_type);
    let title = document_title(&document);
    let mut visible = if read_lines {
        prune::prune_reading_lines(&document)
    } else {
        prune::prune(&document)
    };
    let lines = visible.lines.take();
    // Every answer leaves with the page's lines, gives way to its JSON-LD `articleBody` when
    // that is longer and tells the same story, and is no answer when it says a few lines
    // again and again.
    let finish = |extracted: Extracted| {
        extracted
            .with_lines(lines)
            .with_article_body(&article_bodies, format)
            .without_shell_words(format)
    };
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
    // the page as revealed; otherwise whole, scripts and all (its page type classifier counts
    // the body's text with the scripts' in it: given the cut page, it typed 8 of the WCXB dev
    // split's pages otherwise).
    let source: std::borrow::Cow<'_, str> = if noscript_used {
        document.html().to_string().into()
    } else {
        (*closed).into()
    };
    if page_type != PageType::Article
        && let Some(mut found) =
            by_page_type(&source, page_url, format, Some(page_type), title.as_deref())
    {
        // The type's profile kept almost nothing of a big page (its selector matched a
        // header, a teaser, one widget): rs-trafilatura's article profile reads it, and its
        // answer is used as when Readability's keeps almost nothing (`Doubt`). Measured on the
        // WCXB dev split: 8 pages change, 6 better (a link aggregator's thread, a news front
        // page, two category pages: 0.00-0.06 -> 0.72-0.96), 2 worse (a product page and a
        // thread, 0.47 and 0.62 -> 0.07 and 0.32); overall F1 0.8552 -> 0.8562.
        if keeps_almost_nothing(found.plain_chars, body_chars)
            && let Some(article) = by_page_type(
                &source,
                page_url,
                format,
                Some(PageType::Article),
                title.as_deref(),
            )
            && article.plain_chars >= ALMOST_NOTHING_FACTOR * found.plain_chars
        {
            found = ByPageType {
                page_type,
                ..article
            };
        }
        match page_type {
            // A thread: its posts, each with its author and date, after what the answer
            // holds before them (`web::thread`).
            PageType::Forum => {
                let base = document_base(&document, page_url);
                let posts = thread::posts(&document, format, &base);
                if !posts.is_empty() {
                    found.text = thread::with_posts(&found.text, &posts, format);
                }
            }
            // A product page: its named description block instead of the answer when it
            // fits, then its questions and disclosures that say something new.
            PageType::Product => {
                let base = document_base(&document, page_url);
                if let Some(block) = product_block(&document, format, found.plain_chars, &base) {
                    found.text = block;
                }
                let answer = match format {
                    Format::Markdown => prune::markdown_plain(&found.text),
                    Format::Text | Format::Html => found.text.clone(),
                };
                for faq in product_faqs(&document, format, &answer, &base) {
                    found.text.push_str("\n\n");
                    found.text.push_str(&faq);
                }
            }
            _ => {}
        }
        return Ok(finish(
            found.into_extracted(format, links, meta, warnings, body_chars),
        ));
    }
    let mut readability = Readability::with_document(
        document,
        Some(page_url.as_str()),
        Some(readability_config(format)),
    )
    .map_err(|_| Error::BadUrl)?;
    let article = readability.parse();
    let (title, text, extractor) = match article {
        Ok(article) if !article.text_content.trim().is_empty() => {
            let text = match format {
                Format::Html => article.content.to_string(),
                Format::Markdown | Format::Text => prune::clean_text(&article.text_content),
            };
            // Readability's answer may be a wrong pick (a small share of the page, or the whole
            // page from its skip link on; see `Doubt`): rs-trafilatura, with its own page-type
            // classifier, reads the page, and its answer is used when the doubt says so.
            // Markdown is judged on what a reader sees of it, so that text and markdown output
            // take the same extractor.
            let plain = match format {
                Format::Markdown => prune::markdown_plain(&text).into(),
                Format::Text | Format::Html => std::borrow::Cow::Borrowed(text.as_str()),
            };
            // A page that names no author and no date anywhere (head, JSON-LD, byline) is
            // seldom an article: a service or landing page made of sections side by side, of
            // which Readability keeps the best one.
            let undated = meta.author.is_none()
                && meta.published.is_none()
                && article.byline.is_none()
                && article.published_time.is_none();
            let doubt = Doubt::of(&plain, body_chars, signals.declares_article(), undated);
            if doubt.any()
                && let Some(found) = by_page_type(&source, page_url, format, None, title.as_deref())
                && (doubt.prefers(found.plain_chars)
                    || (doubt.one_section && holds_more(&found.plain, &plain)))
            {
                return Ok(finish(
                    found.into_extracted(format, links, meta, warnings, body_chars),
                ));
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
                && let Some(found) = by_page_type(&source, page_url, format, None, title.as_deref())
            {
                return Ok(finish(
                    found.into_extracted(format, links, meta, warnings, body_chars),
                ));
            }
            warnings.push(WHOLE_BODY_WARNING.to_owned());
            let text = convert_whole_body(html, format, noscript_used);
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
    Ok(finish(Extracted {
        title: title.map(|title| collapse_whitespace(&title)),
        text,
        extractor,
        warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
        links,
        meta,
        outline,
        body_chars,
        lines: None,
    }))
}

/// Readability's (dom_smoothie's) settings for an answer in `format`: the extraction's, and the
/// extraction benchmark's when it times Readability alone.
pub fn readability_config(format: Format) -> dom_smoothie::Config {
    let text_mode = match format {
        Format::Markdown => TextMode::Markdown,
        Format::Text | Format::Html => TextMode::Formatted,
    };
    dom_smoothie::Config {
        text_mode,
        // Link density is recomputed less often (dom_smoothie's documented range is 5-10):
        // measured on the labelled set, F1 0.968 -> 0.967 (inside its ±0.004) for about 15 %
        // less extraction time.
        min_score_to_adjust: 10.0,
        ..dom_smoothie::Config::default()
    }
}

/// The whole page's body as `format` (markdown, text or HTML): everything a reader sees,
/// navigation, headers and footers included, without scripts, styles, SVG, frames and
/// templates. What Firecrawl's `onlyMainContent: false` asks for; guarded by the same
/// parsing budget as [`extract_html`].
pub fn extract_whole_page(html: &str, format: Format) -> Result<String, Error> {
    budget::admit(html)?;
    let text = convert_body(
        &noscript::close_raw_text(html),
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

/// Readability's text under this share of the body's visible text is a wrong pick even on a
/// page that says it is an article, when rs-trafilatura finds at least
/// [`ALMOST_NOTHING_FACTOR`] times as much. Measured on the WCXB dev split: 13 pages (blog
/// posts and guides whose article Readability took from a teaser, a byline box or a
/// sidebar), F1 +0.0045 overall (articles +0.008); on the Zyte news set no page is under it.
/// The same gain holds from 0.1 to 0.3 with a factor of 5, and from 2 to 5 at 0.1.
const ALMOST_NOTHING_SHARE: f64 = 0.1;

/// Whether an answer of `kept` visible characters is under [`ALMOST_NOTHING_SHARE`] of a body
/// of `body_chars` ([`AUTO_MIN_BODY_CHARS`] or more): Readability's (`Doubt`), or a type
/// profile's.
fn keeps_almost_nothing(kept: usize, body_chars: usize) -> bool {
    body_chars >= AUTO_MIN_BODY_CHARS && (kept as f64 / body_chars as f64) < ALMOST_NOTHING_SHARE
}

/// Share of Readability's answer that rs-trafilatura's must hold to replace it when
/// Readability took the whole page from its skip link on ([`Doubt::prefers`]): less is one
/// block of the page (a teaser, a form's text), not its content.
const WHOLE_PAGE_MIN_SHARE: f64 = 0.1;

/// How many times longer than Readability's text rs-trafilatura's must be when Readability
/// kept almost nothing ([`ALMOST_NOTHING_SHARE`]).
const ALMOST_NOTHING_FACTOR: usize = 3;

/// rs-trafilatura with its own classifier is asked about pages with at least this much
/// visible text only: on a page reduced to a few elements (Firecrawl's `includeTags`) or a
/// near-empty one, it answers with the title, where Readability or the whole body is right.
/// When it is asked because Readability kept little, its answer must also be longer than
/// Readability's (measured on the WCXB dev split: both guards together cost under 0.002 F1).
const AUTO_MIN_BODY_CHARS: usize = 500;

/// How a skip link ("Skip to main content", the first link of a page's header, there for
/// keyboard users) starts, lowercased, in the languages it is most often written in. Not
/// "skip to" alone: a recipe post's "Skip to recipe" button is part of the article.
const SKIP_LINK_STARTS: &[&str] = &[
    "skip to main",
    "skip to content",
    "skip to the content",
    "skip to navigation",
    "skip to primary",
    "skip to footer",
    "skip navigation",
    "jump to content",
    "jump to main content",
    "zum inhalt springen",
    "direkt zum inhalt",
    "aller au contenu",
    "passer au contenu",
    "saltar al contenido",
    "ir al contenido",
    "vai al contenuto",
    "naar de inhoud",
];

/// Lines of the extracted text searched for a skip link, from its start.
const SKIP_LINK_LINES: usize = 8;

/// Whether one of the first lines of `text` is a skip link: a short line (up to 80
/// characters; [`Doubt::of`] is given markdown as [`prune::markdown_plain`] reads it) starting like
/// one once leading list and link marks are set aside. Measured on the WCXB dev split: 11
/// pages, all of them category or listing pages whose article Readability took from the page's
/// outermost container (a menu of links first, the products after); rs-trafilatura read 10 of
/// them better and none worse (collection F1 +0.027).
fn opens_with_skip_link(text: &str) -> bool {
    text.lines()
        .map(|line| {
            line.trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '[' | '*' | '-'))
        })
        .filter(|line| !line.is_empty())
        .take(SKIP_LINK_LINES)
        .any(|line| {
            line.chars().count() <= 80 && {
                let line = line.to_lowercase();
                SKIP_LINK_STARTS.iter().any(|start| line.starts_with(start))
            }
        })
}

/// Why Readability's answer is checked against rs-trafilatura's (with its own classifier).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Doubt {
    /// Visible characters of Readability's text.
    kept: usize,
    /// It opens with the page's skip link: the page taken whole (on a page of
    /// [`AUTO_MIN_BODY_CHARS`] or more).
    whole_page: bool,
    /// Under [`LOW_SHARE`] of the body, on a page that does not say it is an article.
    little_kept: bool,
    /// Under [`ALMOST_NOTHING_SHARE`] of the body (of [`AUTO_MIN_BODY_CHARS`] or more).
    almost_nothing: bool,
    /// Under [`ONE_SECTION_SHARE`] of the body, on a page with no author and no date: one of
    /// its sections, maybe.
    one_section: bool,
}

impl Doubt {
    /// The doubts about Readability's `text` on a page of `body_chars` visible characters.
    fn of(text: &str, body_chars: usize, declares_article: bool, undated: bool) -> Doubt {
        let kept = prune::visible_len(text);
        let share = kept as f64 / body_chars.max(1) as f64;
        let big_enough = body_chars >= AUTO_MIN_BODY_CHARS;
        Doubt {
            kept,
            whole_page: big_enough && opens_with_skip_link(text),
            little_kept: big_enough && !declares_article && share < LOW_SHARE,
            almost_nothing: keeps_almost_nothing(kept, body_chars),
            one_section: big_enough && undated && share < ONE_SECTION_SHARE,
        }
    }

    /// Whether rs-trafilatura is to be asked at all.
    fn any(&self) -> bool {
        self.whole_page || self.little_kept || self.almost_nothing || self.one_section
    }

    /// Whether rs-trafilatura's answer, `found_chars` visible characters, replaces
    /// Readability's. When Readability took the whole page, rs-trafilatura's answer must still
    /// hold [`WHOLE_PAGE_MIN_SHARE`] of it or more. Measured on the WCXB dev
    /// split: the 16 pages whose answer opens with the skip link and that rs-trafilatura
    /// answers, 15 category and service pages whose answer keeps 20-146 % of Readability's (the
    /// menus gone), and one "best of" guide where it kept 4 % (868 of 22,900 characters; F1 0.06
    /// against Readability's 0.79).
    fn prefers(&self, found_chars: usize) -> bool {
        // Exact for any realistic page size; only used for a ratio.
        #[allow(clippy::cast_precision_loss)]
        let holds_a_part = found_chars as f64 >= WHOLE_PAGE_MIN_SHARE * self.kept as f64;
        (self.whole_page && holds_a_part)
            || (self.little_kept && found_chars > self.kept)
            || (self.almost_nothing && found_chars >= ALMOST_NOTHING_FACTOR * self.kept)
    }
}

/// Readability's text under this share of the body's visible text, on a page with no author
/// and no date, sends it to rs-trafilatura, whose answer is used when it holds Readability's
/// and more ([`holds_more`]). Measured on the WCXB dev split, of the 43 pages where the longer
/// answer would be used whatever the share, 37 keep under half of their body (the gain, F1
/// +4.7 summed over pages, is all theirs); the pages Readability reads whole, most undated
/// articles, are not read twice (109 of the 314 undated pages are asked, not all of them).
const ONE_SECTION_SHARE: f64 = 0.5;

/// Shortest and longest rs-trafilatura's answer may be, in times Readability's, to replace it
/// on a page with no author and no date ([`holds_more`]).
const MORE_SECTIONS_FACTOR: (f64, f64) = (1.2, 5.0);

/// Share of Readability's four-word runs rs-trafilatura's answer must hold to replace it on
/// a page with no author and no date ([`holds_more`]).
const MORE_SECTIONS_HELD: f64 = 0.8;

/// Whether `found` (rs-trafilatura's answer, plain text) holds Readability's `kept` and more
/// sections beside it: [`MORE_SECTIONS_HELD`] of `kept`'s four-word runs are in it, and it is
/// between 1.2 and 5 times as long ([`MORE_SECTIONS_FACTOR`]). On a page with no author and no
/// date, Readability keeps the best of several sections side by side (a service page's
/// offers, a course page's modules), where rs-trafilatura keeps the container of all of
/// them. Measured on the WCXB dev split (924 pages Readability reads, 314 of them with no
/// author and no date, 109 of those under [`ONE_SECTION_SHARE`]): 37 pages change, 26 better
/// (service pages 0.44-0.66 -> 0.94-1.00), 11 worse (articles with comments or a "read next"
/// list after them, 0.99 -> 0.84), service F1 0.800 -> 0.816, overall 0.8528 -> 0.8543.
/// Shorter than 1.2 times is the same section read by both; longer than 5, the page's whole
/// body.
fn holds_more(found: &str, kept: &str) -> bool {
    let (found_chars, kept_chars) = (prune::visible_len(found), prune::visible_len(kept));
    let (shortest, longest) = MORE_SECTIONS_FACTOR;
    let factor = found_chars as f64 / kept_chars.max(1) as f64;
    if !(shortest..=longest).contains(&factor) {
        return false;
    }
    let (held, runs) = runs_held(kept, found);
    runs > 0 && held as f64 >= MORE_SECTIONS_HELD * runs as f64
}

/// Class/id words that name a product's own description or specifications block
/// (`product-description`, `#details`, `specs-table`).
const PRODUCT_BLOCK_WORDS: &[&str] = &[
    "description",
    "details",
    "overview",
    "features",
    "specifications",
    "specs",
];

/// Class/id words of what holds other products or page chrome: a description block inside one
/// (a related product's card, a quick-view dialog) is not this product's.
const NOT_THE_PRODUCT_WORDS: &[&str] = &[
    "related",
    "recommendations",
    "upsell",
    "carousel",
    "swiper",
    "review",
    "reviews",
    "modal",
    "popup",
    "nav",
    "header",
    "footer",
];

/// Fewest visible characters of a product block worth reading.
const PRODUCT_BLOCK_MIN_CHARS: usize = 200;

/// A product block replaces rs-trafilatura's answer when it holds at least this share of it
/// (and no more than all of it). Measured on the WCXB dev split's product pages: 13 pages
/// change, 9 for the better (precision 0.61-0.67 -> 0.83-1.00, where rs-trafilatura's
/// container took shipping terms, variant lists or a newsletter form too), 4 slightly worse
/// (recall lost where the truth also holds text beside the block); product F1 0.626 -> 0.640
/// (with camelCase class names and scripts left out of the counts). 0.3 gives 0.634, 0.6
/// 0.637, 0.7 0.631 (measured before those two).
const PRODUCT_BLOCK_MIN_SHARE: f64 = 0.5;

/// The largest block of a product page that its markup names as the product's description or
/// specifications ([`PRODUCT_BLOCK_WORDS`] as a whole class/id word), not inside navigation,
/// a header, a footer, a dialog or another product's card ([`NOT_THE_PRODUCT_WORDS`]), when
/// it holds between [`PRODUCT_BLOCK_MIN_SHARE`] and all of rs-trafilatura's `found_chars`
/// visible characters, as `format` (its scripts, styles and `<noscript>`s left out, its
/// links made absolute against `base`, the document's base URL: [`document_base`]).
/// rs-trafilatura's product profile takes the first of its selectors that matches, often a
/// wrapper around the description and much else. `None` for HTML output (rs-trafilatura is
/// not asked for it).
///
/// One pass over the body: each element's class and id are read once, text is counted
/// bottom-up, so a page of nested or repeated matches costs no more than its size.
fn product_block(
    document: &Document,
    format: Format,
    found_chars: usize,
    base: &Url,
) -> Option<String> {
    /// What the text under an element is, for the block's counts.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum Inside {
        /// Counted; blocks here may be the product's.
        Open,
        /// Counted; blocks here belong to navigation or another product.
        Elsewhere,
        /// Scripts, styles, `<noscript>`, templates: not counted.
        Hidden,
    }
    let body = document.select("body").nodes().first().copied()?;
    // (element, parent index, visible characters below it, whether it is a candidate)
    let mut items: Vec<(NodeRef<'_>, Option<usize>, usize, bool)> = Vec::new();
    let mut open: Vec<(NodeId, usize, Inside)> = Vec::new();
    for node in body.descendants_it() {
        let parent_id = node.parent().map(|parent| parent.id);
        while open.last().is_some_and(|&(id, _, _)| Some(id) != parent_id) {
            open.pop();
        }
        let (parent, inside) = open
            .last()
            .map_or((None, Inside::Open), |&(_, index, inside)| {
                (Some(index), inside)
            });
        if node.is_text() {
            if inside != Inside::Hidden
                && let Some(parent) = parent
            {
                items[parent].2 += prune::visible_len(&node.text());
            }
            continue;
        }
        if !node.is_element() {
            continue;
        }
        let hidden = ["script", "style", "noscript", "template"]
            .iter()
            .any(|name| node.has_name(name));
        let named = |words: &[&str]| {
            ["class", "id"].iter().any(|attribute| {
                node.attr(attribute)
                    .is_some_and(|value| prune::has_word(&value, words))
            })
        };
        let inside = match inside {
            Inside::Hidden => Inside::Hidden,
            _ if hidden => Inside::Hidden,
            Inside::Elsewhere => Inside::Elsewhere,
            Inside::Open
                if ["nav", "header", "footer", "dialog"]
                    .iter()
                    .any(|name| node.has_name(name))
                    || named(NOT_THE_PRODUCT_WORDS) =>
            {
                Inside::Elsewhere
            }
            Inside::Open => Inside::Open,
        };
        let candidate = inside == Inside::Open && named(PRODUCT_BLOCK_WORDS);
        open.push((node.id, items.len(), inside));
        items.push((node, parent, 0, candidate));
    }
    for index in (0..items.len()).rev() {
        if let Some(parent) = items[index].1 {
            items[parent].2 += items[index].2;
        }
    }
    // The largest named block, then whether it fits: when it is longer than rs-trafilatura's
    // answer (a wrapper around the whole product), a smaller named block inside it is most
    // often one section of the description (measured on the WCXB dev split: taking the
    // largest that fits instead cost product 0.640 -> 0.638, three pages 0.2-0.36 worse).
    let &(block, _, chars, _) = items
        .iter()
        .filter(|&&(_, _, chars, candidate)| candidate && chars >= PRODUCT_BLOCK_MIN_CHARS)
        .max_by_key(|&&(_, _, chars, _)| chars)?;
    if chars > found_chars || (chars as f64) < PRODUCT_BLOCK_MIN_SHARE * found_chars as f64 {
        return None;
    }
    block_as(block, format, base)
}

/// Class/id words of a product page's questions and answers block.
const FAQ_WORDS: &[&str] = &["faq", "faqs"];

/// Fewest words of a questions block, or of a `<details>` element, worth adding.
const FAQ_MIN_WORDS: usize = 20;

/// A block already said: more than this share of its runs of four words is in the answer.
const FAQ_HELD_SHARE: f64 = 0.5;

/// The blocks of a product page that rs-trafilatura's product profile leaves out and its
/// reader asks about: questions and answers (a class or id word `faq`) and the `<details>`
/// elements (disclosure widgets: materials, care, sizing of this product), as
/// `format`, in page order. Outermost blocks only, not inside navigation, a header, a footer
/// or an aside, at least [`FAQ_MIN_WORDS`] words, and not already said by the answer
/// (`answer`, plain text) or an earlier block ([`FAQ_HELD_SHARE`]). Measured on the WCXB dev
/// split: 29 pages change, 21 better (recall 0.09-0.88 -> 0.43-1.00 where a product's
/// questions or accordions hold much of its text), 8 worse (precision 0.05-0.90 -> 0.04-0.73:
/// shipping and returns questions the truth leaves out); product F1 0.651 -> 0.658, overall
/// 0.8583 -> 0.8603. On pages of every type the same blocks cost more than they give (0.8594,
/// measured on a prototype: an article's questions are Readability's to keep or not).
fn product_faqs(document: &Document, format: Format, answer: &str, base: &Url) -> Vec<String> {
    let Some(body) = document.select("body").nodes().first().copied() else {
        return Vec::new();
    };
    // The outermost candidates first: the blocks are changed (their scripts removed) only
    // after the walk.
    let mut candidates = Vec::new();
    // Elements below a block taken or left out are not looked at again: each is passed
    // over when its parent was (one look at the parent, not a walk up the tree).
    let mut passed: std::collections::HashSet<NodeId> = std::collections::HashSet::new();
    for node in body.descendants_it() {
        if !node.is_element() {
            continue;
        }
        if node
            .parent()
            .is_some_and(|parent| passed.contains(&parent.id))
        {
            passed.insert(node.id);
            continue;
        }
        if [
            "nav", "header", "footer", "aside", "script", "style", "template", "noscript",
        ]
        .iter()
        .any(|name| node.has_name(name))
        {
            passed.insert(node.id);
            continue;
        }
        let named = ["class", "id"].iter().any(|attribute| {
            node.attr(attribute)
                .is_some_and(|value| prune::has_word(&value, FAQ_WORDS))
        });
        if named || node.has_name("details") {
            passed.insert(node.id);
            candidates.push(node);
        }
    }
    let mut said = Said::of(answer);
    let mut blocks = Vec::new();
    for node in candidates {
        let Some(text) = block_as(node, Format::Text, base) else {
            continue;
        };
        let runs = Said::runs(&text);
        // A block of n words (four or more) has n - 3 runs.
        if runs.len() + 3 < FAQ_MIN_WORDS {
            continue;
        }
        let held = said.held(&runs);
        if held as f64 > FAQ_HELD_SHARE * runs.len() as f64 {
            continue;
        }
        let block = match format {
            Format::Text => text,
            Format::Markdown | Format::Html => match block_as(node, format, base) {
                Some(block) => block,
                None => continue,
            },
        };
        said.add(runs);
        blocks.push(block);
    }
    blocks
}

/// What the page-type extractor found.
struct ByPageType {
    title: Option<String>,
    text: String,
    /// The answer as plain text (`text` may be markdown).
    plain: String,
    /// Visible characters of [`ByPageType::plain`].
    plain_chars: usize,
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
        // The same interface-label lines as Readability's answers lose ("Advertisement",
        // "Share", "Add to cart", gallery counters, short update stamps): rs-trafilatura keeps
        // them when they sit inside the block it takes.
        let text = normalize_text(&prune::clean_text(&self.text));
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
            lines: None,
        }
    }
}

/// The main content of a page that is not an article, by rs-trafilatura's profile for its
/// type (`None`: rs-trafilatura's own classifier picks it): every post of a thread, a
/// product's description and specifications, a listing's items, a service page's sections.
/// Measured on the WCXB dev split, it beats Readability on every type but articles (where
/// the two tie and Readability is several times faster). `None` for HTML output (it has no
/// cleaned HTML for every page), and when it finds (almost) nothing: under
/// [`BY_PAGE_TYPE_MIN_CHARS`], or nothing but the page's `title` (what it answers for a page
/// whose body is empty until scripts run, [`repeats_only`]).
fn by_page_type(
    html: &str,
    page_url: &Url,
    format: Format,
    page_type: Option<PageType>,
    title: Option<&str>,
) -> Option<ByPageType> {
    if format == Format::Html {
        return None;
    }
    let profile = page_type.map(page_type::profile);
    let options = rs_trafilatura::Options {
        url: Some(page_url.to_string()),
        page_type: profile,
        // Its markdown (quick_html2md) glues the words of adjacent blocks together ("Seat20''
        // H", "TypeExecutive Chair"): trawl writes the answer's markup with the converter its
        // other answers go through (`convert_body`, dom_query's).
        output_markdown: false,
        ..rs_trafilatura::Options::default()
    };
    let found = rs_trafilatura::extract_with_options(html, &options).ok()?;
    if title.is_some_and(|title| repeats_only(&found.content_text, title)) {
        return None;
    }
    let plain_chars = prune::visible_len(&found.content_text);
    let markup = found.content_html.as_deref();
    let text = match format {
        Format::Markdown => markdown_or_plain(
            markup.map(|markup| convert_body(markup, Format::Markdown, ANSWER_HIDDEN)),
            found.content_text.clone(),
        ),
        Format::Text | Format::Html => with_paragraphs(markup, &found.content_text)
            .unwrap_or_else(|| found.content_text.clone()),
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
        plain: found.content_text,
        plain_chars,
        page_type: page_type.or(classified).unwrap_or(PageType::Article),
        author: found.metadata.author,
        lang: found.metadata.language,
        description: found.metadata.description,
    })
}

/// The text of the document's `<title>`, whitespace collapsed, read from `<head>`'s children
/// (no walk of the body), before Readability takes the document: what the page-type
/// extractor's answer is checked against ([`repeats_only`]), and the title of a page whose
/// whole body is converted. `None` when there is none or it is blank.
fn document_title(document: &Document) -> Option<String> {
    let html = document.root().element_children().into_iter().next()?;
    let head = html
        .element_children()
        .into_iter()
        .find(|child| child.has_name("head"))?;
    let title = head
        .element_children()
        .into_iter()
        .find(|child| child.has_name("title"))?;
    Some(collapse_whitespace(&title.text())).filter(|title| !title.is_empty())
}

/// Whether `text` says nothing but `title`, once or several times: under
/// [`BY_PAGE_TYPE_MIN_CHARS`] visible characters are left when every occurrence of it is set
/// aside (whitespace ignored on both sides). rs-trafilatura answers so for a page whose body
/// is empty until its scripts run (measured on the WCXB dev split: 8 pages, forum threads
/// served as a Discourse shell, a product and a listing rendered client-side; the title said
/// three times): the page holds no content, which the caller reports as such instead.
fn repeats_only(text: &str, title: &str) -> bool {
    let visible = |s: &str| s.split_whitespace().collect::<String>();
    let title = visible(title);
    !title.is_empty()
        && prune::visible_len(&visible(text).replace(&title, "")) < BY_PAGE_TYPE_MIN_CHARS
}

/// Distinct words at most in an answer that [`says_little_again`].
const SHELL_DISTINCT_WORDS: usize = 15;

/// Words at most in an answer that [`says_little_again`]: a header said a few times is short;
/// a long text of few words (a table of numbers, a chant) is left alone.
const SHELL_MAX_WORDS: usize = 100;

/// Whether `text` (as `format`, markdown read as the plain text a reader sees) says a few
/// lines again and again: at most [`SHELL_DISTINCT_WORDS`] distinct words (case aside,
/// punctuation ignored) in at most [`SHELL_MAX_WORDS`], each word said twice or more on
/// average, and its lines too. That is what an extractor answers for a page whose content its
/// scripts write, of which only a header said several times is in the HTML. Measured on the
/// WCXB dev split: 4 pages of 1,497 (three store item pages, "Aliexpress" and "I'm shopping
/// for..." three times, 27 words on 7 lines; a forum thread served as a shell, its site's
/// name, menu and the thread's title again and again, 59 words on 16 lines of 5 kinds), all
/// answered with none of their content, in text and markdown alike; no page with content says
/// so little so often. Short content that says each line once (opening hours, a status list,
/// a few links) is left alone, however few its words. Never for HTML output: its answer is
/// Readability's markup, not the answer text and markdown share, and a page must not be
/// empty in one format and not in the others.
fn says_little_again(text: &str, format: Format) -> bool {
    if format == Format::Html {
        return false;
    }
    let mut distinct: Vec<String> = Vec::new();
    let (mut words, mut lines) = (0, 0);
    let mut kinds: Vec<String> = Vec::new();
    // Line by line, markdown read as plain one line at a time: a page with content is left
    // after its first hundred words, never read whole.
    for line in text.lines() {
        let plain: std::borrow::Cow<'_, str> = match format {
            Format::Markdown => prune::markdown_plain(line).into(),
            Format::Text | Format::Html => line.into(),
        };
        for word in plain
            .split(|c: char| !c.is_alphanumeric())
            .filter(|word| !word.is_empty())
        {
            words += 1;
            if words > SHELL_MAX_WORDS {
                return false;
            }
            let word = word.to_lowercase();
            if !distinct.contains(&word) {
                if distinct.len() == SHELL_DISTINCT_WORDS {
                    return false;
                }
                distinct.push(word);
            }
        }
        let line = plain.split_whitespace().collect::<Vec<_>>().join(" ");
        if line.is_empty() {
            continue;
        }
        lines += 1;
        let line = line.to_lowercase();
        if !kinds.contains(&line) {
            kinds.push(line);
        }
    }
    !distinct.is_empty() && words >= 2 * distinct.len() && lines >= 2 * kinds.len()
}

/// Elements left out of rs-trafilatura's answer markup when trawl converts it (it seldom
/// holds any).
const ANSWER_HIDDEN: &str = "script, style, template, svg";

/// The markdown of rs-trafilatura's answer (written from its markup by [`convert_body`])
/// holding less than this share of its plain answer's visible characters is replaced by the
/// plain answer ([`markdown_or_plain`]). Measured on the WCXB dev split when rs-trafilatura
/// wrote the markdown: 2 pages (text beside a forum post's quote, a product's comparison
/// table), markdown F1 +0.53 and +0.55 on them, no other page changed.
const MARKDOWN_MIN_SHARE: f64 = 0.5;

/// The `markdown` of rs-trafilatura's answer, unless it kept under [`MARKDOWN_MIN_SHARE`] of
/// the answer's `plain` text, or the plain text says little again and again
/// ([`says_little_again`]: markdown written from inline markup may put it on one line, where
/// the check cannot see it), which is used then (or when there is no markup).
fn markdown_or_plain(markdown: Option<String>, plain: String) -> String {
    match markdown {
        Some(markdown)
            if prune::visible_len(&prune::markdown_plain(&markdown)) as f64
                >= MARKDOWN_MIN_SHARE * prune::visible_len(&plain) as f64
                && !says_little_again(&plain, Format::Text) =>
        {
            markdown
        }
        _ => plain,
    }
}

/// A line of rs-trafilatura's plain answer longer than this (bytes) may be several blocks run
/// together ([`with_paragraphs`]); the longest paragraphs of articles are about this long.
const WALL_BYTES: usize = 1000;

/// How much longer (visible characters) than rs-trafilatura's plain answer the text written
/// from its markup may be to replace it ([`with_paragraphs`]).
const WRITTEN_MAX_FACTOR: f64 = 1.05;

/// How much of rs-trafilatura's plain answer (visible characters) the text written from its
/// markup must hold to replace it ([`with_paragraphs`]): less is a part of the answer, not
/// the answer. The one page of the WCXB dev split whose written text is much shorter holds a
/// third: its plain answer said the article twice.
const WRITTEN_MIN_SHARE: f64 = 0.25;

/// The plain text of rs-trafilatura's answer with its paragraphs back, written from its
/// `markup` by [`convert_body`], when `plain` runs blocks together on one line: some of its
/// profiles (products, listings, some service pages) join every block of the answer with a
/// space, up to tens of thousands of characters on a line, which a reader and the archive's
/// chunks (split at paragraphs) cannot use. `None` (keep `plain`) unless `plain` has a line
/// over [`WALL_BYTES`], the written text's longest line is at most half as long, and the
/// written text is the same answer: not longer in all (the markup may hold blocks the plain
/// answer left out; [`WRITTEN_MAX_FACTOR`] leaves room for list markers), nor only a part of
/// it ([`WRITTEN_MIN_SHARE`]). Measured on the WCXB dev split
/// (text): 26 pages change, their longest line from 1,177-44,621 characters to 64-1,028; F1
/// unchanged on 22 of them, +0.49 on one (a documentation page whose plain answer said its
/// table of contents again), +0.015, -0.005 and -0.006 on three.
fn with_paragraphs(markup: Option<&str>, plain: &str) -> Option<String> {
    let longest = plain.lines().map(str::len).max()?;
    if longest <= WALL_BYTES {
        return None;
    }
    let written = convert_body(markup?, Format::Text, ANSWER_HIDDEN);
    let written_longest = written.lines().map(str::len).max().unwrap_or(0);
    let share = prune::visible_len(&written) as f64 / prune::visible_len(plain).max(1) as f64;
    (written_longest * 2 <= longest && (WRITTEN_MIN_SHARE..=WRITTEN_MAX_FACTOR).contains(&share))
        .then_some(written)
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
/// consumed the first document (whose `<title>` the caller read before it did).
fn convert_whole_body(html: &str, format: Format, keep_noscript: bool) -> String {
    let remove = if keep_noscript {
        "script, style, template, svg, iframe, nav, form, button"
    } else {
        "script, style, noscript, template, svg, iframe, nav, form, button"
    };
    convert_body(html, format, remove)
}

/// The page's body as `format`, the elements matching `remove` left out.
fn convert_body(html: &str, format: Format, remove: &str) -> String {
    let document = Document::from(html);
    flatten_deep_nesting(&document, MAX_DEPTH);
    document.select(remove).remove();
    let body = document.select("body");
    match (format, body.nodes().first()) {
        (_, None) => String::new(),
        (Format::Markdown, Some(node)) => node.md(None).to_string(),
        (Format::Text, Some(node)) => node.formatted_text().to_string(),
        (Format::Html, Some(node)) => node.inner_html().to_string(),
    }
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

/// The URL the document's relative links resolve against: its `<base href>`, else `page_url`.
fn document_base(document: &Document, page_url: &Url) -> Url {
    document
        .select("base[href]")
        .attr("href")
        .and_then(|href| page_url.join(href.trim()).ok())
        .unwrap_or_else(|| page_url.clone())
}

/// Collects absolute, normalised http(s) links in document order, without duplicates.
fn collect_links(document: &Document, page_url: &Url) -> Vec<String> {
    let base = document_base(document, page_url);
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

/// Reads description, language, canonical URL, publication date and author, the page-type
/// signals (JSON-LD, `og:type`) and the JSON-LD `articleBody` strings. One pass over the
/// `<meta>`, `<link>` and JSON-LD `<script>` elements (each `select` walks the whole tree).
fn read_head(document: &Document, page_url: &Url) -> (Meta, Signals, Vec<ArticleBody>) {
    let mut found: Vec<(String, String)> = Vec::new();
    let mut canonical = None;
    let mut signals = Signals::default();
    let mut article_bodies = Vec::new();
    for node in document
        .select(r#"meta[content], link[rel][href], script[type="application/ld+json"]"#)
        .nodes()
    {
        if node.has_name("script") {
            if let Some(value) = signals.add_json_ld(&node.text()) {
                collect_article_bodies(&value, true, 0, &mut article_bodies);
            }
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
    (meta, signals, article_bodies)
}

/// Most `articleBody` strings of a page's JSON-LD tried against its answer.
const MAX_ARTICLE_BODIES: usize = 16;

/// One JSON-LD `articleBody` of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ArticleBody {
    /// The string as the JSON-LD holds it.
    body: String,
    /// Said of the page itself (a top-level item, a member of `@graph`, its `mainEntity`), not
    /// of an item it lists or links (`hasPart`, `itemListElement`, related stories).
    own: bool,
}

/// Adds the `articleBody` strings of a JSON-LD value and of what it holds (a few levels deep)
/// to `found`, up to [`MAX_ARTICLE_BODIES`]; `own`: `value` is said of the page itself.
fn collect_article_bodies(
    value: &serde_json::Value,
    own: bool,
    depth: usize,
    found: &mut Vec<ArticleBody>,
) {
    if depth > 6 || found.len() >= MAX_ARTICLE_BODIES {
        return;
    }
    match value {
        serde_json::Value::Array(items) => {
            for item in items {
                collect_article_bodies(item, own, depth + 1, found);
            }
        }
        serde_json::Value::Object(object) => {
            for (key, inner) in object {
                match inner {
                    serde_json::Value::String(body)
                        if key == "articleBody" && found.len() < MAX_ARTICLE_BODIES =>
                    {
                        found.push(ArticleBody {
                            body: body.clone(),
                            own,
                        });
                    }
                    serde_json::Value::Array(_) | serde_json::Value::Object(_) => {
                        let own = own && matches!(key.as_str(), "@graph" | "mainEntity");
                        collect_article_bodies(inner, own, depth + 1, found);
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

/// The warning of a page whose whole body was converted.
const WHOLE_BODY_WARNING: &str = "no article found: the whole page body was converted";

/// Fewest visible characters of a JSON-LD `articleBody` worth reading.
const ARTICLE_BODY_MIN_CHARS: usize = 200;

/// How many times longer than the answer found in the page's markup its JSON-LD `articleBody`
/// must be to replace it ([`prefers_article_body`]).
const ARTICLE_BODY_FACTOR: f64 = 1.1;

/// Share of the answer's four-word runs its JSON-LD `articleBody` must hold to replace it: the
/// two tell the same story ([`prefers_article_body`]).
const ARTICLE_BODY_HELD: f64 = 0.5;

/// Fewer four-word runs than this in the answer leave nothing to compare: the page is a shell
/// (its body built by scripts), and the `articleBody` is its text.
const ARTICLE_BODY_SHELL_RUNS: usize = 10;

/// The text of a JSON-LD `articleBody`: plain text (entities decoded), or HTML (some sites put
/// their markup in it) read as a fragment, twice when the markup itself was escaped
/// (`&lt;p&gt;`). Paragraphs the string separates with blank lines stay separate. `None` when
/// its markup is over the parsing budget (`web::budget`): JSON-LD sits in a `<script>`, which
/// the page's own budget check does not count.
fn article_body_text(body: &str) -> Option<String> {
    let paragraphs = body
        .replace("\r\n", "\n")
        .split("\n\n")
        .map(|paragraph| {
            let mut text = paragraph.to_owned();
            for pass in 0..2 {
                if looks_like_markup(&text) {
                    budget::admit(&text).ok()?;
                    text = Document::fragment(text.as_str())
                        .root()
                        .formatted_text()
                        .to_string();
                } else if pass == 0 && text.contains('&') {
                    text = decode_entities(&text);
                } else {
                    break;
                }
            }
            Some(text)
        })
        .collect::<Option<Vec<String>>>()?;
    Some(paragraphs.join("\n\n"))
}

/// Whether `text` holds a tag (`<` then a letter, `/` or `!`), not just a `<` of prose.
fn looks_like_markup(text: &str) -> bool {
    text.as_bytes().windows(2).any(|pair| {
        pair[0] == b'<' && (pair[1].is_ascii_alphabetic() || matches!(pair[1], b'/' | b'!'))
    })
}

/// `text` with its character references decoded and its whitespace kept: read as the content
/// of a `<textarea>` (raw text with references), which it cannot close (it holds no tag:
/// [`looks_like_markup`]).
fn decode_entities(text: &str) -> String {
    Document::fragment(format!("<textarea>{text}</textarea>"))
        .select("textarea")
        .text()
        .to_string()
}

/// Whether a page's JSON-LD `articleBody` (as text) replaces `answer`, what extraction found in
/// its markup (plain text): it has [`ARTICLE_BODY_MIN_CHARS`] or more visible characters and
/// [`ARTICLE_BODY_FACTOR`] times the answer's, and it holds [`ARTICLE_BODY_HELD`] of the
/// answer's four-word runs, unless the answer is a shell's ([`ARTICLE_BODY_SHELL_RUNS`]) and
/// the body is said of the page itself (`own`, not of a story it lists). A news
/// page whose body is built by scripts, or that splits its story between blocks Readability
/// does not join, still has its whole text there, written for search engines. Measured on the
/// WCXB dev split: 47 pages have an `articleBody`, it replaces the answer on one (F1 0.83 ->
/// 0.97: a story cut by an inline promotion); on the Zyte news set on none.
fn prefers_article_body(body: &str, answer: &str, own: bool) -> bool {
    let (body_chars, answer_chars) = (prune::visible_len(body), prune::visible_len(answer));
    if body_chars < ARTICLE_BODY_MIN_CHARS
        || (body_chars as f64) < ARTICLE_BODY_FACTOR * answer_chars as f64
    {
        return false;
    }
    let (held, runs) = runs_held(answer, body);
    if runs < ARTICLE_BODY_SHELL_RUNS {
        return own;
    }
    held as f64 >= ARTICLE_BODY_HELD * runs as f64
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

    /// A news story of `paragraphs` paragraphs about the harbour's new ferry.
    fn ferry_story(paragraphs: usize) -> Vec<String> {
        (0..paragraphs)
            .map(|n| {
                format!(
                    "Paragraph {n}: the new electric ferry crossed the harbour in eleven minutes \
                     on its first morning, carrying commuters, two cargo bikes and a brass band \
                     that the harbour master had not expected."
                )
            })
            .collect()
    }

    /// A page at `body` with a JSON-LD `NewsArticle` whose `articleBody` is `article_body`.
    fn page_with_article_body(body: &str, article_body: &str) -> String {
        let json = serde_json::json!({
            "@context": "https://schema.org",
            "@type": "NewsArticle",
            "headline": "The new ferry",
            "articleBody": article_body,
        });
        format!(
            r#"<html><head><title>The new ferry</title>
            <script type="application/ld+json">{json}</script></head><body>{body}</body></html>"#
        )
    }

    #[test]
    fn a_shell_is_read_from_its_json_ld_article_body() {
        let story = ferry_story(6).join("\n\n");
        let html = page_with_article_body(r#"<div id="root"><p>Loading…</p></div>"#, &story);
        for format in [Format::Markdown, Format::Text] {
            let extracted = extract_html(&html, &url(), format).expect("extracts");
            assert_eq!(extracted.extractor, Extractor::JsonLd, "{format:?}");
            assert!(
                extracted
                    .text
                    .contains("Paragraph 5: the new electric ferry")
            );
            assert_eq!(
                extracted.warning, None,
                "{format:?}: the body is not the answer"
            );
        }
        // Markup inside the article body is read as HTML, entities decoded, also when the
        // markup itself was escaped.
        for body in [
            format!("<p>{story}</p><p>Fish &amp; chips after.</p>"),
            format!("&lt;p&gt;{story}&lt;/p&gt;&lt;p&gt;Fish &amp;amp; chips after.&lt;/p&gt;"),
        ] {
            let html = page_with_article_body("", &body);
            let extracted = extract_html(&html, &url(), Format::Text).expect("extracts");
            assert!(
                extracted.text.contains("Fish & chips after."),
                "{}",
                extracted.text
            );
            assert!(!extracted.text.contains("<p>"), "{}", extracted.text);
        }
        // Plain text with a character reference keeps its paragraphs apart.
        let html = page_with_article_body("", &format!("{story}\n\nFish &amp; chips after."));
        let extracted = extract_html(&html, &url(), Format::Text).expect("extracts");
        assert!(
            extracted.text.contains(
                "brass band that the harbour master had not expected.\n\nFish & chips after."
            ),
            "{}",
            extracted.text
        );
        // On a shell, a story the page only lists is not its text.
        let json = serde_json::json!({
            "@context": "https://schema.org",
            "@type": "ItemList",
            "itemListElement": [{"@type": "NewsArticle", "articleBody": story}],
        });
        let html = format!(
            r#"<html><head><title>The new ferry</title>
            <script type="application/ld+json">{json}</script></head><body></body></html>"#
        );
        let extracted = extract_html(&html, &url(), Format::Text).expect("extracts");
        assert_ne!(extracted.extractor, Extractor::JsonLd);
        // Markup nested past the parsing budget is not parsed: the body is left unread.
        let deep = format!("{}{story}", "<div>".repeat(budget::MAX_NESTING + 10));
        let html = page_with_article_body("", &deep);
        let extracted = extract_html(&html, &url(), Format::Text).expect("extracts");
        assert_ne!(extracted.extractor, Extractor::JsonLd);
    }

    #[test]
    fn a_json_ld_article_body_replaces_the_answer_only_when_longer_and_the_same_story() {
        let story = ferry_story(6);
        let article = format!(
            "<article><h1>The new ferry</h1>{}</article>",
            story
                .iter()
                .map(|p| format!("<p>{p}</p>"))
                .collect::<String>()
        );
        // A summary: shorter than the article, which stands.
        let html = page_with_article_body(&article, &story[..2].join("\n\n"));
        let extracted = extract_html(&html, &url(), Format::Text).expect("extracts");
        assert_eq!(extracted.extractor, Extractor::Readability);
        // The whole story where the page showed part of it: the longer text is used.
        let shown = format!(
            "<article><h1>The new ferry</h1>{}</article>",
            story[..3]
                .iter()
                .map(|p| format!("<p>{p}</p>"))
                .collect::<String>()
        );
        let html = page_with_article_body(&shown, &story.join("\n\n"));
        let extracted = extract_html(&html, &url(), Format::Text).expect("extracts");
        assert_eq!(extracted.extractor, Extractor::JsonLd);
        assert!(extracted.text.contains("Paragraph 5:"));
        // Longer, but another story: not the page's text.
        let other = (0..12)
            .map(|n| format!("Item {n}: the council's budget for road repairs was approved after a long debate about potholes."))
            .collect::<Vec<_>>()
            .join("\n\n");
        let html = page_with_article_body(&shown, &other);
        let extracted = extract_html(&html, &url(), Format::Text).expect("extracts");
        assert_eq!(extracted.extractor, Extractor::Readability);
        assert!(!extracted.text.contains("potholes"));
    }

    #[test]
    fn a_shell_with_nothing_but_its_title_has_no_content() {
        // A forum thread whose posts arrive by script: the body holds no text at all, and
        // rs-trafilatura's forum profile answered with the <title> three times.
        let html = "<html><head><title>Why is my build slow on a cold cache? - Help - Example \
                    Forum</title></head><body><section id=d-splash><div class=dots></div>\
                    </section><section id=main></section><form style=\"display: none\"><input \
                    name=username></form><script>start()</script></body></html>";
        let page = Url::parse("https://forum.example.org/t/why-is-my-build-slow/4242").unwrap();
        for format in [Format::Markdown, Format::Text] {
            let extracted = extract_html(html, &page, format).expect("extracts");
            assert_eq!(extracted.meta.page_type, Some(PageType::Forum));
            assert!(
                !extracted.text.contains("cold cache"),
                "{format:?}: {:?}",
                extracted.text
            );
        }
    }

    #[test]
    fn a_few_words_said_again_and_again_are_no_content() {
        let header = "<header><p><a href=\"/\">Shop</a></p><p>I'm shopping for...</p></header>";
        let shell = format!(
            "<html><head><title>Blue kettle, 1.7 l, stainless steel</title></head><body>\
             {header}<div id=\"app\"></div>{header}<script src=\"/app.js\"></script>\
             {header}</body></html>"
        );
        let extracted = extract_html(&shell, &url(), Format::Text).expect("extracts");
        assert_eq!(extracted.text, "", "{extracted:?}");
        let block = crate::web::blockpage::detect(200, &shell, &extracted);
        assert_eq!(
            block.map(|block| block.code),
            Some(crate::job::ErrorCode::EmptyContent)
        );
        assert!(says_little_again("Shop\nShop!\nSHOP\nshop", Format::Text));
        let header = "Shop\n  I'm shopping for...\n\n";
        assert!(says_little_again(&header.repeat(3), Format::Text));
        assert!(says_little_again(&header.repeat(3), Format::Markdown));
        assert!(!says_little_again(
            &"<div><p>Shop</p><p>I'm shopping for...</p></div>".repeat(3),
            Format::Html
        ));
        // A short text saying each thing once is content, however short.
        assert!(!says_little_again(
            "Opening hours: nine to five, Monday to Friday.",
            Format::Text
        ));
        // Few words each on a line of its own, said once: opening hours, a status list,
        // links (markup and URLs are not words a reader sees).
        let hours = "Monday 9:00-17:00\nTuesday 9:00-17:00\nWednesday 9:00-17:00\n\
                     Thursday 9:00-17:00\nFriday 9:00-17:00\nSaturday closed\nSunday closed";
        assert!(!says_little_again(hours, Format::Text));
        let status = "US East Operational\nUS West Operational\nEU Operational\nAsia Operational";
        assert!(!says_little_again(status, Format::Text));
        let links = "- [Docs](https://example.com/docs)\n- [Blog](https://example.com/blog)\n\
                     - [GitHub](https://github.com/example/example)";
        assert!(!says_little_again(links, Format::Markdown));
        // Many words, some said often: content.
        let refrain = "the cat sat on the mat and the dog sat on the log ".repeat(3)
            + "while the bird sang in the tree by the river bank";
        assert!(!says_little_again(&refrain, Format::Text));
        assert!(!says_little_again("", Format::Text));
        // A long text of few words is left alone: a table of numbers, a sentence said often.
        assert!(!says_little_again(&"1\n0\n0\n1\n".repeat(30), Format::Text));
        assert!(!says_little_again(
            &"The river ran past the old mill, and the miller counted sacks.\n".repeat(9),
            Format::Text
        ));
    }

    #[test]
    fn a_title_said_again_and_again_is_told_from_text_beside_it() {
        let title = "Arrival T-Shirt | Example Store";
        assert!(repeats_only(&title.repeat(3), title));
        assert!(repeats_only(
            &format!("{title}\n\n  {title}\n{title}"),
            title
        ));
        let described = format!(
            "{title}\n\nA lightweight training top with sweat-wicking fabric, flatlock seams \
             and a straight hem."
        );
        assert!(!repeats_only(&described, title));
        assert!(!repeats_only(&described, ""));
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

    /// A category page whose wrapper holds a skip link, a menu, the products and a footer.
    fn category_page(skip_link: &str) -> String {
        let cards: String = [
            ("One", "Waterproof leather, a gusseted tongue. $120."),
            ("Two", "Light mesh, dry after a river crossing. $95."),
            ("Three", "Stiff shank for scree and loose rock. $160."),
            ("Four", "Insulated for cold mornings and early snow. $140."),
            ("Five", "Wide toe box for long days out. $130."),
            ("Six", "Vibram outsole with deep lugs for mud. $150."),
            ("Seven", "Recycled materials, resoleable. $170."),
            ("Eight", "Kids' sizes, the adult boot's sole. $70."),
        ]
        .iter()
        .map(|(name, line)| {
            format!(
                r#"<div class="card"><a href="/p/{name}">Trail Boot {name}</a><p>{line}</p></div>"#
            )
        })
        .collect();
        format!(
            r##"<html><head><title>Hiking boots</title></head><body><div id="page">
            <a href="#main" class="skip">{skip_link}</a>
            <div class="top"><a href="/">Shop</a> <a href="/outlet">Outlet</a>
            <a href="/trade-in">Trade-in</a> <a href="/classes">Classes</a></div>
            <div id="main"><h1>Hiking boots</h1><p>Boots for every trail, from light day hikes
            to long treks over rough ground with a heavy pack.</p>
            <div class="grid">{cards}</div></div>
            <div class="foot"><a href="/help">Help</a> <a href="/stores">Stores</a></div>
            </div></body></html>"##
        )
    }

    #[test]
    fn a_page_readability_takes_whole_is_read_by_rs_trafilatura() {
        // Readability takes the wrapper, menu and all; its text opening with the skip link
        // says so, and rs-trafilatura's answer (the products, no menu) is used instead.
        let html = category_page("Skip to main content");
        let extracted = extract_html(&html, &url(), Format::Text).expect("extracts");
        assert_eq!(
            extracted.extractor,
            Extractor::Trafilatura,
            "{}",
            extracted.text
        );
        assert!(
            extracted.text.contains("Trail Boot Three"),
            "{}",
            extracted.text
        );
        assert!(!extracted.text.contains("Outlet"), "{}", extracted.text);
        // The same page with another first link: Readability's answer stands, menu included.
        let html = category_page("Accessibility statement");
        let extracted = extract_html(&html, &url(), Format::Text).expect("extracts");
        assert_eq!(
            extracted.extractor,
            Extractor::Readability,
            "{}",
            extracted.text
        );
        assert!(extracted.text.contains("Outlet"), "{}", extracted.text);
    }

    #[test]
    fn skip_links_are_short_lines_near_the_start() {
        assert!(opens_with_skip_link(
            "Accessibility\nSkip to main content\nShop"
        ));
        assert!(opens_with_skip_link(
            "* [Skip to content](#main)\n\n# Boots"
        ));
        assert!(opens_with_skip_link("Zum Inhalt springen\nStart"));
        // A recipe post's button to its recipe card is the post's own.
        assert!(!opens_with_skip_link(
            "Skip to recipe\nThe best banana bread"
        ));
        // A sentence that starts like one is prose, and so is one far down the text.
        assert!(!opens_with_skip_link(
            "Skip to the last section if you only need the settings: the first ones explain \
             why each of them matters."
        ));
        let far = format!(
            "{}Skip to main content",
            "A line of the article.\n".repeat(8)
        );
        assert!(!opens_with_skip_link(&far));
    }

    #[test]
    fn text_and_markdown_output_take_the_same_extractor() {
        // The skip link's target is long: as a markdown line it is over the 80 characters a
        // skip link may have, as text it is not.
        let html = category_page("Skip to main content").replace(
            "href=\"#main\"",
            "href=\"https://shop.example/outdoor/footwear/hiking-boots/all-terrain/#main\"",
        );
        for format in [Format::Text, Format::Markdown] {
            let extracted = extract_html(&html, &url(), format).expect("extracts");
            assert_eq!(
                extracted.extractor,
                Extractor::Trafilatura,
                "{format:?}: {}",
                extracted.text
            );
        }
    }

    #[test]
    fn markdown_that_lost_the_answers_text_gives_way_to_the_text() {
        let plain = "A quoted line.\n\nThe reply beside the quote, which the converter lost, \
                     is most of the answer and must be kept."
            .to_owned();
        let lost = Some("> A quoted line.".to_owned());
        assert_eq!(markdown_or_plain(lost, plain.clone()), plain);
        let kept = "> A quoted line.\n\nThe reply beside the quote, which the \
                    [converter](https://x.example/c) lost, is most of the answer."
            .to_owned();
        assert_eq!(markdown_or_plain(Some(kept.clone()), plain.clone()), kept);
        assert_eq!(markdown_or_plain(None, plain.clone()), plain);
    }

    #[test]
    fn markdown_of_an_answer_that_says_little_again_gives_way_to_its_text() {
        // Written from inline markup, the shell's header said three times is one line.
        let plain =
            "Shop\nI'm shopping for...\nShop\nI'm shopping for...\nShop\nI'm shopping for..."
                .to_owned();
        let markdown =
            "Shop I'm shopping for... Shop I'm shopping for... Shop I'm shopping for...".to_owned();
        assert_eq!(markdown_or_plain(Some(markdown), plain.clone()), plain);
        assert!(says_little_again(&plain, Format::Markdown));
    }

    #[test]
    fn an_answer_run_together_on_one_line_gets_its_paragraphs_back() {
        let blocks = [
            "Material: anodized aluminum, scratch resistant.",
            "Weight: 2 oz, lighter than the first version by a tenth.",
            "Holds 1 to 12 cards in a dual-track frame that expands as you add them.",
        ];
        let markup: String = blocks
            .iter()
            .cycle()
            .take(30)
            .map(|block| format!("<div><p>{block}</p></div>"))
            .collect();
        let wall: Vec<&str> = blocks.iter().copied().cycle().take(30).collect();
        let wall = wall.join(" ");
        assert!(wall.len() > WALL_BYTES);
        let written = with_paragraphs(Some(&markup), &wall).expect("paragraphs");
        assert!(written.lines().all(|line| line.len() < 100), "{written}");
        assert_eq!(
            written.split_whitespace().collect::<Vec<_>>(),
            wall.split_whitespace().collect::<Vec<_>>()
        );
        // Short lines, or no markup: the plain answer stands.
        let lines = wall.replace(". ", ".\n");
        assert_eq!(with_paragraphs(Some(&markup), &lines), None);
        assert_eq!(with_paragraphs(None, &wall), None);
        // Markup holding more than the plain answer (blocks it left out), or a small part of
        // it, is not used.
        let more = format!(
            "{markup}{}",
            "<p>A block the answer left out.</p>".repeat(20)
        );
        assert_eq!(with_paragraphs(Some(&more), &wall), None);
        let part: String = blocks
            .iter()
            .take(2)
            .map(|block| format!("<p>{block}</p>"))
            .collect();
        assert_eq!(with_paragraphs(Some(&part), &wall), None);
        // One long paragraph is a paragraph: written the same, it is not shorter by half.
        let paragraph = blocks.repeat(10).join(" ");
        let markup = format!("<p>{paragraph}</p>");
        assert_eq!(with_paragraphs(Some(&markup), &paragraph), None);
    }

    #[test]
    fn rs_trafilaturas_markdown_keeps_adjacent_blocks_apart() {
        let url = Url::parse("https://pottery.example/mug").expect("url");
        // A description list with no whitespace between its items, as a page builder writes it
        // (seen on a furniture store's product page).
        let specs = r#"<h2>Details</h2><dl class="specs"><dt><div>Capacity</div></dt><dd>350 ml</dd><dt><div>Glaze</div></dt><dd>Matte white</dd><dt><div>Care</div></dt><dd>Dishwasher safe</dd></dl>"#;
        let html = product_page("product-text").replace(
            r#"<div class="shipping-info">"#,
            &format!(r#"{specs}<div class="shipping-info">"#),
        );
        let extracted = extract_html(&html, &url, Format::Markdown).expect("ok");
        assert_eq!(extracted.extractor, Extractor::Trafilatura);
        assert!(extracted.text.contains("iron flecks"), "{}", extracted.text);
        for glued in ["Capacity350", "mlGlaze", "GlazeMatte", "whiteCare"] {
            assert!(
                !extracted.text.contains(glued),
                "{glued}: {}",
                extracted.text
            );
        }
    }

    #[test]
    fn rs_trafilatura_is_asked_when_readability_keeps_little() {
        let text = "x".repeat(90);
        // 9 % of the page, which says it is an article: asked, and its answer used only when
        // three times longer.
        let doubt = Doubt::of(&text, 1_000, true, false);
        assert!(doubt.almost_nothing && !doubt.little_kept && !doubt.whole_page);
        assert!(doubt.any());
        assert!(!doubt.prefers(269));
        assert!(doubt.prefers(270));
        // 20 % of a page that does not say so: any longer answer is used.
        let doubt = Doubt::of(&text, 450, false, false);
        assert_eq!(
            (doubt.any(), Doubt::of(&text, 500, false, false).prefers(91)),
            (false, true),
            "under 500 visible characters rs-trafilatura is not asked"
        );
        // Half the page: Readability's answer stands.
        assert!(!Doubt::of(&"x".repeat(300), 600, false, false).any());
        // Under half of a page with no author and no date: asked, for more sections.
        let doubt = Doubt::of(&"x".repeat(290), 600, true, true);
        assert!(doubt.one_section && doubt.any() && !doubt.prefers(1_000));
        assert!(!Doubt::of(&"x".repeat(310), 600, false, true).any());
        // Readability took the whole page from its skip link on: rs-trafilatura's answer is
        // used when shorter (the menus gone), not when it is a sliver of the page.
        let whole = format!("Skip to main content\n{}", "x".repeat(2_000));
        let doubt = Doubt::of(&whole, 2_100, true, false);
        assert!(doubt.whole_page && doubt.any());
        assert!(doubt.prefers(1_000) && doubt.prefers(202));
        assert!(!doubt.prefers(198));
    }

    #[test]
    fn an_answer_holding_readabilitys_and_more_sections_replaces_it() {
        let sections = [
            "Audits: we walk every floor with your facilities team, measure what each machine \
             draws and hand over a report ranked by what a repair would save.",
            "Repairs: a technician arrives within four hours, carries the common parts in the \
             van and finishes most jobs in one visit, weekends included.",
            "Training: half-day courses on site teach your staff to read the panels, reset the \
             breakers safely and know when to call us instead.",
            "Support: one phone number answered around the clock by an engineer who can see \
             your installation's history before saying a word.",
        ];
        let kept = sections[0];
        let found = sections[..3].join("\n");
        assert!(
            holds_more(&found, kept),
            "the container of three sections, one of them kept"
        );
        assert!(
            !holds_more(kept, kept),
            "the same section read by both is not more"
        );
        let other = sections[1..].join("\n");
        assert!(
            !holds_more(&other, kept),
            "longer, but without the section Readability kept"
        );
        let whole = [sections.join("\n"), sections.join("\n")].join("\n");
        assert!(
            !holds_more(&whole, kept),
            "over five times as long: the page's whole body"
        );
    }

    /// A product page: its description in a block named so, shipping terms beside it, and
    /// related products whose cards have description blocks of their own.
    fn product_page(description_class: &str) -> String {
        format!(
            r#"<html><head><title>Stoneware mug</title><script type="application/ld+json">
            {{"@context":"https://schema.org","@type":"Product","name":"Stoneware mug"}}
            </script></head><body><header><a href="/">Pottery shop</a></header>
            <main><div class="product"><h1>Stoneware mug</h1><p class="price">$28.00</p>
            <div class="{description_class}"><p>A wheel-thrown mug in speckled stoneware,
            glazed in a soft matte white that shows the clay's iron flecks.</p><p>Holds 350 ml.
            Dishwasher and microwave safe. Each mug is made by hand, so sizes and glaze vary
            slightly from piece to piece.</p><p>The handle is pulled, not cast, and sits wide
            enough for three fingers; the foot is left unglazed and sanded smooth so it will
            not scratch a table.</p></div>
            <div class="shipping-info"><h2>Shipping and returns</h2><p>We ship within three
            working days from our studio. Orders over $80 ship free within the country, and
            every order is packed in recycled paper.</p><p>Returns are accepted within 30 days
            of delivery for unused items in their original packaging.</p></div>
            <div class="related-products"><h2>You may also like</h2><div class="card">
            <a href="/p/bowl">Stoneware bowl</a><div class="card-description">A shallow bowl
            in the same speckled clay, for soups, salads and noodles, glazed to match the mug
            and sized for one generous serving.</div></div></div></div></main>
            <footer><p>Pottery shop, 12 Kiln Lane.</p></footer></body></html>"#
        )
    }

    #[test]
    fn a_product_is_read_from_its_description_block() {
        let url = Url::parse("https://pottery.example/mug").expect("url");
        let extracted =
            extract_html(&product_page("product-description"), &url, Format::Text).expect("ok");
        assert_eq!(extracted.meta.page_type, Some(PageType::Product));
        assert!(extracted.text.contains("iron flecks"), "{}", extracted.text);
        assert!(
            extracted.text.contains("scratch a table"),
            "{}",
            extracted.text
        );
        assert!(!extracted.text.contains("Shipping"), "{}", extracted.text);
        assert!(
            !extracted.text.contains("shallow bowl"),
            "{}",
            extracted.text
        );
        // Unnamed, the block is not found: rs-trafilatura's wider answer stands.
        let extracted =
            extract_html(&product_page("product-text"), &url, Format::Text).expect("ok");
        assert!(extracted.text.contains("iron flecks"), "{}", extracted.text);
        assert!(extracted.text.contains("Shipping"), "{}", extracted.text);
    }

    #[test]
    fn a_products_questions_and_disclosures_join_its_description() {
        let url = Url::parse("https://pottery.example/mug").expect("url");
        let questions = r#"<section class="product-faq"><h2>Questions</h2><details>
            <summary>Is the glaze food safe?</summary><p>Yes: the glaze is lead free and fired
            at cone six, and every batch is tested before it leaves the studio.</p></details>
            </section>"#;
        let html = product_page("product-description")
            .replace(
                r#"<div class="related-products">"#,
                // Said twice (a copy for small screens), and one disclosure too short to add.
                &format!(
                    r#"{questions}{questions}<details><summary>Care</summary>Hand wash.</details>
                    <div class="related-products">"#
                ),
            )
            .replace(
                "<footer>",
                r#"<footer><div class="faq"><p>Read the answers to our customers' most common
                questions about orders, payment, delivery times and gift wrapping on our help
                pages before you write to us.</p></div>"#,
            );
        for format in [Format::Text, Format::Markdown] {
            let text = extract_html(&html, &url, format).expect("ok").text;
            // The description block first, then the questions, once.
            let description = text.find("iron flecks").expect("description");
            let question = text.find("food safe").expect("question");
            assert!(description < question, "{text}");
            assert_eq!(text.matches("lead free").count(), 1, "{text}");
            assert!(!text.contains("Hand wash"), "{text}");
            assert!(!text.contains("gift wrapping"), "{text}");
            assert!(!text.contains("Shipping"), "{text}");
        }
        // Only a product page's: an article's questions are Readability's to keep or not (here
        // both copies, as the page says them, and nothing added).
        let article = html.replace(r#""@type":"Product""#, r#""@type":"BlogPosting""#);
        let extracted = extract_html(&article, &url, Format::Text).expect("ok");
        assert_eq!(extracted.meta.page_type, Some(PageType::Article));
        assert_eq!(
            extracted.text.matches("lead free").count(),
            2,
            "{}",
            extracted.text
        );
    }

    #[test]
    fn a_threads_posts_come_with_their_authors_and_dates() {
        let url = Url::parse("https://forum.example/threads/glazes.7/").expect("url");
        let post = |author: &str, date: &str, text: &str| {
            format!(
                r#"<article class="message" itemscope itemtype="https://schema.org/Comment">
                <div class="message-user" itemprop="author" itemscope
                itemtype="https://schema.org/Person"><h4 itemprop="name">{author}</h4></div>
                <div class="message-attribution"><time datetime="2024-10-08">{date}</time></div>
                <div class="message-content" itemprop="text"><p>{text}</p></div></article>"#
            )
        };
        let html = format!(
            r#"<html><head><title>Glazes that crawl</title>
            <script type="application/ld+json">{{"@type":"DiscussionForumPosting",
            "headline":"Glazes that crawl"}}</script></head><body>
            <nav><a href="/">Forums</a> <a href="/glazes">Glazes</a></nav>
            <main><h1>Glazes that crawl</h1><div class="thread">{}{}{}</div></main>
            <footer>Forum software by an example company</footer></body></html>"#,
            post(
                "ana",
                "Oct 8, 2024",
                "My glaze pulls back from the rim of every mug and leaves bare patches of clay \
                 after the firing. I apply it thick, by dipping, on bisque that I sponge first.",
            ),
            post(
                "ben",
                "Oct 9, 2024",
                "Crawling usually comes from dust or oil on the bisque, or from a glaze applied \
                 too thick that cracks as it dries. Let the pots dry fully before you dip them.",
            ),
            post(
                "cy",
                "Oct 9, 2024",
                "Add a little gum to the glaze bucket so that it shrinks less as it dries, and \
                 wipe the bisque with a damp sponge rather than a wet one before glazing.",
            ),
        );
        for format in [Format::Text, Format::Markdown] {
            let extracted = extract_html(&html, &url, format).expect("ok");
            assert_eq!(extracted.meta.page_type, Some(PageType::Forum));
            let text = extracted.text;
            let mut at = 0;
            for said in [
                "ana",
                "Oct 8, 2024",
                "bare patches",
                "ben",
                "Oct 9, 2024",
                "dust or oil",
                "cy",
                "gum",
            ] {
                at += text[at..]
                    .find(said)
                    .unwrap_or_else(|| panic!("{said} after {at}: {text}"));
            }
            assert_eq!(text.matches("bare patches").count(), 1, "{text}");
            assert!(!text.contains("Forum software"), "{text}");
        }
    }

    #[test]
    fn rs_trafilaturas_answer_loses_interface_label_lines() {
        let url = Url::parse("https://pottery.example/mug").expect("url");
        let html = product_page("product-text").replace(
            r#"<p class="price">$28.00</p>"#,
            r#"<p class="price">$28.00</p><p class="stock">Sold out</p>
            <p><a href="/cart/add">Add to cart</a></p>"#,
        );
        for format in [Format::Text, Format::Markdown] {
            let extracted = extract_html(&html, &url, format).expect("ok");
            assert_eq!(extracted.extractor, Extractor::Trafilatura);
            assert!(extracted.text.contains("iron flecks"), "{}", extracted.text);
            assert!(extracted.text.contains("$28.00"), "{}", extracted.text);
            for label in ["Sold out", "Add to cart"] {
                assert!(
                    !extracted.text.contains(label),
                    "{label}: {}",
                    extracted.text
                );
            }
        }
    }

    #[test]
    fn a_product_block_is_named_so_and_not_another_products() {
        let paragraph = |words: &str, times: usize| format!("<p>{}</p>", words.repeat(times));
        // Visible characters: the description 300 (and a script), the related product card's
        // description 400 (inside a camelCase `relatedProducts`).
        let html = format!(
            r#"<html><body><div class="product">
            <div id="description">{}<a href="/care">care</a><script>var x = "{}";</script></div>
            <div class="relatedProducts"><div class="card-description">{}</div></div>
            </div></body></html>"#,
            paragraph("aaaaaaaaa ", 30),
            "s".repeat(500),
            paragraph("bbbbbbbbb ", 40),
        );
        let document = Document::from(html.as_str());
        let base = Url::parse("https://shop.example/mug").expect("url");
        let block = |found_chars| product_block(&document, Format::Text, found_chars, &base);
        // The description, its script left out; not the longer related card.
        let text = block(450).expect("the description");
        assert!(text.contains("aaa") && !text.contains("bbb"), "{text}");
        assert!(!text.contains("sss"), "{text}");
        // Under half of what rs-trafilatura found, or more than all of it: nothing.
        assert_eq!(block(700), None);
        assert_eq!(block(250), None);
        // In markdown, links are made absolute; HTML output is not asked for.
        let markdown = product_block(&document, Format::Markdown, 450, &base).expect("block");
        assert!(markdown.contains("https://shop.example/care"), "{markdown}");
        assert_eq!(product_block(&document, Format::Html, 450, &base), None);
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
