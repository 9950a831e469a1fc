//! trawl's pools: what a worker does with one job, as plain async functions over plain data.
//!
//! The map:
//! - `job`: the contract. Job kinds and their JSON form, results, public error codes.
//! - `web`: the toolbox. SSRF-guarded client (URL in, bounded response out), charset
//!   decoding, HTML → main content (Readability + pruning) → markdown/text, block-page
//!   detection, PDF → text, URL normalisation.
//! - `fetch`: the fetch pool. `FetchJob` → `Fetched` or a typed `fetch::Error`.
//! - `crawl`: the crawl pool's parts: scope, URL filters, dedupe keys, robots.txt, sitemaps, politeness.
//!
//! Invariants (what must not be here): no queue, no database, no HTTP server (sqlx, apalis
//! and axum live in `trawl`). Pools never call each other and never persist; they return
//! data, and the runner stores it. reqwest is imported by `web` alone. Jobs carry URLs and
//! options, never page bodies.
//!
//! Glossary: URL → response (bytes from the network) → page (text + metadata, stored) →
//! chunks (archive, later).

pub mod archive;
pub mod backoff;
pub mod browse;
pub mod crawl;
pub mod fetch;
pub mod job;
pub mod web;
