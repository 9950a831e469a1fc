//! A lease: one isolated browser context with its tabs, held by one job or session. It opens,
//! switches and closes tabs, adopts the popups its pages open, resets to a fresh context, and
//! gives its slot back to the pool when closed or dropped.
//!
//! Not here: the browser's lifetime and the bound on open contexts (`pool`), nor what is done
//! in a tab (`actions`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::browser::BrowserContextId;
use chromiumoxide::cdp::browser_protocol::target::DisposeBrowserContextParams;
use chromiumoxide::page::Page;
use tokio::sync::OwnedSemaphorePermit;

use super::emulate::{apply_credentials, apply_profile};
use super::launch::Running;
use super::pool::Pool;
use super::tab::Tab;
use super::{Credentials, Error, Profile, with_timeout};
use crate::job::CookieSpec;

/// What a session needs to start over in a new browser: the cookies of its context and the
/// localStorage of the origins it was on (secrets: kept in memory only, never shown).
#[derive(Clone, Default)]
pub struct SavedState {
    /// The context's cookies.
    pub cookies: Vec<CookieSpec>,
    /// localStorage entries per origin.
    pub local_storage: HashMap<String, HashMap<String, String>>,
}

impl std::fmt::Debug for SavedState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SavedState {{ {} cookies, {} local_storage origins (redacted) }}",
            self.cookies.len(),
            self.local_storage.len()
        )
    }
}

impl SavedState {
    /// `credentials` with this state over them: its cookies after theirs (so they win), its
    /// localStorage in place of theirs for the same origin.
    pub fn over(&self, credentials: &Credentials) -> Credentials {
        let mut merged = credentials.clone();
        merged.cookies.extend(self.cookies.iter().cloned());
        for (origin, entries) in &self.local_storage {
            merged.local_storage.insert(origin.clone(), entries.clone());
        }
        merged
    }
}

/// An open browser context with its tabs, held by one job or session. Close it with
/// [`Lease::close`]; dropping it also frees the slot (the context goes with its browser).
pub struct Lease {
    pub(super) pool: Pool,
    pub(super) running: Arc<Running>,
    pub(super) context: Option<BrowserContextId>,
    pub(super) tabs: Vec<Tab>,
    pub(super) current: usize,
    pub(super) profile: Profile,
    pub(super) credentials: Credentials,
    /// A job's slot (`max_contexts`); sessions hold none.
    pub(super) _permit: Option<OwnedSemaphorePermit>,
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

    /// Records the context's cookies and the current page's localStorage (for its origin)
    /// into `state`, for a session to be restored from if its browser fails.
    pub async fn save_state(&self, state: &mut SavedState) -> Result<(), Error> {
        use chromiumoxide::cdp::browser_protocol::storage::GetCookiesParams;
        let timeout = self.pool.command_timeout();
        let params = GetCookiesParams {
            browser_context_id: self.context.clone(),
        };
        let cookies = with_timeout(timeout, self.running.browser().execute(params))
            .await?
            .result
            .cookies;
        state.cookies = cookies
            .into_iter()
            .map(|cookie| CookieSpec {
                name: cookie.name,
                value: cookie.value,
                url: None,
                domain: Some(cookie.domain),
                path: Some(cookie.path),
                secure: cookie.secure,
                http_only: cookie.http_only,
            })
            .collect();
        if self.tab().crashed() {
            return Ok(());
        }
        let answer = super::actions::eval_raw(
            self.page(),
            "(() => { try { return { origin: location.origin, items: Object.fromEntries(Object.entries(localStorage)) }; } catch (e) { return null; } })()"
                .to_owned(),
            timeout,
        )
        .await;
        if let Ok(answer) = answer
            && let Some(origin) = answer["origin"].as_str()
            && (origin.starts_with("http://") || origin.starts_with("https://"))
            && let Some(items) = answer["items"].as_object()
        {
            let items: HashMap<String, String> = items
                .iter()
                .filter(|(key, _)| key.as_str() != "__trawl_seeded")
                .filter_map(|(key, value)| {
                    value.as_str().map(|value| (key.clone(), value.to_owned()))
                })
                .collect();
            state.local_storage.insert(origin.to_owned(), items);
        }
        Ok(())
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
