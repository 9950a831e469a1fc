//! How much memory a browser uses: the proportional set size of a process and all its
//! descendants, read from `/proc`. The walk reads files and may take up to a second, so async
//! code calls [`tree_memory_blocking`] off the runtime's worker threads.
//!
//! Not here: what to do about it (the pool recycles a browser above its threshold).

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// [`tree_memory`] on tokio's blocking thread pool, so the `/proc` walk never stalls the
/// runtime; 0 if the blocking task failed.
pub(crate) async fn tree_memory_blocking(pid: u32) -> u64 {
    tokio::task::spawn_blocking(move || tree_memory(pid))
        .await
        .unwrap_or(0)
}

/// The memory of `pid` and all its descendants, from `/proc`: their proportional set size
/// (shared pages divided among the processes sharing them), or their RSS where that is not
/// readable.
pub fn tree_memory(pid: u32) -> u64 {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry
                .file_name()
                .to_str()
                .and_then(|name| name.parse().ok())
            else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // The command may hold spaces and parentheses: fields start after the last ')'.
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|ppid| ppid.parse::<u32>().ok());
            if let Some(parent) = parent {
                children.entry(parent).or_default().push(child);
            }
        }
    }
    let mut total = 0;
    let mut stack = vec![pid];
    let started = Instant::now();
    while let Some(next) = stack.pop() {
        total += memory_of(next);
        if let Some(kids) = children.get(&next) {
            stack.extend(kids);
        }
        if started.elapsed() > Duration::from_secs(1) {
            break;
        }
    }
    total
}

/// The memory a process accounts for: its proportional set size (shared pages divided among
/// the processes sharing them, so a tree's sum is its real footprint; Chromium's processes
/// share much), else its resident set size where `smaps_rollup` is not readable.
fn memory_of(pid: u32) -> u64 {
    let field = |path: String, name: &str| {
        std::fs::read_to_string(path).ok().and_then(|text| {
            text.lines()
                .find(|line| line.starts_with(name))
                .and_then(|line| line.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<u64>().ok())
        })
    };
    field(format!("/proc/{pid}/smaps_rollup"), "Pss:")
        .or_else(|| field(format!("/proc/{pid}/status"), "VmRSS:"))
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_memory_counts_this_process() {
        assert!(tree_memory(std::process::id()) > 1024 * 1024);
    }

    #[tokio::test]
    async fn tree_memory_off_the_runtime_counts_this_process() {
        assert!(tree_memory_blocking(std::process::id()).await > 1024 * 1024);
    }
}
