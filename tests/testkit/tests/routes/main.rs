//! Tests of the fixture server over raw TCP: each route answers what its docs promise,
//! including the lies (lengths, status lines, bombs), and the request log records what
//! was sent. One module per group of routes; the raw client they share is here.
//!
//! A raw client on purpose: an HTTP library would refuse or repair the very responses
//! these tests check.

mod bombs;
mod crawling;
mod hostile;
mod pages;
mod responses;
mod server;
mod webhooks;

use std::io::{self, Read};
use std::time::Duration;

use testkit::FixtureServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A response as it came off the wire: status line, headers as sent, body bytes.
pub struct Resp {
    status_line: String,
    /// The headers in the order sent, names as sent.
    pub headers: Vec<(String, String)>,
    /// Everything after the head.
    pub body: Vec<u8>,
}

impl Resp {
    /// The status code, 0 when the status line has none.
    pub fn status(&self) -> u16 {
        self.status_line
            .split_whitespace()
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0)
    }

    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Where `needle` first occurs in `haystack`.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Splits a raw response at its blank line.
pub fn split_response(raw: &[u8]) -> Resp {
    let end = find(raw, b"\r\n\r\n").expect("response has a complete head");
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().expect("a status line").to_string();
    let headers = lines
        .map(|l| {
            let (n, v) = l.split_once(':').expect("a header line has a colon");
            (n.trim().to_string(), v.trim().to_string())
        })
        .collect();
    Resp {
        status_line,
        headers,
        body: raw[end + 4..].to_vec(),
    }
}

/// Sends `method path` with a few headers and reads until the server closes (at most 30 s).
pub async fn raw_get(server: &FixtureServer, path: &str, method: &str) -> io::Result<Vec<u8>> {
    let mut s = TcpStream::connect(server.addr()).await?;
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: fixture-test\r\nX-Probe: yes\r\nConnection: close\r\n\r\n",
        server.addr()
    );
    s.write_all(req.as_bytes()).await?;
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("response within 30 s")?;
    Ok(buf)
}

/// `GET path`, split.
pub async fn get(server: &FixtureServer, path: &str) -> Resp {
    split_response(
        &raw_get(server, path, "GET")
            .await
            .expect("the server answers"),
    )
}

/// `POST path` with a JSON `body`, the body sent in two writes so that the server puts it
/// together from both reads.
pub async fn raw_post(server: &FixtureServer, path: &str, body: &[u8]) -> Resp {
    let mut s = TcpStream::connect(server.addr())
        .await
        .expect("the server accepts");
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        server.addr(),
        body.len()
    );
    // The head and the start of the body in one write, the rest later.
    let split = body.len() / 2;
    let mut first = head.into_bytes();
    first.extend_from_slice(&body[..split]);
    s.write_all(&first).await.expect("writes");
    s.flush().await.expect("writes");
    tokio::time::sleep(Duration::from_millis(20)).await;
    s.write_all(&body[split..]).await.expect("writes");
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), s.read_to_end(&mut buf))
        .await
        .expect("response within 30 s")
        .expect("reads");
    split_response(&buf)
}

/// Counts bytes and checks they are all zero.
struct ZeroCounter(usize);

impl io::Write for ZeroCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        assert!(
            buf.iter().all(|&b| b == 0),
            "bomb decompressed to non-zero bytes"
        );
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// How many bytes `reader` decodes to, asserting they are all zero.
pub fn decoded_zero_len(mut reader: impl Read) -> usize {
    let mut counter = ZeroCounter(0);
    io::copy(&mut reader, &mut counter).expect("the stream decodes");
    counter.0
}
