//! The queue bench's table: the medians of each engine and shape, and their ratio to the
//! 5,000 jobs/s target. It prints; it does not judge the checks (each run does).

use crate::figures::median;
use crate::{Engine, Run, Settings, TARGET_JOBS_PER_SEC};

/// Bytes to MB.
pub(crate) fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1_048_576.0
}

/// Prints the medians of each row and their ratio to the target.
pub(crate) fn report(settings: &Settings, runs: &[Run]) {
    let n = settings.jobs as f64;
    println!();
    println!(
        "medians of {} runs, {} jobs each (consume = first job taken → last acknowledged; target \
         {:.0} jobs/s):",
        settings.runs, settings.jobs, TARGET_JOBS_PER_SEC
    );
    println!(
        "{:<7} {:>6} {:>10} {:>8} {:>10} {:>8} {:>10} {:>9} {:>10} {:>7} {:>14} {:>8}",
        "engine",
        "shape",
        "push/s",
        "x target",
        "consume/s",
        "x target",
        "handled/s",
        "promote s",
        "1st job ms",
        "RSS MB",
        "redis KB kept",
        "checks"
    );
    for &engine in &settings.engines {
        for &shape in &settings.shapes {
            let rows: Vec<&Run> = runs
                .iter()
                .filter(|run| run.engine == engine && run.shape == shape)
                .collect();
            if rows.is_empty() {
                continue;
            }
            let push = median(rows.iter().map(|run| n / run.push_secs).collect());
            let consume = median(rows.iter().map(|run| n / run.consume_secs).collect());
            let handled = median(rows.iter().map(|run| n / run.handled_secs).collect());
            let promote = median(rows.iter().map(|run| run.promote_secs).collect());
            let rss = median(rows.iter().map(|run| run.peak_rss_mb).collect());
            let first_job = median(
                rows.iter()
                    .map(|run| run.first_job_secs * 1_000.0)
                    .collect(),
            );
            let kept = median(
                rows.iter()
                    .filter_map(|run| run.memory)
                    .map(|m| (m.after_prune as f64 - m.before as f64) / 1_024.0)
                    .collect(),
            );
            let passed = rows.iter().filter(|run| run.ok).count();
            println!(
                "{:<7} {:>6} {:>10.0} {:>8.2} {:>10.0} {:>8.2} {:>10.0} {:>9} {:>10.1} {:>7.0} {:>14} {:>8}",
                engine.as_str(),
                shape.to_string(),
                push,
                push / TARGET_JOBS_PER_SEC,
                consume,
                consume / TARGET_JOBS_PER_SEC,
                handled,
                if engine == Engine::Redis {
                    format!("{promote:.3}")
                } else {
                    "-".to_owned()
                },
                first_job,
                rss,
                if kept.is_finite() {
                    format!("{kept:+.1}")
                } else {
                    "-".to_owned()
                },
                format!("{passed}/{} ok", rows.len())
            );
        }
    }
    println!();
}
