//! Logging: `tracing` to stderr, filtered by `TRAWL_LOG` (or `RUST_LOG`), `warn` by default
//! so that a batch run's output stays readable.
//!
//! Not here: metrics (they come with the HTTP API).

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber; call once, first thing in `main`.
pub fn init() {
    let filter = EnvFilter::try_from_env("TRAWL_LOG")
        .or_else(|_| EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
