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
    #[arg(long, default_value_t = 1)]
    pub from: u64,
    /// Last line to print (inclusive) [default: the last line].
    #[arg(long)]
    pub to: Option<u64>,
    /// Print the range as JSON (url, page_id, fetched_at, from, to, total_lines, lines), the
    /// object GET /v1/pages answers.
    #[arg(long)]
    pub json: bool,
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    let store = crate::app::open_store(&config).await?;
    let Some(range) = pages::read(&store, &args.url, args.from, args.to).await? else {
        eprintln!("trawl: no stored page for {}", args.url);
        return Ok(ExitCode::from(1));
    };
    if args.json {
        super::print_json(&range)?;
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!(
        "# {} (page {}, fetched {}) lines {}-{} of {}",
        range.url, range.page_id, range.fetched_at, range.from, range.to, range.total_lines
    );
    for line in &range.lines {
        outln!("{line}")?;
    }
    Ok(ExitCode::SUCCESS)
}
