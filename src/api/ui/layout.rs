//! The page shell every UI page shares (skip link, navigation, who is logged in, the logout
//! button), error pages ([`UiError`]), and small pieces: status badges, times, links.
//!
//! Not here: the pages' own content (each page's module).

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};

use super::auth::Viewer;

/// Which navigation entry is the current page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Nav {
    None,
    Dashboard,
    Search,
    Sessions,
}

/// A whole page: `title`, the navigation (when logged in) and `body` in `<main>`.
pub(super) fn page(viewer: Option<&Viewer>, title: &str, nav: Nav, body: Markup) -> Markup {
    page_with(viewer, title, nav, None, body)
}

/// Like [`page`], with the server-sent events URL the script follows for live values.
pub(super) fn page_with(
    viewer: Option<&Viewer>,
    title: &str,
    nav: Nav,
    events: Option<&str>,
    body: Markup,
) -> Markup {
    let current = |entry: Nav| (entry == nav).then_some("page");
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · trawl" }
                // No favicon request (it would be a 404).
                link rel="icon" href="data:,";
                link rel="stylesheet" href="/ui/static/app.css";
                script src="/ui/static/app.js" defer {}
            }
            body data-events=[events] {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    a.brand href="/ui/" { "trawl" }
                    @if let Some(viewer) = viewer {
                        nav aria-label="Main" {
                            ul {
                                li { a href="/ui/" aria-current=[current(Nav::Dashboard)] { "Dashboard" } }
                                li { a href="/ui/search" aria-current=[current(Nav::Search)] { "Search" } }
                                li { a href="/ui/sessions" aria-current=[current(Nav::Sessions)] { "Sessions" } }
                            }
                        }
                        div.who {
                            span { "Signed in as " strong { (viewer.label()) } }
                            @if !viewer.open {
                                form method="post" action="/ui/logout" {
                                    input type="hidden" name="csrf" value=(viewer.csrf);
                                    button.link type="submit" { "Log out" }
                                }
                            }
                        }
                    }
                }
                main #main tabindex="-1" {
                    (body)
                }
            }
        }
    }
}

/// An error page with its status.
#[derive(Debug)]
pub(super) struct UiError {
    status: StatusCode,
    title: String,
    message: String,
}

impl UiError {
    pub(super) fn new(
        status: StatusCode,
        title: impl Into<String>,
        message: impl Into<String>,
    ) -> UiError {
        UiError {
            status,
            title: title.into(),
            message: message.into(),
        }
    }

    /// 404: unknown, or another tenant's (never told apart).
    pub(super) fn not_found(message: impl Into<String>) -> UiError {
        UiError::new(StatusCode::NOT_FOUND, "Not found", message)
    }
}

impl From<crate::store::Error> for UiError {
    fn from(error: crate::store::Error) -> UiError {
        tracing::warn!(error = %error, "ui: store failed");
        UiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal error",
            "The store failed; see the server's log.",
        )
    }
}

impl IntoResponse for UiError {
    fn into_response(self) -> Response {
        let body = html! {
            section.card.narrow {
                h1 { (self.title) }
                p role="alert" { (self.message) }
                p { a href="/ui/" { "Back to the dashboard" } }
            }
        };
        (self.status, page(None, &self.title, Nav::None, body)).into_response()
    }
}

/// A job's or crawl's status as a badge; `live` names the server-sent value that updates it.
pub(super) fn badge(status: &str, live: Option<&str>) -> Markup {
    html! {
        span class={ "badge " (status) } data-live=[live] { (status) }
    }
}

/// An RFC 3339 time, shortened to the second, in a `<time>`.
pub(super) fn time(rfc3339: &str) -> Markup {
    let shown = rfc3339
        .get(..19)
        .map(|text| text.replace('T', " "))
        .unwrap_or_else(|| rfc3339.to_owned());
    html! { time datetime=(rfc3339) { (shown) " UTC" } }
}

/// Milliseconds since the epoch as an RFC 3339 time.
pub(super) fn time_ms(ms: i64) -> Markup {
    let text = jiff::Timestamp::from_millisecond(ms)
        .map(|at| at.to_string())
        .unwrap_or_default();
    time(&text)
}

/// A long value cut for a table cell (the whole in its title).
pub(super) fn short(text: &str, max: usize) -> Markup {
    if text.chars().count() <= max {
        return html! { (text) };
    }
    let cut: String = text.chars().take(max).collect();
    html! { span title=(text) { (cut) "…" } }
}
