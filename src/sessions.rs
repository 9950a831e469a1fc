//! Agent sessions: a browser context an agent drives step by step over the API. Each session
//! belongs to the tenant of the token that opened it (another tenant sees 404), holds one context of this
//! process's browser pool, and ends when deleted, after its idle timeout, when its browser
//! fails, or when the server stops. After each page-changing action that succeeded, a JPEG
//! preview goes into a ring of the last few (never after an error). Every action, its outcome
//! and a screenshot are written to the store as the session's replay log, readable after the
//! session ended; credentials it was opened with are never written or shown, and text typed
//! into a password field (or by a `type` marked `secret`) is logged masked.
//!
//! Sessions have their own budget beside the browse jobs' contexts: `sessions.max_sessions`
//! of them, and none opened on a browser already at `browse.max_memory_mb`. A client may
//! choose a session's id (unique per tenant: kept as `<tenant>/<id>` in the store). A
//! session whose browser crashed or was killed is restored in a new one (a fresh context with
//! its credentials, its saved cookies and localStorage, at its last URL); the action that
//! found it so says `recovered: true`.
//!
//! Not here: the actions themselves (`trawl_workers::browse::actions`), the HTTP surface
//! (`api::sessions`), routing an API process's requests to the worker that holds a session
//! (`session_hosts`).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use trawl_workers::browse::{self, Action, ActionOutcome, Credentials, Lease, Pool, Profile};
use utoipa::ToSchema;

use crate::secret::Secret;
use crate::store::{self, NewSessionStep, SessionRecord, Store};

/// Session limits. Every field is a `trawl.toml` key under `[sessions]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Sessions open at once in this process.
    pub max_sessions: usize,
    /// Seconds without an action after which a session is closed.
    pub idle_timeout_secs: u64,
    /// Previews kept per session (the last N).
    pub previews: usize,
    /// Actions in one request at most.
    pub max_batch: usize,
    /// Where `trawl work` (with a browse pool) serves its sessions to API processes
    /// elsewhere, e.g. `0.0.0.0:8788`. None: this worker hosts no sessions.
    pub listen: Option<String>,
    /// The URL API processes reach this worker's sessions at (default `http://<listen>`;
    /// needed when `listen` is an unspecified address such as 0.0.0.0). `{hostname}` stands
    /// for this machine's host name, e.g. `http://{hostname}:8788`.
    pub advertise: Option<String>,
    /// The secret API processes and session hosts share (at least 16 characters). A worker
    /// needs it to serve `listen`; an API process without a browser needs it to route
    /// sessions to the workers.
    pub worker_token: Option<Secret>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_sessions: 20,
            idle_timeout_secs: 3_600,
            previews: 8,
            max_batch: 50,
            listen: None,
            advertise: None,
            worker_token: None,
        }
    }
}

/// A `[sessions]` setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `max_sessions` is outside 1..=1000.
    #[error("sessions.max_sessions = {0} must be within 1..=1000")]
    MaxSessions(usize),
    /// `idle_timeout_secs` is 0.
    #[error("sessions.idle_timeout_secs must be at least 1")]
    IdleTimeout,
    /// `previews` is outside 1..=100.
    #[error("sessions.previews must be within 1..=100")]
    Previews,
    /// `max_batch` is 0.
    #[error("sessions.max_batch must be at least 1")]
    MaxBatch,
    /// `worker_token` is too short to be a secret, or holds whitespace (it is compared
    /// exactly).
    #[error("sessions.worker_token must be at least 16 characters, without whitespace")]
    ShortWorkerToken,
    /// `listen` is not a socket address.
    #[error("sessions.listen = {0:?} is not an address like 0.0.0.0:8788")]
    Listen(String),
    /// `listen` is set without the token API processes present.
    #[error(
        "sessions.listen needs sessions.worker_token (TRAWL_SESSIONS__WORKER_TOKEN), the secret \
         the API processes present"
    )]
    ListenWithoutToken,
    /// `listen` is an unspecified address and no `advertise` says where to reach it.
    #[error(
        "sessions.listen = {0} is not an address the API can reach: set sessions.advertise \
         (e.g. http://worker-1:8788)"
    )]
    Unreachable(String),
    /// `advertise` is not a URL.
    #[error("sessions.advertise = {advertise:?}: {error}")]
    AdvertiseUrl {
        /// The setting.
        advertise: String,
        /// Why it does not parse.
        error: url::ParseError,
    },
    /// `advertise` is not an http(s) URL with a host.
    #[error("sessions.advertise = {0:?} must be an http(s) URL with a host")]
    AdvertiseScheme(String),
}

impl Config {
    /// Checks the values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.max_sessions == 0 || self.max_sessions > 1_000 {
            return Err(ConfigError::MaxSessions(self.max_sessions));
        }
        if self.idle_timeout_secs == 0 {
            return Err(ConfigError::IdleTimeout);
        }
        if self.previews == 0 || self.previews > 100 {
            return Err(ConfigError::Previews);
        }
        if self.max_batch == 0 {
            return Err(ConfigError::MaxBatch);
        }
        if let Some(token) = &self.worker_token
            && (token.expose().len() < 16 || token.expose().chars().any(char::is_whitespace))
        {
            return Err(ConfigError::ShortWorkerToken);
        }
        if let Some(listen) = &self.listen {
            let address: std::net::SocketAddr = listen
                .parse()
                .map_err(|_| ConfigError::Listen(listen.clone()))?;
            if self.worker_token.is_none() {
                return Err(ConfigError::ListenWithoutToken);
            }
            if self.advertise.is_none() && address.ip().is_unspecified() {
                return Err(ConfigError::Unreachable(listen.clone()));
            }
        }
        if let Some(advertise) = &self.advertise {
            let url =
                url::Url::parse(&advertise.replace("{hostname}", "host")).map_err(|error| {
                    ConfigError::AdvertiseUrl {
                        advertise: advertise.clone(),
                        error,
                    }
                })?;
            if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
                return Err(ConfigError::AdvertiseScheme(advertise.clone()));
            }
        }
        Ok(())
    }

    /// The URL API processes reach this worker's sessions at, when it hosts sessions
    /// (`{hostname}` in `advertise` stands for this machine's host name: one setting for many
    /// replicas).
    pub fn host_url(&self) -> Option<String> {
        match (&self.advertise, &self.listen) {
            (Some(advertise), _) => {
                let advertise = advertise.trim_end_matches('/');
                Some(if advertise.contains("{hostname}") {
                    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
                        .map(|name| name.trim().to_owned())
                        .unwrap_or_else(|_| "localhost".to_owned());
                    advertise.replace("{hostname}", &hostname)
                } else {
                    advertise.to_owned()
                })
            }
            (None, Some(listen)) => Some(format!("http://{listen}")),
            (None, None) => None,
        }
    }
}

/// Why a session request failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No such session for this token (or it ended).
    #[error("no session {0}")]
    NotFound(String),
    /// The session limit or every browser context is taken.
    #[error("{0}")]
    Busy(String),
    /// The request is malformed.
    #[error("{0}")]
    Invalid(String),
    /// The id chosen is taken by another session of this tenant (open or closed: an id
    /// names one session and its replay log).
    #[error("{0}")]
    Conflict(String),
    /// The browser failed; the session is closed.
    #[error("the browser failed and the session was closed: {0}")]
    Browser(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
}

/// A session as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// `desktop` or `mobile`.
    pub profile: Profile,
    /// When it was opened (RFC 3339).
    pub created_at: String,
    /// Seconds without an action before it is closed.
    pub idle_timeout_secs: u64,
    /// The current tab's URL after the last action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The current tab's title after the last action.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The last action's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_action: Option<String>,
    /// Seconds since the last action (or the opening).
    #[serde(default)]
    pub idle_secs: u64,
}

/// The caller's open sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct SessionList {
    /// Oldest first.
    pub sessions: Vec<SessionInfo>,
}

/// One action's result in a session: the outcome, its number in the replay log, and the
/// preview it left (page-changing actions that succeeded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Step {
    /// Its number in the session's replay log (1, 2, …).
    pub seq: u64,
    /// The preview taken after it (`GET /v1/sessions/{id}/previews/{n}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<u64>,
    /// What it did.
    #[serde(flatten)]
    pub outcome: ActionOutcome,
}

/// A session's replay log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Replay {
    /// The session.
    pub session: SessionRecord,
    /// Every action in order, with its outcome and screenshot.
    pub steps: Vec<ReplayStep>,
}

/// One step of a replay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ReplayStep {
    /// Its number.
    pub seq: u64,
    /// The action as sent.
    pub action: serde_json::Value,
    /// What it did.
    pub outcome: serde_json::Value,
    /// The screenshot after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<browse::actions::Image>,
    /// When it ran.
    pub created_at: String,
}

struct Session {
    /// The store's key: a generated ULID, or `<tenant>/<chosen id>`.
    key: String,
    /// The id the API shows (the chosen one, or the ULID).
    id: String,
    owner: String,
    /// What it was opened with, kept (in memory only) to restore it in a new browser.
    credentials: Credentials,
    progress: std::sync::Mutex<Progress>,
    profile: Profile,
    created_at: String,
    lease: tokio::sync::Mutex<Option<Lease>>,
    last_used: std::sync::Mutex<Instant>,
    previews: std::sync::Mutex<Previews>,
    next_seq: AtomicU64,
}

/// Where a session is: for the listing, and to restore it in a new browser.
#[derive(Default)]
struct Progress {
    url: Option<String>,
    title: Option<String>,
    last_action: Option<String>,
    saved: browse::SavedState,
}

#[derive(Default)]
struct Previews {
    next: u64,
    ring: VecDeque<(u64, Vec<u8>)>,
}

/// The live sessions of this process.
pub struct Sessions {
    pool: Pool,
    store: Store,
    config: Config,
    host: Option<String>,
    live: std::sync::Mutex<HashMap<String, Arc<Session>>>,
    /// How `archive` actions extract the pages they take (see [`Sessions::store_pages_with`]).
    extraction: std::sync::OnceLock<trawl_workers::fetch::Deps>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("config", &self.config)
            .field("live", &self.count())
            .finish_non_exhaustive()
    }
}

impl Sessions {
    /// Sessions on `pool`, recorded in `store`. Starts nothing: call
    /// [`Sessions::expire_idle`] periodically (`spawn_sweeper` does).
    pub fn new(pool: Pool, store: Store, config: Config) -> Arc<Sessions> {
        Sessions::with_host(pool, store, config, None)
    }

    /// Sessions a worker hosts for API processes elsewhere: each is recorded as living at
    /// `host_url`, so any API process on the same store routes its actions here.
    pub fn hosted(pool: Pool, store: Store, config: Config, host_url: String) -> Arc<Sessions> {
        Sessions::with_host(pool, store, config, Some(host_url))
    }

    fn with_host(pool: Pool, store: Store, config: Config, host: Option<String>) -> Arc<Sessions> {
        Arc::new(Sessions {
            pool,
            store,
            config,
            host,
            live: std::sync::Mutex::new(HashMap::new()),
            extraction: std::sync::OnceLock::new(),
        })
    }

    /// Lets `archive` actions store the pages they take, extracted with `fetch`'s settings
    /// (the process's own; the first call wins). Without it an `archive` action fails with
    /// `browser_failed` saying the process stores no pages.
    pub fn store_pages_with(&self, fetch: trawl_workers::fetch::Deps) {
        let _ = self.extraction.set(fetch);
    }

    /// Stores the page an `archive` action took (`outcome.taken`) for the session's owner,
    /// queued for the archive: its id in `page_id`, or the action failed with why not.
    async fn store_taken(
        &self,
        session: &Session,
        seq: u64,
        outcome: &mut ActionOutcome,
    ) -> Result<(), Error> {
        if outcome.taken.is_none() {
            return Ok(());
        }
        let Some(fetch) = self.extraction.get() else {
            outcome.taken = None;
            crate::browser_pages::fail_step(
                outcome,
                "browser_failed",
                "this process stores no pages from sessions".to_owned(),
            );
            return Ok(());
        };
        let tenant = crate::tenant::Tenant::new(&session.owner)
            .unwrap_or_else(|_| crate::tenant::Tenant::default());
        let from = serde_json::json!({"session": session.id, "step": seq});
        crate::browser_pages::archive_step(fetch, &self.store, &tenant, from, outcome).await?;
        Ok(())
    }

    /// Closes idle sessions every few seconds until the returned task is aborted.
    pub fn spawn_sweeper(self: &Arc<Self>) -> tokio::task::JoinHandle<()> {
        let sessions = Arc::downgrade(self);
        let every = Duration::from_secs(self.config.idle_timeout_secs.clamp(1, 30));
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let Some(sessions) = sessions.upgrade() else {
                    return;
                };
                sessions.expire_idle().await;
            }
        })
    }

    /// Sessions open now.
    pub fn count(&self) -> usize {
        self.live.lock().map(|live| live.len()).unwrap_or(0)
    }

    /// The limits.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Opens a session for `owner`, with the id the client chose (`id`, see [`check_id`]) or
    /// a generated one.
    pub async fn open(
        &self,
        owner: &str,
        id: Option<&str>,
        profile: Profile,
        credentials: &Credentials,
    ) -> Result<SessionInfo, Error> {
        credentials.validate().map_err(Error::Invalid)?;
        if let Some(id) = id {
            check_id(id).map_err(Error::Invalid)?;
        }
        // The admin's sessions are the default tenant's.
        let owner = if owner == ANY_OWNER {
            crate::tenant::DEFAULT
        } else {
            owner
        };
        let (key, shown) = match id {
            Some(id) => (format!("{owner}/{id}"), id.to_owned()),
            None => {
                let id = ulid::Ulid::generate().to_string();
                (id.clone(), id)
            }
        };
        let taken = || {
            Error::Conflict(format!(
                "session id {shown:?} is taken (an id names one session and its replay log): choose another"
            ))
        };
        if self
            .live
            .lock()
            .map(|live| live.contains_key(&key))
            .unwrap_or(false)
            || self.store.session(&key).await?.is_some()
        {
            return Err(taken());
        }
        if self.count() >= self.config.max_sessions {
            return Err(Error::Busy(format!(
                "at most {} sessions are open at once (sessions.max_sessions); close one first",
                self.config.max_sessions
            )));
        }
        let lease = self
            .pool
            .lease_session(profile, credentials)
            .await
            .map_err(lease_error)?;
        if let Err(error) = self
            .store
            .create_session(&key, owner, profile.as_str(), self.host.as_deref())
            .await
        {
            lease.close().await;
            // Two opens with one id at once: the second finds the first's row.
            if self.store.session(&key).await.ok().flatten().is_some() {
                return Err(taken());
            }
            return Err(error.into());
        }
        let session = Arc::new(Session {
            key: key.clone(),
            id: shown,
            owner: owner.to_owned(),
            credentials: credentials.clone(),
            progress: std::sync::Mutex::new(Progress::default()),
            profile,
            created_at: jiff::Timestamp::now().to_string(),
            lease: tokio::sync::Mutex::new(Some(lease)),
            last_used: std::sync::Mutex::new(Instant::now()),
            previews: std::sync::Mutex::new(Previews::default()),
            next_seq: AtomicU64::new(1),
        });
        let info = info(&session, &self.config);
        if let Ok(mut live) = self.live.lock() {
            live.insert(key, session);
        }
        Ok(info)
    }

    fn get(&self, owner: &str, id: &str) -> Result<Arc<Session>, Error> {
        let live = self
            .live
            .lock()
            .map_err(|_| Error::NotFound(id.to_owned()))?;
        keys_for(owner, id)
            .iter()
            .filter_map(|key| live.get(key))
            .find(|session| owner == ANY_OWNER || session.owner == owner)
            .cloned()
            .ok_or_else(|| Error::NotFound(id.to_owned()))
    }

    /// A session of `owner`.
    pub fn info(&self, owner: &str, id: &str) -> Result<SessionInfo, Error> {
        self.get(owner, id)
            .map(|session| info(&session, &self.config))
    }

    /// The open sessions of `owner` (every one for the admin), oldest first.
    pub fn list(&self, owner: &str) -> Vec<SessionInfo> {
        let mut sessions: Vec<SessionInfo> = self
            .live
            .lock()
            .map(|live| {
                live.values()
                    .filter(|session| owner == ANY_OWNER || session.owner == owner)
                    .map(|session| info(session, &self.config))
                    .collect()
            })
            .unwrap_or_default();
        sort_by_age(&mut sessions);
        sessions
    }

    /// A new lease for a session whose browser failed: a fresh context with its credentials
    /// and its saved cookies and localStorage, at its last URL.
    async fn restore(&self, session: &Session) -> Result<Lease, browse::Error> {
        let (url, credentials) = {
            let progress = session.progress.lock().map_err(|_| {
                browse::Error::Crashed("the session's state is unreadable".to_owned())
            })?;
            (
                progress.url.clone(),
                progress.saved.over(&session.credentials),
            )
        };
        let mut lease = self
            .pool
            .lease_session(session.profile, &credentials)
            .await?;
        if let Some(url) = url.filter(|url| url.starts_with("http:") || url.starts_with("https:")) {
            let goto = Action::Goto {
                url,
                wait_until: Some(browse::actions::WaitUntil::Load),
            };
            match browse::actions::run(&mut lease, &goto).await {
                Ok(outcome) if !outcome.ok => {
                    tracing::warn!(error = ?outcome.error, "a restored session could not go back to its last page");
                }
                Ok(_) => {}
                Err(error) => {
                    lease.browser_failed().await;
                    return Err(error);
                }
            }
        }
        Ok(lease)
    }

    /// Runs actions in order, stopping at the first that fails; returns their steps.
    pub async fn act(&self, owner: &str, id: &str, actions: &[Action]) -> Result<Vec<Step>, Error> {
        if actions.is_empty() {
            return Err(Error::Invalid("no action given".to_owned()));
        }
        if actions.len() > self.config.max_batch {
            return Err(Error::Invalid(format!(
                "at most {} actions per request (sessions.max_batch), got {}",
                self.config.max_batch,
                actions.len()
            )));
        }
        for (number, action) in actions.iter().enumerate() {
            action
                .validate()
                .map_err(|message| Error::Invalid(format!("action {}: {message}", number + 1)))?;
        }
        let session = self.get(owner, id)?;
        let key = session.key.clone();
        let mut guard = session.lease.lock().await;
        if guard.is_none() {
            return Err(Error::NotFound(id.to_owned()));
        }
        touch(&session);
        let mut steps = Vec::with_capacity(actions.len());
        for action in actions {
            // A browser that died (crashed, killed) since the last action, or fails during
            // this one: the session goes on in a new browser, at its last URL, once.
            let mut recovered = false;
            let mut outcome = loop {
                let alive = guard.as_ref().is_some_and(Lease::is_alive);
                let result = match guard.as_mut() {
                    Some(lease) if alive => browse::actions::run(lease, action).await,
                    _ => Err(browse::Error::Crashed("the browser is gone".to_owned())),
                };
                match result {
                    Ok(outcome) => break outcome,
                    Err(error) if recovered => {
                        return Err(self.lost(&session, &mut guard, error).await);
                    }
                    Err(error) => {
                        tracing::warn!(session = %session.id, error = %error, "a session's browser failed; restoring it in a new one");
                        if let Some(lease) = guard.take() {
                            lease.browser_failed().await;
                        }
                        match self.restore(&session).await {
                            Ok(lease) => {
                                *guard = Some(lease);
                                recovered = true;
                            }
                            Err(error) => return Err(self.lost(&session, &mut guard, error).await),
                        }
                    }
                }
            };
            outcome.recovered = recovered;
            let seq = session.next_seq.fetch_add(1, Ordering::Relaxed);
            self.store_taken(&session, seq, &mut outcome).await?;
            let Some(lease) = guard.as_mut() else {
                return Err(Error::NotFound(id.to_owned()));
            };
            // The step's screenshot: the action's own image, else a JPEG of the viewport.
            let preview = browse::actions::preview(lease).await.ok();
            let (image, media_type) = match (&outcome.image, &preview) {
                (Some(image), _) => (image.bytes().ok(), image.media_type.clone()),
                (None, Some(jpeg)) => (Some(jpeg.clone()), "image/jpeg".to_owned()),
                (None, None) => (None, String::new()),
            };
            let preview_number = match (&preview, outcome.ok && action.changes_page()) {
                (Some(jpeg), true) => Some(self.push_preview(&session, jpeg.clone())),
                _ => None,
            };
            // A secret typed (a password field, `secret: true`) is kept masked.
            let logged = action.logged(outcome.typed_secret);
            let action_json = serde_json::to_value(&logged).expect("actions serialise");
            // The image goes to the blobs, and read_html's page is not kept in the log.
            let shown_image = outcome.image.take();
            let shown_html = outcome.html_base64.take();
            let outcome_json = serde_json::to_value(&outcome).expect("outcomes serialise");
            outcome.image = shown_image;
            outcome.html_base64 = shown_html;
            self.store
                .add_session_step(&NewSessionStep {
                    session_id: &key,
                    seq,
                    action: &action_json,
                    outcome: &outcome_json,
                    image: image.as_deref().map(|bytes| (bytes, media_type.as_str())),
                })
                .await?;
            if let Ok(mut progress) = session.progress.lock() {
                progress.url = Some(outcome.url.clone());
                progress.title = outcome.title.clone();
                progress.last_action = Some(outcome.action.clone());
            }
            let ok = outcome.ok;
            steps.push(Step {
                seq,
                preview: preview_number,
                outcome,
            });
            if !ok {
                break;
            }
        }
        // What a new browser would need to restore the session: its cookies and storage now.
        if let Some(lease) = guard.as_ref() {
            let mut saved = session
                .progress
                .lock()
                .map(|progress| progress.saved.clone())
                .unwrap_or_default();
            match lease.save_state(&mut saved).await {
                Ok(()) => {
                    if let Ok(mut progress) = session.progress.lock() {
                        progress.saved = saved;
                    }
                }
                Err(error) => tracing::debug!(error = %error, "could not save a session's state"),
            }
        }
        touch(&session);
        Ok(steps)
    }

    /// The session's browser failed and it could not be restored: it is closed.
    async fn lost(
        &self,
        session: &Session,
        guard: &mut Option<Lease>,
        error: browse::Error,
    ) -> Error {
        self.forget(&session.key);
        if let Some(lease) = guard.take() {
            lease.browser_failed().await;
        }
        if let Err(store) = self
            .store
            .close_session(&session.key, "browser_failed")
            .await
        {
            return store.into();
        }
        Error::Browser(error.to_string())
    }

    fn push_preview(&self, session: &Session, jpeg: Vec<u8>) -> u64 {
        let Ok(mut previews) = session.previews.lock() else {
            return 0;
        };
        previews.next += 1;
        let number = previews.next;
        previews.ring.push_back((number, jpeg));
        while previews.ring.len() > self.config.previews {
            previews.ring.pop_front();
        }
        number
    }

    /// Preview `number` of a session (only the last few are kept).
    pub fn preview(&self, owner: &str, id: &str, number: u64) -> Result<Vec<u8>, Error> {
        let session = self.get(owner, id)?;
        let previews = session
            .previews
            .lock()
            .map_err(|_| Error::NotFound(id.to_owned()))?;
        previews
            .ring
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, jpeg)| jpeg.clone())
            .ok_or_else(|| {
                let kept: Vec<String> = previews.ring.iter().map(|(n, _)| n.to_string()).collect();
                Error::NotFound(format!(
                    "{id} preview {number} (kept: {})",
                    if kept.is_empty() {
                        "none yet".to_owned()
                    } else {
                        kept.join(", ")
                    }
                ))
            })
    }

    /// Closes a session of `owner`.
    pub async fn close(&self, owner: &str, id: &str) -> Result<(), Error> {
        let session = self.get(owner, id)?;
        self.end(&session, "closed").await
    }

    async fn end(&self, session: &Arc<Session>, reason: &str) -> Result<(), Error> {
        self.forget(&session.key);
        let lease = session.lease.lock().await.take();
        if let Some(lease) = lease {
            lease.close().await;
        }
        self.store.close_session(&session.key, reason).await?;
        Ok(())
    }

    fn forget(&self, id: &str) {
        if let Ok(mut live) = self.live.lock() {
            live.remove(id);
        }
    }

    /// Closes sessions idle for longer than the timeout; returns how many.
    pub async fn expire_idle(&self) -> usize {
        let timeout = Duration::from_secs(self.config.idle_timeout_secs);
        let idle: Vec<Arc<Session>> = self
            .live
            .lock()
            .map(|live| {
                live.values()
                    .filter(|session| {
                        session
                            .last_used
                            .lock()
                            .map(|last| last.elapsed() >= timeout)
                            .unwrap_or(false)
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        let mut closed = 0;
        for session in idle {
            // A session busy with a request is not idle: skip it if its lease is held.
            if session.lease.try_lock().is_err() {
                continue;
            }
            match self.end(&session, "expired").await {
                Ok(()) => closed += 1,
                Err(error) => tracing::warn!(error = %error, "could not close an idle session"),
            }
        }
        closed
    }

    /// Closes every session (the server is stopping).
    pub async fn close_all(&self) {
        let all: Vec<Arc<Session>> = self
            .live
            .lock()
            .map(|live| live.values().cloned().collect())
            .unwrap_or_default();
        for session in all {
            if let Err(error) = self.end(&session, "shutdown").await {
                tracing::warn!(error = %error, "could not close a session");
            }
        }
    }
}

/// The store's record of session `id` as `owner` names it (the chosen id or the generated
/// one), when `owner` may see it.
pub async fn record(store: &Store, owner: &str, id: &str) -> Result<Option<SessionRecord>, Error> {
    for key in keys_for(owner, id) {
        if let Some(record) = store
            .session(&key)
            .await?
            .filter(|record| owner == ANY_OWNER || record.owner == owner)
        {
            return Ok(Some(record));
        }
    }
    Ok(None)
}

/// A session's replay log, open or closed, for its owner. It is read from the store, so any
/// process on that store can serve it, whether or not it holds the session's browser.
pub async fn replay(store: &Store, owner: &str, id: &str) -> Result<Replay, Error> {
    let mut session = record(store, owner, id)
        .await?
        .ok_or_else(|| Error::NotFound(id.to_owned()))?;
    let key = session.id.clone();
    session.id = shown_id(&key).to_owned();
    let mut steps = Vec::new();
    for record in store.session_steps(&key).await? {
        let image = match (&record.image_sha256, &record.image_type) {
            (Some(sha), Some(media_type)) => {
                store.blob(sha).await?.map(|bytes| browse::actions::Image {
                    media_type: media_type.clone(),
                    base64: base64::engine::general_purpose::STANDARD.encode(bytes),
                })
            }
            _ => None,
        };
        steps.push(ReplayStep {
            seq: record.seq,
            action: record.action,
            outcome: record.outcome,
            image,
            created_at: record.created_at,
        });
    }
    Ok(Replay { session, steps })
}

/// Sorts sessions oldest first (then by id).
pub fn sort_by_age(sessions: &mut [SessionInfo]) {
    sessions.sort_by_cached_key(|session| {
        (
            session.created_at.parse::<jiff::Timestamp>().ok(),
            session.id.clone(),
        )
    });
}

/// The longest id a client may choose.
pub const MAX_ID_LEN: usize = 128;

/// Checks an id a client chose for its session: 1 to 128 ASCII letters, digits, `-`, `_`,
/// `.` or `:` (an agent's chat or task id), not starting with `.`.
pub fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty()
        || id.len() > MAX_ID_LEN
        || id.starts_with('.')
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c))
    {
        return Err(format!(
            "session id {id:?} must be 1 to {MAX_ID_LEN} ASCII letters, digits, '-', '_', '.' or ':' \
             (not starting with '.')"
        ));
    }
    Ok(())
}

/// The store keys session `id` may have for `owner`: its own chosen id, then a generated one
/// (the admin: a full key or a generated id, then the default tenant's chosen id).
fn keys_for(owner: &str, id: &str) -> Vec<String> {
    if owner == ANY_OWNER {
        vec![id.to_owned(), format!("{}/{id}", crate::tenant::DEFAULT)]
    } else {
        vec![format!("{owner}/{id}"), id.to_owned()]
    }
}

/// The id a store key shows as (tenant names and ids hold no `/`).
fn shown_id(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or(key)
}

fn lease_error(error: browse::Error) -> Error {
    match error {
        browse::Error::Busy(max) => Error::Busy(format!(
            "the browser is busy: all {max} contexts are in use; try again later"
        )),
        full @ browse::Error::Full { .. } => Error::Busy(full.to_string()),
        error => Error::Browser(error.to_string()),
    }
}

fn touch(session: &Session) {
    if let Ok(mut last) = session.last_used.lock() {
        *last = Instant::now();
    }
}

fn info(session: &Session, config: &Config) -> SessionInfo {
    let (url, title, last_action) = session
        .progress
        .lock()
        .map(|progress| {
            (
                progress.url.clone(),
                progress.title.clone(),
                progress.last_action.clone(),
            )
        })
        .unwrap_or_default();
    SessionInfo {
        id: session.id.clone(),
        profile: session.profile,
        created_at: session.created_at.clone(),
        idle_timeout_secs: config.idle_timeout_secs,
        url,
        title,
        last_action,
        idle_secs: session
            .last_used
            .lock()
            .map(|last| last.elapsed().as_secs())
            .unwrap_or(0),
    }
}

/// The owner the admin token acts as: it sees every tenant's sessions (and opens sessions of
/// the default tenant). No tenant has this name.
pub const ANY_OWNER: &str = "*";

/// The fingerprint of a bearer token, so tokens are never kept in memory longer than the
/// request or written anywhere: the name of a bare token's own tenant (`token-<fingerprint>`).
pub fn owner_of(token: Option<&str>) -> String {
    use sha2::Digest as _;
    match token {
        Some(token) => hex::encode(&sha2::Sha256::digest(token.as_bytes())[..16]),
        None => "anonymous".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosting(listen: &str, advertise: Option<&str>, token: Option<&str>) -> Config {
        Config {
            listen: Some(listen.to_owned()),
            advertise: advertise.map(str::to_owned),
            worker_token: token.map(Secret::new),
            ..Config::default()
        }
    }

    #[test]
    fn a_session_host_needs_a_token_and_an_address_the_api_can_reach() {
        let token = Some("worker-token-0123456789");
        assert_eq!(Config::default().validate(), Ok(()));
        assert_eq!(Config::default().host_url(), None);

        let local = hosting("127.0.0.1:8788", None, token);
        assert_eq!(local.validate(), Ok(()));
        assert_eq!(local.host_url().as_deref(), Some("http://127.0.0.1:8788"));

        let error = hosting("127.0.0.1:8788", None, None)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(error.contains("worker_token"), "{error}");
        let error = hosting("127.0.0.1:8788", None, Some("short"))
            .validate()
            .unwrap_err()
            .to_string();
        assert!(error.contains("16"), "{error}");
        let error = hosting("0.0.0.0:8788", None, token)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(error.contains("sessions.advertise"), "{error}");
        let error = hosting("localhost", None, token)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(error.contains("not an address"), "{error}");
        let error = hosting("0.0.0.0:8788", Some("ftp://x"), token)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(error.contains("http(s)"), "{error}");

        let replicas = hosting("0.0.0.0:8788", Some("http://{hostname}:8788/"), token);
        assert_eq!(replicas.validate(), Ok(()));
        let url = replicas.host_url().expect("a url");
        assert!(
            url.starts_with("http://") && url.ends_with(":8788"),
            "{url}"
        );
        assert!(!url.contains('{'), "{url}");
    }

    #[test]
    fn chosen_ids_are_checked_and_keyed_by_tenant() {
        for good in ["chat-42", "task_7.b", "a", "urn:chat:9", &"x".repeat(128)] {
            assert_eq!(check_id(good), Ok(()), "{good}");
        }
        for bad in ["", "a/b", "has space", ".hidden", "é", &"x".repeat(129)] {
            assert!(check_id(bad).is_err(), "{bad:?}");
        }
        assert_eq!(keys_for("acme", "chat-1"), vec!["acme/chat-1", "chat-1"]);
        assert_eq!(shown_id("acme/chat-1"), "chat-1");
        assert_eq!(
            shown_id("01J0000000000000000000000A"),
            "01J0000000000000000000000A"
        );
    }

    #[test]
    fn owners_are_fingerprints_not_tokens() {
        let owner = owner_of(Some("token-a-0123456789abcdef"));
        assert_eq!(owner.len(), 32);
        assert!(!owner.contains("token"));
        assert_ne!(owner, owner_of(Some("token-b-0123456789abcdef")));
        assert_eq!(owner_of(None), "anonymous");
    }
}
