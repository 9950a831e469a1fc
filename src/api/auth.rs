//! Bearer-token authentication: when `api.tokens` is set, every protected route needs
//! `Authorization: Bearer <token>` matching one of them. Comparison is constant-time and
//! checks every configured token, so timing reveals neither a token nor which one matched.
//!
//! Not here: which routes are public (the router decides: `/healthz`, `/openapi.json`).

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use subtle::ConstantTimeEq as _;

use super::AppState;
use super::error::ApiError;

/// Lets a request through when no tokens are configured or its bearer token matches one.
pub(super) async fn require_token(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    if state.config.tokens.is_empty() {
        return next.run(request).await;
    }
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim);
    let Some(presented) = presented else {
        return unauthorized("missing bearer token");
    };
    let mut matched = subtle::Choice::from(0);
    for token in &state.config.tokens {
        matched |= presented.as_bytes().ct_eq(token.expose().as_bytes());
    }
    if bool::from(matched) {
        next.run(request).await
    } else {
        unauthorized("invalid bearer token")
    }
}

fn unauthorized(message: &str) -> Response {
    let mut response =
        ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
}
