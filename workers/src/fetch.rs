//! The fetch pool's work: `FetchJob` → `Fetched` (the page's text, metadata and raw body), or a
//! typed `fetch::Error`. Fetches through the guarded client, decides by content type (HTML →
//! Readability, text passes through, PDF → text, binaries refused, lying labels sniffed), and
//! refuses to return block pages as content.
//!
//! When trawl's own extraction finds no readable content, a configured fallback provider
//! (Firecrawl, Crawl4AI) may read the page instead ([`rescue`]), or read every page
//! (`fetch.readability = false`: [`by_provider`]).
//!
//! Not here: caching, storing or retrying (the runner does those with what this returns), the
//! providers' protocols (`fallback`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use serde::{Deserialize, Serialize};
use url::Url;

use crate::fallback::{self, Crawl4aiConfig, Fallback, FirecrawlConfig, Providers};
use crate::job::{Content, ErrorCode, Extractor, FetchJob, FetchResult, Format, JobError, Meta};
use crate::web::blockpage::{self, BlockPage};
use crate::web::extract::{self, Heading};
use crate::web::lang;
use crate::web::{self, charset, pdf};

/// Fetch options and their bounds. Every field is a `trawl.toml` key under `[fetch]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Characters of text returned in a result when the job does not say.
    pub max_chars: usize,
    /// Hard cap on `max_chars`, whatever a job asks.
    pub max_chars_cap: usize,
    /// Seconds a stored page is served from the cache when the job does not say (0 disables).
    pub cache_ttl_secs: u64,
    /// Seconds extraction of one document may take before `extraction_limit`.
    pub extraction_timeout_secs: u64,
    /// The extraction provider asked when trawl's own extraction finds no readable content:
    /// `none`, `firecrawl`, `crawl4ai` or `auto` (every configured one, Firecrawl first;
    /// none configured: none). A job may choose its own.
    pub fallback: Fallback,
    /// Whether trawl's own extraction (Readability) runs; `false` sends every page straight
    /// to the fallback provider (one must be configured).
    pub readability: bool,
    /// Firecrawl's scrape API.
    pub firecrawl: FirecrawlConfig,
    /// A Crawl4AI server.
    pub crawl4ai: Crawl4aiConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_chars: 20_000,
            max_chars_cap: 1_000_000,
            cache_ttl_secs: 15 * 60,
            extraction_timeout_secs: 20,
            fallback: Fallback::Auto,
            readability: true,
            firecrawl: FirecrawlConfig::default(),
            crawl4ai: Crawl4aiConfig::default(),
        }
    }
}

/// A `[fetch]` setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `max_chars` is zero or above `max_chars_cap`.
    #[error("fetch.max_chars = {max_chars} must be within 1..=fetch.max_chars_cap ({cap})")]
    MaxChars {
        /// `max_chars`.
        max_chars: usize,
        /// `max_chars_cap`.
        cap: usize,
    },
    /// `extraction_timeout_secs` is zero.
    #[error("fetch.extraction_timeout_secs must be at least 1")]
    ExtractionTimeout,
    /// A provider's key is an `env:` reference to an unset variable, or the providers do not
    /// fit together (`readability = false` without one).
    #[error("{0}")]
    Fallback(String),
}

impl Config {
    /// Checks the values against each other.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_chars == 0 || self.max_chars > self.max_chars_cap {
            return Err(ConfigError::MaxChars {
                max_chars: self.max_chars,
                cap: self.max_chars_cap,
            });
        }
        if self.extraction_timeout_secs == 0 {
            return Err(ConfigError::ExtractionTimeout);
        }
        for (key, value) in [
            ("fetch.firecrawl.key", &self.firecrawl.key),
            ("fetch.crawl4ai.key", &self.crawl4ai.key),
        ] {
            if let Some(value) = value {
                value.resolve(key).map_err(ConfigError::Fallback)?;
            }
        }
        Ok(())
    }

    /// Replaces the providers' `env:NAME` keys by the variables' values, read by `lookup`
    /// (the configuration's loader passes the process environment): an unset variable is an
    /// error naming the key.
    pub fn resolve_keys(
        &mut self,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<(), ConfigError> {
        for (key, value) in [
            ("fetch.firecrawl.key", &mut self.firecrawl.key),
            ("fetch.crawl4ai.key", &mut self.crawl4ai.key),
        ] {
            if let Some(value) = value {
                *value = value
                    .resolve_from(key, lookup)
                    .map_err(ConfigError::Fallback)?;
            }
        }
        Ok(())
    }

    /// Returns the characters to return for a job: its own value or the default, capped.
    pub fn max_chars_for(&self, job: &FetchJob) -> usize {
        job.max_chars
            .unwrap_or(self.max_chars)
            .clamp(1, self.max_chars_cap)
    }

    /// Returns the cache time-to-live for a job.
    pub fn cache_ttl_for(&self, job: &FetchJob) -> Duration {
        Duration::from_secs(job.cache_ttl.unwrap_or(self.cache_ttl_secs))
    }
}

/// What a fetch needs.
#[derive(Debug, Clone)]
pub struct Deps {
    /// The guarded HTTP client.
    pub client: web::Client,
    /// Fetch options.
    pub config: Config,
    /// The fallback extraction providers of `config` (none: [`Providers::none`]).
    pub providers: Providers,
    /// Extractions running at once: one per core. Extraction is CPU-bound, so more at once
    /// only holds more parsed documents in memory and more blocking threads (each with its
    /// allocator cache); the fetches themselves are not limited by it.
    extractions: Arc<tokio::sync::Semaphore>,
}

impl Deps {
    /// The fetch pool's dependencies, with the providers `config` names built over `client`
    /// (keys resolved, base URLs locked): a provider that cannot be used is an error here,
    /// before any job runs.
    pub fn new(client: web::Client, config: Config) -> Result<Deps, ConfigError> {
        let providers = Providers::new(
            &client,
            config.fallback,
            config.readability,
            &config.firecrawl,
            &config.crawl4ai,
        )
        .map_err(ConfigError::Fallback)?;
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        Ok(Deps {
            client,
            config,
            providers,
            extractions: Arc::new(tokio::sync::Semaphore::new(cores)),
        })
    }
}

/// Everything about a fetched page except its text: stored with the page and enough, with the
/// text, to rebuild the job result when the page is served from the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageInfo {
    /// The URL as requested.
    pub url: String,
    /// The URL after redirects.
    pub final_url: String,
    /// Final HTTP status.
    pub status: u16,
    /// Content type without parameters, as judged (sniffed when the label lied).
    pub content_type: String,
    /// Page title.
    pub title: Option<String>,
    /// How the text was found.
    pub extractor: Extractor,
    /// Something the reader should know.
    pub warning: Option<String>,
    /// Links in document order.
    pub links: Vec<String>,
    /// Head metadata.
    pub meta: Meta,
    /// Headings of the text.
    pub outline: Vec<Heading>,
    /// The format of the text.
    pub format: Format,
    /// When it was fetched (RFC 3339, UTC).
    pub fetched_at: String,
    /// Milliseconds fetch and extraction took.
    pub took_ms: u64,
    /// Whether the page was over `http.max_bytes` even with its scripts, styles, SVG and
    /// comments dropped, and so cut there (a warning says so): the text is of what was kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Whether the stored body is the page with its scripts, styles, SVG and comments dropped
    /// (it was over `http.max_bytes`), not the bytes as served: its WARC record says
    /// `WARC-Truncated: length`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reduced: bool,
}

impl PageInfo {
    /// Whether the page is an HTML document (its content type as judged).
    pub fn is_html(&self) -> bool {
        matches!(
            self.content_type.as_str(),
            "text/html" | "application/xhtml+xml"
        )
    }
}

/// A fetched page: its description, its whole text and the raw response.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// Everything but the text.
    pub info: PageInfo,
    /// The whole extracted text.
    pub text: String,
    /// The body as received (transfer encoding removed), for the raw-page store and WARC.
    pub raw: Bytes,
    /// The final response's headers, for WARC.
    pub headers: Vec<(String, String)>,
    /// The address the final response came from, for WARC.
    pub ip: Option<std::net::IpAddr>,
    /// The page's visible text before extraction, one line per block (`web::lines`), read
    /// from the extraction's tree for a job going to the archive (`FetchJob::archive`): the
    /// archive pool finds the page's rest in it without parsing the raw body again.
    pub lines: Option<String>,
}

/// Why a fetch produced no page.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The network part failed or was refused.
    #[error(transparent)]
    Web(#[from] web::client::Error),
    /// The server answered with an error status.
    #[error("http status {status}")]
    HttpStatus {
        /// The status.
        status: u16,
        /// Seconds from Retry-After, when given.
        retry_after: Option<u64>,
    },
    /// A content type trawl cannot turn into text.
    #[error("unsupported content type {0}")]
    UnsupportedContentType(String),
    /// A wall, challenge or empty shell instead of content.
    #[error("{}", block_message(.0))]
    BlockPage(BlockPage),
    /// The PDF could not be read.
    #[error(transparent)]
    Pdf(#[from] pdf::Error),
    /// Extraction did not finish within its time limit.
    #[error("extraction took longer than {seconds} s")]
    ExtractionTimeout {
        /// The limit.
        seconds: u64,
    },
    /// The document is over the parsing budget (too many or too deeply nested elements):
    /// refused before its tree was built.
    #[error("extraction refused: {0}")]
    ExtractionBudget(web::budget::Exceeded),
    /// Extraction failed (a panic inside a parser, a bad page URL).
    #[error("extraction failed: {0}")]
    Extraction(String),
}

impl Error {
    /// Returns the public error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Web(error) => error.code(),
            Error::HttpStatus { .. } => ErrorCode::HttpStatus,
            Error::UnsupportedContentType(_) => ErrorCode::UnsupportedContentType,
            Error::BlockPage(page) => page.code,
            Error::Pdf(_) | Error::Extraction(_) => ErrorCode::ExtractionFailed,
            Error::ExtractionTimeout { .. } | Error::ExtractionBudget(_) => {
                ErrorCode::ExtractionLimit
            }
        }
    }

    /// True when a later attempt may succeed: network faults, 408, 425, 429 and 5xx.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Web(error) => error.is_transient(),
            Error::HttpStatus { status, .. } => matches!(status, 408 | 425 | 429 | 500..=599),
            _ => false,
        }
    }

    /// Converts into the stored, public form.
    pub fn to_job_error(&self) -> JobError {
        let mut error = JobError::new(self.code(), self.to_string());
        error.transient = self.is_transient();
        match self {
            Error::HttpStatus {
                status,
                retry_after,
            } => {
                error.status = Some(*status);
                error.retry_after = *retry_after;
            }
            Error::BlockPage(page) => error.evidence = Some(page.evidence.clone()),
            // The SSRF reason (`loopback`, `private`, ...), also the metrics label.
            Error::Web(web_error) => {
                error.evidence = web_error
                    .block_reason()
                    .map(|reason| reason.as_str().to_owned());
            }
            _ => {}
        }
        error
    }
}

fn block_message(page: &BlockPage) -> &'static str {
    match page.code {
        ErrorCode::BlockedBySite => "the site answered with a challenge or block page, not content",
        ErrorCode::LoginRequired => "the page asks to sign in",
        _ => "the page has no readable content",
    }
}

/// What the bytes are, whatever the label says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Html,
    /// Plain text or markdown: normalised like extracted text.
    Text,
    /// JSON, XML, CSV and other structured text: passed through as is.
    Data,
    Pdf,
    Binary(&'static str),
}

/// Fetches and extracts one page.
pub async fn run(job: &FetchJob, deps: &Deps) -> Result<Fetched, Error> {
    run_guarded(job, deps, None).await
}

/// [`run`], asking `guard` before each redirect is followed (see
/// [`web::Client::get_guarded`]).
pub async fn run_guarded(
    job: &FetchJob,
    deps: &Deps,
    guard: Option<&web::client::RedirectGuard>,
) -> Result<Fetched, Error> {
    let started = Instant::now();
    let url = deps.client.parse_url(&job.url)?;
    let choice =
        web::proxy::Choice::from_option(job.proxy.as_deref()).map_err(web::client::Error::Proxy)?;
    let response = deps
        .client
        .get_guarded(&url, None, &choice, guard, &job.headers)
        .await?;
    let fetched_at = jiff::Timestamp::now().to_string();
    let label = response
        .content_type()
        .map(|value| {
            value
                .split(';')
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default();
    let kind = judge_kind(&label, &response.body);
    let status = response.status;
    if status >= 400 && kind != Kind::Html {
        return Err(status_error(&response));
    }
    let mut warnings: Vec<String> = Vec::new();
    warnings.extend(response.reduced.map(|reduced| reduced.warning()));
    let (content_type, extracted) = match kind {
        Kind::Binary(what) => {
            let shown = if label.is_empty() {
                what.to_owned()
            } else {
                format!("{label} ({what})")
            };
            return Err(Error::UnsupportedContentType(shown));
        }
        Kind::Pdf => {
            let raw = response.body.clone();
            let text =
                spawn_extraction(deps, move || pdf::pdf_to_text(&raw).map_err(Error::from)).await?;
            (
                "application/pdf".to_owned(),
                passthrough(text, Extractor::Pdf),
            )
        }
        Kind::Text | Kind::Data => {
            let decoded = charset::decode(&response.body, response.content_type(), false);
            warnings.extend(decoded.warning);
            let text = if kind == Kind::Text {
                extract::normalize_text(&decoded.text)
            } else {
                decoded.text
            };
            (label.clone(), passthrough(text, Extractor::Passthrough))
        }
        Kind::Html => {
            if !matches!(label.as_str(), "text/html" | "application/xhtml+xml") {
                warnings.push(format!("labelled {:?} but the body is html", label));
            }
            let decoded = charset::decode(&response.body, response.content_type(), true);
            warnings.extend(decoded.warning);
            let page_url = response.final_url.clone();
            let extracted = match extract_document(
                deps,
                decoded.text,
                page_url,
                status,
                job.format,
                job.archive,
            )
            .await
            {
                Err(Error::HttpStatus { .. }) => return Err(status_error(&response)),
                other => other?,
            };
            ("text/html".to_owned(), extracted)
        }
    };
    warnings.extend(extracted.warning.clone());
    let final_url = response.final_url.to_string();
    let info = PageInfo {
        url: url.to_string(),
        final_url,
        status,
        content_type,
        title: extracted.title,
        extractor: extracted.extractor,
        warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
        links: extracted.links,
        meta: Meta {
            lang: {
                let declared = extracted
                    .meta
                    .lang
                    .or_else(|| response.header("content-language").map(str::to_owned));
                // A data document (JSON, XML) is not prose, and HTML output is markup: no
                // guess from keys or tag names.
                if kind == Kind::Data || job.format == Format::Html {
                    declared
                } else {
                    lang::or_detect(declared, &extracted.text)
                }
            },
            ..extracted.meta
        },
        outline: extracted.outline,
        format: job.format,
        fetched_at,
        took_ms: started.elapsed().as_millis() as u64,
        truncated: response.reduced.is_some_and(|reduced| reduced.truncated),
        reduced: response.reduced.is_some(),
    };
    let headers = response
        .headers
        .iter()
        .map(|(name, value)| {
            (
                name.to_string(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect();
    Ok(Fetched {
        info,
        text: extracted.text,
        raw: response.body,
        headers,
        ip: response.remote_addr.map(|addr| addr.ip()),
        lines: extracted.lines,
    })
}

/// Whether trawl's own outcome is one a fallback provider may rescue: no readable content
/// (`empty_content`), a challenge page (`blocked_by_site`), a failed extraction, or the whole
/// body converted because no article was found (`extractor: "fallback"`).
pub fn wants_rescue(outcome: &Result<Fetched, JobError>) -> bool {
    match outcome {
        Ok(fetched) => fetched.info.extractor == Extractor::Fallback,
        Err(error) => matches!(
            error.code,
            ErrorCode::EmptyContent | ErrorCode::BlockedBySite | ErrorCode::ExtractionFailed
        ),
    }
}

/// trawl's own `outcome` for `job`, rescued by a fallback provider when it found no readable
/// content ([`wants_rescue`]) and the job's choice (else `fetch.fallback`) names one. The
/// first provider that reads the page gives it (`extractor: "firecrawl"` or `"crawl4ai"`,
/// trawl's failure kept as the first warning). When every one fails, the original outcome
/// stands (failed closed with its own code), the providers' failures added to its message or
/// warning. `guard` is asked about where a provider ended when that is not the job's URL (a
/// crawl's robots.txt); a refusal counts as that provider's failure.
pub async fn rescue(
    deps: &Deps,
    job: &FetchJob,
    outcome: Result<Fetched, JobError>,
    guard: Option<&web::client::RedirectGuard>,
) -> Result<Fetched, JobError> {
    let chosen = deps.providers.chosen(job.fallback_choice());
    if chosen.is_empty() || !wants_rescue(&outcome) {
        return outcome;
    }
    let started = Instant::now();
    let first = match &outcome {
        Ok(fetched) => fetched
            .info
            .warning
            .clone()
            .unwrap_or_else(|| "no article found".to_owned()),
        Err(error) => format!("{}: {}", error.code, error.message),
    };
    let Ok(url) = deps.client.parse_url(&job.url) else {
        return outcome;
    };
    let mut failures: Vec<String> = Vec::new();
    for provider in chosen {
        let attempt = match provider {
            Ok(provider) => ask(deps, provider, &url, job.format, guard, started).await,
            Err(unconfigured) => Err(unconfigured.to_job_error()),
        };
        match attempt {
            Ok(mut fetched) => {
                let mut warnings = vec![format!("trawl's extraction: {first}")];
                warnings.extend(failures);
                warnings.extend(fetched.info.warning.take());
                fetched.info.warning = Some(warnings.join("; "));
                return Ok(fetched);
            }
            Err(error) => failures.push(error.message),
        }
    }
    let failed = format!("fallback: {}", failures.join("; "));
    match outcome {
        Ok(mut fetched) => {
            let mut warnings: Vec<String> = fetched.info.warning.take().into_iter().collect();
            warnings.push(failed);
            fetched.info.warning = Some(warnings.join("; "));
            Ok(fetched)
        }
        Err(mut error) => {
            error.message = format!("{}; {failed}", error.message);
            Err(error)
        }
    }
}

/// Reads `job`'s page through the fallback providers alone (`fetch.readability = false`), in
/// turn: the first that reads it gives it; when every one fails, the last one's error, its
/// message naming each.
pub async fn by_provider(deps: &Deps, job: &FetchJob) -> Result<Fetched, JobError> {
    let started = Instant::now();
    let url = deps
        .client
        .parse_url(&job.url)
        .map_err(|error| Error::Web(error).to_job_error())?;
    let mut failures: Vec<String> = Vec::new();
    let mut last: Option<JobError> = None;
    for provider in deps.providers.chosen(job.fallback_choice()) {
        let attempt = match provider {
            Ok(provider) => ask(deps, provider, &url, job.format, None, started).await,
            Err(unconfigured) => Err(unconfigured.to_job_error()),
        };
        match attempt {
            Ok(mut fetched) => {
                if !failures.is_empty() {
                    let mut warnings = failures;
                    warnings.extend(fetched.info.warning.take());
                    fetched.info.warning = Some(warnings.join("; "));
                }
                return Ok(fetched);
            }
            Err(error) => {
                failures.push(error.message.clone());
                last = Some(error);
            }
        }
    }
    Err(match last {
        Some(mut error) => {
            error.message = failures.join("; ");
            error
        }
        None => JobError::new(
            ErrorCode::ProviderFailed,
            "no fallback provider is configured for this job (fetch.readability = false)",
        ),
    })
}

/// Asks one provider and turns its answer into a page in the job's format: markdown as the
/// provider wrote it; text and HTML converted by trawl from the provider's HTML of the main
/// content (its markdown, with a warning, when it gave none).
async fn ask(
    deps: &Deps,
    provider: &fallback::Provider,
    url: &Url,
    format: Format,
    guard: Option<&web::client::RedirectGuard>,
    started: Instant,
) -> Result<Fetched, JobError> {
    let scraped = fallback::scrape(provider, &deps.client, url)
        .await
        .map_err(|error| error.to_job_error())?;
    if let Some(guard) = guard
        && scraped.final_url != *url
        && let Err((code, reason)) = guard(scraped.final_url.clone()).await
    {
        return Err(JobError::new(
            code,
            format!(
                "{}: ended at {}, which is refused: {reason}",
                scraped.provider,
                web::client::origin_of(&scraped.final_url)
            ),
        ));
    }
    let mut warnings: Vec<String> = scraped.warning.iter().cloned().collect();
    let text = match (format, &scraped.html) {
        (Format::Markdown, _) => extract::normalize_text(&scraped.markdown),
        (_, Some(html)) => {
            let html = html.clone();
            let converted = spawn_extraction(deps, move || {
                extract::extract_whole_page(&html, format)
                    .map_err(|error| Error::Extraction(error.to_string()))
            })
            .await
            .map_err(|error| error.to_job_error())?;
            extract::normalize_text(&converted)
        }
        (_, None) => {
            warnings.push(format!(
                "{} gave markdown only, returned as the {} text",
                scraped.provider,
                format.as_str()
            ));
            extract::normalize_text(&scraped.markdown)
        }
    };
    let outline = extract::markdown_outline(&scraped.markdown);
    let (raw, raw_type) = match scraped.raw_html.or(scraped.html) {
        Some(html) => (html, "text/html; charset=utf-8"),
        None => (scraped.markdown.clone(), "text/markdown; charset=utf-8"),
    };
    let extractor = match scraped.provider {
        fallback::Kind::Firecrawl => Extractor::Firecrawl,
        fallback::Kind::Crawl4ai => Extractor::Crawl4ai,
    };
    let info = PageInfo {
        url: url.to_string(),
        final_url: scraped.final_url.to_string(),
        status: scraped.status,
        content_type: "text/html".to_owned(),
        title: scraped.title,
        extractor,
        warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
        links: scraped.links,
        meta: Meta {
            description: scraped.description,
            lang: lang::or_detect(scraped.lang, &scraped.markdown),
            ..Meta::default()
        },
        outline,
        format,
        fetched_at: jiff::Timestamp::now().to_string(),
        took_ms: started.elapsed().as_millis() as u64,
        truncated: false,
        reduced: false,
    };
    Ok(Fetched {
        info,
        text,
        raw: Bytes::from(raw),
        headers: vec![("content-type".to_owned(), raw_type.to_owned())],
        ip: None,
        lines: None,
    })
}

/// Extracts an HTML document (fetched, or as the browser rendered it) and refuses block pages:
/// a challenge or a login wall is [`Error::BlockPage`] whatever the status; an error status
/// with an empty page is [`Error::HttpStatus`] (without headers: the caller adds them).
/// `read_lines`: the page's visible lines are read too ([`extract::Extracted::lines`]).
pub async fn extract_document(
    deps: &Deps,
    html: String,
    page_url: Url,
    status: u16,
    format: Format,
    read_lines: bool,
) -> Result<extract::Extracted, Error> {
    let (extracted, block) =
        extract_unjudged(deps, html, page_url, status, format, read_lines).await?;
    match block {
        // An error status with a small page is an error status; a challenge or a login wall
        // says more than the status does.
        Some(block) if status < 400 || block.code != ErrorCode::EmptyContent => {
            Err(Error::BlockPage(block))
        }
        _ if status >= 400 => Err(Error::HttpStatus {
            status,
            retry_after: None,
        }),
        _ => Ok(extracted),
    }
}

/// Extracts a document like [`extract_document`], but hands back the block-page verdict
/// (a challenge, a login wall, an empty page) instead of failing on it: for a page a caller
/// chose to be on (a browse job's final page), where the verdict is a warning.
pub async fn extract_unjudged(
    deps: &Deps,
    html: String,
    page_url: Url,
    status: u16,
    format: Format,
    read_lines: bool,
) -> Result<(extract::Extracted, Option<BlockPage>), Error> {
    spawn_extraction(deps, move || {
        let extracted = if read_lines {
            extract::extract_html_reading_lines(&html, &page_url, format)
        } else {
            extract::extract_html(&html, &page_url, format)
        }
        .map_err(|error| match error {
            extract::Error::Limit(exceeded) => Error::ExtractionBudget(exceeded),
            other => Error::Extraction(other.to_string()),
        })?;
        let block = blockpage::detect(status, &html, &extracted);
        Ok((extracted, block))
    })
    .await
}

/// Builds the closed job result from a page's description and whole text.
pub fn build_result(
    info: &PageInfo,
    text: &str,
    page_id: &str,
    content_hash: &str,
    cached: bool,
    max_chars: usize,
) -> FetchResult {
    let raw_length = text.chars().count();
    let shown = truncate_chars(text, max_chars);
    let length = shown.chars().count();
    let final_url = if info.final_url.len() > 2_048 {
        info.url.clone()
    } else {
        info.final_url.clone()
    };
    FetchResult {
        url: info.url.clone(),
        final_url,
        status: info.status,
        content_type: info.content_type.clone(),
        title: info
            .title
            .as_deref()
            .map(|title| truncate_chars(title, 256).to_owned()),
        extractor: info.extractor,
        warning: info
            .warning
            .as_deref()
            .map(|warning| truncate_chars(warning, 256).to_owned()),
        cached,
        content: Content {
            text: shown.to_owned(),
            length,
            raw_length,
            truncated: length < raw_length || info.truncated,
            fetched_at: info.fetched_at.clone(),
            took_ms: if cached { 0 } else { info.took_ms },
        },
        links: info.links.clone(),
        meta: info.meta.clone(),
        page_id: page_id.to_owned(),
        content_hash: content_hash.to_owned(),
    }
}

/// Returns the longest prefix of `text` with at most `max` characters.
pub fn truncate_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((index, _)) => &text[..index],
        None => text,
    }
}

fn passthrough(text: String, extractor: Extractor) -> extract::Extracted {
    extract::Extracted {
        title: None,
        body_chars: text.len(),
        text,
        extractor,
        warning: None,
        links: Vec::new(),
        meta: Meta::default(),
        outline: Vec::new(),
        lines: None,
    }
}

/// Runs CPU-bound extraction on a blocking thread under the extraction time limit, once one of
/// the process's extraction slots (one per core) is free; the limit runs from then. A panic
/// inside a parser becomes an error: one bad page must not take the worker down.
async fn spawn_extraction<T, F>(deps: &Deps, work: F) -> Result<T, Error>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, Error> + Send + 'static,
{
    let seconds = deps.config.extraction_timeout_secs;
    // The semaphore is never closed. The slot goes with the work: an extraction past its
    // time limit still holds its core until it ends.
    let slot = deps.extractions.clone().acquire_owned().await.ok();
    let handle = tokio::task::spawn_blocking(move || {
        let _slot = slot;
        work()
    });
    match tokio::time::timeout(Duration::from_secs(seconds), handle).await {
        Ok(Ok(result)) => result,
        Ok(Err(join_error)) => Err(Error::Extraction(format!(
            "extractor crashed: {join_error}"
        ))),
        // The thread runs on to completion in the background; its output is dropped.
        Err(_) => Err(Error::ExtractionTimeout { seconds }),
    }
}

fn status_error(response: &web::Response) -> Error {
    let retry_after = response
        .header("retry-after")
        .and_then(|value| value.trim().parse::<u64>().ok());
    Error::HttpStatus {
        status: response.status,
        retry_after,
    }
}

/// Decides what the body is from its label and its first bytes. Labels lie: images served as
/// text/html, HTML served as octet-stream or unlabelled.
fn judge_kind(label: &str, body: &[u8]) -> Kind {
    let head = &body[..body.len().min(1024)];
    if let Some(magic) = binary_magic(head) {
        return if magic == "pdf" {
            Kind::Pdf
        } else {
            Kind::Binary(magic)
        };
    }
    match label {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        "application/pdf" => Kind::Pdf,
        "text/plain" | "text/markdown" | "text/x-markdown" => Kind::Text,
        "" | "application/octet-stream" | "binary/octet-stream" => {
            if looks_like_html(head) {
                Kind::Html
            } else if head.contains(&0) {
                Kind::Binary("binary data")
            } else if std::str::from_utf8(head).is_ok() && !head.is_empty() {
                Kind::Text
            } else {
                Kind::Binary("binary data")
            }
        }
        other
            if other.starts_with("text/")
                || other == "application/json"
                || other.ends_with("+json")
                || other == "application/xml"
                || other.ends_with("+xml")
                || other == "application/javascript" =>
        {
            Kind::Data
        }
        _ => Kind::Binary("not text"),
    }
}

fn binary_magic(head: &[u8]) -> Option<&'static str> {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"%PDF-", "pdf"),
        (b"\x89PNG\r\n\x1a\n", "png image"),
        (b"\xff\xd8\xff", "jpeg image"),
        (b"GIF87a", "gif image"),
        (b"GIF89a", "gif image"),
        (b"RIFF", "riff media"),
        (b"PK\x03\x04", "zip archive"),
        (b"\x1f\x8b", "gzip data"),
        (b"\x00\x00\x01\x00", "icon"),
        (b"\x7fELF", "executable"),
        (b"wOFF", "web font"),
        (b"wOF2", "web font"),
    ];
    MAGIC
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, what)| *what)
}

fn looks_like_html(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head)
        .trim_start_matches('\u{feff}')
        .trim_start()
        .to_ascii_lowercase();
    text.starts_with("<!doctype html") || text.starts_with("<html") || text.starts_with("<head")
}

/// Converts a URL given by a user into its checked form, or the public error.
pub fn check_url(client: &web::Client, input: &str) -> Result<Url, JobError> {
    client
        .parse_url(input)
        .map_err(|error| Error::Web(error).to_job_error())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_that_lie_are_sniffed() {
        assert_eq!(
            judge_kind("text/html", b"\x89PNG\r\n\x1a\nrest"),
            Kind::Binary("png image")
        );
        assert_eq!(
            judge_kind("application/octet-stream", b"<!DOCTYPE html><p>x"),
            Kind::Html
        );
        assert_eq!(judge_kind("", b"  <html><body>x"), Kind::Html);
        assert_eq!(judge_kind("text/html", b"%PDF-1.7"), Kind::Pdf);
        assert_eq!(judge_kind("application/json", b"{}"), Kind::Data);
        assert_eq!(
            judge_kind("image/webp", b"RIFF...."),
            Kind::Binary("riff media")
        );
        assert_eq!(
            judge_kind("application/zip", b"not magic"),
            Kind::Binary("not text")
        );
    }

    #[test]
    fn results_truncate_by_characters_and_cap_long_fields() {
        let info = PageInfo {
            url: "https://a.test/".into(),
            final_url: format!("https://a.test/{}", "x".repeat(3_000)),
            status: 200,
            content_type: "text/html".into(),
            title: Some("é".repeat(300)),
            extractor: Extractor::Readability,
            warning: None,
            links: vec![],
            meta: Meta::default(),
            outline: vec![],
            format: Format::Markdown,
            fetched_at: "2026-01-01T00:00:00Z".into(),
            took_ms: 12,
            truncated: false,
            reduced: false,
        };
        let result = build_result(&info, "ééééé", "p1", "h1", false, 3);
        assert_eq!(result.content.text, "ééé");
        assert_eq!((result.content.length, result.content.raw_length), (3, 5));
        assert!(result.content.truncated);
        assert_eq!(result.final_url, "https://a.test/");
        assert_eq!(result.title.expect("title").chars().count(), 256);
        let cached = build_result(&info, "ab", "p1", "h1", true, 10);
        assert!(!cached.content.truncated);
        assert_eq!(cached.content.took_ms, 0);
    }

    #[test]
    fn server_errors_are_transient_client_errors_are_not() {
        let error = |status| Error::HttpStatus {
            status,
            retry_after: None,
        };
        assert!(error(503).is_transient());
        assert!(error(429).is_transient());
        assert!(!error(404).is_transient());
        assert_eq!(error(404).to_job_error().status, Some(404));
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn extractions_run_at_most_one_per_core() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let client =
            web::Client::new(web::Config::default(), web::Policy::default()).expect("client");
        let deps = Deps::new(client, Config::default()).expect("deps");
        let cores = std::thread::available_parallelism().map_or(1, usize::from);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let extractions = (0..cores * 4).map(|_| {
            let (running, most) = (running.clone(), most.clone());
            spawn_extraction(&deps, move || {
                let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(30));
                running.fetch_sub(1, Ordering::SeqCst);
                Ok(())
            })
        });
        for ended in futures_util::future::join_all(extractions).await {
            ended.expect("extraction");
        }
        assert_eq!(most.load(Ordering::SeqCst), cores);
    }
}
