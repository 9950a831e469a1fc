//! The `trawl` binary: parses the command line and runs it on a tokio runtime.

use std::process::ExitCode;

use clap::Parser as _;
use trawl::cli::{self, Cli};

/// jemalloc, not the system allocator: see the note on `tikv-jemallocator` in Cargo.toml.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    // Two rustls providers get compiled in (sqlx's ring, reqwest's aws-lc-rs); without a
    // process default, rustls cannot choose one and any direct client config panics.
    let _ = rustls::crypto::aws_lc_rs::default_provider().install_default();
    trawl::telemetry::init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        // Extraction runs on blocking threads; deep documents need more than the 2 MiB
        // default even after the nesting guard.
        .thread_stack_size(8 << 20)
        .build();
    let runtime = match runtime {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("trawl: cannot start the runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(cli::dispatch(cli)) {
        Ok(code) => code,
        // The reader of our standard output went away (`| head`): end quietly, as Unix
        // tools do.
        Err(error) if cli::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("trawl: {}", cli::error_line(&error));
            ExitCode::from(2)
        }
    }
}
