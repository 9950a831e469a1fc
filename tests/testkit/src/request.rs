//! Reading one HTTP/1.1 request head off a socket and parsing it: the request line, the
//! headers (names lowercased), the target reduced to origin form, the query decoded.
//!
//! Deliberately small and lenient, since the fixture's job is to misbehave on the response
//! side: no chunked request bodies, no header continuation lines, no validation of the
//! method or version beyond their presence. The body is read by `server`, not here.

use std::io;

use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// Largest request head the server accepts before answering 431.
const MAX_HEAD: usize = 64 * 1024;

/// A parsed request head.
pub(crate) struct Request {
    /// As sent (`GET`, `HEAD`, `POST`, ...).
    pub(crate) method: String,
    /// The target in origin form (`/path?query#fragment` as sent).
    pub(crate) path_and_query: String,
    /// The path alone, no query, no fragment, not percent-decoded.
    pub(crate) path: String,
    query: Vec<(String, String)>,
    /// In the order received, names lowercased, values trimmed.
    pub(crate) headers: Vec<(String, String)>,
    /// The body, read by `server` after the head (empty until then, and without a
    /// `Content-Length`).
    pub(crate) body: Vec<u8>,
}

impl Request {
    /// The first percent-decoded value of query parameter `key`.
    pub(crate) fn query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of the first header named `name` (lowercase).
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What came before the blank line, or why nothing usable did.
pub(crate) enum Head {
    /// The head (without the blank line) and whatever followed it.
    Complete(Vec<u8>, Vec<u8>),
    TooLarge,
    Closed,
    /// The client spoke TLS (a handshake record) to this plain-HTTP server.
    Tls,
}

/// Reads until the end of the head (`\r\n\r\n`), giving up past 64 KiB.
pub(crate) async fn read_head(stream: &mut TcpStream) -> io::Result<Head> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 4096];
    loop {
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Ok(Head::Closed);
        }
        // 0x16 opens a TLS handshake record: an https client at a plain-HTTP port.
        if buf.is_empty() && chunk[0] == 0x16 {
            return Ok(Head::Tls);
        }
        let searched_from = buf.len().saturating_sub(3);
        buf.extend_from_slice(&chunk[..n]);
        if let Some(pos) = find(&buf[searched_from..], b"\r\n\r\n") {
            let end = searched_from + pos;
            let rest = buf[end + 4..].to_vec();
            buf.truncate(end);
            if end > MAX_HEAD {
                return Ok(Head::TooLarge);
            }
            return Ok(Head::Complete(buf, rest));
        }
        if buf.len() > MAX_HEAD {
            return Ok(Head::TooLarge);
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// The request line and headers, or `None` when they are malformed.
pub(crate) fn parse_head(head: &[u8]) -> Option<Request> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next()?.split_whitespace();
    let method = request_line.next()?.to_string();
    let target = request_line.next()?;
    let _version = request_line.next()?;
    if request_line.next().is_some() {
        return None;
    }
    let path_and_query = origin_form(target);
    let without_fragment = path_and_query.split('#').next().unwrap_or_default();
    let (path, query) = match without_fragment.split_once('?') {
        Some((p, q)) => (p.to_string(), parse_query(q)),
        None => (without_fragment.to_string(), Vec::new()),
    };
    let mut headers = Vec::new();
    for line in lines {
        let (name, value) = line.split_once(':')?;
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    Some(Request {
        method,
        path_and_query,
        path,
        query,
        headers,
        body: Vec::new(),
    })
}

/// `http://host:port/p?q` → `/p?q`; anything else unchanged.
fn origin_form(target: &str) -> String {
    for scheme in ["http://", "https://"] {
        if let Some(rest) = target.strip_prefix(scheme) {
            return match rest.find('/') {
                Some(i) => rest[i..].to_string(),
                None => "/".to_string(),
            };
        }
    }
    target.to_string()
}

fn parse_query(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect()
}

fn percent_decode(s: &str) -> String {
    fn hex(b: u8) -> Option<u8> {
        match b {
            b'0'..=b'9' => Some(b - b'0'),
            b'a'..=b'f' => Some(b - b'a' + 10),
            b'A'..=b'F' => Some(b - b'A' + 10),
            _ => None,
        }
    }
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && i + 2 < bytes.len()
            && let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2]))
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------
// Connection handling and responses
