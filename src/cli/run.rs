//! `trawl run`: the main job, embedded. Reads URLs (arguments, a file or stdin) as a stream,
//! records and enqueues them in chunks, runs the fetch pool in-process, follows the batch's
//! ended jobs in the store, writes `pages.jsonl` and one file per page with `--out`, shows
//! progress, and prints a summary. Memory stays bounded whatever the number of URLs: input is
//! read ahead at most `READ_AHEAD` jobs beyond what has ended.

use std::io::{IsTerminal as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::io::AsyncBufReadExt as _;
use trawl_workers::job::{FetchJob, Format, Job};
use trawl_workers::{fetch, web};

use super::extract::FormatArg;
use super::{UrlArgs, url_line};
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
    /// Send fetches through this proxy (repeatable: requests to one host stay on one proxy):
    /// http://, https://, socks5:// or socks5h:// URL, credentials allowed
    /// [config: proxy.urls].
    #[arg(long, value_name = "URL")]
    pub proxy: Vec<String>,
    /// Only fetch from these exact hosts (repeatable) [config: ssrf.allow_hosts].
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
}

/// Where input URLs come from.
enum Input {
    Args(Vec<String>),
    File(PathBuf),
    Stdin,
}

pub(super) async fn run(mut config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    apply_flags(&mut config, args);
    config.validate()?;
    args.input.require_some()?;
    let input = match args.input.file.as_deref() {
        Some("-") => Input::Stdin,
        Some(file) => Input::File(PathBuf::from(file)),
        None => Input::Args(args.input.urls.clone()),
    };
    let leading_urls = if matches!(input, Input::Args(_)) {
        Vec::new()
    } else {
        args.input.urls.clone()
    };
    let output = match &args.out {
        Some(dir) => Some(Output::create(dir, Format::from(args.format))?),
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

    let batch_id = ulid::Ulid::generate().to_string();
    let template = FetchJob {
        max_chars: args.max_chars,
        cache_ttl: args.cache_ttl,
        format: Format::from(args.format),
        archive: args.archive,
        render: args.render.into(),
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
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
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
        progress.set_total(counters.enqueued.load(Ordering::Relaxed));
        let all_read = counters.input_done.load(Ordering::Acquire);
        if all_read
            && counters.ended.load(Ordering::Relaxed) >= counters.enqueued.load(Ordering::Relaxed)
        {
            break;
        }
        if producer.is_finished() && !all_read {
            // The producer failed; its error is reported below.
            break;
        }
        if ended.is_empty() {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = &mut ctrl_c => {
                    interrupted = true;
                    break;
                }
            }
        }
    }
    producer.abort();
    let produced = producer.await;
    progress.finish();
    let grace = config.shutdown_grace();
    let archived = super::stop_pools(&mut app, grace, args.archive, args.quiet).await?;
    if let Ok(Err(error)) = produced {
        return Err(error.context("reading the input"));
    }
    if let Some(output) = output.as_mut() {
        output.flush()?;
    }
    print_summary(
        &store,
        &batch_id,
        started.elapsed(),
        output.as_ref(),
        interrupted,
    )
    .await?;
    if let Some(stats) = archived {
        println!("archived: {stats}");
    }
    super::shut_down(app, config.shutdown_grace()).await;
    Ok(if interrupted {
        ExitCode::from(130)
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
async fn produce(input: Input, leading: Vec<String>, deps: ProduceDeps) -> anyhow::Result<()> {
    let mut chunk: Vec<String> = Vec::with_capacity(CHUNK);
    let mut lines: Box<dyn futures_util::Stream<Item = std::io::Result<String>> + Send + Unpin> =
        match input {
            Input::Args(urls) => Box::new(futures_util::stream::iter(urls.into_iter().map(Ok))),
            Input::File(path) => {
                let file = tokio::fs::File::open(&path)
                    .await
                    .with_context(|| format!("opening {}", path.display()))?;
                Box::new(tokio_stream_lines(tokio::io::BufReader::new(file)))
            }
            Input::Stdin => Box::new(tokio_stream_lines(tokio::io::BufReader::new(
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

/// The parts of a stored fetch result that name a page file (borrowed where the JSON allows;
/// the rest, the text included, is skipped without being copied).
#[derive(serde::Deserialize)]
struct PageFile<'a> {
    #[serde(borrow)]
    final_url: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    content_type: std::borrow::Cow<'a, str>,
    #[serde(borrow)]
    content_hash: std::borrow::Cow<'a, str>,
}

/// The `--out` directory: pages.jsonl and one file per page.
struct Output {
    dir: PathBuf,
    format: Format,
    jsonl: std::io::BufWriter<std::fs::File>,
    files: u64,
}

impl Output {
    fn create(dir: &Path, format: Format) -> anyhow::Result<Output> {
        let pages = dir.join("pages");
        // pages.jsonl is replaced; page files of an earlier run are not deleted (they may be
        // someone's), so say they are there.
        let earlier = std::fs::read_dir(&pages)
            .map(|entries| entries.filter_map(Result::ok).count())
            .unwrap_or(0);
        if earlier > 0 {
            eprintln!(
                "trawl: {} already holds {earlier} file(s) from an earlier run; they are kept, \
                 and pages.jsonl lists this run's pages only",
                pages.display()
            );
        }
        std::fs::create_dir_all(&pages).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("pages.jsonl");
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Output {
            dir: dir.to_owned(),
            format,
            jsonl: std::io::BufWriter::new(file),
            files: 0,
        })
    }

    async fn write(&mut self, store: &Store, job: &EndedJob) -> anyhow::Result<()> {
        match (&job.result, &job.error) {
            (Some(result), _) if job.status == Status::Succeeded => {
                self.write_page_file(store, result).await?;
                // The stored result is compact JSON on one line: written as it is.
                writeln!(self.jsonl, "{result}")?;
            }
            (_, error) => {
                let error = error.clone().unwrap_or_else(|| {
                    trawl_workers::job::JobError::new(
                        trawl_workers::job::ErrorCode::Cancelled,
                        "the job was cancelled",
                    )
                });
                let line = serde_json::json!({ "url": job.url, "error": error });
                writeln!(self.jsonl, "{line}")?;
            }
        }
        Ok(())
    }

    async fn write_page_file(&mut self, store: &Store, result: &str) -> anyhow::Result<()> {
        let page: PageFile<'_> =
            serde_json::from_str(result).context("reading a stored job result")?;
        // The whole text, from the store (in memory: it was just written), rather than from
        // the result, where it may be truncated and would have to be unescaped.
        let text = store.shared_text(&page.content_hash).await?;
        let extension = match (self.format, page.content_type.as_ref()) {
            (_, "application/json") => "json",
            (_, "text/plain") => "txt",
            (Format::Markdown, _) => "md",
            (Format::Text, _) => "txt",
            (Format::Html, _) => "html",
        };
        let content_hash = &page.content_hash;
        let name = format!(
            "{}-{}.{extension}",
            slug(&page.final_url),
            &content_hash[..10.min(content_hash.len())]
        );
        let path = self.dir.join("pages").join(name);
        std::fs::write(&path, text.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        self.files += 1;
        Ok(())
    }

    fn flush(&mut self) -> anyhow::Result<()> {
        self.jsonl.flush()?;
        Ok(())
    }
}

/// A file-name-safe, readable form of a URL: host and path, at most 80 characters.
fn slug(url: &str) -> String {
    let without_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let mut slug = String::with_capacity(80);
    let mut dash = false;
    for c in without_scheme.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            slug.push(c.to_ascii_lowercase());
            dash = false;
        } else if !dash && !slug.is_empty() {
            slug.push('-');
            dash = true;
        }
        if slug.len() >= 80 {
            break;
        }
    }
    let slug = slug.trim_matches(['-', '.']).to_owned();
    if slug.is_empty() {
        "page".to_owned()
    } else {
        slug
    }
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
}

impl Progress {
    fn new(quiet: bool) -> Progress {
        let bar = (!quiet && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(
                    "{elapsed_precise} [{wide_bar}] {pos}/{len} {per_sec} {msg}",
                )
                .expect("the template is valid"),
            );
            bar
        });
        Progress {
            bar,
            quiet,
            started: Instant::now(),
            last_line: std::sync::Mutex::new(Instant::now()),
            ended: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            total: AtomicU64::new(0),
        }
    }

    fn set_total(&self, total: u64) {
        self.total.store(total, Ordering::Relaxed);
        if let Some(bar) = &self.bar {
            bar.set_length(total);
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
        eprintln!(
            "trawl: {ended}/{} ended ({rate:.0}/s), {} failed",
            self.total.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed)
        );
    }

    fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

async fn print_summary(
    store: &Store,
    batch_id: &str,
    elapsed: Duration,
    output: Option<&Output>,
    interrupted: bool,
) -> anyhow::Result<()> {
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
    let seconds = elapsed.as_secs_f64().max(0.001);
    println!(
        "{} {ended}/{total} urls in {seconds:.1} s ({:.1} pages/s): {} succeeded, {} failed, {} dead",
        if interrupted {
            "interrupted after"
        } else {
            "done:"
        },
        count(Status::Succeeded) as f64 / seconds,
        count(Status::Succeeded),
        count(Status::Failed),
        count(Status::Dead),
    );
    let errors = store.count_errors(batch_id).await?;
    if !errors.is_empty() {
        let listed: Vec<String> = errors
            .iter()
            .map(|(code, n)| format!("{code} {n}"))
            .collect();
        println!("errors: {}", listed.join(", "));
    }
    if let Some(output) = output {
        println!(
            "wrote {} and {} page files in {}",
            output.dir.join("pages.jsonl").display(),
            output.files,
            output.dir.join("pages").display()
        );
    }
    println!(
        "batch {batch_id}; stored in the data directory, see `trawl read URL` and `trawl status`"
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_safe_and_short() {
        assert_eq!(
            slug("https://Example.com/a/b?c=d#e"),
            "example.com-a-b-c-d-e"
        );
        assert_eq!(slug("https://x.test/"), "x.test");
        assert!(slug(&format!("https://x.test/{}", "a".repeat(500))).len() <= 80);
        assert_eq!(slug("https:///"), "page");
    }
}
