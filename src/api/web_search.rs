//! Web search over the API: `POST /v1/web/search` (SearxNG, DuckDuckGo, its instant answers)
//! and `POST /v1/web/images` answer at once, from the cache when fresh (`cached: true`). A
//! search that should also fetch its top results is a search job (`POST /v1/jobs` with
//! `{"kind": "search", "fetch_top": N}`), since the fetches take longer than a request.
//!
//! Not here: the searching (`web_search`).

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use trawl_workers::job::{ImagesJob, ImagesResult, Provider, SafeSearch, SearchJob, SearchResult};
use utoipa::ToSchema;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ApiJson, ErrorBody};
use crate::web_search::{self, SearchError};

/// A web search.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WebSearchRequest {
    /// What to search for (1 to 2,048 bytes).
    pub query: String,
    /// `auto` (the default: SearxNG when configured, else DuckDuckGo, falling over),
    /// `searxng`, `duckduckgo` or `instant` (DuckDuckGo's instant answers).
    #[serde(default)]
    pub provider: Provider,
    /// Results returned, after duplicates are dropped: 1 to 50, default 10.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 50)]
    pub limit: Option<usize>,
    /// The results' language (SearxNG: `en`, `fr-FR`; DuckDuckGo: its region, `us-en`).
    #[serde(default)]
    pub language: Option<String>,
    /// `off`, `moderate` or `strict`.
    #[serde(default)]
    pub safesearch: Option<SafeSearch>,
    /// SearxNG categories.
    #[serde(default)]
    pub categories: Vec<String>,
    /// SearxNG engines (a forbidden one is refused).
    #[serde(default)]
    pub engines: Vec<String>,
    /// The page of results, from 1.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 50)]
    pub page: Option<u32>,
    /// Seconds a cached answer may be served; 0 always asks the provider.
    #[serde(default)]
    #[schema(maximum = 86_400)]
    pub cache_ttl: Option<u64>,
}

impl From<WebSearchRequest> for SearchJob {
    fn from(request: WebSearchRequest) -> SearchJob {
        SearchJob {
            provider: request.provider,
            limit: request.limit,
            language: request.language,
            safesearch: request.safesearch,
            categories: request.categories,
            engines: request.engines,
            page: request.page,
            cache_ttl: request.cache_ttl,
            ..SearchJob::new(&request.query)
        }
    }
}

/// The API error for a search that gave no answer.
pub(crate) fn search_error(error: SearchError) -> ApiError {
    match error {
        SearchError::Invalid(message) => ApiError::invalid(message),
        SearchError::Refused(error) | SearchError::Failed(error) => {
            ApiError::from_job_error(error, None)
        }
    }
}

/// Searches the web.
#[utoipa::path(post, path = "/v1/web/search", operation_id = "web_search", request_body = WebSearchRequest, tag = "web search",
    responses(
        (status = 200, description = "the results (`cached: true` from the cache)", body = SearchResult),
        (status = 400, description = "a forbidden engine (`search_engine_forbidden`) or an unconfigured provider (`search_unconfigured`)", body = ErrorBody),
        (status = 422, description = "a malformed request, or the provider failed: `search_blocked` (its anti-bot page), `search_invalid_response`, `http_status`, `timeout`, …", body = ErrorBody),
        (status = 429, description = "the provider is rate limiting (`search_rate_limited`, with `retry_after`)", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn search(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiJson(request): ApiJson<WebSearchRequest>,
) -> Result<Json<SearchResult>, ApiError> {
    web_search::search(&state.context, &scope, request.into())
        .await
        .map(Json)
        .map_err(search_error)
}

/// Searches images (DuckDuckGo).
#[utoipa::path(post, path = "/v1/web/images", operation_id = "web_images", request_body = ImagesJob, tag = "web search",
    responses(
        (status = 200, description = "the images (`cached: true` from the cache)", body = ImagesResult),
        (status = 422, description = "a malformed request, or the provider failed: `search_blocked`, `search_invalid_response` (no token, bad JSON, wrong types), …", body = ErrorBody),
        (status = 429, description = "the provider is rate limiting (`search_rate_limited`)", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn images(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiJson(request): ApiJson<ImagesJob>,
) -> Result<Json<ImagesResult>, ApiError> {
    web_search::images(&state.context, &scope, request)
        .await
        .map(Json)
        .map_err(search_error)
}
