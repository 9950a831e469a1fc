//! What makes a fresh tab look like the device and the user a lease was asked for: the
//! profile's viewport, touch and user agent, and the credentials' cookies, headers (sent to
//! their own origin only) and localStorage entries.
//!
//! Not here: the profile and credentials types themselves (`crate::job`, part of a browse
//! job), nor opening tabs (`pool`, `lease`).

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::emulation::{
    SetDeviceMetricsOverrideParams, SetTouchEmulationEnabledParams,
};
use chromiumoxide::cdp::browser_protocol::fetch::{
    ContinueRequestParams, EnableParams as FetchEnableParams, EventRequestPaused, HeaderEntry,
    RequestPattern, RequestStage,
};
use chromiumoxide::cdp::browser_protocol::network::{
    CookieParam, SetBypassServiceWorkerParams, SetUserAgentOverrideParams,
};
use chromiumoxide::page::Page;
use futures_util::StreamExt;

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

/// Sets cookies, the origin-scoped headers and localStorage seeding on a fresh tab.
pub(super) async fn apply_credentials(
    tab: &Page,
    credentials: &Credentials,
    timeout: Duration,
) -> Result<(), Error> {
    if !credentials.headers.is_empty() {
        scope_headers(tab, credentials, timeout).await?;
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
        // Once per origin and tab (a sessionStorage mark): the page's own later writes stay.
        let script = format!(
            "(() => {{ try {{ const all = {entries}; const mine = all[location.origin]; \
             if (mine && !sessionStorage.getItem('__trawl_seeded')) {{ \
             for (const [k, v] of Object.entries(mine)) {{ localStorage.setItem(k, v); }} \
             sessionStorage.setItem('__trawl_seeded', '1'); }} \
             }} catch (e) {{}} }})();"
        );
        with_timeout(timeout, tab.evaluate_on_new_document(script)).await?;
    }
    Ok(())
}

/// Adds each origin's credential headers to the tab's requests to that origin, and to no
/// other. Requests to those origins are paused (CDP `Fetch`, matched on the origin's URL
/// prefix) and continued with the headers added; every other request goes on untouched.
/// Chromium does not carry the headers over a redirect: a redirect to another origin is a new
/// request, paused (and given headers) only when its own origin has some.
async fn scope_headers(
    tab: &Page,
    credentials: &Credentials,
    timeout: Duration,
) -> Result<(), Error> {
    let mut origins: Vec<String> = credentials
        .headers
        .iter()
        .filter_map(|entry| crate::job::canonical_origin(&entry.origin))
        .collect();
    origins.sort();
    origins.dedup();
    let paused = with_timeout(timeout, tab.event_listener::<EventRequestPaused>()).await?;
    let enable = FetchEnableParams {
        patterns: Some(
            origins
                .iter()
                .map(|origin| {
                    // `*` and `?` are the pattern's wildcards, `\\` its escape; none is in an origin.
                    RequestPattern::builder()
                        .url_pattern(format!("{origin}/*"))
                        .request_stage(RequestStage::Request)
                        .build()
                })
                .collect(),
        ),
        ..FetchEnableParams::default()
    };
    with_timeout(timeout, tab.execute(enable)).await?;
    let credentials = credentials.clone();
    let page = tab.clone();
    // Ends with the tab: its event stream ends when the page goes.
    tokio::spawn(async move {
        let mut paused = paused;
        while let Some(event) = paused.next().await {
            let origin = url::Url::parse(&event.request.url)
                .map(|url| url.origin().ascii_serialization())
                .unwrap_or_default();
            let extra = credentials.headers_for(&origin);
            let mut params = ContinueRequestParams::new(event.request_id.clone());
            if !extra.is_empty() {
                let mut headers: Vec<HeaderEntry> = event
                    .request
                    .headers
                    .inner()
                    .as_object()
                    .map(|given| {
                        given
                            .iter()
                            .filter(|(name, _)| {
                                !extra
                                    .iter()
                                    .any(|(extra, _)| extra.eq_ignore_ascii_case(name))
                            })
                            .filter_map(|(name, value)| {
                                value.as_str().map(|value| HeaderEntry::new(name, value))
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                headers.extend(
                    extra
                        .into_iter()
                        .map(|(name, value)| HeaderEntry::new(name, value)),
                );
                params.headers = Some(headers);
            }
            // Answered on its own task: a slow answer must not hold up the next request.
            let page = page.clone();
            tokio::spawn(async move {
                if let Err(error) = tokio::time::timeout(timeout, page.execute(params)).await {
                    tracing::debug!(error = %error, "a paused request was not continued in time");
                }
            });
        }
    });
    Ok(())
}
