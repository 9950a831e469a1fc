//! `trawl web-search "query"` and `trawl web-images "query"`: the web search
//! (`web_search::search`, `web_search::images`) from the command line, the results printed as
//! a numbered list or as JSON. With `--fetch-top N` the search runs as a search job in this
//! process's pools (its top N results fetched as jobs of its batch, archived with
//! `--archive`), and the command waits for the batch.
//!
//! Exit status: 0 with results, 1 without (like `trawl search`), 2 on an error.

use std::process::ExitCode;
use std::time::Duration;

use trawl_workers::job::{ImagesJob, ImagesResult, Job, Provider, SearchJob, SearchResult};

use crate::app::{App, Needs};
use crate::archive::Stop;
use crate::config::Config;
use crate::queue::Envelope;
use crate::store::{NewBatch, NewJob, Status};
use crate::tenant::{Scope, Tenant};
use crate::web_search::{self, SearchError};

/// The providers as the command line names them.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ProviderArg {
    /// SearxNG when search.searxng.url is set, else DuckDuckGo (falling over).
    Auto,
    /// The SearxNG instance at search.searxng.url.
    Searxng,
    /// DuckDuckGo's HTML results.
    Duckduckgo,
    /// DuckDuckGo's instant answers.
    Instant,
}

impl From<ProviderArg> for Provider {
    fn from(arg: ProviderArg) -> Provider {
        match arg {
            ProviderArg::Auto => Provider::Auto,
            ProviderArg::Searxng => Provider::Searxng,
            ProviderArg::Duckduckgo => Provider::Duckduckgo,
            ProviderArg::Instant => Provider::Instant,
        }
    }
}

/// Arguments of `trawl web-search`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// What to search for.
    pub query: String,
    /// The provider.
    #[arg(long, value_enum, default_value = "auto")]
    pub provider: ProviderArg,
    /// Results printed, after duplicates are dropped (1–50).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub limit: usize,
    /// Also fetch the top N results (as jobs of one batch, run here), and wait for them.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub fetch_top: usize,
    /// Archive the fetched results (with --fetch-top).
    #[arg(long)]
    pub archive: bool,
    /// Print the whole result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Arguments of `trawl web-images`.
#[derive(Debug, clap::Args)]
pub struct ImagesArgs {
    /// What to search for.
    pub query: String,
    /// Images printed (1–50).
    #[arg(long, default_value_t = 10, value_name = "N")]
    pub limit: usize,
    /// Print the whole result as JSON.
    #[arg(long)]
    pub json: bool,
}

/// How long the command waits for its batch at most, between progress checks.
const POLL: Duration = Duration::from_millis(100);

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    config.validate()?;
    let request = SearchJob {
        provider: args.provider.into(),
        limit: Some(args.limit),
        fetch_top: args.fetch_top,
        archive: args.archive,
        ..SearchJob::new(&args.query)
    };
    let mut app = App::build(&config, Needs { browser: false }).await?;
    let deps = app.deps().clone();
    let grace = config.shutdown_grace();
    if let Err(error) = web_search::check(&deps, &request) {
        super::shut_down(app, grace).await;
        return Ok(print_error(&error));
    }
    if request.fetch_top == 0 {
        let answer = web_search::search(&deps, &Scope::of(Tenant::default()), request).await;
        super::shut_down(app, grace).await;
        return match answer {
            Ok(result) => print_search(&result, args.json),
            Err(error) => Ok(print_error(&error)),
        };
    }

    // A search job with its batch, run by this process's pools.
    let batch_id = ulid::Ulid::generate().to_string();
    let job_id = ulid::Ulid::generate().to_string();
    let job = Job::Search(request);
    let batch = NewBatch {
        id: batch_id.clone(),
        webhook: None,
        total: 1,
        tenant: Tenant::default(),
    };
    let new_job = NewJob {
        batch_id: Some(batch_id.clone()),
        ..NewJob::new(&job_id, &job, deps.config.max_attempts)
    };
    deps.store.submit(Some(&batch), &[new_job]).await?;
    deps.queue
        .push(vec![Envelope {
            batch_id: Some(batch_id.clone()),
            ..Envelope::new(job_id.clone(), job)
        }])
        .await?;
    if args.archive {
        app.start_archive(Stop::Drain)?;
    }
    app.start_pools();
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let finished = loop {
        let counts = deps.store.count_by_status(Some(&batch_id)).await?;
        let searched = deps
            .store
            .job(&job_id)
            .await?
            .is_some_and(|record| record.status.is_terminal());
        let open = counts
            .iter()
            .any(|(status, count)| *count > 0 && !status.is_terminal());
        if searched && !open {
            break true;
        }
        tokio::select! {
            _ = tokio::time::sleep(POLL) => {}
            _ = &mut ctrl_c => break false,
        }
    };
    super::stop_pools(&mut app, grace, args.archive && finished, true).await?;
    let record = deps.store.job(&job_id).await?;
    let counts = deps.store.count_by_status(Some(&batch_id)).await?;
    super::shut_down(app, grace).await;
    if !finished {
        eprintln!("trawl: stopped waiting; batch {batch_id} stays queued");
        return Ok(ExitCode::from(130));
    }
    let Some(record) = record else {
        anyhow::bail!("the search job {job_id} is missing from the store");
    };
    match (record.status, record.result) {
        (Status::Succeeded, Some(result)) => {
            let result: SearchResult = serde_json::from_value(result)?;
            let code = print_search(&result, args.json)?;
            if !args.json {
                let summary: Vec<String> = counts
                    .iter()
                    .filter(|(_, count)| *count > 0)
                    .map(|(status, count)| format!("{count} {}", status.as_str()))
                    .collect();
                eprintln!(
                    "trawl: batch {batch_id}: {} (the search and its {} fetches)",
                    summary.join(", "),
                    result.fetch_jobs.len()
                );
            }
            Ok(code)
        }
        (_, _) => {
            let error = record.error.unwrap_or_else(|| {
                trawl_workers::job::JobError::new(
                    trawl_workers::job::ErrorCode::Internal,
                    "the search job ended without a result",
                )
            });
            Ok(print_error(&SearchError::Failed(error)))
        }
    }
}

pub(super) async fn images(config: Config, args: &ImagesArgs) -> anyhow::Result<ExitCode> {
    config.validate()?;
    let request = ImagesJob {
        limit: Some(args.limit),
        ..ImagesJob::new(&args.query)
    };
    let app = App::build(&config, Needs { browser: false }).await?;
    let deps = app.deps().clone();
    let answer = web_search::images(&deps, &Scope::of(Tenant::default()), request).await;
    super::shut_down(app, config.shutdown_grace()).await;
    match answer {
        Ok(result) => print_images(&result, args.json),
        Err(error) => Ok(print_error(&error)),
    }
}

fn print_error(error: &SearchError) -> ExitCode {
    match error {
        SearchError::Invalid(message) => eprintln!("trawl: {message}"),
        SearchError::Refused(error) | SearchError::Failed(error) => {
            eprintln!("trawl: {}: {}", error.code, error.message);
        }
    }
    ExitCode::from(2)
}

fn print_search(result: &SearchResult, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        outln!("{}", serde_json::to_string(result)?)?;
    } else {
        for answer in &result.answers {
            outln!("answer: {answer}")?;
        }
        if let Some(instant) = &result.instant {
            for text in [&instant.answer, &instant.abstract_text, &instant.definition]
                .into_iter()
                .flatten()
            {
                outln!("{text}")?;
            }
        }
        for hit in &result.hits {
            outln!("{}. {}", hit.rank, hit.title)?;
            outln!("   {}", hit.url)?;
            if !hit.snippet.is_empty() {
                outln!("   {}", hit.snippet)?;
            }
        }
        let cached = if result.cached { ", cached" } else { "" };
        eprintln!(
            "trawl: {} results from {}{cached}",
            result.hits.len(),
            result.provider.as_str()
        );
    }
    Ok(if result.hits.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

fn print_images(result: &ImagesResult, json: bool) -> anyhow::Result<ExitCode> {
    if json {
        outln!("{}", serde_json::to_string(result)?)?;
    } else {
        for hit in &result.hits {
            let size = match (hit.width, hit.height) {
                (Some(width), Some(height)) => format!(" ({width}x{height})"),
                _ => String::new(),
            };
            outln!("{}. {}{size}", hit.rank, hit.title)?;
            outln!("   {}", hit.image)?;
            if let Some(page) = &hit.source_page {
                outln!("   on {page}")?;
            }
        }
    }
    Ok(if result.hits.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
