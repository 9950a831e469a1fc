//! The browser actions a script or an agent session runs (`goto`, `click`, `type`, `snapshot`,
//! `screenshot`, …) with their JSON form and argument checks, and what one action returns
//! ([`ActionOutcome`]): its text output, an image, the tab's URL and title after it, and an
//! error with a public code when it failed.
//!
//! Not here: running an action in a browser (`crate::browse::actions`).

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::object::objects_only;

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

/// The longest a `wait` action waits, in milliseconds.
pub const MAX_WAIT_MS: u64 = 30_000;

/// One step of a script or a session.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(
    remote = "Self",
    tag = "action",
    rename_all = "snake_case",
    deny_unknown_fields
)]
pub enum Action {
    /// Load a URL in the current tab.
    Goto {
        /// An http or https URL.
        url: String,
        /// What to wait for before the action ends: `idle` (the default: the load event,
        /// then network idle), `load` (the load event), `none` (the navigation's start).
        /// Always bounded by `browse.command_timeout_secs`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        wait_until: Option<WaitUntil>,
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
        /// The element's accessibility role (`button`, `link`, `textbox`, …), with `name`:
        /// the first element of that role whose accessible name is `name` exactly, else the
        /// first whose name contains it (case-insensitive).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        /// The element's accessible name (with `role`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
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
        /// The element's accessibility role (`button`, `link`, `textbox`, …), with `name`:
        /// the first element of that role whose accessible name is `name` exactly, else the
        /// first whose name contains it (case-insensitive).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        /// The element's accessible name (with `role`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The text.
        text: String,
        /// Press Enter afterwards.
        #[serde(default)]
        submit: bool,
        /// The text is a secret: the replay log and the outcomes show it as `•` characters
        /// (its length kept), never verbatim. Text typed into a password field is treated so
        /// without it.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        secret: bool,
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
        /// The element's accessibility role (`button`, `link`, `textbox`, …), with `name`:
        /// the first element of that role whose accessible name is `name` exactly, else the
        /// first whose name contains it (case-insensitive).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        /// The element's accessible name (with `role`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Choose an option of a native `<select>` by its label or value.
    Select {
        /// The select's number in the last snapshot.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        index: Option<u32>,
        /// The select's selector.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        selector: Option<String>,
        /// The element's accessibility role (`button`, `link`, `textbox`, …), with `name`:
        /// the first element of that role whose accessible name is `name` exactly, else the
        /// first whose name contains it (case-insensitive).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<String>,
        /// The element's accessible name (with `role`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
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
    /// The page as markdown: its main content as a fetch extracts it (`scope: "main"`, the
    /// default) or the whole visible page (`scope: "page"`), by line range.
    Read {
        /// Characters at most (default 30,000; at most `browse.read_max_chars`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_chars: Option<usize>,
        /// The first line to return (1-based; default 1).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        from: Option<usize>,
        /// The last line to return (inclusive; default: as many as `max_chars` allows).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to: Option<usize>,
        /// `main` (Readability's main content) or `page` (all the visible text).
        #[serde(default)]
        scope: ReadScope,
    },
    /// The page's complete current HTML (open shadow roots inlined), base64-encoded in
    /// `html_base64`, up to `browse.max_html_bytes` (`too_large` beyond).
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
        /// Draw a coordinate grid over it.
        #[serde(default)]
        grid: bool,
        /// The grid's spacing in CSS pixels (default 100; 10 to 1,000).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        grid_step: Option<u32>,
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
    /// Store the current page like a fetched one (extracted, `extractor: "browser"`; its id
    /// in the outcome's `page_id`) and queue it for the RAG archive: what an agent reached
    /// after a login or a click becomes searchable.
    Archive,
}

/// What `goto` waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum WaitUntil {
    /// The load event, then network idle (`browse.idle_quiet_ms` without a request in
    /// flight, at most `browse.idle_max_ms`).
    #[default]
    Idle,
    /// The load event.
    Load,
    /// The navigation's start: the action ends once the new document answered.
    None,
}

/// What `read` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReadScope {
    /// The main content, as a fetch extracts it (Readability, then pruning).
    #[default]
    Main,
    /// All the visible text of the page, as markdown.
    Page,
}

/// `text` with every character shown as `•` (its length kept): how secrets typed into a
/// page appear in replay logs and outcomes.
pub fn mask(text: &str) -> String {
    "\u{2022}".repeat(text.chars().count())
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
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            ScrollDirection::Up => "up",
            ScrollDirection::Down => "down",
            ScrollDirection::Top => "top",
            ScrollDirection::Bottom => "bottom",
        }
    }
}

// Read from a JSON object only (a sequence's first element would be taken for `action`).
objects_only!(Action => "an action");

impl Action {
    /// The action as the replay log keeps it: a `type` whose text was a secret (`secret`,
    /// or `typed_secret`: the field was a password field) shows it masked.
    pub fn logged(&self, typed_secret: bool) -> Action {
        let mut action = self.clone();
        if let Action::Type { text, secret, .. } = &mut action
            && (*secret || typed_secret)
        {
            *text = mask(text);
            *secret = true;
        }
        action
    }

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
            Action::Read { .. } => "read",
            Action::ReadHtml => "read_html",
            Action::Find { .. } => "find",
            Action::GetAttribute { .. } => "get_attribute",
            Action::Screenshot { .. } => "screenshot",
            Action::Highlight => "highlight",
            Action::TabNew { .. } => "tab_new",
            Action::TabSwitch { .. } => "tab_switch",
            Action::TabClose { .. } => "tab_close",
            Action::Reset => "reset",
            Action::Archive => "archive",
        }
    }

    /// True for actions that may change what the page shows (a preview follows them).
    pub fn changes_page(&self) -> bool {
        !matches!(
            self,
            Action::Snapshot
                | Action::A11y
                | Action::Read { .. }
                | Action::ReadHtml
                | Action::Find { .. }
                | Action::GetAttribute { .. }
                | Action::Screenshot { .. }
                | Action::Highlight
                | Action::Wait { .. }
                | Action::Archive
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
        // index, selector, or {role, name}: one of them.
        let target = |index: &Option<u32>,
                      selector: &Option<String>,
                      role: &Option<String>,
                      accessible: &Option<String>| {
            match (role, accessible) {
                (None, Some(_)) => Err(format!("{name}: name goes with role")),
                (Some(_), _) if index.is_some() || selector.is_some() => Err(format!(
                    "{name}: give one of index, selector or role (with name)"
                )),
                (Some(role), _) if role.trim().is_empty() => {
                    Err(format!("{name}: the role is empty"))
                }
                (Some(_), _) => Ok(()),
                (None, None) => one_target(index, selector),
            }
        };
        match self {
            Action::Goto { url, .. } => check_http_url(url),
            Action::Read {
                max_chars,
                from,
                to,
                ..
            } => {
                if max_chars == &Some(0) {
                    return Err("read: max_chars is at least 1".to_owned());
                }
                match (from, to) {
                    (Some(0), _) | (_, Some(0)) => Err("read: lines start at 1".to_owned()),
                    (Some(from), Some(to)) if to < from => {
                        Err(format!("read: to ({to}) is before from ({from})"))
                    }
                    _ => Ok(()),
                }
            }
            Action::Screenshot {
                grid_step: Some(step),
                ..
            } if !(10..=1_000).contains(step) => Err(format!(
                "screenshot: grid_step {step} must be within 10..=1000"
            )),
            Action::TabNew { url: Some(url) } => check_http_url(url),
            Action::Click {
                index,
                selector,
                role,
                name: accessible,
                x,
                y,
            } => match (x, y) {
                (Some(x), Some(y)) if index.is_none() && selector.is_none() && role.is_none() => {
                    if x.is_finite() && y.is_finite() && *x >= 0.0 && *y >= 0.0 {
                        Ok(())
                    } else {
                        Err("click: x and y must be non-negative numbers".to_owned())
                    }
                }
                (None, None) => target(index, selector, role, accessible),
                _ => {
                    Err("click: give index, selector, role (with name), or both x and y".to_owned())
                }
            },
            Action::Type {
                index,
                selector,
                role,
                name: accessible,
                ..
            } => {
                if index.is_none() && selector.is_none() && role.is_none() && accessible.is_none() {
                    Ok(())
                } else {
                    target(index, selector, role, accessible)
                }
            }
            Action::GetAttribute { name, .. } if name.is_empty() => {
                Err("get_attribute: the name is empty".to_owned())
            }
            Action::Hover {
                index,
                selector,
                role,
                name: accessible,
            } => target(index, selector, role, accessible),
            Action::GetAttribute {
                index, selector, ..
            } => one_target(index, selector),
            Action::Select {
                index,
                selector,
                role,
                name: accessible,
                label,
                value,
            } => {
                target(index, selector, role, accessible)?;
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
                if ms.is_some_and(|ms| ms > MAX_WAIT_MS) {
                    return Err(format!("wait: ms is at most {MAX_WAIT_MS}"));
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
    /// `read_html`: the page's complete HTML, base64 (UTF-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub html_base64: Option<String>,
    /// `read`: the page's number of lines, and the first line after the range returned
    /// (`None` at the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_lines: Option<usize>,
    /// `read`: the `from` of the next range (absent at the end).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_from: Option<usize>,
    /// `snapshot`: the page's actionable elements are the same as at the previous snapshot of
    /// this tab (no list is sent again; its numbers still hold).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
    /// `highlight` and `snapshot`: the number of elements listed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<usize>,
    /// A session's browser failed before this action and was relaunched: the action ran in a
    /// new tab at the session's last URL, its cookies and localStorage restored.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub recovered: bool,
    /// The action typed a secret (a password field, or `secret: true`): the session's replay
    /// log keeps its text masked.
    #[serde(skip)]
    pub typed_secret: bool,
    /// `archive`: the stored page's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_id: Option<String>,
    /// `archive`: the page as the browser had it, for the caller to store (never serialised).
    #[serde(skip)]
    pub taken: Option<super::browse::RenderedPage>,
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
                role: None,
                name: None,
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
            role: None,
            name: None,
            x: None,
            y: None,
        };
        assert!(both.validate().expect_err("refused").contains("not both"));
        let by_role: Action =
            serde_json::from_str(r#"{"action":"click","role":"button","name":"Sign in"}"#)
                .expect("valid");
        assert_eq!(by_role.validate(), Ok(()));
        let name_alone: Action =
            serde_json::from_str(r#"{"action":"hover","name":"Sign in"}"#).expect("parses");
        assert!(name_alone.validate().expect_err("refused").contains("role"));
        let mixed: Action = serde_json::from_str(r#"{"action":"click","role":"button","index":2}"#)
            .expect("parses");
        assert!(mixed.validate().is_err());
        let scheme = Action::Goto {
            url: "file:///etc/passwd".to_owned(),
            wait_until: None,
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
}
