//! The application, assembled in one place. [`App::build`] opens what the configuration names
//! — the store, the queue, the guarded HTTP client, the crawls' politeness (shared through
//! Redis in distributed mode), webhooks and, when asked, the browser pool — and holds them as
//! one immutable [`Deps`]. The parts a command runs on top (the fetch pool, the archive pool,
//! agent sessions, a session host, an HTTP server) are started through the `App`, which
//! keeps them, so [`App::shutdown`] stops everything once, in one order, for every command:
//! servers and pools stop taking work, running jobs finish, the archive pool commits, sessions
//! close, then the browser, the queue and the store.
//!
//! Every command (`run`, `crawl`, `serve`, `work`, …) and the system tests build the
//! application here, so what a test runs is what a user runs.
//!
//! Not here: the command line and its output (`cli`), what the parts do (`runner`, `archive`,
//! `sessions`, `api`), nor the process signals (`cli` waits for them and calls
//! [`App::shutdown`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinHandle;

use crate::archive::{self, Archiver, Stats, Stop};
use crate::config::Config;
pub use crate::deps::Deps;
use crate::deps::Parts;
use crate::runner::{self, PoolError};
use crate::sessions::Sessions;
pub use crate::shutdown::Shutdown;

/// What a command needs beyond the store, the queue and the client.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Needs {
    /// A browser pool (render and browse jobs, agent sessions). Chromium starts with the
    /// first page that needs it, not at build.
    pub browser: bool,
}

/// Why the application could not be assembled. Each names the part and the setting behind it.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The data directory could not be created.
    #[error("creating the data directory {}: {source}", path.display())]
    DataDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A command that only reads the store found no data directory (nothing was stored
    /// there yet).
    #[error(
        "no data directory {} here, so nothing is stored yet: `trawl run URL` or `trawl crawl URL` \
         creates it; or give --data-dir (data_dir in trawl.toml) of an existing one",
        path.display()
    )]
    NoDataDir {
        /// The directory.
        path: PathBuf,
    },
    /// A fallback extraction provider (`fetch.fallback`, `[fetch.firecrawl]`,
    /// `[fetch.crawl4ai]`) cannot be used: a key that does not resolve, a base URL that is
    /// not allowed.
    #[error("configuration: {0}")]
    Fallback(String),
    /// The HTTP client could not be built from `http`, `ssrf` and `proxy`.
    #[error("building the HTTP client: {0}")]
    Client(#[from] trawl_workers::web::client::ClientError),
    /// The store at `database_url`, or in the data directory, could not be opened. (The
    /// cause is part of the message, not a `source`: error chains would print it twice.)
    #[error("{what}: {error}")]
    Store {
        /// Which store.
        what: String,
        /// Why.
        error: crate::store::Error,
    },
    /// The queue at `redis_url`, or in the data directory, could not be opened.
    #[error("{what}: {error}")]
    Queue {
        /// Which queue.
        what: &'static str,
        /// Why.
        error: crate::queue::Error,
    },
    /// PostgreSQL or Redis did not accept a connection within `connect_timeout_secs`.
    #[error(
        "cannot reach {service} at {key} = {url}: {cause}; check that {service} is running and \
         reachable from here, and that {key} names the right host and port"
    )]
    Unreachable {
        /// `PostgreSQL` or `Redis`.
        service: &'static str,
        /// The setting naming it: `database_url` or `redis_url`.
        key: &'static str,
        /// Its URL, password and query removed.
        url: String,
        /// What happened (refused, no answer within the timeout, …).
        cause: String,
    },
    /// The crawl politeness shared through `redis_url` could not connect.
    #[error("connecting to redis_url for crawl politeness: {0}")]
    Politeness(String),
    /// The `[search]` providers could not be set up.
    #[error("web search: {0}")]
    Search(String),
    /// Webhooks could not be set up from `webhooks`.
    #[error("webhooks: {0}")]
    Webhooks(#[from] crate::webhooks::ConfigError),
    /// The browser pool could not be set up from `browse`.
    #[error("the browser pool: {0}")]
    Browser(#[from] trawl_workers::browse::Error),
}

/// Opens the store the configuration names: the database at `database_url` when set, else
/// the SQLite file in the data directory. [`App::build`] opens it this way; commands that
/// only read the store open it alone ([`BuildError::NoDataDir`] when there is no data
/// directory: they do not create one).
pub async fn open_store(config: &Config) -> Result<crate::store::Store, BuildError> {
    if config.database_url.is_none() && !config.data_dir.exists() {
        return Err(BuildError::NoDataDir {
            path: config.data_dir.clone(),
        });
    }
    match &config.database_url {
        Some(url) => crate::store::Store::connect_within(url.expose(), config.connect_timeout())
            .await
            .map_err(|error| match error {
                crate::store::Error::Unreachable(cause) => BuildError::Unreachable {
                    service: "PostgreSQL",
                    key: "database_url",
                    url: url.redacted_url(),
                    cause,
                },
                error => BuildError::Store {
                    what: format!("connecting to the store at {}", url.redacted_url()),
                    error,
                },
            }),
        None => crate::store::Store::open(&config.store_path())
            .await
            .map_err(|error| BuildError::Store {
                what: format!("opening the store in {}", config.data_dir.display()),
                error,
            }),
    }
}

/// An archive pool this application runs.
struct ArchivePool {
    stop: Stop,
    shutdown: Shutdown,
    task: JoinHandle<Result<Stats, archive::Error>>,
}

/// Agent sessions this process keeps, with their idle sweeper.
struct LocalSessions {
    sessions: Arc<Sessions>,
    sweeper: JoinHandle<()>,
}

/// The application: its shared parts and what runs on them.
pub struct App {
    config: Config,
    deps: Arc<Deps>,
    /// Stops the servers, the pools and the session host; the archive pool has its own, so it
    /// stops after the pools (it drains what they stored).
    shutdown: Shutdown,
    fetch_pool: Option<JoinHandle<Result<(), PoolError>>>,
    archive_pool: Option<ArchivePool>,
    sessions: Option<LocalSessions>,
    session_host: Option<crate::session_hosts::Registration>,
    servers: Vec<(&'static str, JoinHandle<std::io::Result<()>>)>,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App")
            .field("deps", &self.deps)
            .field("fetch_pool", &self.fetch_pool.is_some())
            .field("archive_pool", &self.archive_pool.is_some())
            .field("sessions", &self.sessions.is_some())
            .field("servers", &self.servers.len())
            .finish_non_exhaustive()
    }
}

/// What [`App::shutdown`] reports.
#[derive(Debug, Default)]
pub struct Teardown {
    /// The archive pool's counts, when one ran and ended well.
    pub archived: Option<Stats>,
    /// What did not stop cleanly or in time, for the caller to report.
    pub problems: Vec<String>,
}

impl App {
    /// Opens the parts `config` names: the store and queue at `database_url` and `redis_url`
    /// when set, else the SQLite files in the data directory (created when missing); the
    /// guarded client; politeness shared through Redis when `redis_url` is set; webhooks when
    /// `webhooks.secret` is set; the browser pool when `needs.browser`. Call
    /// `config.validate()` first.
    pub async fn build(config: &Config, needs: Needs) -> Result<App, BuildError> {
        let client = trawl_workers::web::Client::new(config.http.clone(), config.ssrf.clone())
            .and_then(|client| client.with_proxies(&config.proxy))
            .map_err(BuildError::Client)?;
        std::fs::create_dir_all(&config.data_dir).map_err(|source| BuildError::DataDir {
            path: config.data_dir.clone(),
            source,
        })?;
        let store = open_store(config).await?;
        let queue = match &config.redis_url {
            Some(url) => crate::queue::Queue::connect_redis_within(
                url.expose(),
                &config.namespace,
                config.runner.queue_settings(),
                config.connect_timeout(),
            )
            .await
            .map_err(|error| match error {
                crate::queue::Error::Unreachable(cause) => BuildError::Unreachable {
                    service: "Redis",
                    key: "redis_url",
                    url: url.redacted_url(),
                    cause,
                },
                error => BuildError::Queue {
                    what: "connecting to the queue at redis_url",
                    error,
                },
            })?,
            None => crate::queue::Queue::open(
                &config.queue_path(),
                &config.namespace,
                config.runner.queue_settings(),
            )
            .await
            .map_err(|error| BuildError::Queue {
                what: "opening the queue",
                error,
            })?,
        };
        let mut crawls = crate::crawl_policy::Crawls::new(&config.politeness);
        if let Some(url) = &config.redis_url {
            let gate = crate::crawl_policy::SharedGate::connect(
                url.expose(),
                &config.namespace,
                &config.politeness,
            )
            .await
            .map_err(|error| BuildError::Politeness(error.to_string()))?;
            crawls = crawls.with_shared_gate(gate);
        }
        // Events are signed, so webhooks need the secret; jobs without a webhook send none.
        let webhooks = match config.webhooks.secret {
            Some(_) => Some(crate::webhooks::Webhooks::new(
                client.clone(),
                config.webhooks.clone(),
            )?),
            None => None,
        };
        let browser = if needs.browser {
            Some(
                trawl_workers::browse::Pool::new(
                    config.browse.clone(),
                    client.policy_arc(),
                    client.dns().clone(),
                )
                .await?,
            )
        } else {
            None
        };
        let deps = Deps::new(Parts {
            store,
            queue,
            fetch: trawl_workers::fetch::Deps::new(client, config.fetch.clone())
                .map_err(|error| BuildError::Fallback(error.to_string()))?,
            config: config.runner.clone(),
            webhooks,
            crawls,
            browser,
        })
        .with_search(&config.search)
        .map_err(BuildError::Search)?;
        Ok(App {
            config: config.clone(),
            deps: Arc::new(deps),
            shutdown: Shutdown::new(),
            fetch_pool: None,
            archive_pool: None,
            sessions: None,
            session_host: None,
            servers: Vec::new(),
        })
    }

    /// The shared parts.
    pub fn deps(&self) -> &Arc<Deps> {
        &self.deps
    }

    /// The stop request the servers, pools and session host watch. Triggering it stops them
    /// taking work; [`App::shutdown`] triggers it too and then waits for each part.
    pub fn shutdown_signal(&self) -> Shutdown {
        self.shutdown.clone()
    }

    /// Starts the fetch pool (and the browse pool beside it when the application has a
    /// browser) on the queue.
    pub fn start_pools(&mut self) {
        if self.fetch_pool.is_none() {
            let deps = self.deps.clone();
            let shutdown = self.shutdown.clone();
            self.fetch_pool = Some(tokio::spawn(runner::run_pool(deps, shutdown)));
        }
    }

    /// Starts the archive pool of the data directory. With [`Stop::Drain`] it archives every
    /// pending page before it stops (after the pools have stopped); with [`Stop::Now`] it
    /// commits what it indexed and leaves the rest for its next start. Fails when another
    /// process archives into the data directory.
    pub fn start_archive(&mut self, stop: Stop) -> Result<(), archive::Error> {
        if self.archive_pool.is_some() {
            return Ok(());
        }
        let archiver = Archiver::open(
            self.deps.store.clone(),
            &self.config.data_dir,
            self.config.archive.clone(),
            self.deps.fetch.client.request_headers(),
        )?;
        let shutdown = Shutdown::new();
        let task = tokio::spawn(archiver.run(stop, shutdown.clone()));
        self.archive_pool = Some(ArchivePool {
            stop,
            shutdown,
            task,
        });
        Ok(())
    }

    /// Keeps agent sessions in this process's browser (none without one), closing idle ones
    /// in the background. Returns them; later calls return the same.
    pub fn sessions(&mut self) -> Option<Arc<Sessions>> {
        if let Some(local) = &self.sessions {
            return Some(local.sessions.clone());
        }
        let browser = self.deps.browser.clone()?;
        let sessions = Sessions::new(
            browser,
            self.deps.store.clone(),
            self.config.sessions.clone(),
        );
        sessions.store_pages_with(self.deps.fetch.clone());
        self.keep_sessions(sessions.clone());
        Some(sessions)
    }

    fn keep_sessions(&mut self, sessions: Arc<Sessions>) {
        let sweeper = sessions.spawn_sweeper();
        self.sessions = Some(LocalSessions { sessions, sweeper });
    }

    /// Serves `router` on `listener` until the shutdown, within the connection limits of
    /// `[api]` (`api::server`); `name` names it in messages.
    pub fn serve(
        &mut self,
        name: &'static str,
        listener: tokio::net::TcpListener,
        router: axum::Router,
    ) {
        let stop = self.shutdown.waiter();
        let limits = crate::api::server::Limits::of(&self.config.api);
        let server = crate::api::server::serve(listener, router, limits, stop);
        self.servers.push((name, tokio::spawn(server)));
    }

    /// Hosts this process's agent sessions for API processes elsewhere: serves them on
    /// `sessions.listen` behind `sessions.worker_token` and registers this host in the store
    /// (renewed until shutdown). Needs a browser. Returns the URL the host is reached at.
    pub async fn host_sessions(&mut self) -> Result<String, HostError> {
        let config = &self.config.sessions;
        let (Some(listen), Some(token)) = (&config.listen, &config.worker_token) else {
            return Err(HostError::Unconfigured);
        };
        let Some(browser) = self.deps.browser.clone() else {
            return Err(HostError::NoBrowser);
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .map_err(|source| HostError::Bind {
                listen: listen.clone(),
                source,
            })?;
        // Without sessions.advertise: the address bound (port 0 picks a free one).
        let url = match &config.advertise {
            Some(_) => config.host_url().unwrap_or_default(),
            None => format!(
                "http://{}",
                listener.local_addr().map_err(|source| HostError::Bind {
                    listen: listen.clone(),
                    source,
                })?
            ),
        };
        let store = self.deps.store.clone();
        let sessions = Sessions::hosted(browser, store.clone(), config.clone(), url.clone());
        sessions.store_pages_with(self.deps.fetch.clone());
        let state = crate::api::AppState {
            context: self.deps.clone(),
            queue: self.deps.queue.clone(),
            config: Arc::new(self.config.api.clone()),
            archive: None,
            sessions: Some(sessions.clone()),
            remote_sessions: None,
        };
        let router = crate::api::session_host_router(state, token.clone());
        self.serve("session host", listener, router);
        self.keep_sessions(sessions.clone());
        let registration = crate::session_hosts::Registration::start(store, url.clone(), sessions)
            .await
            .map_err(HostError::Register)?;
        self.session_host = Some(registration);
        Ok(url)
    }

    /// The first steps of [`App::shutdown`] alone: the shutdown is triggered, the pools
    /// stop and the archive pool ends; the store and the queue stay open, for a command that
    /// reports on what its pools did before it shuts down.
    pub async fn stop_pools(&mut self, grace: Duration) -> Teardown {
        let mut teardown = Teardown::default();
        self.shutdown.trigger();
        if let Some(pool) = self.fetch_pool.take() {
            let late = || {
                format!(
                    "running jobs did not finish within {} s; the queue will hand them out again",
                    grace.as_secs()
                )
            };
            teardown.join("fetch pool", pool, Some(grace), late).await;
        }
        if let Some(pool) = self.archive_pool.take() {
            pool.shutdown.trigger();
            // A draining pool archives every pending page, however long that takes.
            let grace = (pool.stop == Stop::Now).then_some(grace);
            let late = || {
                "the archive pool did not stop in time; pending pages wait for the next start"
                    .to_owned()
            };
            teardown.archived = teardown.join("archive pool", pool.task, grace, late).await;
        }
        teardown
    }

    /// Stops everything, in order: the servers and the pools stop taking work and the running
    /// jobs finish (each part waited for up to `grace`; jobs still running then are handed out
    /// again by the queue's recovery); then the archive pool stops (a draining one archives
    /// every pending page first, however long that takes); then the servers end (open
    /// connections waited for up to `grace`); then the session host's registration goes and
    /// the sessions close; then the browser (its temporary profile removed), the queue and the
    /// store.
    pub async fn shutdown(mut self, grace: Duration) -> Teardown {
        let mut teardown = self.stop_pools(grace).await;
        for (name, server) in self.servers.drain(..) {
            let late = || {
                format!(
                    "{name}: connections still open after {} s were dropped",
                    grace.as_secs()
                )
            };
            teardown.join(name, server, Some(grace), late).await;
        }
        if let Some(registration) = self.session_host.take() {
            registration.stop().await;
        }
        if let Some(local) = self.sessions.take() {
            local.sweeper.abort();
            local.sessions.close_all().await;
        }
        // The pools have stopped: nothing uses the browser any more.
        if let Some(browser) = &self.deps.browser {
            browser.shutdown().await;
        }
        self.deps.queue.close().await;
        self.deps.store.close().await;
        teardown
    }
}

impl Teardown {
    /// Waits for a part's task to end, up to `grace` when given, and records what went
    /// wrong: its error, its panic, or `late()` when it was still running.
    async fn join<T, E: std::fmt::Display>(
        &mut self,
        name: &str,
        task: JoinHandle<Result<T, E>>,
        grace: Option<Duration>,
        late: impl FnOnce() -> String,
    ) -> Option<T> {
        let ended = match grace {
            Some(grace) => tokio::time::timeout(grace, task).await.ok(),
            None => Some(task.await),
        };
        match ended {
            Some(Ok(Ok(value))) => return Some(value),
            Some(Ok(Err(error))) => self.problem(format!("{name}: {error}")),
            Some(Err(error)) => self.problem(format!("{name} task failed: {error}")),
            None => self.problem(late()),
        }
        None
    }

    fn problem(&mut self, problem: String) {
        self.problems.push(problem);
    }
}

/// Why this process could not host sessions.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// `sessions.listen` or `sessions.worker_token` is not set.
    #[error("sessions.listen needs sessions.worker_token")]
    Unconfigured,
    /// The process has no browser.
    #[error("sessions.listen needs a browser here: run with --pools fetch=N,browse=M")]
    NoBrowser,
    /// The listen address could not be bound.
    #[error("binding sessions.listen = {listen}: {source}")]
    Bind {
        /// The address.
        listen: String,
        /// Why.
        source: std::io::Error,
    },
    /// The registration could not be written.
    #[error("registering this worker as a session host: {0}")]
    Register(crate::store::Error),
}
