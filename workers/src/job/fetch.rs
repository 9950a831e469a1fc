//! Fetch jobs and their results: one URL over plain HTTP (or rendered), its output format and
//! render mode, and the closed result with the extracted content and metadata.
//!
//! Not here: fetching and extraction themselves (`crate::fetch`, `crate::web`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::credentials::Credentials;
use super::headers::CustomHeaders;
use super::proxy::Choice;

/// What a fetch job returns as its main text.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// Readability article converted to markdown (the default).
    #[default]
    Markdown,
    /// Readability article as plain text, paragraphs separated by blank lines.
    Text,
    /// Readability article as cleaned HTML.
    Html,
}

impl Format {
    /// Returns the snake_case name of the format.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Markdown => "markdown",
            Format::Text => "text",
            Format::Html => "html",
        }
    }
}

/// Fetch one URL over plain HTTP (no JavaScript) and extract its main content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchJob {
    /// The http or https URL to fetch.
    #[schema(format = "uri")]
    pub url: String,
    /// The output format of `content.text`. Also accepted as `extract`, its former name
    /// (for one release).
    #[serde(default, alias = "extract")]
    pub format: Format,
    /// Characters of `content.text` returned in the result (the whole text is always stored);
    /// `None` takes the configured default, and any value is bounded by the configured cap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_chars: Option<usize>,
    /// Seconds a stored page of the same URL and options may be served instead of fetching;
    /// `Some(0)` bypasses the cache for reading and writing, `None` takes the configured default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 315_360_000)]
    pub cache_ttl: Option<u64>,
    /// Whether the page goes on to the archive (index and WARC) once stored.
    #[serde(default)]
    pub archive: bool,
    /// Render the page in headless Chromium (`true`), over plain HTTP (`false`, the default),
    /// or over plain HTTP first and in Chromium when the page looks built by JavaScript
    /// (`"auto"`).
    #[serde(default, skip_serializing_if = "Render::is_off")]
    pub render: Render,
    /// The proxy this fetch goes through: absent, the configured ones (`[proxy]`);
    /// `"direct"`, none; or a proxy URL of its own (`http://`, `https://`, `socks5://`,
    /// `socks5h://`, credentials allowed and never shown), whose address is checked like any
    /// destination's. Rendered pages go through the browser's egress, not a proxy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// Headers sent with the request (routing metadata, a service token), over the
    /// configured `http.headers`: secrets, shown by name only when the job is read back. Sent
    /// to the URL's origin (on a redirect to another origin only Accept, Accept-Language and
    /// User-Agent go on); a rendered page sends them to the URL's origin only. Names trawl
    /// sets (Host, Content-Length, Cookie, Connection, …) are refused. At most 32, 8 KiB.
    #[serde(default, skip_serializing_if = "CustomHeaders::is_empty")]
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub headers: CustomHeaders,
    /// The extraction provider asked when trawl's own extraction finds no readable content
    /// (`empty_content`, `blocked_by_site`, no article): absent, the configured
    /// `fetch.fallback`; `"none"` never sends this page to a provider. The job's headers
    /// never go to a provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback: Option<Fallback>,
    /// Cookies, per-origin headers and localStorage entries the browser sets before the page
    /// loads, as a browse job's (`render: true` only: a plain fetch sends `headers` alone).
    /// Secrets: shown as counts when the job is read back; the page is cached for the caller
    /// only, and never sent to a fallback provider (which would see the page signed out).
    #[serde(default, skip_serializing_if = "Credentials::is_empty")]
    pub credentials: Credentials,
}

/// Which fallback extraction provider a fetch may ask (`fetch.fallback`, or a job's own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Fallback {
    /// Never.
    None,
    /// Firecrawl's scrape API (`fetch.firecrawl`).
    Firecrawl,
    /// A Crawl4AI server (`fetch.crawl4ai`).
    #[serde(rename = "crawl4ai")]
    Crawl4ai,
    /// Each configured provider in turn, Firecrawl first (none configured: none).
    #[default]
    Auto,
}

impl Fallback {
    /// `"none"`, `"firecrawl"`, `"crawl4ai"` or `"auto"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Fallback::None => "none",
            Fallback::Firecrawl => "firecrawl",
            Fallback::Crawl4ai => "crawl4ai",
            Fallback::Auto => "auto",
        }
    }
}

/// Whether a page is rendered in the browser: `false`, `true` or `"auto"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum Render {
    /// `true`: always in the browser; `false`: never.
    Flag(bool),
    /// `"auto"`: in the browser when the plain page looks built by JavaScript.
    Mode(RenderMode),
}

/// The named render modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RenderMode {
    /// Escalate from plain HTTP to the browser when the page looks built by JavaScript.
    Auto,
}

impl Default for Render {
    fn default() -> Self {
        Render::Flag(false)
    }
}

impl Render {
    /// Plain HTTP only.
    pub fn is_off(&self) -> bool {
        *self == Render::Flag(false)
    }

    /// Always in the browser.
    pub fn is_on(&self) -> bool {
        *self == Render::Flag(true)
    }

    /// Plain HTTP first, the browser when the page looks built by JavaScript.
    pub fn is_auto(&self) -> bool {
        *self == Render::Mode(RenderMode::Auto)
    }

    /// `"false"`, `"true"` or `"auto"`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Render::Flag(false) => "false",
            Render::Flag(true) => "true",
            Render::Mode(RenderMode::Auto) => "auto",
        }
    }
}

/// The longest cache TTL a job may ask for: ten years, in seconds.
pub const MAX_CACHE_TTL_SECS: u64 = 315_360_000;

impl FetchJob {
    /// Checks the options against their bounds.
    pub fn validate(&self) -> Result<(), String> {
        if self.cache_ttl.is_some_and(|ttl| ttl > MAX_CACHE_TTL_SECS) {
            return Err(format!(
                "cache_ttl is above {MAX_CACHE_TTL_SECS} s (ten years)"
            ));
        }
        Choice::from_option(self.proxy.as_deref())?;
        self.headers
            .check()
            .map_err(|message| format!("headers: {message}"))?;
        if !self.credentials.is_empty() {
            if self.render != Render::Flag(true) {
                return Err(
                    "credentials need render: true (the browser sets cookies and \
                            localStorage; a plain fetch sends headers only)"
                        .to_owned(),
                );
            }
            self.credentials
                .validate()
                .map_err(|message| format!("credentials: {message}"))?;
        }
        Ok(())
    }

    /// The fallback provider this job may be sent to: its own choice (else the configured
    /// one), and none when it carries credentials (a provider would read the page signed
    /// out, and a signed-in page's URL stays here).
    pub fn fallback_choice(&self) -> Option<Fallback> {
        if self.credentials.is_empty() {
            self.fallback
        } else {
            Some(Fallback::None)
        }
    }

    /// What the browser context of a rendered page carries: the job's credentials and its
    /// headers (for the URL's origin only).
    pub fn render_credentials(&self) -> Credentials {
        let mut credentials = self.credentials.clone();
        credentials
            .headers
            .extend(Credentials::headers_for_origin_of(&self.url, &self.headers).headers);
        credentials
    }

    /// Whether the page this job fetches may be served to anyone who asks for the same URL
    /// and options: a plain public fetch. A fetch through a proxy of its own may see what
    /// only that proxy sees (a private network, an account's region), so its page is kept for
    /// the tenant that asked. A new option that carries a caller's identity (request headers,
    /// credentials, cookies, a render script) must make this false.
    pub fn shares_cache(&self) -> bool {
        matches!(self.proxy.as_deref(), None | Some("direct"))
            && self.headers.is_empty()
            && self.credentials.is_empty()
    }

    /// Returns a fetch job for `url` with every option at its default.
    pub fn new(url: impl Into<String>) -> Self {
        FetchJob {
            url: url.into(),
            format: Format::default(),
            max_chars: None,
            cache_ttl: None,
            archive: false,
            render: Render::default(),
            proxy: None,
            headers: CustomHeaders::default(),
            fallback: None,
            credentials: Credentials::default(),
        }
    }
}

/// How the main content was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Extractor {
    /// Readability found an article.
    Readability,
    /// No article was found: the whole body was converted (a warning says so).
    Fallback,
    /// The response was already text (plain text, markdown, JSON) and passed through.
    Passthrough,
    /// Text extracted from a PDF, with page markers.
    Pdf,
    /// Readability over the document as headless Chromium rendered it.
    Browser,
    /// Firecrawl's scrape API, asked after trawl's own extraction found no readable content
    /// (or instead of it, with `fetch.readability = false`).
    Firecrawl,
    /// A Crawl4AI server, asked like Firecrawl.
    #[serde(rename = "crawl4ai")]
    Crawl4ai,
    /// rs-trafilatura's profile for the page's type (`meta.page_type`: a forum thread, a
    /// product, a collection, a listing, documentation, a service page).
    Trafilatura,
    /// The page's JSON-LD `articleBody`: longer than what its markup gave and telling the same
    /// story (or the page is a shell its scripts fill).
    JsonLd,
}

/// The closed result of a fetch job (design §2 fetch).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchResult {
    /// The URL as requested.
    pub url: String,
    /// The URL after redirects (the requested URL when the final one exceeds 2,048 chars).
    pub final_url: String,
    /// HTTP status of the final response.
    pub status: u16,
    /// Content type of the final response, without parameters.
    pub content_type: String,
    /// Page title, at most 256 chars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// How the content was extracted.
    pub extractor: Extractor,
    /// Something the caller should know about the content, at most 256 chars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
    /// True when served from the page cache without fetching.
    pub cached: bool,
    /// The extracted content (possibly truncated; the whole text is stored).
    pub content: Content,
    /// Absolute, normalised links found in the page, in document order, without duplicates.
    pub links: Vec<String>,
    /// Metadata from the page head.
    pub meta: Meta,
    /// Id of the stored page; `trawl read` and `GET /v1/pages` read the whole text.
    pub page_id: String,
    /// sha256 of the whole extracted text, hex.
    pub content_hash: String,
}

/// The extracted text and its accounting.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Content {
    /// The text, cut at `max_chars` characters.
    pub text: String,
    /// Characters in `text`.
    pub length: usize,
    /// Characters in the whole extracted text.
    pub raw_length: usize,
    /// True when `text` is shorter than the whole text (cut at `max_chars`), or when the page
    /// itself was cut at `http.max_bytes` even with its scripts, styles, SVG and comments
    /// dropped (a warning says which).
    pub truncated: bool,
    /// When the page was fetched (RFC 3339, UTC).
    pub fetched_at: String,
    /// Milliseconds the fetch and extraction took (0 when cached).
    pub took_ms: u64,
}

/// Metadata read from the page head (and JSON-LD where the head lacks it).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Meta {
    /// `<meta name="description">` or its Open Graph equivalent.
    pub description: Option<String>,
    /// Language from `<html lang>` or `Content-Language`; when the page declares none, a
    /// reliable guess from its markdown or text (ISO 639-1, `web::lang`).
    pub lang: Option<String>,
    /// The absolute `rel=canonical` URL.
    pub canonical: Option<String>,
    /// Publication date as the page states it.
    pub published: Option<String>,
    /// Author or byline.
    pub author: Option<String>,
    /// What kind of page it is, from its structured data, `og:type` and URL (an article when
    /// nothing says otherwise); HTML pages only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_type: Option<PageType>,
}

/// What kind of page a document is, as `web::page_type` reads it: the extractor is chosen by
/// it, and RAG pipelines can filter on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PageType {
    /// A news story, blog post, essay or guide: one author's running text.
    Article,
    /// A discussion thread or Q&A page: posts by several people, in order.
    Forum,
    /// One product: name, price, description, specifications.
    Product,
    /// A shop's category or collection: many products, each a title and a snippet.
    Collection,
    /// An index of articles or other items (a blog's front page, search results, a directory).
    Listing,
    /// Reference or how-to documentation: code blocks, tables and admonitions.
    Documentation,
    /// A company's service or landing page.
    Service,
}

impl PageType {
    /// Every page type.
    pub const ALL: [PageType; 7] = [
        PageType::Article,
        PageType::Forum,
        PageType::Product,
        PageType::Collection,
        PageType::Listing,
        PageType::Documentation,
        PageType::Service,
    ];

    /// The page type of a snake_case name.
    pub fn from_name(name: &str) -> Option<PageType> {
        PageType::ALL
            .into_iter()
            .find(|known| known.as_str() == name)
    }

    /// The snake_case name, as in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            PageType::Article => "article",
            PageType::Forum => "forum",
            PageType::Product => "product",
            PageType::Collection => "collection",
            PageType::Listing => "listing",
            PageType::Documentation => "documentation",
            PageType::Service => "service",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_need_a_render_and_keep_providers_out() {
        let credentials: Credentials = serde_json::from_value(serde_json::json!({
            "cookies": [{"name": "session", "value": "s3cret", "url": "https://app.example.com/"}],
        }))
        .expect("credentials");
        let job = FetchJob {
            credentials: credentials.clone(),
            fallback: Some(Fallback::Firecrawl),
            ..FetchJob::new("https://app.example.com/inbox")
        };
        for render in [Render::Flag(false), Render::Mode(RenderMode::Auto)] {
            let error = FetchJob {
                render,
                ..job.clone()
            }
            .validate()
            .unwrap_err();
            assert!(error.contains("credentials need render: true"), "{error}");
        }
        let rendered = FetchJob {
            render: Render::Flag(true),
            ..job.clone()
        };
        assert_eq!(rendered.validate(), Ok(()));
        assert_eq!(rendered.fallback_choice(), Some(Fallback::None));
        assert_eq!(
            FetchJob::new("https://a.example/").fallback_choice(),
            None,
            "no credentials: the job's own choice"
        );
        let nameless = FetchJob {
            credentials: serde_json::from_value(serde_json::json!({
                "cookies": [{"name": "", "value": "v", "url": "https://app.example.com/"}],
            }))
            .expect("parses"),
            ..rendered.clone()
        };
        assert!(
            nameless
                .validate()
                .unwrap_err()
                .starts_with("credentials: ")
        );
        // The browser context carries the job's credentials and its headers for its origin.
        let with_headers = FetchJob {
            headers: [("X-Token", "t")].into_iter().collect(),
            ..rendered
        };
        let context = with_headers.render_credentials();
        assert!(context.cookies == credentials.cookies);
        assert_eq!(
            context.headers_for("https://app.example.com"),
            vec![("x-token", "t")]
        );
        assert!(context.headers_for("https://cdn.example.com").is_empty());
    }
}
