//! The browse pool: headless Chromium driven over CDP (chromiumoxide), for pages built by
//! JavaScript (`render`) and for scripted or interactive browsing (`actions`).
//!
//! - `pool`: the [`Pool`]: one system Chromium (never downloaded), started on first use;
//!   bounds the jobs' contexts (`browser_busy` when full), refuses sessions on a browser at
//!   its memory bound, and recycles the browser (after N contexts or above a memory
//!   threshold); replaces a browser that crashed or hung.
//! - `launch`: finding and starting Chromium (the override, the system's, a Playwright
//!   one), stopping it: temporary profile, launcher tied to the worker's life, command line
//!   behind the egress proxy, headless or not, sweep of stale profiles.
//! - `memory`: the memory (PSS) of the browser's process tree, from `/proc`.
//! - `lease`: a [`Lease`]: one isolated browser context per job or session, with its tabs.
//! - `tab`: one tab: its page, requests in flight (network idle), main document, crashes.
//! - `emulate`: the device profile and the credentials applied to each new tab (headers
//!   only on requests to their own origin).
//! - `egress`: the in-process HTTP proxy every browser request goes through, applying the
//!   same SSRF policy as the HTTP client, on the address actually connected to.
//! - `actions`: running the action set (`goto`, `click`, `type`, `snapshot`, `screenshot`,
//!   …) in a lease, each returning its outcome.
//! - `render`: goto, wait for network idle, then the same extraction as a fetch.
//! - `script`: browse jobs: a URL and a list of actions, each with its outcome.
//! - `page.js`: the page-side helpers (snapshot numbering, fill, scroll hints, find).
//!
//! The data a browse job carries (actions and their outcomes, the device profile, the
//! credentials) is part of the job contract (`crate::job`) and re-exported here.
//!
//! Not here: queues, storage, sessions' lifetimes and owners (the runner and the API keep
//! those); this module returns data.

pub mod actions;
pub mod egress;
mod emulate;
mod launch;
pub mod lease;
mod memory;
pub mod pool;
pub mod render;
pub mod script;
pub mod tab;

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::job::{ErrorCode, JobError};

pub use crate::job::{Action, ActionOutcome, Credentials, Profile};
pub use lease::{Lease, SavedState};
pub use pool::Pool;

/// Browser options. Every field is a `trawl.toml` key under `[browse]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// The Chromium executable. Unset: the system's Chromium under its usual names, else a
    /// Chromium Playwright installed (trawl never downloads a browser); see
    /// [`Config::find_executable`].
    pub executable: Option<PathBuf>,
    /// Browser contexts (jobs and sessions) open at once; more get `browser_busy`.
    pub max_contexts: usize,
    /// Seconds a queued job waits for a free context before failing with `browser_busy`
    /// (retried later); sessions never wait.
    pub slot_wait_secs: u64,
    /// The browser is restarted after this many contexts (Chromium's memory creeps up).
    pub recycle_after: u64,
    /// The browser is restarted when its process tree uses more than this (MB of proportional set size, shared pages counted once).
    pub max_memory_mb: u64,
    /// Seconds Chromium may take to start.
    pub launch_timeout_secs: u64,
    /// Seconds one CDP command or navigation may take.
    pub command_timeout_secs: u64,
    /// Characters at most in one action's output.
    pub output_chars: usize,
    /// Network idle: milliseconds without a request in flight.
    pub idle_quiet_ms: u64,
    /// Network idle: milliseconds at most to wait for it.
    pub idle_max_ms: u64,
    /// Where temporary profiles go (the system temp dir when unset). Profiles older than an
    /// hour left there by a killed worker are swept at start.
    pub profile_root: Option<PathBuf>,
    /// Characters a `read` returns when it does not say (`max_chars`).
    pub read_chars: usize,
    /// Characters a `read` may ask for at most.
    pub read_max_chars: usize,
    /// Bytes of HTML a `read_html` returns at most (`too_large` beyond).
    pub max_html_bytes: usize,
    /// Run the browser headless (false: a visible window, to watch a script; needs a display).
    pub headless: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            executable: None,
            max_contexts: 4,
            slot_wait_secs: 30,
            recycle_after: 200,
            max_memory_mb: 2_048,
            launch_timeout_secs: 30,
            command_timeout_secs: 30,
            output_chars: 8_000,
            idle_quiet_ms: 600,
            idle_max_ms: 6_000,
            profile_root: None,
            read_chars: 30_000,
            read_max_chars: 200_000,
            max_html_bytes: 5_000_000,
            headless: true,
        }
    }
}

impl Config {
    /// The browser to start and how it was found: `browse.executable` when set, else the
    /// first of the system's Chromium names on `PATH` and in the usual directories, else the
    /// newest Chromium under Playwright's cache (`PLAYWRIGHT_BROWSERS_PATH`, or
    /// `~/.cache/ms-playwright`). `Err` lists where it looked.
    pub fn find_executable(&self) -> Result<(PathBuf, &'static str), String> {
        if let Some(path) = &self.executable {
            return Ok((path.clone(), "browse.executable"));
        }
        launch::find_system_or_playwright()
    }

    /// The executable's path for messages (the override, the one found, or the usual name).
    pub fn executable_shown(&self) -> String {
        match self.find_executable() {
            Ok((path, _)) => path.display().to_string(),
            Err(_) => "chromium".to_owned(),
        }
    }

    /// Checks the values against their bounds.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_contexts == 0 || self.max_contexts > 256 {
            return Err(format!(
                "browse.max_contexts = {} must be within 1..=256",
                self.max_contexts
            ));
        }
        if self.recycle_after == 0 {
            return Err("browse.recycle_after must be at least 1".to_owned());
        }
        if self.max_memory_mb < 128 {
            return Err("browse.max_memory_mb must be at least 128".to_owned());
        }
        if self.launch_timeout_secs == 0 || self.command_timeout_secs == 0 {
            return Err(
                "browse.launch_timeout_secs and browse.command_timeout_secs must be at least 1"
                    .to_owned(),
            );
        }
        if self.output_chars < 100 {
            return Err("browse.output_chars must be at least 100".to_owned());
        }
        if self.read_chars == 0 || self.read_chars > self.read_max_chars {
            return Err(format!(
                "browse.read_chars = {} must be within 1..=browse.read_max_chars ({})",
                self.read_chars, self.read_max_chars
            ));
        }
        if self.max_html_bytes < 1_000 || self.max_html_bytes > 100_000_000 {
            return Err("browse.max_html_bytes must be within 1000..=100000000".to_owned());
        }
        if self.idle_max_ms < self.idle_quiet_ms {
            return Err("browse.idle_max_ms must be at least browse.idle_quiet_ms".to_owned());
        }
        Ok(())
    }
}

/// Why the browser could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Every context is taken.
    #[error("the browser is busy: all {0} contexts are in use; try again later")]
    Busy(usize),
    /// The browser uses all the memory it may (`browse.max_memory_mb`): no session is opened
    /// on it.
    #[error(
        "the browser is full: it uses {used_mb} MB of its {limit_mb} MB (browse.max_memory_mb); \
         close a session or try again later"
    )]
    Full {
        /// Its memory now (PSS, MB).
        used_mb: u64,
        /// The limit.
        limit_mb: u64,
    },
    /// Chromium could not be started.
    #[error("could not start the browser ({path}): {message}")]
    Launch {
        /// The executable.
        path: String,
        /// What went wrong.
        message: String,
    },
    /// The browser crashed or stopped answering.
    #[error("the browser failed: {0}")]
    Crashed(String),
    /// A navigation failed.
    #[error("navigation to {origin} failed: {text}")]
    Navigation {
        /// The code it maps to.
        code: ErrorCode,
        /// The URL's origin.
        origin: String,
        /// Chromium's error text (`net::ERR_…`) or the guard's reason.
        text: String,
    },
    /// A command took longer than allowed.
    #[error("the browser did not answer within {0} s")]
    Timeout(u64),
}

impl Error {
    /// The public error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Busy(_) | Error::Full { .. } => ErrorCode::BrowserBusy,
            Error::Launch { .. } | Error::Crashed(_) => ErrorCode::BrowserFailed,
            Error::Navigation { code, .. } => *code,
            Error::Timeout(_) => ErrorCode::Timeout,
        }
    }

    /// True when a later attempt may succeed.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Busy(_) | Error::Full { .. } | Error::Crashed(_) | Error::Timeout(_) => true,
            Error::Launch { .. } => false,
            Error::Navigation { code, .. } => matches!(
                code,
                ErrorCode::ConnectError | ErrorCode::Timeout | ErrorCode::NavigationFailed
            ),
        }
    }

    /// The job error.
    pub fn to_job_error(&self) -> JobError {
        let mut error = JobError::new(self.code(), self.to_string());
        error.transient = self.is_transient();
        error
    }
}

/// Runs a CDP call under a timeout, mapping its failure to a browser error.
pub(crate) async fn with_timeout<T>(
    timeout: Duration,
    call: impl Future<Output = chromiumoxide::error::Result<T>>,
) -> Result<T, Error> {
    match tokio::time::timeout(timeout, call).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(Error::Crashed(error.to_string())),
        Err(_) => Err(Error::Timeout(timeout.as_secs())),
    }
}

/// Maps Chromium's network error text to a public code.
pub fn navigation_code(text: &str) -> ErrorCode {
    let name = text
        .split_whitespace()
        .find(|word| word.starts_with("net::ERR_"))
        .unwrap_or(text);
    match name.trim_start_matches("net::ERR_") {
        "NAME_NOT_RESOLVED" | "NAME_RESOLUTION_FAILED" => ErrorCode::DnsError,
        "CONNECTION_REFUSED"
        | "CONNECTION_RESET"
        | "CONNECTION_CLOSED"
        | "CONNECTION_FAILED"
        | "ADDRESS_UNREACHABLE"
        | "EMPTY_RESPONSE"
        | "PROXY_CONNECTION_FAILED" => ErrorCode::ConnectError,
        "TIMED_OUT" | "CONNECTION_TIMED_OUT" => ErrorCode::Timeout,
        "TOO_MANY_REDIRECTS" => ErrorCode::TooManyRedirects,
        "UNSAFE_REDIRECT" | "INVALID_REDIRECT" => ErrorCode::RedirectMissingLocation,
        "DISALLOWED_URL_SCHEME" | "UNKNOWN_URL_SCHEME" => ErrorCode::UnsupportedScheme,
        "INVALID_URL" => ErrorCode::InvalidUrl,
        "BLOCKED_BY_CLIENT" | "BLOCKED_BY_ADMINISTRATOR" | "ACCESS_DENIED" => {
            ErrorCode::BlockedDestination
        }
        other if other.starts_with("CERT_") || other.starts_with("SSL_") => ErrorCode::TlsError,
        _ => ErrorCode::NavigationFailed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chromium_network_errors_map_to_public_codes() {
        assert_eq!(
            navigation_code("net::ERR_NAME_NOT_RESOLVED"),
            ErrorCode::DnsError
        );
        assert_eq!(
            navigation_code("net::ERR_CONNECTION_REFUSED"),
            ErrorCode::ConnectError
        );
        assert_eq!(
            navigation_code("net::ERR_CERT_AUTHORITY_INVALID"),
            ErrorCode::TlsError
        );
        assert_eq!(
            navigation_code("net::ERR_SOMETHING_NEW"),
            ErrorCode::NavigationFailed
        );
    }

    #[test]
    fn default_config_is_valid_and_bad_values_are_named() {
        assert_eq!(Config::default().validate(), Ok(()));
        let config = Config {
            max_contexts: 0,
            ..Config::default()
        };
        assert!(
            config
                .validate()
                .expect_err("refused")
                .contains("max_contexts")
        );
    }
}
