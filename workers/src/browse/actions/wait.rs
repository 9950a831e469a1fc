//! The wait action: until an element matches, a text appears, the network is idle, or a
//! fixed time has passed.
//!
//! Not here: the settling after an interaction (`settle`, in the parent module).

use std::time::{Duration, Instant};

use super::Failure;
use super::page::{call_page, json, page_error};
use crate::browse::lease::Lease;
use crate::job::ErrorCode;

/// Waits for a selector, a text, network idle, or a fixed time.
pub(super) async fn wait(
    lease: &Lease,
    selector: Option<&str>,
    text: Option<&str>,
    idle: bool,
    ms: Option<u64>,
) -> Result<Option<String>, Failure> {
    if selector.is_none() && text.is_none() && !idle {
        let wait = Duration::from_millis(ms.unwrap_or(0));
        tokio::time::sleep(wait).await;
        return Ok(Some(format!("waited {} ms", wait.as_millis())));
    }
    let max = Duration::from_millis(ms.unwrap_or(10_000));
    if idle {
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
