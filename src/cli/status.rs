//! `trawl status`: job counts by status, or one job's record as JSON.

use std::process::ExitCode;

use super::remote::{Remote, ServerArgs};
use crate::config::Config;

/// Arguments of `trawl status`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// A job id; without it, counts of all jobs by status (local store only).
    pub job_id: Option<String>,
    /// Where to ask.
    #[command(flatten)]
    pub server: ServerArgs,
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(server) = &args.server.server {
        let Some(id) = &args.job_id else {
            anyhow::bail!(
                "with --server, give a job id (counts by status come from the local store)"
            );
        };
        let remote = Remote::new(server, args.server.token.clone())?;
        let job = remote.call("GET", &format!("/v1/jobs/{id}"), None).await?;
        outln!("{}", serde_json::to_string_pretty(&job)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let store = crate::app::open_store(&config).await?;
    match &args.job_id {
        Some(id) => match store.job(id).await? {
            Some(job) => {
                outln!("{}", serde_json::to_string_pretty(&job)?)?;
                Ok(ExitCode::SUCCESS)
            }
            None => {
                eprintln!("trawl: no job {id}");
                Ok(ExitCode::from(1))
            }
        },
        None => {
            let counts = store.count_by_status(None).await?;
            if counts.is_empty() {
                outln!("no jobs")?;
            }
            for (status, count) in counts {
                outln!("{:<10} {count}", status.as_str())?;
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}
