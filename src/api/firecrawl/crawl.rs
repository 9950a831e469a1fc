//! The crawl routes: `POST /v{1,2}/crawl` starts a trawl crawl (its id is the crawl's: `GET
//! /v1/crawls/{id}` reads it too), `GET /v{1,2}/crawl/{id}` answers its status with a page of
//! documents and the `next` page, `DELETE /v{1,2}/crawl/{id}` cancels it.
//!
//! Mapped: `limit` → `max_pages`; `maxDiscoveryDepth` and v1's `maxDepth` → `max_depth` (link
//! hops from the seed; the smaller wins); the scope is the seed's path (Firecrawl's default),
//! its host with `crawlEntireDomain` (v1: `allowBackwardLinks`), its registrable domain with
//! `allowSubdomains`; `includePaths`/`excludePaths` (regular expressions) → trawl's globs
//! (`options::regex_to_globs`); `sitemap` (`include`, `skip`, `only`; v1: `ignoreSitemap`);
//! `ignoreRobotsTxt`; `scrapeOptions` as a scrape's.
//!
//! Not here: following links (`crawl`, run by the pools).

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use trawl_workers::job::object::optional_object;
use trawl_workers::job::{CrawlSpec, Scope as CrawlScope};
use utoipa::ToSchema;

use super::options::{ScrapeOptions, regex_to_globs};
use super::scrape::{StatusAnswer, StatusQuery, documents_page};
use super::{ErrorAnswer, FcError, FcJson, Version};
use crate::api::AppState;
use crate::api::auth::Caller;
use crate::api::error::{ApiPath, ApiQuery};
use crate::crawl::StartError;
use crate::store::{CrawlStatus, JobFilter, Status};
use crate::tenant::Scope;

/// `POST /v1/crawl`, `POST /v2/crawl`: a site crawled from one URL.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = FirecrawlCrawlRequest)]
pub(crate) struct CrawlRequest {
    /// The http or https URL the crawl starts from.
    #[schema(format = "uri")]
    pub(crate) url: String,
    /// Pages fetched at most (default 10000; trawl's `max_pages`, at most 1000000).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub(crate) limit: Option<u64>,
    /// Link hops from the URL followed at most (trawl's `max_depth`, at most 100; default 100).
    #[serde(default)]
    #[schema(maximum = 100)]
    pub(crate) max_discovery_depth: Option<u32>,
    /// v1: as `maxDiscoveryDepth` (the smaller of the two wins).
    #[serde(default)]
    #[schema(maximum = 100)]
    pub(crate) max_depth: Option<u32>,
    /// Only paths matching one of these regular expressions (literal paths with `.*`, `^`,
    /// `$`; mapped onto trawl's globs).
    #[serde(default)]
    pub(crate) include_paths: Option<Vec<String>>,
    /// Never paths matching one of these regular expressions (as `includePaths`).
    #[serde(default)]
    pub(crate) exclude_paths: Option<Vec<String>>,
    /// Follow links anywhere on the URL's host, not only under its path.
    #[serde(default)]
    pub(crate) crawl_entire_domain: Option<bool>,
    /// v1: as `crawlEntireDomain`.
    #[serde(default)]
    pub(crate) allow_backward_links: Option<bool>,
    /// Follow links to other hosts of the URL's registrable domain.
    #[serde(default)]
    pub(crate) allow_subdomains: Option<bool>,
    /// `true` is refused (a crawl stays on its site).
    #[serde(default)]
    pub(crate) allow_external_links: Option<bool>,
    /// v2: `include` (the default: the sitemaps' pages as well), `skip`, or `only` (the
    /// sitemaps' pages and the URL, no link followed).
    #[serde(default)]
    pub(crate) sitemap: Option<String>,
    /// v1: `true` is v2's `sitemap: "skip"`.
    #[serde(default)]
    pub(crate) ignore_sitemap: Option<bool>,
    /// Do not obey robots.txt.
    #[serde(default)]
    pub(crate) ignore_robots_txt: Option<bool>,
    /// `true` is refused (trawl keeps query strings; it drops tracking parameters).
    #[serde(default)]
    pub(crate) ignore_query_parameters: Option<bool>,
    /// `true` (Firecrawl's default) is what trawl does (normalised URLs and canonical
    /// duplicates are fetched once); `false` is refused.
    #[serde(default, rename = "deduplicateSimilarURLs")]
    pub(crate) deduplicate_similar_urls: Option<bool>,
    /// `true` is refused (globs are matched on the path and query).
    #[serde(default, rename = "regexOnFullURL")]
    pub(crate) regex_on_full_url: Option<bool>,
    /// Refused when set (trawl's per-host politeness decides).
    #[serde(default)]
    pub(crate) delay: Option<u64>,
    /// Refused when set (trawl's per-host politeness decides).
    #[serde(default)]
    pub(crate) max_concurrency: Option<u64>,
    /// Refused when set (trawl's crawl webhooks are `POST /v1/crawls`').
    #[serde(default)]
    pub(crate) webhook: Option<serde_json::Value>,
    /// Refused when set (needs a language model).
    #[serde(default)]
    pub(crate) prompt: Option<String>,
    /// Refused when set (trawl identifies itself as `trawl`).
    #[serde(default)]
    pub(crate) robots_user_agent: Option<String>,
    /// `true` is refused (trawl stores every page).
    #[serde(default)]
    pub(crate) zero_data_retention: Option<bool>,
    /// How each page is fetched and which parts of its document are built.
    #[serde(default, deserialize_with = "optional_object")]
    pub(crate) scrape_options: Option<ScrapeOptions>,
    /// A client's tag: accepted, not used.
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) integration: Option<String>,
    /// The client's name and version: accepted, not used.
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) origin: Option<String>,
}

/// A crawl as accepted.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FirecrawlCrawlStarted)]
pub(crate) struct CrawlStarted {
    /// Always `true`.
    pub(crate) success: bool,
    /// The crawl id (trawl's).
    pub(crate) id: String,
    /// Where its status is read.
    pub(crate) url: String,
}

/// The answer to a cancel.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FirecrawlCancelled)]
pub(crate) struct Cancelled {
    /// Always `true`.
    pub(crate) success: bool,
    /// `cancelled`.
    pub(crate) status: String,
}

impl CrawlRequest {
    /// Refuses what trawl cannot honour, and plans the crawl.
    fn spec(&self) -> Result<(CrawlSpec, ScrapeOptions), FcError> {
        let refuse = |option: &str, why: &str| {
            Err(FcError::unsupported(format!(
                "{option} is not supported by trawl: {why}"
            )))
        };
        if self.allow_external_links == Some(true) {
            return refuse("allowExternalLinks: true", "a crawl stays on its site");
        }
        if self.ignore_query_parameters == Some(true) {
            return refuse(
                "ignoreQueryParameters: true",
                "trawl keeps query strings (it drops tracking parameters)",
            );
        }
        if self.deduplicate_similar_urls == Some(false) {
            return refuse(
                "deduplicateSimilarURLs: false",
                "normalised URLs and canonical duplicates are always fetched once",
            );
        }
        if self.regex_on_full_url == Some(true) {
            return refuse(
                "regexOnFullURL: true",
                "path patterns are matched on the path and query",
            );
        }
        if self.delay.is_some() || self.max_concurrency.is_some() {
            return refuse(
                "delay/maxConcurrency",
                "trawl's per-host politeness (politeness.*) decides",
            );
        }
        if self
            .webhook
            .as_ref()
            .is_some_and(|webhook| !webhook.is_null())
        {
            return refuse(
                "webhook",
                "trawl's crawl webhooks (signed, with their own events) are POST /v1/crawls'",
            );
        }
        if self.prompt.is_some() {
            return refuse("prompt", "it needs a language model");
        }
        if self.robots_user_agent.is_some() {
            return refuse("robotsUserAgent", "trawl reads robots.txt as `trawl`");
        }
        if self.zero_data_retention == Some(true) {
            return refuse(
                "zeroDataRetention: true",
                "trawl stores every page it fetches",
            );
        }
        let sitemap = match (self.sitemap.as_deref(), self.ignore_sitemap) {
            (Some("skip"), _) | (None, Some(true)) => Sitemap::Skip,
            (Some("include") | None, _) => Sitemap::Include,
            (Some("only"), _) => Sitemap::Only,
            (Some(other), _) => {
                return Err(FcError::bad_request(format!(
                    "sitemap {other:?} is not one of include, skip, only"
                )));
            }
        };
        let options = self.scrape_options.clone().unwrap_or_default();
        let planned = options.plan(&self.url)?;
        if !planned.job.headers.is_empty() {
            return Err(FcError::unsupported(
                "scrapeOptions.headers is not supported on crawls: a crawl's pages are plain \
                 fetches (scrape and batch scrape take headers)",
            ));
        }
        let globs = |patterns: &Option<Vec<String>>| -> Result<Vec<String>, FcError> {
            let mut globs = Vec::new();
            for pattern in patterns.iter().flatten() {
                globs.extend(regex_to_globs(pattern).map_err(FcError::unsupported)?);
            }
            Ok(globs)
        };
        if self.max_discovery_depth.is_some_and(|depth| depth > 100)
            || self.max_depth.is_some_and(|depth| depth > 100)
        {
            return Err(FcError::bad_request(
                "maxDiscoveryDepth and maxDepth are at most 100",
            ));
        }
        let depth = match (self.max_discovery_depth, self.max_depth) {
            (Some(a), Some(b)) => a.min(b),
            (Some(depth), None) | (None, Some(depth)) => depth,
            (None, None) => 100,
        };
        let scope = if self.allow_subdomains == Some(true) {
            CrawlScope::Domain
        } else if self.crawl_entire_domain == Some(true) || self.allow_backward_links == Some(true)
        {
            CrawlScope::Host
        } else {
            CrawlScope::Prefix
        };
        let spec = CrawlSpec {
            scope,
            include: globs(&self.include_paths)?,
            exclude: globs(&self.exclude_paths)?,
            max_depth: if sitemap == Sitemap::Only { 0 } else { depth },
            max_pages: self.limit.unwrap_or(10_000),
            sitemap: sitemap != Sitemap::Skip,
            robots: self.ignore_robots_txt != Some(true),
            format: planned.job.format,
            render: planned.job.render,
            cache_ttl: planned.job.cache_ttl,
            ..CrawlSpec::new(vec![self.url.clone()])
        };
        Ok((spec, options))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sitemap {
    Include,
    Skip,
    Only,
}

/// Starts a crawl (Firecrawl v1).
#[utoipa::path(post, path = "/v1/crawl", operation_id = "firecrawl_v1_crawl", tag = "firecrawl",
    request_body = CrawlRequest,
    responses(
        (status = 200, description = "started", body = CrawlStarted),
        (status = 400, description = "a refused URL or option", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn crawl_start_v1(
    State(state): State<AppState>,
    Caller(scope): Caller,
    headers: HeaderMap,
    FcJson(request): FcJson<CrawlRequest>,
) -> Result<Json<CrawlStarted>, FcError> {
    start(&state, scope, &headers, Version::V1, request)
        .await
        .map(Json)
}

/// Starts a crawl (Firecrawl v2).
#[utoipa::path(post, path = "/v2/crawl", operation_id = "firecrawl_v2_crawl", tag = "firecrawl",
    request_body = CrawlRequest,
    responses(
        (status = 200, description = "started", body = CrawlStarted),
        (status = 400, description = "a refused URL or option", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn crawl_start_v2(
    State(state): State<AppState>,
    Caller(scope): Caller,
    headers: HeaderMap,
    FcJson(request): FcJson<CrawlRequest>,
) -> Result<Json<CrawlStarted>, FcError> {
    start(&state, scope, &headers, Version::V2, request)
        .await
        .map(Json)
}

async fn start(
    state: &AppState,
    scope: Scope,
    headers: &HeaderMap,
    version: Version,
    request: CrawlRequest,
) -> Result<CrawlStarted, FcError> {
    let (spec, options) = request.spec()?;
    let wanted = options.wanted()?;
    let plan = crate::crawl::create_for(&state.context, spec, scope.tenant)
        .await
        .map_err(|error| match error {
            StartError::Invalid(message) => FcError::bad_request(message),
            other => crate::api::error::ApiError::internal(&other).into(),
        })?;
    let id = plan.id.clone();
    let options_json = serde_json::to_string(&wanted).unwrap_or_default();
    state
        .context
        .store
        .put_compat_options(&id, &options_json, jiff::Timestamp::now().as_millisecond())
        .await?;
    // As POST /v1/crawls: the first pages are queued in the background.
    let context = state.context.clone();
    let queue = state.queue.clone();
    tokio::spawn(async move {
        if let Err(error) = crate::crawl::seed(&context, &queue, &plan).await {
            tracing::error!(crawl_id = %plan.id, error = %error, "seeding a crawl failed");
        }
    });
    Ok(CrawlStarted {
        success: true,
        url: format!("{}{}/crawl/{id}", super::origin(headers), version.prefix()),
        id,
    })
}

/// A crawl's status and documents (Firecrawl v1).
#[utoipa::path(get, path = "/v1/crawl/{id}", operation_id = "firecrawl_v1_crawl_status", tag = "firecrawl",
    params(("id" = String, Path, description = "the crawl id"), StatusQuery),
    responses((status = 200, body = StatusAnswer), (status = 404, body = ErrorAnswer)),
    security((), ("bearer" = [])))]
pub(crate) async fn crawl_status_v1(
    State(state): State<AppState>,
    Caller(scope): Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<StatusQuery>,
) -> Result<Json<StatusAnswer>, FcError> {
    status(&state, &scope, &headers, Version::V1, &id, query)
        .await
        .map(Json)
}

/// A crawl's status and documents (Firecrawl v2).
#[utoipa::path(get, path = "/v2/crawl/{id}", operation_id = "firecrawl_v2_crawl_status", tag = "firecrawl",
    params(("id" = String, Path, description = "the crawl id"), StatusQuery),
    responses((status = 200, body = StatusAnswer), (status = 404, body = ErrorAnswer)),
    security((), ("bearer" = [])))]
pub(crate) async fn crawl_status_v2(
    State(state): State<AppState>,
    Caller(scope): Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<StatusQuery>,
) -> Result<Json<StatusAnswer>, FcError> {
    status(&state, &scope, &headers, Version::V2, &id, query)
        .await
        .map(Json)
}

async fn status(
    state: &AppState,
    scope: &Scope,
    headers: &HeaderMap,
    version: Version,
    id: &str,
    query: StatusQuery,
) -> Result<StatusAnswer, FcError> {
    let record = state
        .context
        .store
        .crawl_in(scope, id)
        .await?
        .ok_or_else(|| FcError::not_found(format!("no crawl {id}")))?;
    let counters = &record.counters;
    let completed = counters.fetched + counters.cached + counters.failed;
    let filter = JobFilter {
        crawl_id: Some(id.to_owned()),
        status: Some(Status::Succeeded),
        tenant: scope.filter().map(str::to_owned),
        ..JobFilter::default()
    };
    let base = format!("{}{}/crawl/{id}", super::origin(headers), version.prefix());
    let (data, next) = documents_page(state, id, &filter, &query, &base).await?;
    let status = match record.status {
        CrawlStatus::Running => "scraping",
        CrawlStatus::Completed => "completed",
        CrawlStatus::Cancelled => "cancelled",
    };
    Ok(StatusAnswer {
        success: true,
        status: status.to_owned(),
        completed: completed.min(counters.queued),
        total: counters.queued,
        credits_used: 0,
        expires_at: None,
        next,
        data,
    })
}

/// Cancels a crawl (Firecrawl v1).
#[utoipa::path(delete, path = "/v1/crawl/{id}", operation_id = "firecrawl_v1_crawl_cancel", tag = "firecrawl",
    params(("id" = String, Path, description = "the crawl id")),
    responses(
        (status = 200, body = Cancelled),
        (status = 404, body = ErrorAnswer),
        (status = 409, description = "the crawl had already ended", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn crawl_cancel_v1(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Cancelled>, FcError> {
    cancel(&state, &scope, &id).await.map(Json)
}

/// Cancels a crawl (Firecrawl v2).
#[utoipa::path(delete, path = "/v2/crawl/{id}", operation_id = "firecrawl_v2_crawl_cancel", tag = "firecrawl",
    params(("id" = String, Path, description = "the crawl id")),
    responses(
        (status = 200, body = Cancelled),
        (status = 404, body = ErrorAnswer),
        (status = 409, description = "the crawl had already ended", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn crawl_cancel_v2(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Cancelled>, FcError> {
    cancel(&state, &scope, &id).await.map(Json)
}

async fn cancel(state: &AppState, scope: &Scope, id: &str) -> Result<Cancelled, FcError> {
    let store = &state.context.store;
    let record = store
        .crawl_in(scope, id)
        .await?
        .ok_or_else(|| FcError::not_found(format!("no crawl {id}")))?;
    if !store.cancel_crawl(id).await? {
        return Err(FcError::new(
            StatusCode::CONFLICT,
            "conflict",
            format!("crawl {id} had already ended ({})", record.status.as_str()),
        ));
    }
    Ok(Cancelled {
        success: true,
        status: "cancelled".to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(body: serde_json::Value) -> Result<CrawlSpec, FcError> {
        let request: CrawlRequest = serde_json::from_value(body).expect("parses");
        request.spec().map(|(spec, _)| spec)
    }

    #[test]
    fn firecrawl_crawl_options_map_onto_a_crawl_spec() {
        let plain = spec(serde_json::json!({"url": "https://example.com/docs/"})).expect("plans");
        assert_eq!(plain.scope, CrawlScope::Prefix);
        assert!(plain.sitemap && plain.robots);
        assert_eq!((plain.max_pages, plain.max_depth), (10_000, 100));
        let full = spec(serde_json::json!({
            "url": "https://example.com/", "limit": 5, "maxDiscoveryDepth": 2, "maxDepth": 4,
            "includePaths": ["blog/.*"], "excludePaths": ["^/blog/private$"],
            "allowSubdomains": true, "sitemap": "skip", "ignoreRobotsTxt": true,
            "scrapeOptions": {"formats": ["markdown", "links"], "maxAge": 0},
            "origin": "python-sdk@4.55.0",
        }))
        .expect("plans");
        assert_eq!(full.scope, CrawlScope::Domain);
        assert_eq!((full.max_pages, full.max_depth), (5, 2));
        assert_eq!(full.include, ["**/blog/**"]);
        assert_eq!(full.exclude, ["/blog/private"]);
        assert!(!full.sitemap && !full.robots);
        assert_eq!(full.cache_ttl, Some(0));
        let only =
            spec(serde_json::json!({"url": "https://a/", "sitemap": "only"})).expect("plans");
        assert!(only.sitemap);
        assert_eq!(only.max_depth, 0);
        let v1 = spec(serde_json::json!({"url": "https://a/", "ignoreSitemap": true, "allowBackwardLinks": true}))
            .expect("plans");
        assert!(!v1.sitemap);
        assert_eq!(v1.scope, CrawlScope::Host);
    }

    #[test]
    fn crawl_options_trawl_cannot_honour_are_refused() {
        for body in [
            serde_json::json!({"url": "https://a/", "allowExternalLinks": true}),
            serde_json::json!({"url": "https://a/", "prompt": "docs only"}),
            serde_json::json!({"url": "https://a/", "webhook": "https://hooks.example/"}),
            serde_json::json!({"url": "https://a/", "includePaths": ["(a|b)"]}),
            serde_json::json!({"url": "https://a/", "scrapeOptions": {"formats": ["summary"]}}),
            serde_json::json!({"url": "https://a/", "delay": 2}),
        ] {
            assert!(spec(body.clone()).is_err(), "{body}");
        }
    }
}
