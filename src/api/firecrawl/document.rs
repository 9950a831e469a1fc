//! A stored page as a Firecrawl document: `markdown` (the page's stored text), `html` (the
//! main content as cleaned HTML, extracted again from the stored body), `rawHtml` (the stored
//! body, decoded), `links`, and `metadata` (title, description, language, `sourceURL`,
//! `statusCode`, … and neutral `creditsUsed`). With `includeTags`/`excludeTags`, markdown
//! and html are extracted again from the stored body reduced to the selected elements
//! (`trawl_workers::web::select`); rawHtml and links stay the whole page's. With
//! `onlyMainContent: false` they are the whole page's body (`extract::extract_whole_page`). A scrape run in
//! the browser adds `screenshot` and `actions` (screenshots as PNG data URLs, scrapes as
//! HTML) from its steps.
//!
//! Not here: fetching (the scrape and crawl handlers run trawl's jobs, which store pages).

use base64::Engine as _;
use serde::Serialize;
use trawl_workers::job::{ActionOutcome, Format};
use utoipa::ToSchema;

use super::FcError;
use super::options::{StepRole, Wanted};
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
    /// The page the browser ended on, as a PNG data URL (the `screenshot` format).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) screenshot: Option<String>,
    /// What the request's `actions` gave back.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) actions: Option<ActionsOutput>,
    /// Something the reader should know (a fallback extraction, a lying Content-Type, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) warning: Option<String>,
}

/// What a scrape's `actions` gave back, in their order.
#[derive(Debug, Clone, Default, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
#[schema(as = FirecrawlActionsOutput)]
pub(crate) struct ActionsOutput {
    /// One PNG data URL per `screenshot` action.
    pub(crate) screenshots: Vec<String>,
    /// One per `scrape` action: the page's URL and complete HTML at that point.
    pub(crate) scrapes: Vec<ActionScrape>,
    /// Always empty: trawl runs no `executeJavascript`.
    pub(crate) javascript_returns: Vec<serde_json::Value>,
    /// Always empty: trawl prints no `pdf`.
    pub(crate) pdfs: Vec<String>,
}

/// A `scrape` action's page.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = FirecrawlActionScrape)]
pub(crate) struct ActionScrape {
    /// The tab's URL.
    pub(crate) url: String,
    /// Its complete HTML (open shadow roots inlined).
    pub(crate) html: String,
}

impl Document {
    /// Adds what a browse scrape's steps gave back: `roles` says what each step is for
    /// (`options::StepRole`), in the job's order.
    pub(crate) fn add_steps(&mut self, steps: &[ActionOutcome], roles: &[StepRole]) {
        let data_url = |step: &ActionOutcome| {
            step.image
                .as_ref()
                .map(|image| format!("data:{};base64,{}", image.media_type, image.base64))
        };
        let mut actions = ActionsOutput::default();
        let mut any_action = false;
        for (step, role) in steps.iter().zip(roles) {
            match role {
                StepRole::Quiet => any_action = true,
                StepRole::Screenshot => {
                    any_action = true;
                    actions.screenshots.extend(data_url(step));
                }
                StepRole::Scrape => {
                    any_action = true;
                    let html = step
                        .html_base64
                        .as_deref()
                        .and_then(|encoded| {
                            base64::engine::general_purpose::STANDARD
                                .decode(encoded)
                                .ok()
                        })
                        .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                        .unwrap_or_default();
                    actions.scrapes.push(ActionScrape {
                        url: step.url.clone(),
                        html,
                    });
                }
                StepRole::Document => self.screenshot = data_url(step),
            }
        }
        if any_action {
            self.actions = Some(actions);
        }
    }
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

/// Builds the document of a stored page: the parts in `wanted`, from the store. With
/// `includeTags`/`excludeTags` (an HTML page), markdown and html are extracted again from the
/// stored body reduced to the selected elements; otherwise markdown is the stored text.
pub(crate) async fn build(
    store: &Store,
    page: &PageRecord,
    wanted: &Wanted,
    cached: bool,
) -> Result<Document, FcError> {
    let info = &page.info;
    let mut warnings: Vec<String> = info.warning.iter().cloned().collect();
    let is_html = info.is_html();
    let textual = is_html
        || info.content_type.starts_with("text/")
        || info.content_type.ends_with("json")
        || info.content_type.ends_with("xml");
    if wanted.selects() && (wanted.markdown || wanted.html) && !is_html {
        warnings.push(format!(
            "includeTags/excludeTags: the page is {}, not HTML; not applied",
            info.content_type
        ));
    }
    // Markdown is read again from the stored body when elements are selected or the whole
    // page is asked for (onlyMainContent: false); otherwise it is the stored text.
    let reread_markdown = wanted.markdown && is_html && (wanted.selects() || wanted.whole_page);
    let decoded = if textual && (wanted.html || wanted.raw_html || reread_markdown) {
        let raw = match store.page_raw_hash(&page.id).await? {
            Some(hash) => store.blob(&hash).await?.unwrap_or_default(),
            None => Vec::new(),
        };
        Some(
            trawl_workers::web::charset::decode(&raw, Some(info.content_type.as_str()), is_html)
                .text,
        )
    } else {
        None
    };
    let mut markdown = None;
    let mut html = None;
    if let Some(source) = decoded.as_ref().filter(|_| is_html) {
        if wanted.html || reread_markdown {
            let reread = reextract(source.clone(), info, wanted.clone(), reread_markdown).await?;
            match reread {
                Ok(reread) => {
                    html = reread.html;
                    markdown = reread.markdown;
                    warnings.extend(reread.warning);
                }
                Err(error) => warnings.push(error),
            }
        }
    } else if wanted.html {
        warnings.push(format!(
            "html: the page is {}, not HTML; see markdown",
            info.content_type
        ));
    }
    if wanted.markdown && markdown.is_none() && !reread_markdown {
        markdown = Some(store.page_text(page).await?);
    }
    let raw_html = if wanted.raw_html {
        if decoded.is_none() {
            warnings.push(format!(
                "rawHtml: the page is {}, not text; see markdown",
                info.content_type
            ));
        }
        decoded
    } else {
        None
    };
    let warning = (!warnings.is_empty()).then(|| warnings.join("; "));
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
        screenshot: None,
        actions: None,
        warning,
    })
}

/// Markdown and html extracted again from a stored HTML body.
struct Reread {
    markdown: Option<String>,
    html: Option<String>,
    warning: Option<String>,
}

/// Extracts html (when `wanted.html`) and markdown (when `markdown`) from `source`, reduced
/// to `wanted`'s selected elements first, as the main content or (`whole_page`) the whole
/// page, on a blocking thread. `Err` of the inner result is a warning for the document (a
/// page over the parsing budget, say).
async fn reextract(
    source: String,
    info: &trawl_workers::fetch::PageInfo,
    wanted: Wanted,
    markdown: bool,
) -> Result<Result<Reread, String>, FcError> {
    let final_url = url::Url::parse(&info.final_url)
        .or_else(|_| url::Url::parse(&info.url))
        .map_err(|error| FcError::from(super::ApiError::internal(&error)))?;
    tokio::task::spawn_blocking(move || {
        use trawl_workers::web::{extract, select};
        let mut warning = None;
        let source = if wanted.selects() {
            let selected = select::apply(&source, &wanted.include_tags, &wanted.exclude_tags)
                .map_err(|error| format!("includeTags/excludeTags: {error}"))?;
            if !wanted.include_tags.is_empty() && selected.kept == 0 {
                warning = Some("includeTags: no element matched; the content is empty".to_owned());
            }
            selected.html
        } else {
            source
        };
        let read = |format: Format| {
            let text = if wanted.whole_page {
                extract::extract_whole_page(&source, format)
            } else {
                extract::extract_html(&source, &final_url, format).map(|extracted| extracted.text)
            };
            text.map_err(|error| format!("{}: {error}", format.as_str()))
        };
        Ok(Reread {
            html: wanted.html.then(|| read(Format::Html)).transpose()?,
            markdown: markdown.then(|| read(Format::Markdown)).transpose()?,
            warning,
        })
    })
    .await
    .map_err(|error| FcError::from(super::ApiError::internal(&error)))
}
