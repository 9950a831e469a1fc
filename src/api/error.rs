//! API errors: every failure is `{"error": {"code", "message"}}` with a snake_case
//! [`ApiErrorCode`], which fixes the HTTP status: a job error code where a job failed (or the
//! API met the same failure itself), else one of the API's own. Client faults are 4xx; a 500
//! never carries details (they are logged). The README's table of codes and the OpenAPI
//! document's `ApiErrorCode` schema are both generated from the enum.
//!
//! Not here: which handler fails how (each handler builds its errors).

use std::borrow::Cow;

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use trawl_workers::job::object::Object;
use trawl_workers::job::{ErrorCode, JobError};
use utoipa::ToSchema;

/// The code of an error answer, and with it the one HTTP status it is sent with
/// ([`ApiErrorCode::status`]); what each means is [`ApiErrorCode::description`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiErrorCode {
    /// `invalid_json`.
    InvalidJson,
    /// `invalid_request`.
    InvalidRequest,
    /// `bad_request`.
    BadRequest,
    /// `unauthorized`.
    Unauthorized,
    /// `not_found`.
    NotFound,
    /// `method_not_allowed`.
    MethodNotAllowed,
    /// `conflict`.
    Conflict,
    /// `payload_too_large`.
    PayloadTooLarge,
    /// `unsupported_media_type`.
    UnsupportedMediaType,
    /// `invalid_pattern`.
    InvalidPattern,
    /// `invalid_query`.
    InvalidQuery,
    /// `webhooks_disabled`.
    WebhooksDisabled,
    /// `archive_unavailable`.
    ArchiveUnavailable,
    /// `sessions_unavailable`.
    SessionsUnavailable,
    /// `misdirected_request`.
    MisdirectedRequest,
    /// `forbidden_origin`.
    ForbiddenOrigin,
    /// `rate_limited`.
    RateLimited,
    /// `idempotency_conflict`.
    IdempotencyConflict,
    /// A job error code: a job failed, or the API met that failure itself (`internal`,
    /// `cancelled`, `browser_busy`, `browser_failed`).
    Job(ErrorCode),
}

/// The status of the job error codes not named in [`ApiErrorCode::status`]: the site or its
/// content failed (timeouts included: the site was slow, not trawl).
const JOB_FAILED: StatusCode = StatusCode::UNPROCESSABLE_ENTITY;

impl ApiErrorCode {
    /// The API's own codes, in the order the README lists them.
    pub const OWN: [ApiErrorCode; 18] = [
        ApiErrorCode::InvalidJson,
        ApiErrorCode::InvalidRequest,
        ApiErrorCode::BadRequest,
        ApiErrorCode::InvalidPattern,
        ApiErrorCode::InvalidQuery,
        ApiErrorCode::WebhooksDisabled,
        ApiErrorCode::Unauthorized,
        ApiErrorCode::ForbiddenOrigin,
        ApiErrorCode::NotFound,
        ApiErrorCode::MethodNotAllowed,
        ApiErrorCode::Conflict,
        ApiErrorCode::IdempotencyConflict,
        ApiErrorCode::PayloadTooLarge,
        ApiErrorCode::UnsupportedMediaType,
        ApiErrorCode::MisdirectedRequest,
        ApiErrorCode::RateLimited,
        ApiErrorCode::ArchiveUnavailable,
        ApiErrorCode::SessionsUnavailable,
    ];

    /// Every code the API may answer with: its own, then the job error codes.
    pub fn all() -> impl Iterator<Item = ApiErrorCode> {
        ApiErrorCode::OWN
            .into_iter()
            .chain(ErrorCode::ALL.into_iter().map(ApiErrorCode::Job))
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ApiErrorCode::InvalidJson => "invalid_json",
            ApiErrorCode::InvalidRequest => "invalid_request",
            ApiErrorCode::BadRequest => "bad_request",
            ApiErrorCode::Unauthorized => "unauthorized",
            ApiErrorCode::NotFound => "not_found",
            ApiErrorCode::MethodNotAllowed => "method_not_allowed",
            ApiErrorCode::Conflict => "conflict",
            ApiErrorCode::PayloadTooLarge => "payload_too_large",
            ApiErrorCode::UnsupportedMediaType => "unsupported_media_type",
            ApiErrorCode::InvalidPattern => "invalid_pattern",
            ApiErrorCode::InvalidQuery => "invalid_query",
            ApiErrorCode::WebhooksDisabled => "webhooks_disabled",
            ApiErrorCode::ArchiveUnavailable => "archive_unavailable",
            ApiErrorCode::SessionsUnavailable => "sessions_unavailable",
            ApiErrorCode::MisdirectedRequest => "misdirected_request",
            ApiErrorCode::ForbiddenOrigin => "forbidden_origin",
            ApiErrorCode::RateLimited => "rate_limited",
            ApiErrorCode::IdempotencyConflict => "idempotency_conflict",
            ApiErrorCode::Job(code) => code.as_str(),
        }
    }

    /// The HTTP status answered with this code. For a job error: bad input is 400, a refused
    /// destination 403, a cancelled job 409, a busy browser 429 (try again later), a fault of
    /// trawl 500, a failed browser or fallback provider 502, and any failure of the site or its content 422 with
    /// the code saying which.
    pub fn status(self) -> StatusCode {
        match self {
            ApiErrorCode::InvalidJson
            | ApiErrorCode::BadRequest
            | ApiErrorCode::InvalidPattern
            | ApiErrorCode::InvalidQuery
            | ApiErrorCode::WebhooksDisabled => StatusCode::BAD_REQUEST,
            ApiErrorCode::InvalidRequest => StatusCode::UNPROCESSABLE_ENTITY,
            ApiErrorCode::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiErrorCode::NotFound => StatusCode::NOT_FOUND,
            ApiErrorCode::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            ApiErrorCode::Conflict => StatusCode::CONFLICT,
            ApiErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            ApiErrorCode::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiErrorCode::MisdirectedRequest => StatusCode::MISDIRECTED_REQUEST,
            ApiErrorCode::ForbiddenOrigin => StatusCode::FORBIDDEN,
            ApiErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            ApiErrorCode::IdempotencyConflict => StatusCode::CONFLICT,
            ApiErrorCode::ArchiveUnavailable | ApiErrorCode::SessionsUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            ApiErrorCode::Job(code) => match code {
                ErrorCode::InvalidUrl
                | ErrorCode::UnsupportedScheme
                | ErrorCode::SearchEngineForbidden
                | ErrorCode::SearchUnconfigured => StatusCode::BAD_REQUEST,
                ErrorCode::BlockedDestination => StatusCode::FORBIDDEN,
                ErrorCode::Cancelled => StatusCode::CONFLICT,
                ErrorCode::BrowserBusy | ErrorCode::SearchRateLimited => {
                    StatusCode::TOO_MANY_REQUESTS
                }
                ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
                ErrorCode::BrowserFailed | ErrorCode::ProviderFailed => StatusCode::BAD_GATEWAY,
                _ => JOB_FAILED,
            },
        }
    }

    /// What the code means, as the README's table says it (the job error codes are described
    /// in the README's job error table instead).
    pub fn description(self) -> &'static str {
        match self {
            ApiErrorCode::InvalidJson => "the body is not JSON",
            ApiErrorCode::InvalidRequest => {
                "the JSON does not fit the request (a field missing, unknown, of the wrong \
                 type or out of bounds), a job's options are refused, or a header it needs is \
                 missing"
            }
            ApiErrorCode::BadRequest => {
                "a query or path parameter is missing or refused, a crawl's seeds or options \
                 are refused, or the body could not be read"
            }
            ApiErrorCode::Unauthorized => "the bearer token is missing or matches none",
            ApiErrorCode::NotFound => {
                "no such route, or no such job, crawl, page or session (for this token's tenant)"
            }
            ApiErrorCode::MethodNotAllowed => "the route does not take this method",
            ApiErrorCode::Conflict => {
                "the job or crawl had already ended, or the session id chosen is taken"
            }
            ApiErrorCode::PayloadTooLarge => "the body is over `api.max_body_bytes`",
            ApiErrorCode::UnsupportedMediaType => "the body is not `application/json`",
            ApiErrorCode::InvalidPattern => {
                "a grep pattern does not parse, or is too large or too costly"
            }
            ApiErrorCode::InvalidQuery => "a search query does not parse",
            ApiErrorCode::WebhooksDisabled => {
                "a webhook was named, and webhooks need `webhooks.secret`"
            }
            ApiErrorCode::ArchiveUnavailable => "this server has no archive index to search",
            ApiErrorCode::SessionsUnavailable => {
                "this server runs no browser and has no session host to route sessions to"
            }
            ApiErrorCode::MisdirectedRequest => {
                "the `Host` header names a host this server does not answer to (see \
                 `api.allowed_hosts`): a web page may have rebound its name to this server"
            }
            ApiErrorCode::ForbiddenOrigin => {
                "a request that changes something came from a web page whose origin is not an \
                 allowed host"
            }
            ApiErrorCode::RateLimited => {
                "this token (or address, without tokens) is over `api.rate_limit_per_second` \
                 or `api.max_requests_in_flight`; `Retry-After` says when to try again"
            }
            ApiErrorCode::IdempotencyConflict => {
                "the `Idempotency-Key` was used in the last 24 h for another request (another \
                 body), or its first request is still being handled"
            }
            ApiErrorCode::Job(_) => "a job error code (see Error codes)",
        }
    }
}

impl std::fmt::Display for ApiErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for ApiErrorCode {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl utoipa::PartialSchema for ApiErrorCode {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
        ObjectBuilder::new()
            .schema_type(SchemaType::Type(Type::String))
            .description(Some(
                "A snake_case code: one of the API's own, or a job error code.",
            ))
            .enum_values(Some(ApiErrorCode::all().map(ApiErrorCode::as_str)))
            .into()
    }
}

impl ToSchema for ApiErrorCode {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ApiErrorCode")
    }
}

/// The body of every error response.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorBody {
    /// The error.
    pub error: ErrorDetail,
}

/// What went wrong.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// A snake_case code: a job error code, or one of the API's own.
    pub code: ApiErrorCode,
    /// A human explanation.
    pub message: String,
    /// The job concerned, when there is one (a sync fetch that timed out keeps running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The job error in full, when a job failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_error: Option<JobError>,
}

/// An error response: its status is its code's.
#[derive(Debug, Clone)]
pub struct ApiError {
    // Boxed: handlers return `Result<_, ApiError>`, and the detail (with a job error) is large.
    detail: Box<ErrorDetail>,
}

impl ApiError {
    /// An error with a code (which fixes the status) and a message.
    pub fn new(code: ApiErrorCode, message: impl Into<String>) -> ApiError {
        ApiError {
            detail: Box::new(ErrorDetail {
                code,
                message: message.into(),
                job_id: None,
                job_error: None,
            }),
        }
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(ApiErrorCode::NotFound, message)
    }

    /// 422 `invalid_request`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(ApiErrorCode::InvalidRequest, message)
    }

    /// 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(ApiErrorCode::BadRequest, message)
    }

    /// 500 `internal`, with the cause logged, never shown.
    pub fn internal(cause: &dyn std::fmt::Display) -> ApiError {
        tracing::error!(error = %cause, "internal error serving a request");
        ApiError::new(
            ApiErrorCode::Job(ErrorCode::Internal),
            "internal error; see the server log",
        )
    }

    /// The response for a job error: its code, its status ([`ApiErrorCode::status`]) and
    /// the error in full.
    pub fn from_job_error(error: JobError, job_id: Option<String>) -> ApiError {
        ApiError {
            detail: Box::new(ErrorDetail {
                code: ApiErrorCode::Job(error.code),
                message: error.message.clone(),
                job_id,
                job_error: Some(error),
            }),
        }
    }

    /// Attaches the id of the job concerned.
    pub fn with_job(mut self, job_id: &str) -> ApiError {
        self.detail.job_id = Some(job_id.to_owned());
        self
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.detail.message
    }

    /// The code.
    pub fn code(&self) -> ApiErrorCode {
        self.detail.code
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.detail.code.status()
    }

    /// The code, message and job of the error, as its response body shows them.
    pub fn detail(&self) -> &ErrorDetail {
        &self.detail
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (
            self.status(),
            Json(ErrorBody {
                error: *self.detail,
            }),
        )
            .into_response()
    }
}

impl From<crate::store::Error> for ApiError {
    fn from(error: crate::store::Error) -> Self {
        ApiError::internal(&error)
    }
}

impl From<JsonRejection> for ApiError {
    fn from(rejection: JsonRejection) -> Self {
        match &rejection {
            JsonRejection::JsonDataError(error) => ApiError::invalid(error.body_text()),
            JsonRejection::JsonSyntaxError(error) => {
                ApiError::new(ApiErrorCode::InvalidJson, error.body_text())
            }
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                ApiErrorCode::UnsupportedMediaType,
                "expected a body with content-type: application/json",
            ),
            JsonRejection::BytesRejection(_)
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                ApiError::new(
                    ApiErrorCode::PayloadTooLarge,
                    "the request body is too large",
                )
            }
            _ => ApiError::bad_request(rejection.body_text()),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::bad_request(rejection.body_text())
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::bad_request(rejection.body_text())
    }
}

/// JSON bodies whose rejections are API errors. The body must be a JSON object (every
/// request body of the API is one): serde's derive would also read an array as the fields in
/// order.
#[derive(Debug, Clone)]
pub struct ApiJson<T>(pub T);

impl<T, S> FromRequest<S> for ApiJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(request: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let Json(Object(value)) = Json::<Object<T>>::from_request(request, state).await?;
        Ok(ApiJson(value))
    }
}

/// A JSON value's fault, read through `serde_path_to_error`, with the path of the field it is
/// at (`jobs[1].format: unknown variant ...`), as axum's extractor tells the faults of the
/// bodies [`ApiJson`] reads; a fault of the value itself (path `.`) without one. For bodies
/// read in steps (a job's kind first, a batch or an action by its keys).
pub fn at_path(error: serde_path_to_error::Error<serde_json::Error>) -> String {
    match error.path().to_string() {
        path if path == "." => error.into_inner().to_string(),
        path => format!("{path}: {}", error.into_inner()),
    }
}

/// Query strings whose rejections are API errors.
#[derive(Debug, Clone, FromRequestParts)]
#[from_request(via(axum::extract::Query), rejection(ApiError))]
pub struct ApiQuery<T>(pub T);

/// Path parameters whose rejections are API errors.
#[derive(Debug, Clone, FromRequestParts)]
#[from_request(via(axum::extract::Path), rejection(ApiError))]
pub struct ApiPath<T>(pub T);

/// The answer for routes that do not exist.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

/// The answer for a method a route does not take.
pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        ApiErrorCode::MethodNotAllowed,
        "this route does not take that method",
    )
}

/// The README's tables of the codes the API answers with and their statuses, rendered from
/// [`ApiErrorCode`] (a test checks README.md holds them exactly).
pub fn readme_tables() -> String {
    let mut out = String::from("| code | status | meaning |\n|---|---|---|\n");
    for code in ApiErrorCode::OWN {
        out.push_str(&format!(
            "| `{code}` | {} | {} |\n",
            code.status().as_u16(),
            code.description()
        ));
    }
    out.push_str(
        "\nA failed job answers with its own code (see [Error codes](#error-codes)), which the \
         API also uses for its own faults (`internal`) and busy or failed browsers:\n\n\
         | job error code | status |\n|---|---|\n",
    );
    let mut by_status: Vec<(StatusCode, Vec<String>)> = Vec::new();
    for code in ErrorCode::ALL {
        let status = ApiErrorCode::Job(code).status();
        if status == JOB_FAILED {
            continue;
        }
        match by_status.iter_mut().find(|(seen, _)| *seen == status) {
            Some((_, codes)) => codes.push(format!("`{code}`")),
            None => by_status.push((status, vec![format!("`{code}`")])),
        }
    }
    by_status.sort_by_key(|(status, _)| *status);
    for (status, codes) in by_status {
        out.push_str(&format!("| {} | {} |\n", codes.join(", "), status.as_u16()));
    }
    out.push_str(&format!(
        "| any other: the site or its content failed | {} |\n",
        JOB_FAILED.as_u16()
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_api_codes_are_distinct_from_the_job_codes() {
        let mut seen = std::collections::HashSet::new();
        for code in ApiErrorCode::all() {
            assert!(seen.insert(code.as_str()), "{code} twice");
            let json = serde_json::to_string(&code).expect("serialises");
            assert_eq!(json, format!("\"{code}\""));
        }
    }

    #[test]
    fn client_faults_are_4xx_and_only_internal_is_500() {
        for code in ApiErrorCode::all() {
            let status = code.status();
            assert!(
                status.is_client_error() || status.is_server_error(),
                "{code}"
            );
            assert_eq!(
                status == StatusCode::INTERNAL_SERVER_ERROR,
                code == ApiErrorCode::Job(ErrorCode::Internal),
                "{code}"
            );
        }
    }

    #[test]
    fn the_openapi_document_lists_every_code() {
        use utoipa::OpenApi as _;
        let document = serde_json::to_value(super::super::openapi::ApiDoc::openapi())
            .expect("the document serialises");
        let listed = &document["components"]["schemas"]["ApiErrorCode"]["enum"];
        let codes: Vec<&str> = ApiErrorCode::all().map(ApiErrorCode::as_str).collect();
        assert_eq!(listed, &serde_json::json!(codes), "{listed}");
        let detail = &document["components"]["schemas"]["ErrorDetail"]["properties"]["code"];
        assert_eq!(
            detail["$ref"], "#/components/schemas/ApiErrorCode",
            "{detail}"
        );
    }

    #[test]
    fn the_readme_lists_every_code_with_its_status() {
        let readme = include_str!("../../README.md");
        let tables = readme_tables();
        assert!(
            readme.contains(&tables),
            "README.md's API error tables differ from ApiErrorCode; they should read:\n\n{tables}"
        );
    }
}
