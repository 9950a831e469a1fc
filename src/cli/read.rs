//! `trawl read`: the most recent stored page of a URL, by line range, at most
//! `api.read_max_chars` characters at a time (the next range is named on stderr).

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
    /// Most characters of lines printed; 0 prints the whole range
    /// [config: api.read_max_chars, default: 8000].
    #[arg(long, value_name = "N")]
    pub max_chars: Option<usize>,
    /// Print the range as JSON (url, page_id, fetched_at, from, to, total_lines, lines), the
    /// object GET /v1/pages answers.
    #[arg(long)]
    pub json: bool,
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
    // The command line acts as the default tenant.
    let scope = crate::tenant::Scope::default();
    let max_chars = args.max_chars.unwrap_or(config.api.read_max_chars);
    let Some(range) = pages::read(&store, &scope, &args.url, args.from, args.to, max_chars).await?
    else {
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
    if let Some(next) = range.next_from {
        let cut = if range.truncated {
            format!(" (cut at {max_chars} characters)")
        } else {
            String::new()
        };
        eprintln!(
            "# next{cut}: trawl read {} --from {next}",
            shell_word(&args.url)
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// A URL as one shell word: quoted when it holds characters a shell would read.
fn shell_word(url: &str) -> String {
    if url
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-._~:/?=%+,@".contains(c))
    {
        url.to_owned()
    } else {
        format!("'{}'", url.replace('\'', r"'\''"))
    }
}
