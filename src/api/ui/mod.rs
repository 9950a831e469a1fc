//! The web UI at `/ui`, served by `trawl serve` beside the API: a dashboard (queue depth,
//! throughput, running and recent jobs, crawls and sessions, error codes, live counters by
//! server-sent events), job and crawl pages with their cancel buttons, the page viewer
//! (sanitised markdown beside the metadata, versions, raw HTML as a download, the WARC
//! record), archive search, and the session replay cockpit (timeline stepped with the
//! keyboard, export as one self-contained HTML file or JSON, re-run in a new session with
//! the differences shown).
//!
//! Server-rendered HTML (maud), one small hand-written script and style sheet embedded in the
//! binary (`assets`); every response carries a strict Content-Security-Policy (no inline
//! script or style). A login form takes an API token and sets an HttpOnly, SameSite=Strict
//! cookie (`auth`); every form that changes something carries a CSRF token. The UI sees what
//! the token's tenant sees through the API (404 for others' objects), the admin token sees
//! all, and a server without tokens is open like the API.
//!
//! Not here: the JSON API (the sibling modules), what a job or a session does.

mod assets;
mod auth;
mod dashboard;
mod jobs;
mod layout;
mod markdown;
mod pages;
mod search;
mod sessions;

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::AppState;

use auth::Logins;

/// The Content-Security-Policy of every UI response: scripts, styles and connections from
/// this server only, images from it or inline `data:` URLs, no frames, forms posting here.
pub(crate) const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; \
     frame-ancestors 'none'";

/// The data directory whose WARC files the page viewer reads records from: a request
/// extension (`api::router(state).layer(Extension(DataDir(dir)))`, as `trawl serve` does).
/// Without it the viewer names a page's WARC record but cannot serve it.
#[derive(Debug, Clone)]
pub struct DataDir(pub std::path::PathBuf);

/// What the UI's handlers share: the API's state and the logins.
#[derive(Debug, Clone)]
struct Ui {
    app: AppState,
    logins: Arc<Logins>,
}

/// The UI's router, to be nested at `/ui`: the login page and the static assets are public,
/// everything else needs a login (or a server without tokens).
pub(super) fn router(app: AppState) -> Router {
    let ui = Ui {
        logins: Arc::new(Logins::new()),
        app,
    };
    let protected = Router::new()
        .route("/", get(dashboard::page))
        .route("/events", get(dashboard::events))
        .route("/jobs/{id}", get(jobs::job))
        .route("/jobs/{id}/cancel", post(jobs::cancel_job))
        .route("/crawls/{id}", get(jobs::crawl))
        .route("/crawls/{id}/cancel", post(jobs::cancel_crawl))
        .route("/pages/{id}", get(pages::page))
        .route("/pages/{id}/raw", get(pages::raw))
        .route("/pages/{id}/warc", get(pages::warc))
        .route("/search", get(search::page))
        .route("/sessions", get(sessions::list))
        .route("/sessions/{id}", get(sessions::replay))
        .route("/sessions/{id}/steps/{seq}/image", get(sessions::image))
        .route("/sessions/{id}/export.html", get(sessions::export_html))
        .route("/sessions/{id}/export.json", get(sessions::export_json))
        .route("/sessions/{id}/rerun", post(sessions::rerun))
        .route("/sessions/{id}/compare/{other}", get(sessions::compare))
        .route("/logout", post(auth::logout))
        .route_layer(middleware::from_fn_with_state(
            ui.clone(),
            auth::require_login,
        ));
    Router::new()
        .merge(protected)
        .route("/login", get(auth::login_form).post(auth::login))
        .route("/static/{name}", get(assets::asset))
        .fallback(not_found)
        .layer(middleware::from_fn(security_headers))
        .with_state(ui)
}

async fn not_found() -> Response {
    layout::UiError::not_found("There is no such page.").into_response()
}

/// Adds the security headers to every UI response: the CSP (unless the handler set a
/// stricter one), no sniffing, referrers only to this server (`no-referrer` would make
/// browsers send `Origin: null` with forms, which the API's origin check refuses), no
/// framing, and no caching of pages.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CSP),
        );
    }
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if !headers.contains_key(header::CACHE_CONTROL) {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

/// A redirect after a form (303: the browser follows with a GET).
fn see_other(location: &str) -> Response {
    let mut response = StatusCode::SEE_OTHER.into_response();
    if let Ok(value) = HeaderValue::from_str(location) {
        response.headers_mut().insert(header::LOCATION, value);
    }
    response
}
