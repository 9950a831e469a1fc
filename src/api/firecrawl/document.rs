//! A stored page as a Firecrawl document: `markdown` (the page's stored text), `html` (the
//! main content as cleaned HTML, extracted again from the stored body), `rawHtml` (the stored
//! body, decoded), `links`, and `metadata` (title, description, language, `sourceURL`,
//! `statusCode`, … and neutral `creditsUsed`).
//!
//! Not here: fetching (the scrape and crawl handlers run trawl's jobs, which store pages).

use serde::Serialize;
use trawl_workers::job::Format;
use utoipa::ToSchema;

use super::FcError;
use super::options::Wanted;
use crate::store::{PageRecord, Store};

/// A scraped page, as Firecrawl returns it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = FirecrawlDocument)]
pub(crate) struct Document {
    /// The main content as markdown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) markdown: Option<String>,
    /// The main content as cleaned HTML.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) html: Option<String>,
    /// The body as received, decoded.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) raw_html: Option<String>,
    /// The page's links: absolute, normalised, unique, in document order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) links: Option<Vec<String>>,
    /// What is known about the page.
    pub(crate) metadata: Metadata,
    /// Something the reader should know (a fallback extraction, a lying Content-Type, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) warning: Option<String>,
}

/// A document's metadata.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = FirecrawlMetadata)]
pub(crate) struct Metadata {
    /// The page's title.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) title: Option<String>,
    /// Its description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) description: Option<String>,
    /// Its language.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) language: Option<String>,
    /// Its author, as it states it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) author: Option<String>,
    /// When it was published, as it states it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) published_time: Option<String>,
    /// Its canonical URL.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) canonical: Option<String>,
    /// The URL asked for.
    #[serde(rename = "sourceURL")]
    pub(crate) source_url: String,
    /// The URL after redirects.
    pub(crate) url: String,
    /// The final response's status.
    pub(crate) status_code: u16,
    /// The final response's content type.
    pub(crate) content_type: String,
    /// trawl's page id (`GET /v1/pages?url=`, `trawl read`).
    pub(crate) scrape_id: String,
    /// `hit` when served from the page cache, else `miss`.
    pub(crate) cache_state: String,
    /// When the page was fetched (RFC 3339).
    pub(crate) cached_at: String,
    /// Always `basic`: the configured proxies, or none.
    pub(crate) proxy_used: String,
    /// Always 0: trawl counts no credits.
    pub(crate) credits_used: u64,
}

/// Builds the document of a stored page: the parts in `wanted`, from the store.
pub(crate) async fn build(
    store: &Store,
    page: &PageRecord,
    wanted: Wanted,
    cached: bool,
) -> Result<Document, FcError> {
    let info = &page.info;
    let mut warning = info.warning.clone();
    let markdown = if wanted.markdown {
        Some(store.page_text(page).await?)
    } else {
        None
    };
    let mut html = None;
    let mut raw_html = None;
    if wanted.html || wanted.raw_html {
        let raw = match store.page_raw_hash(&page.id).await? {
            Some(hash) => store.blob(&hash).await?.unwrap_or_default(),
            None => Vec::new(),
        };
        let is_html = matches!(
            info.content_type.as_str(),
            "text/html" | "application/xhtml+xml"
        );
        let textual = is_html
            || info.content_type.starts_with("text/")
            || info.content_type.ends_with("json")
            || info.content_type.ends_with("xml");
        if textual {
            let decoded = trawl_workers::web::charset::decode(
                &raw,
                Some(info.content_type.as_str()),
                is_html,
            )
            .text;
            if wanted.html && is_html {
                let final_url = url::Url::parse(&info.final_url)
                    .or_else(|_| url::Url::parse(&info.url))
                    .map_err(|error| FcError::from(super::ApiError::internal(&error)))?;
                let source = decoded.clone();
                let extracted = tokio::task::spawn_blocking(move || {
                    trawl_workers::web::extract::extract_html(&source, &final_url, Format::Html)
                        .map(|extracted| extracted.text)
                })
                .await
                .map_err(|error| FcError::from(super::ApiError::internal(&error)))?;
                match extracted {
                    Ok(text) => html = Some(text),
                    Err(error) => {
                        warning = Some(format!("html: {error}"));
                    }
                }
            } else if wanted.html {
                warning = Some(format!(
                    "html: the page is {}, not HTML; see markdown",
                    info.content_type
                ));
            }
            if wanted.raw_html {
                raw_html = Some(decoded);
            }
        } else if wanted.html || wanted.raw_html {
            warning = Some(format!(
                "html, rawHtml: the page is {}, not text; see markdown",
                info.content_type
            ));
        }
    }
    let meta = &info.meta;
    Ok(Document {
        markdown,
        html,
        raw_html,
        links: wanted.links.then(|| info.links.clone()),
        metadata: Metadata {
            title: info.title.clone(),
            description: meta.description.clone(),
            language: meta.lang.clone(),
            author: meta.author.clone(),
            published_time: meta.published.clone(),
            canonical: meta.canonical.clone(),
            source_url: info.url.clone(),
            url: info.final_url.clone(),
            status_code: info.status,
            content_type: info.content_type.clone(),
            scrape_id: page.id.clone(),
            cache_state: if cached { "hit" } else { "miss" }.to_owned(),
            cached_at: info.fetched_at.clone(),
            proxy_used: "basic".to_owned(),
            credits_used: 0,
        },
        warning,
    })
}
