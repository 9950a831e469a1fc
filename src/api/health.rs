//! `GET /healthz` (the store and the queue answer) and `GET /metrics` (Prometheus text).

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use crate::store::Status;

/// Health of the parts the API needs.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    /// `ok` or `unavailable`.
    pub status: String,
    /// Whether the store answered.
    pub store: bool,
    /// Whether the queue answered.
    pub queue: bool,
}

/// Reports whether the store and the queue answer (503 when one does not).
#[utoipa::path(get, path = "/healthz", operation_id = "healthz", tag = "health",
    responses((status = 200, body = Health), (status = 503, body = Health)))]
pub(super) async fn healthz(State(state): State<AppState>) -> (StatusCode, Json<Health>) {
    let store = state.context.store.ping().await.is_ok();
    let queue = state.queue.ping().await.is_ok();
    let healthy = store && queue;
    let health = Health {
        status: if healthy { "ok" } else { "unavailable" }.to_owned(),
        store,
        queue,
    };
    let status = if healthy {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(health))
}

/// Prometheus metrics in the text exposition format.
#[utoipa::path(get, path = "/metrics", operation_id = "metrics", tag = "health",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String)),
    security((), ("bearer" = [])))]
pub(super) async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    if let Ok(counts) = state.context.store.count_by_status(None).await {
        let queued = counts
            .iter()
            .find(|(status, _)| *status == Status::Queued)
            .map_or(0, |(_, count)| *count);
        state.context.metrics.set_queue_depth(queued);
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.context.metrics.render(),
    )
}
