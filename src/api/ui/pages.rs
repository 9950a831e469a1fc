//! The page viewer (`GET /ui/pages/{id}`): a stored page's text rendered (markdown through
//! the sanitiser, `markdown`; plain text as text) beside its metadata (title, final URL,
//! fetch time, extractor, warning), its versions over time and its WARC record; and the raw
//! body as a download (`GET /ui/pages/{id}/raw`: an attachment of type
//! `application/octet-stream` under `Content-Security-Policy: sandbox`, never rendered
//! inline). Another tenant's page is a 404.
//!
//! Not here: reading pages by line range for agents (`api::pages`).

use axum::Extension;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use maud::{Markup, PreEscaped, html};
use trawl_workers::job::Format;

use super::Ui;
use super::auth::Viewer;
use super::layout::{self, Nav, UiError, short, time, time_ms};
use super::markdown;
use crate::store::PageRecord;

async fn visible_page(ui: &Ui, viewer: &Viewer, id: &str) -> Result<PageRecord, UiError> {
    ui.app
        .context
        .store
        .page(id)
        .await?
        .filter(|page| viewer.scope.sees(&page.tenant))
        .ok_or_else(|| UiError::not_found(format!("No page {id}.")))
}

fn name_of(value: impl serde::Serialize) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(name)) => name,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// `GET /ui/pages/{id}`.
pub(super) async fn page(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> Result<Markup, UiError> {
    let page = visible_page(&ui, &viewer, &id).await?;
    let store = &ui.app.context.store;
    let text = store.page_text(&page).await?;
    let versions = store
        .versions_in(viewer.scope.filter(), &page.id, 50)
        .await?;
    let files = store.page_files(&page.id).await?;
    let info = &page.info;
    let rendered = match info.format {
        Format::Markdown => markdown::render(&text),
        Format::Html => markdown::clean_html(&text),
        Format::Text => String::new(),
    };
    let title = info.title.clone().unwrap_or_else(|| info.final_url.clone());
    let body = html! {
        h1 { (title) }
        div.viewer {
            article.content aria-label="Page content" {
                @if info.format == Format::Text {
                    pre { (text) }
                } @else {
                    (PreEscaped(rendered))
                }
            }
            aside {
                section.card aria-labelledby="meta-h" {
                    h2 #meta-h { "Metadata" }
                    dl.meta {
                        dt { "title" } dd { (info.title.as_deref().unwrap_or("(none)")) }
                        dt { "url" } dd { code { (info.url) } }
                        dt { "final url" } dd { code { (info.final_url) } }
                        dt { "HTTP status" } dd { (info.status) }
                        dt { "type" } dd { (info.content_type) }
                        dt { "fetched at" } dd { (time_ms(page.fetched_at_ms)) }
                        dt { "extractor" } dd { (name_of(info.extractor)) }
                        dt { "format" } dd { (info.format.as_str()) }
                        dt { "lines" } dd { (page.lines) }
                        dt { "warnings" } dd {
                            @if let Some(warning) = &info.warning { span.warning { (warning) } } @else { span.muted { "none" } }
                        }
                        dt { "page id" } dd { code { (page.id) } }
                    }
                    div.actions {
                        a.button.secondary href={ "/ui/pages/" (page.id) "/raw" } download { "Download raw HTML" }
                    }
                }
                section.card aria-labelledby="warc-h" {
                    h2 #warc-h { "WARC record" }
                    @match files.as_ref().and_then(|files| files.warc_record_id.as_ref().map(|id| (id, files))) {
                        Some((record, files)) => {
                            dl.meta {
                                dt { "record" } dd { code { (record) } }
                                dt { "file" } dd { code { (files.warc_file.as_deref().unwrap_or("?")) } }
                                dt { "offset" } dd { (files.warc_offset.unwrap_or(0)) }
                            }
                            div.actions {
                                a.button.secondary href={ "/ui/pages/" (page.id) "/warc" } download { "Download the record" }
                            }
                        }
                        None => { p.muted { "Not archived (yet): fetch with archive, or run trawl archive." } }
                    }
                }
                section.card aria-labelledby="versions-h" {
                    h2 #versions-h { "Versions" }
                    ol {
                        @for version in &versions {
                            li {
                                @if version.page_id == page.id {
                                    strong aria-current="page" { (time(&version.fetched_at)) " (this one)" }
                                } @else {
                                    a href={ "/ui/pages/" (version.page_id) } { (time(&version.fetched_at)) }
                                }
                                " " span.muted { (version.status) " · " (short(version.title.as_deref().unwrap_or(""), 40)) }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout::page(Some(&viewer), &title, Nav::Dashboard, body))
}

/// `GET /ui/pages/{id}/raw`: the body as received, as a download.
pub(super) async fn raw(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
) -> Result<Response, UiError> {
    let page = visible_page(&ui, &viewer, &id).await?;
    let store = &ui.app.context.store;
    let files = store
        .page_files(&page.id)
        .await?
        .ok_or_else(|| UiError::not_found(format!("No page {id}.")))?;
    let bytes = store
        .blob(&files.raw_hash)
        .await?
        .ok_or_else(|| UiError::not_found("The raw body is gone."))?;
    Ok(download(bytes, &format!("page-{}.html", page.id)))
}

/// An attachment that no browser renders: octet-stream, no sniffing, a sandbox CSP.
pub(super) fn download(bytes: Vec<u8>, file_name: &str) -> Response {
    let mut response = bytes.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    let safe: String = file_name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        .collect();
    if let Ok(value) = HeaderValue::from_str(&format!("attachment; filename=\"{safe}\"")) {
        headers.insert(header::CONTENT_DISPOSITION, value);
    }
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("sandbox; default-src 'none'"),
    );
    response
}

/// `GET /ui/pages/{id}/warc`: the page's WARC record (its gzip member, as in the file).
pub(super) async fn warc(
    State(ui): State<Ui>,
    Extension(viewer): Extension<Viewer>,
    Path(id): Path<String>,
    data_dir: Option<Extension<super::DataDir>>,
) -> Result<Response, UiError> {
    let page = visible_page(&ui, &viewer, &id).await?;
    let files = ui
        .app
        .context
        .store
        .page_files(&page.id)
        .await?
        .ok_or_else(|| UiError::not_found(format!("No page {id}.")))?;
    let (Some(file), Some(offset)) = (files.warc_file, files.warc_offset) else {
        return Err(UiError::not_found("This page has no WARC record yet."));
    };
    let Some(Extension(super::DataDir(data_dir))) = data_dir else {
        return Err(UiError::not_found(
            "This server does not know where the WARC files are.",
        ));
    };
    let dir = crate::archive::warc_dir(&data_dir);
    let record = tokio::task::spawn_blocking(move || read_record(&dir, &file, offset))
        .await
        .map_err(|_| UiError::not_found("The WARC record could not be read."))?
        .map_err(|error| {
            UiError::not_found(format!("The WARC record could not be read: {error}"))
        })?;
    Ok(download(record, &format!("page-{}.warc", page.id)))
}

/// The decompressed WARC record (one gzip member) at `offset` of `file` in `dir` (the file
/// is named `….open` until it is closed, and its record may name either).
fn read_record(dir: &std::path::Path, file: &str, offset: u64) -> std::io::Result<Vec<u8>> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    if file.contains('/') || file.contains('\\') || file.starts_with('.') {
        return Err(std::io::Error::other("a bad file name"));
    }
    let closed = file.strip_suffix(".open").unwrap_or(file);
    let mut handle = std::fs::File::open(dir.join(closed))
        .or_else(|_| std::fs::File::open(dir.join(format!("{closed}.open"))))?;
    handle.seek(SeekFrom::Start(offset))?;
    let mut record = Vec::new();
    flate2::read::GzDecoder::new(handle)
        .take(64 << 20)
        .read_to_end(&mut record)?;
    Ok(record)
}
