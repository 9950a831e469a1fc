//! Agent sessions over HTTP: `POST /v1/sessions` opens one (profile, credentials), `POST
//! /v1/sessions/{id}/actions` runs one action or a batch, `GET /v1/sessions/{id}/previews/{n}`
//! returns a JPEG preview, `GET /v1/sessions/{id}/replay` the replay log (JSON, open or
//! closed sessions), `DELETE /v1/sessions/{id}` closes it. A session is visible to the token
//! that opened it only: any other token gets 404.
//!
//! Not here: the sessions themselves (`crate::sessions`).

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use trawl_workers::browse::{Action, Credentials, Profile};
use utoipa::ToSchema;

use super::AppState;
use super::auth::Owner;
use super::error::{ApiError, ApiJson, ApiPath, ErrorBody};
use crate::sessions::{self, Replay, SessionInfo, Sessions, Step};

/// A session to open.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenSession {
    /// The device the browser pretends to be.
    #[serde(default)]
    pub profile: Profile,
    /// Cookies, headers and localStorage to browse with (never stored or shown).
    #[serde(default)]
    pub credentials: Credentials,
}

/// One action, or `{"actions": [...]}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ActionRequest {
    /// A batch, run in order until one fails.
    Batch {
        /// The actions.
        actions: Vec<Action>,
    },
    /// One action.
    One(Action),
}

/// The steps a request ran.
#[derive(Debug, Clone, serde::Serialize, ToSchema)]
pub struct Steps {
    /// One per action run, in order (a failed action ends the batch).
    pub steps: Vec<Step>,
}

fn sessions(state: &AppState) -> Option<&Sessions> {
    state.sessions.as_deref()
}

fn unavailable() -> ApiError {
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "sessions_unavailable",
        "this server runs no browser (started with --no-pools); sessions live on a server \
         with pools",
    )
}

fn api_error(error: sessions::Error) -> ApiError {
    match error {
        sessions::Error::NotFound(what) => ApiError::not_found(format!("no session {what}")),
        // The client may try again later: a limit, not a fault of the server.
        sessions::Error::Busy(message) => {
            ApiError::new(StatusCode::TOO_MANY_REQUESTS, "browser_busy", message)
        }
        sessions::Error::Invalid(message) => ApiError::invalid(message),
        sessions::Error::Browser(message) => {
            ApiError::new(StatusCode::BAD_GATEWAY, "browser_failed", message)
        }
        sessions::Error::Store(error) => ApiError::from(error),
    }
}

/// Opens a session.
#[utoipa::path(post, path = "/v1/sessions", request_body = OpenSession, tag = "sessions",
    responses(
        (status = 201, description = "opened", body = SessionInfo),
        (status = 422, description = "malformed request", body = ErrorBody),
        (status = 429, description = "too many sessions, or every browser context is taken: try again later", body = ErrorBody),
        (status = 503, description = "this server runs no browser", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn open(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
    ApiJson(request): ApiJson<OpenSession>,
) -> Result<(StatusCode, Json<SessionInfo>), ApiError> {
    let info = sessions(&state)
        .ok_or_else(unavailable)?
        .open(&owner.0, request.profile, &request.credentials)
        .await
        .map_err(api_error)?;
    Ok((StatusCode::CREATED, Json(info)))
}

/// Runs one action or a batch in a session.
#[utoipa::path(post, path = "/v1/sessions/{id}/actions", request_body = ActionRequest, tag = "sessions",
    params(("id" = String, Path, description = "the session id")),
    responses(
        (status = 200, description = "the steps run (a failed action has `ok: false` and ends the batch)", body = Steps),
        (status = 404, description = "no such session for this token", body = ErrorBody),
        (status = 422, description = "malformed action", body = ErrorBody),
        (status = 502, description = "the browser failed; the session is closed", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn act(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
    ApiPath(id): ApiPath<String>,
    ApiJson(request): ApiJson<ActionRequest>,
) -> Result<Json<Steps>, ApiError> {
    let actions = match request {
        ActionRequest::Batch { actions } => actions,
        ActionRequest::One(action) => vec![action],
    };
    let steps = sessions(&state)
        .ok_or_else(unavailable)?
        .act(&owner.0, &id, &actions)
        .await
        .map_err(api_error)?;
    Ok(Json(Steps { steps }))
}

/// A JPEG preview taken after a page-changing action (the last few are kept).
#[utoipa::path(get, path = "/v1/sessions/{id}/previews/{n}", tag = "sessions",
    params(("id" = String, Path, description = "the session id"),
           ("n" = u64, Path, description = "the preview number a step reported")),
    responses(
        (status = 200, description = "the preview", content_type = "image/jpeg", body = Vec<u8>),
        (status = 404, description = "no such session or preview", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn preview(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
    ApiPath((id, number)): ApiPath<(String, u64)>,
) -> Result<Response, ApiError> {
    let jpeg = sessions(&state)
        .ok_or_else(unavailable)?
        .preview(&owner.0, &id, number)
        .map_err(api_error)?;
    Ok(([(header::CONTENT_TYPE, "image/jpeg")], jpeg).into_response())
}

/// The session's replay log: every action, its outcome and its screenshot.
#[utoipa::path(get, path = "/v1/sessions/{id}/replay", tag = "sessions",
    params(("id" = String, Path, description = "the session id")),
    responses(
        (status = 200, description = "the replay log", body = Replay),
        (status = 404, description = "no such session for this token", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn replay(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
    ApiPath(id): ApiPath<String>,
) -> Result<Json<Replay>, ApiError> {
    let replay = sessions(&state)
        .ok_or_else(unavailable)?
        .replay(&owner.0, &id)
        .await
        .map_err(api_error)?;
    Ok(Json(replay))
}

/// Closes a session.
#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "sessions",
    params(("id" = String, Path, description = "the session id")),
    responses(
        (status = 204, description = "closed"),
        (status = 404, description = "no such session for this token", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn close(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
    ApiPath(id): ApiPath<String>,
) -> Result<StatusCode, ApiError> {
    sessions(&state)
        .ok_or_else(unavailable)?
        .close(&owner.0, &id)
        .await
        .map_err(api_error)?;
    Ok(StatusCode::NO_CONTENT)
}
