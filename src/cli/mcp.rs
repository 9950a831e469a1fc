//! `trawl mcp`: the MCP server on standard input and output, for agent hosts that launch a
//! process (Claude Desktop, Claude Code, …). It runs what `trawl serve` runs (the worker
//! pools, the archive pool, agent sessions in its own browser) on the embedded store and
//! queue, for the default tenant, and stops when the host closes the pipe (or on SIGTERM and
//! Ctrl-C). Standard output carries the protocol only; messages go to standard error.

use anyhow::Context as _;
use std::process::ExitCode;
use std::sync::Arc;

use crate::api::{self, AppState};
use crate::app::{App, Needs};
use crate::config::Config;

/// Arguments of `trawl mcp`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run no worker pools and no browser: the tools queue work for workers elsewhere
    /// (distributed mode), and browser tools answer sessions_unavailable.
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
    if let Some(concurrency) = args.concurrency {
        config.runner.concurrency = concurrency;
    }
    if args.allow_private_network {
        config.ssrf.allow_private_network = true;
    }
    config.validate()?;
    let mut app = App::build(
        &config,
        Needs {
            browser: !args.no_pools,
        },
    )
    .await?;
    let deps = app.deps().clone();
    let sessions = app.sessions();
    let remote_sessions = match (&sessions, &config.sessions.worker_token) {
        (None, Some(token)) => Some(Arc::new(
            crate::session_hosts::Remote::new(deps.store.clone(), token.clone())
                .map_err(anyhow::Error::msg)?,
        )),
        _ => None,
    };
    let archive_index = trawl_workers::archive::index::ArchiveIndex::open_or_create(
        &crate::archive::index_dir(&config.data_dir),
    )
    .context("opening the archive index")?;
    if !args.no_pools {
        app.start_pools();
        if let Err(error) = app.start_archive(crate::archive::Stop::Now) {
            eprintln!("trawl: no archive pool here: {error}");
        }
    }
    let state = AppState {
        context: deps.clone(),
        queue: deps.queue.clone(),
        config: Arc::new(config.api.clone()),
        archive: Some(api::ArchiveSearch {
            index: archive_index,
            per_page: config.archive.per_page,
        }),
        sessions,
        remote_sessions,
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let served = crate::mcp::transport::serve_stdio(state, stop.clone());
    tokio::pin!(served);
    let outcome = tokio::select! {
        outcome = &mut served => outcome,
        () = super::shutdown_signal() => {
            stop.cancel();
            Ok(())
        }
    };
    super::shut_down(app, config.shutdown_grace()).await;
    if let Err(error) = outcome {
        eprintln!("trawl: mcp: {error:#}");
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::SUCCESS)
}
