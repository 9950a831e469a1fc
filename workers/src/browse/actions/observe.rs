//! Observing actions: snapshot, accessibility tree, read (markdown), read_html, find,
//! get_attribute, screenshot and highlight. None of them changes the page beyond the markers
//! `highlight` and `screenshot`'s grid draw and then clear.
//!
//! Not here: interacting with the page (`input`).

use std::time::Duration;

use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::accessibility::GetFullAxTreeParams;
use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::page::{Page, ScreenshotParams};
use serde_json::Value;

use super::input::{describe_target, target_arg};
use super::page::{call_page, html, json, page_error};
use super::{Failure, Image, command_timeout};
use crate::browse::lease::Lease;
use crate::browse::with_timeout;
use crate::job::Format;

/// Numbers the visible actionable elements.
pub(super) async fn snapshot(lease: &Lease) -> Result<Option<String>, Failure> {
    let cap = lease.pool().config().output_chars;
    let answer = call_page(lease, &format!("snapshot({{maxChars: {cap}}})")).await?;
    page_error(&answer)?;
    Ok(Some(snapshot_text(&answer)))
}

/// The accessibility tree's named nodes.
pub(super) async fn a11y(lease: &Lease) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    let tree = with_timeout(
        timeout,
        lease.page().execute(GetFullAxTreeParams::default()),
    )
    .await?
    .result;
    Ok(Some(a11y_text(&tree.nodes)))
}

/// The page's main content as markdown, extracted as a fetch extracts it.
pub(super) async fn read(lease: &Lease) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    let html = html(lease.page(), timeout).await?;
    let url = with_timeout(timeout, lease.page().url())
        .await?
        .unwrap_or_default();
    let page_url = url::Url::parse(&url)
        .unwrap_or_else(|_| url::Url::parse("about:blank").expect("a valid url"));
    let extracted = tokio::task::spawn_blocking(move || {
        crate::web::extract::extract_html(&html, &page_url, Format::Markdown)
            .map(|extracted| extracted.text)
            .map_err(|error| error.to_string())
    })
    .await
    .map_err(|error| Failure::action("extraction_failed", error.to_string()))?
    .map_err(|error| Failure::action("extraction_failed", error))?;
    Ok(Some(extracted))
}

/// The page's current HTML (open shadow roots inlined).
pub(super) async fn read_html(lease: &Lease) -> Result<Option<String>, Failure> {
    let answer = call_page(lease, "read()").await?;
    page_error(&answer)?;
    Ok(Some(answer["html"].as_str().unwrap_or_default().to_owned()))
}

/// Finds `text` in the page without changing it.
pub(super) async fn find(lease: &Lease, text: &str) -> Result<Option<String>, Failure> {
    let answer = call_page(lease, &format!("find({}, {{maxResults: 20}})", json(text))).await?;
    page_error(&answer)?;
    Ok(Some(find_text(text, &answer)))
}

/// Reads attribute `name` of an element.
pub(super) async fn get_attribute(
    lease: &Lease,
    index: Option<u32>,
    selector: Option<&str>,
    name: &str,
) -> Result<Option<String>, Failure> {
    let call = format!("attribute({}, {})", target_arg(index, selector), json(name));
    let answer = call_page(lease, &call).await?;
    page_error(&answer)?;
    Ok(Some(match &answer["value"] {
        Value::String(value) => value.clone(),
        _ => format!(
            "{} has no attribute {name:?}",
            describe_target(index, selector)
        ),
    }))
}

/// A PNG of the viewport or the whole page, optionally under a coordinate grid.
pub(super) async fn screenshot(
    lease: &Lease,
    grid: bool,
    full_page: bool,
    image: &mut Option<Image>,
) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    if grid {
        call_page(lease, "grid()").await?;
    }
    let shot = png(lease.page(), full_page, timeout).await;
    if grid {
        call_page(lease, "clear()").await?;
    }
    let png = shot?;
    let size = png.len();
    *image = Some(Image {
        media_type: "image/png".to_owned(),
        base64: base64::engine::general_purpose::STANDARD.encode(png),
    });
    Ok(Some(format!("png, {size} bytes")))
}

/// Numbered markers over the visible elements, a screenshot of them, and their list.
pub(super) async fn highlight(
    lease: &Lease,
    image: &mut Option<Image>,
) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    let cap = lease.pool().config().output_chars;
    let answer = call_page(lease, &format!("highlight({{maxChars: {cap}}})")).await?;
    page_error(&answer)?;
    let shot = png(lease.page(), false, timeout).await;
    call_page(lease, "clear()").await?;
    let png = shot?;
    *image = Some(Image {
        media_type: "image/png".to_owned(),
        base64: base64::engine::general_purpose::STANDARD.encode(png),
    });
    Ok(Some(snapshot_text(&answer)))
}

async fn png(page: &Page, full_page: bool, timeout: Duration) -> Result<Vec<u8>, Failure> {
    let params = ScreenshotParams::builder()
        .format(CaptureScreenshotFormat::Png)
        .full_page(full_page)
        .build();
    Ok(with_timeout(timeout, page.screenshot(params)).await?)
}

fn snapshot_text(answer: &Value) -> String {
    let text = answer["text"].as_str().unwrap_or_default();
    let count = answer["count"].as_u64().unwrap_or(0);
    if count == 0 {
        return "no visible actionable elements".to_owned();
    }
    text.to_owned()
}

fn find_text(text: &str, answer: &Value) -> String {
    let count = answer["count"].as_u64().unwrap_or(0);
    if count == 0 {
        return format!("{text:?} is not on the page");
    }
    let mut lines = vec![format!("{count} matches of {text:?}")];
    if let Some(matches) = answer["matches"].as_array() {
        for found in matches {
            let context = found["text"].as_str().unwrap_or_default();
            match found["element"].as_u64() {
                Some(index) => lines.push(format!("- [{index}] {context}")),
                None => lines.push(format!("- {context}")),
            }
        }
    }
    lines.join("\n")
}

fn a11y_text(nodes: &[chromiumoxide::cdp::browser_protocol::accessibility::AxNode]) -> String {
    let mut lines = Vec::new();
    for node in nodes {
        if node.ignored {
            continue;
        }
        let role = node
            .role
            .as_ref()
            .and_then(|role| role.value.as_ref())
            .and_then(Value::as_str)
            .unwrap_or_default();
        let name = node
            .name
            .as_ref()
            .and_then(|name| name.value.as_ref())
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim();
        if name.is_empty() || matches!(role, "none" | "generic" | "InlineTextBox" | "StaticText") {
            continue;
        }
        lines.push(format!("{role} {name:?}"));
    }
    if lines.is_empty() {
        "the accessibility tree has no named nodes".to_owned()
    } else {
        lines.join("\n")
    }
}
