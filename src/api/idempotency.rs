//! `Idempotency-Key` on the creating routes (`POST /v1/jobs`, `/v1/crawls`, `/v1/sessions`, and
//! the Firecrawl-compatible crawl and batch scrape routes, which also take Firecrawl's
//! `x-idempotency-key`):
//! a client that sends a request again with the same key and the same body within 24 hours
//! gets the first answer again (with `Idempotent-Replayed: true`) and nothing is created
//! twice; the same key with another body is a 409 `idempotency_conflict`, and so is a key whose
//! first request is still being handled. Keys belong to a token (to the server, without
//! tokens). A first request that ends in a server fault (5xx) gives its key back.
//!
//! Not here: storing keys (`store`), who the client is (`auth`).

use std::time::Duration;

use axum::body::Body;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderName, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use sha2::{Digest as _, Sha256};

use super::AppState;
use super::auth::Owner;
use super::error::{ApiError, ApiErrorCode};
use crate::store::IdempotencyClaim;

/// How long a key holds its answer.
pub(super) const KEY_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);

/// The routes that take keys.
const ROUTES: [&str; 3] = ["/v1/jobs", "/v1/crawls", "/v1/sessions"];

/// The request header.
const KEY_HEADER: &str = "idempotency-key";

/// The request header Firecrawl's clients send (on the Firecrawl-compatible creating routes,
/// `Idempotency-Key` works too).
const FIRECRAWL_KEY_HEADER: &str = "x-idempotency-key";

/// Set on a replayed answer.
const REPLAYED_HEADER: &str = "idempotent-replayed";

/// Most bytes of an answer recorded (the creating routes answer with small JSON documents).
const MAX_ANSWER_BYTES: usize = 4 << 20;

/// Replays the recorded answer of a key, refuses a key used for another request, or runs the
/// request and records its answer. Requests without a key, and other routes, pass.
pub(super) async fn replay_or_record(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    let takes_keys = request.method() == Method::POST
        && request
            .extensions()
            .get::<MatchedPath>()
            .is_some_and(|path| {
                ROUTES.contains(&path.as_str())
                    || super::firecrawl::CREATING_ROUTES.contains(&path.as_str())
            });
    let Some(key) = request
        .headers()
        .get(KEY_HEADER)
        .or_else(|| request.headers().get(FIRECRAWL_KEY_HEADER))
        .filter(|_| takes_keys)
    else {
        return next.run(request).await;
    };
    let Some(key) = key
        .to_str()
        .ok()
        .filter(|key| !key.is_empty() && key.len() <= 255)
        .map(str::to_owned)
    else {
        return ApiError::bad_request("Idempotency-Key must be 1 to 255 visible ASCII characters")
            .into_response();
    };
    let owner = request
        .extensions()
        .get::<Owner>()
        .map_or_else(|| "anonymous".to_owned(), |Owner(owner)| owner.clone());
    let (parts, body) = request.into_parts();
    let bytes = match axum::body::to_bytes(body, state.config.max_body_bytes).await {
        Ok(bytes) => bytes,
        Err(_) => {
            return ApiError::new(
                ApiErrorCode::PayloadTooLarge,
                "the request body is too large",
            )
            .into_response();
        }
    };
    let mut hash = Sha256::new();
    hash.update(parts.method.as_str());
    hash.update(b" ");
    hash.update(parts.uri.path());
    hash.update(b"\n");
    hash.update(&bytes);
    let request_hash = hex::encode(hash.finalize());
    let now_ms = jiff::Timestamp::now().as_millisecond();
    let expired_before_ms = now_ms - KEY_LIFETIME.as_millis() as i64;
    let store = &state.context.store;
    let claim = store
        .claim_idempotency_key(&owner, &key, &request_hash, now_ms, expired_before_ms)
        .await;
    match claim {
        Err(error) => ApiError::internal(&error).into_response(),
        Ok(IdempotencyClaim::Conflict) => ApiError::new(
            ApiErrorCode::IdempotencyConflict,
            "this Idempotency-Key was used for another request in the last 24 hours",
        )
        .into_response(),
        Ok(IdempotencyClaim::InProgress) => ApiError::new(
            ApiErrorCode::IdempotencyConflict,
            "the first request with this Idempotency-Key is still being handled; retry later",
        )
        .into_response(),
        Ok(IdempotencyClaim::Replay { status, body }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            let mut response = (status, body).into_response();
            let headers = response.headers_mut();
            headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            headers.insert(
                HeaderName::from_static(REPLAYED_HEADER),
                HeaderValue::from_static("true"),
            );
            response
        }
        Ok(IdempotencyClaim::Claimed) => {
            let response = next
                .run(Request::from_parts(parts, Body::from(bytes)))
                .await;
            record(&state, &owner, &key, response).await
        }
    }
}

/// Records the answer of a claimed key (a server fault gives the key back) and returns it.
async fn record(state: &AppState, owner: &str, key: &str, response: Response) -> Response {
    let store = &state.context.store;
    let (parts, body) = response.into_parts();
    if parts.status.is_server_error() {
        if let Err(error) = store.release_idempotency_key(owner, key).await {
            tracing::warn!(error = %error, "giving back an idempotency key failed");
        }
        return Response::from_parts(parts, body);
    }
    let bytes = match axum::body::to_bytes(body, MAX_ANSWER_BYTES).await {
        Ok(bytes) => bytes,
        Err(error) => {
            if let Err(error) = store.release_idempotency_key(owner, key).await {
                tracing::warn!(error = %error, "giving back an idempotency key failed");
            }
            return ApiError::internal(&format!("reading an answer to record: {error}"))
                .into_response();
        }
    };
    let text = String::from_utf8_lossy(&bytes);
    if let Err(error) = store
        .complete_idempotency_key(owner, key, parts.status.as_u16(), &text)
        .await
    {
        return ApiError::internal(&error).into_response();
    }
    Response::from_parts(parts, Body::from(bytes))
}
