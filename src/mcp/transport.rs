//! The two ways to reach the MCP server: standard input and output (`trawl mcp`, for agent
//! hosts that launch a process), and the streamable HTTP transport (`/mcp` on `trawl serve`,
//! a tower service mounted among the API's protected routes, so the bearer tokens, the
//! allowed hosts and origins, and the request limits apply to it as to any route).
//!
//! Not here: what the server does (`Server`), or the API's layers (`api::router_with`).

use std::sync::Arc;

use rmcp::ServiceExt as _;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;

use super::Server;
use crate::api::AppState;

/// The path of the HTTP transport.
pub const PATH: &str = "/mcp";

/// Serves MCP on this process's standard input and output until the host closes them, or
/// `stop` is cancelled.
pub async fn serve_stdio(state: AppState, stop: CancellationToken) -> anyhow::Result<()> {
    let running = Server::local(state)
        .serve_with_ct(rmcp::transport::stdio(), stop)
        .await?;
    running.waiting().await?;
    Ok(())
}

/// The `/mcp` route, to merge among the API's protected routes (`api::router_with`). Its
/// sessions end when `stop` is cancelled.
pub fn http_routes(state: AppState, stop: CancellationToken) -> axum::Router<AppState> {
    let config = StreamableHttpServerConfig::default()
        // The API's guard checks Host and Origin against api.allowed_hosts before this runs.
        .disable_allowed_hosts()
        .with_max_request_body_bytes(state.config.max_body_bytes)
        .with_cancellation_token(stop);
    let service = StreamableHttpService::new(
        move || Ok(Server::behind_api(state.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    axum::Router::new().route_service(PATH, service)
}
