//! `trawl serve`: the HTTP API and, unless `--no-pools`, the worker pools in one process on
//! the embedded store and queue. SIGTERM or SIGINT stop it gracefully: the server stops
//! accepting, the pools stop taking jobs and finish the running ones (up to
//! `shutdown_timeout_secs`; what is left is recovered from the queue later).

use anyhow::Context as _;
use std::process::ExitCode;
use std::sync::Arc;

use crate::api::{self, AppState};
use crate::app::{App, Needs};
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
    let mut app = App::build(
        &config,
        Needs {
            browser: !args.no_pools,
        },
    )
    .await?;
    let deps = app.deps().clone();
    // Agent sessions live where the browser is.
    let sessions = app.sessions();
    // Without a browser, sessions go to the workers that host them (when configured).
    let remote_sessions = match (&sessions, &config.sessions.worker_token) {
        (None, Some(token)) => Some(Arc::new(
            crate::session_hosts::Remote::new(deps.store.clone(), token.clone())
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
        remote_sessions: remote_sessions.clone(),
    };
    let listener = tokio::net::TcpListener::bind(&config.api.bind)
        .await
        .with_context(|| format!("binding {}", config.api.bind))?;
    let address = listener.local_addr()?;
    eprintln!(
        "trawl: serving on http://{address} (web UI at http://{address}/ui/; {}, {} tokens){}",
        match (args.no_pools, remote_sessions.is_some()) {
            (false, _) => "api, fetch and archive pools",
            (true, false) => "api only",
            (true, true) => "api only; sessions routed to session hosts",
        },
        config.api.token_scopes().len(),
        if config.api.token_scopes().is_empty() {
            "; no auth: loopback only"
        } else {
            ""
        }
    );
    // MCP's streamable HTTP transport at /mcp, behind the API's tokens and guards.
    let mcp_stop = tokio_util::sync::CancellationToken::new();
    let mcp = crate::mcp::transport::http_routes(state.clone(), mcp_stop.clone());
    // The web UI serves the WARC records of the pages it shows from the data directory.
    let router =
        api::router_with(state, mcp).layer(axum::Extension(api::DataDir(config.data_dir.clone())));
    app.serve("server", listener, router);

    super::shutdown_signal().await;
    eprintln!("trawl: shutting down");
    mcp_stop.cancel();
    super::shut_down(app, config.shutdown_grace()).await;
    Ok(ExitCode::SUCCESS)
}
