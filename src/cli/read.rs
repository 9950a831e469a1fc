//! `trawl read`: the most recent stored page of a URL, whole or by line range.

use std::process::ExitCode;

use crate::config::Config;
use crate::pages;

/// Arguments of `trawl read`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The URL (as requested or as finally fetched).
    pub url: String,
    /// First line to print, from 1.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub from: u64,
    /// Last line to print (inclusive, not before --from) [default: the last line].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub to: Option<u64>,
}

impl Args {
    /// Refuses a range that ends before it starts, as a usage error (exit status 2).
    pub(super) fn check(&self) -> Result<(), clap::Error> {
        match self.to {
            Some(to) if to < self.from => Err(clap::Error::raw(
                clap::error::ErrorKind::ArgumentConflict,
                format!(
                    "--to {to} is before --from {}: a range of lines ends at or after its start\n",
                    self.from
                ),
            )),
            _ => Ok(()),
        }
    }
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    let store = crate::app::open_store(&config).await?;
    let Some(range) = pages::read(&store, &args.url, args.from, args.to).await? else {
        eprintln!("trawl: no stored page for {}", args.url);
        return Ok(ExitCode::from(1));
    };
    eprintln!(
        "# {} (page {}, fetched {}) lines {}-{} of {}",
        range.url, range.page_id, range.fetched_at, range.from, range.to, range.total_lines
    );
    for line in &range.lines {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}
