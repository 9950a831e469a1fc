//! Figures the kernel keeps per process in `/proc/<pid>/status` (VmRSS, VmHWM, …), read in kB.
//! It reads one value when asked; it does not sample over time nor convert units, and a process
//! or field that is not there is `None`.

/// The `field` of `/proc/{process}/status` (e.g. `VmRSS`), in kB; `process` is a pid or `self`.
pub(crate) fn status_kb(process: impl std::fmt::Display, field: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/{process}/status"))
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
