//! Archive search, for agents and RAG pipelines: `GET /v1/archive/search?q=&host=&after=&before=&as_of=&k=&per_page=`
//! (and `GET /v1/search`, its former path, deprecated: kept for one release, so that path does
//! not mean two things once Firecrawl's `POST /v1/search`, a web search, is answered) runs BM25 over the archived chunks (tantivy's query language) and returns RAG-ready hits:
//! url, title, heading path, chunk text, highlighted snippet, score and fetch time, over the
//! caller's tenant's pages only.
//!
//! Not here: indexing (the archive pool) or the ranking itself (`trawl_workers::archive`).

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use trawl_workers::archive::index::{self, Hit, MAX_K, SearchQuery};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ApiErrorCode, ApiQuery, ErrorBody};

/// A search of the archive.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct SearchParams {
    /// The query: words (more matches rank higher), "a phrase", +required, -excluded,
    /// title:word.
    pub q: String,
    /// Only pages of this host (exact).
    #[serde(default)]
    pub host: Option<String>,
    /// Only pages fetched at or after this date (2026-01-31) or RFC 3339 instant.
    #[serde(default)]
    pub after: Option<String>,
    /// Only pages fetched before this date or instant.
    #[serde(default)]
    pub before: Option<String>,
    /// The archive as it was then: each URL's version of that time.
    #[serde(default)]
    pub as_of: Option<String>,
    /// Hits wanted, 1 to 100 (default 10).
    #[serde(default)]
    #[param(minimum = 1, maximum = 100)]
    pub k: Option<usize>,
    /// Most hits from one page (default from the configuration, 2; 0: no limit).
    #[serde(default)]
    pub per_page: Option<usize>,
}

/// The hits, best first.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SearchResults {
    /// The query as given.
    pub query: String,
    /// Matching chunks, best first.
    pub hits: Vec<Hit>,
}

/// Searches the archive.
#[utoipa::path(get, path = "/v1/archive/search", operation_id = "search_archive", tag = "archive", params(SearchParams),
    responses((status = 200, body = SearchResults), (status = 400, body = ErrorBody),
        (status = 503, body = ErrorBody)),
    security((), ("bearer" = [])))]
pub(super) async fn search(
    state: State<AppState>,
    caller: Caller,
    params: ApiQuery<SearchParams>,
) -> Result<Json<SearchResults>, ApiError> {
    archive_search(state, caller, params).await
}

/// Searches the archive at its former path (deprecated: use `GET /v1/archive/search`; this
/// one goes in the next release).
#[utoipa::path(get, path = "/v1/search", operation_id = "search_archive_deprecated", tag = "archive", params(SearchParams),
    responses((status = 200, body = SearchResults), (status = 400, body = ErrorBody),
        (status = 503, body = ErrorBody)),
    security((), ("bearer" = [])))]
#[deprecated = "use GET /v1/archive/search"]
pub(super) async fn search_deprecated(
    state: State<AppState>,
    caller: Caller,
    params: ApiQuery<SearchParams>,
) -> Result<Json<SearchResults>, ApiError> {
    archive_search(state, caller, params).await
}

async fn archive_search(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiQuery(params): ApiQuery<SearchParams>,
) -> Result<Json<SearchResults>, ApiError> {
    let Some(archive) = state.archive.clone() else {
        return Err(ApiError::new(
            ApiErrorCode::ArchiveUnavailable,
            "this server has no archive index",
        ));
    };
    let instant = |value: &Option<String>, name: &str| {
        value
            .as_deref()
            .map(crate::archive::parse_instant)
            .transpose()
            .map_err(|error| format!("{name}: {error}"))
    };
    let k = params.k.unwrap_or(10);
    if k == 0 || k > MAX_K {
        return Err(ApiError::bad_request(format!(
            "k must be between 1 and {MAX_K}"
        )));
    }
    let query = SearchQuery {
        text: params.q.clone(),
        host: params.host.clone(),
        after: instant(&params.after, "after").map_err(ApiError::bad_request)?,
        before: instant(&params.before, "before").map_err(ApiError::bad_request)?,
        as_of: instant(&params.as_of, "as_of").map_err(ApiError::bad_request)?,
        k,
        per_page: params.per_page.unwrap_or(archive.per_page),
        tenant: scope.filter().map(str::to_owned),
    };
    let hits = tokio::task::spawn_blocking(move || archive.index.search(&query))
        .await
        .map_err(|error| ApiError::internal(&error))?
        .map_err(|error| match error {
            index::Error::Query(message) => ApiError::new(ApiErrorCode::InvalidQuery, message),
            other => ApiError::internal(&other),
        })?;
    Ok(Json(SearchResults {
        query: params.q,
        hits,
    }))
}
