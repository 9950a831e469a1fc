//! Browse jobs and their results: a URL, the actions to run on it, the device profile the
//! browser pretends to be, and the credentials it browses with; the result is one outcome per
//! action, and the page the script ended on (stored like a fetched page unless `store:
//! false`, and archived for RAG with `archive: true`).
//!
//! Not here: the browser and running actions (`crate::browse`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::action::{Action, ActionOutcome};
use super::credentials::Credentials;

/// Open a page in a fresh browser context and run actions on it, each with its own result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BrowseJob {
    /// The http or https URL loaded first.
    #[schema(format = "uri")]
    pub url: String,
    /// What to do on it, in order (at most 100); the script stops at the first failure.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// The device the browser pretends to be.
    #[serde(default)]
    pub profile: Profile,
    /// Cookies, headers and localStorage to browse with (secrets: never logged, and shown
    /// only as counts when the job is read back).
    #[serde(default, skip_serializing_if = "Credentials::is_empty")]
    pub credentials: Credentials,
    /// Store the page the script ends on like a fetched page (extracted, its markdown and
    /// HTML kept, `extractor: "browser"`; the result's `page_id` reads it): pages reached
    /// after a login or a click reach `read`, `grep` and the archive. `false` keeps nothing.
    #[serde(default = "default_store")]
    #[schema(default = true)]
    pub store: bool,
    /// Queue the stored page for the RAG archive (the tantivy index and the WARC file).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archive: bool,
}

fn default_store() -> bool {
    true
}

/// Actions one browse job may run.
pub const MAX_ACTIONS: usize = 100;

impl BrowseJob {
    /// Checks the actions and credentials (the URL is checked when the job runs).
    pub fn validate(&self) -> Result<(), String> {
        if self.actions.len() > MAX_ACTIONS {
            return Err(format!(
                "a browse job runs at most {MAX_ACTIONS} actions, not {}",
                self.actions.len()
            ));
        }
        for (number, action) in self.actions.iter().enumerate() {
            action
                .validate()
                .map_err(|message| format!("action {}: {message}", number + 1))?;
        }
        if self.archive && !self.store {
            return Err("archive: true needs the page stored (store: false was given)".to_owned());
        }
        self.credentials.validate()
    }
}

/// The result of a browse job: what each action did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct BrowseResult {
    /// The URL loaded first.
    pub url: String,
    /// The current tab's URL at the end.
    pub final_url: String,
    /// The current tab's title at the end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// One outcome per action run, in order.
    pub steps: Vec<ActionOutcome>,
    /// True when every action succeeded (the script stops at the first failure).
    pub completed: bool,
    /// Milliseconds the whole script took.
    pub took_ms: u64,
    /// The stored final page (`GET /v1/pages/{id}`, `read`, `grep`), with `store`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_id: Option<String>,
    /// Why the final page was not stored (it could not be taken or extracted, e.g.
    /// `empty_content`); the steps stand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_warning: Option<String>,
    /// The final page as the browser had it, for the runner to store (never serialised).
    #[serde(skip)]
    pub page: Option<RenderedPage>,
}

/// A page as the browser has it: the DOM serialised, the tab's URL, its navigation status.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderedPage {
    /// The DOM as HTML (open shadow roots inlined).
    pub html: String,
    /// The tab's URL.
    pub url: String,
    /// The main document's HTTP status (200 when the page does not say).
    pub status: u16,
}

/// A device the browser pretends to be.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// 1280×800, Chrome user agent.
    #[default]
    Desktop,
    /// iPad 820×1180, touch, Safari iOS user agent.
    Mobile,
}

impl Profile {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Desktop => "desktop",
            Profile::Mobile => "mobile",
        }
    }
}
