//! trawl: a job-queue batch crawler and archiver for AI agents and RAG pipelines. This crate
//! is the application on top of the pools (`trawl-workers`): it owns the queue, the store,
//! the runner, the configuration and the command line.
//!
//! The map:
//! - `crawl`: crawls: seeds and followed links → fetch jobs, counters, completion, per-host
//!   politeness (in process, or shared through Redis).
//! - `config`: trawl.toml < `TRAWL_*` env < flags, checked into typed values.
//! - `store`: jobs, pages, blobs, crawls, sessions (SQLite or PostgreSQL via sqlx; zstd,
//!   content-addressed by sha256).
//! - `queue`: job envelopes delivered at least once (apalis-sqlite, or apalis-redis).
//! - `runner`: dequeue → run → persist result keyed by job id → ack; retries and dead jobs.
//! - `archive`: the archive pool: pending pages → chunks → tantivy index, responses → WARC.
//! - `cache`: fresh pages, in an in-process LRU over the store.
//! - `pages`: reading stored pages by line range; grep.
//! - `sessions`: agent sessions: a browser context per session, previews, the replay log.
//! - `api`: the HTTP API (axum), its errors, auth and OpenAPI document.
//! - `webhooks`: signed event delivery through the SSRF guard.
//! - `metrics`: Prometheus counters and histograms.
//! - `cli`: one file per subcommand.
//! - `telemetry`: logging setup.
//!
//! Invariants: sqlx is imported by `store` and `queue` only, apalis by `queue` and `runner`
//! only, redis by `queue` and `crawl` (the shared politeness gate) only, axum by `api` (and
//! `cli/serve.rs`, which starts it) only. The runner alone persists job outcomes, keyed by job id, so a job delivered twice
//! records one result. Jobs carry ids, URLs and options, never page bodies.

pub mod api;
pub mod archive;
pub mod cache;
pub mod cli;
pub mod config;
pub mod crawl;
pub mod metrics;
pub mod pages;
pub mod queue;
pub mod runner;
pub mod session_hosts;
pub mod sessions;
pub mod store;
pub mod telemetry;
pub mod webhooks;
