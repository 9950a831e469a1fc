//! Agent sessions over HTTP: `POST /v1/sessions` opens one (id, profile, credentials), `GET
//! /v1/sessions` lists the caller's, `GET /v1/sessions/{id}` shows one, `POST
//! /v1/sessions/{id}/actions` runs one action or a batch, `GET /v1/sessions/{id}/previews/{n}`
//! returns a JPEG preview, `GET /v1/sessions/{id}/replay` the replay log (JSON, open or
//! closed sessions), `DELETE /v1/sessions/{id}` closes it. A session is visible to the tokens
//! of the tenant that opened it (and the admin token) only: any other token gets 404.
//!
//! A server without a browser routes these requests to the session hosts (`trawl work` with
//! a browser and `sessions.listen`) when `sessions.worker_token` is set; the replay log is
//! read from the store wherever the session ran.
//!
//! Not here: the sessions themselves (`crate::sessions`), the hosts' registry and the
//! forwarding (`crate::session_hosts`).

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use trawl_workers::browse::{Action, Credentials, Profile};
use trawl_workers::job::ErrorCode;
use trawl_workers::job::object::Object;
use utoipa::ToSchema;

use super::AppState;
use super::auth::Owner;
use super::error::{ApiError, ApiErrorCode, ApiJson, ApiPath, ErrorBody, at_path};
use crate::session_hosts::{Forwarded, Remote, RouteError};
use crate::sessions::{self, Replay, SessionInfo, SessionList, Sessions, Step};

/// A session to open.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OpenSession {
    /// The session's id, chosen by the client (an agent's chat or task id): 1 to 128 ASCII
    /// letters, digits, `-`, `_`, `.` or `:`, unique per tenant. Absent: a ULID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The device the browser pretends to be.
    #[serde(default)]
    pub profile: Profile,
    /// Cookies, headers and localStorage to browse with (never stored or shown).
    #[serde(default)]
    pub credentials: Credentials,
}

/// One action, or `{"actions": [...]}`. Read by hand rather than as an untagged enum, whose
/// only error, whatever the fault, is "data did not match any variant": a body with `actions`
/// is a batch and anything else one action, so a misspelt action or a bad field is told as
/// the action's own error, and a batch's names the action's place (`actions[2]: ...`).
#[derive(Debug, Clone, ToSchema)]
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

impl<'de> Deserialize<'de> for ActionRequest {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::Error as _;
        /// A batch's body, read with its path told (`actions[1].action: ...`).
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Batch {
            actions: Vec<Action>,
        }
        let Object(fields) =
            Object::<serde_json::Map<String, serde_json::Value>>::deserialize(deserializer)?;
        let batch = fields.contains_key("actions");
        let fields = serde_json::Value::Object(fields);
        if batch {
            let Batch { actions } = serde_path_to_error::deserialize(fields)
                .map_err(|e| D::Error::custom(at_path(e)))?;
            Ok(ActionRequest::Batch { actions })
        } else {
            // The trait's `deserialize`: `Action`'s inherent one is the derive, which would
            // also read an array (see `objects_only!`).
            <Action as Deserialize>::deserialize(fields)
                .map(ActionRequest::One)
                .map_err(D::Error::custom)
        }
    }
}

/// The steps a request ran.
#[derive(Debug, Clone, serde::Serialize, ToSchema)]
pub struct Steps {
    /// One per action run, in order (a failed action ends the batch).
    pub steps: Vec<Step>,
}

/// Where this server's sessions are: in its own browser, or on session hosts.
enum At<'a> {
    Here(&'a Sessions),
    Hosts(&'a Remote),
}

fn at(state: &AppState) -> Option<At<'_>> {
    match (&state.sessions, &state.remote_sessions) {
        (Some(sessions), _) => Some(At::Here(sessions)),
        (None, Some(remote)) => Some(At::Hosts(remote)),
        (None, None) => None,
    }
}

fn unavailable() -> ApiError {
    ApiError::new(
        ApiErrorCode::SessionsUnavailable,
        "this server runs no browser (started with --no-pools) and routes no sessions to \
         workers (set sessions.worker_token, and sessions.listen on the workers)",
    )
}

/// A session host's routing failure as the API answers it.
pub(crate) fn route_error(error: RouteError) -> ApiError {
    match error {
        RouteError::NoHost => ApiError::new(ApiErrorCode::SessionsUnavailable, error.to_string()),
        RouteError::NotFound(id) => ApiError::not_found(format!("no session {id}")),
        RouteError::Unreachable(message) => {
            ApiError::new(ApiErrorCode::Job(ErrorCode::BrowserFailed), message)
        }
        RouteError::Store(error) => ApiError::from(error),
    }
}

/// A host's answer as this server's.
fn relay(answer: Forwarded) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    let mut response = (status, answer.body).into_response();
    if let Some(value) = answer
        .content_type
        .and_then(|value| header::HeaderValue::from_str(&value).ok())
    {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

fn to_json(value: &impl serde::Serialize) -> Bytes {
    Bytes::from(serde_json::to_vec(value).expect("requests serialise"))
}

/// A session's failure as the API answers it.
pub(crate) fn api_error(error: sessions::Error) -> ApiError {
    match error {
        sessions::Error::NotFound(what) => ApiError::not_found(format!("no session {what}")),
        // The client may try again later: a limit, not a fault of the server.
        sessions::Error::Busy(message) => {
            ApiError::new(ApiErrorCode::Job(ErrorCode::BrowserBusy), message)
        }
        sessions::Error::Invalid(message) => ApiError::invalid(message),
        sessions::Error::Conflict(message) => ApiError::new(ApiErrorCode::Conflict, message),
        sessions::Error::Browser(message) => {
            ApiError::new(ApiErrorCode::Job(ErrorCode::BrowserFailed), message)
        }
        sessions::Error::Store(error) => ApiError::from(error),
    }
}

/// Opens a session.
#[utoipa::path(post, path = "/v1/sessions", operation_id = "open_session", request_body = OpenSession, tag = "sessions",
    responses(
        (status = 201, description = "opened", body = SessionInfo),
        (status = 409, description = "the id chosen is taken by another session of this tenant", body = ErrorBody),
        (status = 422, description = "malformed request (an id outside its charset or length)", body = ErrorBody),
        (status = 429, description = "too many sessions, or every browser context is taken: try again later", body = ErrorBody),
        (status = 502, description = "the session host did not answer", body = ErrorBody),
        (status = 503, description = "no browser here and no live session host", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn open(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
    ApiJson(request): ApiJson<OpenSession>,
) -> Result<Response, ApiError> {
    match at(&state).ok_or_else(unavailable)? {
        At::Here(sessions) => {
            let info = sessions
                .open(
                    &owner.0,
                    request.id.as_deref(),
                    request.profile,
                    &request.credentials,
                )
                .await
                .map_err(api_error)?;
            Ok((StatusCode::CREATED, Json(info)).into_response())
        }
        At::Hosts(remote) => remote
            .open(&owner.0, to_json(&request))
            .await
            .map(relay)
            .map_err(route_error),
    }
}

/// Runs one action or a batch in a session.
#[utoipa::path(post, path = "/v1/sessions/{id}/actions", operation_id = "act_in_session", request_body = ActionRequest, tag = "sessions",
    params(("id" = String, Path, description = "the session id")),
    responses(
        (status = 200, description = "the steps run (a failed action has `ok: false` and ends the batch)", body = Steps),
        (status = 404, description = "no such session for this token", body = ErrorBody),
        (status = 422, description = "malformed action", body = ErrorBody),
        (status = 502, description = "the browser failed, or the session host did not answer", body = ErrorBody),
        (status = 503, description = "no browser here and no session host routing", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn act(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
    ApiPath(id): ApiPath<String>,
    ApiJson(request): ApiJson<ActionRequest>,
) -> Result<Response, ApiError> {
    let actions = match request {
        ActionRequest::Batch { actions } => actions,
        ActionRequest::One(action) => vec![action],
    };
    match at(&state).ok_or_else(unavailable)? {
        At::Here(sessions) => {
            let steps = sessions
                .act(&owner.0, &id, &actions)
                .await
                .map_err(api_error)?;
            Ok(Json(Steps { steps }).into_response())
        }
        At::Hosts(remote) => {
            let body = to_json(&serde_json::json!({ "actions": actions }));
            remote
                .forward(&owner.0, &id, "POST", "/actions", Some(body))
                .await
                .map(relay)
                .map_err(route_error)
        }
    }
}

/// A JPEG preview taken after a page-changing action (the last few are kept).
#[utoipa::path(get, path = "/v1/sessions/{id}/previews/{n}", operation_id = "read_session_preview", tag = "sessions",
    params(("id" = String, Path, description = "the session id"),
           ("n" = u64, Path, description = "the preview number a step reported")),
    responses(
        (status = 200, description = "the preview", content_type = "image/jpeg", body = Vec<u8>),
        (status = 404, description = "no such session or preview", body = ErrorBody),
        (status = 502, description = "the session host did not answer", body = ErrorBody),
        (status = 503, description = "no browser here and no session host routing", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn preview(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
    ApiPath((id, number)): ApiPath<(String, u64)>,
) -> Result<Response, ApiError> {
    match at(&state).ok_or_else(unavailable)? {
        At::Here(sessions) => {
            let jpeg = sessions.preview(&owner.0, &id, number).map_err(api_error)?;
            Ok(([(header::CONTENT_TYPE, "image/jpeg")], jpeg).into_response())
        }
        At::Hosts(remote) => remote
            .forward(&owner.0, &id, "GET", &format!("/previews/{number}"), None)
            .await
            .map(relay)
            .map_err(route_error),
    }
}

/// The session's replay log: every action, its outcome and its screenshot.
#[utoipa::path(get, path = "/v1/sessions/{id}/replay", operation_id = "read_session_replay", tag = "sessions",
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
    // The replay log is in the store: any server reads it, browser or not.
    let replay = sessions::replay(&state.context.store, &owner.0, &id)
        .await
        .map_err(api_error)?;
    Ok(Json(replay))
}

/// The caller's open sessions: id, profile, URL, title, last action, idle time.
#[utoipa::path(get, path = "/v1/sessions", operation_id = "list_sessions", tag = "sessions",
    responses(
        (status = 200, description = "the open sessions, oldest first", body = SessionList),
        (status = 502, description = "a session host did not answer", body = ErrorBody),
        (status = 503, description = "no browser here and no session host routing", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn list(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
) -> Result<Json<SessionList>, ApiError> {
    match at(&state).ok_or_else(unavailable)? {
        At::Here(sessions) => Ok(Json(SessionList {
            sessions: sessions.list(&owner.0),
        })),
        At::Hosts(remote) => {
            let mut listed = Vec::new();
            for answer in remote.list(&owner.0).await.map_err(route_error)? {
                if answer.status != 200 {
                    continue;
                }
                if let Ok(list) = serde_json::from_slice::<SessionList>(&answer.body) {
                    listed.extend(list.sessions);
                }
            }
            sessions::sort_by_age(&mut listed);
            Ok(Json(SessionList { sessions: listed }))
        }
    }
}

/// One open session: id, profile, URL, title, last action, idle time.
#[utoipa::path(get, path = "/v1/sessions/{id}", operation_id = "read_session", tag = "sessions",
    params(("id" = String, Path, description = "the session id")),
    responses(
        (status = 200, description = "the session", body = SessionInfo),
        (status = 404, description = "no such open session for this token", body = ErrorBody),
        (status = 502, description = "the session host did not answer", body = ErrorBody),
        (status = 503, description = "no browser here and no session host routing", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn read(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    match at(&state).ok_or_else(unavailable)? {
        At::Here(sessions) => {
            let info = sessions.info(&owner.0, &id).map_err(api_error)?;
            Ok(Json(info).into_response())
        }
        At::Hosts(remote) => remote
            .forward(&owner.0, &id, "GET", "", None)
            .await
            .map(relay)
            .map_err(route_error),
    }
}

/// Closes a session.
#[utoipa::path(delete, path = "/v1/sessions/{id}", operation_id = "close_session", tag = "sessions",
    params(("id" = String, Path, description = "the session id")),
    responses(
        (status = 204, description = "closed"),
        (status = 404, description = "no such session for this token", body = ErrorBody),
        (status = 502, description = "the session host did not answer", body = ErrorBody),
        (status = 503, description = "no browser here and no session host routing", body = ErrorBody),
    ),
    security((), ("bearer" = [])))]
pub(super) async fn close(
    State(state): State<AppState>,
    Extension(owner): Extension<Owner>,
    ApiPath(id): ApiPath<String>,
) -> Result<Response, ApiError> {
    match at(&state).ok_or_else(unavailable)? {
        At::Here(sessions) => {
            sessions.close(&owner.0, &id).await.map_err(api_error)?;
            Ok(StatusCode::NO_CONTENT.into_response())
        }
        At::Hosts(remote) => remote
            .forward(&owner.0, &id, "DELETE", "", None)
            .await
            .map(relay)
            .map_err(route_error),
    }
}

#[cfg(test)]
mod tests {
    use super::ActionRequest;

    fn read(body: &str) -> Result<ActionRequest, String> {
        serde_json::from_str(body).map_err(|error| error.to_string())
    }

    #[test]
    fn one_action_or_a_batch() {
        let one = read(r#"{"action": "goto", "url": "http://a.test/"}"#).expect("one action");
        assert!(matches!(one, ActionRequest::One(_)), "{one:?}");
        let batch = read(
            r#"{"actions": [{"action": "goto", "url": "http://a.test/"}, {"action": "back"}]}"#,
        )
        .expect("a batch");
        assert!(
            matches!(&batch, ActionRequest::Batch { actions } if actions.len() == 2),
            "{batch:?}"
        );
    }

    #[test]
    fn a_fault_is_told_as_it_is() {
        for (body, told) in [
            (
                r#"{"action": "clik", "selector": "a"}"#,
                "unknown variant `clik`",
            ),
            (
                r#"{"action": "goto", "url": "http://a.test/", "colour": 1}"#,
                "colour",
            ),
            (
                r#"{"actions": [{"action": "back"}, {"action": "clik"}]}"#,
                "actions[1].action: unknown variant `clik`",
            ),
            (
                r#"{"actions": [["goto", "http://a.test/"]]}"#,
                "actions[0]: ",
            ),
            (r#"{"actions": [], "extra": 1}"#, "unknown field `extra`"),
            (r#"["goto", "http://a.test/"]"#, "expected a JSON object"),
            (r#"{"actions": {"action": "back"}}"#, "actions: "),
        ] {
            let error = read(body).expect_err(body);
            assert!(error.contains(told), "{body}: {error}");
            assert!(
                !error.contains("did not match any variant"),
                "{body}: {error}"
            );
        }
    }
}
