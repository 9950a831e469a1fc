//! Calls into the page: the page-side helpers (`page.js`: snapshot numbering, fill, scroll
//! hints, find), plain script evaluation that does not wait on chromiumoxide's execution
//! context tracking, and the page's title and HTML.
//!
//! Not here: what the actions make of the answers.

use std::time::Duration;

use chromiumoxide::cdp::js_protocol::runtime::EvaluateParams;
use chromiumoxide::page::Page;
use serde_json::Value;

use super::{Failure, command_timeout};
use crate::browse::Error;
use crate::browse::lease::Lease;
use crate::job::ErrorCode;

/// The page-side helpers, evaluated in the page before each call that needs them.
const PAGE_JS: &str = include_str!("../page.js");

/// Evaluates `window.__trawl.<call>` in the page (loading the helpers first when the
/// document does not have them yet) and returns its JSON value.
pub(super) async fn call_page(lease: &Lease, call: &str) -> Result<Value, Failure> {
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

pub(super) fn page_error(answer: &Value) -> Result<(), Failure> {
    match answer.get("error").and_then(Value::as_str) {
        Some(message) => Err(Failure::action("action_failed", message)),
        None => Ok(()),
    }
}

pub(super) fn json(text: &str) -> String {
    serde_json::to_string(text).expect("strings serialise")
}
