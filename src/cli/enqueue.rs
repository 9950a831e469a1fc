//! `trawl enqueue`: queue fetch jobs without waiting for them, into a running server's queue
//! (`--server URL`) or the local embedded queue (run by `trawl serve` on the same data
//! directory). Prints one `job_id<TAB>url` line per URL.

use std::process::ExitCode;

use anyhow::Context as _;
use trawl_workers::fetch;
use trawl_workers::job::{FetchJob, Format, Job};

use super::extract::FormatArg;
use super::remote::{Remote, ServerArgs};
use super::{UrlArgs, url_line};
use crate::app::{App, Needs};
use crate::config::Config;
use crate::queue::Envelope;
use crate::store::NewJob;

/// Arguments of `trawl enqueue`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The URLs to queue.
    #[command(flatten)]
    pub input: UrlArgs,
    /// Format of the extracted text.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: FormatArg,
    /// Archive each page once fetched (search index and WARC), by the server's archive pool.
    #[arg(long)]
    pub archive: bool,
    /// A webhook for the batch's events (with --server; the server needs webhooks.secret).
    #[arg(long, value_name = "URL")]
    pub webhook: Option<String>,
    /// Where to send the jobs.
    #[command(flatten)]
    pub server: ServerArgs,
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    args.input.require_some()?;
    let mut urls = args.input.urls.clone();
    match args.input.file.as_deref() {
        Some("-") => urls.extend(read_lines(std::io::stdin().lock())?),
        Some(path) => {
            let file = std::fs::File::open(path).with_context(|| format!("opening {path}"))?;
            urls.extend(read_lines(std::io::BufReader::new(file))?);
        }
        None => {}
    }
    if urls.is_empty() {
        anyhow::bail!("give URLs as arguments or with --file FILE (or --file - for stdin)");
    }
    let format = Format::from(args.format);
    let jobs: Vec<Job> = urls
        .iter()
        .map(|url| {
            Job::Fetch(FetchJob {
                format,
                archive: args.archive,
                ..FetchJob::new(url.clone())
            })
        })
        .collect();
    match &args.server.server {
        Some(server) => enqueue_remote(server, args, jobs).await,
        None => {
            if args.webhook.is_some() {
                anyhow::bail!("--webhook needs --server (webhooks are sent by the server)");
            }
            enqueue_local(config, jobs).await
        }
    }
}

async fn enqueue_remote(server: &str, args: &Args, jobs: Vec<Job>) -> anyhow::Result<ExitCode> {
    let remote = Remote::new(server, args.server.token.clone())?;
    for chunk in jobs.chunks(1_000) {
        let mut body = serde_json::json!({ "jobs": chunk });
        if let Some(webhook) = &args.webhook {
            body["webhook"] = webhook.clone().into();
        }
        let answer = remote.call("POST", "/v1/jobs", Some(body)).await?;
        for job in answer["jobs"].as_array().into_iter().flatten() {
            println!(
                "{}\t{}",
                job["id"].as_str().unwrap_or_default(),
                job["url"].as_str().unwrap_or_default()
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn enqueue_local(config: Config, jobs: Vec<Job>) -> anyhow::Result<ExitCode> {
    config.validate()?;
    let app = App::build(&config, Needs::default()).await?;
    let deps = app.deps().clone();
    // All or nothing, like the API: check every URL before recording any.
    for job in &jobs {
        fetch::check_url(&deps.fetch.client, job.url())
            .map_err(|error| anyhow::anyhow!("{}: {}", job.url(), error))?;
    }
    let mut new_jobs = Vec::with_capacity(jobs.len());
    let mut envelopes = Vec::with_capacity(jobs.len());
    for job in jobs {
        let id = ulid::Ulid::generate().to_string();
        new_jobs.push(NewJob::new(&id, &job, config.runner.max_attempts));
        envelopes.push(Envelope::new(id, job));
    }
    deps.store.create_jobs(&new_jobs).await?;
    for envelope in &envelopes {
        println!("{}\t{}", envelope.id, envelope.job.url());
    }
    deps.queue.push(envelopes).await?;
    super::shut_down(app, config.shutdown_grace()).await;
    Ok(ExitCode::SUCCESS)
}

fn read_lines(reader: impl std::io::BufRead) -> anyhow::Result<Vec<String>> {
    let mut urls = Vec::new();
    for line in reader.lines() {
        if let Some(url) = url_line(&line?) {
            urls.push(url.to_owned());
        }
    }
    Ok(urls)
}
