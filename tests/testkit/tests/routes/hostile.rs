//! Redirects and the routes that lie on the wire: lengths, heads, resets, slow bodies.

use std::io;
use std::time::Duration;

use testkit::FixtureServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::{find, get, raw_get, split_response};

#[tokio::test]
async fn redirects() {
    let server = FixtureServer::start().await.unwrap();
    let r = get(&server, "/redirect?to=%2Farticle%2F2%3Fa%3D1&code=308").await;
    assert_eq!(r.status(), 308);
    assert_eq!(r.header("location"), Some("/article/2?a=1"));
    let r = get(&server, "/redirect?to=http://127.0.0.1:1/x").await;
    assert_eq!(r.status(), 302);
    assert_eq!(r.header("location"), Some("http://127.0.0.1:1/x"));
    assert_eq!(get(&server, "/redirect?code=200").await.status(), 400);
    let r = get(&server, "/redirect-chain/3").await;
    assert_eq!(r.header("location"), Some("/redirect-chain/2"));
    assert_eq!(get(&server, "/redirect-chain/0").await.status(), 200);
    assert_eq!(
        get(&server, "/loop/a").await.header("location"),
        Some("/loop/b")
    );
    assert_eq!(
        get(&server, "/loop/b").await.header("location"),
        Some("/loop/a")
    );
    let r = get(&server, "/nolocation").await;
    assert_eq!(r.status(), 302);
    assert_eq!(r.header("location"), None);
    assert_eq!(
        get(&server, "/redirect-relative").await.header("location"),
        Some("../article/1")
    );
}

#[tokio::test]
async fn content_length_lies() {
    let server = FixtureServer::start().await.unwrap();
    let small = get(&server, "/cl-lie-small").await;
    assert_eq!(small.header("content-length"), Some("10"));
    assert_eq!(small.body.len(), 5_000);
    let big = get(&server, "/cl-lie-big").await;
    assert_eq!(big.header("content-length"), Some("100000"));
    assert_eq!(big.body, b"0123456789");
    let exact = get(&server, "/big?bytes=200003").await;
    assert_eq!(exact.header("content-length"), Some("200003"));
    assert_eq!(exact.body.len(), 200_003);
    assert!(exact.body.starts_with(b"<!DOCTYPE html>"));
    let head = split_response(&raw_get(&server, "/big?bytes=5000", "HEAD").await.unwrap());
    assert_eq!(head.header("content-length"), Some("5000"));
    assert!(head.body.is_empty());
}

#[tokio::test]
async fn malformed_heads() {
    let server = FixtureServer::start().await.unwrap();
    let bad = raw_get(&server, "/bad-status", "GET").await.unwrap();
    assert!(bad.starts_with(b"HTTP/1.1 abc Nope\r\n"));
    let many = get(&server, "/many-headers").await;
    assert_eq!(
        many.headers
            .iter()
            .filter(|(n, _)| n.starts_with("X-Many-"))
            .count(),
        10_000
    );
    let huge = get(&server, "/huge-header").await;
    assert_eq!(huge.header("x-huge").unwrap().len(), 1024 * 1024);
    assert_eq!(huge.text(), "<p>huge header</p>");
}

#[tokio::test]
async fn reset_midway_breaks_the_connection() {
    let server = FixtureServer::start().await.unwrap();
    let result = raw_get(&server, "/reset-midway", "GET").await;
    match result {
        Err(e) => assert_eq!(e.kind(), io::ErrorKind::ConnectionReset),
        Ok(bytes) => {
            let resp = split_response(&bytes);
            assert!(resp.body.len() < 10_000, "got the whole body");
        }
    }
}

#[tokio::test]
async fn slow_routes_start_as_documented() {
    let server = FixtureServer::start().await.unwrap();
    // /silent writes nothing.
    let mut s = TcpStream::connect(server.addr()).await.unwrap();
    s.write_all(b"GET /silent HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 64];
    let r = tokio::time::timeout(Duration::from_millis(300), s.read(&mut buf)).await;
    assert!(r.is_err(), "silent route wrote something");
    drop(s);
    // /chunked-forever keeps sending chunks.
    let mut s = TcpStream::connect(server.addr()).await.unwrap();
    s.write_all(b"GET /chunked-forever HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    while got.len() < 2_000 {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        assert!(n > 0, "chunked-forever ended");
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got);
    assert!(text.contains("Transfer-Encoding: chunked"));
    assert!(text.contains("<p>chunk 3</p>"));
    drop(s);
    // /drip sends its head at once and no body byte within a second.
    let mut s = TcpStream::connect(server.addr()).await.unwrap();
    s.write_all(b"GET /drip HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut head = Vec::new();
    while find(&head, b"\r\n\r\n").is_none() {
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        head.extend_from_slice(&buf[..n]);
    }
    assert!(
        head.ends_with(b"\r\n\r\n"),
        "drip sent body bytes with the head"
    );
    assert!(
        tokio::time::timeout(Duration::from_secs(1), s.read(&mut buf))
            .await
            .is_err()
    );
    assert_eq!(
        server.hits("/silent") + server.hits("/chunked-forever") + server.hits("/drip"),
        3
    );
}
