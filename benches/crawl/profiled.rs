//! The crawl benchmark's profile (`TRAWL_BENCH_PROFILE=1`): after the timed runs, one more
//! `trawl crawl` of each embedded mode asked for (`embedded`, `archive`) under `perf record`,
//! on a fresh data directory, then where its CPU went by phase (`common/profile`). The
//! profiled run is not timed into the medians (sampling slows it); its summary is read to
//! say how many pages the profile covers. Distributed and peer runs are not profiled.

use std::path::Path;
use std::time::Instant;

use crate::modes::embedded_env;
use crate::nginx::find_in_path;
use crate::proc::Proc;
use crate::process::{timed, trawl_bin};
use crate::profile::{analyse, record_args};
use crate::run::parse_summary;
use crate::{Bench, Mode, Result};

impl Bench<'_> {
    /// Profiles one crawl in `mode` (embedded or archive) and prints its phases.
    pub(crate) fn profile(&self, mode: Mode) -> Result<()> {
        let what = if mode == Mode::Archive {
            "trawl crawl --archive"
        } else {
            "trawl crawl"
        };
        println!("\n== profile of {what} ==");
        let Some(perf) = find_in_path("perf") else {
            println!("perf is not installed (apt-get install linux-perf): no profile.");
            return Ok(());
        };
        let dir = self.root.join(format!("profile-{}", mode.name()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let data = dir.join("perf.data");
        let time_file = dir.join("crawl.time");
        let mut command = timed(&perf, &time_file);
        command
            .args(record_args(self.settings.callgraph, &data))
            .arg(trawl_bin())
            .arg("--data-dir")
            .arg(dir.join("data"))
            .args(self.crawl_args(false))
            .envs(self.trawl_env(mode));
        if mode == Mode::Archive {
            command.arg("--archive");
        }
        embedded_env(&mut command);
        self.nginx.clear_access_log()?;
        let started = Instant::now();
        let crawl = Proc::spawn(command, &time_file, &dir, "perf record trawl crawl")?;
        let (crawl, _) = crawl.wait_sampling(self.settings.timeout * 2, &[])?;
        let summary = parse_summary(&crawl.stdout).map_err(|e| {
            format!(
                "profile of {what} (perf_event_paranoid too strict, or perf unsupported here?): {e}\n{}",
                crawl.output_tail()
            )
        })?;
        println!(
            "perf record -e cpu-clock ({}) of {what} over the same site: {:.1} s, {} pages fetched, {:.0} MB of samples",
            self.settings.callgraph.describe(),
            started.elapsed().as_secs_f64(),
            summary.fetched,
            file_mb(&data)
        );
        analyse(&perf, &data, None)
    }
}

fn file_mb(path: &Path) -> f64 {
    std::fs::metadata(path).map_or(0.0, |m| m.len() as f64 / 1e6)
}
