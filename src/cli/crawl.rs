//! `trawl crawl`: crawl sites from seed URLs with the pools in-process (and the archive pool
//! with --archive), a progress bar (or periodic lines), the pages written out as they end
//! with --out (as `trawl run --out`), and a summary of the crawl's counters.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::ProgressBar;
use trawl_workers::crawl::Scope;
use trawl_workers::job::{CrawlSpec, Format};

use super::extract::FormatArg;
use crate::app::{App, Needs};
use crate::config::Config;
use crate::store::{CrawlRecord, CrawlStatus};

/// Arguments of `trawl crawl`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Seed URLs (http or https).
    #[arg(value_name = "URL", required = true)]
    pub seeds: Vec<String>,
    /// Which links to follow: the seed's host, its registrable domain (subdomains too), or
    /// URLs under the seed's path.
    #[arg(long, value_enum, default_value = "host")]
    pub scope: ScopeArg,
    /// Only follow links whose path (and query, starting with `/`) matches this glob: `*`
    /// matches within one path segment (it stops at `/`, so '*.html' matches no link and
    /// '/docs/*' misses /docs/a/b), `**` across segments ('/docs/**', '**/*.html');
    /// repeatable. The seeds are always fetched.
    #[arg(long, value_name = "GLOB")]
    pub include: Vec<String>,
    /// Never follow links whose path (and query) matches this glob (same syntax; repeatable;
    /// wins over --include). The seeds are always fetched.
    #[arg(long, value_name = "GLOB")]
    pub exclude: Vec<String>,
    /// Links followed from a seed at most (0: the seeds only).
    #[arg(long, default_value_t = 3)]
    pub max_depth: u32,
    /// Pages fetched at most.
    #[arg(long, default_value_t = 1_000)]
    pub max_pages: u64,
    /// Also start from the sites' sitemaps (robots.txt Sitemap lines, /sitemap.xml).
    #[arg(long)]
    pub sitemap: bool,
    /// Do not read or obey robots.txt.
    #[arg(long)]
    pub ignore_robots: bool,
    /// Archive every page: search index and WARC records.
    #[arg(long)]
    pub archive: bool,
    /// Render pages in headless Chromium: never (plain HTTP), always, or auto (when a plain
    /// page looks built by JavaScript).
    #[arg(long, value_enum, default_value = "never")]
    pub render: super::browse::RenderArg,
    /// Format of the extracted text.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: FormatArg,
    /// Fetches at once [config: runner.concurrency]; per host, politeness.max_concurrent_per_host
    /// and politeness.min_delay_ms apply.
    #[arg(long, short = 'c', value_name = "N")]
    pub concurrency: Option<usize>,
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
    /// Send fetches (robots.txt and sitemaps too) through this proxy (repeatable: requests
    /// to one host stay on one proxy): http://, https://, socks5:// or socks5h:// URL;
    /// replaces the environment's proxies too [config: proxy.urls, proxy.trust_env].
    #[arg(long, value_name = "URL")]
    pub proxy: Vec<String>,
    /// Run no pools here: queue the crawl for the workers sharing this queue and store
    /// (`trawl work` processes on redis_url and database_url, or on this data directory) and
    /// follow its progress. Ctrl-C then stops following, not the crawl.
    #[arg(long)]
    pub no_pools: bool,
    /// Seconds a stored page may be served instead of fetching it; 0 always fetches
    /// [config: fetch.cache_ttl_secs, default: 900].
    #[arg(long, value_name = "SECS")]
    pub cache_ttl: Option<u64>,
    /// Write DIR/pages.jsonl (one line per crawled page, in the order they ended: the result,
    /// or {"url", "job_id", "error"}) and one file per page under DIR/pages/, as `trawl run
    /// --out` does.
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<std::path::PathBuf>,
    /// No progress bar or progress lines.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Print the summary as JSON (the crawl's record with its counters, elapsed time,
    /// whether it was interrupted) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `--scope`.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ScopeArg {
    /// The seed's host (and port).
    Host,
    /// The seed's registrable domain, subdomains included.
    Domain,
    /// URLs under the seed's path, on its origin.
    Prefix,
}

impl From<ScopeArg> for Scope {
    fn from(scope: ScopeArg) -> Scope {
        match scope {
            ScopeArg::Host => Scope::Host,
            ScopeArg::Domain => Scope::Domain,
            ScopeArg::Prefix => Scope::Prefix,
        }
    }
}

pub(super) async fn run(mut config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(concurrency) = args.concurrency {
        config.runner.concurrency = concurrency;
    }
    if args.allow_private_network {
        config.ssrf.allow_private_network = true;
    }
    config
        .ssrf
        .trusted_hosts
        .extend(args.trust_host.iter().cloned());
    super::use_proxies(&mut config, &args.proxy);
    config.validate()?;
    let spec = CrawlSpec {
        scope: args.scope.into(),
        include: args.include.clone(),
        exclude: args.exclude.clone(),
        max_depth: args.max_depth,
        max_pages: args.max_pages,
        sitemap: args.sitemap,
        robots: !args.ignore_robots,
        format: Format::from(args.format),
        archive: args.archive,
        render: args.render.into(),
        cache_ttl: args.cache_ttl,
        ..CrawlSpec::new(args.seeds.clone())
    };
    if let Err(error) = spec.validate() {
        eprintln!("trawl: {error}");
        return Ok(ExitCode::from(2));
    }
    let mut output = match &args.out {
        Some(dir) => Some(super::out::Output::create(dir, Format::from(args.format))?),
        None => None,
    };
    let mut app = App::build(
        &config,
        Needs {
            browser: !args.no_pools,
        },
    )
    .await?;
    if !args.no_pools {
        if args.archive {
            app.start_archive(crate::archive::Stop::Drain).context(
                "opening the archive (is another trawl archiving into this data directory?)",
            )?;
        }
        app.start_pools();
    }
    let deps = app.deps().clone();
    let store = deps.store.clone();
    if output.is_some() {
        // The page files are written from the texts just stored.
        store.keep_written_texts();
    }

    let started = Instant::now();
    // Subscribed before the crawl starts: a crawl with nothing to fetch completes as it starts.
    let mut completed = deps.completed_crawls.subscribe();
    let id = match crate::crawl::start(&deps, &deps.queue, spec).await {
        Ok(id) => id,
        Err(crate::crawl::StartError::Invalid(message)) => {
            eprintln!("trawl: {message}");
            if message.contains("blocked destination") {
                eprintln!("{}", super::BLOCKED_HINT);
            }
            super::shut_down(app, config.shutdown_grace()).await;
            return Ok(ExitCode::from(2));
        }
        Err(error) => return Err(error.into()),
    };
    let progress = CrawlProgress::new(args.quiet, &id);
    let interrupt = super::interrupts();
    let mut interrupted = false;
    let mut last_seq = 0_i64;
    loop {
        let record = store
            .crawl(&id)
            .await?
            .context("the crawl's record disappeared")?;
        progress.show(&record);
        if let Some(output) = output.as_mut() {
            // Read after the record: a completed crawl's pages have all ended by then.
            last_seq = output.write_crawl_ended(&store, &id, last_seq).await?;
        }
        if record.status != CrawlStatus::Running {
            break;
        }
        if interrupt.is_triggered() {
            interrupted = true;
            break;
        }
        // The record is read again after the pause, or as soon as this process completes a
        // crawl (the pools' upkeep sees the last page end within 100 ms).
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(200)) => {}
            _ = completed.recv() => {}
            _ = interrupt.wait() => {}
        }
    }
    progress.finish();
    if interrupted {
        eprintln!("{}", super::STOPPING);
    }
    let archiving = args.archive && !args.no_pools;
    let grace = config.shutdown_grace();
    let archived = super::stop_pools(&mut app, grace, archiving, args.quiet).await?;
    // Read once the pools have stopped: pages that ended while they stopped count too.
    let record = store
        .crawl(&id)
        .await?
        .context("the crawl's record disappeared")?;
    if let Some(output) = output.as_mut() {
        output.write_crawl_ended(&store, &id, last_seq).await?;
        output.flush()?;
    }
    let summary = Summary {
        interrupted,
        elapsed_secs: started.elapsed().as_secs_f64().max(0.001),
        crawl: record,
        archived,
    };
    if args.json {
        super::print_json(&summary)?;
    } else {
        summary.print(args.no_pools)?;
        if let Some(output) = output.as_ref() {
            output.print_summary()?;
        }
    }
    super::shut_down(app, config.shutdown_grace()).await;
    Ok(if interrupted {
        ExitCode::from(130)
    } else {
        ExitCode::SUCCESS
    })
}

/// What `trawl crawl` prints at the end: the crawl's record as the store has it once the
/// pools stopped.
#[derive(Debug, serde::Serialize)]
struct Summary {
    /// Whether Ctrl-C stopped the crawl (its remaining pages stay queued).
    interrupted: bool,
    elapsed_secs: f64,
    /// The crawl: id, spec, status and counters.
    crawl: CrawlRecord,
    /// With --archive: what the archive pool did.
    #[serde(skip_serializing_if = "Option::is_none")]
    archived: Option<crate::archive::Stats>,
}

impl Summary {
    fn print(&self, no_pools: bool) -> anyhow::Result<()> {
        let record = &self.crawl;
        let c = &record.counters;
        let seconds = self.elapsed_secs;
        outln!(
            "{} crawl {}: {} pages fetched, {} from cache, {} failed in {seconds:.1} s ({:.1} pages/s)",
            if self.interrupted {
                "interrupted:"
            } else {
                "done:"
            },
            record.id,
            c.fetched,
            c.cached,
            c.failed,
            c.fetched as f64 / seconds
        )?;
        // The globs filter links into the same counter as the scope: say so when given.
        let scope = if record.spec.include.is_empty() && record.spec.exclude.is_empty() {
            "out of scope"
        } else {
            "out of scope or skipped by --include/--exclude"
        };
        outln!(
            "urls: {} discovered, {} queued; skipped: {} {scope}, {} by robots.txt, {} too deep, {} over max_pages, {} duplicates",
            c.discovered,
            c.queued,
            c.skipped_scope,
            c.skipped_robots,
            c.skipped_depth,
            c.skipped_limit,
            c.skipped_duplicate
        )?;
        if self.interrupted && no_pools {
            outln!("the crawl goes on in the workers; follow it with `trawl status`")?;
        } else if self.interrupted {
            outln!(
                "the crawl's remaining pages stay queued: `trawl serve` or `trawl work` on this queue goes on with them"
            )?;
        }
        outln!(
            "trawl: crawl {}; see `trawl status {}`, `trawl pages --crawl {}`, `trawl read URL`, `trawl export --warc FILE --crawl {}`",
            record.id,
            record.id,
            record.id,
            record.id
        )?;
        if let Some(stats) = &self.archived {
            outln!("archived: {stats}")?;
        }
        Ok(())
    }
}

/// A progress bar on a terminal, plain lines every 5 s otherwise.
struct CrawlProgress {
    bar: Option<ProgressBar>,
    quiet: bool,
    last_line: std::sync::Mutex<Instant>,
}

impl CrawlProgress {
    fn new(quiet: bool, id: &str) -> CrawlProgress {
        let bar = super::progress::bar(quiet).inspect(|bar| {
            bar.set_style(super::progress::crawl_style());
            bar.set_message(format!("crawl {id}"));
        });
        CrawlProgress {
            bar,
            quiet,
            last_line: std::sync::Mutex::new(Instant::now()),
        }
    }

    fn show(&self, record: &CrawlRecord) {
        let c = &record.counters;
        let ended = c.fetched + c.cached + c.failed + c.skipped_duplicate;
        if let Some(bar) = &self.bar {
            bar.set_length(c.queued);
            bar.set_position(ended);
            bar.set_message(format!(
                "{} discovered, {} failed, {} skipped",
                c.discovered,
                c.failed,
                c.skipped_scope + c.skipped_robots + c.skipped_depth + c.skipped_limit
            ));
            return;
        }
        if self.quiet {
            return;
        }
        let Ok(mut last) = self.last_line.lock() else {
            return;
        };
        if last.elapsed() >= Duration::from_secs(5) {
            *last = Instant::now();
            eprintln!(
                "trawl: crawl {}: {ended}/{} pages ended, {} discovered, {} failed",
                record.id, c.queued, c.discovered, c.failed
            );
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            super::progress::finish(bar);
        }
    }
}
