//! Web search providers, each a client of the real service's public interface, as plain async
//! functions over the guarded client: SearxNG's JSON API (`searxng`), DuckDuckGo's HTML results
//! page (`duckduckgo`), its instant answers (`instant`) and its image search (`images`).
//! Each returns what the provider said ([`Found`], image hits) or a typed [`Error`]; this file
//! holds the configuration (`[search]`), the errors, the per-provider pace ([`Pace`]: at most
//! one request per interval) and [`rank`], which deduplicates results by normalised URL and
//! numbers them.
//!
//! Not here: choosing a provider and falling over, caching, metrics, or turning results into
//! fetch jobs (`trawl::web_search` and the runner). The job's data and result types are the
//! contract's (`crate::job`).

pub mod duckduckgo;
pub mod images;
pub mod instant;
pub mod searxng;

use std::collections::HashSet;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;

use crate::job::{
    ErrorCode, Infobox, InstantAnswer, JobError, Provider, SearchHit, UnresponsiveEngine,
};
pub use crate::web::client::base_url;
use crate::web::{self, normalize::normalize_url};

/// Largest provider answer read, in bytes (a results page is far smaller).
pub const MAX_RESPONSE_BYTES: u64 = 4 * 1024 * 1024;

/// The `[search]` section: the providers' base URLs (the operator's: a provider may sit on a
/// private address, and exactly its origin is then reachable), what SearxNG may not use, the
/// pace of each provider and the cache of answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Seconds an answer is served from the cache (0: never cached).
    pub cache_ttl_secs: u64,
    /// Answers kept in the cache at most.
    pub cache_entries: usize,
    /// The SearxNG instance.
    pub searxng: SearxngConfig,
    /// DuckDuckGo's endpoints.
    pub duckduckgo: DuckDuckGoConfig,
}

/// `[search.searxng]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SearxngConfig {
    /// The instance's base URL (`http://searxng:8080`); set, SearxNG is the `auto` provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Engines never requested (`google`, `bing`); a search asking for one is refused with
    /// `search_engine_forbidden`.
    pub forbid_engines: Vec<String>,
    /// Least time between two requests to the instance, in milliseconds (0: no limit).
    pub min_interval_ms: u64,
}

/// `[search.duckduckgo]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DuckDuckGoConfig {
    /// The HTML results page.
    pub html_url: String,
    /// The instant answers API.
    pub instant_url: String,
    /// The image search: its page (which holds the `vqd` token) and `i.js` beside it.
    pub images_url: String,
    /// Least time between two requests to DuckDuckGo from this process, in milliseconds.
    pub min_interval_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            cache_ttl_secs: 600,
            cache_entries: 1_000,
            searxng: SearxngConfig::default(),
            duckduckgo: DuckDuckGoConfig::default(),
        }
    }
}

impl Default for DuckDuckGoConfig {
    fn default() -> Self {
        DuckDuckGoConfig {
            html_url: "https://html.duckduckgo.com/html/".to_owned(),
            instant_url: "https://api.duckduckgo.com/".to_owned(),
            images_url: "https://duckduckgo.com/".to_owned(),
            min_interval_ms: 1_000,
        }
    }
}

impl Config {
    /// Checks the values: every URL an http(s) URL with a host and no credentials, query or
    /// fragment, engine names plain names, bounds kept.
    pub fn validate(&self) -> Result<(), String> {
        let mut urls: Vec<(&str, &str)> = vec![
            ("search.duckduckgo.html_url", &self.duckduckgo.html_url),
            (
                "search.duckduckgo.instant_url",
                &self.duckduckgo.instant_url,
            ),
            ("search.duckduckgo.images_url", &self.duckduckgo.images_url),
        ];
        if let Some(url) = &self.searxng.url {
            urls.push(("search.searxng.url", url));
        }
        for (key, url) in urls {
            base_url(url).map_err(|problem| format!("{key} = {url:?}: {problem}"))?;
        }
        if let Some(bad) = self
            .searxng
            .forbid_engines
            .iter()
            .find(|engine| engine.trim().is_empty() || engine.contains([',', '&', '=']))
        {
            return Err(format!(
                "search.searxng.forbid_engines: {bad:?} is not an engine name"
            ));
        }
        if self.cache_ttl_secs > 86_400 {
            return Err("search.cache_ttl_secs is above 86400".to_owned());
        }
        if self.cache_entries == 0 || self.cache_entries > 1_000_000 {
            return Err("search.cache_entries is outside 1..=1000000".to_owned());
        }
        for (key, ms) in [
            (
                "search.searxng.min_interval_ms",
                self.searxng.min_interval_ms,
            ),
            (
                "search.duckduckgo.min_interval_ms",
                self.duckduckgo.min_interval_ms,
            ),
        ] {
            if ms > 60_000 {
                return Err(format!("{key} is above 60000"));
            }
        }
        Ok(())
    }

    /// Whether `engine` is forbidden (names compared case-insensitively).
    pub fn forbids(&self, engine: &str) -> bool {
        self.searxng
            .forbid_engines
            .iter()
            .any(|forbidden| forbidden.trim().eq_ignore_ascii_case(engine.trim()))
    }
}

/// One result as a provider gave it, before deduplication and ranking.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// Title.
    pub title: String,
    /// The result's URL (http or https).
    pub url: Url,
    /// Snippet.
    pub snippet: String,
    /// Engines that found it.
    pub engines: Vec<String>,
    /// Publication date, as given.
    pub published: Option<String>,
}

/// What a provider said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    /// Results in the provider's order.
    pub hits: Vec<Hit>,
    /// Direct answers.
    pub answers: Vec<String>,
    /// Infoboxes.
    pub infoboxes: Vec<Infobox>,
    /// Suggestions and corrections.
    pub suggestions: Vec<String>,
    /// Engines that did not answer.
    pub unresponsive_engines: Vec<UnresponsiveEngine>,
    /// The instant answer (instant provider).
    pub instant: Option<InstantAnswer>,
}

/// Deduplicates `hits` by normalised URL (the first keeps its place and gains the others'
/// engines), keeps at most `limit`, and numbers them from 1.
pub fn rank(hits: Vec<Hit>, limit: usize) -> Vec<SearchHit> {
    let mut seen: Vec<(String, usize)> = Vec::new();
    let mut ranked: Vec<SearchHit> = Vec::new();
    for hit in hits {
        let key = dedupe_key(&hit.url);
        if let Some((_, index)) = seen.iter().find(|(seen_key, _)| *seen_key == key) {
            let kept = &mut ranked[*index];
            for engine in hit.engines {
                if !kept.engines.contains(&engine) {
                    kept.engines.push(engine);
                }
            }
            if kept.snippet.is_empty() {
                kept.snippet = hit.snippet;
            }
            if kept.published.is_none() {
                kept.published = hit.published;
            }
            continue;
        }
        if ranked.len() == limit {
            continue;
        }
        seen.push((key, ranked.len()));
        ranked.push(SearchHit {
            rank: ranked.len() + 1,
            title: hit.title,
            url: normalize_url(&hit.url).to_string(),
            snippet: hit.snippet,
            engines: hit.engines,
            published: hit.published,
        });
    }
    ranked
}

/// The key two results are the same under: the normalised URL without a trailing slash.
fn dedupe_key(url: &Url) -> String {
    let normalized = normalize_url(url).to_string();
    match normalized.strip_suffix('/') {
        Some(stripped) => stripped.to_owned(),
        None => normalized,
    }
}

/// Keeps unique strings, in order.
pub(crate) fn unique(values: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    values
        .into_iter()
        .filter(|value| !value.trim().is_empty() && seen.insert(value.clone()))
        .collect()
}

/// How long a provider's requests wait for each other: at most one request per interval from
/// this process (DuckDuckGo's default is one a second). Waiters are served in turn.
#[derive(Debug)]
pub struct Pace {
    interval: Duration,
    next: tokio::sync::Mutex<Option<tokio::time::Instant>>,
}

impl Pace {
    /// One request per `interval` (zero: no wait).
    pub fn new(interval: Duration) -> Pace {
        Pace {
            interval,
            next: tokio::sync::Mutex::new(None),
        }
    }

    /// Waits for this request's turn.
    pub async fn turn(&self) {
        if self.interval.is_zero() {
            return;
        }
        let mut next = self.next.lock().await;
        let now = tokio::time::Instant::now();
        if let Some(at) = *next
            && at > now
        {
            tokio::time::sleep_until(at).await;
        }
        *next = Some(tokio::time::Instant::now() + self.interval);
    }
}

/// What a provider's request needs: the guarded client (with the provider's origin trusted),
/// the provider's base URL and its pace.
#[derive(Debug, Clone, Copy)]
pub struct Endpoint<'a> {
    /// The client.
    pub client: &'a web::Client,
    /// The base URL (ends with `/`).
    pub base: &'a Url,
    /// The provider's pace.
    pub pace: &'a Pace,
}

impl Endpoint<'_> {
    /// GETs `url` in the provider's turn, with `headers`, reading at most
    /// [`MAX_RESPONSE_BYTES`].
    pub(crate) async fn get(
        &self,
        provider: Provider,
        url: &Url,
        headers: &[(&str, &str)],
    ) -> Result<web::Response, Error> {
        self.pace.turn().await;
        self.client
            .get_with_headers(url, headers, Some(MAX_RESPONSE_BYTES))
            .await
            .map_err(|error| Error::Web { provider, error })
    }
}

/// What went wrong with a provider, in trawl's terms.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request failed before an answer (refused by the guard, DNS, connect, timeout, …).
    #[error("{provider}: {error}")]
    Web {
        /// The provider.
        provider: Provider,
        /// The client's error.
        error: web::client::Error,
    },
    /// The provider answered 429.
    #[error("{provider}: rate limited (429){}", retry_hint(.retry_after))]
    RateLimited {
        /// The provider.
        provider: Provider,
        /// Seconds from Retry-After.
        retry_after: Option<u64>,
    },
    /// The provider answered with another error status.
    #[error("{provider}: answered status {status}")]
    Status {
        /// The provider.
        provider: Provider,
        /// The status.
        status: u16,
    },
    /// The provider's anti-bot page.
    #[error("{provider}: the answer is an anti-bot page, not results ({evidence})")]
    Blocked {
        /// The provider.
        provider: Provider,
        /// The status.
        status: u16,
        /// What gave it away.
        evidence: String,
    },
    /// The answer could not be read.
    #[error("{provider}: unreadable answer: {what}")]
    Invalid {
        /// The provider.
        provider: Provider,
        /// What is wrong with it.
        what: String,
    },
}

fn retry_hint(retry_after: &Option<u64>) -> String {
    retry_after.map_or_else(String::new, |seconds| format!(", retry after {seconds} s"))
}

impl Error {
    /// The public error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Web { error, .. } => error.code(),
            Error::RateLimited { .. } => ErrorCode::SearchRateLimited,
            Error::Status { .. } => ErrorCode::HttpStatus,
            Error::Blocked { .. } => ErrorCode::SearchBlocked,
            Error::Invalid { .. } => ErrorCode::SearchInvalidResponse,
        }
    }

    /// True when the same search may succeed later: network faults, 429, 408 and 5xx. An
    /// anti-bot page is not (asking again soon makes it worse), nor is an unreadable answer.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Web { error, .. } => error.is_transient(),
            Error::RateLimited { .. } => true,
            Error::Status { status, .. } => *status == 408 || *status >= 500,
            Error::Blocked { .. } | Error::Invalid { .. } => false,
        }
    }

    /// The provider concerned.
    pub fn provider(&self) -> Provider {
        match self {
            Error::Web { provider, .. }
            | Error::RateLimited { provider, .. }
            | Error::Status { provider, .. }
            | Error::Blocked { provider, .. }
            | Error::Invalid { provider, .. } => *provider,
        }
    }

    /// Converts into the stored, public form.
    pub fn to_job_error(&self) -> JobError {
        let mut error = JobError::new(self.code(), self.to_string());
        error.transient = self.is_transient();
        match self {
            Error::RateLimited { retry_after, .. } => {
                error.status = Some(429);
                error.retry_after = *retry_after;
            }
            Error::Status { status, .. } => error.status = Some(*status),
            Error::Blocked {
                status, evidence, ..
            } => {
                error.status = Some(*status);
                error.evidence = Some(evidence.clone());
            }
            Error::Web { error: web, .. } => {
                error.evidence = web.block_reason().map(|reason| reason.as_str().to_owned());
            }
            Error::Invalid { .. } => {}
        }
        error
    }
}

/// The error for a response whose status is not a success: 429 with its Retry-After, else the
/// status.
pub(crate) fn status_error(provider: Provider, response: &web::Response) -> Error {
    if response.status == 429 {
        let retry_after = response
            .header("retry-after")
            .and_then(|value| value.trim().parse::<u64>().ok());
        return Error::RateLimited {
            provider,
            retry_after,
        };
    }
    Error::Status {
        provider,
        status: response.status,
    }
}

/// The body as text (providers answer UTF-8).
pub(crate) fn body_text(response: &web::Response) -> String {
    String::from_utf8_lossy(&response.body).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(url: &str, engine: &str) -> Hit {
        Hit {
            title: format!("title of {url}"),
            url: Url::parse(url).expect("url"),
            snippet: String::new(),
            engines: vec![engine.to_owned()],
            published: None,
        }
    }

    #[test]
    fn results_are_deduplicated_by_normalised_url_and_ranked() {
        let ranked = rank(
            vec![
                hit("https://a.example/page?utm_source=x", "google"),
                hit("https://b.example/", "bing"),
                hit("https://A.example/page#top", "brave"),
                hit("https://b.example", "google"),
                hit("https://c.example/", "bing"),
            ],
            2,
        );
        assert_eq!(ranked.len(), 2);
        assert_eq!(ranked[0].rank, 1);
        assert_eq!(ranked[0].url, "https://a.example/page");
        assert_eq!(ranked[0].engines, ["google", "brave"]);
        assert_eq!(ranked[1].url, "https://b.example/");
        assert_eq!(ranked[1].engines, ["bing", "google"]);
    }

    #[test]
    fn base_urls_are_checked_and_end_with_a_slash() {
        assert_eq!(
            base_url("http://searxng:8080").expect("valid").as_str(),
            "http://searxng:8080/"
        );
        assert_eq!(
            base_url("https://html.duckduckgo.com/html")
                .expect("valid")
                .as_str(),
            "https://html.duckduckgo.com/html/"
        );
        for bad in ["ftp://x/", "http://u:p@x/", "http://x/?q=1", "nope"] {
            assert!(base_url(bad).is_err(), "{bad}");
        }
        assert!(Config::default().validate().is_ok());
    }

    #[test]
    fn errors_have_codes_and_say_whether_to_retry() {
        let limited = Error::RateLimited {
            provider: Provider::Searxng,
            retry_after: Some(7),
        };
        let job = limited.to_job_error();
        assert_eq!(job.code, ErrorCode::SearchRateLimited);
        assert_eq!(job.retry_after, Some(7));
        assert!(job.transient);
        let blocked = Error::Blocked {
            provider: Provider::Duckduckgo,
            status: 202,
            evidence: "status 202".into(),
        };
        assert_eq!(blocked.code(), ErrorCode::SearchBlocked);
        assert!(!blocked.is_transient());
        assert!(
            Error::Status {
                provider: Provider::Searxng,
                status: 503
            }
            .is_transient()
        );
    }
}
