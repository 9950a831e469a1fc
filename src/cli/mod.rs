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

use crate::app::App;
use crate::config::Config;

/// trawl: a job-queue batch crawler and archiver for AI agents and RAG pipelines.
///
/// Configuration is read from trawl.toml (or --config), then TRAWL_* environment variables
/// (nested keys with a double underscore, e.g. TRAWL_HTTP__MAX_BYTES), then flags.
#[derive(Debug, Parser)]
#[command(
    name = "trawl",
    version,
    about,
    long_about,
    disable_help_subcommand = true
)]
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
    /// ones finish (up to shutdown_timeout_secs), hand the rest back to the queue.
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
    /// Print this help, or the help of a subcommand (`trawl help read`).
    // trawl's own rather than clap's generated one, which refuses `trawl help --help`.
    Help(HelpArgs),
}

/// Arguments of `trawl help`.
#[derive(Debug, clap::Args)]
pub struct HelpArgs {
    /// The subcommand to explain.
    #[arg(value_name = "COMMAND")]
    pub command: Option<String>,
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

/// `--proxy URL` (repeatable) of `run` and `crawl`: replaces `proxy.urls` when given.
fn use_proxies(config: &mut Config, urls: &[String]) {
    if !urls.is_empty() {
        config.proxy.urls = urls
            .iter()
            .map(trawl_workers::web::proxy::ProxyUrl::new)
            .collect();
    }
}

/// Stops the application and reports what did not stop cleanly on stderr.
async fn shut_down(app: App, grace: std::time::Duration) -> crate::app::Teardown {
    report(app.shutdown(grace).await)
}

/// Stops the pools of `run` and `crawl`, reporting on stderr; the store stays open for their
/// summary. With `archiving`, the archive pool first archives every pending page, and its
/// failure is the command's.
async fn stop_pools(
    app: &mut App,
    grace: std::time::Duration,
    archiving: bool,
    quiet: bool,
) -> anyhow::Result<Option<crate::archive::Stats>> {
    if archiving && !quiet {
        eprintln!("trawl: archiving the remaining pages...");
    }
    let archived = report(app.stop_pools(grace).await).archived;
    if archiving && archived.is_none() {
        anyhow::bail!("the archive pool failed; pending pages are archived at its next start");
    }
    Ok(archived)
}

fn report(teardown: crate::app::Teardown) -> crate::app::Teardown {
    for problem in &teardown.problems {
        eprintln!("trawl: {problem}");
    }
    teardown
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

/// `trawl help [COMMAND]`: the long help of trawl or of one subcommand.
fn help(args: &HelpArgs) -> anyhow::Result<ExitCode> {
    let mut command = <Cli as clap::CommandFactory>::command();
    // Builds the tree so a subcommand's usage line says `trawl read`, not `read`.
    command.build();
    let mut target = match &args.command {
        None => command,
        Some(name) => match command.find_subcommand(name) {
            Some(subcommand) => subcommand.clone(),
            None => {
                command
                    .error(
                        clap::error::ErrorKind::InvalidSubcommand,
                        format!("no subcommand {name:?}; `trawl help` lists them"),
                    )
                    .exit();
            }
        },
    };
    target.print_long_help()?;
    Ok(ExitCode::SUCCESS)
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
        Command::Read(args) => {
            if let Err(error) = args.check() {
                // A usage error, printed and exited with as clap does its own (status 2).
                let mut command = <Cli as clap::CommandFactory>::command();
                let read = command
                    .find_subcommand_mut("read")
                    .expect("read is a subcommand");
                error.format(read).exit();
            }
            read::run(load(&cli)?, args).await
        }
        Command::Status(args) => status::run(load(&cli)?, args).await,
        Command::Search(args) => search::run(load(&cli)?, args).await,
        Command::Archive(args) => archive::run(load(&cli)?, args).await,
        Command::Export(args) => export::run(load(&cli)?, args).await,
        Command::Config => config::run(&load(&cli)?),
        Command::Help(args) => help(args),
    }
}
