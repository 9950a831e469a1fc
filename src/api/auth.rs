//! Bearer-token authentication: when `api.tokens` (or `api.admin_token`) is set, every
//! protected route needs `Authorization: Bearer <token>` matching one of them exactly (no
//! space around the token is forgiven). Comparison is constant-time and checks every
//! configured token, so timing reveals neither a token nor which one matched. The matching
//! token gives the request its tenant scope (`tenant::Scope`), which handlers take with the
//! [`Caller`] extractor.
//!
//! A session host (`trawl work` serving sessions to API processes) checks the shared worker
//! token instead and takes the owner from the header the API sets.
//!
//! Not here: which routes are public (the router decides: `/healthz`, `/openapi.json`).

use axum::extract::FromRequestParts;
use axum::extract::{Request, State};
use axum::http::header;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};
use subtle::{ConditionallySelectable as _, ConstantTimeEq as _};

use crate::tenant::{Scope, Tenant};

use super::AppState;
use super::error::{ApiError, ApiErrorCode};

/// Who made a request, as sessions know it: the name of its tenant (`default` when the server
/// has no tokens; `sessions::ANY_OWNER` for the admin token). Sessions belong to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Owner(pub(super) String);

/// Which token a request presented, by its fingerprint (`sessions::owner_of`), or `None` for
/// the admin token: what the rate limits count per client (the admin is not limited).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct TokenId(pub(super) Option<String>);

/// Lets a request through when no tokens are configured or its bearer token matches one, and
/// records what it may see ([`Scope`], taken by handlers as [`Caller`]) and who it is
/// ([`Owner`]).
pub(super) async fn require_token(
    State(state): State<AppState>,
    mut request: Request,
    next: Next,
) -> Response {
    let scopes = state.config.token_scopes();
    if scopes.is_empty() {
        let scope = Scope::default();
        request
            .extensions_mut()
            .insert(Owner(scope.tenant.as_str().to_owned()));
        request.extensions_mut().insert(scope);
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
    // Every token is compared, and the match is selected without a branch on it.
    let mut matched = subtle::Choice::from(0);
    let mut which = 0u32;
    for (index, (token, _)) in scopes.iter().enumerate() {
        let equal = presented.as_bytes().ct_eq(token.expose().as_bytes());
        matched |= equal;
        which.conditional_assign(&(index as u32), equal);
    }
    if bool::from(matched) {
        let (token, scope) = &scopes[which as usize];
        let scope = scope.clone();
        let token_id = (!scope.all).then(|| crate::sessions::owner_of(Some(token.expose())));
        request.extensions_mut().insert(TokenId(token_id));
        let owner = if scope.all {
            crate::sessions::ANY_OWNER
        } else {
            scope.tenant.as_str()
        };
        request.extensions_mut().insert(Owner(owner.to_owned()));
        request.extensions_mut().insert(scope);
        next.run(request).await
    } else {
        unauthorized("invalid bearer token")
    }
}

/// What the caller of a protected route may see: its [`Scope`], as the auth layer recorded it.
/// The one way handlers learn their tenant; every store read they make is filtered by it.
#[derive(Debug, Clone)]
pub(super) struct Caller(pub(super) Scope);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Scope>()
            .cloned()
            .map(Caller)
            .ok_or_else(|| ApiError::internal(&"a protected route without the auth layer"))
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
        .filter(|owner| *owner == crate::sessions::ANY_OWNER || Tenant::new(owner).is_ok())
        .map(str::to_owned);
    let Some(owner) = owner else {
        return ApiError::invalid(format!(
            "a session host needs the {} header: a tenant name",
            crate::session_hosts::OWNER_HEADER
        ))
        .into_response();
    };
    request.extensions_mut().insert(Owner(owner));
    next.run(request).await
}
