//! Navigation actions: goto, back and forward, reload; and [`navigate`], the guarded load
//! that `goto`, `tab_new`, scripts and renders go through.
//!
//! Not here: waiting for the page beyond its load (`wait`), nor tabs (`tabs`).

use std::time::{Duration, Instant};

use chromiumoxide::cdp::browser_protocol::page::GetNavigationHistoryParams;
use chromiumoxide::error::CdpError;

use super::page::eval_raw;
use super::{Failure, WaitUntil, command_timeout, settle};
use crate::browse::lease::Lease;
use crate::browse::{Error, navigation_code, with_timeout};
use crate::job::ErrorCode;
use crate::web::client::origin_of;

/// Loads `url` in the current tab and waits for what `wait_until` names, within the command
/// timeout.
pub(super) async fn goto(
    lease: &Lease,
    url: &str,
    wait_until: WaitUntil,
) -> Result<Option<String>, Failure> {
    let started = Instant::now();
    match wait_until {
        WaitUntil::None => {
            start_navigation(lease, url).await?;
            return Ok(Some("navigation started".to_owned()));
        }
        WaitUntil::Load | WaitUntil::Idle => navigate(lease, url).await?,
    }
    if wait_until == WaitUntil::Load {
        return Ok(Some("loaded".to_owned()));
    }
    let config = lease.pool().config();
    let left = command_timeout(lease).saturating_sub(started.elapsed());
    let max = Duration::from_millis(config.idle_max_ms).min(left);
    let quiet = Duration::from_millis(config.idle_quiet_ms);
    Ok(Some(if lease.tab().wait_idle(quiet, max).await {
        "loaded; the network is idle".to_owned()
    } else {
        format!(
            "loaded; the network was still busy after {} ms",
            max.as_millis()
        )
    }))
}

/// Starts loading `url` in the current tab and returns once its document answered (or the
/// URL changed), without waiting for its load event. The destination is checked first, and
/// the egress proxy's refusal is reported as for any navigation.
async fn start_navigation(lease: &Lease, url: &str) -> Result<(), Failure> {
    let pool = lease.pool();
    let parsed = pool
        .policy()
        .parse_url(url)
        .map_err(|error| Failure::action(error.code(), error.to_string()))?;
    let origin = origin_of(&parsed);
    let timeout = command_timeout(lease);
    let page = lease.page();
    let before = with_timeout(timeout, page.url()).await?;
    lease.tab().touch();
    lease.tab().forget_document();
    let script = format!(
        "location.assign({})",
        serde_json::to_string(parsed.as_str()).expect("strings serialise")
    );
    eval_raw(page, script, timeout).await?;
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(document) = lease.tab().document() {
            if let Some(reason) = document.blocked {
                return Err(Failure::action(
                    ErrorCode::BlockedDestination.as_str(),
                    format!("navigation to {origin} led to a blocked destination ({reason})"),
                ));
            }
            return Ok(());
        }
        let now = with_timeout(timeout, page.url()).await?;
        if now != before {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Failure::action(
                ErrorCode::Timeout.as_str(),
                format!("{origin} did not answer within {} s", timeout.as_secs()),
            ));
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Goes one step back (`step` -1) or forward (1) in the tab's history.
pub(super) async fn history(lease: &Lease, step: i64) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    let page = lease.page();
    let history = with_timeout(timeout, page.execute(GetNavigationHistoryParams {}))
        .await?
        .result;
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
    while Instant::now() < deadline && with_timeout(timeout, lease.page().url()).await? == before {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    settle(lease).await;
    Ok(None)
}

/// Reloads the page.
pub(super) async fn reload(lease: &Lease) -> Result<Option<String>, Failure> {
    let timeout = command_timeout(lease);
    lease.tab().touch();
    with_timeout(timeout, lease.page().reload()).await?;
    settle(lease).await;
    Ok(None)
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
