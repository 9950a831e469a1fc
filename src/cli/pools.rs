//! Starting the pools in a command's process: the fetch pool and the archive pool, for the
//! long-running commands (`serve`, `work`: stopped by a shutdown future) and the one-shot ones
//! (`run`, `crawl`: [`Pools`], stopped in order at the end, fetch first, then the archive pool
//! drains what is pending).

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::archive::{self, Archiver, Stats, Stop};
use crate::config::Config;
use crate::queue::Queue;
use crate::runner::{self, Context};

/// A running archive pool: its stop signal and its task.
type ArchivePool = (
    oneshot::Sender<()>,
    JoinHandle<Result<Stats, archive::Error>>,
);

/// Running pools.
pub(super) struct Pools {
    stop_fetch: oneshot::Sender<()>,
    fetch: JoinHandle<Result<(), String>>,
    archive: Option<ArchivePool>,
}

impl Pools {
    /// Starts the fetch pool on `queue`, and the archive pool of the data directory when
    /// `archive` is set (it fails when another process archives into it).
    pub(super) fn start(
        context: Arc<Context>,
        queue: &Queue,
        config: &Config,
        archive: bool,
    ) -> anyhow::Result<Pools> {
        let archive = if archive {
            let (stop, stopped) = oneshot::channel::<()>();
            let pool = spawn_archive_pool(&context, config, Stop::Drain, async move {
                let _ = stopped.await;
            })
            .context(
                "opening the archive (is another trawl archiving into this data directory?)",
            )?;
            Some((stop, pool))
        } else {
            None
        };
        let (stop_fetch, stopped) = oneshot::channel::<()>();
        let fetch = spawn_fetch_pool(context, queue, async move {
            let _ = stopped.await;
        });
        Ok(Pools {
            stop_fetch,
            fetch,
            archive,
        })
    }

    /// Stops the fetch pool (jobs not started stay queued), then lets the archive pool
    /// archive what is pending and commit. Returns the archive pool's counts, if it ran.
    pub(super) async fn stop(self, quiet: bool) -> anyhow::Result<Option<Stats>> {
        let _ = self.stop_fetch.send(());
        match tokio::time::timeout(Duration::from_secs(30), self.fetch).await {
            Ok(Ok(Ok(()))) => {}
            Ok(Ok(Err(error))) => tracing::warn!(error = %error, "fetch pool ended with an error"),
            Ok(Err(error)) => tracing::warn!(error = %error, "fetch pool task failed"),
            Err(_) => tracing::warn!("fetch pool did not stop within 30 s"),
        }
        let Some((stop, pool)) = self.archive else {
            return Ok(None);
        };
        let _ = stop.send(());
        if !quiet {
            eprintln!("trawl: archiving the remaining pages...");
        }
        Ok(Some(pool.await.context("the archive pool failed")??))
    }
}

/// Starts the fetch pool on `queue`; it stops taking jobs when `shutdown` completes.
pub(super) fn spawn_fetch_pool(
    context: Arc<Context>,
    queue: &Queue,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> JoinHandle<Result<(), String>> {
    let queue = queue.clone();
    tokio::spawn(async move { runner::run_pool(context, &queue, shutdown).await })
}

/// Starts the archive pool of the data directory (it fails with `index::Error::Busy` when
/// another process archives into it), stopping as `stop` says once `shutdown` completes.
pub(super) fn spawn_archive_pool(
    context: &Context,
    config: &Config,
    stop: Stop,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<JoinHandle<Result<Stats, archive::Error>>, archive::Error> {
    let archiver = Archiver::open(
        context.store.clone(),
        &config.data_dir,
        config.archive.clone(),
        context.fetch.client.request_headers(),
    )?;
    Ok(tokio::spawn(archiver.run(stop, shutdown)))
}

/// Completes once `stop` says stopped: the shutdown future of `serve`'s and `work`'s pools.
pub(super) fn stopped(
    stop: &tokio::sync::watch::Receiver<bool>,
) -> impl Future<Output = ()> + Send + 'static {
    let mut stop = stop.clone();
    async move {
        let _ = stop.wait_for(|stopped| *stopped).await;
    }
}
