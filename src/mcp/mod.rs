//! The MCP server (Model Context Protocol, the official `rmcp` SDK): trawl's capabilities as
//! tools an agent host calls (`tools`), stored pages as resources it attaches to a prompt
//! (`resources`), over stdio (`trawl mcp`) or the streamable HTTP transport at `/mcp` on
//! `trawl serve` (`transport`). Tools call the same functions the HTTP API and the CLI call
//! (`fetch_now`, `pages`, the archive index, `crawl`, `sessions`, `web_search`); a failure is
//! a tool error carrying the API's typed `code` and `message`.
//!
//! Not here: bearer tokens, allowed hosts and request limits (the API's layers wrap `/mcp`;
//! each call takes its tenant scope from the HTTP request they checked), or running jobs (the
//! pools).

mod resources;
mod tools;
pub mod transport;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};

use crate::api::AppState;
use crate::api::error::{ApiError, ApiErrorCode};
use crate::tenant::Scope;

/// What the server tells a host about itself when it connects.
const INSTRUCTIONS: &str = "trawl fetches web pages safely (SSRF-guarded), stores them, and \
archives them for search. Start with web_fetch for a URL (markdown, cached); read long pages \
with web_read by line range or web_grep for a pattern; search what was archived with \
archive_search; crawl whole sites with crawl_start and follow them with crawl_status; drive a \
real browser step by step with browser_open, browser_act, browser_snapshot, \
browser_screenshot and browser_close. Errors carry a code (e.g. blocked_destination, \
http_status, not_found) and a message.";

/// The MCP server over one application: the API's state (store, queue, cache, archive,
/// sessions) and, for stdio, the scope every call runs in.
#[derive(Debug, Clone)]
pub struct Server {
    state: AppState,
    /// `Some` on stdio (the local user: the default tenant); `None` on HTTP, where each call
    /// takes the scope the auth layer recorded on its request.
    local: Option<Scope>,
}

impl Server {
    /// A server for a local process talking over stdio: every call is the default tenant's.
    pub fn local(state: AppState) -> Server {
        Server {
            state,
            local: Some(Scope::default()),
        }
    }

    /// A server behind the HTTP API's auth layer: each call's tenant is its token's.
    pub fn behind_api(state: AppState) -> Server {
        Server { state, local: None }
    }

    /// The scope of a call: the local one, or the one the auth layer put on the HTTP request.
    fn scope(&self, context: &RequestContext<RoleServer>) -> Result<Scope, ApiError> {
        if let Some(scope) = &self.local {
            return Ok(scope.clone());
        }
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<Scope>())
            .cloned()
            .ok_or_else(|| {
                ApiError::new(
                    ApiErrorCode::Unauthorized,
                    "this MCP request did not pass the API's token check",
                )
            })
    }
}

/// Who owns the sessions a scope opens (`sessions::ANY_OWNER` for the admin).
fn owner(scope: &Scope) -> String {
    if scope.all {
        crate::sessions::ANY_OWNER.to_owned()
    } else {
        scope.tenant.as_str().to_owned()
    }
}

/// A tool error: the API's error body (`{"error": {"code", "message", ...}}`) as structured
/// content, and `code: message` as text for hosts that show text only.
fn tool_error(error: &ApiError) -> CallToolResult {
    let detail = error.detail();
    let mut result = CallToolResult::error(vec![ContentBlock::text(format!(
        "{}: {}",
        detail.code.as_str(),
        detail.message
    ))]);
    result.structured_content = Some(serde_json::json!({ "error": detail }));
    result
}

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
        let mut info = ServerConfig::new(capabilities).with_instructions(INSTRUCTIONS);
        info.server_info = rmcp::model::Implementation::new("trawl", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools::all()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        if !tools::NAMES.contains(&request.name.as_ref()) {
            return Err(McpError::invalid_params(
                format!("no tool named {:?}", request.name),
                None,
            ));
        }
        let outcome = match self.scope(&context) {
            Ok(scope) => {
                let arguments = request.arguments.unwrap_or_default();
                tools::call(self, &scope, &request.name, arguments, &context).await
            }
            Err(error) => Err(error),
        };
        Ok(match outcome {
            Ok(result) => result,
            Err(error) => tool_error(&error),
        }
        .into())
    }

    async fn list_resources(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        let scope = self.scope(&context).map_err(resource_error)?;
        let cursor = request.and_then(|request| request.cursor);
        resources::list(&self.state, &scope, cursor)
            .await
            .map_err(resource_error)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let scope = self.scope(&context).map_err(resource_error)?;
        resources::read(&self.state, &scope, &request.uri)
            .await
            .map(Into::into)
            .map_err(resource_error)
    }
}

/// A resource request that failed: a JSON-RPC error (resources have no error results) whose
/// data is the API's error detail, with its code.
fn resource_error(error: ApiError) -> McpError {
    let detail = error.detail();
    let data = serde_json::to_value(detail).ok();
    if detail.code == ApiErrorCode::NotFound {
        McpError::resource_not_found(detail.message.clone(), data)
    } else if matches!(
        detail.code,
        ApiErrorCode::BadRequest | ApiErrorCode::InvalidRequest
    ) {
        McpError::invalid_params(detail.message.clone(), data)
    } else {
        McpError::internal_error(detail.message.clone(), data)
    }
}
