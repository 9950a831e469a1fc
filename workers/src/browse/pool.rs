//! The browser and its contexts. One Chromium per pool, started on first use with a temporary
//! profile and every request sent through the egress proxy; one isolated browser context per
//! lease (a job or a session), with its tabs. Bounded: at most `max_contexts` leases at once
//! (`browser_busy` beyond), and the browser is recycled after `recycle_after` contexts or
//! when its process tree's memory (PSS) passes `max_memory_mb`. A browser that crashed or stopped
//! answering its ping is replaced; the lease that saw it fail reports `browser_failed`
//! (transient, so its job is retried).
//!
//! Not here: what is done in a tab (`actions`, `render`).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chromiumoxide::browser::{Browser, BrowserConfig};
use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::emulation::{
    SetDeviceMetricsOverrideParams, SetTouchEmulationEnabledParams,
};
use chromiumoxide::cdp::browser_protocol::network::{
    CookieParam, SetBypassServiceWorkerParams, SetExtraHttpHeadersParams,
    SetUserAgentOverrideParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams, DisposeBrowserContextParams,
};
use chromiumoxide::page::Page;
use futures_util::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};
use utoipa::ToSchema;

use super::egress::{Egress, Limits};
use super::{Config, Error, Profile};
use crate::web::{Dns, Policy};

/// The user agent of the desktop profile.
pub const DESKTOP_UA: &str = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36";
/// The user agent of the mobile profile (an iPad).
pub const MOBILE_UA: &str = "Mozilla/5.0 (iPad; CPU OS 18_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.5 Mobile/15E148 Safari/604.1";

/// Credentials a job or session browses with: cookies, extra request headers and
/// localStorage entries. Secrets: never logged (`Debug` shows only counts), never exported.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// Cookies set before the first navigation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cookies: Vec<CookieSpec>,
    /// Headers added to every request of the context.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub headers: HashMap<String, String>,
    /// localStorage entries per origin (`https://example.com` → key → value), written before
    /// the first navigation to that origin.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub local_storage: HashMap<String, HashMap<String, String>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials {{ {} cookies, {} headers, {} local_storage origins (redacted) }}",
            self.cookies.len(),
            self.headers.len(),
            self.local_storage.len()
        )
    }
}

impl Credentials {
    /// True when there is nothing to set.
    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty() && self.headers.is_empty() && self.local_storage.is_empty()
    }

    /// Checks names and values (header names, cookie domains or URLs, origins).
    pub fn validate(&self) -> Result<(), String> {
        for cookie in &self.cookies {
            if cookie.name.is_empty() {
                return Err("a cookie needs a name".to_owned());
            }
            if cookie.url.is_none() && cookie.domain.is_none() {
                return Err(format!("cookie {:?} needs a url or a domain", cookie.name));
            }
        }
        for name in self.headers.keys() {
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || b"-_".contains(&byte))
            {
                return Err(format!("{name:?} is not a valid header name"));
            }
        }
        for origin in self.local_storage.keys() {
            match url::Url::parse(origin) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => {}
                _ => {
                    return Err(format!(
                        "local_storage key {origin:?} is not an http(s) origin"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One cookie.
#[derive(Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CookieSpec {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// The URL it belongs to (sets domain, path and secure), or use `domain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Its domain (`.example.com` for every subdomain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Its path (`/` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Sent over https only.
    #[serde(default)]
    pub secure: bool,
    /// Hidden from scripts.
    #[serde(default)]
    pub http_only: bool,
}

/// What the pool did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Browsers started.
    pub launches: u64,
    /// Contexts handed out.
    pub contexts: u64,
    /// Browsers retired for their age or memory.
    pub recycles: u64,
    /// Browsers found dead or hung.
    pub crashes: u64,
    /// Leases refused because every context was taken.
    pub busy: u64,
}

/// The browser pool (cheap to clone).
#[derive(Clone)]
pub struct Pool {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Pool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pool")
            .field("executable", &self.inner.config.executable)
            .field("max_contexts", &self.inner.config.max_contexts)
            .finish_non_exhaustive()
    }
}

struct Inner {
    config: Config,
    policy: Arc<Policy>,
    egress: Egress,
    slots: Arc<Semaphore>,
    current: Mutex<Option<Arc<Running>>>,
    launches: AtomicU64,
    contexts: AtomicU64,
    recycles: AtomicU64,
    crashes: AtomicU64,
    busy: AtomicU64,
}

/// A started browser.
struct Running {
    browser: Option<Browser>,
    handler: tokio::task::JoinHandle<()>,
    alive: Arc<AtomicBool>,
    dir: PathBuf,
    pid: Option<u32>,
    contexts: AtomicU64,
    late_pings: std::sync::atomic::AtomicU32,
}

impl Running {
    fn browser(&self) -> &Browser {
        self.browser
            .as_ref()
            .expect("a running browser has its handle until dropped")
    }

    fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }
}

impl Running {
    /// Takes the browser and its directory out, for [`close_browser`].
    fn take(&mut self) -> (Option<Browser>, PathBuf) {
        self.handler.abort();
        (self.browser.take(), std::mem::take(&mut self.dir))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let (browser, dir) = self.take();
        // No runtime left: the child is killed on drop and the profile is swept later.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(close_browser(browser, dir));
        }
    }
}

/// Closes a browser (killing it when it does not close within 5 s), reaps it, and removes
/// its directory.
async fn close_browser(browser: Option<Browser>, dir: PathBuf) {
    if let Some(mut browser) = browser {
        let closed = tokio::time::timeout(Duration::from_secs(5), browser.close()).await;
        if !matches!(closed, Ok(Ok(_))) {
            let _ = browser.kill().await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), browser.wait()).await;
    }
    if !dir.as_os_str().is_empty() {
        let _ = tokio::fs::remove_dir_all(&dir).await;
    }
}

impl Pool {
    /// A pool on `config`, its browser requests going through an egress proxy with `policy`
    /// and `dns`. Sweeps temporary profiles older than an hour. The browser starts on first
    /// use; [`Pool::warm`] starts it now.
    pub async fn new(config: Config, policy: Arc<Policy>, dns: Dns) -> Result<Pool, Error> {
        config.validate().map_err(|message| Error::Launch {
            path: config.executable.display().to_string(),
            message,
        })?;
        let egress = Egress::start(policy.clone(), dns, Limits::default())
            .await
            .map_err(|error| Error::Launch {
                path: config.executable.display().to_string(),
                message: format!("could not start the egress proxy: {error}"),
            })?;
        sweep_stale_profiles(&profile_root(&config), Duration::from_secs(3_600));
        Ok(Pool {
            inner: Arc::new(Inner {
                slots: Arc::new(Semaphore::new(config.max_contexts)),
                config,
                policy,
                egress,
                current: Mutex::new(None),
                launches: AtomicU64::new(0),
                contexts: AtomicU64::new(0),
                recycles: AtomicU64::new(0),
                crashes: AtomicU64::new(0),
                busy: AtomicU64::new(0),
            }),
        })
    }

    /// The pool's options.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// The destination policy the browser's requests are held to.
    pub fn policy(&self) -> &Policy {
        &self.inner.policy
    }

    /// The egress proxy (its block log tells which requests were refused).
    pub fn egress(&self) -> &Egress {
        &self.inner.egress
    }

    /// Starts the browser now (otherwise it starts with the first lease).
    pub async fn warm(&self) -> Result<(), Error> {
        self.running().await.map(|_| ())
    }

    /// Closes the browser and removes its profile, waiting for both (when no lease holds it;
    /// otherwise it closes when the last lease ends). Call before the process exits.
    pub async fn shutdown(&self) {
        let running = self.inner.current.lock().await.take();
        if let Some(running) = running
            && let Ok(mut running) = Arc::try_unwrap(running)
        {
            let (browser, dir) = running.take();
            close_browser(browser, dir).await;
        }
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        Stats {
            launches: inner.launches.load(Ordering::Relaxed),
            contexts: inner.contexts.load(Ordering::Relaxed),
            recycles: inner.recycles.load(Ordering::Relaxed),
            crashes: inner.crashes.load(Ordering::Relaxed),
            busy: inner.busy.load(Ordering::Relaxed),
        }
    }

    /// Contexts free right now.
    pub fn free_contexts(&self) -> usize {
        self.inner.slots.available_permits()
    }

    /// Memory (PSS) of the browser's whole process tree, in bytes (0 when no browser runs).
    pub async fn memory(&self) -> u64 {
        let current = self.inner.current.lock().await.clone();
        current
            .and_then(|running| running.pid)
            .map(tree_memory)
            .unwrap_or(0)
    }

    /// The browser's process id, when one runs.
    pub async fn pid(&self) -> Option<u32> {
        let current = self.inner.current.lock().await.clone();
        current.and_then(|running| running.pid)
    }

    /// Opens an isolated context with one blank tab, set up for `profile` and `credentials`.
    /// `wait`: wait up to `slot_wait_secs` for a free context (queued jobs); otherwise refuse
    /// at once with [`Error::Busy`] (sessions).
    pub async fn lease(
        &self,
        profile: Profile,
        credentials: &Credentials,
        wait: bool,
    ) -> Result<Lease, Error> {
        let inner = &self.inner;
        let permit = if wait {
            let wait_for = Duration::from_secs(inner.config.slot_wait_secs);
            match tokio::time::timeout(wait_for, inner.slots.clone().acquire_owned()).await {
                Ok(Ok(permit)) => permit,
                _ => {
                    inner.busy.fetch_add(1, Ordering::Relaxed);
                    return Err(Error::Busy(inner.config.max_contexts));
                }
            }
        } else {
            match inner.slots.clone().try_acquire_owned() {
                Ok(permit) => permit,
                Err(_) => {
                    inner.busy.fetch_add(1, Ordering::Relaxed);
                    return Err(Error::Busy(inner.config.max_contexts));
                }
            }
        };
        // A context that cannot be opened on a browser that answered its ping means the
        // browser died in between: one more try on a fresh one.
        let mut last_error = None;
        for _ in 0..2 {
            let running = self.running().await?;
            match self.open_context(&running, profile, credentials).await {
                Ok((context, tab)) => {
                    running.contexts.fetch_add(1, Ordering::Relaxed);
                    inner.contexts.fetch_add(1, Ordering::Relaxed);
                    return Ok(Lease {
                        pool: self.clone(),
                        running,
                        context: Some(context),
                        tabs: vec![tab],
                        current: 0,
                        profile,
                        credentials: credentials.clone(),
                        _permit: permit,
                    });
                }
                Err(error) => {
                    tracing::warn!(error = %error, "could not open a browser context; restarting the browser");
                    self.retire(&running, true).await;
                    last_error = Some(error);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| Error::Crashed("no browser".to_owned())))
    }

    async fn open_context(
        &self,
        running: &Running,
        profile: Profile,
        credentials: &Credentials,
    ) -> Result<(BrowserContextId, Tab), Error> {
        let timeout = self.command_timeout();
        let browser = running.browser();
        let context = with_timeout(
            timeout,
            browser.create_browser_context(
                CreateBrowserContextParams::builder()
                    .dispose_on_detach(true)
                    .build(),
            ),
        )
        .await?;
        // Downloads are refused in every context.
        let deny = SetDownloadBehaviorParams::builder()
            .behavior(SetDownloadBehaviorBehavior::Deny)
            .browser_context_id(context.clone())
            .build()
            .map_err(Error::Crashed)?;
        with_timeout(timeout, browser.execute(deny)).await?;
        let tab = self.new_tab(running, &context, profile).await?;
        apply_credentials(&tab.page, credentials, timeout).await?;
        Ok((context, tab))
    }

    /// Opens a blank tab in `context` and applies the profile to it.
    async fn new_tab(
        &self,
        running: &Running,
        context: &BrowserContextId,
        profile: Profile,
    ) -> Result<Tab, Error> {
        let timeout = self.command_timeout();
        let params = CreateTargetParams::builder()
            .url("about:blank")
            .browser_context_id(context.clone())
            .build()
            .map_err(Error::Crashed)?;
        let page = with_timeout(timeout, running.browser().new_page(params)).await?;
        apply_profile(&page, profile, timeout).await?;
        Tab::watch(page, timeout).await
    }

    fn command_timeout(&self) -> Duration {
        Duration::from_secs(self.inner.config.command_timeout_secs)
    }

    /// The running browser: the current one if it answers its ping, else a new one.
    async fn running(&self) -> Result<Arc<Running>, Error> {
        let mut current = self.inner.current.lock().await;
        if let Some(running) = current.as_ref() {
            // A ping that times out is not proof of death: chromiumoxide answers browser-level
            // commands late while it attaches new targets (seen under load). A closed
            // connection or an error is; so are three late pings in a row (a hung browser).
            let ping =
                tokio::time::timeout(Duration::from_secs(5), running.browser().version()).await;
            let answered = running.is_alive()
                && match ping {
                    Ok(Ok(_)) => {
                        running.late_pings.store(0, Ordering::Relaxed);
                        true
                    }
                    Ok(Err(_)) => false,
                    Err(_) => running.late_pings.fetch_add(1, Ordering::Relaxed) < 2,
                };
            if answered {
                return Ok(running.clone());
            }
            tracing::warn!("the browser stopped answering; starting a new one");
            self.inner.crashes.fetch_add(1, Ordering::Relaxed);
            *current = None;
        }
        // Bounded as a whole, the lock held: chromiumoxide's own launch timeout covers the wait
        // for the DevTools address, not the websocket handshake after it.
        let limit = Duration::from_secs(self.inner.config.launch_timeout_secs + 10);
        let running = match tokio::time::timeout(limit, self.launch()).await {
            Ok(launched) => Arc::new(launched?),
            Err(_) => {
                return Err(Error::Launch {
                    path: self.inner.config.executable.display().to_string(),
                    message: format!("did not start within {} s", limit.as_secs()),
                });
            }
        };
        self.inner.launches.fetch_add(1, Ordering::Relaxed);
        *current = Some(running.clone());
        Ok(running)
    }

    async fn launch(&self) -> Result<Running, Error> {
        let config = &self.inner.config;
        let path = config.executable.display().to_string();
        let launch_error = |message: String| Error::Launch {
            path: path.clone(),
            message,
        };
        if !config.executable.exists() {
            return Err(launch_error(
                "no such file; install Chromium (`apt-get install chromium`) or set browse.executable"
                    .to_owned(),
            ));
        }
        let dir = profile_root(config).join(format!(
            "trawl-chromium-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let profile = dir.join("profile");
        std::fs::create_dir_all(&profile).map_err(|error| {
            launch_error(format!("could not create {}: {error}", dir.display()))
        })?;
        let executable = death_tied_executable(&dir, &config.executable)
            .map_err(|error| launch_error(format!("could not write the launcher: {error}")))?;
        let mut builder = BrowserConfig::builder()
            .chrome_executable(executable)
            .new_headless_mode()
            .user_data_dir(&profile)
            .viewport(None)
            .window_size(1280, 800)
            .launch_timeout(Duration::from_secs(config.launch_timeout_secs))
            .request_timeout(self.command_timeout())
            .args([
                "disable-gpu",
                "no-first-run",
                "no-default-browser-check",
                "disable-background-networking",
                "disable-component-update",
                "disable-sync",
                "disable-quic",
                "disable-extensions",
                "disable-dev-shm-usage",
                "mute-audio",
                "disable-features=NetworkPrediction,MediaRouter,OptimizationHints,DialMediaRouteProvider",
                "force-webrtc-ip-handling-policy=disable_non_proxied_udp",
                "dns-prefetch-disable",
            ])
            .arg(format!("proxy-server={}", self.inner.egress.proxy_server_arg()))
            // Without this Chromium sends loopback traffic around the proxy.
            .arg("proxy-bypass-list=<-loopback>");
        if running_as_root() {
            builder = builder.no_sandbox();
        }
        let browser_config = builder.build().map_err(launch_error)?;
        let launched = Browser::launch(browser_config).await;
        let (mut browser, mut handler) = match launched {
            Ok(launched) => launched,
            Err(error) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(launch_error(error.to_string()));
            }
        };
        let child = browser.get_mut_child();
        let pid = child.as_ref().and_then(|child| child.inner.id());
        // Chromium logs to stderr; a pipe nobody reads fills up and stalls the browser.
        if let Some(stderr) = child.and_then(|child| child.stderr.take()) {
            let mut stderr = stderr.into_inner();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            });
        }
        let alive = Arc::new(AtomicBool::new(true));
        let handler_alive = alive.clone();
        // The handler drives the websocket: it must keep running, errors and all.
        let handler = tokio::spawn(async move {
            while let Some(event) = handler.next().await {
                if let Err(error) = event {
                    tracing::debug!(error = %error, "cdp");
                }
            }
            handler_alive.store(false, Ordering::Relaxed);
        });
        tracing::info!(pid = ?pid, "browser started");
        Ok(Running {
            browser: Some(browser),
            handler,
            alive,
            dir,
            pid,
            contexts: AtomicU64::new(0),
            late_pings: std::sync::atomic::AtomicU32::new(0),
        })
    }

    /// Takes `running` out of service (if it is still the current browser): new leases get a
    /// new browser, and this one closes when its last lease ends.
    async fn retire(&self, running: &Arc<Running>, crashed: bool) {
        let mut current = self.inner.current.lock().await;
        if current
            .as_ref()
            .is_some_and(|current| Arc::ptr_eq(current, running))
        {
            *current = None;
            if crashed {
                self.inner.crashes.fetch_add(1, Ordering::Relaxed);
            } else {
                self.inner.recycles.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// After a lease closed: recycle the browser when it served enough contexts or uses too
    /// much memory.
    async fn after_lease(&self, running: &Arc<Running>) {
        let config = &self.inner.config;
        let served = running.contexts.load(Ordering::Relaxed);
        let too_old = served >= config.recycle_after;
        let too_big = || {
            running
                .pid
                .is_some_and(|pid| tree_memory(pid) > config.max_memory_mb * 1024 * 1024)
        };
        if !running.is_alive() {
            self.retire(running, true).await;
        } else if too_old || too_big() {
            tracing::info!(contexts = served, "recycling the browser");
            self.retire(running, false).await;
        }
    }
}

/// An open browser context with its tabs, held by one job or session. Close it with
/// [`Lease::close`]; dropping it also frees the slot (the context goes with its browser).
pub struct Lease {
    pool: Pool,
    running: Arc<Running>,
    context: Option<BrowserContextId>,
    tabs: Vec<Tab>,
    current: usize,
    profile: Profile,
    credentials: Credentials,
    _permit: OwnedSemaphorePermit,
}

impl std::fmt::Debug for Lease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lease")
            .field("tabs", &self.tabs.len())
            .field("current", &self.current)
            .field("profile", &self.profile)
            .finish_non_exhaustive()
    }
}

impl Lease {
    /// The page actions run in (the current tab's).
    pub fn page(&self) -> &Page {
        &self.tabs[self.current].page
    }

    /// The current tab.
    pub fn tab(&self) -> &Tab {
        &self.tabs[self.current]
    }

    /// The pool it came from.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Its profile.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// Open tabs.
    pub fn tab_count(&self) -> usize {
        self.tabs.len()
    }

    /// The current tab's number (0-based).
    pub fn current_tab(&self) -> usize {
        self.current
    }

    /// False once the browser under it died.
    pub fn is_alive(&self) -> bool {
        self.running.is_alive()
    }

    /// Adopts tabs the page opened itself (popups, `target=_blank`) so they can be switched
    /// to; returns how many were new.
    pub async fn adopt_popups(&mut self) -> Result<usize, Error> {
        let timeout = self.pool.command_timeout();
        let browser = self.running.browser();
        // The pages chromiumoxide attached to, asked of its handler (no round trip to
        // Chromium: `Target.getTargets` was seen to stall while a popup was starting). A popup
        // is a page opened by one of this lease's tabs.
        let pages = match tokio::time::timeout(Duration::from_secs(5), browser.pages()).await {
            Ok(Ok(pages)) => pages,
            Ok(Err(error)) => return Err(Error::Crashed(error.to_string())),
            Err(_) => {
                tracing::debug!("the browser did not list its pages within 5 s");
                return Ok(0);
            }
        };
        let mut added = 0;
        for page in pages {
            let ours = |id: &chromiumoxide::cdp::browser_protocol::target::TargetId| {
                self.tabs.iter().any(|tab| tab.page.target_id() == id)
            };
            let opened_by_us = page.opener_id().as_ref().is_some_and(ours);
            if !opened_by_us || ours(page.target_id()) {
                continue;
            }
            // A popup still starting may not answer yet: it is skipped now and adopted by a
            // later call, rather than failing the lease.
            let profile = self.profile;
            let adopt = async {
                apply_profile(&page, profile, timeout).await?;
                Tab::watch(page, timeout).await
            };
            match tokio::time::timeout(Duration::from_secs(5), adopt).await {
                Ok(Ok(tab)) => {
                    self.tabs.push(tab);
                    added += 1;
                }
                Ok(Err(error)) => tracing::debug!(error = %error, "could not adopt a popup yet"),
                Err(_) => tracing::debug!("a popup did not answer within 5 s"),
            }
        }
        Ok(added)
    }

    /// Opens a new tab and makes it current; returns its number.
    pub async fn new_tab(&mut self) -> Result<usize, Error> {
        let context = self
            .context
            .clone()
            .ok_or_else(|| Error::Crashed("the context is closed".to_owned()))?;
        let tab = self
            .pool
            .new_tab(&self.running, &context, self.profile)
            .await?;
        apply_credentials(&tab.page, &self.credentials, self.pool.command_timeout()).await?;
        self.tabs.push(tab);
        self.current = self.tabs.len() - 1;
        Ok(self.current)
    }

    /// Makes tab `index` current.
    pub fn switch_tab(&mut self, index: usize) -> Result<(), String> {
        if index >= self.tabs.len() {
            return Err(format!(
                "no tab {index}: tabs are 0..{}",
                self.tabs.len().saturating_sub(1)
            ));
        }
        self.current = index;
        Ok(())
    }

    /// Closes tab `index` (refusing the last one); the current tab becomes the previous one.
    pub async fn close_tab(&mut self, index: usize) -> Result<(), String> {
        if self.tabs.len() <= 1 {
            return Err("cannot close the last tab".to_owned());
        }
        if index >= self.tabs.len() {
            return Err(format!(
                "no tab {index}: tabs are 0..{}",
                self.tabs.len() - 1
            ));
        }
        let tab = self.tabs.remove(index);
        let _ = tokio::time::timeout(self.pool.command_timeout(), tab.page.close()).await;
        if self.current >= index && self.current > 0 {
            self.current -= 1;
        }
        Ok(())
    }

    /// Replaces the context with a fresh one (cookies, storage and tabs gone), keeping the
    /// profile and the credentials it was opened with.
    pub async fn reset(&mut self) -> Result<(), Error> {
        self.dispose().await;
        let (context, tab) = self
            .pool
            .open_context(&self.running, self.profile, &self.credentials)
            .await?;
        self.context = Some(context);
        self.tabs = vec![tab];
        self.current = 0;
        Ok(())
    }

    async fn dispose(&mut self) {
        let timeout = self.pool.command_timeout();
        if let Some(context) = self.context.take() {
            let dispose = DisposeBrowserContextParams::new(context);
            let _ = tokio::time::timeout(timeout, self.running.browser().execute(dispose)).await;
        }
        self.tabs.clear();
    }

    /// Disposes the context (its tabs, cookies and storage) and frees the slot.
    pub async fn close(mut self) {
        self.dispose().await;
        let pool = self.pool.clone();
        let running = self.running.clone();
        drop(self);
        pool.after_lease(&running).await;
    }

    /// Reports a browser failure seen through this lease: the browser is replaced.
    pub async fn browser_failed(self) {
        let pool = self.pool.clone();
        let running = self.running.clone();
        drop(self);
        pool.retire(&running, true).await;
    }
}

/// A tab and what is in flight on it (for "wait for network idle"), and the last response
/// of its main document (status, and the egress proxy's verdict when the proxy answered).
#[derive(Debug, Clone)]
pub struct Tab {
    /// The CDP page.
    pub page: Page,
    idle: Arc<std::sync::Mutex<Traffic>>,
    /// Whether the tab's renderer crashed since its last navigation.
    crashed: Arc<tokio::sync::watch::Sender<bool>>,
}

#[derive(Debug)]
struct Traffic {
    /// Request id → URL.
    in_flight: HashMap<String, String>,
    last_change: Instant,
    document: Option<DocumentResponse>,
}

/// The response a tab's main document came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentResponse {
    /// Its URL.
    pub url: String,
    /// Its HTTP status.
    pub status: u16,
    /// `X-Trawl-Blocked`: the egress proxy refused the destination (the reason).
    pub blocked: Option<String>,
    /// `X-Trawl-Error`: the egress proxy could not reach it (`dns_error`, `connect_error`,
    /// `timeout`, …).
    pub proxy_error: Option<String>,
}

enum TabEvent {
    Started(String, String),
    Ended(String),
    Document(DocumentResponse),
    Crashed,
}

impl Tab {
    /// Watches the tab's requests (started, finished, failed), its main document's responses
    /// and its renderer's crashes from now on. Bounded by `timeout`, like every other call into
    /// chromiumoxide here: it hands each listener to its handler over a one-slot channel that a
    /// target stuck in its set-up would never drain.
    async fn watch(page: Page, timeout: Duration) -> Result<Tab, Error> {
        match tokio::time::timeout(timeout, Tab::listen(page)).await {
            Ok(tab) => tab,
            Err(_) => Err(Error::Timeout(timeout.as_secs())),
        }
    }

    async fn listen(page: Page) -> Result<Tab, Error> {
        use chromiumoxide::cdp::browser_protocol::network::{
            EventLoadingFailed, EventLoadingFinished, EventRequestWillBeSent,
            EventResponseReceived, ResourceType,
        };
        let idle = Arc::new(std::sync::Mutex::new(Traffic {
            in_flight: HashMap::new(),
            last_change: Instant::now(),
            document: None,
        }));
        let listen_error =
            |error: chromiumoxide::error::CdpError| Error::Crashed(error.to_string());
        let started = page
            .event_listener::<EventRequestWillBeSent>()
            .await
            .map_err(listen_error)?;
        let finished = page
            .event_listener::<EventLoadingFinished>()
            .await
            .map_err(listen_error)?;
        let failed = page
            .event_listener::<EventLoadingFailed>()
            .await
            .map_err(listen_error)?;
        let responses = page
            .event_listener::<EventResponseReceived>()
            .await
            .map_err(listen_error)?;
        // A renderer that dies (out of memory, a Chromium bug) is reported by the Inspector
        // domain, which chromiumoxide does not enable.
        let crashes = page
            .event_listener::<chromiumoxide::cdp::browser_protocol::inspector::EventTargetCrashed>()
            .await
            .map_err(listen_error)?;
        page.execute(chromiumoxide::cdp::browser_protocol::inspector::EnableParams::default())
            .await
            .map_err(listen_error)?;
        let crashes = crashes.map(|_| TabEvent::Crashed);
        let main_frame = page.target_id().inner().clone();
        // Only the page's network requests count: blob: and data: URLs never report an end
        // here, nor does the favicon the browser fetches for itself.
        let started = started.filter_map(|event| {
            let url = &event.request.url;
            let network = (url.starts_with("http:") || url.starts_with("https:"))
                && !url
                    .split(['?', '#'])
                    .next()
                    .is_some_and(|path| path.ends_with("/favicon.ico"));
            std::future::ready(
                network.then(|| TabEvent::Started(event.request_id.inner().clone(), url.clone())),
            )
        });
        let finished = finished.map(|event| TabEvent::Ended(event.request_id.inner().clone()));
        let failed = failed.map(|event| TabEvent::Ended(event.request_id.inner().clone()));
        let responses = responses.filter_map(move |event| {
            let main = event.r#type == ResourceType::Document
                && event
                    .frame_id
                    .as_ref()
                    .is_some_and(|frame| frame.inner() == &main_frame);
            let document = main.then(|| {
                let header = |name: &str| {
                    event
                        .response
                        .headers
                        .inner()
                        .as_object()
                        .and_then(|headers| {
                            headers
                                .iter()
                                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                                .and_then(|(_, value)| value.as_str().map(str::to_owned))
                        })
                };
                TabEvent::Document(DocumentResponse {
                    url: event.response.url.clone(),
                    status: u16::try_from(event.response.status).unwrap_or(0),
                    blocked: header("x-trawl-blocked"),
                    proxy_error: header("x-trawl-error"),
                })
            });
            std::future::ready(document)
        });
        let mut events = futures_util::stream::select(
            futures_util::stream::select(
                futures_util::stream::select(started, responses),
                futures_util::stream::select(finished, failed),
            ),
            crashes,
        );
        let traffic = idle.clone();
        let crashed = Arc::new(tokio::sync::watch::Sender::new(false));
        let crash = crashed.clone();
        // Ends with the tab: its event streams end when the page goes.
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let Ok(mut traffic) = traffic.lock() else {
                    break;
                };
                match event {
                    TabEvent::Started(id, url) => {
                        traffic.in_flight.insert(id, url);
                    }
                    TabEvent::Ended(id) => {
                        traffic.in_flight.remove(&id);
                    }
                    TabEvent::Document(document) => traffic.document = Some(document),
                    TabEvent::Crashed => {
                        // Its requests will never report an end.
                        traffic.in_flight.clear();
                        crash.send_replace(true);
                    }
                }
                traffic.last_change = Instant::now();
            }
        });
        Ok(Tab {
            page,
            idle,
            crashed,
        })
    }

    /// Whether the tab's renderer crashed (since it last navigated).
    pub fn crashed(&self) -> bool {
        *self.crashed.borrow()
    }

    /// Resolves when the tab's renderer crashes (at once if it has).
    pub async fn crash(&self) {
        let mut crashed = self.crashed.subscribe();
        // The sender lives as long as the tab: an error cannot happen while `self` exists.
        let _ = crashed.wait_for(|crashed| *crashed).await;
    }

    /// Clears the crash mark (a navigation starts a new renderer).
    pub fn recovered(&self) {
        self.crashed.send_replace(false);
    }

    /// The last response of the tab's main document.
    pub fn document(&self) -> Option<DocumentResponse> {
        self.idle
            .lock()
            .ok()
            .and_then(|traffic| traffic.document.clone())
    }

    /// Forgets the last document response (before a navigation).
    pub fn forget_document(&self) {
        if let Ok(mut traffic) = self.idle.lock() {
            traffic.document = None;
        }
    }

    /// Waits until no request has been in flight for `quiet`, at most `max`. Returns whether
    /// the network went idle (false: still busy at `max`, which is not an error: some pages
    /// poll forever).
    pub async fn wait_idle(&self, quiet: Duration, max: Duration) -> bool {
        let deadline = Instant::now() + max;
        loop {
            let settled = self.idle.lock().map(|traffic| {
                traffic.in_flight.is_empty() && traffic.last_change.elapsed() >= quiet
            });
            if settled.unwrap_or(true) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Marks the traffic as changed now (before a navigation or a click, so a wait that
    /// follows gives the page its quiet period to start loading).
    pub fn touch(&self) {
        if let Ok(mut traffic) = self.idle.lock() {
            traffic.last_change = Instant::now();
        }
    }
}

/// Applies a profile's viewport, touch and user agent to a tab, and bypasses service workers.
async fn apply_profile(tab: &Page, profile: Profile, timeout: Duration) -> Result<(), Error> {
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
async fn apply_credentials(
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

fn profile_root(config: &Config) -> PathBuf {
    config
        .profile_root
        .clone()
        .unwrap_or_else(std::env::temp_dir)
}

/// Removes `trawl-chromium-*` directories under `root` older than `age` (left by a killed
/// worker).
fn sweep_stale_profiles(root: &Path, age: Duration) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("trawl-chromium-") {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|elapsed| elapsed > age);
        if old {
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => {
                    tracing::info!(path = %entry.path().display(), "swept a stale browser profile")
                }
                Err(error) => tracing::debug!(error = %error, "could not sweep a stale profile"),
            }
        }
    }
}

/// The browser must die with its worker, even on SIGKILL. `setpriv --pdeathsig KILL` (from
/// util-linux) asks the kernel for that; a two-line launcher in the profile's directory
/// `exec`s it, so the browser keeps the launcher's process id. Without setpriv the browser
/// is only killed when the pool is dropped.
fn death_tied_executable(dir: &Path, executable: &Path) -> std::io::Result<PathBuf> {
    let setpriv = Path::new("/usr/bin/setpriv");
    if !setpriv.exists() {
        return Ok(executable.to_path_buf());
    }
    let launcher = dir.join("chromium.sh");
    let quoted = executable.display().to_string().replace('\'', r"'\''");
    std::fs::write(
        &launcher,
        format!("#!/bin/sh\nexec /usr/bin/setpriv --pdeathsig KILL -- '{quoted}' \"$@\"\n"),
    )?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o700))?;
    Ok(launcher)
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

/// The memory of `pid` and all its descendants, from `/proc`: their proportional set size
/// (shared pages divided among the processes sharing them), or their RSS where that is not
/// readable.
pub fn tree_memory(pid: u32) -> u64 {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // The command may hold spaces and parentheses: fields start after the last ')'.
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|ppid| ppid.parse::<u32>().ok());
            if let Some(parent) = parent {
                children.entry(parent).or_default().push(child);
            }
        }
    }
    let mut total = 0;
    let mut stack = vec![pid];
    let started = Instant::now();
    while let Some(next) = stack.pop() {
        total += memory_of(next);
        if let Some(kids) = children.get(&next) {
            stack.extend(kids);
        }
        if started.elapsed() > Duration::from_secs(1) {
            break;
        }
    }
    total
}

/// The memory a process accounts for: its proportional set size (shared pages divided among
/// the processes sharing them, so a tree's sum is its real footprint; Chromium's processes
/// share much), else its resident set size where `smaps_rollup` is not readable.
fn memory_of(pid: u32) -> u64 {
    let field = |path: String, name: &str| {
        std::fs::read_to_string(path).ok().and_then(|text| {
            text.lines()
                .find(|line| line.starts_with(name))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
    };
    field(format!("/proc/{pid}/smaps_rollup"), "Pss:")
        .or_else(|| field(format!("/proc/{pid}/status"), "VmRSS:"))
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_show_their_values_in_debug() {
        let credentials = Credentials {
            cookies: vec![CookieSpec {
                name: "session".to_owned(),
                value: "s3cret-value".to_owned(),
                url: Some("https://example.com/".to_owned()),
                domain: None,
                path: None,
                secure: true,
                http_only: true,
            }],
            headers: HashMap::from([("authorization".to_owned(), "Bearer t0ken".to_owned())]),
            local_storage: HashMap::new(),
        };
        let shown = format!("{credentials:?}");
        assert!(!shown.contains("s3cret"));
        assert!(!shown.contains("t0ken"));
        assert!(shown.contains("1 cookies"));
        assert_eq!(credentials.validate(), Ok(()));
    }

    #[test]
    fn bad_credentials_are_named() {
        let credentials = Credentials {
            headers: HashMap::from([("bad header".to_owned(), "x".to_owned())]),
            ..Credentials::default()
        };
        assert!(credentials.validate().is_err());
        let credentials = Credentials {
            local_storage: HashMap::from([("file:///etc".to_owned(), HashMap::new())]),
            ..Credentials::default()
        };
        assert!(credentials.validate().is_err());
    }

    #[test]
    fn tree_memory_counts_this_process() {
        assert!(tree_memory(std::process::id()) > 1024 * 1024);
    }

    #[test]
    fn stale_profiles_are_swept_and_fresh_ones_kept() {
        let root = std::env::temp_dir().join(format!("trawl-sweep-{}", uuid::Uuid::new_v4()));
        let fresh = root.join("trawl-chromium-fresh");
        let other = root.join("unrelated");
        std::fs::create_dir_all(&fresh).expect("mkdir");
        std::fs::create_dir_all(&other).expect("mkdir");
        sweep_stale_profiles(&root, Duration::from_secs(3_600));
        assert!(fresh.exists());
        sweep_stale_profiles(&root, Duration::ZERO);
        assert!(!fresh.exists());
        assert!(other.exists());
        std::fs::remove_dir_all(&root).expect("cleanup");
    }
}
