//! The command line: one file per subcommand, each a thin layer that loads the configuration,
//! calls the library, and prints. `anyhow` is used here and in `main.rs` only.
//!
//! Not here: any behaviour a test or the API would also need (that lives in the library).

/// `print!` to standard output that returns the write's error instead of panicking: a closed
/// pipe (`trawl extract page.html | head -1`) ends the command quietly (see `main.rs`).
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!($($arg)*))
    };
}

/// `println!` to standard output that returns the write's error instead of panicking.
macro_rules! outln {
    () => {
        $crate::cli::write_stdout(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::write_stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

mod archive;
mod browse;
mod config;
mod crawl;
mod enqueue;
mod export;
mod extract;
mod fetch;
mod grep;
mod mcp;
mod out;
mod pages;
mod progress;
mod read;
mod remote;
mod run;
mod search;
mod serve;
mod status;
mod web_search;
mod work;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{CommandFactory as _, Parser, Subcommand};

use crate::app::App;
use crate::config::Config;

/// trawl: a job-queue batch crawler and archiver for AI agents and RAG pipelines.
///
/// Configuration is read from the user's $XDG_CONFIG_HOME/trawl/trawl.toml (else
/// ~/.config/trawl/trawl.toml), then ./trawl.toml (--config FILE replaces both), then TRAWL_*
/// environment variables (nested keys with a double underscore, e.g.
/// TRAWL_HTTP__MAX_BYTES), then flags. Logs go to stderr (TRAWL_LOG=debug for more; colours
/// only on a terminal, never with NO_COLOR).
#[derive(Debug, Parser)]
#[command(
    name = "trawl",
    version,
    about,
    long_about,
    disable_help_subcommand = true
)]
pub struct Cli {
    /// Configuration file, instead of the user's and ./trawl.toml [default: both, when
    /// present].
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
    /// Serve MCP (Model Context Protocol) on stdin and stdout, for agent hosts that launch a
    /// process: trawl's tools and stored pages, with the worker pools unless --no-pools.
    Mcp(mcp::Args),
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
    /// Fetch one URL (from the cache when fresh, else through the fetch pool) and print its
    /// page to stdout.
    Fetch(fetch::Args),
    /// Print a stored page, or a range of its lines (at most api.read_max_chars characters at
    /// a time; the next range is named).
    Read(read::Args),
    /// Search the lines of a stored page with a regular expression, with context lines.
    Grep(grep::Args),
    /// List the stored pages (each fetch of a URL), by host or crawl.
    Pages(pages::Args),
    /// Show job counts by status, or one job's, batch's or crawl's record (locally or from
    /// --server).
    Status(status::Args),
    /// Search the archive: BM25 over page chunks, with host and date filters.
    ///
    /// Exit status, like grep: 0 when there are hits, 1 when there are none (with --json
    /// too, which then prints []), 2 on an error.
    Search(search::Args),
    /// Search the web (SearxNG, DuckDuckGo, its instant answers) and print the results;
    /// with --fetch-top N, also fetch (and --archive) the top N.
    ///
    /// Exit status: 0 with results, 1 without, 2 on an error.
    WebSearch(web_search::Args),
    /// Search images (DuckDuckGo) and print them.
    ///
    /// Exit status: 0 with results, 1 without, 2 on an error.
    WebImages(web_search::ImagesArgs),
    /// Archive stored pages into the search index and WARC files.
    Archive(archive::Args),
    /// Export stored responses as a WARC file.
    Export(export::Args),
    /// Print the configuration in force as TOML (defaults, the user's and ./trawl.toml,
    /// TRAWL_* env).
    Config(config::Args),
    /// Print a shell completion script, generated from these --help texts: bash (e.g. into
    /// /etc/bash_completion.d/trawl), zsh (as _trawl in a directory on $fpath), fish (into
    /// ~/.config/fish/completions/trawl.fish).
    Completions {
        /// The shell.
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the manual page (roff), generated from these --help texts: `trawl man >
    /// trawl.1 && man ./trawl.1`.
    Man,
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
    /// URLs (http or https); - reads a list from standard input, as does a pipe into trawl
    /// when no URL is given.
    #[arg(value_name = "URL")]
    pub urls: Vec<String>,
    /// A file with one URL per line (surrounding whitespace is trimmed; blank lines and lines
    /// starting with # are skipped), or - for standard input.
    #[arg(long, short = 'f', value_name = "FILE|-")]
    pub file: Option<String>,
}

/// The list of URLs read after those given as arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
enum UrlList {
    /// None: the arguments are all.
    None,
    /// A file, one URL per line.
    File(PathBuf),
    /// Standard input, one URL per line.
    Stdin,
}

impl UrlArgs {
    /// The URLs given as arguments (`-` left out) and the list to read after them: standard
    /// input for `-` or `--file -`, or when nothing else is given and standard input is a
    /// pipe or a file; the `--file` otherwise. Refuses a command given no URLs at all.
    fn sources(&self) -> anyhow::Result<(Vec<String>, UrlList)> {
        let dash = self.urls.iter().any(|url| url == "-");
        let leading: Vec<String> = self
            .urls
            .iter()
            .filter(|url| *url != "-")
            .cloned()
            .collect();
        let list = match (dash, self.file.as_deref()) {
            (true, Some(file)) if file != "-" => {
                anyhow::bail!("give the list as - (standard input) or --file FILE, not both")
            }
            (true, _) | (false, Some("-")) => UrlList::Stdin,
            (false, Some(file)) => UrlList::File(PathBuf::from(file)),
            (false, None) if leading.is_empty() && stdin_is_piped() => UrlList::Stdin,
            (false, None) => UrlList::None,
        };
        if leading.is_empty() && list == UrlList::None {
            anyhow::bail!(
                "give URLs as arguments, or a list with --file FILE, - (standard input) or a pipe"
            );
        }
        Ok((leading, list))
    }
}

/// Whether standard input is a pipe or a file (`... | trawl run`, `trawl run < urls.txt`):
/// not a terminal, nor /dev/null.
fn stdin_is_piped() -> bool {
    use std::io::IsTerminal as _;
    if std::io::stdin().is_terminal() {
        return false;
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        std::fs::metadata("/dev/stdin")
            .map(|meta| meta.file_type().is_fifo() || meta.is_file())
            .unwrap_or(false)
    }
    #[cfg(not(unix))]
    false
}

/// The URL on an input line, surrounding whitespace trimmed, or `None` for a blank or `#`
/// comment line.
fn url_line(line: &str) -> Option<&str> {
    let content = line.trim();
    (!content.is_empty() && !content.starts_with('#')).then_some(content)
}

/// Ctrl-C during `run` and `crawl`: the first one triggers the returned handle (the command
/// then stops its pools: no new jobs, jobs waiting for a politeness turn go back to the
/// queue) and the command says so with [`STOPPING`]; a second one ends the process at once
/// (exit 130), leaving unfinished jobs queued for the next `trawl serve`, `work` or `run`.
fn interrupts() -> crate::shutdown::Shutdown {
    let first = crate::shutdown::Shutdown::new();
    let trigger = first.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_err() {
            return;
        }
        trigger.trigger();
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("trawl: quitting now; unfinished jobs stay queued");
            std::process::exit(130);
        }
    });
    first
}

/// What `run` and `crawl` say on the first Ctrl-C.
const STOPPING: &str = "trawl: stopping… (Ctrl-C again to quit now)";

/// The hint after a summary with `blocked_destination` errors.
const BLOCKED_HINT: &str = "hint: blocked_destination: private, loopback and link-local \
     addresses are fetched with --allow-private-network [config: ssrf.allow_private_network]; \
     --block-host and --allow-host [config: ssrf.block_hosts, ssrf.allow_hosts] refuse hosts \
     by name; cloud metadata addresses are never fetched";

/// `--header "Name: value"` flags as a job's headers (checked by the job's `validate`).
fn parse_headers(given: &[String]) -> anyhow::Result<trawl_workers::job::CustomHeaders> {
    given
        .iter()
        .map(|header| {
            // The value may be a secret: messages name the header, never show the value.
            let (name, value) = header.split_once(':').ok_or_else(|| {
                anyhow::anyhow!("a --header has no ':': write it as \"Name: value\"")
            })?;
            Ok((name.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// Prints `value` as pretty JSON on standard output (`--json`).
fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    outln!("{}", serde_json::to_string_pretty(value)?)?;
    Ok(())
}

/// Writes to standard output; the error (a closed pipe, above all) goes back to the caller.
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut stdout = std::io::stdout().lock();
    stdout.write_fmt(args)?;
    stdout.flush()
}

/// Whether a command failed because its standard output was closed (the reader of a pipe
/// went away): Unix tools end quietly then, and so does trawl.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|error| error.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// An error and its causes as one line, each cause said once: a message that already
/// includes its cause's text (`"configuration: {0}"`) is not followed by it again.
pub fn error_line(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// `--proxy URL` (repeatable) of `run` and `crawl`: replaces `proxy.urls` when given, and
/// the environment's proxies (`proxy.trust_env`) with them.
fn use_proxies(config: &mut Config, urls: &[String]) {
    if !urls.is_empty() {
        config.proxy.trust_env = false;
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
        Command::Mcp(args) => mcp::run(load(&cli)?, args).await,
        Command::Crawl(args) => crawl::run(load(&cli)?, args).await,
        Command::Enqueue(args) => enqueue::run(load(&cli)?, args).await,
        Command::Work(args) => work::run(load(&cli)?, args).await,
        Command::Browse(args) => browse::browse(load(&cli)?, args).await,
        Command::Screenshot(args) => browse::screenshot(load(&cli)?, args).await,
        Command::Extract(args) => extract::run(args),
        Command::Fetch(args) => fetch::run(load(&cli)?, args).await,
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
        Command::Grep(args) => grep::run(load(&cli)?, args).await,
        Command::Pages(args) => pages::run(load(&cli)?, args).await,
        Command::Status(args) => status::run(load(&cli)?, args).await,
        Command::Search(args) => search::run(load(&cli)?, args).await,
        Command::WebSearch(args) => web_search::run(load(&cli)?, args).await,
        Command::WebImages(args) => web_search::images(load(&cli)?, args).await,
        Command::Archive(args) => archive::run(load(&cli)?, args).await,
        Command::Export(args) => export::run(load(&cli)?, args).await,
        Command::Config(args) => config::run(&load(&cli)?, args),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(*shell, &mut Cli::command(), "trawl", &mut script);
            out!("{}", String::from_utf8_lossy(&script))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Man => {
            let mut page = Vec::new();
            clap_mangen::Man::new(Cli::command()).render(&mut page)?;
            out!("{}", String::from_utf8_lossy(&page))?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Help(args) => help(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_cause_is_said_once() {
        #[derive(Debug, thiserror::Error)]
        #[error("configuration: {0}")]
        struct Wrapping(#[source] std::io::Error);
        let inner = std::io::Error::other("unknown field `max_bytez` in trawl.toml TOML file");
        let error = anyhow::Error::new(Wrapping(inner)).context("loading");
        assert_eq!(
            error_line(&error),
            "loading: configuration: unknown field `max_bytez` in trawl.toml TOML file"
        );
        let plain = anyhow::anyhow!("outer").context("more");
        assert_eq!(error_line(&plain), "more: outer");
    }

    #[test]
    fn list_lines_are_trimmed() {
        assert_eq!(url_line("  https://a.test/ \t\r"), Some("https://a.test/"));
        assert_eq!(url_line("   "), None);
        assert_eq!(url_line("  # comment"), None);
    }

    #[test]
    fn a_closed_pipe_is_recognised_through_context() {
        let error = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("printing");
        assert!(is_broken_pipe(&error));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
