//! `web::Client::post`, the webhook transport: the same SSRF guard as GET, no redirects
//! followed, a small response-body limit, the total time limit, and headers checked before
//! anything is sent.

use bytes::Bytes;
use trawl_workers::job::ErrorCode;
use trawl_workers::web::{Policy, client};

use crate::Site;

const BODY: &[u8] = br#"{"type":"completed","data":{}}"#;

async fn post_code(site: &Site, url: &str, headers: &[(&str, &str)]) -> Result<u16, ErrorCode> {
    let parsed = site.client.parse_url(url).map_err(|error| error.code())?;
    site.client
        .post(&parsed, headers, Bytes::from_static(BODY))
        .await
        .map(|response| response.status)
        .map_err(|error| error.code())
}

#[tokio::test]
async fn webhook_post_delivers_the_body_and_headers_through_a_public_name() {
    let site = Site::start().await;
    let url = site.client.parse_url(&site.url("/webhook")).expect("url");
    let response = site
        .client
        .post(
            &url,
            &[
                ("content-type", "application/json"),
                ("trawl-event", "completed"),
                ("user-agent", "trawl-test"),
            ],
            Bytes::from_static(BODY),
        )
        .await
        .expect("post succeeds");
    assert_eq!(response.status, 200);
    assert_eq!(&response.body[..], b"ok");
    assert_eq!(response.hops, vec![url.clone()]);
    assert_eq!(response.final_url, url);
    let recorded = site.server.requests().pop().expect("one request");
    assert_eq!(recorded.method, "POST");
    assert_eq!(recorded.body, BODY);
    assert_eq!(recorded.header("content-type"), Some("application/json"));
    assert_eq!(recorded.header("trawl-event"), Some("completed"));
    // A header given to post replaces the client's default of the same name.
    assert_eq!(recorded.header("user-agent"), Some("trawl-test"));
    assert_eq!(
        recorded.header("content-length"),
        Some(BODY.len().to_string().as_str())
    );
}

#[tokio::test]
async fn webhook_post_refuses_blocked_destinations_before_sending() {
    let site = Site::start().await;
    let port = site.server.addr().port();
    for url in [
        format!("http://127.0.0.1:{port}/webhook"),
        format!("http://localhost:{port}/webhook"),
        site.url_on("private.test", "/webhook"),
        site.url_on("metadata.test", "/webhook"),
    ] {
        assert_eq!(
            post_code(&site, &url, &[]).await,
            Err(ErrorCode::BlockedDestination),
            "{url}"
        );
    }
    assert_eq!(site.server.hits("/webhook"), 0);
    // The same check applies to a URL built without parse_url.
    let url = url::Url::parse(&format!("http://127.0.0.1:{port}/webhook")).expect("url");
    let error = site
        .client
        .post(&url, &[], Bytes::from_static(BODY))
        .await
        .expect_err("blocked");
    assert_eq!(error.code(), ErrorCode::BlockedDestination);
    assert_eq!(site.server.hits("/webhook"), 0);
}

#[tokio::test]
async fn webhook_post_to_loopback_works_when_the_policy_allows_it() {
    let site = Site::start_with(
        Policy {
            allow_private_network: true,
            ..Policy::default()
        },
        client::Config::default(),
    )
    .await;
    let url = site.server.url("/webhook");
    assert_eq!(post_code(&site, &url, &[]).await, Ok(200));
    assert_eq!(site.server.hits("/webhook"), 1);
}

#[tokio::test]
async fn webhook_post_returns_redirects_without_following_them() {
    let site = Site::start().await;
    let url = site.url("/redirect?to=/webhook&code=307");
    assert_eq!(post_code(&site, &url, &[]).await, Ok(307));
    assert_eq!(site.server.hits("/webhook"), 0);
}

#[tokio::test]
async fn webhook_post_reads_at_most_64_kib_of_the_response() {
    let site = Site::start().await;
    let small = site.url(&format!("/big?bytes={}", client::POST_RESPONSE_MAX_BYTES));
    assert_eq!(post_code(&site, &small, &[]).await, Ok(200));
    let large = site.url(&format!(
        "/big?bytes={}",
        client::POST_RESPONSE_MAX_BYTES + 1
    ));
    assert_eq!(
        post_code(&site, &large, &[]).await,
        Err(ErrorCode::TooLarge)
    );
}

#[tokio::test]
async fn webhook_post_to_a_slow_receiver_times_out() {
    let site = Site::start().await;
    let started = std::time::Instant::now();
    assert_eq!(
        post_code(&site, &site.url("/webhook/slow"), &[]).await,
        Err(ErrorCode::Timeout)
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
}

#[tokio::test]
async fn webhook_post_refuses_bad_headers_before_sending() {
    let site = Site::start().await;
    for headers in [
        [("bad name", "x")],
        [("x-signature", "line\nbreak")],
        [("content-length", "1")],
        [("host", "other.test")],
    ] {
        assert_eq!(
            post_code(&site, &site.url("/webhook"), &headers).await,
            Err(ErrorCode::Internal),
            "{headers:?}"
        );
    }
    assert_eq!(site.server.hits("/webhook"), 0);
}
