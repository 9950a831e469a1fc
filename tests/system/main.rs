//! System tests: the `trawl` library and binary with real parts — the fixture HTTP server on
//! 127.0.0.1, SQLite stores and queues in temporary directories, the real `trawl` binary.
//! One binary, one module per area: `cargo test --test system pipeline::` runs one area.

mod api;
mod api_guard;
mod archive;
mod browser;
mod cli;
mod cli_behaviour;
mod crawl;
mod engines;
mod fallback;
mod faults;
mod firecrawl;
mod mcp;
mod pipeline;
mod queue;
mod store;
mod tenants;
mod ui;
mod web_search;

use std::path::Path;
use std::sync::Arc;

use trawl::app::{App, Deps, Needs};
use trawl::config::Config;
use trawl::runner;
use trawl::store::Store;

/// The configuration of a test application in `dir`: the embedded store and queue there,
/// short HTTP time limits, and loopback allowed (tests opt in to reach the fixture server;
/// `cli::` proves the default refuses it).
pub fn test_config(dir: &Path) -> Config {
    let mut config = Config {
        data_dir: dir.to_owned(),
        ..Config::default()
    };
    config.ssrf.allow_private_network = true;
    config.http.timeout_secs = 5;
    config.http.read_timeout_secs = 2;
    config
}

/// The application, built as the CLI builds it (zero2prod's `spawn_app`): nothing runs until
/// the test starts pools or servers on it.
pub async fn spawn_app(config: &Config) -> App {
    App::build(config, Needs::default())
        .await
        .expect("the application builds")
}

/// A shutdown already asked for: a part given it stops once it has nothing left to do.
pub fn stopped() -> trawl::app::Shutdown {
    let shutdown = trawl::app::Shutdown::new();
    shutdown.trigger();
    shutdown
}

/// The shared parts of a test application in `dir` with these runner settings.
pub async fn context_in(dir: &Path, runner_config: runner::Config) -> Arc<Deps> {
    let config = Config {
        runner: runner_config,
        ..test_config(dir)
    };
    spawn_app(&config).await.deps().clone()
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

/// Records a fetch job in the batch "test" and returns its envelope (not yet queued).
pub async fn enqueue(context: &Deps, job: trawl_workers::job::FetchJob) -> trawl::queue::Envelope {
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
        .env("TRAWL_LOG", "error")
        // No user-level trawl.toml: tests see the defaults.
        .env("XDG_CONFIG_HOME", data_dir.join("no-user-config"));
    command
}
