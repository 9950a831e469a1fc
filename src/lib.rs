//! trawl: a job-queue batch crawler and archiver for AI agents and RAG pipelines. This crate
//! is the application on top of the pools (`trawl-workers`): it owns the queue, the store,
//! the runner, the configuration and the command line.
//!
//! The map, from the bottom up (no module imports one above it; no import cycle):
//! - `secret`, `shutdown`, `metrics`, `telemetry`, `tenant`: secrets that never print, the
//!   named stop request every running part watches, Prometheus counters, logging, who owns
//!   what (tenants and what a caller may see).
//! - `store`: jobs, pages, blobs, crawls, sessions (SQLite or PostgreSQL via sqlx; zstd,
//!   content-addressed by sha256).
//! - `queue`: job envelopes delivered at least once (apalis-sqlite, or apalis-redis).
//! - `cache`: fresh pages, in an in-process LRU over the store. `pages`: reading stored pages
//!   by line range; grep. `webhooks`: signed event delivery through the SSRF guard.
//! - `crawl_policy`: what the crawls of a process share: plans, robots.txt, per-host
//!   politeness (in process, or shared through Redis).
//! - `search_providers`: the web search providers of a process: configuration checks, the
//!   answers' cache, each provider's pace, failover, metrics.
//! - `deps`: [`deps::Deps`], the immutable bundle of shared parts, and the runner's settings.
//! - `browser_pages`: pages the browser took (a browse job's final page, `archive` actions)
//!   extracted and stored like fetched pages.
//! - `crawl`: seeds and followed links → fetch jobs, counters, completion.
//! - `web_search`: web search as every surface calls it (`search`, `images`) and a search
//!   job's top results → fetch jobs of its batch.
//! - `runner`: dequeue → run → persist result keyed by job id → ack; retries and dead jobs.
//! - `fetch_now`: one URL now, for a caller that waits: the cache, else a queued job awaited
//!   (`POST /v1/fetch`, `trawl fetch`).
//! - `archive`: the archive pool: pending pages → chunks → tantivy index, responses → WARC.
//! - `sessions`: agent sessions: a browser context per session, previews, the replay log.
//!   `session_hosts`: sessions on other workers (registry and routing).
//! - `api`: the HTTP API (axum), its errors, auth and OpenAPI document.
//! - `mcp`: the MCP server (rmcp): trawl's capabilities as tools and stored pages as
//!   resources, over stdio (`trawl mcp`) or streamable HTTP (`/mcp` on the API).
//! - `config`: trawl.toml < `TRAWL_*` env < flags, composed of every module's settings.
//! - `app`: [`app::App`], the one place that opens the parts from the configuration, starts
//!   pools and servers on them and shuts everything down in order.
//! - `cli`: one file per subcommand, each building an `App`.
//!
//! Invariants: sqlx is imported by `store` and `queue` only, apalis by `queue` and `runner`
//! only, redis by `queue` and `crawl_policy` (the shared politeness gate) only, axum by `api`
//! (and `mcp`, whose HTTP transport it mounts, and `app`, which serves it) only. The runner alone persists the outcomes of queued jobs, keyed
//! by job id, so a job delivered twice records one result (`browser_pages` records the jobs
//! of pages taken by `archive` actions already ended). Jobs carry ids, URLs and options, never page
//! bodies.

pub mod api;
pub mod app;
pub mod archive;
pub mod browser_pages;
pub mod cache;
pub mod cli;
pub mod config;
pub mod crawl;
pub mod crawl_policy;
pub mod deps;
pub mod fetch_now;
pub mod mcp;
pub mod metrics;
pub mod pages;
pub mod queue;
pub mod runner;
pub mod search_providers;
pub mod secret;
pub mod session_hosts;
pub mod sessions;
pub mod shutdown;
pub mod store;
pub mod telemetry;
pub mod tenant;
pub mod web_search;
pub mod webhooks;
