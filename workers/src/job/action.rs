//! The browser actions a script or an agent session runs (`goto`, `click`, `type`, `snapshot`,
//! `screenshot`, …) with their JSON form and argument checks, and what one action returns
//! ([`ActionOutcome`]): its text output, an image, the tab's URL and title after it, and an
//! error with a public code when it failed.
//!
//! Not here: running an action in a browser (`crate::browse::actions`).

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

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
    pub(crate) fn as_str(self) -> &'static str {
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
}
