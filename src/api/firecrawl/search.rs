//! `POST /v1/search`, `POST /v2/search`: Firecrawl's web search on trawl's providers (the
//! operator's SearxNG, else DuckDuckGo, as `POST /v1/web/search`: cached, paced, falling over),
//! each result scraped into a Firecrawl document when `scrapeOptions` asks for formats (a
//! fetch job run now per result, as a scrape's, all at once). v1 answers a list of results
//! (`url`, `title`, `description`, and the formats asked for); v2 groups them by source:
//! `web`, `images` (DuckDuckGo's image search) and `news` (SearxNG's `news` category).
//!
//! Mapped: `limit` (default 5, at most 50), `lang` with `country` (the provider's language:
//! `en-US` for SearxNG, `us-en` for DuckDuckGo), `includeDomains` and `excludeDomains` (the
//! results kept by host, out of the provider's first 50), `timeout` (the whole answer, capped
//! by `api.sync_timeout_secs`) and `ignoreInvalidURLs` (results trawl would not fetch are left
//! out). Refused with a 400 naming them, never ignored: `tbs`, `location`, `filter`,
//! Firecrawl's own `categories`, `highlights`, `enterprise`, `threatProtection`,
//! `domainTools`, `toolDetail`, and a `country` without `lang`.
//!
//! Not here: the providers' protocols (`trawl_workers::search`), the cache and paces
//! (`crate::web_search`), what scrape options mean (`options`).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use futures_util::future::join_all;
use serde::{Deserialize, Serialize};
use trawl_workers::job::object::optional_object;
use trawl_workers::job::{ErrorCode, ImagesJob, Provider, SEARCH_MAX_LIMIT, SearchHit, SearchJob};
use url::Url;
use utoipa::ToSchema;

use super::document::{Document, Metadata};
use super::options::ScrapeOptions;
use super::scrape::scrape_planned;
use super::{ErrorAnswer, FcError, FcJson};
use crate::api::AppState;
use crate::api::auth::Caller;
use crate::tenant::Scope;
use crate::web_search::{self, SearchError};

/// A source or a category: a name (`"web"`) or an object with a `type` (`{"type": "web"}`).
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(untagged)]
#[schema(as = FirecrawlSearchSource)]
pub(crate) enum Named {
    /// The name.
    Name(String),
    /// An object naming it in `type`.
    Object {
        /// The name.
        #[serde(rename = "type")]
        kind: String,
    },
}

impl Named {
    fn name(&self) -> &str {
        match self {
            Named::Name(name) | Named::Object { kind: name } => name,
        }
    }
}

/// `POST /v1/search`, `POST /v2/search`: a web search (the fields either version sends).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = FirecrawlSearchRequest)]
pub(crate) struct SearchRequest {
    /// What to search for (1 to 2,048 bytes).
    pub(crate) query: String,
    /// Results per source, 1 to 50 (default 5).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 50)]
    pub(crate) limit: Option<usize>,
    /// v2: `web` (the default), `images`, `news`.
    #[serde(default)]
    pub(crate) sources: Option<Vec<Named>>,
    /// Refused when not empty: Firecrawl's own indexes (`github`, `research`, `pdf`, …);
    /// SearxNG's categories are `POST /v1/web/search`'s `categories`.
    #[serde(default)]
    pub(crate) categories: Option<Vec<Named>>,
    /// v1: the results' language (`en`), with `country` as its region.
    #[serde(default)]
    pub(crate) lang: Option<String>,
    /// The region of `lang` (`us`); refused without `lang`.
    #[serde(default)]
    pub(crate) country: Option<String>,
    /// Only results on these domains or their subdomains.
    #[serde(default)]
    pub(crate) include_domains: Option<Vec<String>>,
    /// No results on these domains or their subdomains.
    #[serde(default)]
    pub(crate) exclude_domains: Option<Vec<String>>,
    /// Milliseconds the answer waits (capped by `api.sync_timeout_secs`); past it, 408
    /// `timeout` (the scrapes' jobs go on).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 3_600_000)]
    pub(crate) timeout: Option<u64>,
    /// Leave out the results trawl would not fetch (not http(s), or refused by the SSRF guard
    /// when scraped) instead of answering them with a warning.
    #[serde(default, rename = "ignoreInvalidURLs")]
    pub(crate) ignore_invalid_urls: Option<bool>,
    /// How each result is scraped; results are scraped only when `formats` is not empty.
    #[serde(default, deserialize_with = "optional_object")]
    pub(crate) scrape_options: Option<ScrapeOptions>,
    /// Refused (no time-based search).
    #[serde(default)]
    pub(crate) tbs: Option<String>,
    /// Refused (no geolocated search).
    #[serde(default)]
    pub(crate) location: Option<String>,
    /// v1: refused.
    #[serde(default)]
    pub(crate) filter: Option<String>,
    /// `true` is refused (no highlights are generated; results carry the provider's snippet).
    #[serde(default)]
    pub(crate) highlights: Option<bool>,
    /// Refused when not empty.
    #[serde(default)]
    pub(crate) enterprise: Option<Vec<String>>,
    /// Refused when set.
    #[serde(default)]
    pub(crate) threat_protection: Option<serde_json::Value>,
    /// `true` is refused.
    #[serde(default)]
    pub(crate) domain_tools: Option<bool>,
    /// Refused when set.
    #[serde(default)]
    pub(crate) tool_detail: Option<String>,
    /// A client's tag: accepted, not used.
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) integration: Option<String>,
    /// The client's name and version: accepted, not used.
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) origin: Option<String>,
}

/// One web or news result, with its document when the request scraped results.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = FirecrawlSearchResult)]
pub(crate) struct WebResult {
    /// The result's URL.
    pub(crate) url: String,
    /// Its title.
    pub(crate) title: String,
    /// The provider's snippet.
    pub(crate) description: String,
    /// Its rank, from 1.
    pub(crate) position: usize,
    /// News: the snippet (Firecrawl's name for it there).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) snippet: Option<String>,
    /// News: when it was published, as the provider gives it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) date: Option<String>,
    /// Scraped: the main content as markdown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) markdown: Option<String>,
    /// Scraped: the main content as cleaned HTML.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) html: Option<String>,
    /// Scraped: the body as received.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) raw_html: Option<String>,
    /// Scraped: the page's links.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) links: Option<Vec<String>>,
    /// Scraped: what is known about the page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) metadata: Option<Metadata>,
    /// Why the result has no document (its scrape failed), or the document's own warning.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) warning: Option<String>,
}

/// One image result (v2 `images`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = FirecrawlSearchImage)]
pub(crate) struct ImageResult {
    /// The image's title.
    pub(crate) title: String,
    /// The image's URL.
    pub(crate) image_url: String,
    /// Its width in pixels, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) image_width: Option<u32>,
    /// Its height in pixels, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) image_height: Option<u32>,
    /// The page it is shown on, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) url: Option<String>,
    /// Its rank, from 1.
    pub(crate) position: usize,
}

/// A v1 search's answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FirecrawlSearchV1Answer)]
pub(crate) struct SearchV1Answer {
    /// Always `true`.
    pub(crate) success: bool,
    /// The results.
    pub(crate) data: Vec<WebResult>,
    /// Which provider answered when another failed first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) warning: Option<String>,
}

/// A v2 search's results, by source (only the sources asked for).
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
#[schema(as = FirecrawlSearchData)]
pub(crate) struct SearchData {
    /// Web results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) web: Option<Vec<WebResult>>,
    /// Image results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) images: Option<Vec<ImageResult>>,
    /// News results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) news: Option<Vec<WebResult>>,
}

/// A v2 search's answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = FirecrawlSearchV2Answer)]
pub(crate) struct SearchV2Answer {
    /// Always `true`.
    pub(crate) success: bool,
    /// The results, by source.
    pub(crate) data: SearchData,
    /// Which provider answered when another failed first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) warning: Option<String>,
    /// Always 0: trawl counts no credits.
    pub(crate) credits_used: u64,
}

/// Searches the web (Firecrawl v1).
#[utoipa::path(post, path = "/v1/search", operation_id = "firecrawl_v1_search", tag = "firecrawl",
    request_body = SearchRequest,
    responses(
        (status = 200, description = "the results, scraped when scrapeOptions asks for formats", body = SearchV1Answer),
        (status = 400, description = "a refused option, a malformed query, or no provider configured (`search_unconfigured`)", body = ErrorAnswer),
        (status = 408, description = "not done within the timeout (`timeout`)", body = ErrorAnswer),
        (status = 422, description = "the provider failed: `search_blocked` (its anti-bot page), `search_invalid_response`, `http_status`, …", body = ErrorAnswer),
        (status = 429, description = "the provider is rate limiting (`search_rate_limited`)", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn search_v1(
    State(state): State<AppState>,
    Caller(scope): Caller,
    FcJson(request): FcJson<SearchRequest>,
) -> Result<Json<SearchV1Answer>, FcError> {
    if request.sources.is_some() {
        return Err(FcError::bad_request(
            "sources is a v2 field: POST /v2/search groups results by source",
        ));
    }
    let wait = answer_wait(&state, &request)?;
    within(wait, async {
        let (data, warning) = web(&state, &scope, &request, Provider::Auto, &[]).await?;
        Ok(SearchV1Answer {
            success: true,
            data,
            warning,
        })
    })
    .await
    .map(Json)
}

/// Searches the web, images or news (Firecrawl v2).
#[utoipa::path(post, path = "/v2/search", operation_id = "firecrawl_v2_search", tag = "firecrawl",
    request_body = SearchRequest,
    responses(
        (status = 200, description = "the results by source, scraped when scrapeOptions asks for formats", body = SearchV2Answer),
        (status = 400, description = "a refused option or source, a malformed query, or no provider configured (`search_unconfigured`)", body = ErrorAnswer),
        (status = 408, description = "not done within the timeout (`timeout`)", body = ErrorAnswer),
        (status = 422, description = "the provider failed: `search_blocked` (its anti-bot page), `search_invalid_response`, `http_status`, …", body = ErrorAnswer),
        (status = 429, description = "the provider is rate limiting (`search_rate_limited`)", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn search_v2(
    State(state): State<AppState>,
    Caller(scope): Caller,
    FcJson(request): FcJson<SearchRequest>,
) -> Result<Json<SearchV2Answer>, FcError> {
    let mut sources = Vec::new();
    for source in request.sources.as_deref().unwrap_or_default() {
        let name = source.name();
        if !matches!(name, "web" | "images" | "news") {
            return Err(FcError::unsupported(format!(
                "source {name:?} is not supported: trawl searches web, images and news"
            )));
        }
        if !sources.contains(&name) {
            sources.push(name);
        }
    }
    if sources.is_empty() {
        sources.push("web");
    }
    let wait = answer_wait(&state, &request)?;
    within(wait, async {
        let mut data = SearchData::default();
        let mut warnings = Vec::new();
        for source in sources {
            match source {
                "web" => {
                    let (results, warning) =
                        web(&state, &scope, &request, Provider::Auto, &[]).await?;
                    data.web = Some(results);
                    warnings.extend(warning);
                }
                "news" => {
                    let (results, warning) =
                        web(&state, &scope, &request, Provider::Searxng, &["news"]).await?;
                    data.news = Some(results);
                    warnings.extend(warning);
                }
                _ => data.images = Some(images(&state, &scope, &request).await?),
            }
        }
        Ok(SearchV2Answer {
            success: true,
            data,
            warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
            credits_used: 0,
        })
    })
    .await
    .map(Json)
}

/// Refuses what trawl cannot honour; how long the answer waits.
fn answer_wait(state: &AppState, request: &SearchRequest) -> Result<Duration, FcError> {
    let refuse = |option: &str, why: &str| {
        Err(FcError::unsupported(format!(
            "{option} is not supported by trawl: {why}"
        )))
    };
    if request.tbs.is_some() {
        return refuse("tbs", "its providers take no time range");
    }
    if request.location.is_some() {
        return refuse("location", "it has no geolocated search");
    }
    if request.filter.is_some() {
        return refuse("filter", "use includeDomains or excludeDomains");
    }
    if request.categories.as_ref().is_some_and(|c| !c.is_empty()) {
        return refuse(
            "categories",
            "they are Firecrawl's own indexes; SearxNG's categories are POST /v1/web/search's",
        );
    }
    if request.highlights == Some(true) {
        return refuse("highlights", "results carry the provider's snippet");
    }
    if request.enterprise.as_ref().is_some_and(|e| !e.is_empty()) {
        return refuse("enterprise", "it has no enterprise search modes");
    }
    if request.threat_protection.is_some() {
        return refuse("threatProtection", "it has no threat protection service");
    }
    if request.domain_tools == Some(true) || request.tool_detail.is_some() {
        return refuse("domainTools", "it has no tool index");
    }
    if request.country.is_some() && request.lang.is_none() {
        return refuse(
            "country without lang",
            "its providers take a language, with the country as its region",
        );
    }
    if request
        .include_domains
        .as_ref()
        .is_some_and(|d| !d.is_empty())
        && request
            .exclude_domains
            .as_ref()
            .is_some_and(|d| !d.is_empty())
    {
        return Err(FcError::bad_request(
            "includeDomains and excludeDomains cannot both be set",
        ));
    }
    if request.timeout == Some(0) {
        return Err(FcError::bad_request("timeout must be positive"));
    }
    let cap = Duration::from_secs(state.config.sync_timeout_secs);
    Ok(request
        .timeout
        .map(Duration::from_millis)
        .map_or(cap, |wait| wait.min(cap)))
}

/// `work`, or 408 `timeout` when it takes longer than `wait`.
async fn within<T>(
    wait: Duration,
    work: impl Future<Output = Result<T, FcError>>,
) -> Result<T, FcError> {
    tokio::time::timeout(wait, work).await.unwrap_or_else(|_| {
        Err(FcError::new(
            StatusCode::REQUEST_TIMEOUT,
            ErrorCode::Timeout.as_str(),
            format!(
                "the search was not answered within {} ms; the results' fetch jobs go on",
                wait.as_millis()
            ),
        ))
    })
}

/// The provider's language for Firecrawl's `lang` and `country`: SearxNG's `en-US`, or
/// DuckDuckGo's region `us-en`.
fn language(state: &AppState, request: &SearchRequest, provider: Provider) -> Option<String> {
    let lang = request.lang.as_deref()?.trim().to_ascii_lowercase();
    let Some(country) = request.country.as_deref().map(str::trim) else {
        return Some(lang);
    };
    let searxng = match provider {
        Provider::Searxng => true,
        Provider::Auto => state.context.search.config().searxng.url.is_some(),
        _ => false,
    };
    Some(if searxng {
        format!("{lang}-{}", country.to_ascii_uppercase())
    } else {
        format!("{}-{lang}", country.to_ascii_lowercase())
    })
}

fn search_failed(error: SearchError) -> FcError {
    match error {
        SearchError::Invalid(message) => FcError::bad_request(message),
        other => crate::api::web_search::search_error(other).into(),
    }
}

/// The web (or news) results: searched, filtered by domain, scraped when asked; and a
/// warning when a provider failed over.
async fn web(
    state: &AppState,
    scope: &Scope,
    request: &SearchRequest,
    provider: Provider,
    categories: &[&str],
) -> Result<(Vec<WebResult>, Option<String>), FcError> {
    let limit = request.limit.unwrap_or(5);
    if limit == 0 || limit > SEARCH_MAX_LIMIT {
        return Err(FcError::bad_request(format!(
            "limit = {limit} is outside 1..={SEARCH_MAX_LIMIT}"
        )));
    }
    // Filtered by domain, the results are picked out of the provider's first 50.
    let filtered = [&request.include_domains, &request.exclude_domains]
        .iter()
        .any(|domains| domains.as_ref().is_some_and(|d| !d.is_empty()));
    let job = SearchJob {
        provider,
        limit: Some(if filtered { SEARCH_MAX_LIMIT } else { limit }),
        language: language(state, request, provider),
        categories: categories.iter().map(|c| (*c).to_owned()).collect(),
        ..SearchJob::new(&request.query)
    };
    let found = web_search::search(&state.context, scope, job)
        .await
        .map_err(search_failed)?;
    let warning = (!found.failed_over.is_empty()).then(|| {
        let failed: Vec<String> = found
            .failed_over
            .iter()
            .map(|failure| {
                format!(
                    "{} failed ({})",
                    failure.provider.as_str(),
                    failure.code.as_str()
                )
            })
            .collect();
        format!(
            "{}; the results are {}'s",
            failed.join(", "),
            found.provider.as_str()
        )
    });
    let ignore_invalid = request.ignore_invalid_urls == Some(true);
    let hits: Vec<SearchHit> = found
        .hits
        .into_iter()
        .filter(|hit| on_domains(&hit.url, request))
        .filter(|hit| !ignore_invalid || fetchable(&hit.url))
        .take(limit)
        .collect();
    let news = categories.contains(&"news");
    let options = request
        .scrape_options
        .as_ref()
        .filter(|options| options.formats.as_ref().is_some_and(|f| !f.is_empty()));
    let Some(options) = options else {
        let results = hits
            .into_iter()
            .enumerate()
            .map(|(index, hit)| result(index + 1, hit, news))
            .collect();
        return Ok((results, warning));
    };
    // Every result's scrape at once; the options are checked once, before any is queued.
    options.plan("http://checked.invalid/")?;
    let scraped = join_all(hits.iter().map(|hit| async {
        let planned = options.plan(&hit.url)?;
        scrape_planned(state, scope, planned).await
    }))
    .await;
    let mut results = Vec::new();
    for (hit, scraped) in hits.into_iter().zip(scraped) {
        let mut item = result(results.len() + 1, hit, news);
        match scraped {
            Ok(document) => with_document(&mut item, document),
            // Refused (not http(s), or a blocked destination): left out when asked.
            Err(error)
                if ignore_invalid
                    && matches!(
                        error.status,
                        StatusCode::BAD_REQUEST | StatusCode::FORBIDDEN
                    ) =>
            {
                continue;
            }
            Err(error) => {
                item.warning = Some(format!("not scraped: {}: {}", error.code, error.message));
            }
        }
        results.push(item);
    }
    Ok((results, warning))
}

/// A hit as a result, unscraped.
fn result(position: usize, hit: SearchHit, news: bool) -> WebResult {
    WebResult {
        position,
        snippet: news.then(|| hit.snippet.clone()),
        date: if news { hit.published } else { None },
        url: hit.url,
        title: hit.title,
        description: hit.snippet,
        markdown: None,
        html: None,
        raw_html: None,
        links: None,
        metadata: None,
        warning: None,
    }
}

fn with_document(item: &mut WebResult, document: Document) {
    item.markdown = document.markdown;
    item.html = document.html;
    item.raw_html = document.raw_html;
    item.links = document.links;
    item.metadata = Some(document.metadata);
    item.warning = document.warning;
}

/// Whether a URL is one trawl fetches at all (http or https with a host).
fn fetchable(url: &str) -> bool {
    Url::parse(url)
        .is_ok_and(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some())
}

/// Whether a result's host passes `includeDomains` and `excludeDomains` (a domain covers its
/// subdomains; `www.` and case do not matter).
fn on_domains(url: &str, request: &SearchRequest) -> bool {
    let host = Url::parse(url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase));
    let covered = |domains: &[String]| {
        host.as_deref().is_some_and(|host| {
            domains.iter().any(|domain| {
                let domain = domain
                    .trim()
                    .trim_start_matches("www.")
                    .to_ascii_lowercase();
                let host = host.trim_start_matches("www.");
                !domain.is_empty()
                    && (host == domain
                        || host
                            .strip_suffix(domain.as_str())
                            .is_some_and(|head| head.ends_with('.')))
            })
        })
    };
    let include = request.include_domains.as_deref().unwrap_or_default();
    let exclude = request.exclude_domains.as_deref().unwrap_or_default();
    (include.is_empty() || covered(include)) && (exclude.is_empty() || !covered(exclude))
}

/// The image results (DuckDuckGo's image search).
async fn images(
    state: &AppState,
    scope: &Scope,
    request: &SearchRequest,
) -> Result<Vec<ImageResult>, FcError> {
    let job = ImagesJob {
        limit: Some(request.limit.unwrap_or(5)),
        language: language(state, request, Provider::Duckduckgo),
        ..ImagesJob::new(&request.query)
    };
    let found = web_search::images(&state.context, scope, job)
        .await
        .map_err(search_failed)?;
    Ok(found
        .hits
        .into_iter()
        .filter(|hit| on_domains(hit.source_page.as_deref().unwrap_or(&hit.image), request))
        .enumerate()
        .map(|(index, hit)| ImageResult {
            title: hit.title,
            image_url: hit.image,
            image_width: hit.width,
            image_height: hit.height,
            url: hit.source_page,
            position: index + 1,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(json: serde_json::Value) -> SearchRequest {
        serde_json::from_value(json).expect("a request")
    }

    #[test]
    fn domains_cover_their_subdomains_only() {
        let include = request(serde_json::json!({"query": "q", "includeDomains": ["Example.org"]}));
        assert!(on_domains("https://example.org/a", &include));
        assert!(on_domains("https://www.example.org/a", &include));
        assert!(on_domains("https://docs.example.org/a", &include));
        assert!(!on_domains("https://notexample.org/a", &include));
        assert!(!on_domains("https://example.org.evil.net/a", &include));
        assert!(!on_domains("not a url", &include));
        let exclude = request(serde_json::json!({"query": "q", "excludeDomains": ["example.org"]}));
        assert!(!on_domains("https://a.example.org/", &exclude));
        assert!(on_domains("https://example.com/", &exclude));
    }

    #[test]
    fn the_sdks_requests_parse() {
        // What firecrawl-py's v1 client sends by default, and a v2 request with sources as
        // objects.
        let v1 = request(
            serde_json::json!({"query": "rust", "limit": 5, "lang": "en",
            "country": "us", "timeout": 60000, "origin": "python-sdk@4.55.0"}),
        );
        assert_eq!(v1.lang.as_deref(), Some("en"));
        let v2 = request(
            serde_json::json!({"query": "rust", "sources": [{"type": "web"}, "images"],
            "limit": 3, "timeout": 300000, "ignoreInvalidURLs": true,
            "scrapeOptions": {"formats": ["markdown"]}}),
        );
        let names: Vec<&str> = v2.sources.iter().flatten().map(Named::name).collect();
        assert_eq!(names, ["web", "images"]);
        assert_eq!(v2.ignore_invalid_urls, Some(true));
        assert!(
            serde_json::from_value::<SearchRequest>(serde_json::json!({"query": "q", "nope": 1}))
                .is_err()
        );
    }
}
