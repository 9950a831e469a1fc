//! API errors: every failure is `{"error": {"code", "message"}}` with a snake_case code (the
//! job error codes where a job failed, plus the API's own: `invalid_json`, `invalid_request`,
//! `unauthorized`, `not_found`, `method_not_allowed`, `payload_too_large`, `conflict`,
//! `invalid_pattern`, `internal`). Client faults are 4xx; a 500 never carries details (they are
//! logged).
//!
//! Not here: which handler fails how (each handler builds its errors).

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use trawl_workers::job::{ErrorCode, JobError};
use utoipa::ToSchema;

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
    pub code: String,
    /// A human explanation.
    pub message: String,
    /// The job concerned, when there is one (a sync fetch that timed out keeps running).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    /// The job error in full, when a job failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_error: Option<JobError>,
}

/// An error response.
#[derive(Debug, Clone)]
pub struct ApiError {
    status: StatusCode,
    detail: ErrorDetail,
}

impl ApiError {
    /// An error with a status, a code and a message.
    pub fn new(status: StatusCode, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            detail: ErrorDetail {
                code: code.to_owned(),
                message: message.into(),
                job_id: None,
                job_error: None,
            },
        }
    }

    /// 404 `not_found`.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 422 `invalid_request`.
    pub fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_request", message)
    }

    /// 500 `internal`, with the cause logged, never shown.
    pub fn internal(cause: &dyn std::fmt::Display) -> ApiError {
        tracing::error!(error = %cause, "internal error serving a request");
        ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see the server log",
        )
    }

    /// The response for a job error: bad input is 400, a refused destination 403, a
    /// cancelled job 409, a busy browser 429 (try again later), a fault of trawl 500, and any
    /// failure of the site or its content (timeouts included: the site was slow, not trawl)
    /// 422 with the code saying which.
    pub fn from_job_error(error: JobError, job_id: Option<String>) -> ApiError {
        let status = match error.code {
            ErrorCode::InvalidUrl | ErrorCode::UnsupportedScheme => StatusCode::BAD_REQUEST,
            ErrorCode::BlockedDestination => StatusCode::FORBIDDEN,
            ErrorCode::Cancelled => StatusCode::CONFLICT,
            ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorCode::BrowserBusy => StatusCode::TOO_MANY_REQUESTS,
            _ => StatusCode::UNPROCESSABLE_ENTITY,
        };
        ApiError {
            status,
            detail: ErrorDetail {
                code: error.code.as_str().to_owned(),
                message: error.message.clone(),
                job_id,
                job_error: Some(error),
            },
        }
    }

    /// Attaches the id of the job concerned.
    pub fn with_job(mut self, job_id: &str) -> ApiError {
        self.detail.job_id = Some(job_id.to_owned());
        self
    }

    /// The HTTP status.
    pub fn status(&self) -> StatusCode {
        self.status
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(ErrorBody { error: self.detail })).into_response()
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
                ApiError::new(StatusCode::BAD_REQUEST, "invalid_json", error.body_text())
            }
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "expected a body with content-type: application/json",
            ),
            JsonRejection::BytesRejection(_)
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE =>
            {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "payload_too_large",
                    "the request body is too large",
                )
            }
            _ => ApiError::new(
                StatusCode::BAD_REQUEST,
                "invalid_request",
                rejection.body_text(),
            ),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(rejection: QueryRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            rejection.body_text(),
        )
    }
}

impl From<PathRejection> for ApiError {
    fn from(rejection: PathRejection) -> Self {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "invalid_request",
            rejection.body_text(),
        )
    }
}

/// JSON bodies whose rejections are API errors.
#[derive(Debug, Clone, FromRequest)]
#[from_request(via(axum::Json), rejection(ApiError))]
pub struct ApiJson<T>(pub T);

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
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}
