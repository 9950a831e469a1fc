//! Charsets, content types, statuses, headers, block pages and the header echo.

use testkit::{CHARSET_TEXT, FixtureServer};

use crate::{find, get, raw_get, split_response};

/// "café résumé" in ISO-8859-1.
const LATIN1_TEXT: &[u8] = b"caf\xe9 r\xe9sum\xe9";

/// "日本語のテキスト" in Shift_JIS.
const SJIS_TEXT: &[u8] = b"\x93\xfa\x96\x7b\x8c\xea\x82\xcc\x83\x65\x83\x4c\x83\x58\x83\x67";

#[tokio::test]
async fn charsets_and_content_types() {
    let server = FixtureServer::start().await.unwrap();
    let l1 = get(&server, "/charset/latin1-header").await;
    assert_eq!(
        l1.header("content-type"),
        Some("text/html; charset=ISO-8859-1")
    );
    let decoded: String = l1.body.iter().map(|&b| b as char).collect();
    assert!(decoded.contains(CHARSET_TEXT));
    let meta = get(&server, "/charset/latin1-meta").await;
    assert_eq!(meta.header("content-type"), Some("text/html"));
    assert!(find(&meta.body, LATIN1_TEXT).is_some());
    assert!(std::str::from_utf8(&meta.body).is_err());
    let sjis = get(&server, "/charset/sjis-meta").await;
    assert!(find(&sjis.body, SJIS_TEXT).is_some());
    assert!(sjis.text().contains("charset=Shift_JIS"));
    let bom8 = get(&server, "/charset/utf8-bom").await;
    assert!(bom8.body.starts_with(&[0xEF, 0xBB, 0xBF]));
    assert!(
        String::from_utf8(bom8.body[3..].to_vec())
            .unwrap()
            .contains(CHARSET_TEXT)
    );
    let bom16 = get(&server, "/charset/utf16-bom").await;
    assert!(bom16.body.starts_with(&[0xFF, 0xFE]));
    let units: Vec<u16> = bom16.body[2..]
        .chunks(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    assert!(String::from_utf16(&units).unwrap().contains(CHARSET_TEXT));
    let bogus = get(&server, "/charset/bogus").await;
    assert!(
        bogus
            .header("content-type")
            .unwrap()
            .contains("x-no-such-charset")
    );
    assert!(bogus.text().contains(CHARSET_TEXT));
    assert_eq!(
        get(&server, "/ctype/none").await.header("content-type"),
        None
    );
    assert_eq!(
        get(&server, "/ctype/html-as-octet")
            .await
            .header("content-type"),
        Some("application/octet-stream")
    );
    let nest = get(&server, "/nest/ulli?n=500").await.text();
    assert_eq!(nest.matches("<ul><li>").count(), 500);
    assert_eq!(nest.matches("</li></ul>").count(), 500);
    assert_eq!(
        get(&server, "/nest/div")
            .await
            .text()
            .matches("<div>")
            .count(),
        1_000
    );
}

#[tokio::test]
async fn statuses_pages_and_echo() {
    let server = FixtureServer::start().await.unwrap();
    assert_eq!(get(&server, "/status/418").await.status(), 418);
    let no_content = get(&server, "/status/204").await;
    assert_eq!(no_content.status(), 204);
    assert!(no_content.body.is_empty());
    assert_eq!(get(&server, "/status/99").await.status(), 404);
    let retry = get(&server, "/retry-after").await;
    assert_eq!(
        (retry.status(), retry.header("retry-after")),
        (503, Some("1"))
    );
    let cookies = get(&server, "/setcookie").await;
    assert_eq!(
        cookies
            .headers
            .iter()
            .filter(|(n, _)| n == "Set-Cookie")
            .count(),
        2
    );
    assert!(
        get(&server, "/attachment")
            .await
            .header("content-disposition")
            .unwrap()
            .starts_with("attachment")
    );
    let cf = get(&server, "/blocked/cloudflare").await;
    assert_eq!(cf.status(), 403);
    assert!(
        cf.text().contains("Just a moment...")
            && cf.text().contains("cf-turnstile")
            && cf.text().contains("cf-chl")
    );
    assert!(
        get(&server, "/blocked/captcha")
            .await
            .text()
            .contains("g-recaptcha")
    );
    assert!(
        get(&server, "/blocked/login")
            .await
            .text()
            .contains("type=\"password\"")
    );
    assert!(
        get(&server, "/blocked/shell")
            .await
            .text()
            .contains("<div id=\"root\"></div>")
    );
    assert!(
        get(&server, "/blocked/empty")
            .await
            .text()
            .contains("<body></body>")
    );
    for (path, ctype) in [
        ("/text.txt", "text/plain"),
        ("/data.json", "application/json"),
        ("/readme.md", "text/markdown"),
    ] {
        assert!(
            get(&server, path)
                .await
                .header("content-type")
                .unwrap()
                .starts_with(ctype)
        );
    }
    assert_eq!(get(&server, "/no/such/page").await.status(), 404);
    let echo = get(&server, "/echo-headers").await;
    assert!(echo.text().contains("x-probe: yes\n"));
    assert!(echo.text().contains("user-agent: fixture-test\n"));
    // Absolute-form targets are reduced to the path.
    let abs = format!("http://{}/text.txt?x=1", server.addr());
    assert_eq!(
        split_response(&raw_get(&server, &abs, "GET").await.unwrap()).status(),
        200
    );
    assert_eq!(
        server.requests().last().unwrap().path_and_query,
        "/text.txt?x=1"
    );
}
