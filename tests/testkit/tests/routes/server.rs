//! The server's frame: the request log, the 431 for an oversized head, and stopping on drop.

use std::time::Duration;

use testkit::FixtureServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::get;

#[tokio::test]
async fn index_and_request_log() {
    let server = FixtureServer::start().await.unwrap();
    assert!(server.url("/x").starts_with("http://127.0.0.1:"));
    let resp = get(&server, "/").await;
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.header("connection"), Some("close"));
    assert_eq!(
        resp.header("content-length").unwrap(),
        resp.body.len().to_string()
    );
    let text = resp.text();
    for n in 1..=3 {
        assert!(text.contains(&format!("href=\"/article/{n}\"")));
    }
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].method, "GET");
    assert_eq!(reqs[0].path_and_query, "/");
    assert_eq!(reqs[0].header("x-probe"), Some("yes"));
    assert!(reqs[0].headers.iter().any(|(n, _)| n == "user-agent"));
    assert_eq!(server.hits("/"), 1);
    assert_eq!(server.hits("/article"), 0);
}

#[tokio::test]
async fn oversized_request_head_gets_431() {
    let server = FixtureServer::start().await.unwrap();
    let mut s = TcpStream::connect(server.addr()).await.unwrap();
    let req = format!("GET / HTTP/1.1\r\nX-Big: {}\r\n\r\n", "b".repeat(70 * 1024));
    // The server may answer before reading everything; ignore write errors.
    let _ = s.write_all(req.as_bytes()).await;
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf).await;
    assert!(buf.starts_with(b"HTTP/1.1 431 "));
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn drop_stops_the_server() {
    let server = FixtureServer::start().await.unwrap();
    let addr = server.addr();
    assert_eq!(get(&server, "/").await.status(), 200);
    drop(server);
    // Let the runtime run the abort.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(TcpStream::connect(addr).await.is_err());
}
