//! The job contract shared by producers (CLI, API) and consumers (the runner and the pools):
//! job kinds with their stable JSON form (`{"kind": "fetch", ...}`), their results, and the
//! public error codes every failure maps to.
//!
//! Not here: how jobs are queued or stored (`trawl::queue`, `trawl::store`), nor the work itself
//! (`fetch`, `web`).

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// A unit of work as it travels through the queue: options and URLs, never page bodies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Job {
    /// One URL over plain HTTP, extracted to markdown, text or HTML.
    Fetch(FetchJob),
    /// A script of browser actions on a page, in a fresh browser context.
    Browse(BrowseJob),
}

impl Job {
    /// Returns the job kind as its snake_case name (`"fetch"`).
    pub fn kind(&self) -> &'static str {
        match self {
            Job::Fetch(_) => "fetch",
            Job::Browse(_) => "browse",
        }
    }

    /// Checks the options against their bounds (the URL is checked by the fetch client).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Job::Fetch(job) => job.validate(),
            Job::Browse(job) => job.validate(),
        }
    }

    /// Returns the URL the job is about, for logs and summaries.
    pub fn url(&self) -> &str {
        match self {
            Job::Fetch(job) => &job.url,
            Job::Browse(job) => &job.url,
        }
    }

    /// The job's JSON form as it may be stored and shown: credentials (cookies, headers,
    /// localStorage) are replaced by their counts. The queue carries the job itself.
    pub fn redacted_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).expect("jobs are plain data and serialise");
        if let Job::Fetch(job) = self
            && let Some(proxy) = &job.proxy
        {
            value["proxy"] = serde_json::Value::String(crate::web::proxy::redact_option(proxy));
        }
        if let Job::Browse(job) = self
            && !job.credentials.is_empty()
        {
            value["credentials"] = serde_json::json!({
                "redacted": true,
                "cookies": job.credentials.cookies.len(),
                "headers": job.credentials.headers.len(),
                "local_storage": job.credentials.local_storage.len(),
            });
        }
        value
    }

    /// True when the job needs the browser pool (browse jobs, fetches with `render: true`).
    pub fn needs_browser(&self) -> bool {
        match self {
            Job::Fetch(job) => job.render.is_on(),
            Job::Browse(_) => true,
        }
    }
}

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
    /// The output format of `content.text`.
    #[serde(default)]
    pub extract: Format,
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
        crate::web::proxy::Choice::from_option(self.proxy.as_deref())?;
        Ok(())
    }

    /// Returns a fetch job for `url` with every option at its default.
    pub fn new(url: impl Into<String>) -> Self {
        FetchJob {
            url: url.into(),
            extract: Format::default(),
            max_chars: None,
            cache_ttl: None,
            archive: false,
            render: Render::default(),
            proxy: None,
        }
    }
}

/// Open a page in a fresh browser context and run actions on it, each with its own result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowseJob {
    /// The http or https URL loaded first.
    #[schema(format = "uri")]
    pub url: String,
    /// What to do on it, in order (at most 100); the script stops at the first failure.
    #[serde(default)]
    pub actions: Vec<crate::browse::Action>,
    /// The device the browser pretends to be.
    #[serde(default)]
    pub profile: crate::browse::Profile,
    /// Cookies, headers and localStorage to browse with (secrets: never logged, and shown
    /// only as counts when the job is read back).
    #[serde(
        default,
        skip_serializing_if = "crate::browse::pool::Credentials::is_empty"
    )]
    pub credentials: crate::browse::pool::Credentials,
}

/// Actions one browse job may run.
pub const MAX_ACTIONS: usize = 100;

impl BrowseJob {
    /// Checks the actions and credentials (the URL is checked when the job runs).
    pub fn validate(&self) -> Result<(), String> {
        if self.actions.len() > MAX_ACTIONS {
            return Err(format!(
                "a browse job runs at most {MAX_ACTIONS} actions, not {}",
                self.actions.len()
            ));
        }
        for (number, action) in self.actions.iter().enumerate() {
            action
                .validate()
                .map_err(|message| format!("action {}: {message}", number + 1))?;
        }
        self.credentials.validate()
    }
}

/// The result of a browse job: what each action did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BrowseResult {
    /// The URL loaded first.
    pub url: String,
    /// The current tab's URL at the end.
    pub final_url: String,
    /// The current tab's title at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// One outcome per action run, in order.
    pub steps: Vec<crate::browse::ActionOutcome>,
    /// True when every action succeeded (the script stops at the first failure).
    pub completed: bool,
    /// Milliseconds the whole script took.
    pub took_ms: u64,
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
}

/// A crawl: seeds, how far to go, and what to do with each page. Each page becomes a fetch
/// job of the crawl; links found on a page are followed when they are in scope, pass the
/// filters and robots.txt, and were not seen before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CrawlSpec {
    /// Where to start (http or https URLs; 1 to 100).
    pub seeds: Vec<String>,
    /// Which links to follow, relative to the seed they were found from.
    #[serde(default)]
    pub scope: crate::crawl::Scope,
    /// Only URLs whose path (and query) matches one of these globs (`*` within a segment,
    /// `**` across); none means all.
    #[serde(default)]
    pub include: Vec<String>,
    /// Never URLs whose path (and query) matches one of these globs.
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Links followed from a seed at most this many times (0: the seeds only).
    #[serde(default = "default_max_depth")]
    #[schema(maximum = 100)]
    pub max_depth: u32,
    /// Pages fetched at most (seeds and sitemap URLs included).
    #[serde(default = "default_max_pages")]
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub max_pages: u64,
    /// Also start from the sites' sitemaps (robots.txt Sitemap lines, /sitemap.xml).
    #[serde(default)]
    pub sitemap: bool,
    /// Obey robots.txt (and its Crawl-delay); on by default.
    #[serde(default = "default_true")]
    pub robots: bool,
    /// The format of each page's text.
    #[serde(default)]
    pub extract: Format,
    /// Archive every page (search index and WARC).
    #[serde(default)]
    pub archive: bool,
    /// Render pages in headless Chromium: `true`, `false` (default) or `"auto"` (when a plain
    /// page looks built by JavaScript).
    #[serde(default, skip_serializing_if = "Render::is_off")]
    pub render: Render,
    /// The proxy its pages are fetched through (as a fetch job's `proxy`: absent for the
    /// configured ones, `"direct"`, or a proxy URL). robots.txt and sitemaps, shared by every
    /// crawl of a site, go through the configured proxies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
}

fn default_max_depth() -> u32 {
    3
}

fn default_max_pages() -> u64 {
    1_000
}

fn default_true() -> bool {
    true
}

impl CrawlSpec {
    /// A crawl of `seeds` with the defaults: host scope, depth 3, 1,000 pages, robots.txt obeyed.
    pub fn new(seeds: Vec<String>) -> CrawlSpec {
        CrawlSpec {
            seeds,
            scope: crate::crawl::Scope::default(),
            include: Vec::new(),
            exclude: Vec::new(),
            max_depth: default_max_depth(),
            max_pages: default_max_pages(),
            sitemap: false,
            robots: true,
            extract: Format::default(),
            archive: false,
            render: Render::default(),
            proxy: None,
        }
    }

    /// Checks the options against their bounds and the globs (the seeds are checked by the
    /// fetch client when the crawl starts).
    pub fn validate(&self) -> Result<(), String> {
        if self.seeds.is_empty() || self.seeds.len() > 100 {
            return Err(format!(
                "a crawl needs 1 to 100 seeds, not {}",
                self.seeds.len()
            ));
        }
        if self.max_depth > 100 {
            return Err(format!("max_depth {} is above 100", self.max_depth));
        }
        if self.max_pages == 0 || self.max_pages > 1_000_000 {
            return Err(format!(
                "max_pages {} is outside 1..=1000000",
                self.max_pages
            ));
        }
        crate::web::proxy::Choice::from_option(self.proxy.as_deref())?;
        crate::crawl::UrlFilter::new(&self.include, &self.exclude)
            .map(|_| ())
            .map_err(|error| error.to_string())
    }
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
    /// True when `text` is shorter than the whole text.
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
    /// Language from `<html lang>` or `Content-Language`.
    pub lang: Option<String>,
    /// The absolute `rel=canonical` URL.
    pub canonical: Option<String>,
    /// Publication date as the page states it.
    pub published: Option<String>,
    /// Author or byline.
    pub author: Option<String>,
}

/// The public, snake_case name of every way a job can fail. Job results, API bodies and
/// metrics labels all use these names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The input is not a URL, or has raw control characters, or a bad port.
    InvalidUrl,
    /// A scheme other than http or https.
    UnsupportedScheme,
    /// The SSRF guard refused the destination (the message names the reason).
    BlockedDestination,
    /// The host name did not resolve.
    DnsError,
    /// The TCP connection failed (refused, reset, unreachable).
    ConnectError,
    /// The TLS handshake failed (bad certificate, protocol).
    TlsError,
    /// More redirects than allowed.
    TooManyRedirects,
    /// A redirect led back to a URL already visited.
    RedirectLoop,
    /// A redirect status without a usable Location header.
    RedirectMissingLocation,
    /// The total time, the connect time or the idle read time ran out.
    Timeout,
    /// The decoded body is larger than the byte limit.
    TooLarge,
    /// The response headers are too large or too many.
    HeadersTooLarge,
    /// The server answered with an error status.
    HttpStatus,
    /// The server broke the HTTP protocol (malformed response, body shorter than announced).
    ProtocolError,
    /// The content type cannot be extracted (images, archives, unknown binaries).
    UnsupportedContentType,
    /// The site answered with an anti-bot challenge, captcha or access-denied page.
    BlockedBySite,
    /// The page is a login wall.
    LoginRequired,
    /// The page has no readable content (an empty page or a JavaScript app shell).
    EmptyContent,
    /// The document could not be parsed or extracted.
    ExtractionFailed,
    /// Extraction exceeded its time or nesting limit.
    ExtractionLimit,
    /// The job was cancelled before it ended.
    Cancelled,
    /// The job's worker died on every attempt (a poison job).
    WorkerLost,
    /// A crawled page whose `rel=canonical` names a page the crawl already has, or a redirect
    /// to a page the crawl already has: stored once.
    DuplicateContent,
    /// A crawled page its host's robots.txt disallows (checked again when the page's turn
    /// comes: robots.txt may have changed, or could not be read when the link was found).
    RobotsDisallowed,
    /// A crawled page whose host's robots.txt could not be fetched (5xx, 429, network
    /// failure) for as long as `politeness.robots_wait_secs`: not fetched.
    RobotsUnreachable,
    /// A browser navigation failed with a network error the other codes do not name (the
    /// message carries Chromium's `net::ERR_*` text).
    NavigationFailed,
    /// Every browser slot of the worker is taken: try again later.
    BrowserBusy,
    /// The browser crashed, hung or could not be started (the job is retried on a fresh one).
    BrowserFailed,
    /// A fault inside trawl (store or queue unavailable); details are in the logs.
    Internal,
}

impl ErrorCode {
    /// Returns the snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidUrl => "invalid_url",
            ErrorCode::UnsupportedScheme => "unsupported_scheme",
            ErrorCode::BlockedDestination => "blocked_destination",
            ErrorCode::DnsError => "dns_error",
            ErrorCode::ConnectError => "connect_error",
            ErrorCode::TlsError => "tls_error",
            ErrorCode::TooManyRedirects => "too_many_redirects",
            ErrorCode::RedirectLoop => "redirect_loop",
            ErrorCode::RedirectMissingLocation => "redirect_missing_location",
            ErrorCode::Timeout => "timeout",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::HeadersTooLarge => "headers_too_large",
            ErrorCode::HttpStatus => "http_status",
            ErrorCode::ProtocolError => "protocol_error",
            ErrorCode::UnsupportedContentType => "unsupported_content_type",
            ErrorCode::BlockedBySite => "blocked_by_site",
            ErrorCode::LoginRequired => "login_required",
            ErrorCode::EmptyContent => "empty_content",
            ErrorCode::ExtractionFailed => "extraction_failed",
            ErrorCode::ExtractionLimit => "extraction_limit",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::WorkerLost => "worker_lost",
            ErrorCode::DuplicateContent => "duplicate_content",
            ErrorCode::RobotsDisallowed => "robots_disallowed",
            ErrorCode::RobotsUnreachable => "robots_unreachable",
            ErrorCode::NavigationFailed => "navigation_failed",
            ErrorCode::BrowserBusy => "browser_busy",
            ErrorCode::BrowserFailed => "browser_failed",
            ErrorCode::Internal => "internal",
        }
    }

    /// Every code, in declaration order (for documentation and tests).
    pub const ALL: [ErrorCode; 29] = [
        ErrorCode::InvalidUrl,
        ErrorCode::UnsupportedScheme,
        ErrorCode::BlockedDestination,
        ErrorCode::DnsError,
        ErrorCode::ConnectError,
        ErrorCode::TlsError,
        ErrorCode::TooManyRedirects,
        ErrorCode::RedirectLoop,
        ErrorCode::RedirectMissingLocation,
        ErrorCode::Timeout,
        ErrorCode::TooLarge,
        ErrorCode::HeadersTooLarge,
        ErrorCode::HttpStatus,
        ErrorCode::ProtocolError,
        ErrorCode::UnsupportedContentType,
        ErrorCode::BlockedBySite,
        ErrorCode::LoginRequired,
        ErrorCode::EmptyContent,
        ErrorCode::ExtractionFailed,
        ErrorCode::ExtractionLimit,
        ErrorCode::Cancelled,
        ErrorCode::WorkerLost,
        ErrorCode::DuplicateContent,
        ErrorCode::RobotsDisallowed,
        ErrorCode::RobotsUnreachable,
        ErrorCode::NavigationFailed,
        ErrorCode::BrowserBusy,
        ErrorCode::BrowserFailed,
        ErrorCode::Internal,
    ];
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure as stored and shown: the public code, a human message, and whether trying again
/// later may succeed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobError {
    /// The public error code.
    pub code: ErrorCode,
    /// What went wrong, in lowercase words, with the URL's origin at most (never secrets).
    pub message: String,
    /// HTTP status, for `http_status`, `blocked_by_site` and friends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What gave a block page away (`blocked_by_site`, `login_required`, `empty_content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// True when a later attempt may succeed (timeouts, resets, 5xx, 429).
    #[serde(default)]
    pub transient: bool,
    /// Seconds the server asked to wait before trying again (Retry-After).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

impl JobError {
    /// Returns an error with `code` and `message`, neither transient nor with details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        JobError {
            code,
            message: message.into(),
            status: None,
            evidence: None,
            transient: false,
            retry_after: None,
        }
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for JobError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_json_form_is_tagged_by_kind() {
        let job: Job = serde_json::from_str(r#"{"kind":"fetch","url":"https://example.com/"}"#)
            .expect("valid job");
        assert_eq!(job, Job::Fetch(FetchJob::new("https://example.com/")));
        let json = serde_json::to_value(&job).expect("serialises");
        assert_eq!(json["kind"], "fetch");
        assert_eq!(json["extract"], "markdown");
    }

    #[test]
    fn unknown_fields_and_kinds_are_refused() {
        assert!(serde_json::from_str::<Job>(r#"{"kind":"fetch","url":"x","nope":1}"#).is_err());
        assert!(serde_json::from_str::<Job>(r#"{"kind":"teleport","url":"x"}"#).is_err());
    }

    #[test]
    fn error_codes_serialise_as_their_names() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).expect("serialises");
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }
}
