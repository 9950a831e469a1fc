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
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    let store = crate::app::open_store(&config).await?;
    // The command line acts as the default tenant.
    let scope = crate::tenant::Scope::default();
    let Some(range) = pages::read(&store, &scope, &args.url, args.from, args.to).await? else {
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
