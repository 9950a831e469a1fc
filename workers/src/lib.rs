//! trawl's pools: what a worker does with one job, as plain async functions over plain data.
//!
//! The map, bottom up (a module imports only those above it in this list):
//! - `job`: the contract. Job kinds and their JSON form, results, public error codes, and the
//!   plain data jobs carry (browser actions, device profiles, credentials, crawl scopes and
//!   URL filters, a job's proxy choice). It imports no other module of this crate.
//! - `backoff`: exponential retry delays, the one rule of both crates' retries.
//! - `web`: the toolbox. SSRF-guarded client (URL in, bounded response out), name resolution
//!   behind the guard, outbound proxies, charset decoding, HTML → main content (Readability +
//!   pruning) → markdown/text, block-page detection, PDF → text, URL normalisation.
//! - `fallback`: fallback extraction providers (Firecrawl's scrape API, a Crawl4AI server)
//!   over the guarded client, their base URLs locked and keys kept secret → what the provider
//!   read, or a typed `fallback::Error`.
//! - `fetch`: the fetch pool. `FetchJob` → `Fetched` or a typed `fetch::Error`; a page trawl
//!   cannot read rescued by a fallback provider.
//! - `crawl`: the crawl pool's parts: dedupe keys, robots.txt, sitemaps, per-host politeness
//!   (scope and URL filters are the contract's, re-exported).
//! - `browse`: the browse pool. Headless Chromium behind an SSRF-guarded egress proxy:
//!   rendering pages built by JavaScript, and running browser actions for browse jobs and
//!   sessions.
//! - `search`: web search providers over the guarded client: SearxNG's JSON API, DuckDuckGo's
//!   HTML results, instant answers and image search → results or a typed `search::Error`.
//! - `archive`: the archive pool's work: stored page → chunks → full-text index, and
//!   responses → WARC files.
//!
//! Invariants (what must not be here): no queue, no database, no HTTP server (sqlx, apalis
//! and axum live in `trawl`). Pools never persist; they return data, and the runner stores it.
//! Pools do not call each other's jobs: the browse pool's render reuses the fetch pool's
//! extraction (`fetch::extract_document`) so a rendered page is extracted like a fetched one.
//! reqwest is imported by `web` alone. Jobs carry URLs and options, never page bodies. The
//! test fixtures live outside, in the `trawl-testkit` crate (`tests/testkit`).
//!
//! Glossary: URL → response (bytes from the network) → page (text + metadata, stored) →
//! chunks (passages of a page, indexed by the archive).

pub mod archive;
pub mod backoff;
pub mod browse;
pub mod crawl;
pub mod fallback;
pub mod fetch;
pub mod job;
pub mod search;
pub mod web;
