//! `trawl config`: prints the configuration in force (defaults < the user's trawl.toml <
//! ./trawl.toml < TRAWL_* env) as TOML, every key with its value (the unset ones as comments
//! at the end; a starting point for a trawl.toml), or as JSON with `--json`.

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
        // TOML cannot write an unset value: the keys left unset close the listing as comments.
        let unset: Vec<&str> = config
            .optional_keys()
            .into_iter()
            .filter(|(_, set)| !set)
            .map(|(key, _)| key)
            .collect();
        if !unset.is_empty() {
            outln!("\n# Unset (see the README's configuration table for what unset means):")?;
            for key in unset {
                outln!("# {key} =")?;
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
