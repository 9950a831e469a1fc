//! `POST /v1/fetch`: the synchronous convenience, an agent's `web_fetch`. Served from the page
//! cache when fresh; otherwise queued like any job and awaited up to a timeout (if the wait
//! ends first, a 202 names the job, which goes on).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse as _, Response};
use serde::{Deserialize, Serialize};
use trawl_workers::job::{ErrorCode, FetchJob, FetchResult, Format, Job, JobError};
use utoipa::ToSchema;

use super::AppState;
use super::error::{ApiError, ApiErrorCode, ApiJson, ErrorBody};
use crate::queue::Envelope;
use crate::runner;
use crate::store::{NewJob, Status};

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
    };
    job.validate().map_err(ApiError::invalid)?;
    if request.timeout_secs.is_some_and(|seconds| seconds > 3_600) {
        return Err(ApiError::invalid("timeout_secs is above 3600"));
    }
    let context = &state.context;
    let (url, options_hash) = runner::cache_key(&context.fetch.client, &job).map_err(|error| {
        super::count_refusal(&state, &error);
        ApiError::from_job_error(error, None)
    })?;
    if let Some(hit) = runner::fresh_page(context, &job, &url, &options_hash).await? {
        context.metrics.cache_hit();
        let max_chars = context.fetch.config.max_chars_for(&job);
        let result = runner::cached_result(&job, &hit, max_chars);
        return Ok(Json(result).into_response());
    }

    let id = ulid::Ulid::generate().to_string();
    let job = Job::Fetch(job);
    let new_job = NewJob::new(&id, &job, context.config.max_attempts);
    // Subscribe before queueing, so the end cannot slip between the two.
    let mut ended = context.ended.subscribe();
    context.store.create_jobs(&[new_job]).await?;
    state
        .queue
        .push(vec![Envelope::new(id.clone(), job)])
        .await
        .map_err(|error| ApiError::internal(&error))?;

    let wait = Duration::from_secs(
        request
            .timeout_secs
            .unwrap_or(u64::MAX)
            .min(state.config.sync_timeout_secs),
    );
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let record = context
            .store
            .job(&id)
            .await?
            .ok_or_else(|| ApiError::internal(&format!("job {id} vanished")))?;
        match record.status {
            Status::Succeeded => return Ok(Json(record.result.unwrap_or_default()).into_response()),
            Status::Failed | Status::Dead => {
                let error = record.error.unwrap_or_else(|| {
                    JobError::new(ErrorCode::Internal, "the job failed without an error")
                });
                return Err(ApiError::from_job_error(error, Some(id)));
            }
            Status::Cancelled => {
                return Err(ApiError::new(
                    ApiErrorCode::Job(ErrorCode::Cancelled),
                    "the job was cancelled",
                )
                .with_job(&id));
            }
            Status::Queued | Status::Running => {}
        }
        // Wake on this process's job ends, or poll: a worker elsewhere may run the job.
        let poll = tokio::time::Instant::now() + Duration::from_millis(500);
        let wake = poll.min(deadline);
        loop {
            tokio::select! {
                _ = tokio::time::sleep_until(wake) => break,
                received = ended.recv() => match received {
                    Ok(ended_id) if ended_id == id => break,
                    Ok(_) => continue,
                    Err(_) => break,
                },
            }
        }
        if tokio::time::Instant::now() >= deadline {
            let message = format!(
                "the fetch did not end within {} s; follow it at /v1/jobs/{id}",
                wait.as_secs()
            );
            let pending = Pending {
                job_id: id,
                status: record.status,
                message,
            };
            return Ok((StatusCode::ACCEPTED, Json(pending)).into_response());
        }
    }
}
