//! System tests: the `trawl` library and binary with real parts — the fixture HTTP server on
//! 127.0.0.1, SQLite stores and queues in temporary directories, the real `trawl` binary.
//! One binary, one module per area: `cargo test --test system pipeline::` runs one area.

mod api;
mod archive;
mod browser;
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
    context_with(store, runner_config)
}

/// The URLs of the pages a crawl stored (each page once), in the order the store exports them.
pub async fn crawl_page_urls(store: &Store, crawl_id: &str) -> Vec<String> {
    let mut urls = Vec::new();
    let mut cursor = 0;
    loop {
        let pages = store
            .export_pages(None, None, Some(crawl_id), cursor, 500)
            .await
            .expect("reads");
        let Some((_, last)) = pages.last() else {
            break;
        };
        cursor = *last;
        urls.extend(pages.into_iter().map(|(page, _)| page.url));
    }
    urls
}

/// [`context_in`] over a given store.
pub fn context_with(store: Store, runner_config: runner::Config) -> Arc<Context> {
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

/// Records a fetch job in the batch "test" and returns its envelope (not yet queued).
pub async fn enqueue(
    context: &Context,
    job: trawl_workers::job::FetchJob,
) -> trawl::queue::Envelope {
    let id = ulid::Ulid::generate().to_string();
    let job = trawl_workers::job::Job::Fetch(job);
    let new_job = trawl::store::NewJob {
        batch_id: Some("test".to_owned()),
        ..trawl::store::NewJob::new(&id, &job, context.config.max_attempts)
    };
    context
        .store
        .create_jobs(&[new_job])
        .await
        .expect("job recorded");
    trawl::queue::Envelope::new(id, job)
}

/// The real `trawl` binary on `data_dir`, with no configuration from the environment that
/// runs the tests (no trawl.toml, no database or Redis URL) and errors-only logs.
pub fn trawl_command(data_dir: &Path) -> std::process::Command {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_trawl"));
    command
        .arg("--data-dir")
        .arg(data_dir)
        .env_remove("TRAWL_CONFIG")
        .env_remove("DATABASE_URL")
        .env_remove("REDIS_URL")
        .env("TRAWL_LOG", "error");
    command
}
