//! `POST /v1/fetch`: the synchronous convenience, an agent's `web_fetch`. Served from the page
//! cache when fresh; otherwise queued like any job and awaited up to a timeout (if the wait
//! ends first, a 202 names the job, which goes on). The fetch itself is `fetch_now`'s, shared
//! with `trawl fetch`.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse as _, Response};
use serde::{Deserialize, Serialize};
use trawl_workers::job::{ErrorCode, FetchJob, FetchResult, Format};
use utoipa::ToSchema;

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ApiErrorCode, ApiJson, ErrorBody};
use crate::fetch_now::{self, Ended, StartError, Started};
use crate::store::Status;

/// A synchronous fetch.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FetchRequest {
    /// The http or https URL.
    #[schema(format = "uri")]
    pub url: String,
    /// The format of `content.text`.
    #[serde(default)]
    pub format: Format,
    /// Characters of text returned (the whole text is stored; read the rest with `/v1/pages`).
    #[serde(default)]
    pub max_chars: Option<usize>,
    /// Seconds a stored page may be served instead of fetching; 0 always fetches.
    #[serde(default)]
    #[schema(maximum = 315_360_000)]
    pub cache_ttl: Option<u64>,
    /// Seconds to wait for the fetch (capped by `api.sync_timeout_secs`).
    #[serde(default)]
    #[schema(maximum = 3_600)]
    pub timeout_secs: Option<u64>,
    /// Also archive the page: chunks into the search index, responses into WARC files.
    #[serde(default)]
    pub archive: bool,
    /// Render in headless Chromium: `true`, `false` (default) or `"auto"` (when the plain
    /// page looks built by JavaScript).
    #[serde(default)]
    pub render: trawl_workers::job::Render,
    /// The proxy: absent for the configured ones, `"direct"` for none, or a proxy URL of
    /// its own (its address is checked like any destination's).
    #[serde(default)]
    pub proxy: Option<String>,
    /// Headers sent with the request (a service token, routing metadata): secrets, shown by
    /// name only when the job is read back; sent to the URL's origin only (Accept,
    /// Accept-Language and User-Agent also after a redirect elsewhere). Names trawl sets
    /// (Host, Content-Length, Cookie, …) are refused. A page fetched with headers is cached
    /// for the caller alone.
    #[serde(default)]
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub headers: trawl_workers::job::CustomHeaders,
    /// The fallback extraction provider asked when trawl finds no readable content:
    /// `"none"`, `"firecrawl"`, `"crawl4ai"` or `"auto"`; absent, the configured
    /// `fetch.fallback`. The request's headers never go to a provider.
    #[serde(default)]
    pub fallback: Option<trawl_workers::job::Fallback>,
    /// With `render: true`: cookies, per-origin headers and localStorage entries the browser
    /// sets before the page loads (as a browse job's). Secrets, shown as counts when the job
    /// is read back; the page is cached for the caller alone and never sent to a fallback
    /// provider.
    #[serde(default)]
    pub credentials: trawl_workers::job::Credentials,
}

/// The answer when the fetch did not end within the wait: the job goes on.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Pending {
    /// The job to follow at `/v1/jobs/{id}`.
    pub job_id: String,
    /// `queued` or `running`.
    pub status: Status,
    /// What to do next.
    pub message: String,
}

/// Fetches a URL now: from the cache when fresh (`cached: true`), else through the queue.
#[utoipa::path(post, path = "/v1/fetch", operation_id = "fetch_url", request_body = FetchRequest, tag = "fetch",
    responses(
        (status = 200, description = "the page", body = FetchResult),
        (status = 202, description = "not done within the wait; the job goes on", body = Pending),
        (status = 400, description = "invalid URL or scheme", body = ErrorBody),
        (status = 403, description = "destination refused by the SSRF guard", body = ErrorBody),
        (status = 409, description = "the job was cancelled", body = ErrorBody),
        (status = 422, description = "the fetch failed (the code says how)", body = ErrorBody),
        (status = 429, description = "render: every browser context is taken; try again later", body = ErrorBody),
        (status = 502, description = "render: the browser failed", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn fetch(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiJson(request): ApiJson<FetchRequest>,
) -> Result<Response, ApiError> {
    let job = FetchJob {
        url: request.url,
        format: request.format,
        max_chars: request.max_chars,
        cache_ttl: request.cache_ttl,
        archive: request.archive,
        render: request.render,
        proxy: request.proxy,
        headers: request.headers,
        fallback: request.fallback,
        credentials: request.credentials,
    };
    job.validate().map_err(ApiError::invalid)?;
    if request.timeout_secs.is_some_and(|seconds| seconds > 3_600) {
        return Err(ApiError::invalid("timeout_secs is above 3600"));
    }
    let mut waiter = match fetch_now::start(&state.context, &state.queue, job, &scope.tenant).await
    {
        Ok(Started::Cached(result)) => return Ok(Json(result).into_response()),
        Ok(Started::Queued(waiter)) => waiter,
        Err(StartError::Refused(error)) => {
            super::count_refusal(&state, &error);
            return Err(ApiError::from_job_error(error, None));
        }
        Err(StartError::Store(error)) => return Err(error.into()),
        Err(StartError::Queue(error)) => return Err(ApiError::internal(&error)),
    };
    let wait = Duration::from_secs(
        request
            .timeout_secs
            .unwrap_or(u64::MAX)
            .min(state.config.sync_timeout_secs),
    );
    let id = waiter.job_id().to_owned();
    match waiter.wait(&state.context.store, wait).await? {
        Ended::Succeeded(result) => Ok(Json(result).into_response()),
        Ended::Failed(error) => Err(ApiError::from_job_error(error, Some(id))),
        Ended::Cancelled => Err(ApiError::new(
            ApiErrorCode::Job(ErrorCode::Cancelled),
            "the job was cancelled",
        )
        .with_job(&id)),
        Ended::Pending(status) => {
            let message = format!(
                "the fetch did not end within {} s; follow it at /v1/jobs/{id}",
                wait.as_secs()
            );
            let pending = Pending {
                job_id: id,
                status,
                message,
            };
            Ok((StatusCode::ACCEPTED, Json(pending)).into_response())
        }
    }
}
