//! `trawl work`: worker pools only, no API. Meant for the distributed set-up, where many such
//! processes share the queue at `redis_url` and the store at `database_url`; on the embedded
//! files it works too (one machine). SIGTERM or SIGINT stop it gracefully: the pools stop
//! taking jobs and finish the running ones (up to `shutdown_timeout_secs`); jobs fetched
//! but not started go back to the queue, and what is still running after that is recovered
//! by the queue once this worker's heartbeat is missed. With a browser and `sessions.listen`
//! it also hosts agent sessions for API processes elsewhere (`App::host_sessions`).

use std::process::ExitCode;
use std::str::FromStr;

use anyhow::Context as _;

use crate::app::{App, Needs};
use crate::config::Config;

/// Arguments of `trawl work`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Pools to run and their sizes: `fetch=N` (jobs at once), `browse=N` (browser contexts
    /// at once, for render and browse jobs, and agent sessions when sessions.listen is set;
    /// 0 runs no browser) and `archive=1` (the archive
    /// pool into this machine's data directory; at most one per directory). Pools not named do
    /// not run [default: fetch=runner.concurrency].
    #[arg(long, value_name = "NAME=SIZE,...")]
    pub pools: Option<PoolSizes>,
    /// Allow private, loopback and link-local destinations (cloud metadata stays blocked)
    /// [config: ssrf.allow_private_network].
    #[arg(long)]
    pub allow_private_network: bool,
}

/// The sizes of the pools `trawl work` runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSizes {
    /// Fetch jobs at once (0: no fetch pool).
    pub fetch: usize,
    /// Archive pools (0 or 1).
    pub archive: usize,
    /// Browser contexts at once (0: no browser).
    pub browse: usize,
}

impl FromStr for PoolSizes {
    type Err = String;

    fn from_str(text: &str) -> Result<PoolSizes, String> {
        let mut sizes = PoolSizes {
            fetch: 0,
            archive: 0,
            browse: 0,
        };
        for part in text
            .split(',')
            .map(str::trim)
            .filter(|part| !part.is_empty())
        {
            let (name, size) = part
                .split_once('=')
                .ok_or_else(|| format!("{part:?} is not NAME=SIZE (e.g. fetch=64)"))?;
            let size: usize = size
                .trim()
                .parse()
                .map_err(|_| format!("pool size {size:?} is not a number"))?;
            match name.trim() {
                "fetch" => sizes.fetch = size,
                "browse" => sizes.browse = size,
                "archive" if size <= 1 => sizes.archive = size,
                "archive" => {
                    return Err(
                        "archive=1 at most: one archive pool writes a data directory's index"
                            .to_owned(),
                    );
                }
                other => {
                    return Err(format!(
                        "unknown pool {other:?} (known: fetch, browse, archive)"
                    ));
                }
            }
        }
        if sizes.browse > 0 && sizes.fetch == 0 {
            return Err(
                "browse=N needs fetch=M too: browser jobs are taken from the queue by the fetch \
                 pool's workers"
                    .to_owned(),
            );
        }
        if sizes.fetch == 0 && sizes.archive == 0 {
            return Err("no pool to run: name at least one, e.g. fetch=64".to_owned());
        }
        Ok(sizes)
    }
}

pub(super) async fn run(mut config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    let sizes = args.pools.unwrap_or(PoolSizes {
        fetch: config.runner.concurrency,
        archive: 0,
        browse: 0,
    });
    if sizes.browse > 0 {
        config.browse.max_contexts = sizes.browse;
    }
    if sizes.fetch > 0 {
        config.runner.concurrency = sizes.fetch;
    }
    if args.allow_private_network {
        config.ssrf.allow_private_network = true;
    }
    config.validate()?;
    // Checked before anything starts: hosting sessions needs this process's browser.
    if config.sessions.listen.is_some() && sizes.browse == 0 {
        return Err(crate::app::HostError::NoBrowser.into());
    }
    let mut app = App::build(
        &config,
        Needs {
            browser: sizes.browse > 0,
        },
    )
    .await?;
    if sizes.archive > 0 {
        app.start_archive(crate::archive::Stop::Now).context(
            "opening the archive (is another trawl archiving into this data directory?)",
        )?;
    }
    if sizes.fetch > 0 {
        app.start_pools();
    }
    let host = match &config.sessions.listen {
        Some(_) => Some(app.host_sessions().await?),
        None => None,
    };
    eprintln!(
        "trawl: working (fetch={}, browse={}, archive={}{}; queue: {}, store: {})",
        sizes.fetch,
        sizes.browse,
        sizes.archive,
        host.as_ref()
            .map(|url| format!("; hosting sessions at {url}"))
            .unwrap_or_default(),
        if config.redis_url.is_some() {
            "redis"
        } else {
            "embedded"
        },
        if config.database_url.is_some() {
            "database_url"
        } else {
            "embedded"
        },
    );

    super::shutdown_signal().await;
    eprintln!("trawl: shutting down");
    super::shut_down(app, config.shutdown_grace()).await;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_sizes_parse_and_bad_ones_are_refused() {
        assert_eq!(
            "fetch=64,archive=1".parse::<PoolSizes>(),
            Ok(PoolSizes {
                fetch: 64,
                archive: 1,
                browse: 0,
            })
        );
        assert_eq!(
            "fetch=8,browse=2".parse::<PoolSizes>(),
            Ok(PoolSizes {
                fetch: 8,
                archive: 0,
                browse: 2,
            })
        );
        assert_eq!(
            "archive=1".parse::<PoolSizes>(),
            Ok(PoolSizes {
                fetch: 0,
                archive: 1,
                browse: 0,
            })
        );
        assert!("fetch".parse::<PoolSizes>().is_err());
        assert!("fetch=x".parse::<PoolSizes>().is_err());
        assert!("archive=2".parse::<PoolSizes>().is_err());
        assert!("browse=2".parse::<PoolSizes>().is_err());
        assert!("teleport=2".parse::<PoolSizes>().is_err());
        assert!("fetch=0".parse::<PoolSizes>().is_err());
    }
}
