//! Sessions and their replay: the caller's sessions (`GET /ui/sessions`, open ones with their
//! latest screenshot), a session's replay as a timeline (`GET /ui/sessions/{id}`: each step's
//! action, target, outcome, time and screenshot, stepped with the keyboard; an open session's
//! preview follows it live), its export as one self-contained HTML file (images inline, no
//! script, nothing loaded from anywhere) or as the API's replay JSON, and the re-run of its
//! actions in a new session (`POST /ui/sessions/{id}/rerun`) with the steps whose outcomes
//! differ marked (`GET /ui/sessions/{id}/compare/{other}`). A session is visible to its
//! tenant (and the admin) only; any other is a 404.
//!
//! Not here: running sessions (`crate::sessions`), the JSON API (`api::sessions`).

use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Form};
use base64::Engine as _;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use serde_json::Value;
use trawl_workers::browse::{Action, Profile};

use super::auth::{CsrfForm, Viewer, check_csrf};
use super::layout::{self, Nav, UiError, badge, short, time};
use super::{Ui, see_other};
use crate::store::{SessionRecord, SessionStepRecord};

async fn visible_session(
    ui: &Ui,
    viewer: &Viewer,
    id: &str,
) -> Result<(SessionRecord, Vec<SessionStepRecord>), UiError> {
    let store = &ui.app.context.store;
    let session = store
        .session(id)
        .await?
        .filter(|session| {
            viewer
                .owner_filter()
                .is_none_or(|owner| owner == session.owner)
        })
        .ok_or_else(|| UiError::not_found(format!("No session {id}.")))?;
    let steps = store.session_steps(id).await?;
    Ok((session, steps))
}

fn state_of(session: &SessionRecord) -> &str {
    match (&session.closed_at, &session.close_reason) {
        (None, _) => "open",
        (Some(_), Some(reason)) => reason,
        (Some(_), None) => "closed",
    }
}

fn image_url(session: &str, seq: u64) -> String {
    format!("/ui/sessions/{session}/steps/{seq}/image")
}

/// The action's target, for people: its fields but the name, typed text masked (it may be a
/// password).
fn target(action: &Value) -> String {
    let Some(fields) = action.as_object() else {
        return String::new();
    };
    fields
        .iter()
        .filter(|(key, _)| key.as_str() != "action")
        .map(|(key, value)| match (key.as_str(), value) {
            ("text" | "value", Value::String(text)) => {
                format!("{key}: ({} characters)", text.chars().count())
            }
            (_, Value::String(text)) => format!("{key}: {text}"),
            (_, other) => format!("{key}: {other}"),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn action_name(action: &Value) -> &str {
    action
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or("action")
}

/// What an outcome says, for comparing runs: ok, error code, URL, title, output.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Said {
    ok: bool,
    error: Option<String>,
    message: Option<String>,
    url: String,
    title: Option<String>,
    output: Option<String>,
    took_ms: u64,
}

impl Said {
    fn of(outcome: &Value) -> Said {
        let text = |name: &str| outcome.get(name).and_then(Value::as_str).map(str::to_owned);
        Said {
            ok: outcome.get("ok").and_then(Value::as_bool).unwrap_or(false),
            error: outcome
                .pointer("/error/code")
                .and_then(Value::as_str)
                .map(str::to_owned),
            message: outcome
                .pointer("/error/message")
                .and_then(Value::as_str)
                .map(str::to_owned),
            url: text("url").unwrap_or_default(),
            title: text("title"),
            output: text("output"),
            took_ms: outcome.get("took_ms").and_then(Value::as_u64).unwrap_or(0),
        }
    }

    /// The fields in which two runs differ (time taken aside).
    fn differences(&self, other: &Said) -> Vec<&'static str> {
        let mut differ = Vec::new();
        if self.ok != other.ok {
            differ.push("ok");
        }
        if self.error != other.error {
            differ.push("error");
        }
        if self.url != other.url {
            differ.push("url");
        }
        if self.title != other.title {
            differ.push("title");
        }
        if self.output != other.output {
            differ.push("output");
        }
        differ
    }

    fn summary(&self) -> String {
        match &self.error {
            Some(code) => format!("{code}: {}", self.message.as_deref().unwrap_or("")),
            None => match &self.title {
                Some(title) => format!("ok · {title} · {}", self.url),
                None => format!("ok · {}", self.url),
            },
        }
    }
}

fn outcome_view(said: &Said) -> Markup {
    html! {
        dl.meta {
            dt { "outcome" } dd {
                @if said.ok { (badge("ok", None)) } @else { (badge("error", None)) }
                @if let Some(code) = &said.error { " " code.error { (code) } }
            }
            @if let Some(message) = &said.message { dt { "message" } dd { (message) } }
            dt { "url" } dd { code { (short(&said.url, 80)) } }
            @if let Some(title) = &said.title { dt { "title" } dd { (title) } }
            @if let Some(output) = &said.output { dt { "output" } dd { pre { (short(output, 400)) } } }
            dt { "took" } dd { (said.took_ms) " ms" }
        }
    }
}

/// `GET /ui/sessions`: the caller's sessions, newest first.
pub(super) async fn list(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
) -> Result<Markup, UiError> {
    let store = &ui.app.context.store;
    let sessions = store.newest_sessions_of(viewer.owner_filter(), 100).await?;
    let mut rows = Vec::with_capacity(sessions.len());
    for session in sessions {
        let last = if session.closed_at.is_none() {
            store
                .session_steps(&session.id)
                .await?
                .into_iter()
                .rev()
                .find(|step| step.image_sha256.is_some())
                .map(|step| step.seq)
        } else {
            None
        };
        rows.push((session, last));
    }
    let body = html! {
        h1 { "Sessions" }
        @if rows.is_empty() {
            p.card.muted { "No sessions yet. Open one with " code { "POST /v1/sessions" } "." }
        } @else {
            div.card.scroll { table {
                thead { tr {
                    th scope="col" { "session" } th scope="col" { "profile" } th scope="col" { "opened" }
                    th scope="col" { "state" } th scope="col" { "preview" }
                } }
                tbody {
                    @for (session, last) in &rows {
                        tr {
                            td { a href={ "/ui/sessions/" (session.id) } { code { (session.id) } } }
                            td { (session.profile) }
                            td { (time(&session.created_at)) }
                            td { (badge(state_of(session), None)) }
                            td { @if let Some(seq) = last {
                                img.shot.thumb src=(image_url(&session.id, *seq)) alt={ "Latest screenshot of session " (session.id) } loading="lazy";
                            } }
                        }
                    }
                }
            } }
        }
    };
    Ok(layout::page(Some(&viewer), "Sessions", Nav::Sessions, body))
}

/// `GET /ui/sessions/{id}`: the replay timeline.
pub(super) async fn replay(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> Result<Markup, UiError> {
    let (session, steps) = visible_session(&ui, &viewer, &id).await?;
    let open = session.closed_at.is_none();
    let first_image = steps
        .first()
        .filter(|step| step.image_sha256.is_some())
        .map(|step| image_url(&session.id, step.seq));
    let last_seq = steps.last().map_or(0, |step| step.seq);
    let events = open.then(|| format!("/ui/events?session={}", session.id));
    let body = html! {
        h1 { "Session " code { (session.id) } }
        section.card aria-labelledby="session-h" {
            h2 #session-h { "Session" }
            dl.meta {
                dt { "state" } dd { (badge(state_of(&session), Some(&format!("session.{}.status", session.id)))) }
                dt { "profile" } dd { (session.profile) }
                dt { "opened" } dd { (time(&session.created_at)) }
                @if let Some(at) = &session.closed_at { dt { "closed" } dd { (time(at)) } }
                dt { "steps" } dd data-live={ "session." (session.id) ".steps" } { (steps.len()) }
            }
            div.actions {
                a.button.secondary href={ "/ui/sessions/" (session.id) "/export.html" } download { "Export as HTML" }
                a.button.secondary href={ "/ui/sessions/" (session.id) "/export.json" } download { "Export as JSON" }
                @if !steps.is_empty() {
                    form method="post" action={ "/ui/sessions/" (session.id) "/rerun" } {
                        input type="hidden" name="csrf" value=(viewer.csrf);
                        button type="submit" aria-describedby="rerun-hint" { "Re-run in a new session" }
                    }
                }
            }
            @if !steps.is_empty() {
                p.hint #rerun-hint { "Runs every recorded action again in a new session, then shows where the outcomes differ." }
            }
        }
        @if open {
            section.card aria-labelledby="live-h" {
                h2 #live-h { "Live preview" }
                img.shot #live-preview data-live-img={ "session." (session.id) ".last" }
                    data-base={ "/ui/sessions/" (session.id) "/steps/" }
                    src=[(last_seq > 0).then(|| image_url(&session.id, last_seq))]
                    hidden[last_seq == 0]
                    alt="The session's latest screenshot";
                p.hint { "Follows the session's newest step while it is open." }
            }
        }
        @if steps.is_empty() {
            p.card.muted { "No steps yet." }
        } @else {
            section aria-labelledby="timeline-h" {
                h2 #timeline-h { "Timeline" }
                p.hint #keys { "Step with ← and → (or j and k) anywhere on the page, ↑ ↓ Home End in the list, or the buttons." }
                div.replay {
                    ol.timeline aria-describedby="keys" {
                        @for step in &steps {
                            @let said = Said::of(&step.outcome);
                            @let caption = format!("Step {}: {} {} → {}", step.seq, action_name(&step.action), target(&step.action), said.summary());
                            li id={ "step-" (step.seq) } data-seq=(step.seq)
                                data-image=[step.image_sha256.as_ref().map(|_| image_url(&session.id, step.seq))]
                                data-caption=(caption) tabindex="-1" {
                                div.step-head {
                                    strong { (step.seq) ". " (action_name(&step.action)) }
                                    @if said.ok { (badge("ok", None)) } @else { (badge("error", None)) }
                                }
                                div.muted { (short(&target(&step.action), 90)) }
                                div { (short(&said.summary(), 120)) }
                                div.hint { (time(&step.created_at)) " · " (said.took_ms) " ms" }
                            }
                        }
                    }
                    div.stage {
                        div.actions {
                            button.secondary #step-prev type="button" { "← Previous" }
                            button.secondary #step-next type="button" { "Next →" }
                            span #stage-position aria-live="polite" { "Step 1 of " (steps.len()) }
                        }
                        figure {
                            img #stage-img src=[first_image.as_deref()] alt="Screenshot after step 1" hidden[first_image.is_none()];
                            figcaption #stage-caption {}
                        }
                    }
                }
            }
        }
    };
    Ok(layout::page_with(
        Some(&viewer),
        &format!("Session {}", session.id),
        Nav::Sessions,
        events.as_deref(),
        body,
    ))
}

/// `GET /ui/sessions/{id}/steps/{seq}/image`: a step's screenshot.
pub(super) async fn image(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path((id, seq)): Path<(String, u64)>,
) -> Result<Response, UiError> {
    let (_, steps) = visible_session(&ui, &viewer, &id).await?;
    let step = steps
        .iter()
        .find(|step| step.seq == seq)
        .ok_or_else(|| UiError::not_found(format!("Session {id} has no step {seq}.")))?;
    let (Some(sha), Some(media_type)) = (&step.image_sha256, &step.image_type) else {
        return Err(UiError::not_found(format!("Step {seq} has no screenshot.")));
    };
    let bytes = ui
        .app
        .context
        .store
        .blob(sha)
        .await?
        .ok_or_else(|| UiError::not_found("The screenshot is gone."))?;
    let media_type = match media_type.as_str() {
        "image/png" => "image/png",
        _ => "image/jpeg",
    };
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    // A step's screenshot never changes.
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("private, max-age=3600"),
    );
    Ok(response)
}

fn attachment(mut response: Response, media_type: &'static str, name: &str) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    response
}

/// `GET /ui/sessions/{id}/export.json`: the replay log as `GET /v1/sessions/{id}/replay`
/// gives it (screenshots base64).
pub(super) async fn export_json(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> Result<Response, UiError> {
    visible_session(&ui, &viewer, &id).await?;
    let replay = crate::sessions::replay(&ui.app.context.store, &viewer.owner, &id)
        .await
        .map_err(|_| UiError::not_found(format!("No session {id}.")))?;
    let body = serde_json::to_vec_pretty(&replay).unwrap_or_default();
    Ok(attachment(
        body.into_response(),
        "application/json",
        &format!("session-{id}.json"),
    ))
}

/// The style of an exported replay (inline: the file stands alone).
const EXPORT_CSS: &str = "body{font-family:system-ui,sans-serif;margin:0 auto;max-width:60rem;\
padding:1rem;line-height:1.5;color:#1d2430;background:#f6f7f9}\
section{background:#fff;border:1px solid #d9dde5;border-radius:8px;padding:1rem;margin:1rem 0}\
img{max-width:100%;height:auto;border:1px solid #d9dde5;border-radius:6px}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem}dt{color:#5b6577}dd{margin:0;word-break:break-word}\
.ok{color:#1b7a3d}.error{color:#b3261e}nav a{margin-right:1rem}pre{white-space:pre-wrap}\
:target{box-shadow:0 0 0 3px #1f5fbf}";

/// `GET /ui/sessions/{id}/export.html`: the replay as one HTML file that opens offline:
/// screenshots as `data:` URLs, the style inline, no script, a CSP forbidding anything else;
/// each step links to the previous and next one.
pub(super) async fn export_html(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> Result<Response, UiError> {
    let (session, steps) = visible_session(&ui, &viewer, &id).await?;
    let store = &ui.app.context.store;
    let mut images = Vec::with_capacity(steps.len());
    for step in &steps {
        let image = match (&step.image_sha256, &step.image_type) {
            (Some(sha), Some(media_type)) => store.blob(sha).await?.map(|bytes| {
                let media_type = if media_type == "image/png" {
                    "image/png"
                } else {
                    "image/jpeg"
                };
                format!(
                    "data:{media_type};base64,{}",
                    base64::engine::general_purpose::STANDARD.encode(bytes)
                )
            }),
            _ => None,
        };
        images.push(image);
    }
    let count = steps.len();
    let document = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'";
                meta name="viewport" content="width=device-width, initial-scale=1";
                link rel="icon" href="data:,";
                title { "Replay of session " (session.id) }
                style { (PreEscaped(EXPORT_CSS)) }
            }
            body {
                h1 { "Replay of session " (session.id) }
                dl {
                    dt { "profile" } dd { (session.profile) }
                    dt { "opened" } dd { (session.created_at) }
                    dt { "state" } dd { (state_of(&session)) }
                    dt { "steps" } dd { (count) }
                    dt { "exported" } dd { (jiff::Timestamp::now().to_string()) }
                }
                nav aria-label="Steps" {
                    @for step in &steps { a href={ "#step-" (step.seq) } { (step.seq) } " " }
                }
                @for (n, (step, image)) in steps.iter().zip(&images).enumerate() {
                    @let said = Said::of(&step.outcome);
                    section id={ "step-" (step.seq) } aria-label={ "Step " (step.seq) } {
                        h2 { (step.seq) ". " (action_name(&step.action)) " "
                            span class=(if said.ok { "ok" } else { "error" }) { (if said.ok { "ok" } else { "error" }) } }
                        dl {
                            dt { "target" } dd { (target(&step.action)) }
                            dt { "outcome" } dd { (said.summary()) }
                            @if let Some(output) = &said.output { dt { "output" } dd { pre { (short(output, 2_000)) } } }
                            dt { "time" } dd { (step.created_at) " · " (said.took_ms) " ms" }
                        }
                        @if let Some(src) = image {
                            img src=(src) alt={ "Screenshot after step " (step.seq) };
                        }
                        nav aria-label="Step navigation" {
                            @if n > 0 { a href={ "#step-" (steps[n - 1].seq) } { "← previous" } }
                            @if n + 1 < count { a href={ "#step-" (steps[n + 1].seq) } { "next →" } }
                        }
                    }
                }
            }
        }
    };
    let mut response = attachment(
        document.into_string().into_response(),
        "text/html; charset=utf-8",
        &format!("session-{id}.html"),
    );
    // Served from here it is a download; the file's own CSP holds when it is opened.
    response.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'",
        ),
    );
    Ok(response)
}

/// `POST /ui/sessions/{id}/rerun`: opens a new session with the same profile, runs each
/// recorded action in it (one at a time, going on after a failed one), closes it, and shows
/// the comparison. Needs this server's own browser.
pub(super) async fn rerun(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, UiError> {
    check_csrf(&viewer, &form.csrf)?;
    let (session, steps) = visible_session(&ui, &viewer, &id).await?;
    let Some(sessions) = ui.app.sessions.clone() else {
        return Err(UiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "No browser here",
            "Re-running a session needs a browser in this server (trawl serve without --no-pools).",
        ));
    };
    let profile: Profile =
        serde_json::from_value(Value::String(session.profile.clone())).unwrap_or_default();
    let actions: Vec<Action> = steps
        .iter()
        .filter_map(|step| serde_json::from_value(step.action.clone()).ok())
        .collect();
    let opened = sessions
        .open(&viewer.owner, None, profile, &Default::default())
        .await
        .map_err(|error| {
            UiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "Could not open a session",
                error.to_string(),
            )
        })?;
    for action in &actions {
        if let Err(error) = sessions
            .act(&viewer.owner, &opened.id, std::slice::from_ref(action))
            .await
        {
            tracing::info!(error = %error, "ui: a re-run stopped");
            break;
        }
    }
    let _ = sessions.close(&viewer.owner, &opened.id).await;
    Ok(see_other(&format!(
        "/ui/sessions/{}/compare/{}",
        session.id, opened.id
    )))
}

/// `GET /ui/sessions/{id}/compare/{other}`: two runs of the same actions step by step, the
/// steps whose outcomes differ marked.
pub(super) async fn compare(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path((id, other)): Path<(String, String)>,
) -> Result<Markup, UiError> {
    let (first, first_steps) = visible_session(&ui, &viewer, &id).await?;
    let (second, second_steps) = visible_session(&ui, &viewer, &other).await?;
    let rows = first_steps.len().max(second_steps.len());
    let mut differing = 0;
    let mut table = Vec::with_capacity(rows);
    for n in 0..rows {
        let a = first_steps.get(n);
        let b = second_steps.get(n);
        let said_a = a.map(|step| Said::of(&step.outcome));
        let said_b = b.map(|step| Said::of(&step.outcome));
        let differences = match (&said_a, &said_b) {
            (Some(a), Some(b)) => a.differences(b),
            _ => vec!["missing"],
        };
        if !differences.is_empty() {
            differing += 1;
        }
        table.push((n, a, b, said_a, said_b, differences));
    }
    let body = html! {
        h1 { "Re-run compared" }
        p.card role="status" {
            @if differing == 0 {
                "All " (rows) " steps had the same outcomes."
            } @else {
                strong { (differing) " of " (rows) " steps differ." }
            }
            " Recorded: " a href={ "/ui/sessions/" (first.id) } { code { (first.id) } }
            "; re-run: " a href={ "/ui/sessions/" (second.id) } { code { (second.id) } } "."
        }
        div.card.scroll { table.diff {
            thead { tr {
                th scope="col" { "step" } th scope="col" { "action" }
                th scope="col" { "recorded" } th scope="col" { "re-run" } th scope="col" { "same?" }
            } }
            tbody {
                @for (n, a, b, said_a, said_b, differences) in &table {
                    @let differs = !differences.is_empty();
                    tr {
                        th scope="row" { (n + 1) }
                        td {
                            @if let Some(step) = a.or(*b) {
                                strong { (action_name(&step.action)) } br; span.muted { (short(&target(&step.action), 60)) }
                            }
                        }
                        td class=[differs.then_some("differs")] {
                            @if let Some(said) = said_a { (outcome_view(said)) }
                            @if let Some(step) = a { @if step.image_sha256.is_some() {
                                img.shot.thumb src=(image_url(&first.id, step.seq)) alt={ "Recorded screenshot of step " (step.seq) } loading="lazy";
                            } }
                        }
                        td class=[differs.then_some("differs")] {
                            @if let Some(said) = said_b { (outcome_view(said)) } @else { span.muted { "not run" } }
                            @if let Some(step) = b { @if step.image_sha256.is_some() {
                                img.shot.thumb src=(image_url(&second.id, step.seq)) alt={ "Re-run screenshot of step " (step.seq) } loading="lazy";
                            } }
                        }
                        td {
                            @if differs {
                                (badge("differs", None)) br; span.muted { (differences.join(", ")) }
                            } @else {
                                (badge("ok", None)) " same"
                            }
                        }
                    }
                }
            }
        } }
    };
    Ok(layout::page(
        Some(&viewer),
        "Re-run compared",
        Nav::Sessions,
        body,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_text_is_masked_and_outcomes_compare_without_time() {
        let action = serde_json::json!({"action": "type", "selector": "#pw", "text": "s3cret"});
        let shown = target(&action);
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("6 characters"), "{shown}");
        let a = Said::of(&serde_json::json!({"ok": true, "url": "http://a/", "took_ms": 5}));
        let b = Said::of(&serde_json::json!({"ok": true, "url": "http://a/", "took_ms": 9}));
        assert!(a.differences(&b).is_empty());
        let c = Said::of(&serde_json::json!({"ok": false, "url": "http://a/",
            "error": {"code": "action_failed", "message": "no match"}}));
        assert_eq!(a.differences(&c), vec!["ok", "error"]);
    }
}
