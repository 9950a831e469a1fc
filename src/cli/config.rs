//! `trawl config`: prints the configuration in force (defaults < the user's trawl.toml <
//! ./trawl.toml < TRAWL_* env) as TOML, every key with its value (a starting point for a
//! trawl.toml), or as JSON with `--json`.

use std::process::ExitCode;

use crate::config::Config;

/// Arguments of `trawl config`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print it as JSON instead of TOML.
    #[arg(long)]
    pub json: bool,
}

pub(super) fn run(config: &Config, args: &Args) -> anyhow::Result<ExitCode> {
    config.validate()?;
    if args.json {
        super::print_json(config)?;
    } else {
        out!("{}", toml::to_string_pretty(config)?)?;
    }
    Ok(ExitCode::SUCCESS)
}
