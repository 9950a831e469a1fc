//! HTTP/1 heads as the proxy sees them: the browser's request head (parsed with httparse,
//! bounded in size and header count), the CONNECT authority, the request head rewritten for
//! the origin (origin-form, hop-by-hop headers dropped, `Connection: close`), and the origin's
//! response heads forwarded with `Connection: close`.
//!
//! Not here: bodies (passed through as bytes by `splice`), HTTP/2, chunked decoding.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use url::{Host, Url};

use super::Limits;
use super::refusal::{Refusal, error_answer};

/// Largest response head (status line and headers) accepted from an origin for a plain-http
/// request; the head is parsed to force `Connection: close` towards the browser.
const RESPONSE_HEAD_CAP: usize = 256 * 1024;

/// Most request headers accepted from the browser.
const MAX_REQUEST_HEADERS: usize = 128;

/// Most response headers accepted from an origin.
const MAX_RESPONSE_HEADERS: usize = 256;

/// Request headers never forwarded to the origin (compared case-insensitively); the proxy adds
/// its own `Connection: close`.
const HOP_BY_HOP_REQUEST: [&str; 4] = [
    "proxy-connection",
    "proxy-authorization",
    "connection",
    "keep-alive",
];

/// Response headers replaced by `Connection: close` towards the browser.
const HOP_BY_HOP_RESPONSE: [&str; 3] = ["proxy-connection", "connection", "keep-alive"];

/// A parsed request head.
pub(super) struct RequestHead {
    pub(super) method: String,
    pub(super) target: String,
    pub(super) version: u8,
    /// Name and raw value of every header, in order.
    pub(super) headers: Vec<(String, Vec<u8>)>,
    /// Bytes of the head, the blank line included.
    pub(super) len: usize,
}

/// Parses a request head from the start of `buf`: `Ok(None)` while incomplete.
fn parse_request_head(buf: &[u8], cap: usize) -> Result<Option<RequestHead>, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_REQUEST_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            if len > cap {
                return Err(Refusal::HeadTooLarge);
            }
            let (Some(method), Some(target), Some(version)) =
                (request.method, request.path, request.version)
            else {
                return Err(Refusal::BadRequest("incomplete request line"));
            };
            Ok(Some(RequestHead {
                method: method.to_owned(),
                target: target.to_owned(),
                version,
                headers: request
                    .headers
                    .iter()
                    .map(|header| (header.name.to_owned(), header.value.to_vec()))
                    .collect(),
                len,
            }))
        }
        Ok(httparse::Status::Partial) if buf.len() >= cap => Err(Refusal::HeadTooLarge),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(Refusal::HeadTooLarge),
        Err(_) => Err(Refusal::BadRequest("malformed request head")),
    }
}

/// Reads the request head; returns it with the bytes read after it.
pub(super) async fn read_request_head(
    client: &mut TcpStream,
    limits: &Limits,
) -> Result<(RequestHead, Vec<u8>), Refusal> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let deadline = tokio::time::Instant::now() + limits.idle_timeout;
    loop {
        if let Some(head) = parse_request_head(&buf, limits.head_bytes)? {
            let rest = buf.split_off(head.len);
            return Ok((head, rest));
        }
        let mut chunk = [0u8; 8192];
        let read = tokio::time::timeout_at(deadline, client.read(&mut chunk)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) if buf.is_empty() => return Err(Refusal::Closed),
            Ok(Ok(0)) => return Err(Refusal::BadRequest("request head cut short")),
            Ok(Ok(n)) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Ok(Err(_)) => return Err(Refusal::Closed),
            Err(_) if buf.is_empty() => return Err(Refusal::Closed),
            Err(_) => return Err(Refusal::BadRequest("request head too slow")),
        }
    }
}

/// Parses a CONNECT authority (`host:port`, IPv6 in brackets); the host is normalised by the
/// `url` crate exactly as in a URL.
pub(super) fn parse_authority(authority: &str) -> Option<(Host<String>, u16)> {
    if authority.bytes().any(|b| {
        matches!(b, b'/' | b'?' | b'#' | b'@' | b'\\' | b'%')
            || b.is_ascii_whitespace()
            || b.is_ascii_control()
    }) {
        return None;
    }
    let (host, port) = authority.rsplit_once(':')?;
    if host.is_empty() || port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let port: u16 = port.parse().ok()?;
    let url = Url::parse(&format!("http://{host}/")).ok()?;
    if url.port().is_some() || url.path() != "/" || !url.username().is_empty() {
        return None;
    }
    Some((url.host()?.to_owned(), port))
}

/// The request head as sent to the origin: origin-form target, proxy and hop-by-hop headers
/// dropped, `Connection: close` forced, Host kept as sent (added from the URL if missing).
pub(super) fn rewrite_request_head(
    head: &RequestHead,
    url: &Url,
    host: &Host<String>,
    port: u16,
) -> Vec<u8> {
    let mut path = url.path().to_owned();
    if let Some(query) = url.query() {
        path.push('?');
        path.push_str(query);
    }
    let mut out = format!("{} {path} HTTP/1.{}\r\n", head.method, head.version).into_bytes();
    let mut has_host = false;
    for (name, value) in &head.headers {
        if HOP_BY_HOP_REQUEST
            .iter()
            .any(|drop| name.eq_ignore_ascii_case(drop))
        {
            continue;
        }
        has_host |= name.eq_ignore_ascii_case("host");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    if !has_host {
        let host_header = match url.port() {
            Some(_) => format!("Host: {host}:{port}\r\n"),
            None => format!("Host: {host}\r\n"),
        };
        out.extend_from_slice(host_header.as_bytes());
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// A parsed response head.
struct ResponseHead {
    len: usize,
    /// Final (`>= 200`, or `101`) rather than interim.
    is_final: bool,
    /// What to send to the browser.
    bytes: Vec<u8>,
}

fn parse_response_head(buf: &[u8]) -> io::Result<Option<ResponseHead>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let code = response.code.ok_or_else(|| invalid("no status"))?;
            let raw = buf.get(..len).ok_or_else(|| invalid("head length"))?;
            if (100..200).contains(&code) {
                return Ok(Some(ResponseHead {
                    len,
                    is_final: code == 101,
                    bytes: raw.to_vec(),
                }));
            }
            let version = response.version.unwrap_or(1);
            let reason = response.reason.unwrap_or_default();
            let mut bytes = format!("HTTP/1.{version} {code} {reason}\r\n").into_bytes();
            for header in response.headers.iter() {
                if HOP_BY_HOP_RESPONSE
                    .iter()
                    .any(|drop| header.name.eq_ignore_ascii_case(drop))
                {
                    continue;
                }
                bytes.extend_from_slice(header.name.as_bytes());
                bytes.extend_from_slice(b": ");
                bytes.extend_from_slice(header.value);
                bytes.extend_from_slice(b"\r\n");
            }
            bytes.extend_from_slice(b"Connection: close\r\n\r\n");
            Ok(Some(ResponseHead {
                len,
                is_final: true,
                bytes,
            }))
        }
        Ok(httparse::Status::Partial) if buf.len() >= RESPONSE_HEAD_CAP => {
            Err(invalid("response head too large"))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(error) => Err(invalid(&format!("malformed response head: {error}"))),
    }
}

/// Forwards interim heads as they are and the final head with `Connection: close`, then the
/// body bytes read with it. An origin that closes without a byte gets the same from the proxy;
/// an unusable head gets a `502` (when nothing was forwarded yet).
pub(super) async fn forward_response_head<R, W>(origin: &mut R, client: &mut W) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut forwarded = false;
    loop {
        let parsed = match parse_response_head(&buf) {
            Ok(parsed) => parsed,
            Err(error) => {
                if !forwarded {
                    let answer = error_answer(
                        "502 Bad Gateway",
                        ("X-Trawl-Error", "protocol_error"),
                        "trawl: unusable response from origin",
                    );
                    let _ = client.write_all(&answer).await;
                }
                return Err(error);
            }
        };
        if let Some(head) = parsed {
            client.write_all(&head.bytes).await?;
            forwarded = true;
            buf.drain(..head.len);
            if head.is_final {
                return client.write_all(&buf).await;
            }
            continue;
        }
        let mut chunk = [0u8; 8192];
        let n = origin.read(&mut chunk).await?;
        if n == 0 {
            if buf.is_empty() {
                return Ok(());
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "origin closed inside the response head",
            ));
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
}
