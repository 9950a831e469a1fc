//! System tests: the `trawl` library and binary with real parts — the fixture HTTP server on
//! 127.0.0.1, SQLite stores and queues in temporary directories, the real `trawl` binary.
//! One binary, one module per area: `cargo test --test system pipeline::` runs one area.

mod api;
mod archive;
mod cli;
mod crawl;
mod engines;
mod faults;
mod pipeline;
mod queue;
mod store;

use std::path::Path;
use std::sync::Arc;

use trawl::runner::{self, Context};
use trawl::store::Store;
use trawl_workers::{fetch, web};

/// A store and runner context in a temporary directory, allowed to reach the loopback
/// fixture server (tests opt in to loopback explicitly; `cli::` proves the default refuses it).
pub async fn context_in(dir: &Path, runner_config: runner::Config) -> Arc<Context> {
    let store = Store::open(&dir.join("trawl.sqlite"))
        .await
        .expect("store opens");
    let policy = web::Policy {
        allow_private_network: true,
        ..web::Policy::default()
    };
    let http = web::Config {
        timeout_secs: 5,
        read_timeout_secs: 2,
        ..web::Config::default()
    };
    let client = web::Client::new(http, policy).expect("client builds");
    let fetch = fetch::Deps {
        client,
        config: fetch::Config::default(),
    };
    Arc::new(Context::new(store, fetch, runner_config))
}
