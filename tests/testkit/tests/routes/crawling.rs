//! robots.txt and the sitemaps name the host the client asked for.

use std::io::Read;

use testkit::{FixtureServer, SITEMAP_A_PAGES};

use crate::get;

#[tokio::test]
async fn robots_and_sitemaps_name_the_requested_host() {
    let server = FixtureServer::start().await.unwrap();
    let origin = format!("http://{}", server.addr());
    let robots = get(&server, "/robots.txt").await;
    assert_eq!(robots.status(), 200);
    assert!(
        robots
            .header("content-type")
            .unwrap()
            .starts_with("text/plain")
    );
    assert!(robots.text().contains("User-agent: trawl\n"));
    assert!(
        robots
            .text()
            .contains(&format!("Sitemap: {origin}/sitemap-index.xml\n")),
        "{}",
        robots.text()
    );
    server.set_robots(
        503,
        "User-agent: *\nDisallow: /x\nSitemap: {origin}/s.xml\n",
    );
    let changed = get(&server, "/robots.txt").await;
    assert_eq!(changed.status(), 503);
    assert!(
        changed
            .text()
            .ends_with(&format!("Sitemap: {origin}/s.xml\n"))
    );

    let urlset = get(&server, "/sitemap.xml").await;
    assert_eq!(
        urlset.header("content-type"),
        Some("application/xml; charset=utf-8")
    );
    assert!(
        urlset
            .text()
            .contains(&format!("<loc>{origin}/article/3</loc>"))
    );
    let index = get(&server, "/sitemap-index.xml").await;
    assert!(
        index
            .text()
            .contains(&format!("<loc>{origin}/sitemap-a.xml.gz</loc>"))
    );
    let gz = get(&server, "/sitemap-a.xml.gz").await;
    assert_eq!(gz.header("content-type"), Some("application/gzip"));
    assert_eq!(gz.header("content-encoding"), None);
    let mut xml = String::new();
    flate2::read::GzDecoder::new(&gz.body[..])
        .read_to_string(&mut xml)
        .unwrap();
    assert_eq!(xml.matches("<url>").count() as u64, SITEMAP_A_PAGES);
    assert!(xml.contains(&format!("<loc>{origin}/site/99</loc>")));
    let text = get(&server, "/sitemap.txt").await;
    assert_eq!(text.text().lines().count(), 5);
    let bomb = get(&server, "/sitemap-bomb.xml.gz").await;
    assert!(bomb.body.starts_with(&[0x1f, 0x8b]));
    assert!(bomb.body.len() < 1024 * 1024);
}
