//! What each path answers, in groups by role: the friendly pages and documents, redirects,
//! hostile transport (lies about lengths, bodies that drip or never end, compression bombs,
//! lying content types), charsets, statuses and headers, block pages, webhook receivers,
//! robots.txt with sitemaps, web search providers (SearxNG, DuckDuckGo) and fallback extraction
//! providers (Firecrawl, Crawl4AI).
//!
//! Each group answers the paths it knows and leaves the others alone (it returns `None`);
//! [`route`] asks them in turn and answers 404 when none knows the path. No two groups
//! claim the same path, so their order does not matter. The table of routes for users is
//! in the docs of [`FixtureServer`](crate::FixtureServer).

mod blocked;
mod charsets;
mod crawling;
mod extractors;
mod hostile;
mod pages;
mod redirects;
mod search;
mod status;
mod webhooks;

use std::io;

use crate::request::Request;
use crate::response::{Conn, simple_page};
use crate::server::Ctx;

pub use charsets::{CHARSET_TEXT, CHARSET_TEXT_JA};
pub use crawling::{ROBOTS_TXT, SITEMAP_A_PAGES};
pub use extractors::{CRAWL4AI_TOKEN, FIRECRAWL_KEY};
pub use search::{SEARCH_COOKIE, SEARCH_VQD};
pub use webhooks::{WEBHOOK_FLAKY_FAILURES, WEBHOOK_SLOW_DELAY};

/// Answers `req` on `conn`: the group that knows the path, else 404.
pub(crate) async fn route(conn: &mut Conn, ctx: &Ctx, req: &Request) -> io::Result<()> {
    if let Some(done) = pages::route(conn, ctx, req).await {
        return done;
    }
    if let Some(done) = redirects::route(conn, req).await {
        return done;
    }
    if let Some(done) = hostile::route(conn, req).await {
        return done;
    }
    if let Some(done) = charsets::route(conn, req).await {
        return done;
    }
    if let Some(done) = status::route(conn, req).await {
        return done;
    }
    if let Some(done) = blocked::route(conn, req).await {
        return done;
    }
    if let Some(done) = webhooks::route(conn, ctx, req).await {
        return done;
    }
    if let Some(done) = crawling::route(conn, ctx, req).await {
        return done;
    }
    if let Some(done) = search::route(conn, ctx, req).await {
        return done;
    }
    if let Some(done) = extractors::route(conn, ctx, req).await {
        return done;
    }
    conn.html(
        404,
        &simple_page("Not Found", "No fixture route matches this path."),
    )
    .await
}
