//! Crawl specs: seeds, scope, filters, budgets and what to do with each page.
//!
//! Not here: running a crawl (the runner and the frontier in `trawl`) or the crawl pool's parts
//! (`crate::crawl`: robots.txt, sitemaps, politeness).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::fetch::{Format, Render};
use super::proxy::Choice;
use super::scope::{Scope, UrlFilter};

/// A crawl: seeds, how far to go, and what to do with each page. Each page becomes a fetch
/// job of the crawl; links found on a page are followed when they are in scope, pass the
/// filters and robots.txt, and were not seen before.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CrawlSpec {
    /// Where to start (http or https URLs; 1 to 100).
    pub seeds: Vec<String>,
    /// Which links to follow, relative to the seed they were found from.
    #[serde(default)]
    pub scope: Scope,
    /// Only URLs whose path (and query) matches one of these globs (`*` within a segment: it
    /// stops at `/`; `**` across); none means all. The seeds are always fetched.
    #[serde(default)]
    pub include: Vec<String>,
    /// Never URLs whose path (and query) matches one of these globs (the seeds excepted).
    #[serde(default)]
    pub exclude: Vec<String>,
    /// Links followed from a seed at most this many times (0: the seeds only).
    #[serde(default = "default_max_depth")]
    #[schema(maximum = 100)]
    pub max_depth: u32,
    /// Pages fetched at most (seeds and sitemap URLs included).
    #[serde(default = "default_max_pages")]
    #[schema(minimum = 1, maximum = 1_000_000)]
    pub max_pages: u64,
    /// Also start from the sites' sitemaps (robots.txt Sitemap lines, /sitemap.xml).
    #[serde(default)]
    pub sitemap: bool,
    /// Obey robots.txt (and its Crawl-delay); on by default.
    #[serde(default = "default_true")]
    pub robots: bool,
    /// The format of each page's text. Also accepted as `extract`, its former name (for one
    /// release).
    #[serde(default, alias = "extract")]
    pub format: Format,
    /// Archive every page (search index and WARC).
    #[serde(default)]
    pub archive: bool,
    /// Render pages in headless Chromium: `true`, `false` (default) or `"auto"` (when a plain
    /// page looks built by JavaScript).
    #[serde(default, skip_serializing_if = "Render::is_off")]
    pub render: Render,
    /// The proxy its pages are fetched through (as a fetch job's `proxy`: absent for the
    /// configured ones, `"direct"`, or a proxy URL). robots.txt and sitemaps, shared by every
    /// crawl of a site, go through the configured proxies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<String>,
    /// Seconds a stored page may be served to the crawl instead of fetching it (as a fetch
    /// job's `cache_ttl`; absent: `fetch.cache_ttl_secs`; 0 always fetches).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 315_360_000)]
    pub cache_ttl: Option<u64>,
    /// An http(s) URL that receives signed `started`, `page` and `failed` events for each
    /// page and a `completed` event when the crawl ends (as a batch's webhook).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
}

fn default_max_depth() -> u32 {
    3
}

fn default_max_pages() -> u64 {
    1_000
}

fn default_true() -> bool {
    true
}

impl CrawlSpec {
    /// A crawl of `seeds` with the defaults: host scope, depth 3, 1,000 pages, robots.txt obeyed.
    pub fn new(seeds: Vec<String>) -> CrawlSpec {
        CrawlSpec {
            seeds,
            scope: Scope::default(),
            include: Vec::new(),
            exclude: Vec::new(),
            max_depth: default_max_depth(),
            max_pages: default_max_pages(),
            sitemap: false,
            robots: true,
            format: Format::default(),
            archive: false,
            render: Render::default(),
            proxy: None,
            cache_ttl: None,
            webhook: None,
        }
    }

    /// Checks the options against their bounds and the globs (the seeds are checked by the
    /// fetch client when the crawl starts).
    pub fn validate(&self) -> Result<(), String> {
        if self.seeds.is_empty() || self.seeds.len() > 100 {
            return Err(format!(
                "a crawl needs 1 to 100 seeds, not {}",
                self.seeds.len()
            ));
        }
        if self.max_depth > 100 {
            return Err(format!("max_depth {} is above 100", self.max_depth));
        }
        if self.max_pages == 0 || self.max_pages > 1_000_000 {
            return Err(format!(
                "max_pages {} is outside 1..=1000000",
                self.max_pages
            ));
        }
        if self
            .cache_ttl
            .is_some_and(|ttl| ttl > super::fetch::MAX_CACHE_TTL_SECS)
        {
            return Err(format!(
                "cache_ttl is above {} s (ten years)",
                super::fetch::MAX_CACHE_TTL_SECS
            ));
        }
        Choice::from_option(self.proxy.as_deref())?;
        UrlFilter::new(&self.include, &self.exclude)
            .map(|_| ())
            .map_err(|error| error.to_string())
    }
}
