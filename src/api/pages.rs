//! Stored pages, an agent's `web_read` and `web_grep`: `GET /v1/pages?url=&from=&to=` reads
//! the most recent page of a URL by line range; `POST /v1/pages/grep` searches its lines with
//! a regular expression (linear-time engine, size limits, nested repetition refused), with
//! context lines, overlapping contexts merged and the output capped.

use axum::Json;
use axum::extract::State;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::error::{ApiError, ApiErrorCode, ApiJson, ApiQuery, ErrorBody};
use crate::pages::{self, GrepLimits, GrepQuery, GrepResult, LineRange};

/// Which lines of which page.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ReadQuery {
    /// The page's URL (as requested or as finally fetched).
    pub url: String,
    /// First line, from 1 (default 1).
    #[serde(default)]
    #[param(minimum = 1)]
    pub from: Option<u64>,
    /// Last line, inclusive, from 1 (default: the last).
    #[serde(default)]
    #[param(minimum = 1)]
    pub to: Option<u64>,
}

/// Reads a stored page by line range; `total_lines` tells how far there is to go.
#[utoipa::path(get, path = "/v1/pages", operation_id = "read_page", tag = "pages", params(ReadQuery),
    responses((status = 200, body = LineRange), (status = 404, body = ErrorBody)),
    security((), ("bearer" = [])))]
pub(super) async fn read(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<ReadQuery>,
) -> Result<Json<LineRange>, ApiError> {
    if query.from == Some(0) || query.to == Some(0) {
        return Err(ApiError::bad_request("lines are numbered from 1"));
    }
    if let (Some(from), Some(to)) = (query.from, query.to)
        && to < from
    {
        return Err(ApiError::bad_request("`to` is before `from`"));
    }
    pages::read(
        &state.context.store,
        &query.url,
        query.from.unwrap_or(1),
        query.to,
    )
    .await?
    .map(Json)
    .ok_or_else(|| ApiError::not_found(format!("no stored page for {}", query.url)))
}

/// A grep over a stored page.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GrepRequest {
    /// The page's URL.
    pub url: String,
    /// A regular expression (Rust syntax; no backreferences or look-around).
    pub pattern: String,
    /// Match case-insensitively.
    #[serde(default)]
    pub ignore_case: bool,
    /// Lines of context before and after each match (at most 20).
    #[serde(default = "default_context")]
    pub context: usize,
    /// Most matching lines reported (at most 200).
    #[serde(default = "default_max_matches")]
    pub max_matches: usize,
}

fn default_context() -> usize {
    2
}

fn default_max_matches() -> usize {
    50
}

/// What a grep found, on which page.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct GrepResponse {
    /// The page's URL.
    pub url: String,
    /// The page id.
    pub page_id: String,
    /// What matched.
    #[serde(flatten)]
    pub result: GrepResult,
}

/// Greps a stored page's lines.
#[utoipa::path(post, path = "/v1/pages/grep", operation_id = "grep_page", request_body = GrepRequest, tag = "pages",
    responses(
        (status = 200, body = GrepResponse),
        (status = 400, description = "invalid, too long or too costly pattern", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn grep(
    State(state): State<AppState>,
    ApiJson(request): ApiJson<GrepRequest>,
) -> Result<Json<GrepResponse>, ApiError> {
    let limits = GrepLimits {
        max_output_chars: state.config.grep_max_output_chars,
        ..GrepLimits::default()
    };
    let regex = pages::compile_pattern(&request.pattern, request.ignore_case, &limits)
        .map_err(|error| ApiError::new(ApiErrorCode::InvalidPattern, error.to_string()))?;
    let store = &state.context.store;
    let key = pages::lookup_key(&request.url);
    let page = store
        .latest_page(&key)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no stored page for {}", request.url)))?;
    let text = store.page_text(&page).await?;
    let query = GrepQuery {
        context: request.context,
        max_matches: request.max_matches,
    };
    let result = tokio::task::spawn_blocking(move || pages::grep(&text, &regex, &query, &limits))
        .await
        .map_err(|error| ApiError::internal(&error))?;
    Ok(Json(GrepResponse {
        url: page.info.url,
        page_id: page.id,
        result,
    }))
}
