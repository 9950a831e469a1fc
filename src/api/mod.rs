//! The HTTP API (axum, JSON): jobs (submit one or a batch, list, read, follow as server-sent
//! events, cancel), batches, the synchronous fetch, stored pages (read by line range, grep), crawls, archive search,
//! web search, agent sessions, health, metrics, the Firecrawl-compatible routes (`firecrawl`)
//! and the OpenAPI document generated from the handlers' types; and the web UI at `/ui`
//! (`ui`).
//!
//! Not here: running jobs (the pools run beside the API in `trawl serve`, or elsewhere), or
//! what a job does. Handlers talk to the store, the queue and the page cache only.

mod auth;
pub mod crawls;
pub mod error;
pub mod fetch;
mod firecrawl;
mod guard;
pub mod health;
mod idempotency;
pub mod jobs;
mod limits;
pub mod openapi;
pub mod pages;
pub mod search;
pub mod server;
pub mod sessions;
mod ui;
pub mod web_search;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use serde::{Deserialize, Serialize};

use crate::deps::Deps;
use crate::queue::Queue;
use crate::secret::Secret;
use crate::tenant::{Scope, Tenant};

pub use ui::DataDir;

/// API settings. Every field is a `trawl.toml` key under `[api]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Address `trawl serve` listens on.
    pub bind: String,
    /// Bearer tokens accepted, each a string (a tenant of its own: the first bare token is
    /// the `default` tenant, every other one the tenant `token-<fingerprint>`) or a table
    /// `{ token = "...", tenant = "acme" }` (tokens may share a tenant); with none (and no
    /// admin token), the server only binds a loopback address and everything is the
    /// `default` tenant.
    pub tokens: Vec<TokenEntry>,
    /// A token that sees every tenant's objects (creating in the `default` tenant).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_token: Option<Secret>,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Most jobs in one `POST /v1/jobs`.
    pub max_batch: usize,
    /// Longest a `POST /v1/fetch` waits for its job, in seconds (a request may ask for less).
    pub sync_timeout_secs: u64,
    /// Most characters of lines a grep returns.
    pub grep_max_output_chars: usize,
    /// Most characters of lines one read of a stored page returns (`GET /v1/pages`, `trawl
    /// read`); the answer names the next range.
    pub read_max_chars: usize,
    /// Host names the API answers to (the `Host` header, and the `Origin` of requests that
    /// change something); `"*"` allows any. Empty: the bind address and `localhost` names when
    /// bound to loopback, any name otherwise (tokens are then required).
    pub allowed_hosts: Vec<String>,
    /// Longest time a client may take to send a request's head, in seconds; the connection is
    /// closed after it.
    pub header_read_timeout_secs: u64,
    /// Most connections open at once from one client IP address; more are closed at accept.
    pub max_connections_per_client: usize,
    /// Requests a second one client (a token, or an IP address without tokens) may make on
    /// the protected routes, sustained; 0: no limit. Over it: 429 `rate_limited`.
    pub rate_limit_per_second: u32,
    /// Requests one client may make at once above the sustained rate.
    pub rate_limit_burst: u32,
    /// Requests of one client handled at once on the protected routes; 0: no limit.
    pub max_requests_in_flight: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            bind: "127.0.0.1:8787".to_owned(),
            tokens: Vec::new(),
            admin_token: None,
            max_body_bytes: 1 << 20,
            max_batch: 1_000,
            sync_timeout_secs: 60,
            grep_max_output_chars: 8_000,
            read_max_chars: 8_000,
            allowed_hosts: Vec::new(),
            header_read_timeout_secs: 10,
            max_connections_per_client: 64,
            rate_limit_per_second: 100,
            rate_limit_burst: 200,
            max_requests_in_flight: 64,
        }
    }
}

/// An `[api]` setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `bind` is not a socket address.
    #[error("api.bind = {0:?} is not an address like 127.0.0.1:8787")]
    Bind(String),
    /// A server without tokens would be reachable from other machines.
    #[error(
        "refusing to serve on {0} without api.tokens: set tokens (TRAWL_API__TOKENS='[\"...\"]') or bind a loopback address"
    )]
    PublicWithoutTokens(SocketAddr),
    /// A token is too short to be a secret.
    #[error("api.tokens and api.admin_token must be at least 16 characters each")]
    ShortToken,
    /// A tenant name is not usable.
    #[error("api.tokens: {0}")]
    Tenant(String),
    /// The same token is listed twice (its tenant would be ambiguous).
    #[error("api.tokens and api.admin_token must all differ")]
    DuplicateToken,
    /// A token is blank or holds whitespace: tokens are compared exactly, so it could never
    /// match what a client sends (or would match a blank header).
    #[error(
        "api.tokens and api.admin_token must not be blank or contain spaces, tabs or line breaks"
    )]
    BlankToken,
    /// A limit is zero (or the body limit below 1 KiB).
    #[error(
        "api.max_batch, api.max_body_bytes (>= 1024), api.sync_timeout_secs, \
         api.read_max_chars, api.header_read_timeout_secs and api.max_connections_per_client \
         must be positive"
    )]
    Limits,
    /// An `allowed_hosts` entry is not a host name.
    #[error(
        "api.allowed_hosts: {0:?} is not a host name (no scheme, port or path; \"*\" allows any)"
    )]
    AllowedHost(String),
}

impl Config {
    /// Checks the values, and that a server without tokens binds loopback only.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let address: SocketAddr = self
            .bind
            .parse()
            .map_err(|_| ConfigError::Bind(self.bind.clone()))?;
        if self.tokens.is_empty() && self.admin_token.is_none() && !address.ip().is_loopback() {
            return Err(ConfigError::PublicWithoutTokens(address));
        }
        let secrets: Vec<&str> = self
            .tokens
            .iter()
            .map(|entry| entry.secret().expose())
            .chain(self.admin_token.iter().map(Secret::expose))
            .collect();
        if secrets
            .iter()
            .any(|token| token.trim().is_empty() || token.chars().any(char::is_whitespace))
        {
            return Err(ConfigError::BlankToken);
        }
        if secrets.iter().any(|token| token.len() < 16) {
            return Err(ConfigError::ShortToken);
        }
        if secrets.len()
            != secrets
                .iter()
                .collect::<std::collections::HashSet<_>>()
                .len()
        {
            return Err(ConfigError::DuplicateToken);
        }
        for entry in &self.tokens {
            if let TokenEntry::Named { tenant, .. } = entry {
                Tenant::new(tenant).map_err(ConfigError::Tenant)?;
            }
        }
        if self.max_batch == 0
            || self.max_body_bytes < 1_024
            || self.sync_timeout_secs == 0
            || self.read_max_chars == 0
            || self.header_read_timeout_secs == 0
            || self.max_connections_per_client == 0
        {
            return Err(ConfigError::Limits);
        }
        if let Some(bad) = self
            .allowed_hosts
            .iter()
            .find(|host| *host != "*" && !guard::is_host_name(host))
        {
            return Err(ConfigError::AllowedHost(bad.clone()));
        }
        Ok(())
    }

    /// Whether the API answers to `host` (a `Host` header's or an origin's host, without its
    /// port): one of `allowed_hosts` (`"*"`: any), or when they are empty, the bind address
    /// and `localhost` names on a loopback bind, any name on another.
    pub fn allows_host(&self, host: &str) -> bool {
        let host = guard::normalize_host(host);
        if !self.allowed_hosts.is_empty() {
            return self
                .allowed_hosts
                .iter()
                .any(|allowed| allowed == "*" || guard::normalize_host(allowed) == host);
        }
        match self.bind.parse::<SocketAddr>() {
            Ok(address) if address.ip().is_loopback() => {
                let bound = match address.ip() {
                    std::net::IpAddr::V4(ip) => ip.to_string(),
                    std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                };
                host == bound || host == "localhost" || host.ends_with(".localhost")
            }
            _ => true,
        }
    }
}

/// One entry of `api.tokens`: a bare token (a tenant of its own) or a token with its tenant.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TokenEntry {
    /// `"tok"`: the first bare token is the `default` tenant, every other one the tenant
    /// `token-<fingerprint>` (so existing single-token configurations keep their data).
    Bare(Secret),
    /// `{ token = "tok", tenant = "acme" }`.
    Named {
        /// The bearer token.
        token: Secret,
        /// Its tenant's name.
        tenant: String,
    },
}

impl TokenEntry {
    /// The token.
    pub fn secret(&self) -> &Secret {
        match self {
            TokenEntry::Bare(token) | TokenEntry::Named { token, .. } => token,
        }
    }
}

impl From<Secret> for TokenEntry {
    fn from(token: Secret) -> Self {
        TokenEntry::Bare(token)
    }
}

impl Config {
    /// Every accepted token with the scope it gives: the entries of `api.tokens` in order,
    /// then the admin token. Invalid tenant names (refused by `validate`) fall back to the
    /// token's fingerprint.
    pub fn token_scopes(&self) -> Vec<(Secret, Scope)> {
        let mut first_bare = true;
        let mut scopes: Vec<(Secret, Scope)> = self
            .tokens
            .iter()
            .map(|entry| {
                let tenant = match entry {
                    TokenEntry::Named { tenant, .. } => Tenant::new(tenant).ok(),
                    TokenEntry::Bare(_) if first_bare => {
                        first_bare = false;
                        Some(Tenant::default())
                    }
                    TokenEntry::Bare(_) => None,
                };
                let tenant = tenant.unwrap_or_else(|| {
                    let fingerprint = crate::sessions::owner_of(Some(entry.secret().expose()));
                    Tenant::new(&format!("token-{fingerprint}")).expect("a valid name")
                });
                (entry.secret().clone(), Scope::of(tenant))
            })
            .collect();
        if let Some(admin) = &self.admin_token {
            scopes.push((admin.clone(), Scope::admin()));
        }
        scopes
    }
}

/// What the handlers share.
#[derive(Debug, Clone)]
pub struct AppState {
    /// The shared parts: store, queue, cache, metrics, job ends, fetch options.
    pub context: Arc<Deps>,
    /// Where jobs are pushed.
    pub queue: Queue,
    /// API settings.
    pub config: Arc<Config>,
    /// The archive searched by `/v1/search`, when this server has one.
    pub archive: Option<ArchiveSearch>,
    /// Agent sessions, when this server runs a browser.
    pub sessions: Option<Arc<crate::sessions::Sessions>>,
    /// Without a browser: the session hosts sessions are routed to, when a worker token is
    /// configured.
    pub remote_sessions: Option<Arc<crate::session_hosts::Remote>>,
}

/// The archive index `/v1/search` reads, and its default limit of hits per page.
#[derive(Debug, Clone)]
pub struct ArchiveSearch {
    /// The index (its reader follows commits, from this process or another).
    pub index: trawl_workers::archive::index::ArchiveIndex,
    /// Most hits from one page unless a request says otherwise.
    pub per_page: usize,
}

/// Builds the router: public `/healthz` and `/openapi.json`, everything else behind the
/// bearer tokens when tokens are configured and within each client's request limits
/// (`limits`); every route answers only requests naming an
/// allowed host, and refuses changes asked by a page of another origin (`guard`).
pub fn router(state: AppState) -> Router {
    router_with(state, Router::new())
}

/// [`router`] with `extra` routes among the protected ones (behind the same tokens, limits,
/// host and origin checks): the MCP transport (`mcp::transport::http_routes`).
#[allow(deprecated)] // `GET /v1/search`, archive search's former path, is still served
pub fn router_with(state: AppState, extra: Router<AppState>) -> Router {
    let protected = Router::new()
        .merge(extra)
        .route("/v1/jobs", post(jobs::submit).get(jobs::list))
        .route("/v1/batches/{id}", get(jobs::batch))
        .route("/v1/jobs/{id}", get(jobs::read).delete(jobs::cancel))
        .route("/v1/jobs/{id}/events", get(jobs::events))
        .route("/v1/fetch", post(fetch::fetch))
        .route("/v1/pages", get(pages::read))
        .route("/v1/pages/grep", post(pages::grep))
        .route("/v1/archive/search", get(search::search))
        .route("/v1/search", get(search::search_deprecated))
        .route("/v1/web/search", post(web_search::search))
        .route("/v1/web/images", post(web_search::images))
        .route("/v1/crawls", post(crawls::start))
        .route("/v1/crawls/{id}", get(crawls::read).delete(crawls::cancel))
        .route("/v1/crawls/{id}/pages", get(crawls::pages))
        .route("/v1/sessions", post(sessions::open).get(sessions::list))
        .route(
            "/v1/sessions/{id}",
            get(sessions::read).delete(sessions::close),
        )
        .route("/v1/sessions/{id}/actions", post(sessions::act))
        .route("/v1/sessions/{id}/previews/{n}", get(sessions::preview))
        .route("/v1/sessions/{id}/replay", get(sessions::replay))
        .route("/metrics", get(health::metrics))
        // Firecrawl's scrape, crawl, map and batch scrape routes (v1 and v2), at the root.
        .merge(firecrawl::routes())
        // Route layers run last-added first: the token is checked, then its limits, then
        // its idempotency keys.
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            idempotency::replay_or_record,
        ))
        .route_layer(middleware::from_fn_with_state(
            limits::Limiter::new(&state.config),
            limits::limit_requests,
        ))
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::require_token,
        ));
    Router::new()
        .merge(protected)
        .route("/healthz", get(health::healthz))
        .route("/openapi.json", get(openapi::document))
        // The web UI: its own login (a cookie), pages and assets (`ui`).
        .nest_service("/ui", ui::router(state.clone()))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            guard::check_host_and_origin,
        ))
        // Outside the guard: its refusals are rewritten too on the Firecrawl routes.
        .layer(middleware::from_fn(firecrawl::envelope_errors))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            count_requests,
        ))
        .with_state(state)
}

/// The router of a session host (`trawl work` with a browser and `sessions.listen`): the
/// session routes API processes forward to, behind the shared worker token.
pub fn session_host_router(state: AppState, worker_token: Secret) -> Router {
    Router::new()
        .route("/v1/sessions", post(sessions::open).get(sessions::list))
        .route(
            "/v1/sessions/{id}",
            get(sessions::read).delete(sessions::close),
        )
        .route("/v1/sessions/{id}/actions", post(sessions::act))
        .route("/v1/sessions/{id}/previews/{n}", get(sessions::preview))
        .route_layer(middleware::from_fn_with_state(
            Arc::new(worker_token),
            auth::require_worker_token,
        ))
        .route("/healthz", get(health::healthz))
        .fallback(error::not_found)
        .method_not_allowed_fallback(error::method_not_allowed)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .with_state(state)
}

/// Counts a URL the SSRF guard refused at submission (jobs refused later are counted by the
/// runner).
fn count_refusal(state: &AppState, error: &trawl_workers::job::JobError) {
    if error.code == trawl_workers::job::ErrorCode::BlockedDestination {
        state
            .context
            .metrics
            .ssrf_blocked(error.evidence.as_deref().unwrap_or("unknown"));
    }
}

/// Counts requests by route template and status.
async fn count_requests(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let response = next.run(request).await;
    state
        .context
        .metrics
        .api_request(&route, response.status().as_u16());
    response
}
