//! A quantile of measured durations, as the latency benchmarks report them (p50, p99). It does
//! not sort: the caller passes the durations sorted.

use std::time::Duration;

/// The `q` quantile (`0.0..=1.0`) of sorted, non-empty `times`, by nearest rank.
pub(crate) fn percentile(times: &[Duration], q: f64) -> Duration {
    let i = ((times.len() - 1) as f64 * q).round() as usize;
    times[i.min(times.len() - 1)]
}
