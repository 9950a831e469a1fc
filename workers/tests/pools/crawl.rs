//! The crawl building blocks over real HTTP: robots.txt and sitemaps fetched from the fixture
//! server through the guarded client (as `site.test`, under the default policy) and parsed.

use std::time::{Duration, Instant};

use testkit::SITEMAP_A_PAGES;
use trawl_workers::crawl::robots::{self, Access, Robots, robots_url};
use trawl_workers::crawl::scope::Scope;
use trawl_workers::crawl::sitemap::{
    self, Sitemap, SitemapError, SitemapFormat, SitemapLimits, parse_sitemap,
};
use trawl_workers::web;
use url::Url;

use crate::Site;

fn url(input: &str) -> Url {
    Url::parse(input).expect("test url parses")
}

async fn fetch_robots(site: &Site, page: &Url) -> Robots {
    let result = site
        .client
        .get(&robots_url(page), Some(robots::FETCH_MAX_BYTES))
        .await;
    Robots::from_fetch(&result)
}

async fn fetch_sitemap(site: &Site, location: &Url) -> Result<Sitemap, SitemapError> {
    let response = site
        .client
        .get(location, Some(10 * 1024 * 1024))
        .await
        .expect("sitemap fetches");
    assert_eq!(response.status, 200, "{location}");
    parse_sitemap(&response.body, &SitemapLimits::default())
}

fn locs(sitemap: &Sitemap) -> Vec<String> {
    sitemap
        .urls
        .iter()
        .map(|entry| entry.loc.to_string())
        .collect()
}

#[tokio::test]
async fn the_fixture_robots_txt_governs_trawl() {
    let site = Site::start().await;
    let page = url(&site.url("/article/1"));
    let robots = fetch_robots(&site, &page).await;
    assert_eq!(site.server.hits("/robots.txt"), 1);
    assert_eq!(robots.access(), Access::Parsed);
    // The `trawl` group applies, not `*` (which disallows everything).
    assert!(robots.allowed(&page));
    assert!(robots.allowed(&url(&site.url("/"))));
    assert!(!robots.allowed(&url(&site.url("/private/page"))));
    assert!(robots.allowed(&url(&site.url("/private/open"))));
    assert!(!robots.allowed(&url(&site.url("/private/open/more"))));
    assert!(!robots.allowed(&url(&site.url("/files/report.pdf"))));
    assert!(robots.allowed(&url(&site.url("/files/report.pdf?v=2"))));
    assert_eq!(robots.crawl_delay(), Some(Duration::from_secs(1)));
    assert_eq!(
        robots.sitemaps(),
        [url(&site.url("/sitemap-index.xml"))],
        "the sitemap line names the host the client asked for"
    );
}

#[tokio::test]
async fn missing_and_failing_robots_txt_follow_rfc_9309() {
    let site = Site::start().await;
    let page = url(&site.url("/article/1"));

    site.server.set_robots(404, "not found");
    let missing = fetch_robots(&site, &page).await;
    assert_eq!(missing.access(), Access::Unavailable);
    assert!(missing.allowed(&page));

    site.server.set_robots(503, "User-agent: *\nAllow: /\n");
    let failing = fetch_robots(&site, &page).await;
    assert_eq!(failing.access(), Access::Unreachable);
    assert!(!failing.allowed(&page));
    assert_eq!(failing.max_age(0), robots::unreachable_retry(0));

    site.server.set_robots(429, "");
    assert_eq!(
        fetch_robots(&site, &page).await.access(),
        Access::Unreachable
    );

    // A name that does not resolve: unreachable, so nothing may be fetched.
    let nowhere = url(&site.url_on("nowhere.test", "/article/1"));
    let unresolved = fetch_robots(&site, &nowhere).await;
    assert_eq!(unresolved.access(), Access::Unreachable);
    assert!(!unresolved.allowed(&nowhere));

    // A robots.txt larger than the fetch limit is refused by the client: unreachable.
    site.server.set_robots(200, &"# padding\n".repeat(60_000));
    assert_eq!(
        fetch_robots(&site, &page).await.access(),
        Access::Unreachable
    );
    assert_eq!(site.server.hits("/robots.txt"), 4);
}

#[tokio::test]
async fn robots_txt_is_fetched_through_the_ssrf_guard() {
    // The same fixture addressed as 127.0.0.1 is refused by the default policy: the robots.txt
    // is unreachable and the host stays closed, with no request reaching the server.
    let site = Site::start().await;
    let direct = url(&site.server.url("/article/1"));
    let result = site
        .client
        .get(&robots_url(&direct), Some(robots::FETCH_MAX_BYTES))
        .await;
    assert!(
        matches!(
            result,
            Err(web::client::Error::Url(_) | web::client::Error::Blocked { .. })
        ),
        "{result:?}"
    );
    let robots = Robots::from_fetch(&result);
    assert_eq!(robots.access(), Access::Unreachable);
    assert!(!robots.allowed(&direct));
    assert_eq!(site.server.hits("/robots.txt"), 0);
}

#[tokio::test]
async fn a_urlset_sitemap_parses_into_page_urls() {
    let site = Site::start().await;
    let parsed = fetch_sitemap(&site, &url(&site.url("/sitemap.xml")))
        .await
        .expect("sitemap parses");
    assert_eq!(parsed.format, SitemapFormat::UrlSet);
    assert!(!parsed.gzipped);
    assert_eq!(
        locs(&parsed),
        [
            site.url("/"),
            site.url("/article/1"),
            site.url("/article/2"),
            site.url("/article/3"),
        ]
    );
    assert_eq!(parsed.urls[0].lastmod.as_deref(), Some("2024-05-01"));
    assert_eq!(
        parsed.urls[1].lastmod.as_deref(),
        Some("2024-05-02T10:00:00+00:00")
    );
    assert_eq!(parsed.skipped, 2, "the relative and the ftp entries");
    assert_eq!(parsed.errors, 0);
}

#[tokio::test]
async fn a_sitemap_index_leads_to_nested_and_gzipped_sitemaps() {
    let site = Site::start().await;
    let seed = url(&site.url("/"));
    let robots = fetch_robots(&site, &seed).await;
    let candidates = sitemap::sitemap_candidates(&seed, Some(&robots));
    assert_eq!(
        candidates,
        [
            url(&site.url("/sitemap-index.xml")),
            url(&site.url("/sitemap.xml")),
            url(&site.url("/sitemap_index.xml")),
        ]
    );

    let index = fetch_sitemap(&site, &candidates[0])
        .await
        .expect("index parses");
    assert_eq!(index.format, SitemapFormat::Index);
    assert!(index.urls.is_empty());
    assert_eq!(
        index.sitemaps,
        [
            url(&site.url("/sitemap-a.xml.gz")),
            url(&site.url("/sitemap-b.xml")),
        ]
    );

    let mut pages = Vec::new();
    for nested in &index.sitemaps {
        let parsed = fetch_sitemap(&site, nested).await.expect("nested parses");
        assert_eq!(parsed.format, SitemapFormat::UrlSet);
        assert_eq!(parsed.gzipped, nested.path().ends_with(".gz"), "{nested}");
        pages.extend(locs(&parsed));
    }
    assert_eq!(pages.len() as u64, SITEMAP_A_PAGES + 3);
    assert_eq!(pages[0], site.url("/site/0"));
    assert_eq!(pages[SITEMAP_A_PAGES as usize - 1], site.url("/site/99"));
    assert_eq!(pages[SITEMAP_A_PAGES as usize], site.url("/article/1"));
    assert!(
        pages
            .iter()
            .all(|page| Scope::Host.contains(&seed, &url(page)) && robots.allowed(&url(page))),
        "every listed page is in scope and allowed"
    );
    assert_eq!(site.server.hits("/sitemap-a.xml.gz"), 1);
    assert_eq!(site.server.hits("/sitemap-b.xml"), 1);
}

#[tokio::test]
async fn a_text_sitemap_lists_one_url_per_line() {
    let site = Site::start().await;
    let parsed = fetch_sitemap(&site, &url(&site.url("/sitemap.txt")))
        .await
        .expect("text sitemap parses");
    assert_eq!(parsed.format, SitemapFormat::Text);
    assert_eq!(parsed.urls.len(), 4);
    assert_eq!(parsed.skipped, 1);
    assert_eq!(locs(&parsed)[3], site.url("/article/3"));
}

#[tokio::test]
async fn a_gzip_bomb_sitemap_stops_at_the_cap() {
    let site = Site::start().await;
    let started = Instant::now();
    let error = fetch_sitemap(&site, &url(&site.url("/sitemap-bomb.xml.gz")))
        .await
        .expect_err("the bomb is refused");
    assert_eq!(
        error,
        SitemapError::TooLarge {
            limit: sitemap::MAX_SITEMAP_BYTES
        }
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "took {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn an_html_page_is_not_a_sitemap() {
    let site = Site::start().await;
    let error = fetch_sitemap(&site, &url(&site.url("/")))
        .await
        .expect_err("html is refused");
    assert_eq!(
        error,
        SitemapError::NotSitemap {
            root: "html".to_owned()
        }
    );
}
