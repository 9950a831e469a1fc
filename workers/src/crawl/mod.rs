//! The crawl pool's building blocks: the key a crawl dedupes URLs by (`scope`), what a host's
//! robots.txt allows (`robots`), which URLs its sitemaps list (`sitemap`), and how fast one
//! host may be asked from one process (`politeness`). All but the politeness gate are pure
//! functions over URLs and bytes the caller fetched with the guarded `web::Client`. A crawl's
//! scope and include/exclude filters are part of the job contract (`crate::job`, checked when
//! a crawl is submitted) and re-exported here.
//!
//! Not here: fetching, the frontier (follow-up jobs in the queue, seen URLs in the store),
//! depth and page budgets, progress counters, `rel=canonical` and redirect dedupe, and the
//! politeness gate shared by every worker of a namespace (all in `trawl`'s crawl module;
//! `politeness::HostGate` covers one process).

pub mod politeness;
pub mod robots;
pub mod scope;
pub mod sitemap;

pub use politeness::HostGate;
pub use robots::{Robots, robots_url};
pub use scope::{Scope, UrlFilter, crawl_key};
pub use sitemap::{Sitemap, SitemapLimits, parse_sitemap, sitemap_candidates};
