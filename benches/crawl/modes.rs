//! How a run of each mode is driven: the `trawl crawl` arguments and environment, the embedded
//! run (one `trawl crawl` on a fresh data directory; with `--archive` in archive mode) and the
//! distributed run (its own redis-server and PostgreSQL database, `trawl work` processes,
//! `trawl crawl --no-pools`); the peer's runs are in `peer`. It does not check what the crawl
//! did (see `checks`) nor print the report.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::nginx::find_in_path;
use crate::proc::Proc;
use crate::process::{GNU_TIME, Usage, timed_trawl, trawl_bin};
use crate::redis_server::RedisServer;
use crate::run::{Disk, Run, Samples, Summary, parse_archived, parse_summary};
use crate::stores::{Database, psql_pages, sqlite_pages};
use crate::{Bench, Mode, Result};

impl Bench<'_> {
    pub(crate) fn seed(&self) -> String {
        format!("{}/p/0", self.site.origin())
    }

    /// `trawl crawl …` after the global options (`--archive` added by archive mode).
    pub(crate) fn crawl_args(&self, no_pools: bool) -> Vec<OsString> {
        let mut args: Vec<OsString> = vec!["crawl".into(), self.seed().into()];
        for arg in ["--sitemap", "--allow-private-network", "-q"] {
            args.push(arg.into());
        }
        args.push("--max-depth".into());
        args.push(self.expected.max_depth.to_string().into());
        // Room for every URL of the site: the budget is not what is measured.
        args.push("--max-pages".into());
        args.push(
            (self.expected.fetchable_pages * 2 + 1_000)
                .to_string()
                .into(),
        );
        if no_pools {
            args.push("--no-pools".into());
        } else {
            args.push("-c".into());
            args.push(self.settings.concurrency.to_string().into());
        }
        args
    }

    /// The environment of every trawl process of a run in `mode`.
    pub(crate) fn trawl_env(&self, mode: Mode) -> Vec<(&'static str, String)> {
        let slots = match mode {
            Mode::Distributed => self.settings.concurrency * self.settings.workers,
            _ => self.settings.concurrency,
        };
        vec![
            (
                "TRAWL_POLITENESS__MAX_CONCURRENT_PER_HOST",
                slots.to_string(),
            ),
            ("TRAWL_POLITENESS__MIN_DELAY_MS", "0".to_owned()),
            (
                "TRAWL_RUNNER__CONCURRENCY",
                self.settings.concurrency.to_string(),
            ),
        ]
    }

    pub(crate) fn run(&self, mode: Mode, index: usize) -> Result<Run> {
        let dir = self.root.join(format!("{}-{index}", mode.name()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        self.nginx.clear_access_log()?;
        match mode {
            Mode::Peer | Mode::PeerFetch => {
                let mut run = self.run_peer(mode, &dir, index)?;
                self.check_peer_access_log(&mut run)?;
                Ok(run)
            }
            Mode::Embedded | Mode::Archive => {
                let mut run = self.run_embedded(mode, &dir, index)?;
                self.check_access_log(&mut run)?;
                Ok(run)
            }
            Mode::Distributed => {
                let mut run = self.run_distributed(&dir, index)?;
                self.check_access_log(&mut run)?;
                Ok(run)
            }
        }
    }

    /// One `trawl crawl` on a fresh data directory; with `--archive` in archive mode.
    pub(crate) fn run_embedded(&self, mode: Mode, dir: &Path, index: usize) -> Result<Run> {
        let data = dir.join("data");
        let time_file = dir.join("crawl.time");
        let mut command = timed_trawl(&time_file);
        command
            .arg("--data-dir")
            .arg(&data)
            .args(self.crawl_args(false))
            .envs(self.trawl_env(mode));
        if mode == Mode::Archive {
            command.arg("--archive");
        }
        embedded_env(&mut command);
        let name = if mode == Mode::Archive {
            "crawl --archive"
        } else {
            "crawl"
        };
        let crawl = Proc::spawn(command, &time_file, dir, name)?;
        let (crawl, samples) = crawl.wait_sampling(self.settings.timeout, &[])?;
        let what = |e: String| format!("{} run {index}: {e}\n{}", mode.name(), crawl.output_tail());
        let summary = parse_summary(&crawl.stdout).map_err(what)?;
        let archived = if mode == Mode::Archive {
            Some(parse_archived(&crawl.stdout).map_err(what)?)
        } else {
            None
        };
        let rows = sqlite_pages(&data.join("trawl.sqlite"))?;
        let fetchers = vec![(
            format!("trawl {name}"),
            crawl.usage.clone(),
            samples.into_iter().next().unwrap_or_default(),
        )];
        let mut run = self.checked_run(mode, index, crawl.usage, fetchers, summary, &rows);
        run.disk = Some(Disk::of(&data));
        if let Some(archived) = archived {
            self.check_archived(&mut run, archived);
        }
        Ok(run)
    }

    pub(crate) fn run_distributed(&self, dir: &Path, index: usize) -> Result<Run> {
        let redis = RedisServer::start(
            &find_in_path("redis-server").ok_or("redis-server not found")?,
            dir,
            &dir.join("redis.log"),
        )?;
        eprintln!(
            "redis-server (pid {}) on 127.0.0.1:{}",
            redis.pid(),
            redis.port
        );
        let database = Database::create(&self.settings.pg_host, index)?;
        let database_url = format!(
            "postgres://postgres@localhost/{}?host={}",
            database.name, self.settings.pg_host
        );
        let redis_url = redis.url();
        let env = |command: &mut Command| {
            command
                .envs(self.trawl_env(Mode::Distributed))
                .env("DATABASE_URL", &database_url)
                .env("REDIS_URL", &redis_url)
                .env_remove("TRAWL_DATABASE_URL")
                .env_remove("TRAWL_REDIS_URL");
        };
        let mut workers = Vec::new();
        for w in 1..=self.settings.workers {
            let wdir = dir.join(format!("worker{w}"));
            std::fs::create_dir_all(&wdir)
                .map_err(|e| format!("creating {}: {e}", wdir.display()))?;
            let time_file = wdir.join("time.txt");
            let mut command = timed_trawl_verbose(&time_file);
            command
                .arg("--data-dir")
                .arg(wdir.join("data"))
                .args(["work", "--allow-private-network", "--pools"])
                .arg(format!("fetch={}", self.settings.concurrency));
            env(&mut command);
            workers.push(Proc::spawn(
                command,
                &time_file,
                &wdir,
                &format!("worker {w}"),
            )?);
        }
        for worker in &mut workers {
            worker.wait_for_stderr("trawl: working", Duration::from_secs(60))?;
        }
        let worker_pids: Vec<u32> = workers.iter().filter_map(Proc::trawl_pid).collect();
        let time_file = dir.join("crawl.time");
        let mut command = timed_trawl(&time_file);
        command
            .arg("--data-dir")
            .arg(dir.join("crawl-data"))
            .args(self.crawl_args(true));
        env(&mut command);
        let crawl = Proc::spawn(command, &time_file, dir, "crawl --no-pools")?;
        let (crawl, samples) = crawl.wait_sampling(self.settings.timeout, &worker_pids)?;
        let mut fetchers = Vec::new();
        for (k, worker) in workers.into_iter().enumerate() {
            let name = worker.name.clone();
            let done = worker.terminate(Duration::from_secs(60))?;
            let sampled = samples.get(k).cloned().unwrap_or_default();
            fetchers.push((name, done.usage, sampled));
        }
        let summary = parse_summary(&crawl.stdout)
            .map_err(|e| format!("distributed run {index}: {e}\n{}", crawl.output_tail()))?;
        let rows = psql_pages(&self.settings.pg_host, &database.name)?;
        drop(database);
        drop(redis);
        Ok(self.checked_run(
            Mode::Distributed,
            index,
            crawl.usage,
            fetchers,
            summary,
            &rows,
        ))
    }

    /// The run, its counters and stored pages (`rows`) checked by [`Bench::check_store`].
    pub(crate) fn checked_run(
        &self,
        mode: Mode,
        index: usize,
        crawl: Usage,
        fetchers: Vec<(String, Usage, Samples)>,
        summary: Summary,
        rows: &[(String, String)],
    ) -> Run {
        let mut run = Run {
            mode,
            index,
            crawl,
            fetchers,
            summary,
            stored_rows: 0,
            log_notes: Vec::new(),
            failures: Vec::new(),
            archived: None,
            peer: None,
            disk: None,
        };
        self.check_store(&mut run, rows);
        run
    }
}

/// Removes what would make an embedded run use another store or queue, and the bench's own
/// knobs (trawl reads every `TRAWL_*` variable as configuration and refuses unknown keys).
pub(crate) fn embedded_env(command: &mut Command) {
    for name in [
        "DATABASE_URL",
        "REDIS_URL",
        "TRAWL_DATABASE_URL",
        "TRAWL_REDIS_URL",
    ] {
        command.env_remove(name);
    }
}

/// `/usr/bin/time -v -o FILE trawl`.
fn timed_trawl_verbose(time_file: &Path) -> Command {
    let mut command = Command::new(GNU_TIME);
    command.arg("-v").arg("-o").arg(time_file).arg(trawl_bin());
    command
}
