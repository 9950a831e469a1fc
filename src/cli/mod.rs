//! The command line: one file per subcommand, each a thin layer that loads the configuration,
//! calls the library, and prints. `anyhow` is used here and in `main.rs` only.
//!
//! Not here: any behaviour a test or the API would also need (that lives in the library).

mod archive;
mod browse;
mod config;
mod crawl;
mod enqueue;
mod export;
mod extract;
mod pools;
mod read;
mod remote;
mod run;
mod search;
mod serve;
mod status;
mod work;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::Config;

/// trawl: a job-queue batch crawler and archiver for AI agents and RAG pipelines.
///
/// Configuration is read from trawl.toml (or --config), then TRAWL_* environment variables
/// (nested keys with a double underscore, e.g. TRAWL_HTTP__MAX_BYTES), then flags.
#[derive(Debug, Parser)]
#[command(name = "trawl", version, about, long_about)]
pub struct Cli {
    /// Configuration file [default: ./trawl.toml when present].
    #[arg(long, global = true, env = "TRAWL_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Directory of the store and queue files [config: data_dir, default: .trawl].
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// The command to run.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Fetch URLs in bulk: enqueue all, run the fetch pool in-process, store every page, print
    /// a summary (and write pages.jsonl plus one file per page with --out).
    Run(run::Args),
    /// Crawl sites from seed URLs: follow links in scope (robots.txt obeyed), store every page,
    /// print the crawl's counters.
    Crawl(crawl::Args),
    /// Queue fetch jobs without waiting: into a running server (--server) or the local queue.
    Enqueue(enqueue::Args),
    /// Serve the HTTP API, with the worker pools unless --no-pools.
    Serve(serve::Args),
    /// Run worker pools only, no API: many `trawl work` processes on many machines share the
    /// queue at REDIS_URL and the store at DATABASE_URL (distributed mode).
    ///
    /// Meant for the distributed set-up: start any number of `trawl work` processes, on any
    /// machines, with REDIS_URL (the shared queue) and DATABASE_URL (the shared store) set, next
    /// to one `trawl serve --no-pools` for the API. Without them it runs on the embedded files in
    /// the data directory (one machine only). SIGTERM or SIGINT: stop taking jobs, let running
    /// ones finish (up to api.shutdown_timeout_secs), hand the rest back to the queue.
    Work(work::Args),
    /// Open a page in headless Chromium and run actions on it (snapshot, click, type, read,
    /// screenshot, …); prints each action's outcome as JSON.
    Browse(browse::BrowseArgs),
    /// Take a PNG screenshot of a page in headless Chromium.
    Screenshot(browse::ScreenshotArgs),
    /// Extract the main content of one local HTML document to stdout (no network).
    Extract(extract::Args),
    /// Print a stored page, or a range of its lines.
    Read(read::Args),
    /// Show job counts by status, or one job's record (locally or from --server).
    Status(status::Args),
    /// Search the archive: BM25 over page chunks, with host and date filters.
    Search(search::Args),
    /// Archive stored pages into the search index and WARC files.
    Archive(archive::Args),
    /// Export stored responses as a WARC file.
    Export(export::Args),
    /// Print the configuration in force as TOML (defaults, trawl.toml, TRAWL_* env).
    Config,
}

/// URLs given as arguments, in a file, or on standard input (`run` and `enqueue`).
#[derive(Debug, clap::Args)]
pub struct UrlArgs {
    /// URLs (http or https).
    #[arg(value_name = "URL")]
    pub urls: Vec<String>,
    /// A file with one URL per line (blank lines and lines starting with # are skipped), or -
    /// for standard input.
    #[arg(long, short = 'f', value_name = "FILE|-")]
    pub file: Option<String>,
}

impl UrlArgs {
    /// Refuses a command given no URLs at all.
    fn require_some(&self) -> anyhow::Result<()> {
        if self.urls.is_empty() && self.file.is_none() {
            anyhow::bail!("give URLs as arguments or with --file FILE (or --file - for stdin)");
        }
        Ok(())
    }
}

/// The URL on an input line, or `None` for a blank or `#` comment line. Only the line ending
/// is removed: other surrounding whitespace stays, and the URL check refuses it.
fn url_line(line: &str) -> Option<&str> {
    let line = line.trim_end_matches(['\r', '\n']);
    let content = line.trim();
    (!content.is_empty() && !content.starts_with('#')).then_some(line)
}

/// Opens the store the configuration names: the database at `database_url` (or
/// `DATABASE_URL`) when set, else the SQLite file in the data directory.
/// `--proxy URL` (repeatable) of `run` and `crawl`: replaces `proxy.urls` when given.
fn use_proxies(config: &mut Config, urls: &[String]) {
    if !urls.is_empty() {
        config.proxy.urls = urls
            .iter()
            .map(trawl_workers::web::proxy::ProxyUrl::new)
            .collect();
    }
}

async fn open_store(config: &Config) -> anyhow::Result<crate::store::Store> {
    use anyhow::Context as _;
    match &config.database_url {
        Some(url) => crate::store::Store::connect(url.expose())
            .await
            .context("connecting to the store at database_url"),
        None => crate::store::Store::open(&config.store_path())
            .await
            .with_context(|| format!("opening the store in {}", config.data_dir.display())),
    }
}

/// The embedded store and queue, and the guarded client, as a command opens them.
struct Embedded {
    store: crate::store::Store,
    queue: crate::queue::Queue,
    client: trawl_workers::web::Client,
    /// Crawl politeness shared through Redis, in distributed mode.
    shared_gate: Option<crate::crawl::SharedGate>,
}

impl Embedded {
    /// Creates the data directory if needed and opens the store and the queue: the ones at
    /// `database_url` and `redis_url` when set, else the SQLite files in it.
    async fn open(config: &Config) -> anyhow::Result<Embedded> {
        use anyhow::Context as _;
        let client = trawl_workers::web::Client::new(config.http.clone(), config.ssrf.clone())
            .and_then(|client| client.with_proxies(&config.proxy))
            .map_err(anyhow::Error::msg)?;
        std::fs::create_dir_all(&config.data_dir).with_context(|| {
            format!("creating the data directory {}", config.data_dir.display())
        })?;
        let store = open_store(config).await?;
        let queue = match &config.redis_url {
            Some(url) => crate::queue::Queue::connect_redis(
                url.expose(),
                &config.namespace,
                config.runner.queue_settings(),
            )
            .await
            .context("connecting to the queue at redis_url")?,
            None => crate::queue::Queue::open(
                &config.queue_path(),
                &config.namespace,
                config.runner.queue_settings(),
            )
            .await
            .context("opening the queue")?,
        };
        let shared_gate = match &config.redis_url {
            Some(url) => Some(
                crate::crawl::SharedGate::connect(
                    url.expose(),
                    &config.namespace,
                    &config.politeness,
                )
                .await
                .context("connecting to redis_url for crawl politeness")?,
            ),
            None => None,
        };
        Ok(Embedded {
            store,
            queue,
            client,
            shared_gate,
        })
    }

    /// The runner context over these parts (with webhooks when `webhooks.secret` is set).
    fn context(&self, config: &Config) -> anyhow::Result<crate::runner::Context> {
        let fetch = trawl_workers::fetch::Deps {
            client: self.client.clone(),
            config: config.fetch.clone(),
        };
        let mut context =
            crate::runner::Context::new(self.store.clone(), fetch, config.runner.clone());
        context.queue = Some(self.queue.clone());
        let mut crawls = crate::crawl::Crawls::new(&config.politeness);
        if let Some(gate) = &self.shared_gate {
            crawls = crawls.with_shared_gate(gate.clone());
        }
        context.crawls = std::sync::Arc::new(crawls);
        // Events are signed, so webhooks need the secret; jobs without a webhook send none.
        if config.webhooks.secret.is_some() {
            context.webhooks = Some(crate::webhooks::Webhooks::new(
                self.client.clone(),
                config.webhooks.clone(),
            )?);
        }
        Ok(context)
    }

    /// The browser pool for `config` (Chromium starts with its first job, not now).
    async fn browser(&self, config: &Config) -> anyhow::Result<trawl_workers::browse::Pool> {
        trawl_workers::browse::Pool::new(
            config.browse.clone(),
            self.client.policy_arc(),
            self.client.dns().clone(),
        )
        .await
        .map_err(anyhow::Error::from)
    }
}

/// Completes on SIGINT (Ctrl-C) or SIGTERM (`serve` and `work` stop gracefully on either).
async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut terminate) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// Runs the parsed command line.
pub async fn dispatch(cli: Cli) -> anyhow::Result<ExitCode> {
    let load = |cli: &Cli| -> anyhow::Result<Config> {
        let mut config = Config::load(cli.config.as_deref())?;
        if let Some(dir) = &cli.data_dir {
            config.data_dir = dir.clone();
        }
        Ok(config)
    };
    match &cli.command {
        Command::Run(args) => run::run(load(&cli)?, args).await,
        Command::Serve(args) => serve::run(load(&cli)?, args).await,
        Command::Crawl(args) => crawl::run(load(&cli)?, args).await,
        Command::Enqueue(args) => enqueue::run(load(&cli)?, args).await,
        Command::Work(args) => work::run(load(&cli)?, args).await,
        Command::Browse(args) => browse::browse(load(&cli)?, args).await,
        Command::Screenshot(args) => browse::screenshot(load(&cli)?, args).await,
        Command::Extract(args) => extract::run(args),
        Command::Read(args) => read::run(load(&cli)?, args).await,
        Command::Status(args) => status::run(load(&cli)?, args).await,
        Command::Search(args) => search::run(load(&cli)?, args).await,
        Command::Archive(args) => archive::run(load(&cli)?, args).await,
        Command::Export(args) => export::run(load(&cli)?, args).await,
        Command::Config => config::run(&load(&cli)?),
    }
}
