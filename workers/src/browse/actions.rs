//! The actions a script or an agent session runs in a tab, and what each returns. One action
//! in, one [`ActionOutcome`] out: its text output (capped), an image for `screenshot` and
//! `highlight`, the tab's URL and title after it, and an error with a public code when it
//! failed. Element indexes come from the last `snapshot` (or `highlight`) and stay valid until
//! the page changes.
//!
//! Not here: where outcomes go (job results, session replay logs) or the browser's lifetime.

use std::time::{Duration, Instant};

use base64::Engine as _;
use chromiumoxide::cdp::browser_protocol::accessibility::GetFullAxTreeParams;
use chromiumoxide::cdp::browser_protocol::input::{
    DispatchKeyEventParams, DispatchKeyEventType, InsertTextParams,
};
use chromiumoxide::cdp::browser_protocol::page::{
    CaptureScreenshotFormat, GetNavigationHistoryParams,
};
use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::error::CdpError;
use chromiumoxide::layout::Point;
use chromiumoxide::page::{Page, ScreenshotParams};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::pool::{Lease, with_timeout};
use super::{Error, navigation_code};
use crate::fetch::truncate_chars;
use crate::job::{ErrorCode, Format};
use crate::web::client::origin_of;

/// The page-side helpers, evaluated in the page before each call that needs them.
const PAGE_JS: &str = include_str!("page.js");

/// Named keys `press` accepts (besides single characters).
pub const KEYS: &[&str] = &[
    "Enter",
    "Tab",
    "Escape",
    "Backspace",
    "Delete",
    "Space",
    "ArrowUp",
    "ArrowDown",
    "ArrowLeft",
    "ArrowRight",
    "Home",
    "End",
    "PageUp",
    "PageDown",
];

/// One step of a script or a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "action", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// Load a URL in the current tab.
    Goto {
        /// An http or https URL.
        url: String,
    },
    /// Go back in the tab's history.
    Back,
    /// Go forward in the tab's history.
    Forward,
    /// Reload the page.
    Reload,
    /// Click an element (by snapshot index or selector) or a point.
    Click {
        /// The element's number in the last snapshot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
        /// A CSS selector, or an XPath starting with `/`, `(` or `xpath=`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
        /// Viewport x in CSS pixels (with `y`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        x: Option<f64>,
        /// Viewport y in CSS pixels (with `x`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        y: Option<f64>,
    },
    /// Fill a field with text (replacing its value), or type into the focused element.
    Type {
        /// The field's number in the last snapshot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
        /// The field's selector.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
        /// The text.
        text: String,
        /// Press Enter afterwards.
        #[serde(default)]
        submit: bool,
    },
    /// Press a named key (`Enter`, `Tab`, `Escape`, `ArrowDown`, …) or a character.
    Press {
        /// The key.
        key: String,
    },
    /// Move the mouse over an element.
    Hover {
        /// The element's number in the last snapshot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
        /// The element's selector.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
    },
    /// Choose an option of a native `<select>` by its label or value.
    Select {
        /// The select's number in the last snapshot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
        /// The select's selector.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
        /// The option's visible label.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
        /// The option's value.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        value: Option<String>,
    },
    /// Scroll the page; returns how much is above and below.
    Scroll {
        /// `up`, `down` (0.8 of a screen), `top` or `bottom`.
        direction: ScrollDirection,
    },
    /// Wait for a selector, a text, network idle, or a fixed time.
    Wait {
        /// Until an element matches.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
        /// Until the page's visible text contains this (case-insensitive).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        /// Until no request has been in flight for the quiet period.
        #[serde(default)]
        idle: bool,
        /// This many milliseconds (alone), or the most to wait (with the others; default
        /// 10,000). At most 30,000.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        #[schema(maximum = 30_000)]
        ms: Option<u64>,
    },
    /// Number the visible actionable elements (the indexes other actions use).
    Snapshot,
    /// The page's accessibility tree (roles and names).
    A11y,
    /// The page as markdown (the main content, as a fetch extracts it).
    Read,
    /// The page's current HTML (open shadow roots inlined).
    ReadHtml,
    /// Find text in the page without changing it.
    Find {
        /// The text (case-insensitive).
        text: String,
    },
    /// Read an attribute of an element.
    GetAttribute {
        /// The element's number in the last snapshot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
        /// The element's selector.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
        /// The attribute's name.
        name: String,
    },
    /// A PNG of the viewport (or the whole page).
    Screenshot {
        /// Draw a 100 px coordinate grid over it.
        #[serde(default)]
        grid: bool,
        /// The whole page, not just the viewport.
        #[serde(default)]
        full_page: bool,
    },
    /// Numbered markers over the visible elements, a screenshot of them, and their list.
    Highlight,
    /// Open a tab (optionally loading a URL) and make it current.
    TabNew {
        /// A URL to load in it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        url: Option<String>,
    },
    /// Make tab `tab` current (0-based; tabs the page opened itself are adopted first).
    TabSwitch {
        /// The tab's number.
        tab: usize,
    },
    /// Close a tab (the current one when unset); the last tab cannot be closed.
    TabClose {
        /// The tab's number.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tab: Option<usize>,
    },
    /// Start over in a fresh context: tabs, cookies and storage gone (credentials kept).
    Reset,
}

/// Where `scroll` goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ScrollDirection {
    /// 0.8 of a screen up.
    Up,
    /// 0.8 of a screen down.
    Down,
    /// To the top.
    Top,
    /// To the bottom.
    Bottom,
}

impl ScrollDirection {
    fn as_str(self) -> &'static str {
        match self {
            ScrollDirection::Up => "up",
            ScrollDirection::Down => "down",
            ScrollDirection::Top => "top",
            ScrollDirection::Bottom => "bottom",
        }
    }
}

impl Action {
    /// The action's snake_case name.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Goto { .. } => "goto",
            Action::Back => "back",
            Action::Forward => "forward",
            Action::Reload => "reload",
            Action::Click { .. } => "click",
            Action::Type { .. } => "type",
            Action::Press { .. } => "press",
            Action::Hover { .. } => "hover",
            Action::Select { .. } => "select",
            Action::Scroll { .. } => "scroll",
            Action::Wait { .. } => "wait",
            Action::Snapshot => "snapshot",
            Action::A11y => "a11y",
            Action::Read => "read",
            Action::ReadHtml => "read_html",
            Action::Find { .. } => "find",
            Action::GetAttribute { .. } => "get_attribute",
            Action::Screenshot { .. } => "screenshot",
            Action::Highlight => "highlight",
            Action::TabNew { .. } => "tab_new",
            Action::TabSwitch { .. } => "tab_switch",
            Action::TabClose { .. } => "tab_close",
            Action::Reset => "reset",
        }
    }

    /// True for actions that may change what the page shows (a preview follows them).
    pub fn changes_page(&self) -> bool {
        !matches!(
            self,
            Action::Snapshot
                | Action::A11y
                | Action::Read
                | Action::ReadHtml
                | Action::Find { .. }
                | Action::GetAttribute { .. }
                | Action::Screenshot { .. }
                | Action::Highlight
                | Action::Wait { .. }
        )
    }

    /// Checks the action's arguments (before anything runs).
    pub fn validate(&self) -> Result<(), String> {
        let name = self.name();
        let one_target = |index: &Option<u32>, selector: &Option<String>| match (index, selector) {
            (Some(_), Some(_)) => Err(format!("{name}: give index or selector, not both")),
            (None, None) => Err(format!("{name}: give index or selector")),
            (Some(0), None) => Err(format!("{name}: indexes start at 1")),
            (_, Some(selector)) if selector.trim().is_empty() => {
                Err(format!("{name}: the selector is empty"))
            }
            _ => Ok(()),
        };
        match self {
            Action::Goto { url } => check_http_url(url),
            Action::TabNew { url: Some(url) } => check_http_url(url),
            Action::Click {
                index,
                selector,
                x,
                y,
            } => match (x, y) {
                (Some(x), Some(y)) if index.is_none() && selector.is_none() => {
                    if x.is_finite() && y.is_finite() && *x >= 0.0 && *y >= 0.0 {
                        Ok(())
                    } else {
                        Err("click: x and y must be non-negative numbers".to_owned())
                    }
                }
                (None, None) => one_target(index, selector),
                _ => Err("click: give index, selector, or both x and y".to_owned()),
            },
            Action::Type {
                index, selector, ..
            } => {
                if index.is_none() && selector.is_none() {
                    Ok(())
                } else {
                    one_target(index, selector)
                }
            }
            Action::GetAttribute { name, .. } if name.is_empty() => {
                Err("get_attribute: the name is empty".to_owned())
            }
            Action::Hover { index, selector }
            | Action::GetAttribute {
                index, selector, ..
            } => one_target(index, selector),
            Action::Select {
                index,
                selector,
                label,
                value,
            } => {
                one_target(index, selector)?;
                match (label, value) {
                    (None, None) => Err("select: give the option's label or value".to_owned()),
                    (Some(_), Some(_)) => Err("select: give label or value, not both".to_owned()),
                    _ => Ok(()),
                }
            }
            Action::Press { key } => {
                if key.chars().count() == 1 || KEYS.contains(&key.as_str()) {
                    Ok(())
                } else {
                    Err(format!(
                        "press: unknown key {key:?}; named keys are {}",
                        KEYS.join(", ")
                    ))
                }
            }
            Action::Wait {
                selector,
                text,
                idle,
                ms,
            } => {
                if ms.is_some_and(|ms| ms > 30_000) {
                    return Err("wait: ms is at most 30000".to_owned());
                }
                let conditions = usize::from(selector.is_some())
                    + usize::from(text.is_some())
                    + usize::from(*idle);
                if conditions > 1 {
                    Err("wait: give one of selector, text, idle (ms may bound it)".to_owned())
                } else if conditions == 0 && ms.is_none() {
                    Err("wait: give selector, text, idle or ms".to_owned())
                } else {
                    Ok(())
                }
            }
            Action::Find { text } if text.trim().is_empty() => {
                Err("find: the text is empty".to_owned())
            }
            _ => Ok(()),
        }
    }
}

fn check_http_url(url: &str) -> Result<(), String> {
    match url::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(()),
        Ok(parsed) => Err(format!(
            "unsupported scheme {:?}: only http and https",
            parsed.scheme()
        )),
        Err(error) => Err(format!("invalid url: {error}")),
    }
}

/// What one action did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActionOutcome {
    /// The action's name.
    pub action: String,
    /// True when it did what was asked.
    pub ok: bool,
    /// Its text output, at most the configured characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<String>,
    /// True when `output` was cut.
    #[serde(default)]
    pub truncated: bool,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ActionError>,
    /// The current tab's URL afterwards.
    pub url: String,
    /// The current tab's title afterwards.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The current tab's number afterwards.
    pub tab: usize,
    /// Milliseconds it took.
    pub took_ms: u64,
    /// The picture `screenshot` and `highlight` took.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<Image>,
}

/// Why an action failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ActionError {
    /// The public code (`navigation_failed`, `blocked_destination`, `timeout`, …;
    /// `action_failed` for an element that is gone or a selector that matched nothing).
    pub code: String,
    /// What went wrong.
    pub message: String,
}

/// An image, base64-encoded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Image {
    /// `image/png` or `image/jpeg`.
    pub media_type: String,
    /// The bytes, base64 (standard alphabet, padded).
    pub base64: String,
}

impl Image {
    /// Decodes the bytes.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        base64::engine::general_purpose::STANDARD
            .decode(&self.base64)
            .map_err(|error| error.to_string())
    }
}

/// How an action failed: the browser itself (the lease is unusable), or only the action.
#[derive(Debug)]
pub enum Failure {
    /// The browser crashed or hung; the job should be retried on a fresh one.
    Browser(Error),
    /// The action failed; the tab is still usable.
    Action {
        /// The public code.
        code: String,
        /// What went wrong.
        message: String,
    },
}

impl Failure {
    fn action(code: impl Into<String>, message: impl Into<String>) -> Failure {
        Failure::Action {
            code: code.into(),
            message: message.into(),
        }
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        match error {
            Error::Navigation { code, .. } => Failure::Action {
                code: code.as_str().to_owned(),
                message: error.to_string(),
            },
            Error::Timeout(_) => Failure::Action {
                code: ErrorCode::Timeout.as_str().to_owned(),
                message: error.to_string(),
            },
            other => Failure::Browser(other),
        }
    }
}

/// Runs one action in the lease's current tab. `Err` only when the browser failed (crashed,
/// hung): the caller retires the lease. Any other failure is an outcome with `ok: false`.
pub async fn run(lease: &mut Lease, action: &Action) -> Result<ActionOutcome, Error> {
    let started = Instant::now();
    let mut image = None;
    let result = match action.validate() {
        Err(message) => Err(Failure::action("invalid_action", message)),
        Ok(()) => perform_watched(lease, action, &mut image).await,
    };
    let cap = lease.pool().config().output_chars;
    let (output, error) = match result {
        Ok(output) => (output, None),
        Err(Failure::Browser(error)) => return Err(error),
        Err(Failure::Action { code, message }) => (None, Some(ActionError { code, message })),
    };
    let (output, truncated) = match output {
        Some(text) => {
            let shown = truncate_chars(&text, cap);
            let truncated = shown.len() < text.len();
            (Some(shown.to_owned()), truncated)
        }
        None => (None, false),
    };
    let timeout = command_timeout(lease);
    let page = lease.page();
    let url = with_timeout(timeout, page.url())
        .await?
        .unwrap_or_else(|| "about:blank".to_owned());
    // A crashed page has no title to read (the script would wait for its command timeout).
    let title = if lease.tab().crashed() {
        None
    } else {
        title(page, timeout)
            .await
            .map(|title| truncate_chars(&title, 256).to_owned())
    };
    Ok(ActionOutcome {
        action: action.name().to_owned(),
        ok: error.is_none(),
        output,
        truncated,
        error,
        url,
        title,
        tab: lease.current_tab(),
        took_ms: started.elapsed().as_millis() as u64,
        image,
    })
}

/// Runs an action, failing it with `page_crashed` as soon as the current tab's renderer
/// crashes (instead of waiting out the command timeout). On a crashed tab only what gives it
/// a new page (goto, reload) or leaves it (tabs, reset) runs.
async fn perform_watched(
    lease: &mut Lease,
    action: &Action,
    image: &mut Option<Image>,
) -> Result<Option<String>, Failure> {
    let crashed = || {
        Failure::action(
            "page_crashed",
            "the page crashed (its renderer process died); goto or reload to go on",
        )
    };
    let tab = lease.tab().clone();
    match action {
        Action::TabNew { .. }
        | Action::TabSwitch { .. }
        | Action::TabClose { .. }
        | Action::Reset => return perform(lease, action, image).await,
        Action::Goto { .. } | Action::Reload => tab.recovered(),
        _ if tab.crashed() => return Err(crashed()),
        _ => {}
    }
    tokio::select! {
        result = perform(lease, action, image) => result,
        () = tab.crash() => Err(crashed()),
    }
}

fn command_timeout(lease: &Lease) -> Duration {
    Duration::from_secs(lease.pool().config().command_timeout_secs)
}

/// How long a page gets to settle after an interaction (a click that navigates, a form that
/// submits): the configured quiet period, at most 3 s.
async fn settle(lease: &Lease) {
    let config = lease.pool().config();
    let quiet = Duration::from_millis(config.idle_quiet_ms.min(300));
    let max = Duration::from_millis(config.idle_max_ms.min(3_000));
    lease.tab().wait_idle(quiet, max).await;
}

async fn perform(
    lease: &mut Lease,
    action: &Action,
    image: &mut Option<Image>,
) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    match action {
        Action::Goto { url } => {
            navigate(lease, url).await?;
            Ok(None)
        }
        Action::Back | Action::Forward => {
            let page = lease.page();
            let history = with_timeout(timeout, page.execute(GetNavigationHistoryParams {}))
                .await?
                .result;
            let step: i64 = if matches!(action, Action::Back) {
                -1
            } else {
                1
            };
            let target = history.current_index + step;
            if usize::try_from(target)
                .ok()
                .and_then(|index| history.entries.get(index))
                .is_none()
            {
                let edge = if step < 0 { "first" } else { "last" };
                return Err(Failure::action(
                    "action_failed",
                    format!("this is the {edge} page of the tab's history"),
                ));
            }
            // Through the page's own history API: a CDP history navigation restored from the
            // back-forward cache fires no load event, and chromiumoxide would wait for one.
            let before = with_timeout(timeout, page.url()).await?;
            lease.tab().touch();
            let script = if step < 0 {
                "history.back()"
            } else {
                "history.forward()"
            };
            eval_raw(page, script.to_owned(), timeout).await?;
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline
                && with_timeout(timeout, lease.page().url()).await? == before
            {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            settle(lease).await;
            Ok(None)
        }
        Action::Reload => {
            lease.tab().touch();
            with_timeout(timeout, lease.page().reload()).await?;
            settle(lease).await;
            Ok(None)
        }
        Action::Click {
            index,
            selector,
            x,
            y,
        } => {
            let point = match (x, y) {
                (Some(x), Some(y)) => Point { x: *x, y: *y },
                _ => target_point(lease, *index, selector.as_deref()).await?,
            };
            lease.tab().touch();
            with_timeout(timeout, lease.page().click(point)).await?;
            settle(lease).await;
            Ok(Some(format!("clicked at ({:.0}, {:.0})", point.x, point.y)))
        }
        Action::Type {
            index,
            selector,
            text,
            submit,
        } => {
            let output = if index.is_none() && selector.is_none() {
                with_timeout(
                    timeout,
                    lease.page().execute(InsertTextParams::new(text.clone())),
                )
                .await?;
                "typed into the focused element".to_owned()
            } else {
                let call = format!(
                    "fill({}, {})",
                    target_arg(*index, selector.as_deref()),
                    json(text)
                );
                let answer = call_page(lease, &call).await?;
                page_error(&answer)?;
                format!("filled {}", describe_target(*index, selector.as_deref()))
            };
            if *submit {
                lease.tab().touch();
                press(lease.page(), "Enter", timeout).await?;
                settle(lease).await;
            }
            Ok(Some(output))
        }
        Action::Press { key } => {
            lease.tab().touch();
            press(lease.page(), key, timeout).await?;
            settle(lease).await;
            Ok(None)
        }
        Action::Hover { index, selector } => {
            let point = target_point(lease, *index, selector.as_deref()).await?;
            with_timeout(timeout, lease.page().move_mouse(point)).await?;
            Ok(Some(format!(
                "hovering at ({:.0}, {:.0})",
                point.x, point.y
            )))
        }
        Action::Select {
            index,
            selector,
            label,
            value,
        } => {
            let choice = match (label, value) {
                (Some(label), _) => format!("{{label: {}}}", json(label)),
                (_, Some(value)) => format!("{{value: {}}}", json(value)),
                _ => "{}".to_owned(),
            };
            let call = format!(
                "select({}, {choice})",
                target_arg(*index, selector.as_deref())
            );
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
        Action::Scroll { direction } => {
            let answer = call_page(lease, &format!("scroll({})", json(direction.as_str()))).await?;
            page_error(&answer)?;
            settle(lease).await;
            Ok(Some(scroll_hints(&answer)))
        }
        Action::Wait {
            selector,
            text,
            idle,
            ms,
        } => {
            if selector.is_none() && text.is_none() && !idle {
                let wait = Duration::from_millis(ms.unwrap_or(0));
                tokio::time::sleep(wait).await;
                return Ok(Some(format!("waited {} ms", wait.as_millis())));
            }
            let max = Duration::from_millis(ms.unwrap_or(10_000));
            if *idle {
                let quiet = Duration::from_millis(lease.pool().config().idle_quiet_ms);
                return if lease.tab().wait_idle(quiet, max).await {
                    Ok(Some("the network is idle".to_owned()))
                } else {
                    Err(Failure::action(
                        ErrorCode::Timeout.as_str(),
                        format!("the network was still busy after {} ms", max.as_millis()),
                    ))
                };
            }
            let condition = match (selector, text) {
                (Some(selector), _) => format!("{{selector: {}}}", json(selector)),
                (_, Some(text)) => format!("{{text: {}}}", json(text)),
                _ => "{}".to_owned(),
            };
            let deadline = Instant::now() + max;
            loop {
                let answer = call_page(lease, &format!("waitCheck({condition})")).await;
                if let Ok(answer) = &answer {
                    page_error(answer)?;
                    if answer["found"].as_bool() == Some(true) {
                        return Ok(Some("found".to_owned()));
                    }
                }
                if Instant::now() >= deadline {
                    return Err(Failure::action(
                        ErrorCode::Timeout.as_str(),
                        format!("not found within {} ms", max.as_millis()),
                    ));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        Action::Snapshot => {
            let cap = lease.pool().config().output_chars;
            let answer = call_page(lease, &format!("snapshot({{maxChars: {cap}}})")).await?;
            page_error(&answer)?;
            Ok(Some(snapshot_text(&answer)))
        }
        Action::A11y => {
            let tree = with_timeout(
                timeout,
                lease.page().execute(GetFullAxTreeParams::default()),
            )
            .await?
            .result;
            Ok(Some(a11y_text(&tree.nodes)))
        }
        Action::Read => {
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
        Action::ReadHtml => {
            let answer = call_page(lease, "read()").await?;
            page_error(&answer)?;
            Ok(Some(answer["html"].as_str().unwrap_or_default().to_owned()))
        }
        Action::Find { text } => {
            let answer =
                call_page(lease, &format!("find({}, {{maxResults: 20}})", json(text))).await?;
            page_error(&answer)?;
            Ok(Some(find_text(text, &answer)))
        }
        Action::GetAttribute {
            index,
            selector,
            name,
        } => {
            let call = format!(
                "attribute({}, {})",
                target_arg(*index, selector.as_deref()),
                json(name)
            );
            let answer = call_page(lease, &call).await?;
            page_error(&answer)?;
            Ok(Some(match &answer["value"] {
                Value::String(value) => value.clone(),
                _ => format!(
                    "{} has no attribute {name:?}",
                    describe_target(*index, selector.as_deref())
                ),
            }))
        }
        Action::Screenshot { grid, full_page } => {
            if *grid {
                call_page(lease, "grid()").await?;
            }
            let shot = screenshot(lease.page(), *full_page, timeout).await;
            if *grid {
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
        Action::Highlight => {
            let cap = lease.pool().config().output_chars;
            let answer = call_page(lease, &format!("highlight({{maxChars: {cap}}})")).await?;
            page_error(&answer)?;
            let shot = screenshot(lease.page(), false, timeout).await;
            call_page(lease, "clear()").await?;
            let png = shot?;
            *image = Some(Image {
                media_type: "image/png".to_owned(),
                base64: base64::engine::general_purpose::STANDARD.encode(png),
            });
            Ok(Some(snapshot_text(&answer)))
        }
        Action::TabNew { url } => {
            let tab = lease.new_tab().await?;
            if let Some(url) = url {
                navigate(lease, url).await?;
            }
            Ok(Some(format!("tab {tab} of {}", lease.tab_count())))
        }
        Action::TabSwitch { tab } => {
            // A popup opened by the last action may still be starting: give it a moment.
            let deadline = Instant::now() + Duration::from_secs(3);
            lease.adopt_popups().await?;
            while *tab >= lease.tab_count() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
                lease.adopt_popups().await?;
            }
            lease
                .switch_tab(*tab)
                .map_err(|message| Failure::action("action_failed", message))?;
            // Focus only matters for what the tab shows next; it is not worth failing over.
            let _ =
                tokio::time::timeout(Duration::from_secs(5), lease.page().bring_to_front()).await;
            Ok(Some(format!("tab {tab} of {}", lease.tab_count())))
        }
        Action::TabClose { tab } => {
            lease.adopt_popups().await?;
            let index = tab.unwrap_or(lease.current_tab());
            lease
                .close_tab(index)
                .await
                .map_err(|message| Failure::action("action_failed", message))?;
            Ok(Some(format!(
                "closed tab {index}; tab {} of {} is current",
                lease.current_tab(),
                lease.tab_count()
            )))
        }
        Action::Reset => {
            lease.reset().await?;
            Ok(Some("fresh context".to_owned()))
        }
    }
}

/// Loads `url` in the current tab, with the guard's verdict: a destination the policy refuses
/// is reported as `blocked_destination` before Chromium is asked, and a navigation the egress
/// proxy refused (a redirect to a private address, say) as `blocked_destination` too.
pub async fn navigate(lease: &Lease, url: &str) -> Result<(), Failure> {
    let pool = lease.pool();
    let parsed = pool
        .policy()
        .parse_url(url)
        .map_err(|error| Failure::action(error.code(), error.to_string()))?;
    let origin = origin_of(&parsed);
    let mark = pool.egress().last_seq();
    let timeout = command_timeout(lease);
    let page = lease.page();
    lease.tab().touch();
    lease.tab().forget_document();
    match tokio::time::timeout(timeout, page.goto(parsed.as_str())).await {
        Err(_) => {
            return Err(Failure::action(
                ErrorCode::Timeout.as_str(),
                format!("{origin} did not load within {} s", timeout.as_secs()),
            ));
        }
        Ok(Err(CdpError::ChromeMessage(text))) => {
            // ERR_ABORTED: the navigation was replaced by another one (a same-document
            // navigation, a script redirect); not an error.
            if !text.contains("ERR_ABORTED") {
                let blocked = pool.egress().blocked_after(mark);
                if let Some(block) = blocked.first() {
                    return Err(Failure::action(
                        ErrorCode::BlockedDestination.as_str(),
                        format!(
                            "navigation to {origin} refused: {}:{} is a blocked destination ({})",
                            block.host,
                            block.port,
                            block.reason.as_str()
                        ),
                    ));
                }
                return Err(Error::Navigation {
                    code: navigation_code(&text),
                    origin,
                    text,
                }
                .into());
            }
        }
        Ok(Err(error)) => return Err(Failure::Browser(Error::Crashed(error.to_string()))),
        Ok(Ok(_)) => {}
    }
    // Over plain http the proxy's refusal is an HTTP answer the tab shows as the document:
    // its headers say what happened (a redirect to a private address, an unknown name).
    if let Some(document) = lease.tab().document() {
        if let Some(reason) = document.blocked {
            return Err(Failure::action(
                ErrorCode::BlockedDestination.as_str(),
                format!("navigation to {origin} led to a blocked destination ({reason})"),
            ));
        }
        if let Some(error) = document.proxy_error {
            let code = match error.as_str() {
                "dns_error" => ErrorCode::DnsError,
                "connect_error" => ErrorCode::ConnectError,
                "timeout" => ErrorCode::Timeout,
                _ => ErrorCode::NavigationFailed,
            };
            return Err(Error::Navigation {
                code,
                origin,
                text: format!("the egress proxy answered {error}"),
            }
            .into());
        }
    }
    let current = with_timeout(timeout, page.url()).await?.unwrap_or_default();
    if current.starts_with("chrome-error://") {
        return Err(Failure::action(
            ErrorCode::NavigationFailed.as_str(),
            format!("navigation to {origin} ended on Chromium's error page"),
        ));
    }
    Ok(())
}

/// Evaluates `window.__trawl.<call>` in the page (loading the helpers first when the
/// document does not have them yet) and returns its JSON value.
async fn call_page(lease: &Lease, call: &str) -> Result<Value, Failure> {
    evaluate(lease.page(), call, command_timeout(lease)).await
}

/// Evaluates a page helper call on `page`.
pub(crate) async fn evaluate(page: &Page, call: &str, timeout: Duration) -> Result<Value, Failure> {
    eval_raw(page, format!("{PAGE_JS}\n;window.__trawl.{call}"), timeout).await
}

/// Evaluates `expression` in the page's main frame with a plain `Runtime.evaluate` (no
/// context id: Chromium picks the main world of the current document). chromiumoxide's own
/// `evaluate` first waits for the execution context it tracks, and under load that wait was
/// seen to hang for the whole command timeout after a navigation.
pub(crate) async fn eval_raw(
    page: &Page,
    expression: String,
    timeout: Duration,
) -> Result<Value, Failure> {
    let params = EvaluateParams::builder()
        .expression(expression)
        .return_by_value(true)
        .await_promise(false)
        .build()
        .map_err(|error| Failure::Browser(Error::Crashed(error)))?;
    // Right after a navigation the page's script context is being replaced: a call that lands
    // in the old one fails once, and the next finds the new one.
    let mut retried = false;
    loop {
        let failure = match tokio::time::timeout(timeout, page.execute(params.clone())).await {
            Ok(Ok(response)) => match response.result.exception_details {
                None => return Ok(response.result.result.value.unwrap_or(Value::Null)),
                Some(exception) => Failure::action(
                    "action_failed",
                    format!("the page's script failed: {}", exception.text),
                ),
            },
            Ok(Err(error)) => Failure::Browser(Error::Crashed(error.to_string())),
            Err(_) => {
                return Err(Failure::action(
                    ErrorCode::Timeout.as_str(),
                    format!("the page did not answer within {} s", timeout.as_secs()),
                ));
            }
        };
        if retried {
            return Err(failure);
        }
        retried = true;
        tokio::time::sleep(Duration::from_millis(150)).await;
    }
}

/// The page's title, when it has one.
pub(crate) async fn title(page: &Page, timeout: Duration) -> Option<String> {
    eval_raw(page, "document.title".to_owned(), timeout)
        .await
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .filter(|title| !title.is_empty())
}

/// The page's current HTML.
pub(crate) async fn html(page: &Page, timeout: Duration) -> Result<String, Failure> {
    let value = eval_raw(
        page,
        "(document.doctype ? new XMLSerializer().serializeToString(document.doctype) : '') + \
         (document.documentElement ? document.documentElement.outerHTML : '')"
            .to_owned(),
        timeout,
    )
    .await?;
    Ok(value.as_str().unwrap_or_default().to_owned())
}

fn page_error(answer: &Value) -> Result<(), Failure> {
    match answer.get("error").and_then(Value::as_str) {
        Some(message) => Err(Failure::action("action_failed", message)),
        None => Ok(()),
    }
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

fn target_arg(index: Option<u32>, selector: Option<&str>) -> String {
    match (index, selector) {
        (Some(index), _) => index.to_string(),
        (_, Some(selector)) => json(selector),
        _ => "null".to_owned(),
    }
}

fn describe_target(index: Option<u32>, selector: Option<&str>) -> String {
    match (index, selector) {
        (Some(index), _) => format!("[{index}]"),
        (_, Some(selector)) => format!("{selector:?}"),
        _ => "the focused element".to_owned(),
    }
}

fn json(text: &str) -> String {
    serde_json::to_string(text).expect("strings serialise")
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

async fn screenshot(page: &Page, full_page: bool, timeout: Duration) -> Result<Vec<u8>, Failure> {
    let params = ScreenshotParams::builder()
        .format(CaptureScreenshotFormat::Png)
        .full_page(full_page)
        .build();
    Ok(with_timeout(timeout, page.screenshot(params)).await?)
}

/// A JPEG of the viewport, for session previews.
pub async fn preview(lease: &Lease) -> Result<Vec<u8>, Error> {
    let params = ScreenshotParams::builder()
        .format(CaptureScreenshotFormat::Jpeg)
        .quality(60)
        .build();
    with_timeout(command_timeout(lease), lease.page().screenshot(params)).await
}

fn snapshot_text(answer: &Value) -> String {
    let text = answer["text"].as_str().unwrap_or_default();
    let count = answer["count"].as_u64().unwrap_or(0);
    if count == 0 {
        return "no visible actionable elements".to_owned();
    }
    text.to_owned()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actions_parse_from_their_json_form() {
        let action: Action =
            serde_json::from_str(r#"{"action":"click","index":3}"#).expect("valid");
        assert_eq!(
            action,
            Action::Click {
                index: Some(3),
                selector: None,
                x: None,
                y: None
            }
        );
        assert!(serde_json::from_str::<Action>(r#"{"action":"click","nope":1}"#).is_err());
        assert!(serde_json::from_str::<Action>(r#"{"action":"teleport"}"#).is_err());
        let action: Action =
            serde_json::from_str(r#"{"action":"scroll","direction":"down"}"#).expect("valid");
        assert_eq!(action.name(), "scroll");
    }

    #[test]
    fn bad_arguments_are_named_before_anything_runs() {
        let both = Action::Click {
            index: Some(1),
            selector: Some("#a".to_owned()),
            x: None,
            y: None,
        };
        assert!(both.validate().expect_err("refused").contains("not both"));
        let scheme = Action::Goto {
            url: "file:///etc/passwd".to_owned(),
        };
        assert!(scheme.validate().expect_err("refused").contains("scheme"));
        let key = Action::Press {
            key: "Hyper".to_owned(),
        };
        assert!(key.validate().expect_err("refused").contains("unknown key"));
        let wait = Action::Wait {
            selector: None,
            text: None,
            idle: false,
            ms: Some(60_000),
        };
        assert!(wait.validate().is_err());
        assert_eq!(Action::Snapshot.validate(), Ok(()));
    }

    #[test]
    fn named_keys_are_known_to_chromiumoxide() {
        for key in KEYS {
            let name = if *key == "Space" { " " } else { key };
            assert!(
                chromiumoxide::keys::get_key_definition(name).is_some(),
                "{key}"
            );
        }
    }
}
