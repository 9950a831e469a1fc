//! The browser and its contexts. One Chromium per pool, started on first use with a temporary
//! profile and every request sent through the egress proxy; one isolated browser context per
//! lease (a job or a session), with its tabs. Bounded: at most `max_contexts` job leases at
//! once (`browser_busy` beyond); sessions have their own budget (their number is the
//! caller's to bound) and are refused on a browser at `max_memory_mb`; and the browser is recycled after `recycle_after` contexts or
//! when its process tree's memory (PSS) passes `max_memory_mb`. A browser that crashed or stopped
//! answering its ping is replaced; the lease that saw it fail reports `browser_failed`
//! (transient, so its job is retried).
//!
//! This file holds the [`Pool`]: the bound on contexts, the current browser and when to
//! replace it, and the counters. Starting Chromium is `launch`'s, a context and its tabs are
//! `lease`'s and `tab`'s, and the memory reading is `memory`'s (run on the blocking pool).
//! Their public types are re-exported here under their former paths.
//!
//! Not here: what is done in a tab (`actions`, `render`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::browser::{
    BrowserContextId, SetDownloadBehaviorBehavior, SetDownloadBehaviorParams,
};
use chromiumoxide::cdp::browser_protocol::target::{
    CreateBrowserContextParams, CreateTargetParams,
};
use serde::Serialize;
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

use super::egress::{Egress, Limits};
use super::emulate::{apply_credentials, apply_profile};
use super::launch::{Running, close_browser, profile_root, sweep_stale_profiles};
use super::memory::tree_memory_blocking;
use super::{Config, Error, Profile, with_timeout};
use crate::web::{Dns, Policy};

pub use super::emulate::{DESKTOP_UA, MOBILE_UA};
pub use super::lease::Lease;
pub use super::memory::tree_memory;
pub use super::tab::{DocumentResponse, Tab};
pub use crate::job::{CookieSpec, Credentials, OriginHeaders};

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

impl Pool {
    /// A pool on `config`, its browser requests going through an egress proxy with `policy`
    /// and `dns`. Sweeps temporary profiles older than an hour. The browser starts on first
    /// use; [`Pool::warm`] starts it now.
    pub async fn new(config: Config, policy: Arc<Policy>, dns: Dns) -> Result<Pool, Error> {
        config.validate().map_err(|message| Error::Launch {
            path: config.executable_shown(),
            message,
        })?;
        let egress = Egress::start(policy.clone(), dns, Limits::default())
            .await
            .map_err(|error| Error::Launch {
                path: config.executable_shown(),
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
        match current.and_then(|running| running.pid) {
            Some(pid) => tree_memory_blocking(pid).await,
            None => 0,
        }
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
        self.open_lease(profile, credentials, Some(permit)).await
    }

    /// Opens a context for an agent session: sessions have their own budget (the caller
    /// bounds their number, `sessions.max_sessions`) and take none of the `max_contexts` slots
    /// jobs share; a browser already using `max_memory_mb` takes no new session
    /// ([`Error::Full`]).
    pub async fn lease_session(
        &self,
        profile: Profile,
        credentials: &Credentials,
    ) -> Result<Lease, Error> {
        let limit_mb = self.inner.config.max_memory_mb;
        let used_mb = self.memory().await / (1024 * 1024);
        if used_mb >= limit_mb {
            self.inner.busy.fetch_add(1, Ordering::Relaxed);
            return Err(Error::Full { used_mb, limit_mb });
        }
        self.open_lease(profile, credentials, None).await
    }

    async fn open_lease(
        &self,
        profile: Profile,
        credentials: &Credentials,
        permit: Option<OwnedSemaphorePermit>,
    ) -> Result<Lease, Error> {
        let inner = &self.inner;
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

    pub(super) async fn open_context(
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
    pub(super) async fn new_tab(
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

    pub(super) fn command_timeout(&self) -> Duration {
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
        let running = match tokio::time::timeout(
            limit,
            Running::launch(&self.inner.config, &self.inner.egress.proxy_server_arg()),
        )
        .await
        {
            Ok(launched) => Arc::new(launched?),
            Err(_) => {
                return Err(Error::Launch {
                    path: self.inner.config.executable_shown(),
                    message: format!("did not start within {} s", limit.as_secs()),
                });
            }
        };
        self.inner.launches.fetch_add(1, Ordering::Relaxed);
        *current = Some(running.clone());
        Ok(running)
    }

    /// Takes `running` out of service (if it is still the current browser): new leases get a
    /// new browser, and this one closes when its last lease ends.
    pub(super) async fn retire(&self, running: &Arc<Running>, crashed: bool) {
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

    /// Whether the browser's process tree uses more memory than allowed (false when its
    /// process id is unknown).
    async fn too_big(&self, running: &Running) -> bool {
        match running.pid {
            Some(pid) => {
                tree_memory_blocking(pid).await > self.inner.config.max_memory_mb * 1024 * 1024
            }
            None => false,
        }
    }

    /// After a lease closed: recycle the browser when it served enough contexts or uses too
    /// much memory.
    pub(super) async fn after_lease(&self, running: &Arc<Running>) {
        let config = &self.inner.config;
        let served = running.contexts.load(Ordering::Relaxed);
        let too_old = served >= config.recycle_after;
        if !running.is_alive() {
            self.retire(running, true).await;
        } else if too_old || self.too_big(running).await {
            tracing::info!(contexts = served, "recycling the browser");
            self.retire(running, false).await;
        }
    }
}
