//! Jobs: `POST /v1/jobs` (one job, or a batch of up to `api.max_batch`, all-or-nothing on
//! validation), `GET /v1/jobs` (listed by batch, crawl and status, paged with a cursor),
//! `GET /v1/jobs/{id}`, `GET /v1/jobs/{id}/events` (server-sent events until the job ends),
//! `DELETE /v1/jobs/{id}` (cancel) and `GET /v1/batches/{id}` (a batch's counts).

use std::convert::Infallible;
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use serde::{Deserialize, Serialize};
use trawl_workers::fetch as fetch_pool;
use trawl_workers::job::Job;
use utoipa::{IntoParams, ToSchema};

use super::AppState;
use super::auth::Caller;
use super::error::{ApiError, ApiErrorCode, ApiJson, ApiPath, ApiQuery, ErrorBody, at_path};
use crate::queue::Envelope;
use crate::store::{Cancel, JobEntry, JobFilter, JobRecord, NewBatch, NewJob, Status};

/// A batch of jobs, with an optional webhook for their events.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BatchRequest {
    /// The jobs, at most `api.max_batch`.
    pub jobs: Vec<Job>,
    /// An http(s) URL that receives signed `started`, `page`, `failed` and `completed` events.
    #[serde(default)]
    pub webhook: Option<String>,
}

/// One job (`{"kind": "fetch", ...}`; `kind` defaults to `fetch`) or a batch
/// (`{"jobs": [...], "webhook": ...}`).
/// The handler picks the variant by the `jobs` key (for precise errors), so this type only
/// describes the body in the OpenAPI document.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum SubmitRequest {
    /// A batch.
    Batch(BatchRequest),
    /// One job.
    One(Job),
}

/// A job as accepted.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Accepted {
    /// Its id.
    pub id: String,
    /// Its URL.
    pub url: String,
}

/// The answer to a submission.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Submitted {
    /// The batch id (a batch submission only).
    pub batch_id: Option<String>,
    /// The jobs, in the order given.
    pub jobs: Vec<Accepted>,
}

/// The answer to a cancel request.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Cancelled {
    /// The job id.
    pub id: String,
    /// `cancelled` (it was queued) or `cancelling` (it stops at its next safe point).
    pub status: String,
}

/// Adds `"kind": "fetch"` to a job object without a kind.
fn default_kind(job: &mut serde_json::Value) {
    if let Some(object) = job.as_object_mut()
        && !object.contains_key("kind")
    {
        object.insert("kind".to_owned(), serde_json::Value::from("fetch"));
    }
}

/// Submits one job or a batch (a job without `kind` is a fetch job).
#[utoipa::path(post, path = "/v1/jobs", operation_id = "submit_jobs", request_body = SubmitRequest, tag = "jobs",
    responses(
        (status = 202, description = "queued", body = Submitted),
        (status = 400, description = "a job or the webhook is not acceptable", body = ErrorBody),
        (status = 403, description = "a job's or the webhook's destination refused by the SSRF guard", body = ErrorBody),
        (status = 422, description = "malformed request", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn submit(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiJson(mut body): ApiJson<serde_json::Value>,
) -> Result<(StatusCode, Json<Submitted>), ApiError> {
    let is_batch = body.get("jobs").is_some();
    // `kind` defaults to `fetch`, the job most submissions are.
    match body.get_mut("jobs") {
        Some(serde_json::Value::Array(jobs)) => jobs.iter_mut().for_each(default_kind),
        Some(_) => {}
        None => default_kind(&mut body),
    }
    // The error names the field's path (`jobs[1]`, `webhook.url`).
    let (jobs, webhook) = if is_batch {
        let batch: BatchRequest = serde_path_to_error::deserialize(body)
            .map_err(|error| ApiError::invalid(format!("invalid batch: {}", at_path(error))))?;
        (batch.jobs, batch.webhook)
    } else {
        let job: Job = serde_path_to_error::deserialize(body)
            .map_err(|error| ApiError::invalid(format!("invalid job: {}", at_path(error))))?;
        (vec![job], None)
    };
    if jobs.is_empty() {
        return Err(ApiError::invalid("a batch needs at least one job"));
    }
    if jobs.len() > state.config.max_batch {
        return Err(ApiError::invalid(format!(
            "a batch holds at most {} jobs (api.max_batch), got {}",
            state.config.max_batch,
            jobs.len()
        )));
    }
    let client = &state.context.fetch.client;
    for (index, job) in jobs.iter().enumerate() {
        job.validate()
            .map_err(|message| ApiError::invalid(format!("jobs[{index}]: {message}")))?;
        // A search job has no URL: its configuration is checked instead (a forbidden
        // engine, an unconfigured provider).
        if let Job::Search(search) = job {
            crate::web_search::check(&state.context, search).map_err(|error| {
                let error = super::web_search::search_error(error);
                if is_batch {
                    ApiError::new(error.code(), format!("jobs[{index}]: {}", error.message()))
                } else {
                    error
                }
            })?;
            continue;
        }
        if let Err(error) = fetch_pool::check_url(client, job.url()) {
            super::count_refusal(&state, &error);
            let message = if is_batch {
                format!("jobs[{index}]: {}", error.message)
            } else {
                error.message.clone()
            };
            return Err(ApiError::new(ApiErrorCode::Job(error.code), message));
        }
    }
    if let Some(refusal) = webhook
        .as_deref()
        .and_then(|webhook| webhook_refusal(&state, webhook))
    {
        return Err(refusal);
    }

    // A search job that fetches its top results makes a batch of them, even alone.
    let fetches_results = jobs
        .iter()
        .any(|job| matches!(job, Job::Search(search) if search.fetch_top > 0));
    let batch_id = (is_batch || fetches_results).then(|| ulid::Ulid::generate().to_string());
    let submitted = enqueue(&state, &scope.tenant, jobs, webhook, batch_id).await?;
    Ok((StatusCode::ACCEPTED, Json(submitted)))
}

/// Records checked jobs of `tenant` (as the batch `batch_id` when given, with its webhook)
/// and queues them.
pub(super) async fn enqueue(
    state: &AppState,
    tenant: &crate::tenant::Tenant,
    jobs: Vec<Job>,
    webhook: Option<String>,
    batch_id: Option<String>,
) -> Result<Submitted, ApiError> {
    let batch = batch_id.as_ref().map(|id| NewBatch {
        id: id.clone(),
        webhook: webhook.clone(),
        total: jobs.len() as u64,
        tenant: tenant.clone(),
    });
    let max_attempts = state.context.config.max_attempts;
    let mut new_jobs = Vec::with_capacity(jobs.len());
    let mut envelopes = Vec::with_capacity(jobs.len());
    for job in jobs {
        let id = ulid::Ulid::generate().to_string();
        new_jobs.push(NewJob {
            batch_id: batch_id.clone(),
            webhook: webhook.clone(),
            tenant: tenant.clone(),
            ..NewJob::new(&id, &job, max_attempts)
        });
        envelopes.push(Envelope {
            batch_id: batch_id.clone(),
            webhook: webhook.clone(),
            tenant: tenant.clone(),
            ..Envelope::new(id, job)
        });
    }
    state
        .context
        .store
        .submit(batch.as_ref(), &new_jobs)
        .await?;
    let accepted = envelopes
        .iter()
        .map(|envelope| Accepted {
            id: envelope.id.clone(),
            url: envelope.job.url().to_owned(),
        })
        .collect();
    state
        .queue
        .push(envelopes)
        .await
        .map_err(|error| ApiError::internal(&error))?;
    Ok(Submitted {
        batch_id,
        jobs: accepted,
    })
}

/// Why a webhook (a batch's or a crawl's) is refused: webhooks are not configured, or the
/// guard refuses its URL; `None` when it is accepted.
pub(crate) fn webhook_refusal(state: &AppState, webhook: &str) -> Option<ApiError> {
    if state.context.webhooks.is_none() {
        return Some(ApiError::new(
            ApiErrorCode::WebhooksDisabled,
            "webhooks need a signing secret: set webhooks.secret",
        ));
    }
    let error = fetch_pool::check_url(&state.context.fetch.client, webhook).err()?;
    super::count_refusal(state, &error);
    Some(ApiError::new(
        ApiErrorCode::Job(error.code),
        format!("webhook: {}", error.message),
    ))
}

/// Returns a job: status, attempts, and its result or typed error.
#[utoipa::path(get, path = "/v1/jobs/{id}", operation_id = "read_job", tag = "jobs",
    params(("id" = String, Path, description = "the job id")),
    responses((status = 200, body = JobRecord), (status = 404, body = ErrorBody)),
    security((), ("bearer" = [])))]
pub(super) async fn read(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<JobRecord>, ApiError> {
    state
        .context
        .store
        .job_in(&scope, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no job {id}")))
}

/// Cancels a queued job at once; a running one stops at its next safe point.
#[utoipa::path(delete, path = "/v1/jobs/{id}", operation_id = "cancel_job", tag = "jobs",
    params(("id" = String, Path, description = "the job id")),
    responses(
        (status = 200, body = Cancelled),
        (status = 404, body = ErrorBody),
        (status = 409, description = "the job had already ended", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn cancel(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Cancelled>, ApiError> {
    // Another tenant's job is unknown here (its tenant never changes, so checking first is
    // enough).
    if state.context.store.job_in(&scope, &id).await?.is_none() {
        return Err(ApiError::not_found(format!("no job {id}")));
    }
    let status = match state.context.store.request_cancel(&id).await? {
        Cancel::Cancelled => {
            let _ = state.context.ended.send(id.clone());
            "cancelled"
        }
        Cancel::Requested => "cancelling",
        Cancel::AlreadyEnded(status) => {
            return Err(ApiError::new(
                ApiErrorCode::Conflict,
                format!("job {id} already ended: {}", status.as_str()),
            ));
        }
        Cancel::Unknown => return Err(ApiError::not_found(format!("no job {id}"))),
    };
    Ok(Json(Cancelled {
        id,
        status: status.to_owned(),
    }))
}

/// Streams a job's progress as server-sent events: a `status` event each time its status or
/// attempt count changes, then one `end` event with the whole record, then the stream closes.
#[utoipa::path(get, path = "/v1/jobs/{id}/events", operation_id = "job_events", tag = "jobs",
    params(("id" = String, Path, description = "the job id")),
    responses(
        (status = 200, description = "text/event-stream of `status` events, then one `end` event", content_type = "text/event-stream", body = String),
        (status = 404, body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn events(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let first = state
        .context
        .store
        .job_in(&scope, &id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no job {id}")))?;
    let ended = state.context.ended.subscribe();
    let stream = futures_util::stream::unfold(
        EventsState {
            state,
            id,
            ended,
            next: Some(first),
            last: None,
            done: false,
        },
        next_event,
    );
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

struct EventsState {
    state: AppState,
    id: String,
    ended: tokio::sync::broadcast::Receiver<String>,
    /// A record read but not yet compared with the last one sent.
    next: Option<JobRecord>,
    /// What the last `status` event said.
    last: Option<(Status, u32)>,
    done: bool,
}

async fn next_event(mut events: EventsState) -> Option<(Result<Event, Infallible>, EventsState)> {
    if events.done {
        return None;
    }
    loop {
        let record = match events.next.take() {
            Some(record) => record,
            None => {
                // Wake on this process's job ends, or poll: another process may run the job.
                let wait = tokio::time::sleep(Duration::from_millis(500));
                tokio::pin!(wait);
                loop {
                    tokio::select! {
                        _ = &mut wait => break,
                        received = events.ended.recv() => match received {
                            Ok(id) if id == events.id => break,
                            Ok(_) => continue,
                            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => break,
                            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                                (&mut wait).await;
                                break;
                            }
                        },
                    }
                }
                match events.state.context.store.job(&events.id).await {
                    Ok(Some(record)) => record,
                    _ => return None,
                }
            }
        };
        if record.status.is_terminal() {
            events.done = true;
            let event = Event::default()
                .event("end")
                .json_data(&record)
                .unwrap_or_default();
            return Some((Ok(event), events));
        }
        let now = (record.status, record.attempts);
        if events.last != Some(now) {
            events.last = Some(now);
            let summary = serde_json::json!({ "id": record.id, "status": record.status, "attempts": record.attempts });
            let event = Event::default()
                .event("status")
                .json_data(summary)
                .unwrap_or_default();
            return Some((Ok(event), events));
        }
    }
}

/// Which jobs to list, and from where.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// Only the jobs of this batch.
    #[serde(default)]
    pub batch_id: Option<String>,
    /// Only the jobs of this crawl.
    #[serde(default)]
    pub crawl_id: Option<String>,
    /// Only jobs with this status.
    #[serde(default)]
    pub status: Option<Status>,
    /// Where to go on from: the `next_cursor` of the previous answer.
    #[serde(default)]
    pub cursor: Option<String>,
    /// Jobs per answer, 1 to 1000 (default 100).
    #[serde(default)]
    #[param(minimum = 1, maximum = 1_000)]
    pub limit: Option<u32>,
}

/// One answer of a listing: jobs in id order (creation order), and where the next answer
/// starts.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct JobList {
    /// The jobs.
    pub jobs: Vec<JobEntry>,
    /// Pass as `cursor` for the next jobs; `null` when there are no more.
    pub next_cursor: Option<String>,
}

/// Lists jobs, filtered by batch, crawl and status, a page at a time.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", operation_id = "list_jobs",
    params(ListQuery),
    responses((status = 200, body = JobList), (status = 400, body = ErrorBody)),
    security((), ("bearer" = [])))]
pub(super) async fn list(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<Json<JobList>, ApiError> {
    let filter = JobFilter {
        batch_id: query.batch_id,
        crawl_id: query.crawl_id,
        status: query.status,
        tenant: scope.filter().map(str::to_owned),
    };
    list_page(&state, &filter, query.cursor.as_deref(), query.limit)
        .await
        .map(Json)
}

/// One answer of a job listing: `limit` jobs (default 100, at most 1,000) after `cursor`.
pub(super) async fn list_page(
    state: &AppState,
    filter: &JobFilter,
    cursor: Option<&str>,
    limit: Option<u32>,
) -> Result<JobList, ApiError> {
    let limit = limit.unwrap_or(100);
    if !(1..=1_000).contains(&limit) {
        return Err(ApiError::bad_request("limit is outside 1..=1000"));
    }
    // One more than asked says whether there is a next answer.
    let mut jobs = state
        .context
        .store
        .list_jobs(filter, cursor, limit + 1)
        .await?;
    let more = jobs.len() > limit as usize;
    jobs.truncate(limit as usize);
    let next_cursor = more
        .then(|| jobs.last().map(|job| job.job_id.clone()))
        .flatten();
    Ok(JobList { jobs, next_cursor })
}

/// A batch (a `POST /v1/jobs` batch, or a `trawl run`): its jobs counted by status and by
/// error code. `GET /v1/jobs?batch_id=` lists the jobs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BatchRecord {
    /// The batch id.
    pub id: String,
    /// Jobs in the batch.
    pub total: u64,
    /// True once every job has ended.
    pub ended: bool,
    /// Jobs by status (`queued`, `running`, `succeeded`, `failed`, `dead`, `cancelled`).
    pub counts: std::collections::BTreeMap<String, u64>,
    /// Failed and dead jobs by error code.
    pub errors: std::collections::BTreeMap<String, u64>,
}

/// A batch's counts by status and error code.
#[utoipa::path(get, path = "/v1/batches/{id}", tag = "jobs", operation_id = "read_batch",
    params(("id" = String, Path, description = "the batch id")),
    responses((status = 200, body = BatchRecord), (status = 404, body = ErrorBody)),
    security((), ("bearer" = [])))]
pub(super) async fn batch(
    State(state): State<AppState>,
    Caller(scope): Caller,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<BatchRecord>, ApiError> {
    // Another tenant's batch is not found: the caller must see one of its jobs.
    let visible = JobFilter {
        batch_id: Some(id.clone()),
        tenant: scope.filter().map(str::to_owned),
        ..JobFilter::default()
    };
    if state
        .context
        .store
        .list_jobs(&visible, None, 1)
        .await?
        .is_empty()
    {
        return Err(ApiError::not_found(format!("no batch {id}")));
    }
    batch_record(&state.context.store, &id)
        .await?
        .map(Json)
        .ok_or_else(|| ApiError::not_found(format!("no batch {id}")))
}

/// A batch's record, or `None` when no job has its id (`trawl status` prints the same).
pub async fn batch_record(
    store: &crate::store::Store,
    id: &str,
) -> Result<Option<BatchRecord>, crate::store::Error> {
    let counts = store.count_by_status(Some(id)).await?;
    if counts.is_empty() {
        return Ok(None);
    }
    let errors = store.count_errors(id).await?;
    Ok(Some(BatchRecord {
        id: id.to_owned(),
        total: counts.iter().map(|(_, n)| n).sum(),
        ended: counts.iter().all(|(status, _)| status.is_terminal()),
        counts: counts
            .into_iter()
            .map(|(status, n)| (status.as_str().to_owned(), n))
            .collect(),
        errors: errors.into_iter().collect(),
    }))
}
