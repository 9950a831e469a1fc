//! Running the actions a script or an agent session sends to a tab. One action in, one
//! [`ActionOutcome`] out: its text output (capped), an image for `screenshot` and
//! `highlight`, the tab's URL and title after it, and an error with a public code when it
//! failed. Element indexes come from the last `snapshot` (or `highlight`) and stay valid until
//! the page changes. [`run`] checks the action, runs it (failing it at once if the tab's
//! renderer crashes), and builds the outcome; the work of each action is in its family's
//! module:
//!
//! - `navigation`: goto, back and forward, reload, and [`navigate`] (the guarded load every
//!   other navigation goes through).
//! - `input`: click, type, press, hover, select, scroll.
//! - `wait`: waits for a selector, a text, network idle or a time.
//! - `observe`: snapshot, accessibility tree, read, read_html, find, get_attribute,
//!   screenshot, highlight.
//! - `tabs`: opening, switching and closing tabs, and starting over in a fresh context.
//! - `page`: calls into the page-side helpers (`page.js`) and plain script evaluation.
//!
//! The actions themselves, their arguments' checks and their outcome are part of the job
//! contract (`crate::job`) and re-exported here.
//!
//! Not here: where outcomes go (job results, session replay logs) or the browser's lifetime.

mod input;
mod navigation;
mod observe;
mod page;
mod tabs;
mod wait;

use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::page::CaptureScreenshotFormat;
use chromiumoxide::page::ScreenshotParams;

use super::lease::Lease;
use super::{Error, with_timeout};
use crate::fetch::truncate_chars;
use crate::job::ErrorCode;

pub use crate::job::{
    Action, ActionError, ActionOutcome, Image, KEYS, ReadScope, ScrollDirection, WaitUntil,
};
pub use navigation::navigate;
pub(crate) use page::{eval_raw, evaluate, html, title};

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
    pub(super) fn action(code: impl Into<String>, message: impl Into<String>) -> Failure {
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

/// What an action leaves beside its text output.
#[derive(Debug, Default)]
pub(super) struct Extra {
    /// `screenshot`, `highlight`: the picture.
    pub(super) image: Option<Image>,
    /// `read_html`: the HTML, base64.
    pub(super) html_base64: Option<String>,
    /// `read`: the page's lines, and where the next range starts.
    pub(super) total_lines: Option<usize>,
    pub(super) next_from: Option<usize>,
    /// `read`: the output was cut at its own `max_chars` (not `browse.output_chars`).
    pub(super) read_cap: Option<(usize, bool)>,
    /// `snapshot`, `highlight`: elements listed.
    pub(super) count: Option<usize>,
    /// `type` typed a secret (a password field).
    pub(super) typed_secret: bool,
    /// `snapshot`: the same elements as the tab's previous snapshot.
    pub(super) unchanged: bool,
    /// `archive`: the page taken.
    pub(super) taken: Option<crate::job::RenderedPage>,
}

/// Runs one action in the lease's current tab. `Err` only when the browser failed (crashed,
/// hung): the caller retires the lease. Any other failure is an outcome with `ok: false`.
pub async fn run(lease: &mut Lease, action: &Action) -> Result<ActionOutcome, Error> {
    let started = Instant::now();
    let mut extra = Extra::default();
    let result = match action.validate() {
        Err(message) => Err(Failure::action("invalid_action", message)),
        Ok(()) => perform_watched(lease, action, &mut extra).await,
    };
    let cap = lease.pool().config().output_chars;
    let (output, error) = match result {
        Ok(output) => (output, None),
        Err(Failure::Browser(error)) => return Err(error),
        Err(Failure::Action { code, message }) => (None, Some(ActionError { code, message })),
    };
    let (output, truncated) = match (output, extra.read_cap) {
        // `read` cut its own range (by lines, at its `max_chars`).
        (Some(text), Some((_, cut))) => (Some(text), cut),
        (Some(text), None) => {
            let shown = truncate_chars(&text, cap);
            let truncated = shown.len() < text.len();
            (Some(shown.to_owned()), truncated)
        }
        (None, _) => (None, false),
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
        image: extra.image,
        html_base64: extra.html_base64,
        total_lines: extra.total_lines,
        next_from: extra.next_from,
        count: extra.count,
        unchanged: extra.unchanged,
        recovered: false,
        typed_secret: extra.typed_secret || matches!(action, Action::Type { secret: true, .. }),
        page_id: None,
        taken: extra.taken,
    })
}

/// Runs an action, failing it with `page_crashed` as soon as the current tab's renderer
/// crashes (instead of waiting out the command timeout). On a crashed tab only what gives it
/// a new page (goto, reload) or leaves it (tabs, reset) runs.
async fn perform_watched(
    lease: &mut Lease,
    action: &Action,
    extra: &mut Extra,
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
        | Action::Reset => return perform(lease, action, extra).await,
        Action::Goto { .. } | Action::Reload => tab.recovered(),
        _ if tab.crashed() => return Err(crashed()),
        _ => {}
    }
    tokio::select! {
        result = perform(lease, action, extra) => result,
        () = tab.crash() => Err(crashed()),
    }
}

pub(super) fn command_timeout(lease: &Lease) -> Duration {
    Duration::from_secs(lease.pool().config().command_timeout_secs)
}

/// How long a page gets to settle after an interaction (a click that navigates, a form that
/// submits): the configured quiet period, at most 3 s.
pub(super) async fn settle(lease: &Lease) {
    let config = lease.pool().config();
    let quiet = Duration::from_millis(config.idle_quiet_ms.min(300));
    let max = Duration::from_millis(config.idle_max_ms.min(3_000));
    lease.tab().wait_idle(quiet, max).await;
}

/// Runs one action, by family.
async fn perform(
    lease: &mut Lease,
    action: &Action,
    extra: &mut Extra,
) -> Result<Option<String>, Failure> {
    match action {
        Action::Goto { url, wait_until } => {
            navigation::goto(lease, url, wait_until.unwrap_or_default()).await
        }
        Action::Back => navigation::history(lease, -1).await,
        Action::Forward => navigation::history(lease, 1).await,
        Action::Reload => navigation::reload(lease).await,
        Action::Click {
            index,
            selector,
            role,
            name,
            x,
            y,
        } => {
            let index = by_role(lease, *index, role, name).await?;
            input::click(lease, index, selector.as_deref(), *x, *y).await
        }
        Action::Type {
            index,
            selector,
            role,
            name,
            text,
            submit,
            ..
        } => {
            let index = by_role(lease, *index, role, name).await?;
            let (output, password) =
                input::type_text(lease, index, selector.as_deref(), text, *submit).await?;
            extra.typed_secret = password;
            Ok(output)
        }
        Action::Press { key } => input::press_key(lease, key).await,
        Action::Hover {
            index,
            selector,
            role,
            name,
        } => {
            let index = by_role(lease, *index, role, name).await?;
            input::hover(lease, index, selector.as_deref()).await
        }
        Action::Select {
            index,
            selector,
            role,
            name,
            label,
            value,
        } => {
            let index = by_role(lease, *index, role, name).await?;
            let (label, value) = (label.as_deref(), value.as_deref());
            input::select(lease, index, selector.as_deref(), label, value).await
        }
        Action::Scroll { direction } => input::scroll(lease, *direction).await,
        Action::Wait {
            selector,
            text,
            idle,
            ms,
        } => wait::wait(lease, selector.as_deref(), text.as_deref(), *idle, *ms).await,
        Action::Snapshot => observe::snapshot(lease, extra).await,
        Action::A11y => observe::a11y(lease).await,
        Action::Read {
            max_chars,
            from,
            to,
            scope,
        } => {
            let range = observe::ReadRange {
                max_chars: *max_chars,
                from: *from,
                to: *to,
                scope: *scope,
            };
            observe::read(lease, range, extra).await
        }
        Action::ReadHtml => observe::read_html(lease, extra).await,
        Action::Find { text } => observe::find(lease, text).await,
        Action::GetAttribute {
            index,
            selector,
            name,
        } => observe::get_attribute(lease, *index, selector.as_deref(), name).await,
        Action::Screenshot {
            grid,
            grid_step,
            full_page,
        } => {
            let grid = grid.then(|| grid_step.unwrap_or(100));
            observe::screenshot(lease, grid, *full_page, &mut extra.image).await
        }
        Action::Highlight => observe::highlight(lease, extra).await,
        Action::TabNew { url } => tabs::tab_new(lease, url.as_deref()).await,
        Action::TabSwitch { tab } => tabs::tab_switch(lease, *tab).await,
        Action::TabClose { tab } => tabs::tab_close(lease, *tab).await,
        Action::Reset => tabs::reset(lease).await,
        Action::Archive => {
            let taken = super::render::capture(lease.page(), command_timeout(lease))
                .await
                .map_err(Failure::from)?;
            let output = format!("took {} ({} bytes of HTML)", taken.url, taken.html.len());
            extra.taken = Some(taken);
            Ok(Some(output))
        }
    }
}

/// The element an action targets by `{role, name}`, as an element number the page helpers
/// know (`index` as given otherwise).
async fn by_role(
    lease: &Lease,
    index: Option<u32>,
    role: &Option<String>,
    name: &Option<String>,
) -> Result<Option<u32>, Failure> {
    match role {
        Some(role) => Ok(Some(
            observe::element_by_role(lease, role, name.as_deref()).await?,
        )),
        None => Ok(index),
    }
}

/// A JPEG of the viewport, for session previews.
pub async fn preview(lease: &Lease) -> Result<Vec<u8>, Error> {
    let params = ScreenshotParams::builder()
        .format(CaptureScreenshotFormat::Jpeg)
        .quality(60)
        .build();
    with_timeout(command_timeout(lease), lease.page().screenshot(params)).await
}

#[cfg(test)]
mod tests {
    use super::*;

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
