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
use super::{Extra, Failure, Image, ReadScope, command_timeout};
use crate::browse::lease::Lease;
use crate::browse::with_timeout;
use crate::job::Format;

/// Numbers the visible actionable elements.
pub(super) async fn snapshot(lease: &Lease, extra: &mut Extra) -> Result<Option<String>, Failure> {
    let cap = lease.pool().config().output_chars;
    let answer = call_page(lease, &format!("snapshot({{maxChars: {cap}}})")).await?;
    page_error(&answer)?;
    extra.count = answer["count"].as_u64().map(|count| count as usize);
    let text = snapshot_text(&answer);
    let url = with_timeout(command_timeout(lease), lease.page().url())
        .await?
        .unwrap_or_default();
    if lease.tab().same_snapshot(&url, &text) {
        extra.unchanged = true;
        return Ok(Some(
            "unchanged: the same actionable elements as at the previous snapshot (their numbers hold)"
                .to_owned(),
        ));
    }
    Ok(Some(text))
}

/// The element of accessibility role `role` whose accessible name is `name` (exactly, else
/// the first that contains it, case-insensitive; any name when `None`), registered with the
/// page helpers: its element number, for the index-based actions.
pub(super) async fn element_by_role(
    lease: &Lease,
    role: &str,
    name: Option<&str>,
) -> Result<u32, Failure> {
    use chromiumoxide::cdp::browser_protocol::dom::ResolveNodeParams;
    use chromiumoxide::cdp::js_protocol::runtime::CallFunctionOnParams;
    let timeout = command_timeout(lease);
    let page = lease.page();
    // The helpers hold the element list the number goes into.
    call_page(lease, "version").await?;
    let tree = with_timeout(timeout, page.execute(GetFullAxTreeParams::default()))
        .await?
        .result;
    let wanted = name.map(|name| name.trim().to_lowercase());
    let mut exact = None;
    let mut partial = None;
    for node in &tree.nodes {
        if node.ignored {
            continue;
        }
        let Some(backend) = node.backend_dom_node_id else {
            continue;
        };
        let node_role = node
            .role
            .as_ref()
            .and_then(|role| role.value.as_ref())
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !node_role.eq_ignore_ascii_case(role) {
            continue;
        }
        let node_name = node
            .name
            .as_ref()
            .and_then(|name| name.value.as_ref())
            .and_then(Value::as_str)
            .unwrap_or_default()
            .trim()
            .to_lowercase();
        match &wanted {
            None => {
                exact.get_or_insert(backend);
            }
            Some(wanted) if &node_name == wanted => {
                exact.get_or_insert(backend);
            }
            Some(wanted) if node_name.contains(wanted.as_str()) => {
                partial.get_or_insert(backend);
            }
            Some(_) => {}
        }
        if exact.is_some() {
            break;
        }
    }
    let described = match name {
        Some(name) => format!("role {role:?} and name {name:?}"),
        None => format!("role {role:?}"),
    };
    let backend = exact.or(partial).ok_or_else(|| {
        Failure::action(
            "action_failed",
            format!("no element with {described} in the accessibility tree (see a11y)"),
        )
    })?;
    let resolve = ResolveNodeParams::builder()
        .backend_node_id(backend)
        .build();
    let object = with_timeout(timeout, page.execute(resolve))
        .await?
        .result
        .object
        .object_id
        .ok_or_else(|| {
            Failure::action(
                "action_failed",
                format!("the element with {described} is gone"),
            )
        })?;
    let register = CallFunctionOnParams::builder()
        .function_declaration(
            "function () { var t = window.__trawl; if (!t) return 0; \
             var i = t.els.indexOf(this); if (i < 0) { t.els.push(this); i = t.els.length - 1; } \
             return i + 1; }",
        )
        .object_id(object)
        .return_by_value(true)
        .build()
        .map_err(|error| Failure::Browser(crate::browse::Error::Crashed(error)))?;
    let answer = with_timeout(timeout, page.execute(register)).await?.result;
    match answer.result.value.as_ref().and_then(Value::as_u64) {
        Some(number) if number > 0 => Ok(number as u32),
        _ => Err(Failure::action(
            "action_failed",
            format!("the element with {described} could not be addressed"),
        )),
    }
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

/// What `read` returns: its scope, its line range and its size.
#[derive(Debug, Clone, Copy)]
pub(super) struct ReadRange {
    pub(super) max_chars: Option<usize>,
    pub(super) from: Option<usize>,
    pub(super) to: Option<usize>,
    pub(super) scope: ReadScope,
}

/// The page's main content as markdown, extracted as a fetch extracts it (or all its visible
/// text), by line range.
pub(super) async fn read(
    lease: &Lease,
    range: ReadRange,
    extra: &mut Extra,
) -> Result<Option<String>, Failure> {
    let config = lease.pool().config();
    let max_chars = range
        .max_chars
        .unwrap_or(config.read_chars)
        .min(config.read_max_chars);
    let text = match range.scope {
        ReadScope::Main => main_text(lease).await?,
        ReadScope::Page => {
            let answer = call_page(lease, "read()").await?;
            page_error(&answer)?;
            answer["text"].as_str().unwrap_or_default().to_owned()
        }
    };
    let lines = lines_in_range(&text, range.from.unwrap_or(1), range.to, max_chars);
    extra.total_lines = Some(lines.total_lines);
    extra.next_from = lines.next_from;
    extra.read_cap = Some((max_chars, lines.truncated));
    Ok(Some(lines.text))
}

/// Lines `from..=to` of a text (1-based), as many as fit in `max_chars` characters (a longer
/// first line is cut).
struct Lines {
    text: String,
    total_lines: usize,
    next_from: Option<usize>,
    truncated: bool,
}

fn lines_in_range(text: &str, from: usize, to: Option<usize>, max_chars: usize) -> Lines {
    let all: Vec<&str> = text.lines().collect();
    let total_lines = all.len();
    let last = to.unwrap_or(total_lines).min(total_lines);
    let mut shown = String::new();
    let mut used = 0;
    let mut next = from;
    let mut truncated = false;
    for line in all.iter().take(last).skip(from.saturating_sub(1)) {
        let chars = line.chars().count() + 1;
        if used + chars > max_chars {
            if used == 0 {
                shown.push_str(crate::fetch::truncate_chars(line, max_chars));
                next += 1;
            }
            truncated = true;
            break;
        }
        shown.push_str(line);
        shown.push('\n');
        used += chars;
        next += 1;
    }
    Lines {
        text: shown,
        total_lines,
        next_from: (next <= total_lines && from <= total_lines).then_some(next),
        truncated,
    }
}

async fn main_text(lease: &Lease) -> Result<String, Failure> {
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
    Ok(extracted)
}

/// The page's complete current HTML (open shadow roots inlined), base64, up to
/// `browse.max_html_bytes`.
pub(super) async fn read_html(lease: &Lease, extra: &mut Extra) -> Result<Option<String>, Failure> {
    let answer = call_page(lease, "read()").await?;
    page_error(&answer)?;
    let html = answer["html"].as_str().unwrap_or_default();
    let limit = lease.pool().config().max_html_bytes;
    if html.len() > limit {
        return Err(Failure::action(
            "too_large",
            format!(
                "the page's HTML is {} bytes, over browse.max_html_bytes ({limit})",
                html.len()
            ),
        ));
    }
    extra.html_base64 = Some(base64::engine::general_purpose::STANDARD.encode(html));
    Ok(Some(format!(
        "html, {} bytes (complete, base64 in html_base64)",
        html.len()
    )))
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
    grid: Option<u32>,
    full_page: bool,
    image: &mut Option<Image>,
) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    if let Some(step) = grid {
        call_page(lease, &format!("grid({{step: {step}}})")).await?;
    }
    let shot = png(lease.page(), full_page, timeout).await;
    if grid.is_some() {
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
pub(super) async fn highlight(lease: &Lease, extra: &mut Extra) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    let cap = lease.pool().config().output_chars;
    let answer = call_page(lease, &format!("highlight({{maxChars: {cap}}})")).await?;
    page_error(&answer)?;
    extra.count = answer["count"].as_u64().map(|count| count as usize);
    let image = &mut extra.image;
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
