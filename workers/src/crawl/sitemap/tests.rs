//! Tests of sitemap parsing: urlsets, sitemap indexes and plain-text files, gzip (corrupt,
//! bombs), the protocol's limits, malformed input, and where a crawl looks for sitemaps.

use std::io::Write as _;

use flate2::Compression;
use flate2::write::GzEncoder;

use super::*;

fn parse(body: &str) -> Sitemap {
    parse_sitemap(body.as_bytes(), &SitemapLimits::default()).expect("sitemap parses")
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    // Best compression, as a bomb's author would use: zlib-rs's fastest level keeps 16 MB of
    // one repeated byte at 160 KB, too big for the bomb test's premise.
    let mut encoder = GzEncoder::new(Vec::new(), Compression::best());
    encoder.write_all(bytes).expect("in-memory write");
    encoder.finish().expect("in-memory write")
}

fn locs(sitemap: &Sitemap) -> Vec<&str> {
    sitemap.urls.iter().map(|url| url.loc.as_str()).collect()
}

const URLSET: &str = r#"<?xml version="1.0" encoding="UTF-8"?>
<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"
        xmlns:image="http://www.google.com/schemas/sitemap-image/1.1">
  <url>
    <loc>https://example.com/</loc>
    <lastmod>2024-05-01</lastmod>
    <changefreq>daily</changefreq>
    <priority>1.0</priority>
  </url>
  <url>
    <loc>
      https://example.com/search?a=1&amp;b=2&#38;c=&#x33;
    </loc>
    <image:image><image:loc>https://cdn.example.com/photo.jpg</image:loc></image:image>
    <lastmod>2024-05-02T10:00:00+00:00</lastmod>
  </url>
  <url><loc><![CDATA[https://example.com/cdata?x=<y>]]></loc></url>
  <url><loc>/relative/path</loc></url>
  <url><loc>ftp://example.com/file</loc></url>
  <url><loc>javascript:alert(1)</loc></url>
  <url><lastmod>2024-01-01</lastmod></url>
  <url><loc></loc></url>
  <url><loc/></url>
</urlset>
"#;

#[test]
fn urlset_gives_locs_and_lastmods_and_skips_bad_locs() {
    let sitemap = parse(URLSET);
    assert_eq!(sitemap.format, SitemapFormat::UrlSet);
    assert!(!sitemap.gzipped);
    assert_eq!(
        locs(&sitemap),
        [
            "https://example.com/",
            "https://example.com/search?a=1&b=2&c=3",
            "https://example.com/cdata?x=%3Cy%3E",
        ]
    );
    assert_eq!(sitemap.urls[0].lastmod.as_deref(), Some("2024-05-01"));
    assert_eq!(
        sitemap.urls[1].lastmod.as_deref(),
        Some("2024-05-02T10:00:00+00:00")
    );
    assert_eq!(sitemap.urls[2].lastmod, None);
    assert!(sitemap.sitemaps.is_empty());
    assert_eq!(sitemap.skipped, 6);
    assert_eq!(sitemap.over_limit, 0);
    assert_eq!(sitemap.errors, 0);
}

#[test]
fn sitemap_index_lists_nested_sitemaps() {
    let sitemap = parse(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
  <sitemap><loc>https://example.com/sitemap-pages.xml</loc><lastmod>2024-05-01</lastmod></sitemap>
  <sitemap><loc>https://cdn.example.net/sitemap-posts.xml.gz</loc></sitemap>
  <sitemap><loc>sitemap-relative.xml</loc></sitemap>
</sitemapindex>"#,
    );
    assert_eq!(sitemap.format, SitemapFormat::Index);
    assert!(sitemap.urls.is_empty());
    let nested: Vec<&str> = sitemap.sitemaps.iter().map(Url::as_str).collect();
    assert_eq!(
        nested,
        [
            "https://example.com/sitemap-pages.xml",
            "https://cdn.example.net/sitemap-posts.xml.gz"
        ]
    );
    assert_eq!(sitemap.skipped, 1);
}

#[test]
fn prefixed_namespaces_are_read_by_local_name() {
    let sitemap = parse(
        r#"<sm:urlset xmlns:sm="http://www.sitemaps.org/schemas/sitemap/0.9">
<sm:url><sm:loc>https://example.com/a</sm:loc><sm:lastmod>2020-01-01</sm:lastmod></sm:url>
</sm:urlset>"#,
    );
    assert_eq!(locs(&sitemap), ["https://example.com/a"]);
    assert_eq!(sitemap.urls[0].lastmod.as_deref(), Some("2020-01-01"));
}

#[test]
fn gzip_is_detected_by_magic_bytes() {
    let compressed = gzip(URLSET.as_bytes());
    let sitemap =
        parse_sitemap(&compressed, &SitemapLimits::default()).expect("gzip sitemap parses");
    assert!(sitemap.gzipped);
    assert_eq!(sitemap.format, SitemapFormat::UrlSet);
    assert_eq!(sitemap.urls.len(), 3);

    // Concatenated members are one stream (`cat a.gz b.gz`).
    let half = URLSET.len() / 2;
    let mut members = gzip(&URLSET.as_bytes()[..half]);
    members.extend_from_slice(&gzip(&URLSET.as_bytes()[half..]));
    let joined = parse_sitemap(&members, &SitemapLimits::default()).expect("members parse");
    assert_eq!(joined.urls, sitemap.urls);
}

#[test]
fn corrupt_gzip_is_a_typed_error() {
    let mut compressed = gzip(URLSET.as_bytes());
    let middle = compressed.len() / 2;
    compressed.truncate(middle);
    let error =
        parse_sitemap(&compressed, &SitemapLimits::default()).expect_err("truncated gzip fails");
    assert!(matches!(error, SitemapError::Gzip(_)), "{error:?}");
    assert_eq!(error.code(), ErrorCode::ExtractionFailed);

    let garbage = [0x1f, 0x8b, 0xff, 0xff, 0xff, 0xff];
    assert!(matches!(
        parse_sitemap(&garbage, &SitemapLimits::default()),
        Err(SitemapError::Gzip(_))
    ));
}

#[test]
fn gzip_bomb_stops_at_the_cap() {
    let limits = SitemapLimits {
        max_bytes: 1024 * 1024,
        ..SitemapLimits::default()
    };
    let mut xml = b"<urlset><url><loc>https://example.com/</loc></url><url><loc>".to_vec();
    xml.resize(16 * 1024 * 1024, b' ');
    let bomb = gzip(&xml);
    assert!(bomb.len() < 100 * 1024, "compressed {} bytes", bomb.len());
    let error = parse_sitemap(&bomb, &limits).expect_err("bomb is refused");
    assert_eq!(error, SitemapError::TooLarge { limit: 1024 * 1024 });
    assert_eq!(error.code(), ErrorCode::TooLarge);

    // A text-looking bomb (one endless line) stops the same way.
    let zeros = gzip(&vec![b'a'; 16 * 1024 * 1024]);
    assert_eq!(
        parse_sitemap(&zeros, &limits),
        Err(SitemapError::TooLarge { limit: 1024 * 1024 })
    );

    // Exactly at the cap is fine.
    let exact = gzip(&vec![b' '; 1024 * 1024]);
    assert!(parse_sitemap(&exact, &limits).is_ok());
}

#[test]
fn plain_bodies_over_the_cap_are_refused() {
    let limits = SitemapLimits {
        max_bytes: 100,
        ..SitemapLimits::default()
    };
    let body = format!("{}\n", "https://example.com/page".repeat(10));
    assert_eq!(
        parse_sitemap(body.as_bytes(), &limits),
        Err(SitemapError::TooLarge { limit: 100 })
    );
}

#[test]
fn entries_beyond_the_limit_are_counted_not_kept() {
    let limits = SitemapLimits {
        max_entries: 3,
        ..SitemapLimits::default()
    };
    let mut xml = String::from("<urlset>");
    for n in 0..10 {
        xml.push_str(&format!("<url><loc>https://example.com/{n}</loc></url>"));
    }
    xml.push_str("<url><loc>relative</loc></url></urlset>");
    let sitemap = parse_sitemap(xml.as_bytes(), &limits).expect("parses");
    assert_eq!(
        locs(&sitemap),
        [
            "https://example.com/0",
            "https://example.com/1",
            "https://example.com/2"
        ]
    );
    assert_eq!(sitemap.over_limit, 7);
    assert_eq!(sitemap.skipped, 1);

    let text: String = (0..5)
        .map(|n| format!("https://example.com/{n}\n"))
        .collect();
    let sitemap = parse_sitemap(text.as_bytes(), &limits).expect("parses");
    assert_eq!(sitemap.urls.len(), 3);
    assert_eq!(sitemap.over_limit, 2);
}

#[test]
fn the_protocol_limit_is_the_default() {
    let mut xml = String::from("<urlset>");
    for n in 0..MAX_SITEMAP_ENTRIES + 5 {
        xml.push_str(&format!("<url><loc>https://example.com/{n}</loc></url>"));
    }
    xml.push_str("</urlset>");
    let sitemap = parse(&xml);
    assert_eq!(sitemap.urls.len(), MAX_SITEMAP_ENTRIES);
    assert_eq!(sitemap.over_limit, 5);
    assert_eq!(
        sitemap.urls.last().map(|url| url.loc.as_str()),
        Some("https://example.com/49999")
    );
}

#[test]
fn malformed_xml_keeps_what_was_read_and_counts_errors() {
    // Cut off in the middle of an entry.
    let truncated = parse(
        "<urlset><url><loc>https://example.com/a</loc></url><url><loc>https://example.com/b</lo",
    );
    assert_eq!(locs(&truncated), ["https://example.com/a"]);
    assert!(truncated.errors >= 1, "{truncated:?}");

    // A mismatched end tag in the middle, good entries after it.
    let mismatched = parse(
        "<urlset><url><loc>https://example.com/a</loc></url>\
         <url><loc>https://example.com/b</lastmod></url>\
         <url><loc>https://example.com/c</loc></url></urlset>",
    );
    assert_eq!(mismatched.errors, 1, "{mismatched:?}");
    assert_eq!(
        locs(&mismatched),
        [
            "https://example.com/a",
            "https://example.com/b",
            "https://example.com/c"
        ]
    );

    // An unknown entity is an error; the rest of the loc survives.
    let entity = parse("<urlset><url><loc>https://example.com/a&nbsp;b</loc></url></urlset>");
    assert_eq!(entity.errors, 1);
    assert_eq!(locs(&entity), ["https://example.com/ab"]);

    // Junk after the root element does not undo the sitemap.
    let trailing = parse(
        "<urlset><url><loc>https://example.com/a</loc></url></urlset><html><body>x</body></html>",
    );
    assert_eq!(locs(&trailing), ["https://example.com/a"]);
    assert_eq!(trailing.format, SitemapFormat::UrlSet);
    assert!(trailing.errors >= 1, "{trailing:?}");

    // Raw ampersands are tolerated.
    let raw = parse("<urlset><url><loc>https://example.com/?a=1&b=2</loc></url></urlset>");
    assert_eq!(locs(&raw), ["https://example.com/?a=1&b=2"]);
    assert_eq!(raw.errors, 0);
}

#[test]
fn garbage_never_panics() {
    let inputs: [&[u8]; 12] = [
        b"<",
        b"<<<<>>>>",
        b"<urlset",
        b"<urlset><url><loc>",
        b"<?xml version=\"1.0\"?>",
        b"<!-- never closed",
        b"<![CDATA[ never closed",
        b"<urlset><url><loc>https://a/</loc></url></urlset></urlset></urlset>",
        b"<urlset>\xff\xfe<url><loc>https://a/\xff</loc></url></urlset>",
        b"<urlset><url><loc>&#0;&#xD800;&#99999999;</loc></url></urlset>",
        b"\x00\x01\x02\x03",
        b"\xef\xbb\xbf",
    ];
    for input in inputs {
        let _ = parse_sitemap(input, &SitemapLimits::default());
    }
    let mut deep = "<urlset>".to_owned();
    deep.push_str(&"<url>".repeat(100_000));
    let _ = parse_sitemap(deep.as_bytes(), &SitemapLimits::default());
}

#[test]
fn html_and_other_roots_are_not_sitemaps() {
    let html = parse_sitemap(
        b"<!DOCTYPE html><html><head><title>Not found</title></head></html>",
        &SitemapLimits::default(),
    );
    assert_eq!(
        html,
        Err(SitemapError::NotSitemap {
            root: "html".to_owned()
        })
    );
    assert!(matches!(
        parse_sitemap(b"<rss version=\"2.0\"></rss>", &SitemapLimits::default()),
        Err(SitemapError::NotSitemap { .. })
    ));
}

#[test]
fn long_locs_are_skipped() {
    let long = format!("https://example.com/{}", "a".repeat(MAX_LOC_LEN));
    let sitemap = parse(&format!(
        "<urlset><url><loc>{long}</loc></url><url><loc>https://example.com/ok</loc></url></urlset>"
    ));
    assert_eq!(locs(&sitemap), ["https://example.com/ok"]);
    assert_eq!(sitemap.skipped, 1);
}

#[test]
fn plain_text_sitemaps_have_one_url_per_line() {
    let sitemap = parse(
        "\u{feff}https://example.com/a\r\n\n   https://example.com/b   \nnot a url\n/relative\nmailto:x@example.com\nhttps://example.com/c",
    );
    assert_eq!(sitemap.format, SitemapFormat::Text);
    assert_eq!(
        locs(&sitemap),
        [
            "https://example.com/a",
            "https://example.com/b",
            "https://example.com/c"
        ]
    );
    assert_eq!(sitemap.skipped, 3);
    assert!(sitemap.urls.iter().all(|url| url.lastmod.is_none()));

    let empty = parse("  \n\n ");
    assert_eq!(empty.format, SitemapFormat::Text);
    assert!(empty.urls.is_empty());
    assert_eq!(empty.skipped, 0);

    let binary = parse_sitemap(
        b"https://example.com/a\n\xff\xfe\n",
        &SitemapLimits::default(),
    )
    .expect("parses");
    assert_eq!(binary.urls.len(), 1);
    assert_eq!(binary.skipped, 1);

    let gzipped = parse_sitemap(&gzip(b"https://example.com/z\n"), &SitemapLimits::default())
        .expect("parses");
    assert!(gzipped.gzipped);
    assert_eq!(locs(&gzipped), ["https://example.com/z"]);
}

#[test]
fn candidates_put_robots_sitemaps_first_without_duplicates() {
    let seed = Url::parse("https://example.com/docs/start?x=1").expect("parses");
    assert_eq!(
        sitemap_candidates(&seed, None)
            .iter()
            .map(Url::as_str)
            .collect::<Vec<_>>(),
        [
            "https://example.com/sitemap.xml",
            "https://example.com/sitemap_index.xml"
        ]
    );
    let robots = Robots::parse(
        b"Sitemap: https://cdn.example.net/sitemap-1.xml.gz\n\
          Sitemap: https://example.com/sitemap.xml\n\
          Sitemap: https://cdn.example.net/sitemap-1.xml.gz#again\n",
    );
    assert_eq!(
        sitemap_candidates(&seed, Some(&robots))
            .iter()
            .map(Url::as_str)
            .collect::<Vec<_>>(),
        [
            "https://cdn.example.net/sitemap-1.xml.gz",
            "https://example.com/sitemap.xml",
            "https://example.com/sitemap_index.xml"
        ]
    );
    let mailto = Url::parse("mailto:a@example.com").expect("parses");
    assert!(sitemap_candidates(&mailto, Some(&robots)).is_empty());
}
