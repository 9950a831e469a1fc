//! What makes a fresh tab look like the device and the user a lease was asked for: the
//! profile's viewport, touch and user agent, and the credentials' cookies, extra headers and
//! localStorage entries.
//!
//! Not here: the profile and credentials types themselves (`crate::job`, part of a browse
//! job), nor opening tabs (`pool`, `lease`).

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::emulation::{
    SetDeviceMetricsOverrideParams, SetTouchEmulationEnabledParams,
};
use chromiumoxide::cdp::browser_protocol::network::{
    CookieParam, SetBypassServiceWorkerParams, SetExtraHttpHeadersParams,
    SetUserAgentOverrideParams,
};
use chromiumoxide::page::Page;

use super::{Credentials, Error, Profile, with_timeout};

/// The user agent of the desktop profile.
pub const DESKTOP_UA: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36";
/// The user agent of the mobile profile (an iPad).
pub const MOBILE_UA: &str = "Mozilla/5.0 (iPad; CPU OS 18_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.5 Mobile/15E148 Safari/604.1";

/// Applies a profile's viewport, touch and user agent to a tab, and bypasses service workers.
pub(super) async fn apply_profile(
    tab: &Page,
    profile: Profile,
    timeout: Duration,
) -> Result<(), Error> {
    let (width, height, mobile, user_agent) = match profile {
        Profile::Desktop => (1280, 800, false, DESKTOP_UA),
        Profile::Mobile => (820, 1180, true, MOBILE_UA),
    };
    let metrics = SetDeviceMetricsOverrideParams::builder()
        .width(width)
        .height(height)
        .device_scale_factor(if mobile { 2.0 } else { 1.0 })
        .mobile(mobile)
        .build()
        .map_err(Error::Crashed)?;
    with_timeout(timeout, tab.execute(metrics)).await?;
    with_timeout(
        timeout,
        tab.execute(SetTouchEmulationEnabledParams::new(mobile)),
    )
    .await?;
    let agent = SetUserAgentOverrideParams::builder()
        .user_agent(user_agent)
        .accept_language("en-US,en;q=0.9")
        .build()
        .map_err(Error::Crashed)?;
    with_timeout(timeout, tab.execute(agent)).await?;
    with_timeout(
        timeout,
        tab.execute(SetBypassServiceWorkerParams::new(true)),
    )
    .await?;
    Ok(())
}

/// Sets cookies and extra headers on a fresh tab (localStorage is written by `actions` on
/// the first navigation to each origin).
pub(super) async fn apply_credentials(
    tab: &Page,
    credentials: &Credentials,
    timeout: Duration,
) -> Result<(), Error> {
    if !credentials.headers.is_empty() {
        let headers = serde_json::to_value(&credentials.headers)
            .map_err(|error| Error::Crashed(format!("headers: {error}")))?;
        let params = SetExtraHttpHeadersParams::new(
            chromiumoxide::cdp::browser_protocol::network::Headers::new(headers),
        );
        with_timeout(timeout, tab.execute(params)).await?;
    }
    if !credentials.cookies.is_empty() {
        let mut cookies = Vec::with_capacity(credentials.cookies.len());
        for spec in &credentials.cookies {
            let mut cookie = CookieParam::new(spec.name.clone(), spec.value.clone());
            cookie.url = spec.url.clone();
            cookie.domain = spec.domain.clone();
            cookie.path = Some(spec.path.clone().unwrap_or_else(|| "/".to_owned()));
            cookie.secure = Some(spec.secure);
            cookie.http_only = Some(spec.http_only);
            cookies.push(cookie);
        }
        // Network.setCookies directly: chromiumoxide's helper insists on the page's URL,
        // which a blank tab does not have.
        let params = chromiumoxide::cdp::browser_protocol::network::SetCookiesParams::new(cookies);
        with_timeout(timeout, tab.execute(params)).await?;
    }
    if !credentials.local_storage.is_empty() {
        // Written before any script of the page runs, on documents of the named origins only.
        let entries = serde_json::to_string(&credentials.local_storage)
            .map_err(|error| Error::Crashed(format!("local_storage: {error}")))?;
        let script = format!(
            "(() => {{ try {{ const all = {entries}; const mine = all[location.origin]; \
             if (mine) {{ for (const [k, v] of Object.entries(mine)) {{ localStorage.setItem(k, v); }} }} \
             }} catch (e) {{}} }})();"
        );
        with_timeout(timeout, tab.evaluate_on_new_document(script)).await?;
    }
    Ok(())
}
