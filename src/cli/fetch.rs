//! `trawl fetch URL`: one URL through the cache and the pool, the page printed to stdout (the
//! command line's `POST /v1/fetch`, through the same `fetch_now`): a fresh cached page at
//! once, otherwise a job queued and run by the pools this command starts, waited for with a
//! progress line on stderr once it has been pending for 5 seconds.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use trawl_workers::job::{FetchJob, Format};

use super::extract::FormatArg;
use crate::app::{App, Needs};
use crate::config::Config;
use crate::fetch_now::{self, Ended, StartError, Started};
use crate::tenant::Tenant;

/// How long a fetch may be pending before the first progress line, then between lines.
const FIRST_PROGRESS: Duration = Duration::from_secs(5);
const NEXT_PROGRESS: Duration = Duration::from_secs(15);

/// Arguments of `trawl fetch`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The URL (http or https).
    pub url: String,
    /// Format of the extracted text.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: FormatArg,
    /// Characters of text printed; the whole text is stored, `trawl read URL --from N` pages
    /// through it [config: fetch.max_chars, default: 20000].
    #[arg(long, value_name = "N")]
    pub max_chars: Option<usize>,
    /// Seconds a stored page may be served instead of fetching; 0 always fetches
    /// [config: fetch.cache_ttl_secs, default: 900].
    #[arg(long, value_name = "SECS")]
    pub cache_ttl: Option<u64>,
    /// Render the page in headless Chromium: never (plain HTTP), always, or auto (when the
    /// plain page looks built by JavaScript).
    #[arg(long, value_enum, default_value = "never")]
    pub render: super::browse::RenderArg,
    /// Print the whole result as JSON (url, final_url, status, title, content, links, meta,
    /// page_id, cached) instead of the text.
    #[arg(long)]
    pub json: bool,
    /// Allow private, loopback and link-local destinations (cloud metadata stays blocked)
    /// [config: ssrf.allow_private_network].
    #[arg(long)]
    pub allow_private_network: bool,
    /// Trust this internal host (repeatable): an exact host name or IP literal that may be
    /// or resolve to a private address; every other private destination stays blocked,
    /// redirects from it to other private hosts too, and cloud metadata always. (Unlike
    /// --allow-host, which restricts fetching to the hosts it names.)
    /// [config: ssrf.trusted_hosts]
    #[arg(long, value_name = "HOST")]
    pub trust_host: Vec<String>,
    /// Send this request header with the page requests (repeatable): "Name: value", e.g. a
    /// service token; sent to the URL's origin only (Accept, Accept-Language and User-Agent
    /// also after a redirect elsewhere), never shown back. Pages fetched with headers are
    /// cached apart. [config: http.headers, for every fetch]
    #[arg(long = "header", short = 'H', value_name = "NAME: VALUE")]
    pub header: Vec<String>,
    /// The extraction provider asked when trawl finds no readable content on the page (an
    /// empty shell, a challenge, no article): none, firecrawl, crawl4ai or auto (each one
    /// configured); only the URL is sent, never the headers
    /// [config: fetch.fallback, default: auto].
    #[arg(long, value_enum, value_name = "PROVIDER")]
    pub fallback: Option<FallbackArg>,
}

/// `--fallback`'s values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FallbackArg {
    /// Never ask a provider.
    None,
    /// Firecrawl's scrape API ([fetch.firecrawl]).
    Firecrawl,
    /// A Crawl4AI server ([fetch.crawl4ai]).
    #[value(name = "crawl4ai")]
    Crawl4ai,
    /// Each configured provider in turn, Firecrawl first.
    Auto,
}

impl From<FallbackArg> for trawl_workers::job::Fallback {
    fn from(arg: FallbackArg) -> Self {
        use trawl_workers::job::Fallback;
        match arg {
            FallbackArg::None => Fallback::None,
            FallbackArg::Firecrawl => Fallback::Firecrawl,
            FallbackArg::Crawl4ai => Fallback::Crawl4ai,
            FallbackArg::Auto => Fallback::Auto,
        }
    }
}

pub(super) async fn run(mut config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    if args.allow_private_network {
        config.ssrf.allow_private_network = true;
    }
    config
        .ssrf
        .trusted_hosts
        .extend(args.trust_host.iter().cloned());
    config.validate()?;
    let job = FetchJob {
        format: Format::from(args.format),
        max_chars: args.max_chars,
        cache_ttl: args.cache_ttl,
        render: args.render.into(),
        headers: super::parse_headers(&args.header)?,
        fallback: args.fallback.map(Into::into),
        ..FetchJob::new(args.url.clone())
    };
    if let Err(message) = job.validate() {
        eprintln!("trawl: {message}");
        return Ok(ExitCode::from(2));
    }
    let mut app = App::build(&config, Needs { browser: true }).await?;
    let deps = app.deps().clone();
    let grace = config.shutdown_grace();
    let mut waiter = match fetch_now::start(&deps, &deps.queue, job, &Tenant::default()).await {
        Ok(Started::Cached(result)) => {
            super::shut_down(app, grace).await;
            return print_result(&serde_json::to_value(&*result)?, args.json);
        }
        Ok(Started::Queued(waiter)) => waiter,
        Err(StartError::Refused(error)) => {
            super::shut_down(app, grace).await;
            eprintln!("trawl: {}: {}: {}", args.url, error.code, error.message);
            return Ok(ExitCode::from(2));
        }
        Err(error) => {
            super::shut_down(app, grace).await;
            return Err(error.into());
        }
    };
    app.start_pools();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut wait = FIRST_PROGRESS;
    let ended = loop {
        tokio::select! {
            ended = waiter.wait(&deps.store, wait) => match ended? {
                Ended::Pending(status) => {
                    eprintln!(
                        "trawl: {} is still {} (job {}); waiting (Ctrl-C stops waiting, the job stays queued)",
                        args.url,
                        status.as_str(),
                        waiter.job_id()
                    );
                    wait = NEXT_PROGRESS;
                }
                ended => break Some(ended),
            },
            _ = &mut ctrl_c => break None,
        }
    };
    super::shut_down(app, grace).await;
    match ended {
        Some(Ended::Succeeded(result)) => print_result(&result, args.json),
        Some(Ended::Failed(error)) => {
            if args.json {
                let line = serde_json::json!({ "url": args.url, "job_id": waiter.job_id(), "error": error });
                outln!("{line}")?;
            }
            eprintln!("trawl: {}: {}: {}", args.url, error.code, error.message);
            Ok(ExitCode::from(1))
        }
        Some(Ended::Cancelled) => {
            eprintln!("trawl: {}: the job was cancelled", args.url);
            Ok(ExitCode::from(1))
        }
        Some(Ended::Pending(_)) | None => {
            eprintln!(
                "trawl: stopped waiting; job {} stays queued (`trawl status {}`)",
                waiter.job_id(),
                waiter.job_id()
            );
            Ok(ExitCode::from(130))
        }
    }
}

/// Prints a fetch result: the whole JSON, or the text (and, on stderr, where the rest is when
/// the text was cut at `max_chars`).
fn print_result(result: &serde_json::Value, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        outln!("{result}")?;
        return Ok(ExitCode::SUCCESS);
    }
    let content = &result["content"];
    let text = content["text"].as_str().unwrap_or_default();
    let mut stdout = std::io::stdout().lock();
    stdout.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        stdout.write_all(b"\n")?;
    }
    stdout.flush()?;
    if content["truncated"].as_bool() == Some(true) {
        eprintln!(
            "trawl: text cut at {} of {} characters; the rest: trawl read {}",
            content["length"],
            content["raw_length"],
            result["url"].as_str().unwrap_or_default()
        );
    }
    Ok(ExitCode::SUCCESS)
}
