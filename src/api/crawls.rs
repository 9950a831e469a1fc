//! Crawls: `POST /v1/crawls` starts one (seeds, scope, globs, depth, page budget, sitemaps,
//! robots.txt, archive, cache TTL, webhook), `GET /v1/crawls/{id}` reads its state and
//! counters, `GET /v1/crawls/{id}/pages` lists its pages (paged with a cursor), `DELETE
//! /v1/crawls/{id}` cancels it (queued pages are cancelled, running ones stop at their next
//! safe point).
//!
//! Not here: following links (`crawl`, run by the pools beside the API).

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use trawl_workers::job::CrawlSpec;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ApiErrorCode, ApiJson, ApiPath, ApiQuery, ErrorBody};
use super::jobs::JobList;
use crate::crawl::StartError;
use crate::store::{CrawlRecord, CrawlStatus, JobFilter, Status};

/// A crawl as accepted.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CrawlStarted {
    /// The crawl id: `GET /v1/crawls/{id}` follows it.
    pub id: String,
    /// `running` (its first pages are being queued).
    pub status: CrawlStatus,
}

/// Starts a crawl.
#[utoipa::path(post, path = "/v1/crawls", operation_id = "start_crawl", request_body = CrawlSpec, tag = "crawls",
    responses(
        (status = 202, description = "started", body = CrawlStarted),
        (status = 400, description = "a seed or an option is not acceptable", body = ErrorBody),
        (status = 422, description = "malformed request", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn start(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiJson(spec): ApiJson<CrawlSpec>,
) -> Result<(StatusCode, Json<CrawlStarted>), ApiError> {
    if let Some(refusal) = spec
        .webhook
        .as_deref()
        .and_then(|webhook| super::jobs::webhook_refusal(&state, webhook))
    {
        return Err(refusal);
    }
    let plan = crate::crawl::create_for(&state.context, spec, scope.tenant)
        .await
        .map_err(|error| match error {
            StartError::Invalid(message) => ApiError::bad_request(message),
            other => ApiError::internal(&other),
        })?;
    // robots.txt and sitemaps of remote sites may take a while: the first pages are queued
    // in the background, and GET /v1/crawls/{id} shows them arrive.
    let id = plan.id.clone();
    let context = state.context.clone();
    let queue = state.queue.clone();
    tokio::spawn(async move {
        if let Err(error) = crate::crawl::seed(&context, &queue, &plan).await {
            tracing::error!(crawl_id = %plan.id, error = %error, "seeding a crawl failed");
        }
    });
    let status = CrawlStatus::Running;
    Ok((StatusCode::ACCEPTED, Json(CrawlStarted { id, status })))
}

/// A crawl's state, spec and counters.
#[utoipa::path(get, path = "/v1/crawls/{id}", operation_id = "read_crawl", tag = "crawls",
    params(("id" = String, Path, description = "the crawl id")),
    responses((status = 200, body = CrawlRecord), (status = 404, body = ErrorBody)),
    security((), ("bearer" = [])))]
pub(super) async fn read(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<CrawlRecord>, ApiError> {
    state
        .context
        .store
        .crawl_in(&scope, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no crawl {id}")))
}

/// Cancels a running crawl.
#[utoipa::path(delete, path = "/v1/crawls/{id}", operation_id = "cancel_crawl", tag = "crawls",
    params(("id" = String, Path, description = "the crawl id")),
    responses(
        (status = 200, body = CrawlRecord),
        (status = 404, body = ErrorBody),
        (status = 409, description = "the crawl had already ended", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn cancel(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<CrawlRecord>, ApiError> {
    let store = &state.context.store;
    if store.crawl_in(&scope, &id).await?.is_none() {
        return Err(ApiError::not_found(format!("no crawl {id}")));
    }
    let cancelled = store.cancel_crawl(&id).await?;
    let record = store
        .crawl(&id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no crawl {id}")))?;
    if !cancelled {
        return Err(ApiError::new(
            ApiErrorCode::Conflict,
            format!("crawl {id} had already ended ({})", record.status.as_str()),
        ));
    }
    Ok(Json(record))
}

/// Which pages of a crawl to list, and from where.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PagesQuery {
    /// Only pages whose job has this status (`succeeded`, `failed`, …).
    #[serde(default)]
    pub status: Option<Status>,
    /// Where to go on from: the `next_cursor` of the previous answer.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Entries per answer, 1 to 1000 (default 100).
    #[serde(default)]
    #[param(minimum = 1, maximum = 1_000)]
    pub limit: Option<u32>,
}

/// A crawl's pages: each of its jobs with its URL, final URL, status or error code, page id
/// and title, in job id order, a page at a time.
#[utoipa::path(get, path = "/v1/crawls/{id}/pages", tag = "crawls",
    operation_id = "list_crawl_pages",
    params(("id" = String, Path, description = "the crawl id"), PagesQuery),
    responses((status = 200, body = JobList), (status = 404, body = ErrorBody)),
    security((), ("bearer" = [])))]
pub(super) async fn pages(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<PagesQuery>,
) -> Result<Json<JobList>, ApiError> {
    if state.context.store.crawl_in(&scope, &id).await?.is_none() {
        return Err(ApiError::not_found(format!("no crawl {id}")));
    }
    let filter = JobFilter {
        crawl_id: Some(id),
        status: query.status,
        tenant: scope.filter().map(str::to_owned),
        ..JobFilter::default()
    };
    super::jobs::list_page(&state, &filter, query.cursor.as_deref(), query.limit)
        .await
        .map(Json)
}
