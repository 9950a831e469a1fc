//! The friendly routes: the index's articles, the PDF and PNG documents, the `/site/` pages.

use testkit::{FixtureServer, article_page, article_title, site_page};

use crate::get;

#[tokio::test]
async fn article_page_has_the_expected_structure() {
    let server = FixtureServer::start().await.unwrap();
    let resp = get(&server, "/article/2").await;
    assert_eq!(resp.status(), 200);
    let html = resp.text();
    assert_eq!(html, article_page(2, &server.url("")));
    for needle in [
        "<html lang=\"en\">",
        "<meta name=\"description\"",
        "<meta name=\"author\"",
        "<meta property=\"article:published_time\"",
        "<link rel=\"canonical\"",
        "<article>",
        "<nav",
        "<footer",
        "<aside",
        "cookie-banner",
        "<pre><code",
        "<table>",
        "<ul>",
    ] {
        assert!(html.contains(needle), "missing {needle}");
    }
    assert!(html.contains(&format!("<h1>{}</h1>", article_title(2))));
    assert!(html.matches("<h2>").count() >= 4);
    assert!(html.contains(&format!("{}/article/2\"", server.url(""))));
    assert_eq!(article_page(7, "http://x"), article_page(7, "http://x"));
    assert_ne!(article_title(1), article_title(2));
}

#[tokio::test]
async fn pdf_is_well_formed() {
    let server = FixtureServer::start().await.unwrap();
    let resp = get(&server, "/pdf/ok").await;
    assert_eq!(resp.header("content-type"), Some("application/pdf"));
    let pdf = resp.body;
    assert!(pdf.starts_with(b"%PDF-1.4"));
    assert!(pdf.ends_with(b"%%EOF\n"));
    let text = String::from_utf8_lossy(&pdf).into_owned();
    assert!(text.contains("(Page one text) Tj") && text.contains("(Page two text) Tj"));
    // startxref points at the xref keyword.
    let sx = text.rfind("startxref\n").unwrap();
    let xref_off: usize = text[sx + 10..].lines().next().unwrap().parse().unwrap();
    assert!(pdf[xref_off..].starts_with(b"xref\n0 9\n"));
    // Every in-use entry points at its "N 0 obj".
    let tail = String::from_utf8_lossy(&pdf[xref_off..]).into_owned();
    let entries: Vec<&str> = tail.lines().skip(3).take(8).collect();
    for (i, entry) in entries.iter().enumerate() {
        assert_eq!(
            entry.len(),
            19,
            "an xref entry is 20 bytes with its newline"
        );
        let off: usize = entry[..10].parse().unwrap();
        assert!(pdf[off..].starts_with(format!("{} 0 obj\n", i + 1).as_bytes()));
    }
    // Stream lengths are right.
    for obj in text.split("<< /Length ").skip(1) {
        let len: usize = obj.split_whitespace().next().unwrap().parse().unwrap();
        let start = obj.find("stream\n").unwrap() + 7;
        assert_eq!(&obj[start + len..start + len + 10], "\nendstream");
    }
    let broken = get(&server, "/pdf/broken").await;
    assert_eq!(broken.header("content-type"), Some("application/pdf"));
    assert!(!broken.body.starts_with(b"%PDF"));
}

#[tokio::test]
async fn png_is_real() {
    let server = FixtureServer::start().await.unwrap();
    let resp = get(&server, "/image.png").await;
    assert_eq!(resp.header("content-type"), Some("image/png"));
    assert!(resp.body.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(resp.body.ends_with(b"IEND\xaeB`\x82"));
    let as_html = get(&server, "/ctype/png-as-html").await;
    assert!(
        as_html
            .header("content-type")
            .unwrap()
            .starts_with("text/html")
    );
    assert_eq!(as_html.body, resp.body);
}

#[tokio::test]
async fn site_pages_are_deterministic_and_sized() {
    let mut large = 0;
    for n in (0..120).chain([999_999, 123_456, 500_000]) {
        let page = site_page(n);
        assert!(
            (5 * 1024..=150_000).contains(&page.len()),
            "site_page({n}) is {} bytes",
            page.len()
        );
        assert_eq!(page, site_page(n));
        assert_eq!(
            page.matches("<a href=\"/site/").count(),
            5,
            "site_page({n}) links"
        );
        assert!(!page.contains(&format!("<a href=\"/site/{n}\">")));
        if page.len() > 60_000 {
            large += 1;
        }
    }
    assert!(large > 10 && large < 70, "{large} large pages");
    let server = FixtureServer::start().await.unwrap();
    let resp = get(&server, "/site/42").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text(), site_page(42));
    assert_eq!(get(&server, "/site/1000000").await.status(), 404);
    assert_eq!(server.hits("/site/"), 2);
}
