//! `trawl serve`: the HTTP API and, unless `--no-pools`, the worker pools in one process on
//! the embedded store and queue. SIGTERM or SIGINT stop it gracefully: the server stops
//! accepting, the pools stop taking jobs and finish the running ones (up to
//! `api.shutdown_timeout_secs`; what is left is recovered from the queue later).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::watch;

use super::{Embedded, pools};
use crate::api::{self, AppState};
use crate::config::Config;

/// Arguments of `trawl serve`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Address to listen on [config: api.bind, default: 127.0.0.1:8787]. A non-loopback
    /// address needs api.tokens.
    #[arg(long, value_name = "ADDR")]
    pub bind: Option<String>,
    /// Run the API only, no worker pools (jobs wait for workers elsewhere; agent sessions go
    /// to the `trawl work` session hosts when sessions.worker_token is set).
    #[arg(long)]
    pub no_pools: bool,
    /// Fetches at once in the local pool [config: runner.concurrency].
    #[arg(long, short = 'c', value_name = "N")]
    pub concurrency: Option<usize>,
    /// Allow private, loopback and link-local destinations (cloud metadata stays blocked)
    /// [config: ssrf.allow_private_network].
    #[arg(long)]
    pub allow_private_network: bool,
}

pub(super) async fn run(mut config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(bind) = &args.bind {
        config.api.bind = bind.clone();
    }
    if let Some(concurrency) = args.concurrency {
        config.runner.concurrency = concurrency;
    }
    if args.allow_private_network {
        config.ssrf.allow_private_network = true;
    }
    config.validate()?;
    let embedded = Embedded::open(&config).await?;
    let mut context = embedded.context(&config)?;
    if !args.no_pools {
        context.browser = Some(embedded.browser(&config).await?);
    }
    let context = Arc::new(context);
    let browser = context.browser.clone();
    let Embedded { store, queue, .. } = embedded;
    // Agent sessions live where the browser is.
    let sessions = browser.as_ref().map(|browser| {
        crate::sessions::Sessions::new(browser.clone(), store.clone(), config.sessions.clone())
    });
    let sweeper = sessions.as_ref().map(|sessions| sessions.spawn_sweeper());
    // Without a browser, sessions go to the workers that host them (when configured).
    let remote_sessions = match (&sessions, &config.sessions.worker_token) {
        (None, Some(token)) => Some(Arc::new(
            crate::session_hosts::Remote::new(store.clone(), token.clone())
                .map_err(anyhow::Error::msg)?,
        )),
        _ => None,
    };
    // The index is searched whether or not this server archives (another process may hold
    // its writer: then this server searches what that one commits).
    let archive_index = trawl_workers::archive::index::ArchiveIndex::open_or_create(
        &crate::archive::index_dir(&config.data_dir),
    )
    .context("opening the archive index")?;

    let (stop_tx, stop_rx) = watch::channel(false);
    let pool = (!args.no_pools)
        .then(|| pools::spawn_fetch_pool(context.clone(), &queue, pools::stopped(&stop_rx)));
    let archiver = if args.no_pools {
        None
    } else {
        match pools::spawn_archive_pool(
            &context,
            &config,
            crate::archive::Stop::Now,
            pools::stopped(&stop_rx),
        ) {
            Ok(archiver) => Some(archiver),
            Err(error) => {
                eprintln!("trawl: no archive pool here: {error}");
                None
            }
        }
    };
    let state = AppState {
        context,
        queue: queue.clone(),
        config: Arc::new(config.api.clone()),
        archive: Some(api::ArchiveSearch {
            index: archive_index,
            per_page: config.archive.per_page,
        }),
        sessions: sessions.clone(),
        remote_sessions: remote_sessions.clone(),
    };
    let listener = tokio::net::TcpListener::bind(&config.api.bind)
        .await
        .with_context(|| format!("binding {}", config.api.bind))?;
    let address = listener.local_addr()?;
    eprintln!(
        "trawl: serving on http://{address} ({}, {} tokens){}",
        match (args.no_pools, remote_sessions.is_some()) {
            (false, _) => "api, fetch and archive pools",
            (true, false) => "api only",
            (true, true) => "api only; sessions routed to session hosts",
        },
        config.api.tokens.len(),
        if config.api.tokens.is_empty() {
            "; no auth: loopback only"
        } else {
            ""
        }
    );
    let mut server_stop = stop_rx.clone();
    let server = axum::serve(listener, api::router(state)).with_graceful_shutdown(async move {
        let _ = server_stop.wait_for(|stopped| *stopped).await;
    });
    let server = tokio::spawn(async move { server.await });

    super::shutdown_signal().await;
    eprintln!("trawl: shutting down");
    let _ = stop_tx.send(true);
    let grace = Duration::from_secs(config.api.shutdown_timeout_secs);
    if let Some(pool) = pool
        && tokio::time::timeout(grace, pool).await.is_err()
    {
        eprintln!(
            "trawl: running jobs did not finish within {} s; the queue will hand them out again",
            grace.as_secs()
        );
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
    match tokio::time::timeout(grace, server).await {
        Ok(Ok(Ok(()))) | Err(_) => {}
        Ok(Ok(Err(error))) => eprintln!("trawl: server error: {error}"),
        Ok(Err(error)) => eprintln!("trawl: server task failed: {error}"),
    }
    if let Some(sweeper) = sweeper {
        sweeper.abort();
    }
    if let Some(sessions) = &sessions {
        sessions.close_all().await;
    }
    // The browser closes and its temporary profile goes (pools have stopped by now).
    if let Some(browser) = &browser {
        browser.shutdown().await;
    }
    queue.close().await;
    store.close().await;
    Ok(ExitCode::SUCCESS)
}
