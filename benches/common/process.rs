//! The processes a benchmark runs and measures: the trawl binary under test, started under
//! GNU time (`/usr/bin/time`) in a process group of its own with its output in files
//! ([`Group`]), and GNU time's figures for it ([`Usage`]).
//!
//! Not here: sampling a process's memory while it runs, or stopping it gracefully; the
//! benchmarks that need those do them on top of [`Group`].

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// GNU time, which measures every trawl process of a benchmark.
pub(crate) const GNU_TIME: &str = "/usr/bin/time";

/// The trawl binary under test: this build's, or `TRAWL_BENCH_BIN`.
pub(crate) fn trawl_bin() -> PathBuf {
    std::env::var_os("TRAWL_BENCH_BIN")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_trawl")), PathBuf::from)
}

/// Fails, saying how to install it, when GNU time is missing, or when the trawl binary is.
pub(crate) fn check_gnu_time_and_trawl() -> Result<(), String> {
    if !Path::new(GNU_TIME).exists() {
        return Err(format!(
            "{GNU_TIME} not found: install GNU time with `apt-get install -y time`"
        ));
    }
    if !trawl_bin().is_file() {
        return Err(format!(
            "the trawl binary {} is missing",
            trawl_bin().display()
        ));
    }
    Ok(())
}

/// `/usr/bin/time -o TIME_FILE -f "%e %U %S %M" trawl`, for the caller to add trawl's
/// arguments to.
pub(crate) fn timed_trawl(time_file: &Path) -> Command {
    timed(&trawl_bin(), time_file)
}

/// `program` under GNU time, its figures written to `time_file` as [`read_usage`] reads them;
/// the caller adds the program's arguments.
pub(crate) fn timed(program: &Path, time_file: &Path) -> Command {
    let mut command = Command::new(GNU_TIME);
    command
        .arg("-o")
        .arg(time_file)
        .args(["-f", "%e %U %S %M"])
        .arg(program);
    command
}

/// What GNU time reports of one process.
#[derive(Debug, Clone, Default)]
pub(crate) struct Usage {
    /// Wall-clock seconds.
    pub(crate) wall: f64,
    /// User CPU seconds.
    pub(crate) user: f64,
    /// System CPU seconds.
    pub(crate) sys: f64,
    /// Peak resident set size, in kB.
    pub(crate) rss_kb: u64,
}

/// Reads the file GNU time wrote with `-o`.
pub(crate) fn read_usage(time_file: &Path) -> Result<Usage, String> {
    let times = std::fs::read_to_string(time_file)
        .map_err(|e| format!("reading {}: {e}", time_file.display()))?;
    parse_time(&times).ok_or_else(|| format!("cannot read GNU time's output {times:?}"))
}

/// GNU time's output: `-f "%e %U %S %M"` (its last line), or `-v`.
fn parse_time(text: &str) -> Option<Usage> {
    if text.contains("Maximum resident set size") {
        let field = |label: &str| -> Option<&str> {
            text.lines()
                .find_map(|line| line.trim().strip_prefix(label))
                .map(str::trim)
        };
        let wall = field("Elapsed (wall clock) time (h:mm:ss or m:ss):")?
            .split(':')
            .try_fold(0.0, |acc, part| {
                part.parse::<f64>().ok().map(|v| acc * 60.0 + v)
            })?;
        return Some(Usage {
            wall,
            user: field("User time (seconds):")?.parse().ok()?,
            sys: field("System time (seconds):")?.parse().ok()?,
            rss_kb: field("Maximum resident set size (kbytes):")?.parse().ok()?,
        });
    }
    let fields: Vec<f64> = text
        .lines()
        .last()?
        .split_whitespace()
        .map(|value| value.parse().ok())
        .collect::<Option<_>>()?;
    match fields[..] {
        [wall, user, sys, rss] => Some(Usage {
            wall,
            user,
            sys,
            rss_kb: rss as u64,
        }),
        _ => None,
    }
}

/// A command running in a process group of its own (GNU time and the trawl under it), its
/// stdout and stderr in `stdout.txt` and `stderr.txt`; the group is killed if the value is
/// dropped while the command runs.
pub(crate) struct Group {
    /// The process started (GNU time, when timed).
    pub(crate) child: Child,
    out_path: PathBuf,
    err_path: PathBuf,
}

impl Group {
    /// Starts `command` with stdin from `/dev/null`, stdout and stderr to files in `dir`, and
    /// without the benchmark's own `TRAWL_BENCH_*` variables (trawl reads every `TRAWL_*`
    /// variable as configuration and refuses unknown keys). `name` names it in the error.
    pub(crate) fn spawn(
        command: &mut Command,
        dir: &Path,
        name: Option<&str>,
    ) -> Result<Group, String> {
        let (out_path, err_path) = (dir.join("stdout.txt"), dir.join("stderr.txt"));
        let stdout = std::fs::File::create(&out_path).map_err(|e| format!("{e}"))?;
        let stderr = std::fs::File::create(&err_path).map_err(|e| format!("{e}"))?;
        for (var, _) in std::env::vars_os() {
            if var.to_string_lossy().starts_with("TRAWL_BENCH_") {
                command.env_remove(var);
            }
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .process_group(0)
            .spawn()
            .map_err(|e| match name {
                Some(name) => format!("starting {name} ({command:?}): {e}"),
                None => format!("starting {command:?}: {e}"),
            })?;
        Ok(Group {
            child,
            out_path,
            err_path,
        })
    }

    /// What it wrote to stdout so far.
    pub(crate) fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out_path).unwrap_or_default()
    }

    /// What it wrote to stderr so far.
    pub(crate) fn stderr(&self) -> String {
        std::fs::read_to_string(&self.err_path).unwrap_or_default()
    }

    /// Waits for the command to end, calling `tick` every 20 ms meanwhile. `Ok(None)` when
    /// `deadline` comes first: it still runs (dropping the value kills it).
    pub(crate) fn wait_until(
        &mut self,
        deadline: Instant,
        mut tick: impl FnMut(),
    ) -> std::io::Result<Option<ExitStatus>> {
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Ok(Some(status));
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            tick();
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the whole group (SIGKILL) if the command still runs, and reaps it.
    pub(crate) fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // The group is the child's own PID (process_group(0)).
            let _ = Command::new("kill")
                .args(["-KILL", "--", &format!("-{}", self.child.id())])
                .status();
            let _ = self.child.wait();
        }
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of `text`.
pub(crate) fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}
