//! The crawl pool's building blocks: which URLs a crawl may visit and under which key it
//! dedupes them (`scope`), what a host's robots.txt allows (`robots`), which URLs its sitemaps
//! list (`sitemap`), and how fast one host may be asked (`politeness`). All but the politeness
//! gate are pure functions over URLs and bytes the caller fetched with the guarded
//! `web::Client`.
//!
//! Not here: fetching, the frontier and its seen-set (kept in the queue backend, behind a
//! port), depth and page budgets, progress counters, `rel=canonical` dedupe, and a politeness
//! budget shared between workers (`politeness::HostGate` covers one process).

pub mod politeness;
pub mod robots;
pub mod scope;
pub mod sitemap;

pub use politeness::HostGate;
pub use robots::{Robots, robots_url};
pub use scope::{Scope, UrlFilter, crawl_key};
pub use sitemap::{Sitemap, SitemapLimits, parse_sitemap, sitemap_candidates};
