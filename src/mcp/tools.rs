//! The MCP tools: their definitions (name, a description written for a language model, the
//! JSON Schema of the arguments; schemas of trawl's own types, such as browser actions and crawl
//! specs, come from the OpenAPI document, so they cannot drift) and what each call does.
//!
//! Each tool calls what the HTTP API's handler calls (`fetch_now`, `pages`, the archive index,
//! `crawl`, the store, `sessions` or the session hosts, `web_search`) and fails as the API would, with its
//! typed code. Long calls (`web_fetch`, `crawl_start` with `wait`) send progress
//! notifications when the host gave a progress token, and cancelling the call cancels the
//! job or the crawl.
//!
//! Not here: tenants and auth (the caller's scope is given), the wire protocol (rmcp).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolResult, ContentBlock, JsonObject, ProgressNotificationParam, Tool, ToolAnnotations,
};
use rmcp::service::RequestContext;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trawl_workers::archive::index::{self, MAX_K, SearchQuery};
use trawl_workers::browse::{Action, Credentials, Profile};
use trawl_workers::job::{CrawlSpec, ErrorCode, FetchJob, Format, Render};

use super::Server;
use crate::api::error::{ApiError, ApiErrorCode};
use crate::api::{AppState, sessions as api_sessions};
use crate::fetch_now::{self, Ended, StartError, Started};
use crate::pages::{self, GrepError, GrepLimits, GrepQuery};
use crate::sessions::{SessionInfo, Step};
use crate::store::CrawlStatus;
use crate::tenant::Scope;

/// Every tool's name, in the order `tools/list` gives them.
pub(super) const NAMES: [&str; 16] = [
    "web_fetch",
    "web_read",
    "web_grep",
    "archive_search",
    "crawl_start",
    "crawl_status",
    "crawl_cancel",
    "job_status",
    "browser_open",
    "browser_act",
    "browser_snapshot",
    "browser_screenshot",
    "browser_close",
    "page_list",
    "web_search",
    "web_images",
];

/// The definitions of the web search tools (`web_search`, `web_images`); their arguments are
/// the API's requests (`POST /v1/web/search`, `POST /v1/web/images`).
fn web_search_tools() -> Vec<Tool> {
    vec![
        read_only(tool(
            "web_search",
            "Search the live web and return ranked results (title, URL, snippet, engines, \
             published date), deduplicated, with the provider's direct answers, infoboxes and \
             suggestions. Use it to find pages to read, then web_fetch the best URLs. provider: \
             auto (the default: the operator's SearxNG when configured, else DuckDuckGo, \
             falling over when one fails), searxng, duckduckgo, or instant (DuckDuckGo's \
             instant answer: abstract, answer, definition). Answers are cached for 10 minutes \
             (cached: true). Errors: search_blocked (the provider's anti-bot page), \
             search_rate_limited (retry later), search_engine_forbidden, search_unconfigured.",
            definition("WebSearchRequest"),
        )),
        read_only(tool(
            "web_images",
            "Search images on the web (DuckDuckGo) and return each image's URL, thumbnail, \
             source page, title, width and height. Use it when an answer needs a picture or \
             the page a picture comes from; fetch the source page with web_fetch to read about \
             it. Cached for 10 minutes like web_search.",
            definition("ImagesJob"),
        )),
    ]
}

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(JsonObject::new()),
    }
}

/// The OpenAPI document's component schemas, as JSON Schema definitions (`#/$defs/Name`).
fn definitions() -> &'static serde_json::Map<String, Value> {
    static DEFS: OnceLock<serde_json::Map<String, Value>> = OnceLock::new();
    DEFS.get_or_init(|| {
        use utoipa::OpenApi as _;
        let document = serde_json::to_string(&crate::api::openapi::ApiDoc::openapi())
            .unwrap_or_default()
            .replace("#/components/schemas/", "#/$defs/");
        let document: Value = serde_json::from_str(&document).unwrap_or_default();
        document["components"]["schemas"]
            .as_object()
            .cloned()
            .unwrap_or_default()
    })
}

/// `schema` with a `$defs` holding every definition it refers to, directly or not.
fn with_definitions(mut schema: Value) -> Value {
    fn refs(value: &Value, found: &mut Vec<String>) {
        match value {
            Value::Object(map) => {
                for (key, item) in map {
                    if key == "$ref"
                        && let Some(name) = item.as_str().and_then(|r| r.strip_prefix("#/$defs/"))
                    {
                        found.push(name.to_owned());
                    } else {
                        refs(item, found);
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| refs(item, found)),
            _ => {}
        }
    }
    let all = definitions();
    let mut pending = Vec::new();
    refs(&schema, &mut pending);
    let mut defs = serde_json::Map::new();
    while let Some(name) = pending.pop() {
        if defs.contains_key(&name) {
            continue;
        }
        if let Some(definition) = all.get(&name) {
            refs(definition, &mut pending);
            defs.insert(name, definition.clone());
        }
    }
    if !defs.is_empty() {
        schema["$defs"] = Value::Object(defs);
    }
    schema
}

fn definition(name: &str) -> Value {
    definitions()
        .get(name)
        .cloned()
        .unwrap_or_else(|| json!({}))
}

fn tool(name: &'static str, description: &'static str, input: Value) -> Tool {
    Tool::new(name, description, schema(with_definitions(input)))
}

fn read_only(tool: Tool) -> Tool {
    let annotations = ToolAnnotations::new().read_only(true).destructive(false);
    tool.with_annotations(annotations)
}

const SESSION_ID: &str = "The session id browser_open returned.";

/// Every tool's definition.
pub(super) fn all() -> Vec<Tool> {
    let mut crawl = definition("CrawlSpec");
    if let Some(properties) = crawl["properties"].as_object_mut() {
        properties.insert(
            "wait".to_owned(),
            json!({"type": "boolean", "default": false,
                "description": "Wait for the crawl to end (progress is reported as pages are fetched; cancelling the call cancels the crawl) instead of returning at once."}),
        );
        properties.insert(
            "timeout_secs".to_owned(),
            json!({"type": "integer", "minimum": 1, "maximum": 3600, "default": 300,
                "description": "With wait: the longest wait; the crawl goes on after it."}),
        );
    }
    let mut tools = vec![
        tool(
            "web_fetch",
            "Fetch a web page and return its main content as markdown (or text), with its title, \
             final URL and page_id. Use it to read any http(s) URL. Served from trawl's cache \
             when a fresh copy is stored (cached: true), else fetched now through the SSRF guard \
             (private and internal addresses are refused: blocked_destination). Pages built by \
             JavaScript are rendered in a browser when needed (render: auto). The text is cut at \
             max_chars; the whole page is stored, so read the rest with web_read or search it \
             with web_grep. archive: true also adds the page to the search archive \
             (archive_search). A fetch still running after timeout_secs returns its job_id: \
             follow it with job_status.",
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "format": "uri", "description": "The http or https URL."},
                    "format": {"type": "string", "enum": ["markdown", "text", "html"], "default": "markdown",
                        "description": "The form of the returned text."},
                    "max_chars": {"type": "integer", "minimum": 1,
                        "description": "Most characters of text returned (default from the server's configuration)."},
                    "render": {"description": "Render in headless Chromium: \"auto\" (default: only when the page looks built by JavaScript), true (always) or false (never).",
                        "oneOf": [{"type": "boolean"}, {"type": "string", "enum": ["auto"]}], "default": "auto"},
                    "archive": {"type": "boolean", "default": false,
                        "description": "Also add the page to the RAG archive searched by archive_search."},
                    "cache_ttl": {"type": "integer", "minimum": 0, "maximum": 315_360_000,
                        "description": "Seconds a stored copy may be served instead of fetching; 0 always fetches."},
                    "timeout_secs": {"type": "integer", "minimum": 1, "maximum": 3600,
                        "description": "Seconds to wait for the fetch (capped by the server's api.sync_timeout_secs)."},
                    "headers": {"type": "object", "additionalProperties": {"type": "string"}, "maxProperties": 32,
                        "description": "Request headers for this page (a service token, routing metadata): sent to the URL's origin only, never shown back. Names trawl sets (Host, Cookie, Content-Length, ...) are refused."}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        ),
        read_only(tool(
            "web_read",
            "Read a stored page (one web_fetch stored) by line range: at most 8,000 characters \
             of lines per answer, with total_lines and next_from, the first line of the next \
             range (null at the end). Use it to read a long page piece by piece after web_fetch \
             cut it, or to read lines web_grep pointed at. The page is the newest stored for the \
             URL; nothing is fetched (not_found if the URL was never fetched).",
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The page's URL (as requested or as finally fetched)."},
                    "from": {"type": "integer", "minimum": 1, "default": 1, "description": "First line, from 1."},
                    "to": {"type": "integer", "minimum": 1, "description": "Last line, inclusive (default: as far as 8,000 characters go)."}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
        )),
        read_only(tool(
            "web_grep",
            "Search a stored page's lines with a regular expression (Rust syntax: no \
             backreferences or look-around) and return the matching lines with their numbers \
             and context lines, overlapping blocks merged, the output capped (truncated says \
             so). Use it to find where a long page mentions something, then web_read around \
             it. The pattern must parse and not be too costly (invalid_pattern otherwise).",
            json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "The page's URL."},
                    "pattern": {"type": "string", "description": "The regular expression."},
                    "ignore_case": {"type": "boolean", "default": false},
                    "context": {"type": "integer", "minimum": 0, "maximum": 20, "default": 2,
                        "description": "Lines of context before and after each match."},
                    "max_matches": {"type": "integer", "minimum": 1, "maximum": 200, "default": 50,
                        "description": "Most matching lines reported."}
                },
                "required": ["url", "pattern"],
                "additionalProperties": false
            }),
        )),
        read_only(tool(
            "archive_search",
            "Search the archive of pages fetched with archive: true (BM25 over titles, headings \
             and text) and return the best passages, each with its URL, title, heading path, \
             text, snippet, score and fetch time. Use it to find what trawl already read about \
             a subject (retrieval for an answer); it does not search the live web. Query \
             syntax: words, \"a phrase\", +required, -excluded, title:word. Filter by host and \
             fetch dates, or search the archive as it was at a date (as_of).",
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "The query."},
                    "host": {"type": "string", "description": "Only pages of this host (exact)."},
                    "after": {"type": "string", "description": "Only pages fetched at or after this date (2026-01-31) or RFC 3339 instant."},
                    "before": {"type": "string", "description": "Only pages fetched before this date or instant."},
                    "as_of": {"type": "string", "description": "The archive as it was then: each URL's version of that time."},
                    "k": {"type": "integer", "minimum": 1, "maximum": MAX_K, "default": 10, "description": "Passages wanted."},
                    "per_page": {"type": "integer", "minimum": 0,
                        "description": "Most passages from one page (default 2; 0: no limit)."}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
        )),
        tool(
            "crawl_start",
            "Crawl a site: fetch the seed URLs and follow their links within a scope (same \
             host by default), obeying robots.txt and per-host politeness, up to max_depth and \
             max_pages; sitemaps on request. Every page is stored (and archived with archive: \
             true). Returns the crawl id at once: follow it with crawl_status, read its pages \
             with web_read, cancel it with crawl_cancel. With wait: true the call waits for the \
             end, reporting progress; cancelling the call cancels the crawl.",
            crawl,
        ),
        read_only(tool(
            "crawl_status",
            "A crawl's state (running, completed, cancelled), its spec and its counters \
             (discovered, queued, fetched, cached, failed, skipped by scope, robots.txt, depth, \
             limit or as duplicates).",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "The crawl id crawl_start returned."}},
                "required": ["id"],
                "additionalProperties": false
            }),
        )),
        tool(
            "crawl_cancel",
            "Cancel a running crawl: nothing more is queued, queued pages are cancelled, pages \
             already stored stay. conflict if it had already ended.",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "The crawl id."}},
                "required": ["id"],
                "additionalProperties": false
            }),
        ),
        read_only(tool(
            "job_status",
            "A job's state (queued, running, succeeded, failed, dead, cancelled), its attempts \
             and its result or typed error. Use it to come back to a web_fetch that outlasted \
             its wait (it returned a job_id).",
            json!({
                "type": "object",
                "properties": {"id": {"type": "string", "description": "The job id."}},
                "required": ["id"],
                "additionalProperties": false
            }),
        )),
        tool(
            "browser_open",
            "Open a browser session: a real headless Chromium tab of your own, kept between \
             calls, for pages that need clicking, typing or logging in. Returns the session id \
             for browser_act, browser_snapshot, browser_screenshot and browser_close. Close it \
             when done: sessions are limited (browser_busy when none is free) and closed after \
             an idle timeout. Every request the browser makes goes through the SSRF guard.",
            json!({
                "type": "object",
                "properties": {
                    "profile": {"$ref": "#/$defs/Profile", "description": "The device the browser pretends to be (desktop by default)."},
                    "credentials": {"$ref": "#/$defs/Credentials", "description": "Cookies, headers and localStorage to browse with (secrets: never logged or shown)."}
                },
                "additionalProperties": false
            }),
        ),
        tool(
            "browser_act",
            "Run one action, or a list in order until one fails, in a browser session: goto \
             {url}, back, forward, reload, click {index | selector | x, y}, type {index | \
             selector, text, submit}, press {key}, hover, select, scroll {direction}, wait \
             {selector | text | idle | ms}, snapshot (numbered actionable elements: use their \
             index in click and type), a11y, read (the page as markdown), read_html, find \
             {text}, get_attribute, screenshot {grid, full_page}, highlight, tab_new, \
             tab_switch, tab_close, reset. Each action is an object with an \"action\" field, \
             e.g. {\"action\": \"click\", \"index\": 3}. Returns each step's outcome (ok, \
             output, error with its code, url, title); screenshots come back as images.",
            json!({
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "description": SESSION_ID},
                    "actions": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/Action"},
                        "description": "The actions, run in order until one fails."},
                    "action": {"$ref": "#/$defs/Action", "description": "One action (instead of actions)."}
                },
                "required": ["session_id"],
                "additionalProperties": false
            }),
        ),
        read_only(tool(
            "browser_snapshot",
            "List the numbered actionable, visible elements of the session's page (links, \
             buttons, fields, with names from their labels; password values never shown). Use \
             the numbers as index in browser_act's click, type and select; they stay valid \
             until the page changes.",
            json!({
                "type": "object",
                "properties": {"session_id": {"type": "string", "description": SESSION_ID}},
                "required": ["session_id"],
                "additionalProperties": false
            }),
        )),
        read_only(tool(
            "browser_screenshot",
            "A PNG screenshot of the session's page, returned as an image. grid: true draws a \
             100 px coordinate grid over it (for click {x, y}); full_page: true takes the whole \
             page, not just the viewport.",
            json!({
                "type": "object",
                "properties": {
                    "session_id": {"type": "string", "description": SESSION_ID},
                    "grid": {"type": "boolean", "default": false},
                    "full_page": {"type": "boolean", "default": false}
                },
                "required": ["session_id"],
                "additionalProperties": false
            }),
        )),
        tool(
            "browser_close",
            "Close a browser session and free its browser context.",
            json!({
                "type": "object",
                "properties": {"session_id": {"type": "string", "description": SESSION_ID}},
                "required": ["session_id"],
                "additionalProperties": false
            }),
        ),
        read_only(tool(
            "page_list",
            "List the pages trawl has stored (each fetch of a URL is one), oldest first, 100 an \
             answer: page_id, URL, title, fetch time, lines. Each is also the resource \
             trawl://pages/{page_id}. Pass next_cursor as cursor for the next answer.",
            json!({
                "type": "object",
                "properties": {
                    "host": {"type": "string", "description": "Only pages of this host (host or host:port)."},
                    "crawl_id": {"type": "string", "description": "Only the pages of this crawl."},
                    "cursor": {"type": "string", "description": "The next_cursor of the previous answer."}
                },
                "additionalProperties": false
            }),
        )),
    ];
    tools.extend(web_search_tools());
    tools
}

/// The arguments of a call as `T`: an `invalid_request` error naming the fault otherwise.
fn arguments<T: DeserializeOwned>(arguments: JsonObject) -> Result<T, ApiError> {
    serde_json::from_value(Value::Object(arguments))
        .map_err(|error| ApiError::invalid(format!("arguments: {error}")))
}

/// A result: `text` for the model to read, `structured` for programs.
fn answer(text: String, structured: Value) -> CallToolResult {
    let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
    result.structured_content = Some(structured);
    result
}

fn to_value(value: &impl serde::Serialize) -> Value {
    serde_json::to_value(value).unwrap_or(Value::Null)
}

/// Runs a tool.
pub(super) async fn call(
    server: &Server,
    scope: &Scope,
    name: &str,
    args: JsonObject,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ApiError> {
    let state = &server.state;
    match name {
        "web_fetch" => web_fetch(state, scope, arguments(args)?, context).await,
        "web_read" => web_read(state, scope, arguments(args)?).await,
        "web_grep" => web_grep(state, scope, arguments(args)?).await,
        "archive_search" => archive_search(state, scope, arguments(args)?).await,
        "crawl_start" => crawl_start(state, scope, args, context).await,
        "crawl_status" => {
            let Id { id } = arguments(args)?;
            let record = state
                .context
                .store
                .crawl_in(scope, &id)
                .await?
                .ok_or_else(|| ApiError::not_found(format!("no crawl {id}")))?;
            Ok(crawl_answer(&record, ""))
        }
        "crawl_cancel" => {
            let Id { id } = arguments(args)?;
            let record = cancel_crawl(state, scope, &id).await?;
            Ok(crawl_answer(&record, ""))
        }
        "job_status" => {
            let Id { id } = arguments(args)?;
            let record = state
                .context
                .store
                .job_in(scope, &id)
                .await?
                .ok_or_else(|| ApiError::not_found(format!("no job {id}")))?;
            let mut text = format!(
                "job {} ({}): {}",
                record.id,
                record.url,
                record.status.as_str()
            );
            if let Some(error) = &record.error {
                text.push_str(&format!("; {}: {}", error.code.as_str(), error.message));
            }
            Ok(answer(text, to_value(&record)))
        }
        "browser_open" => browser_open(state, scope, arguments(args)?).await,
        "browser_act" => {
            let request: Act = arguments(args)?;
            let actions = match (request.actions, request.action) {
                (Some(actions), None) if !actions.is_empty() => actions,
                (None, Some(action)) => vec![action],
                _ => {
                    return Err(ApiError::invalid(
                        "give either actions (a non-empty list) or action (one)",
                    ));
                }
            };
            let steps = act(state, scope, &request.session_id, &actions).await?;
            Ok(steps_answer(steps))
        }
        "browser_snapshot" => {
            let SessionId { session_id } = arguments(args)?;
            let steps = act(state, scope, &session_id, &[Action::Snapshot]).await?;
            Ok(steps_answer(steps))
        }
        "browser_screenshot" => {
            let request: Screenshot = arguments(args)?;
            let action = Action::Screenshot {
                grid: request.grid,
                grid_step: None,
                full_page: request.full_page,
            };
            let steps = act(state, scope, &request.session_id, &[action]).await?;
            Ok(steps_answer(steps))
        }
        "browser_close" => {
            let SessionId { session_id } = arguments(args)?;
            close(state, scope, &session_id).await?;
            Ok(answer(
                format!("session {session_id} closed"),
                json!({ "id": session_id, "closed": true }),
            ))
        }
        "page_list" => page_list(state, scope, arguments(args)?).await,
        "web_search" => {
            let request: crate::api::web_search::WebSearchRequest = arguments(args)?;
            let result = crate::web_search::search(&state.context, scope, request.into())
                .await
                .map_err(crate::api::web_search::search_error)?;
            Ok(answer(search_text(&result), to_value(&result)))
        }
        "web_images" => {
            let request: trawl_workers::job::ImagesJob = arguments(args)?;
            let result = crate::web_search::images(&state.context, scope, request)
                .await
                .map_err(crate::api::web_search::search_error)?;
            Ok(answer(images_text(&result), to_value(&result)))
        }
        other => Err(ApiError::not_found(format!("no tool {other}"))),
    }
}

/// A search result as the model reads it: the provider, the direct answers, then the hits,
/// numbered, each with its URL and snippet.
fn search_text(result: &trawl_workers::job::SearchResult) -> String {
    let mut text = format!(
        "{} results from {}{}",
        result.hits.len(),
        result.provider.as_str(),
        if result.cached { " (cached)" } else { "" }
    );
    for failure in &result.failed_over {
        text.push_str(&format!("; {} failed first", failure.provider.as_str()));
    }
    text.push('\n');
    if let Some(instant) = &result.instant {
        for part in [
            &instant.heading,
            &instant.answer,
            &instant.abstract_text,
            &instant.definition,
        ]
        .into_iter()
        .flatten()
        {
            text.push_str(&format!("\n{part}"));
        }
        if let Some(url) = &instant.abstract_url {
            text.push_str(&format!("\nsource: {url}"));
        }
        text.push('\n');
    }
    for answer in &result.answers {
        text.push_str(&format!("\nanswer: {answer}\n"));
    }
    for infobox in &result.infoboxes {
        text.push_str(&format!("\n{}: {}\n", infobox.title, infobox.content));
    }
    for hit in &result.hits {
        text.push_str(&format!("\n{}. {}\n   {}\n", hit.rank, hit.title, hit.url));
        if !hit.snippet.is_empty() {
            text.push_str(&format!("   {}\n", hit.snippet));
        }
    }
    if !result.suggestions.is_empty() {
        text.push_str(&format!(
            "\nsuggestions: {}\n",
            result.suggestions.join("; ")
        ));
    }
    text
}

/// An image search result as the model reads it.
fn images_text(result: &trawl_workers::job::ImagesResult) -> String {
    let mut text = format!(
        "{} images{}\n",
        result.hits.len(),
        if result.cached { " (cached)" } else { "" }
    );
    for hit in &result.hits {
        text.push_str(&format!(
            "\n{}. {}\n   image: {}\n",
            hit.rank, hit.title, hit.image
        ));
        if let Some(page) = &hit.source_page {
            text.push_str(&format!("   page: {page}\n"));
        }
        if let (Some(width), Some(height)) = (hit.width, hit.height) {
            text.push_str(&format!("   {width}×{height}\n"));
        }
    }
    text
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Id {
    id: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SessionId {
    session_id: String,
}

/// Reports progress to the host, when it asked for it (a progress token on the call).
struct Progress<'a> {
    context: &'a RequestContext<RoleServer>,
    token: Option<rmcp::model::ProgressToken>,
}

impl<'a> Progress<'a> {
    fn of(context: &'a RequestContext<RoleServer>) -> Progress<'a> {
        Progress {
            context,
            token: context.meta.get_progress_token(),
        }
    }

    async fn report(&self, progress: f64, total: Option<f64>, message: String) {
        let Some(token) = &self.token else { return };
        let mut param = ProgressNotificationParam::new(token.clone(), progress);
        param.total = total;
        param.message = Some(message);
        if let Err(error) = self.context.peer.notify_progress(param).await {
            tracing::debug!(error = %error, "a progress notification was not sent");
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Fetch {
    url: String,
    #[serde(default)]
    format: Format,
    #[serde(default)]
    max_chars: Option<usize>,
    #[serde(default)]
    render: Option<Render>,
    #[serde(default)]
    archive: bool,
    #[serde(default)]
    cache_ttl: Option<u64>,
    #[serde(default)]
    timeout_secs: Option<u64>,
    #[serde(default)]
    headers: trawl_workers::job::CustomHeaders,
}

async fn web_fetch(
    state: &AppState,
    scope: &Scope,
    request: Fetch,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ApiError> {
    let job = FetchJob {
        url: request.url,
        format: request.format,
        max_chars: request.max_chars,
        cache_ttl: request.cache_ttl,
        archive: request.archive,
        render: request
            .render
            .unwrap_or(Render::Mode(trawl_workers::job::RenderMode::Auto)),
        proxy: None,
        headers: request.headers,
        fallback: None,
        credentials: Default::default(),
    };
    job.validate().map_err(ApiError::invalid)?;
    if request.timeout_secs.is_some_and(|seconds| seconds > 3_600) {
        return Err(ApiError::invalid("timeout_secs is above 3600"));
    }
    let progress = Progress::of(context);
    let mut waiter = match fetch_now::start(&state.context, &state.queue, job, &scope.tenant).await
    {
        Ok(Started::Cached(result)) => return Ok(fetch_answer(to_value(&*result))),
        Ok(Started::Queued(waiter)) => waiter,
        Err(StartError::Refused(error)) => {
            if error.code == ErrorCode::BlockedDestination {
                state
                    .context
                    .metrics
                    .ssrf_blocked(error.evidence.as_deref().unwrap_or("unknown"));
            }
            return Err(ApiError::from_job_error(error, None));
        }
        Err(StartError::Store(error)) => return Err(error.into()),
        Err(StartError::Queue(error)) => return Err(ApiError::internal(&error)),
    };
    let id = waiter.job_id().to_owned();
    progress
        .report(0.0, Some(1.0), format!("job {id} queued"))
        .await;
    let wait = Duration::from_secs(
        request
            .timeout_secs
            .unwrap_or(u64::MAX)
            .min(state.config.sync_timeout_secs),
    );
    let deadline = tokio::time::Instant::now() + wait;
    let mut last_status = None;
    loop {
        let slice = deadline
            .saturating_duration_since(tokio::time::Instant::now())
            .min(Duration::from_secs(1));
        let ended = tokio::select! {
            ended = waiter.wait(&state.context.store, slice) => ended?,
            () = context.ct.cancelled() => {
                // The host cancelled the call: so is the job.
                let _ = state.context.store.request_cancel(&id).await;
                return Err(ApiError::new(ApiErrorCode::Job(ErrorCode::Cancelled), "the call was cancelled"));
            }
        };
        match ended {
            Ended::Succeeded(result) => {
                progress
                    .report(1.0, Some(1.0), format!("job {id} done"))
                    .await;
                return Ok(fetch_answer(result));
            }
            Ended::Failed(error) => return Err(ApiError::from_job_error(error, Some(id))),
            Ended::Cancelled => {
                return Err(ApiError::new(
                    ApiErrorCode::Job(ErrorCode::Cancelled),
                    "the job was cancelled",
                )
                .with_job(&id));
            }
            Ended::Pending(status) if tokio::time::Instant::now() >= deadline => {
                let message = format!(
                    "the fetch did not end within {} s; it goes on: follow it with job_status id={id}",
                    wait.as_secs()
                );
                return Ok(answer(
                    message.clone(),
                    json!({ "job_id": id, "status": status, "message": message }),
                ));
            }
            Ended::Pending(status) => {
                if last_status != Some(status) {
                    last_status = Some(status);
                    progress
                        .report(0.5, Some(1.0), format!("job {id} {}", status.as_str()))
                        .await;
                }
            }
        }
    }
}

/// A fetch result: a header (title, final URL, status, page id, cached) and the text.
fn fetch_answer(result: Value) -> CallToolResult {
    let field = |name: &str| result[name].as_str().unwrap_or_default().to_owned();
    let content = &result["content"];
    let mut text = String::new();
    if let Some(title) = result["title"].as_str() {
        text.push_str(&format!("# {title}\n"));
    }
    text.push_str(&format!(
        "URL: {} (HTTP {}, page_id {}, cached: {})\n",
        field("final_url"),
        result["status"],
        field("page_id"),
        result["cached"].as_bool().unwrap_or(false)
    ));
    if let Some(warning) = result["warning"].as_str() {
        text.push_str(&format!("Warning: {warning}\n"));
    }
    text.push('\n');
    text.push_str(content["text"].as_str().unwrap_or_default());
    if content["truncated"].as_bool() == Some(true) {
        text.push_str(&format!(
            "\n\n[cut at {} of {} characters: the whole page is stored; read on with web_read \
             (url {}) or search it with web_grep]",
            content["length"],
            content["raw_length"],
            field("url")
        ));
    }
    answer(text, result)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Read {
    url: String,
    #[serde(default)]
    from: Option<u64>,
    #[serde(default)]
    to: Option<u64>,
}

async fn web_read(
    state: &AppState,
    scope: &Scope,
    request: Read,
) -> Result<CallToolResult, ApiError> {
    if request.from == Some(0) || request.to == Some(0) {
        return Err(ApiError::bad_request("lines are numbered from 1"));
    }
    if let (Some(from), Some(to)) = (request.from, request.to)
        && to < from
    {
        return Err(ApiError::bad_request("`to` is before `from`"));
    }
    let range = pages::read(
        &state.context.store,
        scope,
        &request.url,
        request.from.unwrap_or(1),
        request.to,
        state.config.read_max_chars,
    )
    .await?
    .ok_or_else(|| ApiError::not_found(format!("no stored page for {}", request.url)))?;
    let mut text = range.lines.join("\n");
    text.push_str(&format!(
        "\n\n[lines {}–{} of {}{}]",
        range.from,
        range.to,
        range.total_lines,
        match range.next_from {
            Some(next) => format!("; next: web_read from={next}"),
            None => "; end of page".to_owned(),
        }
    ));
    Ok(answer(text, to_value(&range)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Grep {
    url: String,
    pattern: String,
    #[serde(default)]
    ignore_case: bool,
    #[serde(default = "two")]
    context: usize,
    #[serde(default = "fifty")]
    max_matches: usize,
}

fn two() -> usize {
    2
}

fn fifty() -> usize {
    50
}

async fn web_grep(
    state: &AppState,
    scope: &Scope,
    request: Grep,
) -> Result<CallToolResult, ApiError> {
    let limits = GrepLimits {
        max_output_chars: state.config.grep_max_output_chars,
        ..GrepLimits::default()
    };
    let query = GrepQuery {
        context: request.context,
        max_matches: request.max_matches,
    };
    let found = pages::grep_page(
        &state.context.store,
        scope,
        &request.url,
        &request.pattern,
        request.ignore_case,
        query,
        limits,
    )
    .await
    .map_err(|error| match error {
        GrepError::Pattern(error) => ApiError::new(ApiErrorCode::InvalidPattern, error.to_string()),
        GrepError::NoPage(url) => ApiError::not_found(format!("no stored page for {url}")),
        GrepError::Store(error) => error.into(),
        error @ GrepError::Internal(_) => ApiError::internal(&error),
    })?;
    let mut text = String::new();
    for block in &found.result.blocks {
        if !text.is_empty() {
            text.push_str("--\n");
        }
        for line in &block.lines {
            let mark = if line.matched { ':' } else { '-' };
            text.push_str(&format!("{}{mark}{}\n", line.number, line.text));
        }
    }
    text.push_str(&format!(
        "[{} matching lines in {} lines{}]",
        found.result.matches,
        found.result.total_lines,
        if found.result.truncated {
            "; cut at a limit"
        } else {
            ""
        }
    ));
    Ok(answer(text, to_value(&found)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Search {
    query: String,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    before: Option<String>,
    #[serde(default)]
    as_of: Option<String>,
    #[serde(default)]
    k: Option<usize>,
    #[serde(default)]
    per_page: Option<usize>,
}

async fn archive_search(
    state: &AppState,
    scope: &Scope,
    request: Search,
) -> Result<CallToolResult, ApiError> {
    let Some(archive) = state.archive.clone() else {
        return Err(ApiError::new(
            ApiErrorCode::ArchiveUnavailable,
            "this server has no archive index",
        ));
    };
    let instant = |value: &Option<String>, name: &str| {
        value
            .as_deref()
            .map(crate::archive::parse_instant)
            .transpose()
            .map_err(|error| ApiError::bad_request(format!("{name}: {error}")))
    };
    let k = request.k.unwrap_or(10);
    if k == 0 || k > MAX_K {
        return Err(ApiError::bad_request(format!(
            "k must be between 1 and {MAX_K}"
        )));
    }
    let query = SearchQuery {
        text: request.query.clone(),
        host: request.host.clone(),
        after: instant(&request.after, "after")?,
        before: instant(&request.before, "before")?,
        as_of: instant(&request.as_of, "as_of")?,
        k,
        per_page: request.per_page.unwrap_or(archive.per_page),
        tenant: scope.filter().map(str::to_owned),
    };
    let hits = tokio::task::spawn_blocking(move || archive.index.search(&query))
        .await
        .map_err(|error| ApiError::internal(&error))?
        .map_err(|error| match error {
            index::Error::Query(message) => ApiError::new(ApiErrorCode::InvalidQuery, message),
            other => ApiError::internal(&other),
        })?;
    let mut text = String::new();
    for (n, hit) in hits.iter().enumerate() {
        text.push_str(&format!(
            "{}. {} — {}\n   {}\n   fetched {}, score {:.2}\n{}\n\n",
            n + 1,
            hit.title.as_deref().unwrap_or("(untitled)"),
            hit.url,
            hit.headings.join(" > "),
            hit.fetched_at,
            hit.score,
            hit.text
        ));
    }
    if hits.is_empty() {
        text.push_str("no passage matched");
    }
    Ok(answer(
        text.trim_end().to_owned(),
        json!({ "query": request.query, "hits": hits }),
    ))
}

async fn crawl_start(
    state: &AppState,
    scope: &Scope,
    mut args: JsonObject,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResult, ApiError> {
    let wait = match args.remove("wait") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(wait)) => wait,
        Some(_) => return Err(ApiError::invalid("arguments: wait must be a boolean")),
    };
    let timeout = match args.remove("timeout_secs") {
        None | Some(Value::Null) => 300,
        Some(value) => value
            .as_u64()
            .filter(|seconds| (1..=3_600).contains(seconds))
            .ok_or_else(|| ApiError::invalid("arguments: timeout_secs must be 1 to 3600"))?,
    };
    let spec: CrawlSpec = arguments(args)?;
    if let Some(refusal) = spec
        .webhook
        .as_deref()
        .and_then(|webhook| crate::api::jobs::webhook_refusal(state, webhook))
    {
        return Err(refusal);
    }
    let plan = crate::crawl::create_for(&state.context, spec, scope.tenant.clone())
        .await
        .map_err(|error| match error {
            crate::crawl::StartError::Invalid(message) => ApiError::bad_request(message),
            other => ApiError::internal(&other),
        })?;
    let id = plan.id.clone();
    // Subscribed before seeding: a crawl with nothing to fetch completes as it is seeded.
    let mut completed = state.context.completed_crawls.subscribe();
    let deps = state.context.clone();
    let queue = state.queue.clone();
    tokio::spawn(async move {
        if let Err(error) = crate::crawl::seed(&deps, &queue, &plan).await {
            tracing::error!(crawl_id = %plan.id, error = %error, "seeding a crawl failed");
        }
    });
    let store = &state.context.store;
    if !wait {
        let record = store
            .crawl(&id)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("no crawl {id}")))?;
        return Ok(crawl_answer(
            &record,
            "started; follow it with crawl_status, cancel it with crawl_cancel. ",
        ));
    }
    let progress = Progress::of(context);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout);
    let mut reported = None;
    loop {
        let record = store
            .crawl(&id)
            .await?
            .ok_or_else(|| ApiError::not_found(format!("no crawl {id}")))?;
        if record.status != CrawlStatus::Running {
            return Ok(crawl_answer(&record, ""));
        }
        let counters = &record.counters;
        let done = counters.fetched + counters.cached + counters.failed;
        if reported != Some((done, counters.queued)) {
            reported = Some((done, counters.queued));
            let total = record.spec.max_pages.min(counters.queued.max(done).max(1));
            progress
                .report(
                    done as f64,
                    Some(total as f64),
                    format!(
                        "crawl {id}: {done} of {} queued pages done",
                        counters.queued
                    ),
                )
                .await;
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(crawl_answer(
                &record,
                "still running after the wait; it goes on: follow it with crawl_status. ",
            ));
        }
        // Read again after the pause, or as soon as this process completes a crawl.
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(250)) => {}
            _ = completed.recv() => {}
            () = context.ct.cancelled() => {
                // The host cancelled the call: so is the crawl.
                let _ = cancel_crawl(state, scope, &id).await;
                return Err(ApiError::new(ApiErrorCode::Job(ErrorCode::Cancelled), format!("crawl {id} cancelled with the call")));
            }
        }
    }
}

async fn cancel_crawl(
    state: &AppState,
    scope: &Scope,
    id: &str,
) -> Result<crate::store::CrawlRecord, ApiError> {
    let store = &state.context.store;
    if store.crawl_in(scope, id).await?.is_none() {
        return Err(ApiError::not_found(format!("no crawl {id}")));
    }
    let cancelled = store.cancel_crawl(id).await?;
    let record = store
        .crawl(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no crawl {id}")))?;
    if !cancelled {
        return Err(ApiError::new(
            ApiErrorCode::Conflict,
            format!("crawl {id} had already ended ({})", record.status.as_str()),
        ));
    }
    Ok(record)
}

fn crawl_answer(record: &crate::store::CrawlRecord, note: &str) -> CallToolResult {
    let counters = &record.counters;
    let text = format!(
        "crawl {} {}: {note}{} discovered, {} queued, {} fetched, {} cached, {} failed",
        record.id,
        record.status.as_str(),
        counters.discovered,
        counters.queued,
        counters.fetched,
        counters.cached,
        counters.failed
    );
    answer(text, to_value(record))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Open {
    #[serde(default)]
    profile: Profile,
    #[serde(default)]
    credentials: Credentials,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Act {
    session_id: String,
    #[serde(default)]
    actions: Option<Vec<Action>>,
    #[serde(default)]
    action: Option<Action>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Screenshot {
    session_id: String,
    #[serde(default)]
    grid: bool,
    #[serde(default)]
    full_page: bool,
}

fn sessions_unavailable() -> ApiError {
    ApiError::new(
        ApiErrorCode::SessionsUnavailable,
        "this server runs no browser (started with --no-pools) and routes no sessions to \
         workers (set sessions.worker_token, and sessions.listen on the workers)",
    )
}

/// A session host's answer: its JSON body when it succeeded, else its error as this
/// server's.
fn relayed<T: DeserializeOwned>(answer: crate::session_hosts::Forwarded) -> Result<T, ApiError> {
    if (200..300).contains(&answer.status) {
        return serde_json::from_slice(&answer.body).map_err(|error| ApiError::internal(&error));
    }
    let body: Value = serde_json::from_slice(&answer.body).unwrap_or_default();
    let code = body["error"]["code"].as_str().unwrap_or("internal");
    let code = ApiErrorCode::all()
        .find(|known| known.as_str() == code)
        .unwrap_or(ApiErrorCode::Job(ErrorCode::Internal));
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or("the session host failed")
        .to_owned();
    Err(ApiError::new(code, message))
}

async fn browser_open(
    state: &AppState,
    scope: &Scope,
    request: Open,
) -> Result<CallToolResult, ApiError> {
    let owner = super::owner(scope);
    let info: SessionInfo = match (&state.sessions, &state.remote_sessions) {
        (Some(sessions), _) => sessions
            .open(&owner, None, request.profile, &request.credentials)
            .await
            .map_err(api_sessions::api_error)?,
        (None, Some(remote)) => {
            let body = json!({ "profile": request.profile, "credentials": request.credentials });
            let body = bytes::Bytes::from(body.to_string());
            relayed(
                remote
                    .open(&owner, body)
                    .await
                    .map_err(api_sessions::route_error)?,
            )?
        }
        (None, None) => return Err(sessions_unavailable()),
    };
    Ok(answer(
        format!(
            "session {} open ({} profile; closed after {} s idle)",
            info.id,
            to_value(&info.profile).as_str().unwrap_or("desktop"),
            info.idle_timeout_secs
        ),
        to_value(&info),
    ))
}

async fn act(
    state: &AppState,
    scope: &Scope,
    id: &str,
    actions: &[Action],
) -> Result<Vec<Step>, ApiError> {
    let owner = super::owner(scope);
    match (&state.sessions, &state.remote_sessions) {
        (Some(sessions), _) => sessions
            .act(&owner, id, actions)
            .await
            .map_err(api_sessions::api_error),
        (None, Some(remote)) => {
            #[derive(Deserialize)]
            struct Steps {
                steps: Vec<Step>,
            }
            let body = bytes::Bytes::from(json!({ "actions": actions }).to_string());
            let steps: Steps = relayed(
                remote
                    .forward(&owner, id, "POST", "/actions", Some(body))
                    .await
                    .map_err(api_sessions::route_error)?,
            )?;
            Ok(steps.steps)
        }
        (None, None) => Err(sessions_unavailable()),
    }
}

async fn close(state: &AppState, scope: &Scope, id: &str) -> Result<(), ApiError> {
    let owner = super::owner(scope);
    match (&state.sessions, &state.remote_sessions) {
        (Some(sessions), _) => sessions
            .close(&owner, id)
            .await
            .map_err(api_sessions::api_error),
        (None, Some(remote)) => {
            let answer = remote
                .forward(&owner, id, "DELETE", "", None)
                .await
                .map_err(api_sessions::route_error)?;
            if (200..300).contains(&answer.status) {
                Ok(())
            } else {
                relayed::<Value>(answer).map(|_| ())
            }
        }
        (None, None) => Err(sessions_unavailable()),
    }
}

/// The steps of a session call: each outcome as text, screenshots as images; the structured
/// content has the steps with each image's type and size in place of its bytes.
fn steps_answer(steps: Vec<Step>) -> CallToolResult {
    let mut content = Vec::new();
    let mut text = String::new();
    let mut structured = Vec::new();
    for step in &steps {
        let outcome = &step.outcome;
        text.push_str(&format!(
            "#{} {} {}",
            step.seq,
            outcome.action,
            if outcome.ok { "ok" } else { "FAILED" }
        ));
        if let Some(error) = &outcome.error {
            text.push_str(&format!(
                " ({}: {})",
                to_value(&error.code).as_str().unwrap_or("error"),
                error.message
            ));
        }
        text.push_str(&format!(
            " — tab {} {}{}\n",
            outcome.tab,
            outcome.url,
            outcome
                .title
                .as_deref()
                .map(|title| format!(" \"{title}\""))
                .unwrap_or_default()
        ));
        if let Some(output) = &outcome.output {
            text.push_str(output);
            if outcome.truncated {
                text.push_str("\n[output cut]");
            }
            text.push('\n');
        }
        let mut value = to_value(step);
        if let Some(image) = &outcome.image {
            let size = base64::engine::general_purpose::STANDARD
                .decode(&image.base64)
                .map(|bytes| bytes.len())
                .unwrap_or(0);
            value["image"] = json!({ "media_type": image.media_type, "bytes": size });
        }
        structured.push(value);
    }
    content.push(ContentBlock::text(text.trim_end().to_owned()));
    for step in &steps {
        if let Some(image) = &step.outcome.image {
            content.push(ContentBlock::image(
                image.base64.clone(),
                image.media_type.clone(),
            ));
        }
    }
    let failed = steps
        .iter()
        .find_map(|step| step.outcome.error.as_ref().filter(|_| !step.outcome.ok));
    let mut result = CallToolResult::success(content);
    let mut value = json!({ "steps": structured });
    if let Some(error) = failed {
        // The steps that ran are the answer, and the one that failed ended the call: a tool
        // error with the action's code, beside the steps.
        value["error"] = json!({ "code": error.code, "message": error.message });
        result.is_error = Some(true);
    }
    result.structured_content = Some(value);
    result
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PageList {
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    crawl_id: Option<String>,
    #[serde(default)]
    cursor: Option<String>,
}

async fn page_list(
    state: &AppState,
    scope: &Scope,
    request: PageList,
) -> Result<CallToolResult, ApiError> {
    const LIMIT: u32 = 100;
    let filter = crate::store::PageFilter {
        host: request.host,
        crawl_id: request.crawl_id,
        tenant: scope.filter().map(str::to_owned),
    };
    let pages = state
        .context
        .store
        .list_pages(&filter, request.cursor.as_deref(), LIMIT)
        .await?;
    let next = (pages.len() == LIMIT as usize)
        .then(|| pages.last().map(|page| page.page_id.clone()))
        .flatten();
    let mut text = String::new();
    for page in &pages {
        text.push_str(&format!(
            "{}\t{}\t{}\t{} lines\t{}\n",
            page.page_id,
            page.fetched_at,
            page.url,
            page.lines,
            page.title.as_deref().unwrap_or("")
        ));
    }
    if pages.is_empty() {
        text.push_str("no stored page");
    }
    Ok(answer(
        text.trim_end().to_owned(),
        json!({ "pages": pages, "next_cursor": next }),
    ))
}
