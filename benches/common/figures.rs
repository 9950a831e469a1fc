//! What the benchmarks' reports compute and print beside their own figures: the median of a
//! series, a figure against its target, the machine's load average around the runs, and the
//! bytes a run left on disk.

/// The middle value (the mean of the two middle ones for an even count), ignoring values that
/// are not finite; NaN when none is.
pub(crate) fn median(mut values: Vec<f64>) -> f64 {
    values.retain(|value| value.is_finite());
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[middle - 1] + values[middle]) / 2.0
    } else {
        values[middle]
    }
}

/// `(met)` or `(MISSED)`.
pub(crate) fn verdict(met: bool) -> &'static str {
    if met { "(met)" } else { "(MISSED)" }
}

/// `{value / target}x target (met)`, or `(MISSED)` when `met` is false.
pub(crate) fn against_target(value: f64, target: f64, met: bool) -> String {
    format!("{:.2}x target {}", value / target, verdict(met))
}

/// The 1, 5 and 15 minute load averages (`/proc/loadavg`), or `?`.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|_| "?".to_owned())
}

/// Bytes of the files under `path`, however deep (0 when it cannot be read).
pub(crate) fn dir_size(path: &std::path::Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.metadata() {
            Ok(m) if m.is_dir() => dir_size(&entry.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}
