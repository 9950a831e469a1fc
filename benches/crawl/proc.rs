//! A trawl process of a run under GNU time, in its own process group: spawning it, waiting for
//! it to be ready, waiting for it to end while sampling VmRSS once a second, stopping it with
//! SIGTERM, and reading its usage and output. It does not decide which processes a run starts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::Result;
use crate::proc_status::status_kb;
use crate::process::{Group, Usage, read_usage, tail};
use crate::run::Samples;

/// A process of the run (GNU time and the trawl under it) in its own process group, its
/// output in files; killed with its group if dropped while running.
pub(crate) struct Proc {
    pub(crate) name: String,
    pub(crate) group: Group,
    pub(crate) time_file: PathBuf,
}

/// A process that ended.
pub(crate) struct Done {
    pub(crate) usage: Usage,
    pub(crate) stdout: String,
    pub(crate) stderr: String,
}

impl Done {
    pub(crate) fn output_tail(&self) -> String {
        format!(
            "--- stdout ---\n{}\n--- stderr ---\n{}",
            tail(&self.stdout, 20),
            tail(&self.stderr, 30)
        )
    }
}

impl Proc {
    pub(crate) fn spawn(
        mut command: Command,
        time_file: &Path,
        dir: &Path,
        name: &str,
    ) -> Result<Proc> {
        command.current_dir(dir);
        Ok(Proc {
            name: name.to_owned(),
            group: Group::spawn(&mut command, dir, Some(name))?,
            time_file: time_file.to_owned(),
        })
    }

    /// The trawl process under GNU time.
    pub(crate) fn trawl_pid(&self) -> Option<u32> {
        first_child(self.group.child.id())
    }

    pub(crate) fn stderr(&self) -> String {
        self.group.stderr()
    }

    /// Waits until the process writes `needle` to stderr.
    pub(crate) fn wait_for_stderr(&mut self, needle: &str, limit: Duration) -> Result<()> {
        let deadline = Instant::now() + limit;
        loop {
            if self.stderr().contains(needle) {
                return Ok(());
            }
            if let Ok(Some(status)) = self.group.child.try_wait() {
                return Err(format!(
                    "{} exited with {status} before it was ready:\n{}",
                    self.name,
                    tail(&self.stderr(), 30)
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "{} not ready within {limit:?}:\n{}",
                    self.name,
                    tail(&self.stderr(), 30)
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the process to end (killing its group after `limit`), sampling VmRSS every
    /// second: of `watch`, or when empty of the trawl under GNU time. Returns one series per
    /// watched process.
    pub(crate) fn wait_sampling(
        mut self,
        limit: Duration,
        watch: &[u32],
    ) -> Result<(Done, Vec<Samples>)> {
        let deadline = Instant::now() + limit;
        let mut watch: Vec<u32> = watch.to_vec();
        let mut samples: Vec<Samples> = vec![Samples::default(); watch.len().max(1)];
        let mut next_sample = Instant::now() + Duration::from_secs(1);
        let time_pid = self.group.child.id();
        let tick = || {
            if Instant::now() >= next_sample {
                next_sample += Duration::from_secs(1);
                if watch.is_empty()
                    && let Some(pid) = first_child(time_pid)
                {
                    watch.push(pid);
                }
                for (series, pid) in samples.iter_mut().zip(&watch) {
                    if let Some(kb) = status_kb(*pid, "VmRSS") {
                        series.0.push(kb);
                    }
                }
            }
        };
        let status = self.wait_or_kill(deadline, tick, |stderr| {
            format!(
                "the crawl did not finish within {limit:?} (TRAWL_BENCH_TIMEOUT); killed.\n--- stderr ---\n{}",
                tail(stderr, 40)
            )
        })?;
        let done = self.collect()?;
        if !status.success() {
            return Err(format!(
                "{} failed ({status})\n{}",
                self.name,
                done.output_tail()
            ));
        }
        Ok((done, samples))
    }

    /// SIGTERM to the trawl under GNU time (GNU time itself would die of it without writing
    /// its figures), then waits for both to end (SIGKILL to the group after `limit`).
    pub(crate) fn terminate(mut self, limit: Duration) -> Result<Done> {
        if let Some(pid) = self.trawl_pid() {
            let _ = Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
        let name = self.name.clone();
        let status = self.wait_or_kill(
            Instant::now() + limit,
            || {},
            |stderr| {
                format!(
                    "{name} did not stop within {limit:?} of SIGTERM; killed.\n{}",
                    tail(stderr, 30)
                )
            },
        )?;
        let done = self.collect()?;
        // GNU time reports a child killed by a signal; trawl exits 0 on SIGTERM.
        if !status.success() {
            eprintln!(
                "warning: {} ended with {status}\n{}",
                self.name,
                tail(&done.stderr, 10)
            );
        }
        Ok(done)
    }

    /// Waits for the process to end, calling `tick` meanwhile; at `deadline` kills its group
    /// and fails with `timed_out` of what it wrote to stderr.
    pub(crate) fn wait_or_kill(
        &mut self,
        deadline: Instant,
        tick: impl FnMut(),
        timed_out: impl FnOnce(&str) -> String,
    ) -> Result<std::process::ExitStatus> {
        match self.group.wait_until(deadline, tick) {
            Ok(Some(status)) => Ok(status),
            Ok(None) => {
                let stderr = self.stderr();
                self.group.kill();
                Err(timed_out(&stderr))
            }
            Err(e) => Err(format!("waiting for {}: {e}", self.name)),
        }
    }

    pub(crate) fn collect(&self) -> Result<Done> {
        Ok(Done {
            usage: read_usage(&self.time_file)?,
            stdout: self.group.stdout(),
            stderr: self.stderr(),
        })
    }
}

/// The first child of process `pid` (the trawl under GNU time).
pub(crate) fn first_child(pid: u32) -> Option<u32> {
    let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).ok()?;
    children.split_whitespace().next()?.parse().ok()
}
