//! Agent sessions: a browser context an agent drives step by step over the API. Each session
//! belongs to the tenant of the token that opened it (another tenant sees 404), holds one context of this
//! process's browser pool, and ends when deleted, after its idle timeout, when its browser
//! fails, or when the server stops. After each page-changing action that succeeded, a JPEG
//! preview goes into a ring of the last few (never after an error). Every action, its outcome
//! and a screenshot are written to the store as the session's replay log, readable after the
//! session ended; credentials it was opened with are never written or shown.
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
    id: String,
    owner: String,
    profile: Profile,
    created_at: String,
    lease: tokio::sync::Mutex<Option<Lease>>,
    last_used: std::sync::Mutex<Instant>,
    previews: std::sync::Mutex<Previews>,
    next_seq: AtomicU64,
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
        })
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

    /// Opens a session for `owner`.
    pub async fn open(
        &self,
        owner: &str,
        profile: Profile,
        credentials: &Credentials,
    ) -> Result<SessionInfo, Error> {
        credentials.validate().map_err(Error::Invalid)?;
        if self.count() >= self.config.max_sessions {
            return Err(Error::Busy(format!(
                "at most {} sessions are open at once (sessions.max_sessions); close one first",
                self.config.max_sessions
            )));
        }
        let lease = match self.pool.lease(profile, credentials, false).await {
            Ok(lease) => lease,
            Err(browse::Error::Busy(max)) => {
                return Err(Error::Busy(format!(
                    "the browser is busy: all {max} contexts are in use; try again later"
                )));
            }
            Err(error) => return Err(Error::Browser(error.to_string())),
        };
        // The admin's sessions are the default tenant's.
        let owner = if owner == ANY_OWNER {
            crate::tenant::DEFAULT
        } else {
            owner
        };
        let id = ulid::Ulid::generate().to_string();
        if let Err(error) = self
            .store
            .create_session(&id, owner, profile.as_str(), self.host.as_deref())
            .await
        {
            lease.close().await;
            return Err(error.into());
        }
        let session = Arc::new(Session {
            id: id.clone(),
            owner: owner.to_owned(),
            profile,
            created_at: jiff::Timestamp::now().to_string(),
            lease: tokio::sync::Mutex::new(Some(lease)),
            last_used: std::sync::Mutex::new(Instant::now()),
            previews: std::sync::Mutex::new(Previews::default()),
            next_seq: AtomicU64::new(1),
        });
        let info = info(&session, &self.config);
        if let Ok(mut live) = self.live.lock() {
            live.insert(id, session);
        }
        Ok(info)
    }

    fn get(&self, owner: &str, id: &str) -> Result<Arc<Session>, Error> {
        self.live
            .lock()
            .ok()
            .and_then(|live| live.get(id).cloned())
            .filter(|session| owner == ANY_OWNER || session.owner == owner)
            .ok_or_else(|| Error::NotFound(id.to_owned()))
    }

    /// A session of `owner`.
    pub fn info(&self, owner: &str, id: &str) -> Result<SessionInfo, Error> {
        self.get(owner, id)
            .map(|session| info(&session, &self.config))
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
        let mut guard = session.lease.lock().await;
        let Some(lease) = guard.as_mut() else {
            return Err(Error::NotFound(id.to_owned()));
        };
        touch(&session);
        let mut steps = Vec::with_capacity(actions.len());
        for action in actions {
            let mut outcome = match browse::actions::run(lease, action).await {
                Ok(outcome) => outcome,
                Err(error) => {
                    let lease = guard.take();
                    drop(guard);
                    self.forget(&session.id);
                    if let Some(lease) = lease {
                        lease.browser_failed().await;
                    }
                    self.store.close_session(id, "browser_failed").await?;
                    return Err(Error::Browser(error.to_string()));
                }
            };
            let seq = session.next_seq.fetch_add(1, Ordering::Relaxed);
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
            let action_json = serde_json::to_value(action).expect("actions serialise");
            let shown_image = outcome.image.take();
            let outcome_json = serde_json::to_value(&outcome).expect("outcomes serialise");
            outcome.image = shown_image;
            self.store
                .add_session_step(&NewSessionStep {
                    session_id: id,
                    seq,
                    action: &action_json,
                    outcome: &outcome_json,
                    image: image.as_deref().map(|bytes| (bytes, media_type.as_str())),
                })
                .await?;
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
        touch(&session);
        Ok(steps)
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
        self.forget(&session.id);
        let lease = session.lease.lock().await.take();
        if let Some(lease) = lease {
            lease.close().await;
        }
        self.store.close_session(&session.id, reason).await?;
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

/// A session's replay log, open or closed, for its owner. It is read from the store, so any
/// process on that store can serve it, whether or not it holds the session's browser.
pub async fn replay(store: &Store, owner: &str, id: &str) -> Result<Replay, Error> {
    let session = store
        .session(id)
        .await?
        .filter(|session| owner == ANY_OWNER || session.owner == owner)
        .ok_or_else(|| Error::NotFound(id.to_owned()))?;
    let mut steps = Vec::new();
    for record in store.session_steps(id).await? {
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

fn touch(session: &Session) {
    if let Ok(mut last) = session.last_used.lock() {
        *last = Instant::now();
    }
}

fn info(session: &Session, config: &Config) -> SessionInfo {
    SessionInfo {
        id: session.id.clone(),
        profile: session.profile,
        created_at: session.created_at.clone(),
        idle_timeout_secs: config.idle_timeout_secs,
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
    fn owners_are_fingerprints_not_tokens() {
        let owner = owner_of(Some("token-a-0123456789abcdef"));
        assert_eq!(owner.len(), 32);
        assert!(!owner.contains("token"));
        assert_ne!(owner, owner_of(Some("token-b-0123456789abcdef")));
        assert_eq!(owner_of(None), "anonymous");
    }
}
