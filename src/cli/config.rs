//! `trawl config`: prints the configuration in force (defaults < trawl.toml < TRAWL_* env)
//! as TOML, every key with its value (the unset ones as comments at the end); a starting point
//! for a trawl.toml.

use std::process::ExitCode;

use crate::config::Config;

pub(super) fn run(config: &Config) -> anyhow::Result<ExitCode> {
    config.validate()?;
    print!("{}", toml::to_string_pretty(config)?);
    // TOML cannot write an unset value: the keys left unset close the listing as comments.
    let unset: Vec<&str> = config
        .optional_keys()
        .into_iter()
        .filter(|(_, set)| !set)
        .map(|(key, _)| key)
        .collect();
    if !unset.is_empty() {
        println!("\n# Unset (see the README's configuration table for what unset means):");
        for key in unset {
            println!("# {key} =");
        }
    }
    Ok(ExitCode::SUCCESS)
}
