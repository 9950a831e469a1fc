//! The bench's own view of the queue's backend, beside trawl's queue layer: job counts, Redis
//! memory, CPU and command statistics, what a run leaves behind and what all runs leave. It
//! only reads (and resets Redis' statistics); it does not push or run jobs.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr as _;
use std::time::Duration;

use apalis_redis::ConnectionManager;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool, SqlitePoolOptions};
use trawl::queue::fetch_queue_name;

use crate::{NAMESPACE, Result};

/// The bench's own view of the backend, beside trawl's queue: counts, memory, leftovers.
pub(crate) enum Probe {
    Redis {
        connection: ConnectionManager,
        config: apalis_redis::Config,
        browse_config: apalis_redis::Config,
    },
    Sqlite {
        pool: SqlitePool,
    },
}

impl Probe {
    pub(crate) async fn redis(url: &str) -> Result<Probe> {
        let connection = apalis_redis::connect(url)
            .await
            .map_err(|error| format!("connecting to redis: {error}"))?;
        let config = |name: String| apalis_redis::Config::default().queue(name);
        Ok(Probe::Redis {
            connection,
            config: config(fetch_queue_name(NAMESPACE)),
            browse_config: config(trawl::queue::browse_queue_name(NAMESPACE)),
        })
    }

    /// A lazy pool on the queue file (opened once `Queue::open` has created it).
    pub(crate) fn sqlite(path: &Path) -> Probe {
        let options = SqliteConnectOptions::from_str(&format!("sqlite://{}", path.display()))
            .unwrap()
            .busy_timeout(Duration::from_secs(30));
        Probe::Sqlite {
            pool: SqlitePoolOptions::new()
                .max_connections(1)
                .connect_lazy_with(options),
        }
    }

    pub(crate) async fn close(&self) {
        if let Probe::Sqlite { pool } = self {
            pool.close().await;
        }
    }

    /// The Redis server's `used_memory`; `None` on SQLite.
    pub(crate) async fn used_memory(&self) -> Result<Option<u64>> {
        Ok(self
            .info("memory")
            .await?
            .and_then(|info| info_field(&info, "used_memory")?.parse().ok()))
    }

    /// The Redis server's `INFO {section}`; `None` on SQLite.
    pub(crate) async fn info(&self, section: &str) -> Result<Option<String>> {
        let Probe::Redis { connection, .. } = self else {
            return Ok(None);
        };
        ::redis::cmd("INFO")
            .arg(section)
            .query_async(&mut connection.clone())
            .await
            .map(Some)
            .map_err(|error| format!("INFO {section}: {error}"))
    }

    /// `used_memory` and what it is made of (INFO memory, DBSIZE); `None` on SQLite.
    pub(crate) async fn memory_breakdown(&self) -> Result<Option<String>> {
        let (Some(info), Probe::Redis { connection, .. }) = (self.info("memory").await?, self)
        else {
            return Ok(None);
        };
        let keys: u64 = ::redis::cmd("DBSIZE")
            .query_async(&mut connection.clone())
            .await
            .map_err(|error| format!("DBSIZE: {error}"))?;
        let field = |name: &str| info_field(&info, name).unwrap_or("?").to_owned();
        Ok(Some(format!(
            "used_memory {} B (dataset {} B, overhead {} B, scripts {} B for {} cached scripts), \
             {keys} keys",
            field("used_memory"),
            field("used_memory_dataset"),
            field("used_memory_overhead"),
            field("used_memory_scripts"),
            field("number_of_cached_scripts"),
        )))
    }

    /// Resets Redis' command statistics (our own server); nothing on SQLite.
    pub(crate) async fn reset_stats(&self) -> Result<()> {
        if let Probe::Redis { connection, .. } = self {
            let _: () = ::redis::cmd("CONFIG")
                .arg("RESETSTAT")
                .query_async(&mut connection.clone())
                .await
                .map_err(|error| format!("CONFIG RESETSTAT: {error}"))?;
        }
        Ok(())
    }

    /// The Redis server's CPU time so far (INFO cpu, user + system), in seconds.
    pub(crate) async fn server_cpu_secs(&self) -> Result<Option<f64>> {
        let Some(info) = self.info("cpu").await? else {
            return Ok(None);
        };
        let field = |name: &str| -> Option<f64> { info_field(&info, name)?.parse().ok() };
        Ok(field("used_cpu_user")
            .zip(field("used_cpu_sys"))
            .map(|(user, system)| user + system))
    }

    /// The commands Redis spent most time on since the last reset (INFO commandstats).
    pub(crate) async fn command_stats(&self) -> Result<Option<String>> {
        let Some(info) = self.info("commandstats").await? else {
            return Ok(None);
        };
        let mut commands: Vec<(String, u64, u64)> = info
            .lines()
            .filter_map(|line| {
                let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
                let stat = |key: &str| -> Option<u64> {
                    stats
                        .split(',')
                        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))?
                        .parse()
                        .ok()
                };
                Some((name.to_owned(), stat("calls")?, stat("usec")?))
            })
            .collect();
        commands.sort_by_key(|(_, _, usec)| std::cmp::Reverse(*usec));
        Ok(Some(
            commands
                .iter()
                .take(3)
                .map(|(name, calls, usec)| {
                    format!(
                        "{name} {calls} calls {:.0} µs/call",
                        *usec as f64 / (*calls).max(1) as f64
                    )
                })
                .collect::<Vec<_>>()
                .join(", "),
        ))
    }

    /// How many keys, and bytes (MEMORY USAGE), are under the namespace; `None` on SQLite.
    pub(crate) async fn namespace_keys(&self) -> Result<Option<(u64, u64)>> {
        let Probe::Redis { connection, .. } = self else {
            return Ok(None);
        };
        let mut connection = connection.clone();
        let keys = scan_keys(&mut connection, &format!("{NAMESPACE}:*")).await?;
        let mut bytes = 0;
        for key in &keys {
            bytes += memory_usage(&mut connection, key).await;
        }
        Ok(Some((keys.len() as u64, bytes)))
    }

    /// Jobs waiting to be taken (Redis: scheduled + active; SQLite: `Pending` rows).
    pub(crate) async fn backlog(&self) -> Result<u64> {
        match self {
            Probe::Redis {
                connection, config, ..
            } => {
                let (scheduled, active): (u64, u64) = ::redis::pipe()
                    .cmd("ZCARD")
                    .arg(config.scheduled_jobs_set())
                    .cmd("LLEN")
                    .arg(config.active_jobs_list())
                    .query_async(&mut connection.clone())
                    .await
                    .map_err(|error| format!("counting the backlog: {error}"))?;
                Ok(scheduled + active)
            }
            Probe::Sqlite { pool } => sqlite_count(pool, Some("Pending")).await,
        }
    }

    /// Jobs acknowledged and not yet pruned (Redis: the done set; SQLite: `Done` rows).
    pub(crate) async fn ended(&self) -> Result<u64> {
        match self {
            Probe::Redis {
                connection, config, ..
            } => ::redis::cmd("SCARD")
                .arg(config.done_jobs_set())
                .query_async(&mut connection.clone())
                .await
                .map_err(|error| format!("counting done jobs: {error}")),
            Probe::Sqlite { pool } => sqlite_count(pool, Some("Done")).await,
        }
    }

    /// What is left of jobs in the queue after a run (empty when it is clean).
    pub(crate) async fn left_in_queue(&self) -> Result<Vec<String>> {
        let mut left = Vec::new();
        match self {
            Probe::Redis {
                connection,
                config,
                browse_config,
            } => {
                let mut connection = connection.clone();
                for config in [config, browse_config] {
                    let counts: [(&str, String, &str); 6] = [
                        ("active", config.active_jobs_list(), "LLEN"),
                        ("scheduled", config.scheduled_jobs_set(), "ZCARD"),
                        ("done", config.done_jobs_set(), "SCARD"),
                        ("dead", config.dead_jobs_set(), "SCARD"),
                        ("failed", config.failed_jobs_set(), "ZCARD"),
                        ("data", config.job_data_hash(), "HLEN"),
                    ];
                    for (what, key, command) in counts {
                        // `failed` may be of another type in another apalis version.
                        let count: u64 = ::redis::cmd(command)
                            .arg(&key)
                            .query_async(&mut connection)
                            .await
                            .unwrap_or(0);
                        if count > 0 {
                            left.push(format!("{count} in {what} ({key})"));
                        }
                    }
                    let metas =
                        scan_keys(&mut connection, &format!("{}:*", config.job_meta_hash()))
                            .await?;
                    if !metas.is_empty() {
                        left.push(format!("{} task metadata hashes", metas.len()));
                    }
                    let mut inflight = 0_u64;
                    for key in scan_keys(
                        &mut connection,
                        &format!("{}:*", config.inflight_jobs_set()),
                    )
                    .await?
                    {
                        inflight += ::redis::cmd("SCARD")
                            .arg(&key)
                            .query_async::<u64>(&mut connection)
                            .await
                            .unwrap_or(0);
                    }
                    if inflight > 0 {
                        left.push(format!("{inflight} in in-flight sets"));
                    }
                }
            }
            Probe::Sqlite { pool } => {
                let rows: Vec<(String, i64)> =
                    sqlx::query_as("SELECT status, COUNT(*) FROM Jobs GROUP BY status")
                        .fetch_all(pool)
                        .await
                        .map_err(|error| format!("counting queue rows: {error}"))?;
                for (status, count) in rows {
                    left.push(format!("{count} {status} rows"));
                }
            }
        }
        Ok(left)
    }

    /// Everything the queue keeps after all runs: Redis keys under the namespace grouped by
    /// pattern (ids and worker names as `*`), or SQLite rows per table.
    pub(crate) async fn remains(&self) -> Result<String> {
        match self {
            Probe::Redis { connection, .. } => {
                let mut connection = connection.clone();
                let keys = scan_keys(&mut connection, &format!("{NAMESPACE}:*")).await?;
                let mut patterns: BTreeMap<String, (u64, u64)> = BTreeMap::new();
                for key in &keys {
                    let pattern = key
                        .split(':')
                        .map(|part| {
                            if part.starts_with("trawl-")
                                || (part.len() == 26 && part.chars().all(|c| c.is_alphanumeric()))
                            {
                                "*"
                            } else {
                                part
                            }
                        })
                        .collect::<Vec<_>>()
                        .join(":");
                    let bytes = memory_usage(&mut connection, key).await;
                    let entry = patterns.entry(pattern).or_default();
                    entry.0 += 1;
                    entry.1 += bytes;
                }
                if patterns.is_empty() {
                    return Ok("no keys".to_owned());
                }
                Ok(patterns
                    .into_iter()
                    .map(|(pattern, (count, bytes))| format!("{pattern} x{count} ({bytes} B)"))
                    .collect::<Vec<_>>()
                    .join(", "))
            }
            Probe::Sqlite { pool } => {
                let jobs = sqlite_count(pool, None).await?;
                let (workers,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM Workers")
                    .fetch_one(pool)
                    .await
                    .map_err(|error| format!("counting worker rows: {error}"))?;
                Ok(format!("{jobs} Jobs rows, {workers} Workers rows"))
            }
        }
    }
}

/// The value of the field `name` in the text of an INFO command, trimmed.
pub(crate) fn info_field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
        .map(str::trim)
}

/// Counts the `Jobs` rows with `status`, or all of them.
pub(crate) async fn sqlite_count(pool: &SqlitePool, status: Option<&str>) -> Result<u64> {
    let query = match status {
        Some(status) => sqlx::query_as("SELECT COUNT(*) FROM Jobs WHERE status = ?").bind(status),
        None => sqlx::query_as("SELECT COUNT(*) FROM Jobs"),
    };
    let (count,): (i64,) = query
        .fetch_one(pool)
        .await
        .map_err(|error| format!("counting queue rows: {error}"))?;
    Ok(count.max(0) as u64)
}

/// The bytes `key` takes in Redis (MEMORY USAGE); 0 when unknown.
pub(crate) async fn memory_usage(connection: &mut ConnectionManager, key: &str) -> u64 {
    ::redis::cmd("MEMORY")
        .arg("USAGE")
        .arg(key)
        .query_async::<Option<u64>>(connection)
        .await
        .ok()
        .flatten()
        .unwrap_or(0)
}

/// Every key matching `pattern` (SCAN, not KEYS).
pub(crate) async fn scan_keys(
    connection: &mut ConnectionManager,
    pattern: &str,
) -> Result<Vec<String>> {
    let mut cursor = 0_u64;
    let mut keys = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = ::redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg(pattern)
            .arg("COUNT")
            .arg(1_000)
            .query_async(connection)
            .await
            .map_err(|error| format!("SCAN {pattern}: {error}"))?;
        keys.extend(batch);
        if next == 0 {
            return Ok(keys);
        }
        cursor = next;
    }
}
