//! `trawl run`: the main job, embedded. Reads URLs (arguments, a file or stdin) as a stream,
//! records and enqueues them in chunks, runs the fetch pool in-process, follows the batch's
//! ended jobs in the store, writes `pages.jsonl` and one file per page with `--out`, shows
//! progress, and prints a summary. Memory stays bounded whatever the number of URLs: input is
//! read ahead at most `READ_AHEAD` jobs beyond what has ended.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::ProgressBar;
use tokio::io::AsyncBufReadExt as _;
use trawl_workers::job::{ErrorCode, FetchJob, Format, Job};
use trawl_workers::{fetch, web};

use super::extract::FormatArg;
use super::{UrlArgs, UrlList, url_line};
use crate::app::{App, Needs};
use crate::archive::Stop;
use crate::config::Config;
use crate::queue::{Envelope, Queue};
use crate::store::{EndedJob, NewJob, Status, Store};

/// Jobs recorded per transaction and pushed per queue call.
const CHUNK: usize = 500;

/// Most jobs read from the input but not yet ended.
const READ_AHEAD: u64 = 5_000;

/// Arguments of `trawl run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The URLs to fetch.
    #[command(flatten)]
    pub input: UrlArgs,
    /// Write DIR/pages.jsonl (one line per input URL: the result, or {"url", "error"}) and
    /// one file per page under DIR/pages/. pages.jsonl is replaced; files an earlier run left
    /// in DIR/pages/ are kept (a warning says how many).
    #[arg(long, short = 'o', value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Format of the extracted text.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: FormatArg,
    /// Fetches at once [config: runner.concurrency, default: 32].
    #[arg(long, short = 'c', value_name = "N")]
    pub concurrency: Option<usize>,
    /// Characters of text in each result; the whole text is always stored
    /// [config: fetch.max_chars, default: 20000].
    #[arg(long, value_name = "N")]
    pub max_chars: Option<usize>,
    /// Seconds a stored page may be served instead of fetching; 0 always fetches
    /// [config: fetch.cache_ttl_secs, default: 900].
    #[arg(long, value_name = "SECS")]
    pub cache_ttl: Option<u64>,
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
    /// The extraction provider asked when trawl finds no readable content on a page (an
    /// empty shell, a challenge, no article): none, firecrawl, crawl4ai or auto (each one
    /// configured); only the URL is sent, never the headers
    /// [config: fetch.fallback, default: auto].
    #[arg(long, value_enum, value_name = "PROVIDER")]
    pub fallback: Option<super::fetch::FallbackArg>,
    /// Send fetches through this proxy (repeatable: requests to one host stay on one proxy):
    /// http://, https://, socks5:// or socks5h:// URL, credentials allowed; replaces the
    /// environment's proxies too [config: proxy.urls, proxy.trust_env].
    #[arg(long, value_name = "URL")]
    pub proxy: Vec<String>,
    /// Only fetch from these exact hosts (repeatable) [config: ssrf.allow_hosts]: a
    /// restriction, it opens no private address (--trust-host does).
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Never fetch from these hosts; *.example.com also blocks example.com and its
    /// subdomains (repeatable) [config: ssrf.block_hosts].
    #[arg(long, value_name = "PATTERN")]
    pub block_host: Vec<String>,
    /// Archive every page as it is stored: chunks into the search index (data_dir/index)
    /// and WARC records (data_dir/warc); `trawl search` then answers from it.
    #[arg(long)]
    pub archive: bool,
    /// Render pages in headless Chromium: never (plain HTTP), always, or auto (when a plain
    /// page looks built by JavaScript).
    #[arg(long, value_enum, default_value = "never")]
    pub render: super::browse::RenderArg,
    /// No progress bar or progress lines.
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Print the summary as JSON (counts by status, errors by code, retries, elapsed time,
    /// batch id) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Exit with status 1 when any URL failed (failed, dead or cancelled), for scripts and CI.
    #[arg(long)]
    pub fail_on_error: bool,
}

pub(super) async fn run(mut config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    apply_flags(&mut config, args);
    config.validate()?;
    let (leading_urls, input) = args.input.sources()?;
    let output = match &args.out {
        Some(dir) => Some(super::out::Output::create(dir, Format::from(args.format))?),
        None => None,
    };
    let mut app = App::build(&config, Needs { browser: true }).await?;
    if args.archive {
        app.start_archive(Stop::Drain).context(
            "opening the archive (is another trawl archiving into this data directory?)",
        )?;
    }
    app.start_pools();
    let deps = app.deps().clone();
    let store = deps.store.clone();
    if output.is_some() {
        // The page files are written from the texts just stored.
        store.keep_written_texts();
    }

    let batch_id = ulid::Ulid::generate().to_string();
    let template = FetchJob {
        max_chars: args.max_chars,
        cache_ttl: args.cache_ttl,
        format: Format::from(args.format),
        archive: args.archive,
        render: args.render.into(),
        headers: super::parse_headers(&args.header)?,
        fallback: args.fallback.map(Into::into),
        ..FetchJob::new("")
    };
    template.validate().map_err(anyhow::Error::msg)?;
    let progress = Progress::new(args.quiet);
    let counters = Arc::new(Counters::default());
    let producer = tokio::spawn(produce(
        input,
        leading_urls,
        ProduceDeps {
            store: store.clone(),
            queue: deps.queue.clone(),
            client: deps.fetch.client.clone(),
            batch_id: batch_id.clone(),
            template,
            max_attempts: config.runner.max_attempts,
            counters: counters.clone(),
        },
    ));

    let started = Instant::now();
    let mut output = output;
    let mut last_seq = 0_i64;
    let mut interrupted = false;
    let interrupt = super::interrupts();
    loop {
        let ended = store.ended_since(&batch_id, last_seq, 1_000).await?;
        for job in &ended {
            last_seq = job.done_seq;
            counters.ended.fetch_add(1, Ordering::Relaxed);
            if let Some(output) = output.as_mut() {
                output.write(&store, job).await?;
            }
            progress.ended(job);
        }
        let all_read = counters.input_done.load(Ordering::Acquire);
        progress.set_total(counters.enqueued.load(Ordering::Relaxed), all_read);
        if all_read
            && counters.ended.load(Ordering::Relaxed) >= counters.enqueued.load(Ordering::Relaxed)
        {
            break;
        }
        if producer.is_finished() && !all_read {
            // The producer failed; its error is reported below.
            break;
        }
        if interrupt.is_triggered() {
            interrupted = true;
            break;
        }
        if ended.is_empty() {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = interrupt.wait() => {}
            }
        }
    }
    producer.abort();
    let produced = producer.await;
    progress.finish();
    if interrupted {
        eprintln!("{}", super::STOPPING);
    }
    let grace = config.shutdown_grace();
    let archived = super::stop_pools(&mut app, grace, args.archive, args.quiet).await?;
    if let Ok(Err(error)) = produced {
        return Err(error.context("reading the input"));
    }
    if let Some(output) = output.as_mut() {
        output.flush()?;
    }
    let summary = Summary::read(
        &store,
        &batch_id,
        started.elapsed(),
        output.as_ref(),
        interrupted,
        archived,
    )
    .await?;
    if args.json {
        super::print_json(&summary)?;
    } else {
        summary.print()?;
    }
    super::shut_down(app, config.shutdown_grace()).await;
    Ok(if interrupted {
        ExitCode::from(130)
    } else if args.fail_on_error && summary.unsuccessful() > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn apply_flags(config: &mut Config, args: &Args) {
    if let Some(concurrency) = args.concurrency {
        config.runner.concurrency = concurrency;
    }
    if let Some(max_chars) = args.max_chars {
        config.fetch.max_chars = max_chars.min(config.fetch.max_chars_cap);
    }
    if args.allow_private_network {
        config.ssrf.allow_private_network = true;
    }
    config
        .ssrf
        .trusted_hosts
        .extend(args.trust_host.iter().cloned());
    super::use_proxies(config, &args.proxy);
    config
        .ssrf
        .allow_hosts
        .extend(args.allow_host.iter().cloned());
    config
        .ssrf
        .block_hosts
        .extend(args.block_host.iter().cloned());
}

#[derive(Debug, Default)]
struct Counters {
    enqueued: AtomicU64,
    ended: AtomicU64,
    input_done: AtomicBool,
}

struct ProduceDeps {
    store: Store,
    queue: Queue,
    client: web::Client,
    batch_id: String,
    template: FetchJob,
    max_attempts: u32,
    counters: Arc<Counters>,
}

/// Reads the input as a stream and records and enqueues it chunk by chunk. Every line that is
/// not a URL trawl may fetch is recorded as a failed job, so every input line is accounted for.
async fn produce(input: UrlList, leading: Vec<String>, deps: ProduceDeps) -> anyhow::Result<()> {
    let mut chunk: Vec<String> = Vec::with_capacity(CHUNK);
    let mut lines: Box<dyn futures_util::Stream<Item = std::io::Result<String>> + Send + Unpin> =
        match input {
            UrlList::None => Box::new(futures_util::stream::empty()),
            UrlList::File(path) => {
                let file = tokio::fs::File::open(&path)
                    .await
                    .with_context(|| format!("opening {}", path.display()))?;
                Box::new(tokio_stream_lines(tokio::io::BufReader::new(file)))
            }
            UrlList::Stdin => Box::new(tokio_stream_lines(tokio::io::BufReader::new(
                tokio::io::stdin(),
            ))),
        };
    let mut leading = leading.into_iter();
    loop {
        let line = match leading.next() {
            Some(url) => Some(url),
            None => futures_util::StreamExt::next(&mut lines)
                .await
                .transpose()?,
        };
        let Some(line) = line else { break };
        let Some(url) = url_line(&line) else {
            continue;
        };
        chunk.push(url.to_owned());
        if chunk.len() >= CHUNK {
            enqueue_chunk(&deps, std::mem::take(&mut chunk)).await?;
        }
    }
    enqueue_chunk(&deps, chunk).await?;
    deps.counters.input_done.store(true, Ordering::Release);
    Ok(())
}

fn tokio_stream_lines<R: tokio::io::AsyncBufRead + Send + Unpin + 'static>(
    reader: R,
) -> impl futures_util::Stream<Item = std::io::Result<String>> + Send + Unpin {
    Box::pin(futures_util::stream::unfold(
        reader.lines(),
        |mut lines| async move {
            match lines.next_line().await {
                Ok(Some(line)) => Some((Ok(line), lines)),
                Ok(None) => None,
                Err(error) => Some((Err(error), lines)),
            }
        },
    ))
}

async fn enqueue_chunk(deps: &ProduceDeps, urls: Vec<String>) -> anyhow::Result<()> {
    if urls.is_empty() {
        return Ok(());
    }
    // Back-pressure: never read far ahead of what has ended.
    while deps.counters.enqueued.load(Ordering::Relaxed)
        > deps.counters.ended.load(Ordering::Relaxed) + READ_AHEAD
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut new_jobs = Vec::with_capacity(urls.len());
    let mut envelopes = Vec::with_capacity(urls.len());
    for url in urls {
        let id = ulid::Ulid::generate().to_string();
        let job = Job::Fetch(FetchJob {
            url: url.clone(),
            ..deps.template.clone()
        });
        let new_job = NewJob {
            batch_id: Some(deps.batch_id.clone()),
            ..NewJob::new(&id, &job, deps.max_attempts)
        };
        deps.counters.enqueued.fetch_add(1, Ordering::Relaxed);
        match fetch::check_url(&deps.client, &url) {
            Ok(_) => {
                new_jobs.push(new_job);
                envelopes.push(Envelope {
                    batch_id: Some(deps.batch_id.clone()),
                    ..Envelope::new(id, job)
                });
            }
            Err(error) => deps.store.create_failed_job(&new_job, &error).await?,
        }
    }
    deps.store.create_jobs(&new_jobs).await?;
    deps.queue.push(envelopes).await?;
    Ok(())
}

/// A progress bar on a terminal, periodic lines otherwise.
struct Progress {
    bar: Option<ProgressBar>,
    quiet: bool,
    started: Instant,
    last_line: std::sync::Mutex<Instant>,
    ended: AtomicU64,
    failed: AtomicU64,
    total: AtomicU64,
    total_known: AtomicBool,
}

impl Progress {
    fn new(quiet: bool) -> Progress {
        Progress {
            bar: super::progress::bar(quiet),
            quiet,
            started: Instant::now(),
            last_line: std::sync::Mutex::new(Instant::now()),
            ended: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            total: AtomicU64::new(0),
            total_known: AtomicBool::new(false),
        }
    }

    /// Jobs recorded so far; `known` once the whole input is read (the bar appears then).
    fn set_total(&self, total: u64, known: bool) {
        self.total.store(total, Ordering::Relaxed);
        let newly_known = known && !self.total_known.swap(true, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            if newly_known {
                bar.set_style(super::progress::bar_style());
            }
            if !known {
                bar.tick();
            }
        }
        self.maybe_print_line();
    }

    fn ended(&self, job: &EndedJob) {
        self.ended.fetch_add(1, Ordering::Relaxed);
        if job.status != Status::Succeeded {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(bar) = &self.bar {
            bar.inc(1);
            bar.set_message(format!("{} failed", self.failed.load(Ordering::Relaxed)));
        }
    }

    fn maybe_print_line(&self) {
        if self.quiet || self.bar.is_some() {
            return;
        }
        let Ok(mut last) = self.last_line.lock() else {
            return;
        };
        if last.elapsed() < Duration::from_secs(5) {
            return;
        }
        *last = Instant::now();
        let ended = self.ended.load(Ordering::Relaxed);
        let rate = ended as f64 / self.started.elapsed().as_secs_f64().max(0.001);
        let total = self.total.load(Ordering::Relaxed);
        let failed = self.failed.load(Ordering::Relaxed);
        if self.total_known.load(Ordering::Relaxed) {
            eprintln!("trawl: {ended}/{total} ended ({rate:.0}/s), {failed} failed");
        } else {
            eprintln!("trawl: queued {total}, {ended} ended ({rate:.0}/s), {failed} failed");
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            super::progress::finish(bar);
        }
    }
}

/// What `trawl run` prints at the end, counted from the store.
#[derive(Debug, serde::Serialize)]
struct Summary {
    /// The batch the run recorded its jobs under.
    batch_id: String,
    /// Whether Ctrl-C stopped the run.
    interrupted: bool,
    /// Input URLs recorded.
    total: u64,
    /// Jobs that ended (any status).
    ended: u64,
    succeeded: u64,
    failed: u64,
    dead: u64,
    cancelled: u64,
    /// Jobs left queued or running (after Ctrl-C).
    pending: u64,
    /// Failed and dead jobs by error code, most frequent first.
    errors: Vec<ErrorCount>,
    /// Attempts beyond the first.
    retries: u64,
    elapsed_secs: f64,
    pages_per_sec: f64,
    /// With --out: the files written.
    #[serde(skip_serializing_if = "Option::is_none")]
    out: Option<OutFiles>,
    /// With --archive: what the archive pool did.
    #[serde(skip_serializing_if = "Option::is_none")]
    archived: Option<crate::archive::Stats>,
}

#[derive(Debug, serde::Serialize)]
struct ErrorCount {
    code: String,
    count: u64,
}

#[derive(Debug, serde::Serialize)]
struct OutFiles {
    jsonl: PathBuf,
    pages_dir: PathBuf,
    page_files: u64,
}

impl Summary {
    async fn read(
        store: &Store,
        batch_id: &str,
        elapsed: Duration,
        output: Option<&super::out::Output>,
        interrupted: bool,
        archived: Option<crate::archive::Stats>,
    ) -> anyhow::Result<Summary> {
        let counts = store.count_by_status(Some(batch_id)).await?;
        let count = |status: Status| {
            counts
                .iter()
                .find(|(s, _)| *s == status)
                .map_or(0, |(_, n)| *n)
        };
        let total: u64 = counts.iter().map(|(_, n)| n).sum();
        let ended = count(Status::Succeeded)
            + count(Status::Failed)
            + count(Status::Dead)
            + count(Status::Cancelled);
        let elapsed_secs = elapsed.as_secs_f64().max(0.001);
        let errors = store
            .count_errors(batch_id)
            .await?
            .into_iter()
            .map(|(code, count)| ErrorCount { code, count })
            .collect();
        Ok(Summary {
            batch_id: batch_id.to_owned(),
            interrupted,
            total,
            ended,
            succeeded: count(Status::Succeeded),
            failed: count(Status::Failed),
            dead: count(Status::Dead),
            cancelled: count(Status::Cancelled),
            pending: total - ended,
            errors,
            retries: store.count_retries(batch_id).await?,
            elapsed_secs,
            pages_per_sec: count(Status::Succeeded) as f64 / elapsed_secs,
            out: output.map(|output| OutFiles {
                jsonl: output.dir().join("pages.jsonl"),
                pages_dir: output.dir().join("pages"),
                page_files: output.files(),
            }),
            archived,
        })
    }

    /// URLs that did not succeed: failed, dead or cancelled (`--fail-on-error`).
    fn unsuccessful(&self) -> u64 {
        self.failed + self.dead + self.cancelled
    }

    fn print(&self) -> anyhow::Result<()> {
        outln!(
            "{} {}/{} urls in {:.1} s ({:.1} pages/s): {} succeeded, {} failed, {} dead",
            if self.interrupted {
                "interrupted after"
            } else {
                "done:"
            },
            self.ended,
            self.total,
            self.elapsed_secs,
            self.pages_per_sec,
            self.succeeded,
            self.failed,
            self.dead,
        )?;
        if !self.errors.is_empty() {
            let listed: Vec<String> = self
                .errors
                .iter()
                .map(|error| format!("{} {}", error.code, error.count))
                .collect();
            outln!("errors: {}", listed.join(", "))?;
        }
        if self.retries > 0 {
            outln!("retries: {}", self.retries)?;
        }
        if self
            .errors
            .iter()
            .any(|error| error.code == ErrorCode::BlockedDestination.as_str())
        {
            outln!("{}", super::BLOCKED_HINT)?;
        }
        if let Some(out) = &self.out {
            outln!(
                "wrote {} and {} page files in {}",
                out.jsonl.display(),
                out.page_files,
                out.pages_dir.display()
            )?;
        }
        if self.interrupted && self.pending > 0 {
            outln!(
                "{} jobs stay queued: `trawl serve` or `trawl work` on this data directory goes on with them",
                self.pending
            )?;
        }
        outln!(
            "batch {}; stored in the data directory, see `trawl read URL` and `trawl status`",
            self.batch_id
        )?;
        if let Some(stats) = &self.archived {
            outln!("archived: {stats}")?;
        }
        Ok(())
    }
}
