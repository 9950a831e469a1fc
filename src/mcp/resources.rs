//! Stored pages as MCP resources, so a host can attach a page to a prompt: each stored page
//! (each fetch of a URL) is `trawl://pages/{id}` (its extracted text: `text/markdown`,
//! `text/plain` or `text/html`, as it was fetched), and the template `trawl://pages{?url}` names the newest
//! page of a URL. Listings and reads see the caller's tenant's pages only.
//!
//! Not here: fetching (the `web_fetch` tool stores pages), or line ranges (`web_read`).

use rmcp::model::{
    ListResourcesResult, ReadResourceResult, Resource, ResourceContents, ResourceTemplate,
};
use trawl_workers::job::Format;

use crate::api::AppState;
use crate::api::error::ApiError;
use crate::store::{PageFilter, PageRecord};
use crate::tenant::Scope;

/// Pages listed per answer of `resources/list`.
const PAGE: u32 = 100;

/// The URI of a stored page.
pub(super) fn page_uri(id: &str) -> String {
    format!("trawl://pages/{id}")
}

fn mime(format: Format) -> &'static str {
    match format {
        Format::Markdown => "text/markdown",
        Format::Text => "text/plain",
        Format::Html => "text/html",
    }
}

/// The caller's stored pages, oldest first, `PAGE` at a time (the cursor is the last page id).
pub(super) async fn list(
    state: &AppState,
    scope: &Scope,
    cursor: Option<String>,
) -> Result<ListResourcesResult, ApiError> {
    let filter = PageFilter {
        tenant: scope.filter().map(str::to_owned),
        ..PageFilter::default()
    };
    let pages = state
        .context
        .store
        .list_pages(&filter, cursor.as_deref(), PAGE)
        .await?;
    let next = (pages.len() == PAGE as usize)
        .then(|| pages.last().map(|page| page.page_id.clone()))
        .flatten();
    let resources = pages
        .into_iter()
        .map(|page| {
            Resource::new(
                page_uri(&page.page_id),
                page.title.clone().unwrap_or_else(|| page.url.clone()),
            )
            .with_description(format!(
                "{} (fetched {}, {} lines)",
                page.url, page.fetched_at, page.lines
            ))
            .with_mime_type("text/markdown")
        })
        .collect();
    let mut result = ListResourcesResult::with_all_items(resources);
    result.next_cursor = next;
    Ok(result)
}

/// The resource templates: a page by id, and the newest page of a URL.
pub(super) fn templates() -> Vec<ResourceTemplate> {
    vec![
        ResourceTemplate::new("trawl://pages/{id}", "stored page")
            .with_description(
                "A page trawl stored (each fetch of a URL is one, named by its page_id): its \
                 extracted text as markdown.",
            )
            .with_mime_type("text/markdown"),
        ResourceTemplate::new("trawl://pages{?url}", "newest page of a URL")
            .with_description(
                "The most recent stored page of a URL (as requested or as finally fetched), \
                 e.g. trawl://pages?url=https%3A%2F%2Fexample.com%2F. Fetch it first with \
                 web_fetch.",
            )
            .with_mime_type("text/markdown"),
    ]
}

/// Reads `trawl://pages/{id}` or `trawl://pages?url=…`.
pub(super) async fn read(
    state: &AppState,
    scope: &Scope,
    uri: &str,
) -> Result<ReadResourceResult, ApiError> {
    let page = find(state, scope, uri).await?;
    let text = state.context.store.page_text(&page).await?;
    let contents =
        ResourceContents::text(text, page_uri(&page.id)).with_mime_type(mime(page.info.format));
    Ok(ReadResourceResult::new(vec![contents]))
}

async fn find(state: &AppState, scope: &Scope, uri: &str) -> Result<PageRecord, ApiError> {
    let not_a_page = || {
        ApiError::bad_request(format!(
            "{uri} is not a trawl page URI (trawl://pages/{{id}} or trawl://pages?url=URL)"
        ))
    };
    let parsed = url::Url::parse(uri).map_err(|_| not_a_page())?;
    if parsed.scheme() != "trawl" || parsed.host_str() != Some("pages") {
        return Err(not_a_page());
    }
    let store = &state.context.store;
    let id = parsed.path().trim_start_matches('/');
    if !id.is_empty() {
        if id.contains('/') {
            return Err(not_a_page());
        }
        return store
            .page(id)
            .await?
            .filter(|page| scope.sees(&page.tenant))
            .ok_or_else(|| ApiError::not_found(format!("no stored page {id}")));
    }
    let url = parsed
        .query_pairs()
        .find(|(key, _)| key == "url")
        .map(|(_, value)| value.into_owned())
        .ok_or_else(not_a_page)?;
    store
        .latest_page(scope, &crate::pages::lookup_key(&url))
        .await?
        .ok_or_else(|| ApiError::not_found(format!("no stored page for {url}")))
}
