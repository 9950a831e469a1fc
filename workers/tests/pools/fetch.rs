//! The fetch pool end to end against friendly and hostile routes: every failure ends in its
//! typed code, quickly, and no hostile response takes the process down.

use std::time::{Duration, Instant};

use testkit::{CHARSET_TEXT, CHARSET_TEXT_JA, article_title};
use trawl_workers::fetch::{self, Deps, Fetched};
use trawl_workers::job::{ErrorCode, Extractor, FetchJob, Format};

use crate::Site;

fn deps(site: &Site) -> Deps {
    Deps::new(site.client.clone(), fetch::Config::default()).expect("no providers")
}

async fn fetch_path(site: &Site, path: &str) -> Result<Fetched, fetch::Error> {
    fetch_with(site, path, Format::Markdown).await
}

async fn fetch_with(site: &Site, path: &str, format: Format) -> Result<Fetched, fetch::Error> {
    let job = FetchJob {
        format,
        ..FetchJob::new(site.url(path))
    };
    fetch::run(&job, &deps(site)).await
}

async fn code_of(site: &Site, path: &str) -> ErrorCode {
    match fetch_path(site, path).await {
        Ok(fetched) => panic!("{path} should fail, got {:?}", fetched.info),
        Err(error) => error.code(),
    }
}

#[tokio::test]
async fn an_article_becomes_markdown_with_title_links_meta_and_outline() {
    let site = Site::start().await;
    let fetched = fetch_path(&site, "/article/1")
        .await
        .expect("article fetches");
    let info = &fetched.info;
    assert_eq!(info.status, 200);
    assert_eq!(info.extractor, Extractor::Readability);
    assert_eq!(info.content_type, "text/html");
    assert!(
        info.title
            .as_deref()
            .unwrap_or_default()
            .contains(&article_title(1)),
        "{:?}",
        info.title
    );
    assert!(
        fetched.text.contains("## "),
        "markdown headings kept: {}",
        &fetched.text[..200.min(fetched.text.len())]
    );
    assert!(!info.outline.is_empty());
    assert!(
        info.links
            .iter()
            .all(|link| link.starts_with("http://site.test:")),
        "{:?}",
        info.links
    );
    assert!(info.links.iter().all(|link| !link.contains('#')));
    assert_eq!(info.meta.lang.as_deref(), Some("en"));
    assert!(info.meta.description.is_some());
    assert!(info.meta.canonical.is_some());
    assert!(info.meta.published.is_some());
    assert!(info.meta.author.is_some());
    assert!(
        !fetched.text.to_lowercase().contains("cookie"),
        "the cookie banner is boilerplate"
    );
    assert!(!fetched.raw.is_empty());

    let text = fetch_with(&site, "/article/1", Format::Text)
        .await
        .expect("text");
    assert!(!text.text.contains("## "));
    let html = fetch_with(&site, "/article/1", Format::Html)
        .await
        .expect("html");
    assert!(html.text.contains("<p"));
}

#[tokio::test]
async fn requests_look_like_a_browser() {
    let site = Site::start().await;
    let fetched = fetch_path(&site, "/echo-headers").await.expect("echo");
    let headers = fetched.text.to_lowercase();
    assert!(headers.contains("user-agent: mozilla/5.0"), "{headers}");
    assert!(headers.contains("chrome/"), "{headers}");
    assert!(headers.contains("accept-language: en-us"), "{headers}");
}

#[tokio::test]
async fn custom_headers_reach_the_origin_and_only_identity_ones_cross_to_another() {
    let site = Site::start().await;
    let port = site.server.addr().port();
    let headers: trawl_workers::job::CustomHeaders = [
        ("X-Service-Token", "tok-123"),
        ("User-Agent", "trawl-test/1"),
    ]
    .into_iter()
    .collect();
    let echoed = |path: String| {
        let job = FetchJob {
            headers: headers.clone(),
            ..FetchJob::new(site.url(&path))
        };
        let deps = deps(&site);
        async move {
            fetch::run(&job, &deps)
                .await
                .expect("echoed")
                .text
                .to_lowercase()
        }
    };
    let direct = echoed("/echo-headers".to_owned()).await;
    assert!(direct.contains("x-service-token: tok-123"), "{direct}");
    assert!(direct.contains("user-agent: trawl-test/1"), "{direct}");
    // The same origin after a redirect still gets them.
    let same = echoed("/redirect?to=/echo-headers&code=302".to_owned()).await;
    assert!(same.contains("x-service-token: tok-123"), "{same}");
    // Another origin gets the identity headers only.
    let other = echoed(format!(
        "/redirect?to=http://other.test:{port}/echo-headers&code=302"
    ))
    .await;
    assert!(!other.contains("x-service-token"), "{other}");
    assert!(other.contains("user-agent: trawl-test/1"), "{other}");
    // Names trawl sets are refused before anything is sent.
    for name in ["Host", "Cookie", "Content-Length", "Transfer-Encoding"] {
        let job = FetchJob {
            headers: [(name, "x")].into_iter().collect(),
            ..FetchJob::new(site.url("/echo-headers"))
        };
        let error = job.validate().expect_err(name);
        assert!(error.contains(&name.to_ascii_lowercase()), "{error}");
    }
}

#[tokio::test]
async fn decompression_bombs_stop_at_the_decoded_byte_limit() {
    let site = Site::start().await;
    for path in [
        "/bomb/gzip",
        "/bomb/br",
        "/bomb/deflate",
        "/bomb/zstd",
        "/bomb/nested",
    ] {
        let started = Instant::now();
        let code = code_of(&site, path).await;
        assert!(
            matches!(
                code,
                ErrorCode::TooLarge | ErrorCode::ProtocolError | ErrorCode::UnsupportedContentType
            ),
            "{path}: {code}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{path} took {:?}",
            started.elapsed()
        );
    }
    // Plain gzip, br, deflate and zstd must be caught by the limit itself.
    for path in ["/bomb/gzip", "/bomb/br", "/bomb/deflate", "/bomb/zstd"] {
        assert_eq!(code_of(&site, path).await, ErrorCode::TooLarge, "{path}");
    }
}

#[tokio::test]
async fn bodies_over_the_limit_are_refused_and_under_it_accepted() {
    let site = Site::start().await;
    // Not HTML: refused at the limit, as declared.
    assert_eq!(
        code_of(&site, "/big?bytes=800000&fill=text").await,
        ErrorCode::TooLarge
    );
    // A never-ending body ends at the byte limit or the time limit, whichever comes first.
    let started = Instant::now();
    let endless = code_of(&site, "/chunked-forever").await;
    assert!(
        matches!(endless, ErrorCode::TooLarge | ErrorCode::Timeout),
        "{endless}"
    );
    assert!(started.elapsed() < Duration::from_secs(8));
    let fetched = fetch_path(&site, "/big?bytes=700000")
        .await
        .expect("under the limit");
    assert!(fetched.raw.len() == 700_000);
    assert!(!fetched.info.reduced && !fetched.info.truncated);
}

/// Issue 20: an HTML page over `http.max_bytes` is kept. Its scripts are dropped as it
/// streams; what is left, when still over the limit, is cut there with `truncated`; a page
/// that is nearly all script is read up to `http.max_decoded_bytes` and no further.
#[tokio::test]
async fn big_html_pages_are_reduced_or_cut_never_lost() {
    let site = Site::start().await;
    // 2 MB, nearly all one inline script: the paragraph is what is kept.
    let fetched = fetch_path(&site, "/big?bytes=2000000&fill=script")
        .await
        .expect("kept");
    assert!(fetched.info.reduced && !fetched.info.truncated);
    assert!(fetched.raw.len() < 1_000, "{}", fetched.raw.len());
    assert!(
        fetched.text.contains("The one paragraph a reader sees"),
        "{}",
        fetched.text
    );
    let warning = fetched.info.warning.clone().expect("a warning");
    assert!(warning.contains("dropped"), "{warning}");
    let result = fetch::build_result(&fetched.info, &fetched.text, "p", "h", false, 100_000);
    assert!(!result.content.truncated);
    // 2 MB of paragraphs: nothing to drop, so cut at the limit and the rest not read.
    let fetched = fetch_path(&site, "/big?bytes=2000000")
        .await
        .expect("kept, cut");
    assert!(fetched.info.reduced && fetched.info.truncated);
    assert_eq!(fetched.raw.len(), 750_000);
    assert!(fetched.text.contains("Filler text"));
    assert!(
        fetched
            .info
            .warning
            .as_deref()
            .expect("a warning")
            .contains("truncated")
    );
    let result = fetch::build_result(&fetched.info, &fetched.text, "p", "h", false, 10_000_000);
    assert!(result.content.truncated, "the page itself was cut");
    // 30 MB of script: past the 20 MB hard cap on decoded bytes read.
    let started = Instant::now();
    assert_eq!(
        code_of(&site, "/big?bytes=30000000&fill=script").await,
        ErrorCode::TooLarge
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn slow_and_silent_servers_time_out() {
    let site = Site::start().await;
    for path in ["/drip", "/slow-headers", "/silent"] {
        let started = Instant::now();
        assert_eq!(code_of(&site, path).await, ErrorCode::Timeout, "{path}");
        assert!(
            started.elapsed() < Duration::from_secs(8),
            "{path} took {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn broken_protocol_and_oversized_heads_are_typed() {
    let site = Site::start().await;
    assert_eq!(
        code_of(&site, "/huge-header").await,
        ErrorCode::HeadersTooLarge
    );
    assert_eq!(
        code_of(&site, "/many-headers").await,
        ErrorCode::HeadersTooLarge
    );
    assert_eq!(
        code_of(&site, "/bad-status").await,
        ErrorCode::ProtocolError
    );
    assert_eq!(
        code_of(&site, "/cl-lie-big").await,
        ErrorCode::ProtocolError
    );
    let reset = code_of(&site, "/reset-midway").await;
    assert!(
        matches!(reset, ErrorCode::ProtocolError | ErrorCode::ConnectError),
        "{reset}"
    );
    // A Content-Length smaller than the body: the client reads what was announced.
    if let Ok(fetched) = fetch_path(&site, "/cl-lie-small").await {
        assert!(fetched.raw.len() <= 10, "read {} bytes", fetched.raw.len());
    }
}

#[tokio::test]
async fn lying_content_types_are_sniffed() {
    let site = Site::start().await;
    assert_eq!(
        code_of(&site, "/ctype/png-as-html").await,
        ErrorCode::UnsupportedContentType
    );
    assert_eq!(
        code_of(&site, "/image.png").await,
        ErrorCode::UnsupportedContentType
    );
    let octet = fetch_path(&site, "/ctype/html-as-octet")
        .await
        .expect("html behind octet-stream");
    assert_eq!(octet.info.content_type, "text/html");
    assert!(
        octet
            .info
            .warning
            .as_deref()
            .unwrap_or_default()
            .contains("labelled")
    );
    let unlabelled = fetch_path(&site, "/ctype/none")
        .await
        .expect("unlabelled html");
    assert_eq!(unlabelled.info.content_type, "text/html");
}

#[tokio::test]
async fn text_json_and_markdown_pass_through() {
    let site = Site::start().await;
    for (path, content_type) in [
        ("/text.txt", "text/plain"),
        ("/data.json", "application/json"),
        ("/readme.md", "text/markdown"),
    ] {
        let fetched = fetch_path(&site, path).await.expect(path);
        assert_eq!(fetched.info.extractor, Extractor::Passthrough, "{path}");
        assert_eq!(fetched.info.content_type, content_type);
        assert!(!fetched.text.is_empty());
    }
    let json = fetch_path(&site, "/data.json").await.expect("json");
    serde_json::from_str::<serde_json::Value>(&json.text).expect("json passes through unchanged");
}

#[tokio::test]
async fn charsets_come_from_header_meta_and_bom() {
    let site = Site::start().await;
    for path in [
        "/charset/latin1-header",
        "/charset/latin1-meta",
        "/charset/utf8-bom",
        "/charset/utf16-bom",
        "/charset/bogus",
    ] {
        let fetched = fetch_path(&site, path).await.expect(path);
        assert!(
            fetched.text.contains(CHARSET_TEXT),
            "{path}: {:?}",
            fetched.text
        );
    }
    let japanese = fetch_path(&site, "/charset/sjis-meta").await.expect("sjis");
    assert!(
        japanese.text.contains(CHARSET_TEXT_JA),
        "{:?}",
        japanese.text
    );
    let bogus = fetch_path(&site, "/charset/bogus").await.expect("bogus");
    assert!(
        bogus
            .info
            .warning
            .as_deref()
            .unwrap_or_default()
            .contains("charset")
    );
}

/// Issue "fetch hazards": a 200,000-deep page ended `extraction_limit` after the 20 s
/// timeout while its parse burned CPU for 35-43 s more. The budget refuses it before parsing.
#[tokio::test]
async fn nesting_over_the_budget_ends_extraction_limit_at_once() {
    let config = trawl_workers::web::Config {
        max_bytes: 5_000_000,
        ..trawl_workers::web::Config::default()
    };
    let site = Site::start_with(trawl_workers::web::Policy::default(), config).await;
    for path in ["/nest/div?n=200000", "/nest/ulli?n=100000"] {
        let started = Instant::now();
        let error = fetch_path(&site, path).await.expect_err(path);
        assert_eq!(error.code(), ErrorCode::ExtractionLimit, "{path}: {error}");
        assert!(!error.is_transient());
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{path} took {:?}",
            started.elapsed()
        );
    }
}

/// Issue "fetch hazards": a 500 with a 50 MB body ended `too_large` (permanent, status lost).
#[tokio::test]
async fn a_huge_error_body_keeps_its_status_and_stays_transient() {
    let site = Site::start().await;
    let started = Instant::now();
    let error = fetch_path(&site, "/big?bytes=50000000&status=500")
        .await
        .expect_err("500");
    assert_eq!(error.code(), ErrorCode::HttpStatus, "{error}");
    assert!(error.is_transient());
    assert_eq!(error.to_job_error().status, Some(500));
    assert!(started.elapsed() < Duration::from_secs(5));
    // The body is read up to the cap, not refused.
    let url = site
        .client
        .parse_url(&site.url("/big?bytes=50000000&status=503"))
        .expect("url");
    let response = site
        .client
        .get(&url, None)
        .await
        .expect("the status comes back");
    assert_eq!(response.status, 503);
    assert_eq!(
        response.body.len() as u64,
        trawl_workers::web::client::ERROR_BODY_MAX_BYTES
    );
}

/// Issue "fetch hazards": a response with both framings was accepted.
#[tokio::test]
async fn both_transfer_encoding_and_content_length_are_a_protocol_error() {
    let site = Site::start().await;
    assert_eq!(code_of(&site, "/te-and-cl").await, ErrorCode::ProtocolError);
}

/// Issue "wrong answers": HTTPS to a plain-HTTP server was `connect_error`, retried.
#[tokio::test]
async fn https_to_a_plain_http_server_is_a_permanent_tls_error() {
    let site = Site::start().await;
    let url = site.url("/article/1").replace("http://", "https://");
    let job = FetchJob::new(url);
    let error = fetch::run(&job, &deps(&site)).await.expect_err("tls");
    assert_eq!(error.code(), ErrorCode::TlsError, "{error}");
    assert!(!error.is_transient());
}

#[tokio::test]
async fn deep_nesting_neither_crashes_nor_hangs() {
    let site = Site::start().await;
    for path in ["/nest/div?n=100000", "/nest/ulli?n=50000"] {
        let started = Instant::now();
        match fetch_path(&site, path).await {
            Ok(fetched) => assert!(
                fetched.info.warning.is_some(),
                "{path}: flattening is reported"
            ),
            Err(error) => assert!(
                matches!(
                    error.code(),
                    ErrorCode::TooLarge | ErrorCode::ExtractionLimit | ErrorCode::EmptyContent
                ),
                "{path}: {error}"
            ),
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{path} took {:?}",
            started.elapsed()
        );
    }
}

#[tokio::test]
async fn pdfs_become_text_with_page_markers() {
    let site = Site::start().await;
    let fetched = fetch_path(&site, "/pdf/ok").await.expect("pdf");
    assert_eq!(fetched.info.extractor, Extractor::Pdf);
    assert!(fetched.text.contains("--- page 1 ---"), "{}", fetched.text);
    assert!(fetched.text.contains("--- page 2 ---"), "{}", fetched.text);
    assert!(fetched.text.contains("Page one text"), "{}", fetched.text);
    assert!(fetched.text.contains("Page two text"), "{}", fetched.text);
    assert_eq!(
        code_of(&site, "/pdf/broken").await,
        ErrorCode::ExtractionFailed
    );
}

#[tokio::test]
async fn error_statuses_are_typed_and_transient_when_they_should_be() {
    let site = Site::start().await;
    let not_found = fetch_path(&site, "/status/404").await.expect_err("404");
    assert_eq!(not_found.code(), ErrorCode::HttpStatus);
    assert!(!not_found.is_transient());
    assert_eq!(not_found.to_job_error().status, Some(404));
    let unavailable = fetch_path(&site, "/status/503").await.expect_err("503");
    assert!(unavailable.is_transient());
    let retry = fetch_path(&site, "/retry-after")
        .await
        .expect_err("retry-after");
    assert_eq!(retry.to_job_error().retry_after, Some(1));
}

#[tokio::test]
async fn block_pages_are_typed_outcomes_not_content() {
    let site = Site::start().await;
    for (path, code) in [
        ("/blocked/cloudflare", ErrorCode::BlockedBySite),
        ("/blocked/captcha", ErrorCode::BlockedBySite),
        ("/blocked/login", ErrorCode::LoginRequired),
        ("/blocked/shell", ErrorCode::EmptyContent),
        ("/blocked/empty", ErrorCode::EmptyContent),
    ] {
        let error = fetch_path(&site, path).await.expect_err(path);
        assert_eq!(error.code(), code, "{path}: {error}");
        assert!(
            error.to_job_error().evidence.is_some(),
            "{path} names its evidence"
        );
    }
}
