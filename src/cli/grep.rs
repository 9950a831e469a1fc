//! `trawl grep URL PATTERN`: the lines of the newest stored page of a URL that match a regular
//! expression, with context lines, like `grep -n` (the command line's `POST /v1/pages/grep`,
//! through the same `pages::grep_page`).

use std::process::ExitCode;

use crate::config::Config;
use crate::pages::{self, GrepError, GrepLimits, GrepQuery};

/// Arguments of `trawl grep`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The page's URL (as requested or as finally fetched).
    pub url: String,
    /// A regular expression (Rust syntax; no backreferences or look-around).
    pub pattern: String,
    /// Lines of context before and after each match (at most 20).
    #[arg(short = 'C', long, default_value_t = 2, value_name = "N")]
    pub context: usize,
    /// Match case-insensitively.
    #[arg(short = 'i', long)]
    pub ignore_case: bool,
    /// Most matching lines reported (at most 200).
    #[arg(short = 'm', long, default_value_t = 50, value_name = "N")]
    pub max_matches: usize,
    /// Print the answer as JSON (as `POST /v1/pages/grep` gives it).
    #[arg(long)]
    pub json: bool,
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    let store = crate::app::open_store(&config).await?;
    let limits = GrepLimits {
        max_output_chars: config.api.grep_max_output_chars,
        ..GrepLimits::default()
    };
    let query = GrepQuery {
        context: args.context,
        max_matches: args.max_matches,
    };
    let found = pages::grep_page(
        &store,
        // The command line acts as the default tenant, like `trawl read`.
        &crate::tenant::Scope::default(),
        &args.url,
        &args.pattern,
        args.ignore_case,
        query,
        limits,
    )
    .await;
    store.close().await;
    let found = match found {
        Ok(found) => found,
        Err(GrepError::Pattern(error)) => {
            eprintln!("trawl: {error}");
            return Ok(ExitCode::from(2));
        }
        Err(error @ GrepError::NoPage(_)) => {
            eprintln!("trawl: {error} (fetch it first: trawl fetch URL)");
            return Ok(ExitCode::from(1));
        }
        Err(error) => return Err(error.into()),
    };
    if args.json {
        outln!("{}", serde_json::to_string(&found)?)?;
    } else {
        for (n, block) in found.result.blocks.iter().enumerate() {
            if n > 0 {
                outln!("--")?;
            }
            for line in &block.lines {
                let mark = if line.matched { ':' } else { '-' };
                outln!("{}{mark}{}", line.number, line.text)?;
            }
        }
        if found.result.truncated {
            eprintln!("trawl: output cut at a limit (matches or characters)");
        }
    }
    // Like grep: 1 when nothing matched.
    Ok(if found.result.matches == 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
