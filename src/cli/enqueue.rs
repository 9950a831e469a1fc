//! `trawl enqueue`: queue fetch jobs without waiting for them, into a running server's queue
//! (`--server URL`) or the local embedded queue (run by `trawl serve` on the same data
//! directory). Prints one `job_id<TAB>url` line per URL.

use std::process::ExitCode;

use anyhow::Context as _;
use trawl_workers::fetch;
use trawl_workers::job::{FetchJob, Format, Job};

use super::extract::FormatArg;
use super::remote::{Remote, ServerArgs};
use super::{UrlArgs, UrlList, url_line};
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
    /// Allow private, loopback and link-local destinations in the local queue's check (cloud
    /// metadata stays blocked) [config: ssrf.allow_private_network]. The process that runs
    /// the queue fetches under its own policy. Not with --server: the server's policy decides.
    #[arg(long)]
    pub allow_private_network: bool,
    /// Only queue URLs of these exact hosts (repeatable) [config: ssrf.allow_hosts]; not
    /// with --server.
    #[arg(long, value_name = "HOST")]
    pub allow_host: Vec<String>,
    /// Never queue URLs of these hosts; *.example.com also blocks example.com and its
    /// subdomains (repeatable) [config: ssrf.block_hosts]; not with --server.
    #[arg(long, value_name = "PATTERN")]
    pub block_host: Vec<String>,
    /// Where to send the jobs.
    #[command(flatten)]
    pub server: ServerArgs,
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    let (mut urls, list) = args.input.sources()?;
    match list {
        UrlList::Stdin => urls.extend(read_lines(std::io::stdin().lock())?),
        UrlList::File(path) => {
            let file = std::fs::File::open(&path)
                .with_context(|| format!("opening {}", path.display()))?;
            urls.extend(read_lines(std::io::BufReader::new(file))?);
        }
        UrlList::None => {}
    }
    if urls.is_empty() {
        anyhow::bail!("the list holds no URL");
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
        Some(server) => {
            if args.allow_private_network
                || !args.allow_host.is_empty()
                || !args.block_host.is_empty()
            {
                anyhow::bail!(
                    "with --server, the server's policy decides which destinations it fetches \
                     (its ssrf.* settings, or `trawl serve --allow-private-network`); \
                     --allow-private-network, --allow-host and --block-host apply to the local queue"
                );
            }
            enqueue_remote(server, args, jobs).await
        }
        None => {
            if args.webhook.is_some() {
                anyhow::bail!("--webhook needs --server (webhooks are sent by the server)");
            }
            let mut config = config;
            if args.allow_private_network {
                config.ssrf.allow_private_network = true;
            }
            config
                .ssrf
                .allow_hosts
                .extend(args.allow_host.iter().cloned());
            config
                .ssrf
                .block_hosts
                .extend(args.block_host.iter().cloned());
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
            outln!(
                "{}\t{}",
                job["id"].as_str().unwrap_or_default(),
                job["url"].as_str().unwrap_or_default()
            )?;
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
        fetch::check_url(&deps.fetch.client, job.url()).map_err(|error| {
            if error.code == trawl_workers::job::ErrorCode::BlockedDestination {
                anyhow::anyhow!("{}: {}\n{}", job.url(), error, super::BLOCKED_HINT)
            } else {
                anyhow::anyhow!("{}: {}", job.url(), error)
            }
        })?;
    }
    let mut new_jobs = Vec::with_capacity(jobs.len());
    let mut envelopes = Vec::with_capacity(jobs.len());
    for job in jobs {
        let id = ulid::Ulid::generate().to_string();
        new_jobs.push(NewJob::new(&id, &job, config.runner.max_attempts));
        envelopes.push(Envelope::new(id, job));
    }
    deps.store.create_jobs(&new_jobs).await?;
    let queued: Vec<(String, String)> = envelopes
        .iter()
        .map(|envelope| (envelope.id.clone(), envelope.job.url().to_owned()))
        .collect();
    deps.queue.push(envelopes).await?;
    // Printed once queued: a closed standard output cannot leave jobs recorded but unqueued.
    for (id, url) in &queued {
        outln!("{id}\t{url}")?;
    }
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
