//! Input actions: click, type, press, hover, select and scroll, with the element targeting
//! they share (a snapshot index or a selector).
//!
//! Not here: reading the page (`observe`) or moving between pages (`navigation`).

use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, InsertTextParams,
};
use chromiumoxide::layout::Point;
use chromiumoxide::page::Page;
use serde_json::Value;
use std::time::Duration;

use super::page::{call_page, eval_raw, json, page_error};
use super::{Failure, ScrollDirection, command_timeout, settle};
use crate::browse::lease::Lease;
use crate::browse::{Error, with_timeout};

/// Clicks an element (by snapshot index or selector) or a point.
pub(super) async fn click(
    lease: &Lease,
    index: Option<u32>,
    selector: Option<&str>,
    x: Option<f64>,
    y: Option<f64>,
) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    let point = match (x, y) {
        (Some(x), Some(y)) => Point { x, y },
        _ => target_point(lease, index, selector).await?,
    };
    lease.tab().touch();
    with_timeout(timeout, lease.page().click(point)).await?;
    settle(lease).await;
    Ok(Some(format!("clicked at ({:.0}, {:.0})", point.x, point.y)))
}

/// Fills a field with `text`, or types it into the focused element; presses Enter after it
/// when `submit`. Also says whether the field was a password field (its text is then a
/// secret the replay log masks).
pub(super) async fn type_text(
    lease: &Lease,
    index: Option<u32>,
    selector: Option<&str>,
    text: &str,
    submit: bool,
) -> Result<(Option<String>, bool), Failure> {
    let timeout = command_timeout(lease);
    let (output, password) = if index.is_none() && selector.is_none() {
        // The focused element, looked for through open shadow roots.
        let focused_password = eval_raw(
            lease.page(),
            "(() => { let e = document.activeElement; \
             while (e && e.shadowRoot && e.shadowRoot.activeElement) e = e.shadowRoot.activeElement; \
             return !!e && e.localName === 'input' && (e.type || '').toLowerCase() === 'password'; })()"
                .to_owned(),
            timeout,
        )
        .await?
        .as_bool()
        .unwrap_or(false);
        with_timeout(timeout, lease.page().execute(InsertTextParams::new(text))).await?;
        (
            "typed into the focused element".to_owned(),
            focused_password,
        )
    } else {
        let call = format!("fill({}, {})", target_arg(index, selector), json(text));
        let answer = call_page(lease, &call).await?;
        page_error(&answer)?;
        (
            format!("filled {}", describe_target(index, selector)),
            answer["password"].as_bool().unwrap_or(false),
        )
    };
    if submit {
        lease.tab().touch();
        press(lease.page(), "Enter", timeout).await?;
        settle(lease).await;
    }
    Ok((Some(output), password))
}

/// Presses a named key or a character.
pub(super) async fn press_key(lease: &Lease, key: &str) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    lease.tab().touch();
    press(lease.page(), key, timeout).await?;
    settle(lease).await;
    Ok(None)
}

/// Moves the mouse over an element.
pub(super) async fn hover(
    lease: &Lease,
    index: Option<u32>,
    selector: Option<&str>,
) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    let point = target_point(lease, index, selector).await?;
    with_timeout(timeout, lease.page().move_mouse(point)).await?;
    Ok(Some(format!(
        "hovering at ({:.0}, {:.0})",
        point.x, point.y
    )))
}

/// Chooses an option of a native `<select>` by its label or value.
pub(super) async fn select(
    lease: &Lease,
    index: Option<u32>,
    selector: Option<&str>,
    label: Option<&str>,
    value: Option<&str>,
) -> Result<Option<String>, Failure> {
    let choice = match (label, value) {
        (Some(label), _) => format!("{{label: {}}}", json(label)),
        (_, Some(value)) => format!("{{value: {}}}", json(value)),
        _ => "{}".to_owned(),
    };
    let call = format!("select({}, {choice})", target_arg(index, selector));
    let answer = call_page(lease, &call).await?;
    page_error(&answer)?;
    settle(lease).await;
    let chosen = &answer["selected"];
    Ok(Some(format!(
        "selected {:?} (value {:?})",
        chosen["label"].as_str().unwrap_or_default(),
        chosen["value"].as_str().unwrap_or_default()
    )))
}

/// Scrolls the page; says how much is above and below.
pub(super) async fn scroll(
    lease: &Lease,
    direction: ScrollDirection,
) -> Result<Option<String>, Failure> {
    let answer = call_page(lease, &format!("scroll({})", json(direction.as_str()))).await?;
    page_error(&answer)?;
    settle(lease).await;
    Ok(Some(scroll_hints(&answer)))
}

async fn target_point(
    lease: &Lease,
    index: Option<u32>,
    selector: Option<&str>,
) -> Result<Point, Failure> {
    let call = match (index, selector) {
        (Some(index), _) => format!("target({index})"),
        (_, Some(selector)) => format!("targetSelector({})", json(selector)),
        _ => return Err(Failure::action("invalid_action", "no target given")),
    };
    let answer = call_page(lease, &call).await?;
    page_error(&answer)?;
    match (answer["cx"].as_f64(), answer["cy"].as_f64()) {
        (Some(x), Some(y)) => Ok(Point { x, y }),
        _ => Err(Failure::action(
            "action_failed",
            format!(
                "{} has no position on the page",
                describe_target(index, selector)
            ),
        )),
    }
}

pub(super) fn target_arg(index: Option<u32>, selector: Option<&str>) -> String {
    match (index, selector) {
        (Some(index), _) => index.to_string(),
        (_, Some(selector)) => json(selector),
        _ => "null".to_owned(),
    }
}

pub(super) fn describe_target(index: Option<u32>, selector: Option<&str>) -> String {
    match (index, selector) {
        (Some(index), _) => format!("[{index}]"),
        (_, Some(selector)) => format!("{selector:?}"),
        _ => "the focused element".to_owned(),
    }
}

async fn press(page: &Page, key: &str, timeout: Duration) -> Result<(), Failure> {
    let name = if key == "Space" { " " } else { key };
    let definition = chromiumoxide::keys::get_key_definition(name)
        .ok_or_else(|| Failure::action("invalid_action", format!("unknown key {key:?}")))?;
    let mut command = DispatchKeyEventParams::builder()
        .key(definition.key)
        .code(definition.code)
        .windows_virtual_key_code(definition.key_code)
        .native_virtual_key_code(definition.key_code);
    let down = if let Some(text) = definition.text {
        command = command.text(text);
        DispatchKeyEventType::KeyDown
    } else if definition.key.len() == 1 {
        command = command.text(definition.key);
        DispatchKeyEventType::KeyDown
    } else {
        DispatchKeyEventType::RawKeyDown
    };
    let key_down = command
        .clone()
        .r#type(down)
        .build()
        .map_err(|error| Failure::Browser(Error::Crashed(error)))?;
    let key_up = command
        .r#type(DispatchKeyEventType::KeyUp)
        .build()
        .map_err(|error| Failure::Browser(Error::Crashed(error)))?;
    with_timeout(timeout, page.execute(key_down)).await?;
    with_timeout(timeout, page.execute(key_up)).await?;
    Ok(())
}

fn scroll_hints(answer: &Value) -> String {
    let number = |key: &str| answer[key].as_f64().unwrap_or(0.0).round() as i64;
    format!(
        "scrollY {}; {} px above, {} px below (page {} px, viewport {} px){}",
        number("scrollY"),
        number("pixelsAbove"),
        number("pixelsBelow"),
        number("scrollHeight"),
        number("viewportHeight"),
        if answer["atBottom"].as_bool() == Some(true) {
            "; at the bottom"
        } else if answer["atTop"].as_bool() == Some(true) {
            "; at the top"
        } else {
            ""
        }
    )
}
