//! The dashboard (`GET /ui/`): queue depth and jobs by status, jobs ended in the last
//! minute, error codes, the newest jobs, crawls and sessions; and `GET /ui/events`, the
//! server-sent events that keep those counters (and the statuses of the jobs, crawls and
//! session named in its query) live on any page.
//!
//! Not here: the pages of one job, crawl or session.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::time::{Duration, Instant};

use axum::Extension;
use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::Stream;
use maud::{Markup, html};
use serde::Deserialize;

use super::Ui;
use super::auth::Viewer;
use super::layout::{self, Nav, UiError, badge, short};
use crate::store::Status;

/// How often the events stream looks again.
const EVERY: Duration = Duration::from_secs(1);
/// How long one events stream lasts (the browser reconnects): a stopping server never waits
/// longer than this for it.
const STREAM_LIFE: Duration = Duration::from_secs(15);
/// Most jobs or crawls one events stream follows.
const MAX_FOLLOWED: usize = 50;

const STATUSES: [Status; 6] = [
    Status::Queued,
    Status::Running,
    Status::Succeeded,
    Status::Failed,
    Status::Dead,
    Status::Cancelled,
];

/// The dashboard.
pub(super) async fn page(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
) -> Result<Markup, UiError> {
    let store = &ui.app.context.store;
    let tenant = viewer.scope.filter();
    let counters = counters(&ui, &viewer).await?;
    let errors = store.error_counts_in(tenant).await?;
    let jobs = store.newest_jobs_in(tenant, 20).await?;
    let crawls = store.newest_crawls_in(tenant, 10).await?;
    let sessions = store.newest_sessions_of(viewer.owner_filter(), 5).await?;
    let live_jobs: Vec<&str> = jobs
        .iter()
        .filter(|job| !job.status.is_terminal())
        .map(|job| job.job_id.as_str())
        .collect();
    let live_crawls: Vec<&str> = crawls
        .iter()
        .filter(|crawl| crawl.status.as_str() == "running")
        .map(|crawl| crawl.id.as_str())
        .collect();
    let events = format!(
        "/ui/events?jobs={}&crawls={}",
        live_jobs.join(","),
        live_crawls.join(",")
    );
    let body = html! {
        h1 { "Dashboard" }
        section aria-labelledby="counters-h" {
            h2 #counters-h { "Queue and throughput" }
            ul.counters {
                @for (key, label) in [("queued", "queued (queue depth)"), ("running", "running"),
                    ("per_minute", "ended in the last minute"), ("succeeded", "succeeded"),
                    ("failed", "failed"), ("dead", "dead"), ("cancelled", "cancelled")] {
                    li {
                        span.n data-live={ "count." (key) } { (counters.get(key).copied().unwrap_or(0)) }
                        span.k { (label) }
                    }
                }
            }
        }
        div.grid {
            section.card aria-labelledby="errors-h" {
                h2 #errors-h { "Error codes" }
                @if errors.is_empty() {
                    p.muted { "No failed or dead jobs." }
                } @else {
                    table {
                        thead { tr { th scope="col" { "code" } th scope="col" { "jobs" } } }
                        tbody {
                            @for (code, n) in &errors {
                                tr { td { code.error { (code) } } td { (n) } }
                            }
                        }
                    }
                }
            }
            section.card aria-labelledby="sessions-h" {
                h2 #sessions-h { "Recent sessions" }
                @if sessions.is_empty() {
                    p.muted { "No sessions yet." }
                } @else {
                    ul {
                        @for session in &sessions {
                            li {
                                a href={ "/ui/sessions/" (session.id) } { code { (session.id) } }
                                " "
                                (badge(if session.closed_at.is_some() { "closed" } else { "open" }, None))
                            }
                        }
                    }
                }
                p { a href="/ui/sessions" { "All sessions" } }
            }
        }
        section.card aria-labelledby="crawls-h" {
            h2 #crawls-h { "Crawls" }
            @if crawls.is_empty() {
                p.muted { "No crawls yet." }
            } @else {
                div.scroll { table {
                    thead { tr {
                        th scope="col" { "crawl" } th scope="col" { "seed" } th scope="col" { "status" }
                        th scope="col" { "fetched" } th scope="col" { "queued" } th scope="col" { "failed" }
                    } }
                    tbody {
                        @for crawl in &crawls {
                            tr {
                                td { a href={ "/ui/crawls/" (crawl.id) } { code { (short(&crawl.id, 12)) } } }
                                td { (short(crawl.spec.seeds.first().map(String::as_str).unwrap_or(""), 60)) }
                                td { (badge(crawl.status.as_str(), Some(&format!("crawl.{}.status", crawl.id)))) }
                                td data-live={ "crawl." (crawl.id) ".fetched" } { (crawl.counters.fetched) }
                                td data-live={ "crawl." (crawl.id) ".queued" } { (crawl.counters.queued) }
                                td data-live={ "crawl." (crawl.id) ".failed" } { (crawl.counters.failed) }
                            }
                        }
                    }
                } }
            }
        }
        section.card aria-labelledby="jobs-h" {
            h2 #jobs-h { "Newest jobs" }
            @if jobs.is_empty() {
                p.muted { "No jobs yet." }
            } @else {
                div.scroll { table {
                    thead { tr {
                        th scope="col" { "job" } th scope="col" { "url" } th scope="col" { "status" }
                        th scope="col" { "error" } th scope="col" class="hide-narrow" { "title" }
                    } }
                    tbody {
                        @for job in &jobs {
                            tr {
                                td { a href={ "/ui/jobs/" (job.job_id) } { code { (short(&job.job_id, 12)) } } }
                                td { (short(&job.url, 60)) }
                                td { (badge(job.status.as_str(), Some(&format!("job.{}.status", job.job_id)))) }
                                td { @if let Some(code) = &job.error_code { code.error { (code) } } }
                                td.hide-narrow {
                                    @if let (Some(page), Some(title)) = (&job.page_id, &job.title) {
                                        a href={ "/ui/pages/" (page) } { (short(title, 50)) }
                                    } @else if let Some(page) = &job.page_id {
                                        a href={ "/ui/pages/" (page) } { "page" }
                                    }
                                }
                            }
                        }
                    }
                } }
            }
        }
    };
    Ok(layout::page_with(
        Some(&viewer),
        "Dashboard",
        Nav::Dashboard,
        Some(&events),
        body,
    ))
}

/// Jobs by status, and jobs ended in the last minute, for what the viewer sees.
async fn counters(ui: &Ui, viewer: &Viewer) -> Result<BTreeMap<&'static str, u64>, UiError> {
    let store = &ui.app.context.store;
    let tenant = viewer.scope.filter();
    let mut counters: BTreeMap<&'static str, u64> =
        STATUSES.iter().map(|status| (status.as_str(), 0)).collect();
    for (status, n) in store.status_counts_in(tenant).await? {
        counters.insert(status.as_str(), n);
    }
    let minute_ago = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(60);
    counters.insert(
        "per_minute",
        store
            .ended_after_in(tenant, &minute_ago.to_string())
            .await?,
    );
    Ok(counters)
}

/// What an events stream follows besides the counters.
#[derive(Debug, Clone, Default, Deserialize)]
pub(super) struct Follow {
    /// Job ids, comma-separated.
    #[serde(default)]
    jobs: String,
    /// Crawl ids, comma-separated.
    #[serde(default)]
    crawls: String,
    /// A session id: its last step's number.
    #[serde(default)]
    session: Option<String>,
}

fn ids(list: &str) -> Vec<String> {
    list.split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty() && id.len() <= 64)
        .take(MAX_FOLLOWED)
        .map(str::to_owned)
        .collect()
}

/// The live values: `count.<status>`, `count.per_minute`, `job.<id>.status`,
/// `job.<id>.attempts`, `crawl.<id>.<status|fetched|queued|failed|discovered>`,
/// `session.<id>.last` (another tenant's ids give nothing).
async fn values(
    ui: &Ui,
    viewer: &Viewer,
    follow: &Follow,
) -> Result<serde_json::Map<String, serde_json::Value>, UiError> {
    let store = &ui.app.context.store;
    let mut values = serde_json::Map::new();
    for (key, n) in counters(ui, viewer).await? {
        values.insert(format!("count.{key}"), n.into());
    }
    for id in ids(&follow.jobs) {
        if let Some(job) = store.job_in(&viewer.scope, &id).await? {
            values.insert(format!("job.{id}.status"), job.status.as_str().into());
            values.insert(format!("job.{id}.attempts"), job.attempts.into());
        }
    }
    for id in ids(&follow.crawls) {
        if let Some(crawl) = store.crawl_in(&viewer.scope, &id).await? {
            let counters = &crawl.counters;
            values.insert(format!("crawl.{id}.status"), crawl.status.as_str().into());
            for (name, n) in [
                ("fetched", counters.fetched),
                ("queued", counters.queued),
                ("failed", counters.failed),
                ("discovered", counters.discovered),
                ("cached", counters.cached),
            ] {
                values.insert(format!("crawl.{id}.{name}"), n.into());
            }
        }
    }
    if let Some(id) = &follow.session
        && let Some(session) = store.session(id).await?
        && (viewer.owner_filter().is_none()
            || viewer.owner_filter() == Some(session.owner.as_str()))
    {
        let steps = store.session_steps(id).await?;
        let last = steps.last().map_or(0, |step| step.seq);
        values.insert(format!("session.{id}.last"), last.into());
        values.insert(format!("session.{id}.steps"), steps.len().into());
        values.insert(
            format!("session.{id}.status"),
            if session.closed_at.is_some() {
                "closed"
            } else {
                "open"
            }
            .into(),
        );
    }
    Ok(values)
}

struct Follower {
    ui: Ui,
    viewer: Viewer,
    follow: Follow,
    last: Option<serde_json::Map<String, serde_json::Value>>,
    started: Instant,
    first: bool,
}

/// `GET /ui/events`: a `live` event with the values (see [`values`]) now and each time they
/// change (looked at every second), for about 15 s; then the stream ends and the browser's
/// `EventSource` reconnects.
pub(super) async fn events(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Query(follow): Query<Follow>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = futures_util::stream::unfold(
        Follower {
            ui,
            viewer,
            follow,
            last: None,
            started: Instant::now(),
            first: true,
        },
        |mut state| async move {
            loop {
                if state.started.elapsed() >= STREAM_LIFE {
                    return None;
                }
                if !state.first {
                    tokio::time::sleep(EVERY).await;
                }
                state.first = false;
                let Ok(values) = values(&state.ui, &state.viewer, &state.follow).await else {
                    continue;
                };
                if state.last.as_ref() == Some(&values) {
                    continue;
                }
                let event = Event::default()
                    .event("live")
                    .retry(Duration::from_secs(1))
                    .data(serde_json::Value::Object(values.clone()).to_string());
                state.last = Some(values);
                return Some((Ok(event), state));
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}
