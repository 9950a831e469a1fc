//! Distributed agent sessions. A session lives in the process that holds its browser: in the
//! distributed set-up that is a `trawl work` with a browse pool and `sessions.listen`, a
//! *session host*. A host serves the session routes to API processes on its listen address
//! (behind `sessions.worker_token`; the API passes the caller's tenant along), and
//! registers itself in the store, renewing the row every few seconds with how many sessions
//! it holds. An API process without a browser ([`Remote`]) opens a session on the live host
//! with the most free places, records nothing itself (the host records the session and where
//! it lives), and forwards each later request of that session to its host.
//!
//! Not here: the sessions themselves (`crate::sessions`), the HTTP handlers on either side
//! (`api::sessions`). The link between API and hosts is plain HTTP with a shared secret:
//! credentials a session is opened with cross it, so keep it on a private network.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use trawl_workers::web;

use crate::secret::Secret;
use crate::sessions::Sessions;
use crate::store::{self, SessionHost, Store};

/// How often a host renews its registration.
pub const RENEW_EVERY: Duration = Duration::from_secs(5);

/// A host not renewed for this long is taken for gone: no session is opened on it, and a
/// session on it that cannot be reached is closed.
pub const STALE_AFTER: Duration = Duration::from_secs(15);

/// The header carrying the caller's tenant (a session's owner) from the API to a host.
pub const OWNER_HEADER: &str = "x-trawl-owner";

/// Longest a forwarded request may take: a batch of actions can wait on slow pages.
const FORWARD_TIMEOUT_SECS: u64 = 600;

/// Largest answer read from a host (a batch's screenshots included).
const FORWARD_MAX_BYTES: u64 = 64 << 20;

fn now_ms() -> i64 {
    jiff::Timestamp::now().as_millisecond()
}

/// Hosts renewed at or after this moment are live.
fn live_since() -> i64 {
    now_ms() - STALE_AFTER.as_millis() as i64
}

/// A host's registration, renewed in the background until [`Registration::stop`].
#[derive(Debug)]
pub struct Registration {
    store: Store,
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Registration {
    /// Registers `sessions` as hosted at `url`. Sessions an earlier process left open at the
    /// same URL died with it: they are closed first (`host_lost`).
    pub async fn start(
        store: Store,
        url: String,
        sessions: Arc<Sessions>,
    ) -> Result<Registration, store::Error> {
        let lost = store.close_host_sessions(&url, "host_lost").await?;
        if lost > 0 {
            tracing::warn!(
                host = %url,
                sessions = lost,
                "closed sessions an earlier worker at this address left open"
            );
        }
        let capacity = sessions.config().max_sessions as u64;
        let renewal = move |sessions: &Sessions, url: &str| SessionHost {
            url: url.to_owned(),
            capacity,
            open: sessions.count() as u64,
            seen_ms: now_ms(),
        };
        store.renew_session_host(&renewal(&sessions, &url)).await?;
        let task = {
            let store = store.clone();
            let url = url.clone();
            let sessions = Arc::downgrade(&sessions);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(RENEW_EVERY).await;
                    let Some(sessions) = sessions.upgrade() else {
                        return;
                    };
                    if let Err(error) = store.renew_session_host(&renewal(&sessions, &url)).await {
                        tracing::warn!(error = %error, "could not renew this session host's registration");
                    }
                }
            })
        };
        Ok(Registration { store, url, task })
    }

    /// Stops renewing and removes the registration (call after closing the sessions).
    pub async fn stop(self) {
        self.task.abort();
        if let Err(error) = self.store.remove_session_host(&self.url).await {
            tracing::warn!(error = %error, "could not remove this session host's registration");
        }
    }
}

/// A host's answer, passed on to the API's caller as it is.
#[derive(Debug, Clone)]
pub struct Forwarded {
    /// Its HTTP status.
    pub status: u16,
    /// Its Content-Type.
    pub content_type: Option<String>,
    /// Its body.
    pub body: Bytes,
}

/// Why a request could not be routed to a host.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// No host is registered and live.
    #[error(
        "no worker hosts sessions: start `trawl work --pools fetch=N,browse=M` with \
         sessions.listen and the same sessions.worker_token"
    )]
    NoHost,
    /// No such open session for this owner.
    #[error("no session {0}")]
    NotFound(String),
    /// The session's host did not answer.
    #[error("{0}")]
    Unreachable(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
}

/// The API side: opens sessions on hosts and forwards requests to them.
#[derive(Debug)]
pub struct Remote {
    store: Store,
    client: web::Client,
    token: Secret,
}

impl Remote {
    /// Routes through the hosts registered in `store`, presenting `token` to them.
    pub fn new(store: Store, token: Secret) -> Result<Remote, String> {
        let config = web::Config {
            timeout_secs: FORWARD_TIMEOUT_SECS,
            read_timeout_secs: FORWARD_TIMEOUT_SECS,
            ..web::Config::default()
        };
        // Hosts are on the operator's own (private) network, possibly under `*.internal`
        // names; cloud metadata stays refused.
        let policy = web::Policy {
            allow_private_network: true,
            internal_hosts: vec!["*.internal".to_owned()],
            ..web::Policy::default()
        };
        let client = web::Client::new(config, policy).map_err(|error| error.to_string())?;
        Ok(Remote {
            store,
            client,
            token,
        })
    }

    /// Opens a session (`body`: the open request as JSON) on the live host with the most
    /// free places, trying the next when one is full or does not answer.
    pub async fn open(&self, owner: &str, body: Bytes) -> Result<Forwarded, RouteError> {
        let hosts = self.store.session_hosts(live_since()).await?;
        let mut last = None;
        for host in &hosts {
            match self
                .send(&host.url, "POST", "/v1/sessions", owner, Some(body.clone()))
                .await
            {
                // Full (or its browser is): the next host may have room.
                Ok(answer) if answer.status == 429 => last = Some(Ok(answer)),
                Ok(answer) => return Ok(answer),
                Err(error) => {
                    tracing::warn!(host = %host.url, error = %error, "a session host did not answer");
                    last = Some(Err(error));
                }
            }
        }
        match last {
            Some(Ok(busy)) => Ok(busy),
            Some(Err(error)) => Err(error),
            None => Err(RouteError::NoHost),
        }
    }

    /// Asks every live host for the caller's sessions (`GET /v1/sessions`); a host that does
    /// not answer is left out.
    pub async fn list(&self, owner: &str) -> Result<Vec<Forwarded>, RouteError> {
        let hosts = self.store.session_hosts(live_since()).await?;
        let mut answers = Vec::with_capacity(hosts.len());
        for host in &hosts {
            match self
                .send(&host.url, "GET", "/v1/sessions", owner, None)
                .await
            {
                Ok(answer) => answers.push(answer),
                Err(error) => {
                    tracing::warn!(host = %host.url, error = %error, "a session host did not answer")
                }
            }
        }
        Ok(answers)
    }

    /// Forwards a request about session `id` (`suffix`: the path after `/v1/sessions/{id}`)
    /// to the host that holds it.
    pub async fn forward(
        &self,
        owner: &str,
        id: &str,
        method: &str,
        suffix: &str,
        body: Option<Bytes>,
    ) -> Result<Forwarded, RouteError> {
        let record = crate::sessions::record(&self.store, owner, id)
            .await
            .map_err(|error| match error {
                crate::sessions::Error::Store(error) => RouteError::Store(error),
                other => RouteError::Unreachable(other.to_string()),
            })?
            .filter(|record| record.closed_at.is_none())
            .ok_or_else(|| RouteError::NotFound(id.to_owned()))?;
        let key = record.id.clone();
        // Opened by a process that serves its own sessions: not reachable from here.
        let host = record
            .host
            .ok_or_else(|| RouteError::NotFound(id.to_owned()))?;
        let path = format!("/v1/sessions/{id}{suffix}");
        match self.send(&host, method, &path, owner, body).await {
            Ok(answer) => Ok(answer),
            Err(error) => {
                // A host gone for good takes its sessions with it: close the record so the
                // caller gets 404 from now on, not a 502 forever.
                let live = self.store.session_hosts(live_since()).await?;
                if !live.iter().any(|live| live.url == host) {
                    self.store.close_session(&key, "host_lost").await?;
                    return Err(RouteError::Unreachable(format!(
                        "the worker holding session {id} is gone; the session is closed"
                    )));
                }
                Err(error)
            }
        }
    }

    async fn send(
        &self,
        host: &str,
        method: &str,
        path: &str,
        owner: &str,
        body: Option<Bytes>,
    ) -> Result<Forwarded, RouteError> {
        let url = url::Url::parse(&format!("{host}{path}")).map_err(|error| {
            RouteError::Unreachable(format!("session host {host:?} is not a URL: {error}"))
        })?;
        let authorization = format!("Bearer {}", self.token.expose());
        let mut headers = vec![
            ("authorization", authorization.as_str()),
            (OWNER_HEADER, owner),
        ];
        if body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        let response = self
            .client
            .call(method, &url, &headers, body, FORWARD_MAX_BYTES)
            .await
            .map_err(|error| {
                RouteError::Unreachable(format!(
                    "the worker holding the session ({host}) did not answer: {error}"
                ))
            })?;
        if response.status == 401 {
            return Err(RouteError::Unreachable(format!(
                "the worker holding the session ({host}) refused this server's \
                 sessions.worker_token: the two are configured with different secrets"
            )));
        }
        Ok(Forwarded {
            status: response.status,
            content_type: response.content_type().map(str::to_owned),
            body: response.body,
        })
    }
}
