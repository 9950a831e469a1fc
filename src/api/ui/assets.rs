//! The UI's static assets, embedded in the binary: one hand-written style sheet and one
//! hand-written script (live values from server-sent events, replay stepping). No build step,
//! nothing fetched from elsewhere.
//!
//! Not here: the pages that use them.

use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::layout::UiError;
use axum::extract::Path;

const CSS: &str = include_str!("static/app.css");
const JS: &str = include_str!("static/app.js");

/// `GET /ui/static/{name}`: `app.css` or `app.js`.
pub(super) async fn asset(Path(name): Path<String>) -> Response {
    let (body, media_type) = match name.as_str() {
        "app.css" => (CSS, "text/css; charset=utf-8"),
        "app.js" => (JS, "text/javascript; charset=utf-8"),
        _ => return UiError::not_found("There is no such asset.").into_response(),
    };
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(media_type));
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, max-age=300"),
    );
    response
}
