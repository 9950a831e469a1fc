//! The Firecrawl-compatible API: the scrape, crawl, map, batch scrape and search routes of
//! Firecrawl's v1 and v2 shapes, at the paths its SDKs call (`/v1/scrape`, `/v2/scrape`, `/v2/crawl`, …,
//! at the root: firecrawl-py joins them onto its `api_url` with `urljoin`, which drops any path
//! prefix), so a Firecrawl client works against trawl by changing its `api_url`. Requests are
//! camelCase; answers are Firecrawl's envelopes (`{"success": true, "data": …}`, `{"success":
//! false, "error": "…", "code": "…"}`), with `creditsUsed`-style fields at neutral values.
//!
//! Everything maps onto trawl's own jobs: a scrape is a fetch job run now (`fetch_now`, as
//! `POST /v1/fetch`), a crawl is a trawl crawl (its id is the crawl's id), a batch scrape is a
//! batch of fetch jobs (its id is the batch's id), a map reads the site's sitemaps and the
//! page's links, and a search is a web search on trawl's providers (`crate::web_search`). The routes sit behind the same layers as trawl's own (tokens and tenants,
//! request limits, idempotency keys, the `Host`/`Origin` guard) and every URL goes through the
//! SSRF guard. An option trawl cannot honour is refused with a 400 naming it, never ignored.
//!
//! - `options`: the request types, the scrape options and how they map onto a fetch job.
//! - `document`: a stored page as a Firecrawl document (markdown, html, rawHtml, links,
//!   metadata).
//! - `scrape`: `POST /v{1,2}/scrape` and the batch scrape routes.
//! - `crawl`: the crawl routes (start, status with `next` pages, cancel).
//! - `map`: `POST /v{1,2}/map`.
//! - `search`: `POST /v{1,2}/search` (`GET /v1/search` stays trawl's deprecated archive
//!   search: the method tells them apart).
//!
//! Not here: LLM extraction
//! (`json`, `summary`, `extract`: no model is configured), or a second pipeline: fetching,
//! extraction and crawling are trawl's.

pub(super) mod crawl;
mod document;
pub(super) mod map;
pub(super) mod options;
pub(super) mod scrape;
pub(super) mod search;

use axum::Json;
use axum::Router;
use axum::body::Body;
use axum::extract::rejection::JsonRejection;
use axum::extract::{FromRequest, Request};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use trawl_workers::job::object::Object;
use utoipa::ToSchema;

use super::AppState;
use super::error::ApiError;

/// The compatible routes, to be merged into the protected part of the router.
pub(super) fn routes() -> Router<AppState> {
    Router::new()
        .route("/v1/scrape", post(scrape::scrape_v1))
        .route("/v2/scrape", post(scrape::scrape_v2))
        .route("/v1/batch/scrape", post(scrape::batch_start_v1))
        .route("/v2/batch/scrape", post(scrape::batch_start_v2))
        .route("/v1/batch/scrape/{id}", get(scrape::batch_status_v1))
        .route("/v2/batch/scrape/{id}", get(scrape::batch_status_v2))
        .route("/v1/crawl", post(crawl::crawl_start_v1))
        .route("/v2/crawl", post(crawl::crawl_start_v2))
        .route(
            "/v1/crawl/{id}",
            get(crawl::crawl_status_v1).delete(crawl::crawl_cancel_v1),
        )
        .route(
            "/v2/crawl/{id}",
            get(crawl::crawl_status_v2).delete(crawl::crawl_cancel_v2),
        )
        .route("/v1/map", post(map::map_v1))
        .route("/v2/map", post(map::map_v2))
        // `GET /v1/search` is trawl's deprecated archive search, routed beside this.
        .route("/v1/search", post(search::search_v1))
        .route("/v2/search", post(search::search_v2))
}

/// The creating routes, which take idempotency keys.
pub(super) const CREATING_ROUTES: [&str; 4] = [
    "/v1/crawl",
    "/v2/crawl",
    "/v1/batch/scrape",
    "/v2/batch/scrape",
];

/// Whether a request's method and path (or a route template) are one of the compatible
/// routes. `/v1/search` is Firecrawl's for `POST` only: its `GET` is trawl's archive search.
pub(super) fn is_compat(method: &Method, path: &str) -> bool {
    if path == "/v1/search" {
        return method == Method::POST;
    }
    path == "/v2/search"
        || (["/v1/", "/v2/"].iter().any(|version| {
            path.strip_prefix(version).is_some_and(|rest| {
                ["scrape", "batch/scrape", "crawl", "map"]
                    .iter()
                    .any(|name| {
                        rest == *name
                            || rest
                                .strip_prefix(name)
                                .is_some_and(|tail| tail.starts_with('/'))
                    })
            })
        }) && !path.starts_with("/v1/crawls"))
}

/// Which Firecrawl API shape a route speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Version {
    /// `/v1/…`.
    V1,
    /// `/v2/…`.
    V2,
}

impl Version {
    /// The path prefix.
    fn prefix(self) -> &'static str {
        match self {
            Version::V1 => "/v1",
            Version::V2 => "/v2",
        }
    }
}

/// A Firecrawl error answer: `{"success": false, "error": "…", "code": "…"}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FirecrawlError)]
pub(crate) struct ErrorAnswer {
    /// Always `false`.
    pub(crate) success: bool,
    /// What went wrong, for people.
    pub(crate) error: String,
    /// A snake_case code: trawl's (`bad_request`, `unsupported_option`, `not_found`, a job
    /// error code such as `blocked_destination` or `http_status`, …) or Firecrawl's
    /// `SCRAPE_TIMEOUT`.
    pub(crate) code: String,
}

/// An error answered in Firecrawl's shape, with its status.
#[derive(Debug, Clone)]
pub(super) struct FcError {
    status: StatusCode,
    code: String,
    message: String,
}

impl FcError {
    /// An error with a status, a code and a message.
    pub(super) fn new(status: StatusCode, code: &str, message: impl Into<String>) -> FcError {
        FcError {
            status,
            code: code.to_owned(),
            message: message.into(),
        }
    }

    /// 400 `bad_request`.
    pub(super) fn bad_request(message: impl Into<String>) -> FcError {
        FcError::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// 400 `unsupported_option`: an option trawl cannot honour.
    pub(super) fn unsupported(message: impl Into<String>) -> FcError {
        FcError::new(StatusCode::BAD_REQUEST, "unsupported_option", message)
    }

    /// 404 `not_found`.
    pub(super) fn not_found(message: impl Into<String>) -> FcError {
        FcError::new(StatusCode::NOT_FOUND, "not_found", message)
    }
}

impl From<ApiError> for FcError {
    fn from(error: ApiError) -> Self {
        FcError {
            status: error.status(),
            code: error.code().as_str().to_owned(),
            message: error.message().to_owned(),
        }
    }
}

impl From<crate::store::Error> for FcError {
    fn from(error: crate::store::Error) -> Self {
        ApiError::from(error).into()
    }
}

impl IntoResponse for FcError {
    fn into_response(self) -> Response {
        (
            self.status,
            Json(ErrorAnswer {
                success: false,
                error: self.message,
                code: self.code,
            }),
        )
            .into_response()
    }
}

/// JSON bodies whose rejections are Firecrawl errors: 400 for a body that is not JSON or does
/// not fit the request (Firecrawl answers 400 to both), 413 and 415 as trawl's routes do.
#[derive(Debug, Clone)]
pub(super) struct FcJson<T>(pub(super) T);

impl<T, S> FromRequest<S> for FcJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = FcError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        // An object only, as Firecrawl's own validation asks (see `job::object`).
        match Json::<Object<T>>::from_request(request, state).await {
            Ok(Json(Object(value))) => Ok(FcJson(value)),
            Err(rejection) => Err(match &rejection {
                JsonRejection::JsonDataError(error) => FcError::bad_request(error.body_text()),
                JsonRejection::JsonSyntaxError(error) => {
                    FcError::new(StatusCode::BAD_REQUEST, "invalid_json", error.body_text())
                }
                _ => ApiError::from(rejection).into(),
            }),
        }
    }
}

/// Rewrites the error answers of the shared layers (tokens, limits, guard, idempotency,
/// unknown routes) on the compatible paths into Firecrawl's shape, so a Firecrawl client reads
/// every error the same way.
pub(super) async fn envelope_errors(request: Request, next: Next) -> Response {
    if !is_compat(request.method(), request.uri().path()) {
        return next.run(request).await;
    }
    let response = next.run(request).await;
    if response.status().is_success() {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let rewritten = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|value| {
            let error = value.get("error")?.as_object()?;
            Some(ErrorAnswer {
                success: false,
                error: error.get("message")?.as_str()?.to_owned(),
                code: error.get("code")?.as_str()?.to_owned(),
            })
        });
    match rewritten {
        Some(answer) => {
            let body = serde_json::to_vec(&answer).unwrap_or_default();
            parts.headers.remove(header::CONTENT_LENGTH);
            Response::from_parts(parts, Body::from(body))
        }
        None => Response::from_parts(parts, Body::from(bytes)),
    }
}

/// The origin links in answers are built on (`next`, a crawl's `url`): the request's `Host`,
/// over http. Firecrawl clients keep only the path and query of such links (firecrawl-py pins
/// them onto its own `api_url`).
fn origin(headers: &HeaderMap) -> String {
    let host = headers
        .get(header::HOST)
        .and_then(|host| host.to_str().ok())
        .filter(|host| !host.is_empty())
        .unwrap_or("localhost");
    format!("http://{host}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compatible_paths_are_told_from_trawls_own() {
        for path in [
            "/v1/scrape",
            "/v2/scrape",
            "/v2/batch/scrape",
            "/v2/batch/scrape/01ABC",
            "/v1/crawl",
            "/v2/crawl/01ABC",
            "/v2/map",
            "/v1/search",
            "/v2/search",
        ] {
            assert!(is_compat(&Method::POST, path), "{path}");
        }
        for path in [
            "/v1/crawls",
            "/v1/crawls/01ABC",
            "/v1/fetch",
            "/v1/scraped",
            "/v1/searches",
            "/v3/scrape",
            "/v1/jobs",
        ] {
            assert!(!is_compat(&Method::POST, path), "{path}");
        }
        // The archive search keeps trawl's errors.
        assert!(!is_compat(&Method::GET, "/v1/search"));
        assert!(is_compat(&Method::GET, "/v2/crawl/01ABC"));
    }
}
