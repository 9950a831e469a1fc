//! `trawl work`: worker pools only, no API. Meant for the distributed set-up, where many such
//! processes share the queue at `redis_url` and the store at `database_url`; on the embedded
//! files it works too (one machine). SIGTERM or SIGINT stop it gracefully: the pools stop
//! taking jobs and finish the running ones (up to `api.shutdown_timeout_secs`); jobs fetched
//! but not started go back to the queue, and what is still running after that is recovered
//! by the queue once this worker's heartbeat is missed. With a browser and `sessions.listen`
//! it also hosts agent sessions for API processes elsewhere (`crate::session_hosts`).

use std::process::ExitCode;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::watch;

use super::{Embedded, pools};
use crate::config::Config;

/// Arguments of `trawl work`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Pools to run and their sizes: `fetch=N` (jobs at once), `browse=N` (browser contexts
    /// at once, for render and browse jobs, and agent sessions when sessions.listen is set;
    /// 0 runs no browser) and `archive=1` (the archive
    /// pool into this machine's data directory; at most one per directory). Pools not named do
    /// not run [default: fetch=runner.concurrency].
    #[arg(long, value_name = "NAME=SIZE,...")]
    pub pools: Option<PoolSizes>,
    /// Allow private, loopback and link-local destinations (cloud metadata stays blocked)
    /// [config: ssrf.allow_private_network].
    #[arg(long)]
    pub allow_private_network: bool,
}

/// The sizes of the pools `trawl work` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSizes {
    /// Fetch jobs at once (0: no fetch pool).
    pub fetch: usize,
    /// Archive pools (0 or 1).
    pub archive: usize,
    /// Browser contexts at once (0: no browser).
    pub browse: usize,
}

impl FromStr for PoolSizes {
    type Err = String;

    fn from_str(text: &str) -> Result<PoolSizes, String> {
        let mut sizes = PoolSizes {
            fetch: 0,
            archive: 0,
            browse: 0,
        };
        for part in text
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
        {
            let (name, size) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not NAME=SIZE (e.g. fetch=64)"))?;
            let size: usize = size
                .trim()
                .parse()
                .map_err(|_| format!("pool size {size:?} is not a number"))?;
            match name.trim() {
                "fetch" => sizes.fetch = size,
                "browse" => sizes.browse = size,
                "archive" if size <= 1 => sizes.archive = size,
                "archive" => {
                    return Err(
                        "archive=1 at most: one archive pool writes a data directory's index"
                            .to_owned(),
                    );
                }
                other => {
                    return Err(format!(
                        "unknown pool {other:?} (known: fetch, browse, archive)"
                    ));
                }
            }
        }
        if sizes.browse > 0 && sizes.fetch == 0 {
            return Err(
                "browse=N needs fetch=M too: browser jobs are taken from the queue by the fetch \
                 pool's workers"
                    .to_owned(),
            );
        }
        if sizes.fetch == 0 && sizes.archive == 0 {
            return Err("no pool to run: name at least one, e.g. fetch=64".to_owned());
        }
        Ok(sizes)
    }
}

pub(super) async fn run(mut config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    let sizes = args.pools.unwrap_or(PoolSizes {
        fetch: config.runner.concurrency,
        archive: 0,
        browse: 0,
    });
    if sizes.browse > 0 {
        config.browse.max_contexts = sizes.browse;
    }
    if sizes.fetch > 0 {
        config.runner.concurrency = sizes.fetch;
    }
    if args.allow_private_network {
        config.ssrf.allow_private_network = true;
    }
    config.validate()?;
    let embedded = Embedded::open(&config).await?;
    let mut context = embedded.context(&config)?;
    if sizes.browse > 0 {
        context.browser = Some(embedded.browser(&config).await?);
    }
    let context = Arc::new(context);
    let browser = context.browser.clone();
    let Embedded { store, queue, .. } = embedded;

    let (stop_tx, stop_rx) = watch::channel(false);
    let archiver = if sizes.archive > 0 {
        Some(
            pools::spawn_archive_pool(
                &context,
                &config,
                crate::archive::Stop::Now,
                pools::stopped(&stop_rx),
            )
            .context(
                "opening the archive (is another trawl archiving into this data directory?)",
            )?,
        )
    } else {
        None
    };
    let pool = (sizes.fetch > 0)
        .then(|| pools::spawn_fetch_pool(context.clone(), &queue, pools::stopped(&stop_rx)));
    let host = match (&browser, &config.sessions.listen) {
        (Some(browser), Some(_)) => Some(
            SessionHost::start(&config, &context, &queue, browser.clone(), stop_rx.clone()).await?,
        ),
        (None, Some(_)) => {
            anyhow::bail!("sessions.listen needs a browser here: run with --pools fetch=N,browse=M")
        }
        _ => None,
    };
    eprintln!(
        "trawl: working (fetch={}, browse={}, archive={}{}; queue: {}, store: {})",
        sizes.fetch,
        sizes.browse,
        sizes.archive,
        host.as_ref()
            .map(|host| format!("; hosting sessions at {}", host.url))
            .unwrap_or_default(),
        if config.redis_url.is_some() {
            "redis"
        } else {
            "embedded"
        },
        if config.database_url.is_some() {
            "database_url"
        } else {
            "embedded"
        },
    );

    super::shutdown_signal().await;
    eprintln!("trawl: shutting down");
    let _ = stop_tx.send(true);
    let grace = Duration::from_secs(config.api.shutdown_timeout_secs);
    if let Some(pool) = pool {
        match tokio::time::timeout(grace, pool).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => eprintln!("trawl: fetch pool: {error}"),
            Ok(Err(error)) => eprintln!("trawl: fetch pool task failed: {error}"),
            Err(_) => eprintln!(
                "trawl: running jobs did not finish within {} s; the queue will hand them out again",
                grace.as_secs()
            ),
        }
    }
    if let Some(archiver) = archiver {
        match tokio::time::timeout(grace, archiver).await {
            Ok(Ok(Ok(_))) => {}
            Ok(Ok(Err(error))) => eprintln!("trawl: archive pool: {error}"),
            Ok(Err(error)) => eprintln!("trawl: archive pool task failed: {error}"),
            Err(_) => eprintln!(
                "trawl: the archive pool did not stop in time; pending pages wait for the next start"
            ),
        }
    }
    if let Some(host) = host {
        host.stop().await;
    }
    // The browser closes and its temporary profile goes (pools have stopped by now).
    if let Some(browser) = &browser {
        browser.shutdown().await;
    }
    queue.close().await;
    store.close().await;
    Ok(ExitCode::SUCCESS)
}

/// This worker's agent sessions, served to API processes elsewhere on `sessions.listen` and
/// registered in the store (`crate::session_hosts`).
struct SessionHost {
    url: String,
    sessions: Arc<crate::sessions::Sessions>,
    sweeper: tokio::task::JoinHandle<()>,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    registration: crate::session_hosts::Registration,
}

impl SessionHost {
    async fn start(
        config: &Config,
        context: &Arc<crate::runner::Context>,
        queue: &crate::queue::Queue,
        browser: trawl_workers::browse::Pool,
        mut stop: watch::Receiver<bool>,
    ) -> anyhow::Result<SessionHost> {
        let (Some(listen), Some(token)) = (&config.sessions.listen, &config.sessions.worker_token)
        else {
            anyhow::bail!("sessions.listen needs sessions.worker_token");
        };
        let listener = tokio::net::TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding sessions.listen = {listen}"))?;
        // Without sessions.advertise: the address bound (port 0 picks a free one).
        let url = match &config.sessions.advertise {
            Some(_) => config.sessions.host_url().unwrap_or_default(),
            None => format!("http://{}", listener.local_addr()?),
        };
        let store = context.store.clone();
        let sessions = crate::sessions::Sessions::hosted(
            browser,
            store.clone(),
            config.sessions.clone(),
            url.clone(),
        );
        let state = crate::api::AppState {
            context: context.clone(),
            queue: queue.clone(),
            config: Arc::new(config.api.clone()),
            archive: None,
            sessions: Some(sessions.clone()),
            remote_sessions: None,
        };
        let router = crate::api::session_host_router(state, token.clone());
        let server = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stop.wait_for(|stopped| *stopped).await;
                })
                .await
        });
        let sweeper = sessions.spawn_sweeper();
        let registration =
            crate::session_hosts::Registration::start(store, url.clone(), sessions.clone())
                .await
                .context("registering this worker as a session host")?;
        Ok(SessionHost {
            url,
            sessions,
            sweeper,
            server,
            registration,
        })
    }

    /// Stops serving, closes the sessions and removes the registration.
    async fn stop(self) {
        self.registration.stop().await;
        self.sweeper.abort();
        self.sessions.close_all().await;
        match tokio::time::timeout(Duration::from_secs(10), self.server).await {
            Ok(Ok(Ok(()))) | Err(_) => {}
            Ok(Ok(Err(error))) => eprintln!("trawl: session host: {error}"),
            Ok(Err(error)) => eprintln!("trawl: session host task failed: {error}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_sizes_parse_and_bad_ones_are_refused() {
        assert_eq!(
            "fetch=64,archive=1".parse::<PoolSizes>(),
            Ok(PoolSizes {
                fetch: 64,
                archive: 1,
                browse: 0,
            })
        );
        assert_eq!(
            "fetch=8,browse=2".parse::<PoolSizes>(),
            Ok(PoolSizes {
                fetch: 8,
                archive: 0,
                browse: 2,
            })
        );
        assert_eq!(
            "archive=1".parse::<PoolSizes>(),
            Ok(PoolSizes {
                fetch: 0,
                archive: 1,
                browse: 0,
            })
        );
        assert!("fetch".parse::<PoolSizes>().is_err());
        assert!("fetch=x".parse::<PoolSizes>().is_err());
        assert!("archive=2".parse::<PoolSizes>().is_err());
        assert!("browse=2".parse::<PoolSizes>().is_err());
        assert!("teleport=2".parse::<PoolSizes>().is_err());
        assert!("fetch=0".parse::<PoolSizes>().is_err());
    }
}
