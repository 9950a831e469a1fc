//! The benchmarks' knobs: numbers, flags and comma-separated lists read from `TRAWL_BENCH_*`
//! environment variables, and the bare number `cargo bench --bench NAME -- N` passes. Numbers
//! may be written with `_` or `,` between digits (`100_000`, `100,000`). Errors are messages
//! naming the variable and its value, for the benchmark to print.
//!
//! Not here: what a knob means or its default; each benchmark documents its own.

use std::str::FromStr;

/// `value` as a `T` once trimmed and stripped of `_` and `,` separators.
fn parse_number<T: FromStr>(value: &str) -> Option<T> {
    value.trim().replace(['_', ','], "").parse().ok()
}

/// The number in the variable `name`, or `default` when it is not set.
pub(crate) fn env_number<T: FromStr>(name: &str, default: T) -> Result<T, String> {
    match std::env::var(name) {
        Ok(value) => {
            parse_number(&value).ok_or_else(|| format!("{name}={value:?} is not a number"))
        }
        Err(_) => Ok(default),
    }
}

/// The positive count in the variable `name`, or `default` when it is not set.
pub(crate) fn env_positive(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Ok(value) => parse_number(&value)
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("{name}={value:?} is not a positive number")),
        Err(_) => Ok(default),
    }
}

/// Whether the variable `name` is set to anything but empty, `0`, `false` or `no`.
pub(crate) fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no"))
}

/// The comma-separated items of the variable `name` (`default` when it is not set), each
/// trimmed, empty ones skipped, and read by `parse` (whose error is the message). An empty list
/// is an error: "`{name}` names no `{what}`".
pub(crate) fn env_list<T>(
    name: &str,
    default: &str,
    what: &str,
    parse: impl FnMut(&str) -> Result<T, String>,
) -> Result<Vec<T>, String> {
    let value = std::env::var(name).unwrap_or_else(|_| default.to_owned());
    let items = value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .map(parse)
        .collect::<Result<Vec<T>, String>>()?;
    if items.is_empty() {
        return Err(format!("{name} names no {what}"));
    }
    Ok(items)
}

/// The last command-line argument that is a number (`cargo bench` passes `--bench` and such
/// before it), if any.
pub(crate) fn arg_number<T: FromStr>() -> Option<T> {
    std::env::args()
        .skip(1)
        .rev()
        .find_map(|arg| parse_number(&arg))
}
