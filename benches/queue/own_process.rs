//! The bench process's own figures from `/proc/self`: peak RSS (VmHWM, and its reset between
//! runs) and CPU time. It does not look at other processes.

use crate::proc_status::status_kb;

/// Peak RSS of this process so far (VmHWM), in MB.
pub(crate) fn peak_rss_mb() -> f64 {
    status_kb("self", "VmHWM").map_or(f64::NAN, |kb| kb as f64 / 1_024.0)
}

/// CPU time (user + system) of this process so far, in seconds (`/proc/self/stat`, at the
/// usual 100 ticks per second).
pub(crate) fn process_cpu_secs() -> f64 {
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|stat| {
            // Fields after the parenthesised command name; utime and stime are the 14th and
            // 15th fields, the 12th and 13th after it.
            let rest = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let user: f64 = fields.get(11)?.parse().ok()?;
            let system: f64 = fields.get(12)?.parse().ok()?;
            Some((user + system) / 100.0)
        })
        .unwrap_or(f64::NAN)
}

/// Resets VmHWM to the current RSS (Linux: `5` into `/proc/self/clear_refs`), so each run's
/// peak is its own; where that is refused, the peak is the process's so far.
pub(crate) fn reset_peak_rss() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}
