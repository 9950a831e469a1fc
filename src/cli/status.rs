//! `trawl status`: job counts by status, or the record of one job, batch or crawl (whichever
//! the id names), from the local store or a server.

use std::process::ExitCode;

use super::remote::{Remote, ServerArgs};
use crate::config::Config;
use crate::store::CrawlRecord;

/// Arguments of `trawl status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A job, batch or crawl id; without it, counts of all jobs by status (local store only).
    #[arg(value_name = "ID")]
    pub job_id: Option<String>,
    /// Print JSON (a job's record is always JSON).
    #[arg(long)]
    pub json: bool,
    /// Where to ask.
    #[command(flatten)]
    pub server: ServerArgs,
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(server) = &args.server.server {
        let Some(id) = &args.job_id else {
            anyhow::bail!(
                "with --server, give a job, batch or crawl id (counts by status come from the local store)"
            );
        };
        let remote = Remote::new(server, args.server.token.clone())?;
        // The id says nothing of what it names: a job, else a batch, else a crawl.
        for path in [
            format!("/v1/jobs/{id}"),
            format!("/v1/batches/{id}"),
            format!("/v1/crawls/{id}"),
        ] {
            match remote.call("GET", &path, None).await {
                Ok(record) => {
                    outln!("{}", serde_json::to_string_pretty(&record)?)?;
                    return Ok(ExitCode::SUCCESS);
                }
                Err(error) if error.to_string().contains(": not_found: ") => {}
                Err(error) => return Err(error),
            }
        }
        eprintln!("trawl: no job, batch or crawl {id} on {server}");
        return Ok(ExitCode::from(1));
    }
    let store = crate::app::open_store(&config).await?;
    let Some(id) = &args.job_id else {
        let counts = store.count_by_status(None).await?;
        if args.json {
            let counts: serde_json::Map<String, serde_json::Value> = counts
                .iter()
                .map(|(status, count)| (status.as_str().to_owned(), (*count).into()))
                .collect();
            outln!("{}", serde_json::Value::Object(counts))?;
            return Ok(ExitCode::SUCCESS);
        }
        if counts.is_empty() {
            outln!("no jobs")?;
        }
        for (status, count) in counts {
            outln!("{:<10} {count}", status.as_str())?;
        }
        return Ok(ExitCode::SUCCESS);
    };
    if let Some(job) = store.job(id).await? {
        outln!("{}", serde_json::to_string_pretty(&job)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(crawl) = store.crawl(id).await? {
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&crawl)?)?;
        } else {
            print_crawl(&crawl)?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(batch) = crate::api::jobs::batch_record(&store, id).await? {
        if args.json {
            outln!("{}", serde_json::to_string_pretty(&batch)?)?;
        } else {
            outln!(
                "batch {}: {} jobs, {}",
                batch.id,
                batch.total,
                if batch.ended { "ended" } else { "running" }
            )?;
            for (status, count) in &batch.counts {
                outln!("{status:<10} {count}")?;
            }
            if !batch.errors.is_empty() {
                let listed: Vec<String> = batch
                    .errors
                    .iter()
                    .map(|(code, n)| format!("{code} {n}"))
                    .collect();
                outln!("errors: {}", listed.join(", "))?;
            }
            outln!("its pages: trawl export --warc FILE --batch {id}")?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("trawl: no job, batch or crawl {id}");
    Ok(ExitCode::from(1))
}

fn print_crawl(crawl: &CrawlRecord) -> anyhow::Result<()> {
    let c = &crawl.counters;
    let status = serde_json::to_value(crawl.status)
        .ok()
        .and_then(|value| value.as_str().map(str::to_owned))
        .unwrap_or_default();
    outln!(
        "crawl {}: {status}, started {}{}",
        crawl.id,
        crawl.created_at,
        crawl
            .finished_at
            .as_deref()
            .map(|at| format!(", ended {at}"))
            .unwrap_or_default()
    )?;
    outln!(
        "pages: {} fetched, {} from cache, {} failed; urls: {} discovered, {} queued",
        c.fetched,
        c.cached,
        c.failed,
        c.discovered,
        c.queued
    )?;
    outln!(
        "skipped: {} out of scope, {} by robots.txt, {} too deep, {} over max_pages, {} duplicates",
        c.skipped_scope,
        c.skipped_robots,
        c.skipped_depth,
        c.skipped_limit,
        c.skipped_duplicate
    )?;
    outln!("its pages: trawl pages --crawl {}", crawl.id)?;
    Ok(())
}
