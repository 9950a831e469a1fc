//! `POST /v1/map`, `POST /v2/map`: a site's URLs, from its sitemaps (robots.txt Sitemap lines,
//! `/sitemap.xml`, indexes followed, as a crawl's) and the links of the page itself (a fetch
//! job run now, as a scrape's), kept on the page's host (or its registrable domain with
//! `includeSubdomains`), optionally filtered by `search` (every word in the URL), at most
//! `limit`.
//!
//! Not here: ranking by relevance (Firecrawl orders by it; trawl keeps the page's links first,
//! in document order, then the sitemaps' order).

use std::collections::HashSet;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use trawl_workers::job::{FetchJob, JobError, Scope as CrawlScope};
use url::Url;
use utoipa::ToSchema;

use super::{ErrorAnswer, FcError, FcJson};
use crate::api::AppState;
use crate::api::auth::Caller;
use crate::api::error::ApiError;
use crate::fetch_now::{self, Ended, StartError, Started};
use crate::tenant::Scope;

/// `POST /v1/map`, `POST /v2/map`: the URLs of a site.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
#[schema(as = FirecrawlMapRequest)]
pub(crate) struct MapRequest {
    /// The http or https URL of the site.
    #[schema(format = "uri")]
    pub(crate) url: String,
    /// Only URLs holding every word of this (case-insensitive).
    #[serde(default)]
    pub(crate) search: Option<String>,
    /// v2: `include` (the default: the sitemaps and the page's links), `skip` (the page's
    /// links only) or `only` (the sitemaps only).
    #[serde(default)]
    pub(crate) sitemap: Option<String>,
    /// v1: `true` is `sitemap: "skip"`.
    #[serde(default)]
    pub(crate) ignore_sitemap: Option<bool>,
    /// v1: `true` is `sitemap: "only"`.
    #[serde(default)]
    pub(crate) sitemap_only: Option<bool>,
    /// Also the hosts of the URL's registrable domain.
    #[serde(default)]
    pub(crate) include_subdomains: Option<bool>,
    /// Drop query strings (the default), so a page is listed once.
    #[serde(default)]
    pub(crate) ignore_query_parameters: Option<bool>,
    /// URLs returned at most (default 5000).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100_000)]
    pub(crate) limit: Option<usize>,
    /// Milliseconds to wait for the page (capped by `api.sync_timeout_secs`).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 3_600_000)]
    pub(crate) timeout: Option<u64>,
    /// Refused (trawl has no geolocated fetches).
    #[serde(default)]
    pub(crate) location: Option<serde_json::Value>,
    /// Refused when set.
    #[serde(default)]
    pub(crate) threat_protection: Option<serde_json::Value>,
    /// Refused when set.
    #[serde(default)]
    pub(crate) audit_metadata: Option<serde_json::Value>,
    /// A client's tag: accepted, not used.
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) integration: Option<String>,
    /// The client's name and version: accepted, not used.
    #[serde(default)]
    #[allow(dead_code)]
    pub(crate) origin: Option<String>,
}

/// One URL of a v2 map.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FirecrawlLink)]
pub(crate) struct Link {
    /// The URL.
    pub(crate) url: String,
    /// Its title (known for the page mapped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    /// Its description (known for the page mapped).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
}

/// A v2 map's answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FirecrawlMapV2Answer)]
pub(crate) struct MapV2Answer {
    /// Always `true`.
    pub(crate) success: bool,
    /// The URLs.
    pub(crate) links: Vec<Link>,
}

/// A v1 map's answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FirecrawlMapV1Answer)]
pub(crate) struct MapV1Answer {
    /// Always `true`.
    pub(crate) success: bool,
    /// The URLs.
    pub(crate) links: Vec<String>,
}

/// Maps a site's URLs (Firecrawl v1).
#[utoipa::path(post, path = "/v1/map", operation_id = "firecrawl_v1_map", tag = "firecrawl",
    request_body = MapRequest,
    responses(
        (status = 200, description = "the URLs", body = MapV1Answer),
        (status = 400, description = "a refused URL or option", body = ErrorAnswer),
        (status = 403, description = "destination refused by the SSRF guard", body = ErrorAnswer),
        (status = 408, description = "the page was not fetched within the timeout (SCRAPE_TIMEOUT)", body = ErrorAnswer),
        (status = 409, description = "the page's job was cancelled", body = ErrorAnswer),
        (status = 422, description = "the page failed and no sitemap was found", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn map_v1(
    State(state): State<AppState>,
    Caller(scope): Caller,
    FcJson(request): FcJson<MapRequest>,
) -> Result<Json<MapV1Answer>, FcError> {
    let links = map(&state, &scope, request).await?;
    Ok(Json(MapV1Answer {
        success: true,
        links: links.into_iter().map(|link| link.url).collect(),
    }))
}

/// Maps a site's URLs (Firecrawl v2).
#[utoipa::path(post, path = "/v2/map", operation_id = "firecrawl_v2_map", tag = "firecrawl",
    request_body = MapRequest,
    responses(
        (status = 200, description = "the URLs", body = MapV2Answer),
        (status = 400, description = "a refused URL or option", body = ErrorAnswer),
        (status = 403, description = "destination refused by the SSRF guard", body = ErrorAnswer),
        (status = 408, description = "the page was not fetched within the timeout (SCRAPE_TIMEOUT)", body = ErrorAnswer),
        (status = 409, description = "the page's job was cancelled", body = ErrorAnswer),
        (status = 422, description = "the page failed and no sitemap was found", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn map_v2(
    State(state): State<AppState>,
    Caller(scope): Caller,
    FcJson(request): FcJson<MapRequest>,
) -> Result<Json<MapV2Answer>, FcError> {
    let links = map(&state, &scope, request).await?;
    Ok(Json(MapV2Answer {
        success: true,
        links,
    }))
}

async fn map(state: &AppState, scope: &Scope, request: MapRequest) -> Result<Vec<Link>, FcError> {
    for (option, value) in [
        ("location", &request.location),
        ("threatProtection", &request.threat_protection),
        ("auditMetadata", &request.audit_metadata),
    ] {
        if value.as_ref().is_some_and(|value| !value.is_null()) {
            return Err(FcError::unsupported(format!(
                "{option} is not supported by trawl"
            )));
        }
    }
    let (sitemaps, links) = match (
        request.sitemap.as_deref(),
        request.ignore_sitemap,
        request.sitemap_only,
    ) {
        (Some("only"), _, _) | (None, _, Some(true)) => (true, false),
        (Some("skip"), _, _) | (None, Some(true), _) => (false, true),
        (Some("include") | None, _, _) => (true, true),
        (Some(other), _, _) => {
            return Err(FcError::bad_request(format!(
                "sitemap {other:?} is not one of include, skip, only"
            )));
        }
    };
    let limit = request.limit.unwrap_or(5_000);
    if !(1..=100_000).contains(&limit) {
        return Err(FcError::bad_request("limit is outside 1..=100000"));
    }
    if request.timeout.is_some_and(|ms| ms == 0 || ms > 3_600_000) {
        return Err(FcError::bad_request("timeout is outside 1..=3600000 ms"));
    }
    let seed = trawl_workers::fetch::check_url(&state.context.fetch.client, &request.url).map_err(
        |error| {
            crate::api::count_refusal(state, &error);
            FcError::from(ApiError::from_job_error(error, None))
        },
    )?;
    let site = if request.include_subdomains == Some(true) {
        CrawlScope::Domain
    } else {
        CrawlScope::Host
    };
    let drop_query = request.ignore_query_parameters != Some(false);
    let words: Vec<String> = request
        .search
        .as_deref()
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();

    let mut found: Vec<Link> = Vec::new();
    let mut failure: Option<FcError> = None;
    if links {
        let wait = request
            .timeout
            .map_or(Duration::MAX, Duration::from_millis)
            .min(Duration::from_secs(state.config.sync_timeout_secs));
        match page_links(state, scope, &request.url, wait).await {
            Ok(page) => {
                found.push(Link {
                    url: page.final_url,
                    title: page.title,
                    description: page.description,
                });
                found.extend(page.links.into_iter().map(|url| Link {
                    url,
                    title: None,
                    description: None,
                }));
            }
            Err(error) => failure = Some(error),
        }
    }
    if sitemaps {
        found.extend(
            crate::crawl::sitemap_urls(&state.context, std::slice::from_ref(&seed))
                .await
                .into_iter()
                .map(|url| Link {
                    url: url.to_string(),
                    title: None,
                    description: None,
                }),
        );
    }
    if found.is_empty()
        && let Some(failure) = failure
    {
        return Err(failure);
    }
    let mut seen = HashSet::new();
    let mut kept = Vec::new();
    for mut link in found {
        let Ok(mut url) = Url::parse(&link.url) else {
            continue;
        };
        if !site.contains(&seed, &url) {
            continue;
        }
        if drop_query {
            url.set_query(None);
        }
        url.set_fragment(None);
        let text = url.as_str().to_lowercase();
        if !words.iter().all(|word| text.contains(word.as_str())) {
            continue;
        }
        if !seen.insert(url.to_string()) {
            continue;
        }
        link.url = url.to_string();
        kept.push(link);
        if kept.len() >= limit {
            break;
        }
    }
    Ok(kept)
}

/// What the mapped page itself gave.
struct PageLinks {
    final_url: String,
    title: Option<String>,
    description: Option<String>,
    links: Vec<String>,
}

/// Fetches the mapped page now (or takes it from the cache) for its links.
async fn page_links(
    state: &AppState,
    scope: &Scope,
    url: &str,
    wait: Duration,
) -> Result<PageLinks, FcError> {
    let job = FetchJob::new(url);
    let failed = |error: JobError, id: Option<String>| -> FcError {
        ApiError::from_job_error(error, id).into()
    };
    let result = match fetch_now::start(&state.context, &state.queue, job, &scope.tenant).await {
        Ok(Started::Cached(result)) => serde_json::to_value(*result)
            .map_err(|error| FcError::from(ApiError::internal(&error)))?,
        Ok(Started::Queued(mut waiter)) => {
            let id = waiter.job_id().to_owned();
            match waiter.wait(&state.context.store, wait).await? {
                Ended::Succeeded(result) => result,
                Ended::Failed(error) => return Err(failed(error, Some(id))),
                Ended::Cancelled | Ended::Pending(_) => {
                    return Err(FcError::new(
                        axum::http::StatusCode::REQUEST_TIMEOUT,
                        "SCRAPE_TIMEOUT",
                        format!("the page was not fetched in time; trawl's job {id} goes on"),
                    ));
                }
            }
        }
        Err(StartError::Refused(error)) => return Err(failed(error, None)),
        Err(StartError::Store(error)) => return Err(error.into()),
        Err(StartError::Queue(error)) => return Err(ApiError::internal(&error).into()),
    };
    let text = |key: &str| result[key].as_str().map(str::to_owned);
    Ok(PageLinks {
        final_url: text("final_url").unwrap_or_else(|| url.to_owned()),
        title: text("title"),
        description: result["meta"]["description"].as_str().map(str::to_owned),
        links: result["links"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|link| link.as_str().map(str::to_owned))
            .collect(),
    })
}
