//! `POST /v{1,2}/scrape` (one URL scraped now: a fetch job through `fetch_now`, as `POST
//! /v1/fetch`, or a browse job for a screenshot, actions or a mobile device, answered with
//! its document) and the batch scrape routes (`POST
//! /v{1,2}/batch/scrape`: a trawl batch of fetch jobs, whose id is the batch's; `GET
//! /v{1,2}/batch/scrape/{id}`: its status and documents, a page at a time with `next`).
//!
//! Not here: what the options mean (`options`), building documents (`document`).

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use serde::{Deserialize, Serialize};
use trawl_workers::job::{BrowseResult, ErrorCode, Job};
use utoipa::{IntoParams, ToSchema};

use super::document::{self, Document};
use super::options::{
    BatchScrapeRequest, BrowsePlanned, Planned, ScrapePlan, ScrapeRequest, Wanted,
};
use super::{ErrorAnswer, FcError, FcJson, Version};
use crate::api::AppState;
use crate::api::auth::Caller;
use crate::api::error::{ApiError, ApiPath, ApiQuery};
use crate::fetch_now::{self, Ended, StartError, Started};
use crate::store::{JobFilter, Status};
use crate::tenant::Scope;

/// A scrape's answer.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FirecrawlScrapeAnswer)]
pub(crate) struct ScrapeAnswer {
    /// Always `true`.
    pub(crate) success: bool,
    /// The page.
    pub(crate) data: Document,
}

/// A batch scrape as accepted.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = FirecrawlBatchStarted)]
pub(crate) struct BatchStarted {
    /// Always `true`.
    pub(crate) success: bool,
    /// The batch id (trawl's: `GET /v1/batches/{id}` reads it too).
    pub(crate) id: String,
    /// Where its status is read.
    pub(crate) url: String,
    /// The URLs left out (with `ignoreInvalidURLs`).
    #[serde(rename = "invalidURLs")]
    pub(crate) invalid_urls: Vec<String>,
}

/// A crawl's or a batch scrape's status, with a page of its documents.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = FirecrawlStatus)]
pub(crate) struct StatusAnswer {
    /// Always `true`.
    pub(crate) success: bool,
    /// `scraping`, `completed` or `cancelled`.
    pub(crate) status: String,
    /// Pages ended (succeeded, failed or cancelled).
    pub(crate) completed: u64,
    /// Pages queued so far.
    pub(crate) total: u64,
    /// Always 0: trawl counts no credits.
    pub(crate) credits_used: u64,
    /// Always `null`: trawl keeps results until they are deleted.
    pub(crate) expires_at: Option<String>,
    /// The next page of documents, while there is one.
    pub(crate) next: Option<String>,
    /// The documents of this page: the pages that succeeded, in job id order.
    pub(crate) data: Vec<Document>,
}

/// Where a status page goes on from.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatusQuery {
    /// The cursor of a `next` link.
    #[serde(default)]
    pub(crate) cursor: Option<String>,
    /// Documents per page, 1 to 100 (default 20).
    #[serde(default)]
    #[param(minimum = 1, maximum = 100)]
    pub(crate) limit: Option<u32>,
}

/// Scrapes a URL now (Firecrawl v1).
#[utoipa::path(post, path = "/v1/scrape", operation_id = "firecrawl_v1_scrape", tag = "firecrawl",
    request_body = ScrapeRequest,
    responses(
        (status = 200, description = "the page's document", body = ScrapeAnswer),
        (status = 400, description = "a refused URL or option", body = ErrorAnswer),
        (status = 403, description = "destination refused by the SSRF guard", body = ErrorAnswer),
        (status = 408, description = "not done within the timeout (SCRAPE_TIMEOUT); the job goes on", body = ErrorAnswer),
        (status = 409, description = "the job was cancelled", body = ErrorAnswer),
        (status = 422, description = "the fetch failed (the code says how)", body = ErrorAnswer),
        (status = 429, description = "rendering: every browser context is taken", body = ErrorAnswer),
        (status = 502, description = "rendering: the browser failed", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn scrape_v1(
    State(state): State<AppState>,
    Caller(scope): Caller,
    FcJson(request): FcJson<ScrapeRequest>,
) -> Result<Json<ScrapeAnswer>, FcError> {
    scrape(&state, &scope, request).await.map(Json)
}

/// Scrapes a URL now (Firecrawl v2).
#[utoipa::path(post, path = "/v2/scrape", operation_id = "firecrawl_v2_scrape", tag = "firecrawl",
    request_body = ScrapeRequest,
    responses(
        (status = 200, description = "the page's document", body = ScrapeAnswer),
        (status = 400, description = "a refused URL or option", body = ErrorAnswer),
        (status = 403, description = "destination refused by the SSRF guard", body = ErrorAnswer),
        (status = 408, description = "not done within the timeout (SCRAPE_TIMEOUT); the job goes on", body = ErrorAnswer),
        (status = 409, description = "the job was cancelled", body = ErrorAnswer),
        (status = 422, description = "the fetch failed (the code says how)", body = ErrorAnswer),
        (status = 429, description = "rendering: every browser context is taken", body = ErrorAnswer),
        (status = 502, description = "rendering: the browser failed", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn scrape_v2(
    State(state): State<AppState>,
    Caller(scope): Caller,
    FcJson(request): FcJson<ScrapeRequest>,
) -> Result<Json<ScrapeAnswer>, FcError> {
    scrape(&state, &scope, request).await.map(Json)
}

async fn scrape(
    state: &AppState,
    scope: &Scope,
    mut request: ScrapeRequest,
) -> Result<ScrapeAnswer, FcError> {
    let data = match request.take_options().plan_scrape(&request.url)? {
        ScrapePlan::Fetch(planned) => scrape_planned(state, scope, planned).await?,
        ScrapePlan::Browse(planned) => scrape_in_browser(state, scope, planned).await?,
    };
    Ok(ScrapeAnswer {
        success: true,
        data,
    })
}

/// Runs a planned fetch job now (or reads it from the cache) and builds its document: a
/// scrape's, and each result's of a search with `scrapeOptions`.
pub(super) async fn scrape_planned(
    state: &AppState,
    scope: &Scope,
    planned: Planned,
) -> Result<Document, FcError> {
    planned.job.validate().map_err(FcError::bad_request)?;
    let wait = planned
        .wait
        .unwrap_or(Duration::MAX)
        .min(Duration::from_secs(state.config.sync_timeout_secs));
    let result =
        match fetch_now::start(&state.context, &state.queue, planned.job, &scope.tenant).await {
            Ok(Started::Cached(result)) => serde_json::to_value(*result)
                .map_err(|error| FcError::from(ApiError::internal(&error)))?,
            Ok(Started::Queued(mut waiter)) => {
                let id = waiter.job_id().to_owned();
                ended_result(waiter.wait(&state.context.store, wait).await?, &id, wait)?
            }
            Err(error) => return Err(start_error(state, error)),
        };
    let cached = result["cached"].as_bool().unwrap_or(false);
    page_document(state, result["page_id"].as_str(), &planned.wanted, cached).await
}

/// Runs a scrape's browse job now and builds its document: the page the actions ended on
/// (stored by the job), with the screenshots and scrapes its steps took. An action that
/// fails fails the scrape (422, with the action's code), as in Firecrawl.
async fn scrape_in_browser(
    state: &AppState,
    scope: &Scope,
    planned: BrowsePlanned,
) -> Result<Document, FcError> {
    let wait = planned
        .wait
        .unwrap_or(Duration::MAX)
        .min(Duration::from_secs(state.config.sync_timeout_secs));
    // The guard's verdict on the URL before a job is recorded, as for a fetch.
    trawl_workers::fetch::check_url(&state.context.fetch.client, &planned.job.url)
        .map_err(|error| start_error(state, StartError::Refused(error)))?;
    let job = Job::Browse(planned.job);
    let mut waiter = fetch_now::submit(&state.context, &state.queue, job, &scope.tenant)
        .await
        .map_err(|error| start_error(state, error))?;
    let id = waiter.job_id().to_owned();
    let result = ended_result(waiter.wait(&state.context.store, wait).await?, &id, wait)?;
    let result: BrowseResult = serde_json::from_value(result)
        .map_err(|error| FcError::from(ApiError::internal(&error)))?;
    if !result.completed {
        let (number, step, error) = result
            .steps
            .iter()
            .enumerate()
            .find_map(|(number, step)| step.error.as_ref().map(|error| (number, step, error)))
            .ok_or_else(|| {
                FcError::from(ApiError::internal(&"an incomplete script without an error"))
            })?;
        let message = format!(
            "browser step {} ({}): {}",
            number + 1,
            step.action,
            error.message
        );
        return Err(ApiError::from_job_error(
            trawl_workers::browse::render::job_error(&error.code, message),
            Some(id),
        )
        .into());
    }
    let Some(page_id) = result.page_id.as_deref() else {
        return Err(FcError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            ErrorCode::EmptyContent.as_str(),
            result
                .page_warning
                .clone()
                .unwrap_or_else(|| "the page the actions ended on was not stored".to_owned()),
        ));
    };
    let mut document = page_document(state, Some(page_id), &planned.wanted, false).await?;
    document.add_steps(&result.steps, &planned.roles);
    Ok(document)
}

/// Why a scrape's job could not start, as the scrape's error (a refused URL is counted).
fn start_error(state: &AppState, error: StartError) -> FcError {
    match error {
        StartError::Refused(error) => {
            crate::api::count_refusal(state, &error);
            ApiError::from_job_error(error, None).into()
        }
        StartError::Store(error) => error.into(),
        StartError::Queue(error) => ApiError::internal(&error).into(),
    }
}

/// The result of a job a scrape waited for, or the scrape's error (failed, cancelled, not
/// done within `wait`).
fn ended_result(ended: Ended, id: &str, wait: Duration) -> Result<serde_json::Value, FcError> {
    match ended {
        Ended::Succeeded(result) => Ok(result),
        Ended::Failed(error) => Err(ApiError::from_job_error(error, Some(id.to_owned())).into()),
        Ended::Cancelled => Err(FcError::new(
            StatusCode::CONFLICT,
            ErrorCode::Cancelled.as_str(),
            format!("job {id} was cancelled"),
        )),
        Ended::Pending(_) => Err(FcError::new(
            StatusCode::REQUEST_TIMEOUT,
            "SCRAPE_TIMEOUT",
            format!(
                "the page was not scraped within {} ms; trawl's job {id} goes on \
                 (GET /v1/jobs/{id})",
                wait.as_millis()
            ),
        )),
    }
}

/// The document of a stored page, by id.
async fn page_document(
    state: &AppState,
    page_id: Option<&str>,
    wanted: &Wanted,
    cached: bool,
) -> Result<Document, FcError> {
    let store = &state.context.store;
    let page = match page_id {
        Some(id) => store.page(id).await?,
        None => None,
    }
    .ok_or_else(|| FcError::from(ApiError::internal(&"a succeeded job without its page")))?;
    document::build(store, &page, wanted, cached).await
}

/// Starts a batch scrape (Firecrawl v1).
#[utoipa::path(post, path = "/v1/batch/scrape", operation_id = "firecrawl_v1_batch_scrape", tag = "firecrawl",
    request_body = BatchScrapeRequest,
    responses(
        (status = 200, description = "queued as a trawl batch", body = BatchStarted),
        (status = 400, description = "a refused URL or option", body = ErrorAnswer),
        (status = 403, description = "a destination refused by the SSRF guard", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn batch_start_v1(
    State(state): State<AppState>,
    Caller(scope): Caller,
    headers: HeaderMap,
    FcJson(request): FcJson<BatchScrapeRequest>,
) -> Result<Json<BatchStarted>, FcError> {
    batch_start(&state, &scope, &headers, Version::V1, request)
        .await
        .map(Json)
}

/// Starts a batch scrape (Firecrawl v2).
#[utoipa::path(post, path = "/v2/batch/scrape", operation_id = "firecrawl_v2_batch_scrape", tag = "firecrawl",
    request_body = BatchScrapeRequest,
    responses(
        (status = 200, description = "queued as a trawl batch", body = BatchStarted),
        (status = 400, description = "a refused URL or option", body = ErrorAnswer),
        (status = 403, description = "a destination refused by the SSRF guard", body = ErrorAnswer),
    ),
    security((), ("bearer" = [])))]
pub(crate) async fn batch_start_v2(
    State(state): State<AppState>,
    Caller(scope): Caller,
    headers: HeaderMap,
    FcJson(request): FcJson<BatchScrapeRequest>,
) -> Result<Json<BatchStarted>, FcError> {
    batch_start(&state, &scope, &headers, Version::V2, request)
        .await
        .map(Json)
}

async fn batch_start(
    state: &AppState,
    scope: &Scope,
    headers: &HeaderMap,
    version: Version,
    mut request: BatchScrapeRequest,
) -> Result<BatchStarted, FcError> {
    if request.append_to_id.is_some() {
        return Err(FcError::unsupported(
            "appendToId is not supported by trawl: a batch is not extended",
        ));
    }
    if request
        .webhook
        .as_ref()
        .is_some_and(|webhook| !webhook.is_null())
    {
        return Err(FcError::unsupported(
            "webhook is not supported on this route: trawl's webhooks (signed, with their own \
             events) are POST /v1/jobs batches'",
        ));
    }
    if request.max_concurrency.is_some() {
        return Err(FcError::unsupported(
            "maxConcurrency is not supported by trawl: its pools and politeness decide",
        ));
    }
    let options = request.take_options();
    let wanted = options.wanted()?;
    if request.urls.is_empty() {
        return Err(FcError::bad_request("urls is empty"));
    }
    if request.urls.len() > state.config.max_batch {
        return Err(FcError::bad_request(format!(
            "a batch holds at most {} URLs (api.max_batch), got {}",
            state.config.max_batch,
            request.urls.len()
        )));
    }
    let ignore_invalid = request.ignore_invalid_urls.unwrap_or(false);
    let client = &state.context.fetch.client;
    let mut jobs = Vec::with_capacity(request.urls.len());
    let mut invalid_urls = Vec::new();
    for (index, url) in request.urls.iter().enumerate() {
        let planned = options.plan(url)?;
        planned
            .job
            .validate()
            .map_err(|message| FcError::bad_request(format!("urls[{index}]: {message}")))?;
        match trawl_workers::fetch::check_url(client, url) {
            Ok(_) => jobs.push(Job::Fetch(planned.job)),
            Err(_) if ignore_invalid => invalid_urls.push(url.clone()),
            Err(error) => {
                crate::api::count_refusal(state, &error);
                let code = crate::api::error::ApiErrorCode::Job(error.code);
                return Err(FcError::new(
                    code.status(),
                    code.as_str(),
                    format!("urls[{index}]: {}", error.message),
                ));
            }
        }
    }
    if jobs.is_empty() {
        return Err(FcError::bad_request("no URL of the batch is acceptable"));
    }
    let id = ulid::Ulid::generate().to_string();
    let options_json = serde_json::to_string(&wanted).unwrap_or_default();
    state
        .context
        .store
        .put_compat_options(&id, &options_json, jiff::Timestamp::now().as_millisecond())
        .await?;
    crate::api::jobs::enqueue(state, &scope.tenant, jobs, None, Some(id.clone())).await?;
    Ok(BatchStarted {
        success: true,
        url: format!(
            "{}{}/batch/scrape/{id}",
            super::origin(headers),
            version.prefix()
        ),
        id,
        invalid_urls,
    })
}

/// A batch scrape's status and documents (Firecrawl v1).
#[utoipa::path(get, path = "/v1/batch/scrape/{id}", operation_id = "firecrawl_v1_batch_scrape_status", tag = "firecrawl",
    params(("id" = String, Path, description = "the batch id"), StatusQuery),
    responses((status = 200, body = StatusAnswer), (status = 404, body = ErrorAnswer)),
    security((), ("bearer" = [])))]
pub(crate) async fn batch_status_v1(
    State(state): State<AppState>,
    Caller(scope): Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<StatusQuery>,
) -> Result<Json<StatusAnswer>, FcError> {
    batch_status(&state, &scope, &headers, Version::V1, &id, query)
        .await
        .map(Json)
}

/// A batch scrape's status and documents (Firecrawl v2).
#[utoipa::path(get, path = "/v2/batch/scrape/{id}", operation_id = "firecrawl_v2_batch_scrape_status", tag = "firecrawl",
    params(("id" = String, Path, description = "the batch id"), StatusQuery),
    responses((status = 200, body = StatusAnswer), (status = 404, body = ErrorAnswer)),
    security((), ("bearer" = [])))]
pub(crate) async fn batch_status_v2(
    State(state): State<AppState>,
    Caller(scope): Caller,
    headers: HeaderMap,
    ApiPath(id): ApiPath<String>,
    ApiQuery(query): ApiQuery<StatusQuery>,
) -> Result<Json<StatusAnswer>, FcError> {
    batch_status(&state, &scope, &headers, Version::V2, &id, query)
        .await
        .map(Json)
}

async fn batch_status(
    state: &AppState,
    scope: &Scope,
    headers: &HeaderMap,
    version: Version,
    id: &str,
    query: StatusQuery,
) -> Result<StatusAnswer, FcError> {
    let store = &state.context.store;
    let tenant = scope.filter().map(str::to_owned);
    let visible = JobFilter {
        batch_id: Some(id.to_owned()),
        tenant: tenant.clone(),
        ..JobFilter::default()
    };
    let record = if store.list_jobs(&visible, None, 1).await?.is_empty() {
        None
    } else {
        crate::api::jobs::batch_record(store, id).await?
    };
    let record = record.ok_or_else(|| FcError::not_found(format!("no batch scrape {id}")))?;
    let completed = ["succeeded", "failed", "dead", "cancelled"]
        .iter()
        .filter_map(|status| record.counts.get(*status))
        .sum();
    let succeeded = JobFilter {
        status: Some(Status::Succeeded),
        ..visible
    };
    let base = format!(
        "{}{}/batch/scrape/{id}",
        super::origin(headers),
        version.prefix()
    );
    let (data, next) = documents_page(state, id, &succeeded, &query, &base).await?;
    Ok(StatusAnswer {
        success: true,
        status: if record.ended {
            "completed"
        } else {
            "scraping"
        }
        .to_owned(),
        completed,
        total: record.total,
        credits_used: 0,
        expires_at: None,
        next,
        data,
    })
}

/// A page of the documents of the jobs `filter` takes (succeeded ones), built with the
/// options recorded for `id` (markdown alone when none were), and the link to the next page.
pub(super) async fn documents_page(
    state: &AppState,
    id: &str,
    filter: &JobFilter,
    query: &StatusQuery,
    base: &str,
) -> Result<(Vec<Document>, Option<String>), FcError> {
    let limit = query.limit.unwrap_or(20);
    if !(1..=100).contains(&limit) {
        return Err(FcError::bad_request("limit is outside 1..=100"));
    }
    let store = &state.context.store;
    let wanted = store
        .compat_options(id)
        .await?
        .and_then(|json| serde_json::from_str::<Wanted>(&json).ok())
        .unwrap_or(Wanted {
            markdown: true,
            ..Wanted::default()
        });
    let mut jobs = store
        .list_jobs(filter, query.cursor.as_deref(), limit + 1)
        .await?;
    let more = jobs.len() > limit as usize;
    jobs.truncate(limit as usize);
    let mut documents = Vec::with_capacity(jobs.len());
    for job in &jobs {
        let Some(page_id) = &job.page_id else {
            continue;
        };
        let Some(page) = store.page(page_id).await? else {
            continue;
        };
        documents.push(document::build(store, &page, &wanted, job.cached).await?);
    }
    let next = more
        .then(|| jobs.last())
        .flatten()
        .map(|job| format!("{base}?cursor={}", job.job_id));
    Ok((documents, next))
}
