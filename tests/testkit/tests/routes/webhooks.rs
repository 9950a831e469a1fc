//! The webhook receivers: bodies recorded, non-POSTs refused, the flaky count, the slow wait.

use std::time::Duration;

use testkit::FixtureServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{get, raw_post};

#[tokio::test]
async fn webhook_routes_record_bodies_and_fail_twice_when_flaky() {
    let server = FixtureServer::start().await.unwrap();
    let body = br#"{"type":"completed","job_id":"01J","data":{"n":1}}"#;
    let ok = raw_post(&server, "/webhook", body).await;
    assert_eq!((ok.status(), ok.text().as_str()), (200, "ok"));
    let recorded = server.requests().pop().unwrap();
    assert_eq!(recorded.method, "POST");
    assert_eq!(recorded.body, body.to_vec());
    assert_eq!(recorded.header("content-type"), Some("application/json"));
    // A GET is recorded with an empty body and refused.
    let get_webhook = get(&server, "/webhook").await;
    assert_eq!(get_webhook.status(), 405);
    assert_eq!(get_webhook.header("allow"), Some("POST"));
    assert!(server.requests().pop().unwrap().body.is_empty());
    assert_eq!(get(&server, "/webhook/flaky").await.status(), 405);
    let flaky: Vec<u16> = {
        let mut statuses = Vec::new();
        for _ in 0..4 {
            statuses.push(raw_post(&server, "/webhook/flaky", body).await.status());
        }
        statuses
    };
    assert_eq!(flaky, [500, 500, 200, 200]);
    // The count is per server.
    let other = FixtureServer::start().await.unwrap();
    assert_eq!(
        raw_post(&other, "/webhook/flaky", b"{}").await.status(),
        500
    );
    // /webhook/slow says nothing for a while.
    let mut s = TcpStream::connect(server.addr()).await.unwrap();
    s.write_all(b"POST /webhook/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    assert!(
        tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf))
            .await
            .is_err()
    );
    assert_eq!(server.hits("/webhook/slow"), 1);
}
