//! Job and crawl pages: a job's status, attempts, error with its code and the page it
//! produced; a crawl's spec, counters and pages; each with its cancel button (a CSRF-checked
//! form doing what `DELETE /v1/jobs/{id}` and `DELETE /v1/crawls/{id}` do). Another tenant's
//! job or crawl is a 404, as in the API.
//!
//! Not here: the dashboard's listings, the page viewer.

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::{Extension, Form};
use maud::{Markup, html};

use super::auth::{CsrfForm, Viewer, check_csrf};
use super::layout::{self, Nav, UiError, badge, short, time};
use super::{Ui, see_other};
use crate::store::{Cancel, JobFilter};

fn cancel_form(action: &str, viewer: &Viewer, label: &str) -> Markup {
    html! {
        form method="post" action=(action) {
            input type="hidden" name="csrf" value=(viewer.csrf);
            button.danger type="submit" { (label) }
        }
    }
}

/// A flash message passed in the query after a form (`?done=cancelled`).
#[derive(Debug, serde::Deserialize)]
pub(super) struct Done {
    #[serde(default)]
    done: Option<String>,
}

fn done_message(done: &Done) -> Option<&'static str> {
    match done.done.as_deref() {
        Some("cancelled") => Some("Cancelled."),
        Some("cancelling") => Some("Cancel requested: the job stops at its next safe point."),
        _ => None,
    }
}

/// `GET /ui/jobs/{id}`.
pub(super) async fn job(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    axum::extract::Query(done): axum::extract::Query<Done>,
) -> Result<Markup, UiError> {
    let store = &ui.app.context.store;
    let job = store
        .job_in(&viewer.scope, &id)
        .await?
        .ok_or_else(|| UiError::not_found(format!("No job {id}.")))?;
    let page_id = job
        .result
        .as_ref()
        .and_then(|result| result.get("page_id"))
        .and_then(|page| page.as_str())
        .map(str::to_owned);
    let title = job
        .result
        .as_ref()
        .and_then(|result| result.get("title"))
        .and_then(|title| title.as_str())
        .map(str::to_owned);
    let events = format!("/ui/events?jobs={}", job.id);
    let body = html! {
        h1 { "Job " code { (job.id) } }
        @if let Some(message) = done_message(&done) {
            p.card role="status" { (message) }
        }
        section.card aria-labelledby="job-h" {
            h2 #job-h { "Status" }
            dl.meta {
                dt { "status" } dd { (badge(job.status.as_str(), Some(&format!("job.{}.status", job.id)))) }
                dt { "kind" } dd { (job.kind) }
                dt { "url" } dd { code { (job.url) } }
                dt { "attempts" } dd { span data-live={ "job." (job.id) ".attempts" } { (job.attempts) } " of " (job.max_attempts) }
                dt { "created" } dd { (time(&job.created_at)) }
                dt { "ended" } dd { @if let Some(at) = &job.finished_at { (time(at)) } @else { span.muted { "not yet" } } }
                @if let Some(batch) = &job.batch_id {
                    dt { "batch" } dd { code { (batch) } }
                }
            }
            @if !job.status.is_terminal() {
                div.actions { (cancel_form(&format!("/ui/jobs/{}/cancel", job.id), &viewer, "Cancel job")) }
            }
        }
        @if let Some(error) = &job.error {
            section.card aria-labelledby="error-h" {
                h2 #error-h { "Error" }
                dl.meta {
                    dt { "code" } dd { code.error { (error.code.as_str()) } }
                    dt { "message" } dd { (error.message) }
                    @if let Some(status) = error.status { dt { "HTTP status" } dd { (status) } }
                    @if let Some(evidence) = &error.evidence { dt { "evidence" } dd { code { (evidence) } } }
                    dt { "transient" } dd { (if error.transient { "yes (retried)" } else { "no" }) }
                }
            }
        }
        section.card aria-labelledby="page-h" {
            h2 #page-h { "Pages produced" }
            @if let Some(page) = &page_id {
                p { a href={ "/ui/pages/" (page) } { (title.as_deref().unwrap_or("the page")) } " " span.muted { "(" code { (page) } ")" } }
            } @else {
                p.muted { "None yet." }
            }
        }
    };
    Ok(layout::page_with(
        Some(&viewer),
        &format!("Job {}", job.id),
        Nav::Dashboard,
        Some(&events),
        body,
    ))
}

/// `POST /ui/jobs/{id}/cancel`: cancels the job (a queued one at once, a running one at its
/// next safe point), then back to its page.
pub(super) async fn cancel_job(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, UiError> {
    check_csrf(&viewer, &form.csrf)?;
    let store = &ui.app.context.store;
    if store.job_in(&viewer.scope, &id).await?.is_none() {
        return Err(UiError::not_found(format!("No job {id}.")));
    }
    let done = match store.request_cancel(&id).await? {
        Cancel::Cancelled => {
            let _ = ui.app.context.ended.send(id.clone());
            "cancelled"
        }
        Cancel::Requested => "cancelling",
        Cancel::AlreadyEnded(status) => {
            return Err(UiError::new(
                StatusCode::CONFLICT,
                "Already ended",
                format!("Job {id} had already ended: {}.", status.as_str()),
            ));
        }
        Cancel::Unknown => return Err(UiError::not_found(format!("No job {id}."))),
    };
    Ok(see_other(&format!("/ui/jobs/{id}?done={done}")))
}

/// `GET /ui/crawls/{id}`.
pub(super) async fn crawl(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    axum::extract::Query(done): axum::extract::Query<Done>,
) -> Result<Markup, UiError> {
    let store = &ui.app.context.store;
    let crawl = store
        .crawl_in(&viewer.scope, &id)
        .await?
        .ok_or_else(|| UiError::not_found(format!("No crawl {id}.")))?;
    let filter = JobFilter {
        crawl_id: Some(crawl.id.clone()),
        tenant: viewer.scope.filter().map(str::to_owned),
        ..JobFilter::default()
    };
    let jobs = store.list_jobs(&filter, None, 200).await?;
    let counters = &crawl.counters;
    let live = |name: &str| format!("crawl.{}.{name}", crawl.id);
    let events = format!("/ui/events?crawls={}", crawl.id);
    let body = html! {
        h1 { "Crawl " code { (crawl.id) } }
        @if let Some(message) = done_message(&done) {
            p.card role="status" { (message) }
        }
        section.card aria-labelledby="crawl-h" {
            h2 #crawl-h { "Status" }
            dl.meta {
                dt { "status" } dd { (badge(crawl.status.as_str(), Some(&live("status")))) }
                dt { "seeds" } dd { @for seed in &crawl.spec.seeds { code { (seed) } " " } }
                dt { "max depth / pages" } dd { (crawl.spec.max_depth) " / " (crawl.spec.max_pages) }
                dt { "started" } dd { (time(&crawl.created_at)) }
                dt { "ended" } dd { @if let Some(at) = &crawl.finished_at { (time(at)) } @else { span.muted { "not yet" } } }
            }
            @if crawl.status.as_str() == "running" {
                div.actions { (cancel_form(&format!("/ui/crawls/{}/cancel", crawl.id), &viewer, "Cancel crawl")) }
            }
        }
        ul.counters {
            @for (name, n) in [("discovered", counters.discovered), ("queued", counters.queued),
                ("fetched", counters.fetched), ("cached", counters.cached), ("failed", counters.failed)] {
                li { span.n data-live=(live(name)) { (n) } span.k { (name) } }
            }
            @for (name, n) in [("out of scope", counters.skipped_scope), ("robots.txt", counters.skipped_robots),
                ("too deep", counters.skipped_depth), ("over the limit", counters.skipped_limit),
                ("duplicates", counters.skipped_duplicate)] {
                li { span.n { (n) } span.k { "skipped: " (name) } }
            }
        }
        section.card aria-labelledby="pages-h" {
            h2 #pages-h { "Pages (first " (jobs.len()) ")" }
            div.scroll { table {
                thead { tr { th scope="col" { "job" } th scope="col" { "url" } th scope="col" { "status" } th scope="col" { "error" } th scope="col" { "page" } } }
                tbody {
                    @for job in &jobs {
                        tr {
                            td { a href={ "/ui/jobs/" (job.job_id) } { code { (short(&job.job_id, 12)) } } }
                            td { (short(&job.url, 70)) }
                            td { (badge(job.status.as_str(), None)) }
                            td { @if let Some(code) = &job.error_code { code.error { (code) } } }
                            td { @if let Some(page) = &job.page_id {
                                a href={ "/ui/pages/" (page) } { (short(job.title.as_deref().unwrap_or("page"), 40)) }
                            } }
                        }
                    }
                }
            } }
        }
    };
    Ok(layout::page_with(
        Some(&viewer),
        &format!("Crawl {}", crawl.id),
        Nav::Dashboard,
        Some(&events),
        body,
    ))
}

/// `POST /ui/crawls/{id}/cancel`.
pub(super) async fn cancel_crawl(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, UiError> {
    check_csrf(&viewer, &form.csrf)?;
    let store = &ui.app.context.store;
    let crawl = store
        .crawl_in(&viewer.scope, &id)
        .await?
        .ok_or_else(|| UiError::not_found(format!("No crawl {id}.")))?;
    if !store.cancel_crawl(&id).await? {
        return Err(UiError::new(
            StatusCode::CONFLICT,
            "Already ended",
            format!("Crawl {id} had already ended: {}.", crawl.status.as_str()),
        ));
    }
    Ok(see_other(&format!("/ui/crawls/{id}?done=cancelled")))
}
