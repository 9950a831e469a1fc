//! Bearer-token authentication: when `api.tokens` is set, every protected route needs
//! `Authorization: Bearer <token>` matching one of them exactly (no space around the token is
//! forgiven). Comparison is constant-time and checks every configured token, so timing
//! reveals neither a token nor which one matched.
//!
//! A session host (`trawl work` serving sessions to API processes) checks the shared worker
//! token instead and takes the owner from the header the API sets.
//!
//! Not here: which routes are public (the router decides: `/healthz`, `/openapi.json`).

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use subtle::ConstantTimeEq as _;

use super::AppState;
use super::error::{ApiError, ApiErrorCode};

/// Who made a request: the fingerprint of its bearer token (`anonymous` when the server has
/// no tokens). Sessions belong to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owner(pub(super) String);

/// Lets a request through when no tokens are configured or its bearer token matches one, and
/// records who made it ([`Owner`]).
pub(super) async fn require_token(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    if state.config.tokens.is_empty() {
        request
            .extensions_mut()
            .insert(Owner(crate::sessions::owner_of(None)));
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "));
    let Some(presented) = presented else {
        return unauthorized("missing bearer token");
    };
    let mut matched = subtle::Choice::from(0);
    for token in &state.config.tokens {
        matched |= presented.as_bytes().ct_eq(token.expose().as_bytes());
    }
    if bool::from(matched) {
        let owner = Owner(crate::sessions::owner_of(Some(presented)));
        request.extensions_mut().insert(owner);
        next.run(request).await
    } else {
        unauthorized("invalid bearer token")
    }
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(ApiErrorCode::Unauthorized, message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}

/// On a session host: lets a request through when it carries the shared worker token, and
/// takes who it acts for from the owner header the API process set.
pub(super) async fn require_worker_token(
    State(token): State<std::sync::Arc<crate::secret::Secret>>,
    mut request: Request,
    next: Next,
) -> Response {
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .unwrap_or("");
    if !bool::from(presented.as_bytes().ct_eq(token.expose().as_bytes())) {
        return unauthorized("invalid worker token");
    }
    let owner = request
        .headers()
        .get(crate::session_hosts::OWNER_HEADER)
        .and_then(|value| value.to_str().ok())
        .filter(|owner| {
            *owner == "anonymous"
                || (owner.len() == 32 && owner.bytes().all(|byte| byte.is_ascii_hexdigit()))
        })
        .map(str::to_owned);
    let Some(owner) = owner else {
        return ApiError::invalid(format!(
            "a session host needs the {} header: a token fingerprint",
            crate::session_hosts::OWNER_HEADER
        ))
        .into_response();
    };
    request.extensions_mut().insert(Owner(owner));
    next.run(request).await
}
