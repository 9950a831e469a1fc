//! Stored pages, an agent's `web_read` and `web_grep`: `GET /v1/pages?url=&from=&to=` reads
//! the most recent page of a URL by line range; `POST /v1/pages/grep` searches its lines with
//! a regular expression (linear-time engine, size limits, nested repetition refused), with
//! context lines, overlapping contexts merged and the output capped.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ApiErrorCode, ApiJson, ApiQuery, ErrorBody};
use crate::pages::{self, GrepError, GrepLimits, GrepQuery, LineRange, PageGrep};

/// Which lines of which page.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
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

/// Reads a stored page by line range, at most `api.read_max_chars` characters of lines at a
/// time; `next_from` names the first line of the next range, `total_lines` how far there is
/// to go.
#[utoipa::path(get, path = "/v1/pages", operation_id = "read_page", tag = "pages", params(ReadQuery),
    responses((status = 200, body = LineRange), (status = 404, body = ErrorBody)),
    security((), ("bearer" = [])))]
pub(super) async fn read(
    State(state): State<AppState>,
    Caller(scope): Caller,
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
        &scope,
        &query.url,
        query.from.unwrap_or(1),
        query.to,
        state.config.read_max_chars,
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

/// Greps a stored page's lines.
#[utoipa::path(post, path = "/v1/pages/grep", operation_id = "grep_page", request_body = GrepRequest, tag = "pages",
    responses(
        (status = 200, body = PageGrep),
        (status = 400, description = "invalid, too long or too costly pattern", body = ErrorBody),
        (status = 404, body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn grep(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiJson(request): ApiJson<GrepRequest>,
) -> Result<Json<PageGrep>, ApiError> {
    let limits = GrepLimits {
        max_output_chars: state.config.grep_max_output_chars,
        ..GrepLimits::default()
    };
    let query = GrepQuery {
        context: request.context,
        max_matches: request.max_matches,
    };
    let found = pages::grep_page(
        &state.context.store,
        &scope,
        &request.url,
        &request.pattern,
        request.ignore_case,
        query,
        limits,
    )
    .await;
    match found {
        Ok(found) => Ok(Json(found)),
        Err(GrepError::Pattern(error)) => Err(ApiError::new(
            ApiErrorCode::InvalidPattern,
            error.to_string(),
        )),
        Err(GrepError::NoPage(url)) => {
            Err(ApiError::not_found(format!("no stored page for {url}")))
        }
        Err(GrepError::Store(error)) => Err(error.into()),
        Err(error @ GrepError::Internal(_)) => Err(ApiError::internal(&error)),
    }
}
