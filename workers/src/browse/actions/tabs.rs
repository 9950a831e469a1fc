//! Tab actions: open, switch to and close tabs (adopting the popups a page opened), and
//! start over in a fresh context.
//!
//! Not here: the tabs themselves (`browse::lease`, `browse::tab`).

use std::time::{Duration, Instant};

use super::Failure;
use super::navigation::navigate;
use crate::browse::lease::Lease;

/// Opens a tab (loading `url` when given) and makes it current.
pub(super) async fn tab_new(
    lease: &mut Lease,
    url: Option<&str>,
) -> Result<Option<String>, Failure> {
    let tab = lease.new_tab().await?;
    if let Some(url) = url {
        navigate(lease, url).await?;
    }
    Ok(Some(format!("tab {tab} of {}", lease.tab_count())))
}

/// Makes tab `tab` current, adopting the tabs the page opened itself first.
pub(super) async fn tab_switch(lease: &mut Lease, tab: usize) -> Result<Option<String>, Failure> {
    // A popup opened by the last action may still be starting: give it a moment.
    let deadline = Instant::now() + Duration::from_secs(3);
    lease.adopt_popups().await?;
    while tab >= lease.tab_count() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
        lease.adopt_popups().await?;
    }
    lease
        .switch_tab(tab)
        .map_err(|message| Failure::action("action_failed", message))?;
    // Focus only matters for what the tab shows next; it is not worth failing over.
    let _ = tokio::time::timeout(Duration::from_secs(5), lease.page().bring_to_front()).await;
    Ok(Some(format!("tab {tab} of {}", lease.tab_count())))
}

/// Closes tab `tab` (the current one when `None`).
pub(super) async fn tab_close(
    lease: &mut Lease,
    tab: Option<usize>,
) -> Result<Option<String>, Failure> {
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

/// Starts over in a fresh context (credentials kept).
pub(super) async fn reset(lease: &mut Lease) -> Result<Option<String>, Failure> {
    lease.reset().await?;
    Ok(Some("fresh context".to_owned()))
}
