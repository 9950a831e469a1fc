//! Logging: `tracing` to stderr, filtered by `TRAWL_LOG` (or `RUST_LOG`); by default trawl's
//! own warnings and every crate's errors ([`DEFAULT_FILTER`]), so that a batch run's output
//! stays readable and libraries' chatter (a browser's protocol warnings) stays out. Colours
//! only on a terminal, and never with `NO_COLOR` set. While a progress bar is shown
//! ([`show_progress`]), each log line is written above it rather than through it.
//!
//! Not here: metrics (they come with the HTTP API).

use std::io::IsTerminal as _;
use std::sync::Mutex;

use indicatif::ProgressBar;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::MakeWriter;

/// The filter without `TRAWL_LOG` or `RUST_LOG`: warnings of trawl's own crates, errors of
/// the others.
pub const DEFAULT_FILTER: &str = "error,trawl=warn,trawl_workers=warn";

/// The progress bar on screen, if any.
static PROGRESS: Mutex<Option<ProgressBar>> = Mutex::new(None);

/// Installs the global subscriber; call once, first thing in `main`.
pub fn init() {
    let filter = EnvFilter::try_from_env("TRAWL_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(Stderr);
    // On a terminal, tracing-subscriber's default: colour unless NO_COLOR is set to anything
    // but the empty string (<https://no-color.org>). Elsewhere, never.
    let _ = if std::io::stderr().is_terminal() {
        builder.try_init()
    } else {
        builder.with_ansi(false).try_init()
    };
}

/// Shows log lines above `bar` while it is on screen (`None` once it is cleared).
pub fn show_progress(bar: Option<ProgressBar>) {
    if let Ok(mut progress) = PROGRESS.lock() {
        *progress = bar;
    }
}

/// Standard error, with the progress bar (if any) hidden while a line is written.
#[derive(Debug, Clone, Copy)]
struct Stderr;

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Stderr;

    fn make_writer(&'a self) -> Stderr {
        Stderr
    }
}

impl std::io::Write for Stderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The subscriber writes each event with one call; a clone of the bar is taken so the
        // lock is not held while writing.
        let bar = PROGRESS.lock().ok().and_then(|progress| progress.clone());
        match bar {
            Some(bar) => bar.suspend(|| std::io::stderr().write_all(buf))?,
            None => std::io::stderr().write_all(buf)?,
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_filter_parses() {
        assert!(EnvFilter::try_new(DEFAULT_FILTER).is_ok());
    }
}
