//! Rendering a page for `render: true` (and `"auto"` when the plain page looks built by
//! JavaScript): load it in a fresh context, wait for network idle (the configured quiet
//! period, at most the configured maximum), take the DOM as Chromium built it, and extract it
//! exactly like a fetched page. The result is a fetch result with `extractor: "browser"`.
//!
//! Not here: caching and storing (the runner), deciding when "auto" escalates
//! ([`looks_js_built`] gives the verdict; the runner acts on it).

use std::time::{Duration, Instant};

use bytes::Bytes;
use chromiumoxide::page::Page;
use serde_json::Value;

use super::actions::{Failure, evaluate, navigate};
use super::{Pool, Profile, with_timeout};
use crate::fetch::{self, Fetched, PageInfo};
use crate::job::{ErrorCode, Extractor, FetchJob, Format, JobError, Meta, RenderedPage};

/// Renders `job.url` in the browser and extracts it.
pub async fn render(pool: &Pool, job: &FetchJob, deps: &fetch::Deps) -> Result<Fetched, JobError> {
    let started = Instant::now();
    let config = pool.config();
    // A job's headers go to the URL's origin only, as a browse job's scoped credentials do.
    let credentials = job.render_credentials();
    let lease = pool
        .lease(Profile::Desktop, &credentials, true)
        .await
        .map_err(|error| error.to_job_error())?;
    tracing::trace!(url = %job.url, "render: leased");
    let timeout = Duration::from_secs(config.command_timeout_secs);
    if let Err(failure) = navigate(&lease, &job.url).await {
        return Err(match failure {
            Failure::Browser(error) => {
                lease.browser_failed().await;
                error.to_job_error()
            }
            Failure::Action { code, message } => {
                lease.close().await;
                job_error(&code, message)
            }
        });
    }
    tracing::trace!(url = %job.url, "render: navigated");
    let idle = lease
        .tab()
        .wait_idle(
            Duration::from_millis(config.idle_quiet_ms),
            Duration::from_millis(config.idle_max_ms),
        )
        .await;
    tracing::trace!(url = %job.url, "render: idle");
    let captured = capture(lease.page(), timeout).await;
    tracing::trace!(url = %job.url, "render: snapshot taken");
    let captured = match captured {
        Ok(captured) => {
            lease.close().await;
            tracing::trace!(url = %job.url, "render: closed");
            captured
        }
        Err(error) => {
            lease.browser_failed().await;
            return Err(error.to_job_error());
        }
    };
    let mut warnings = Vec::new();
    if !idle {
        warnings.push(format!(
            "the network was still busy after {} ms; the page may be incomplete",
            config.idle_max_ms
        ));
    }
    extract_rendered(
        deps,
        &job.url,
        captured,
        job.format,
        started,
        warnings,
        Judge::Fail,
    )
    .await
}

/// Takes the current page's DOM, URL and navigation status.
pub(super) async fn capture(page: &Page, timeout: Duration) -> Result<RenderedPage, super::Error> {
    let html = match super::actions::html(page, timeout).await {
        Ok(html) => html,
        Err(Failure::Browser(error)) => return Err(error),
        Err(Failure::Action { message, .. }) => return Err(super::Error::Crashed(message)),
    };
    let url = with_timeout(timeout, page.url()).await?.unwrap_or_default();
    let status = evaluate(page, "navigationStatus()", timeout)
        .await
        .ok()
        .and_then(|value| value.as_u64())
        .and_then(|status| u16::try_from(status).ok())
        .filter(|status| *status > 0)
        .unwrap_or(200);
    Ok(RenderedPage { html, url, status })
}

/// What a block page (a challenge, a login wall, an empty page) or an error status does to a
/// rendered page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judge {
    /// Fails it, as a fetch does (`render: true`).
    Fail,
    /// Keeps it with a warning: a page a script chose to end on (a browse job's).
    Warn,
}

/// Extracts a page the browser rendered exactly like a fetched one (the same extraction,
/// links, metadata and outline): a fetch result with `extractor: "browser"`, asked for as
/// `requested_url`, begun at `started`, with `warnings` about how it was taken.
pub async fn extract_rendered(
    deps: &fetch::Deps,
    requested_url: &str,
    page: RenderedPage,
    format: Format,
    started: Instant,
    mut warnings: Vec<String>,
    judge: Judge,
) -> Result<Fetched, JobError> {
    let RenderedPage {
        html,
        url: final_url,
        status,
    } = page;
    let page_url = url::Url::parse(&final_url)
        .map_err(|error| JobError::new(ErrorCode::NavigationFailed, error.to_string()))?;
    let extracted = match judge {
        Judge::Fail => fetch::extract_document(deps, html.clone(), page_url, status, format, false)
            .await
            .map_err(|error| error.to_job_error())?,
        Judge::Warn => {
            let (extracted, block) =
                fetch::extract_unjudged(deps, html.clone(), page_url, status, format, false)
                    .await
                    .map_err(|error| error.to_job_error())?;
            if let Some(block) = block {
                warnings.push(format!(
                    "the page looks like a {} page ({})",
                    block.code.as_str(),
                    block.evidence
                ));
            }
            if status >= 400 {
                warnings.push(format!("the page answered HTTP {status}"));
            }
            extracted
        }
    };
    warnings.extend(extracted.warning.clone());
    let info = PageInfo {
        url: requested_url.to_owned(),
        final_url,
        status,
        content_type: "text/html".to_owned(),
        title: extracted.title,
        extractor: Extractor::Browser,
        warning: (!warnings.is_empty()).then(|| warnings.join("; ")),
        links: extracted.links,
        meta: Meta {
            // HTML output is markup: no guess from tag names.
            lang: if format == Format::Html {
                extracted.meta.lang
            } else {
                crate::web::lang::or_detect(extracted.meta.lang, &extracted.text)
            },
            ..extracted.meta
        },
        outline: extracted.outline,
        format,
        fetched_at: jiff::Timestamp::now().to_string(),
        took_ms: started.elapsed().as_millis() as u64,
        truncated: false,
        reduced: false,
    };
    Ok(Fetched {
        info,
        text: extracted.text,
        raw: Bytes::from(html),
        headers: vec![(
            "content-type".to_owned(),
            "text/html; charset=utf-8".to_owned(),
        )],
        ip: None,
        lines: None,
    })
}

/// A job error from an action's code and message (navigation failures).
pub fn job_error(code: &str, message: String) -> JobError {
    let code: ErrorCode = serde_json::from_value(Value::String(code.to_owned()))
        .unwrap_or(ErrorCode::NavigationFailed);
    let mut error = JobError::new(code, message);
    error.transient = matches!(
        code,
        ErrorCode::ConnectError | ErrorCode::Timeout | ErrorCode::NavigationFailed
    );
    error
}

/// For `render: "auto"`: does the plain fetch's outcome look like a page built by
/// JavaScript? An empty page or app shell (`empty_content`), or very little text from a page
/// that ships scripts.
pub fn looks_js_built(outcome: &Result<Fetched, JobError>) -> bool {
    match outcome {
        Err(error) => error.code == ErrorCode::EmptyContent,
        Ok(fetched) => {
            fetched.info.content_type == "text/html"
                && fetched.text.trim().chars().count() < 200
                && contains_ignore_case(&fetched.raw, b"<script")
        }
    }
}

fn contains_ignore_case(haystack: &[u8], needle: &[u8]) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window.eq_ignore_ascii_case(needle))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn action_codes_map_back_to_job_errors() {
        let error = job_error("blocked_destination", "no".to_owned());
        assert_eq!(error.code, ErrorCode::BlockedDestination);
        assert!(!error.transient);
        let error = job_error("connect_error", "refused".to_owned());
        assert!(error.transient);
        assert_eq!(
            job_error("something_else", String::new()).code,
            ErrorCode::NavigationFailed
        );
    }

    #[test]
    fn an_app_shell_looks_js_built() {
        let shell = Err(JobError::new(ErrorCode::EmptyContent, "shell"));
        assert!(looks_js_built(&shell));
        let gone = Err(JobError::new(ErrorCode::HttpStatus, "404"));
        assert!(!looks_js_built(&gone));
        assert!(contains_ignore_case(b"<html><SCRIPT src=x>", b"<script"));
    }
}
