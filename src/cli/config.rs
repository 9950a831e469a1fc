//! `trawl config`: prints the configuration in force (defaults < trawl.toml < TRAWL_* env)
//! as TOML, every key with its value; a starting point for a trawl.toml.

use std::process::ExitCode;

use crate::config::Config;

pub(super) fn run(config: &Config) -> anyhow::Result<ExitCode> {
    config.validate()?;
    print!("{}", toml::to_string_pretty(config)?);
    Ok(ExitCode::SUCCESS)
}
