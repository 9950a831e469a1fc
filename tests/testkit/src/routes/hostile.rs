//! The hostile routes: responses that lie or misbehave on the wire. Compression bombs, a
//! body of any size, bodies that never end or drip a byte every two seconds, a head sent a
//! byte a second, silence, huge and numerous headers, a malformed status line,
//! `Content-Length` lies, both `Transfer-Encoding` and `Content-Length`, a reset mid-body, and
//! content types that lie about the body.
//!
//! These write the response by hand where a well-formed one would not do. They never harm
//! the server itself: each misbehaves on its own connection until the client gives up.

use std::fmt::Write as _;
use std::io;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::bombs::Bomb;
use crate::documents;
use crate::request::Request;
use crate::response::{Conn, HTML, simple_page, status_line};

/// Answers the hostile routes; `None` for any other path.
pub(super) async fn route(conn: &mut Conn, req: &Request) -> Option<io::Result<()>> {
    let done = match req.path.as_str() {
        "/bomb/gzip" => bomb(conn, Bomb::Gzip).await,
        "/bomb/deflate" => bomb(conn, Bomb::Deflate).await,
        "/bomb/br" => bomb(conn, Bomb::Brotli).await,
        "/bomb/zstd" => bomb(conn, Bomb::Zstd).await,
        "/bomb/nested" => bomb(conn, Bomb::Nested).await,
        "/big" => {
            let n = req
                .query("bytes")
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(1 << 20);
            let status = req
                .query("status")
                .and_then(|v| v.parse::<u16>().ok())
                .unwrap_or(200);
            let fill = match req.query("fill") {
                Some("script") => Fill::Script,
                Some("text") => Fill::Text,
                _ => Fill::Paragraphs,
            };
            big(conn, n, status, fill).await
        }
        "/te-and-cl" => {
            // Both framings: a chunked body of 28 bytes that also claims a length of 5.
            let head = format!(
                "{}Content-Type: {HTML}\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\nConnection: close\r\n\r\n",
                status_line(200)
            );
            raw(
                conn,
                head.as_bytes(),
                b"1c\r\n<p>both framings at once</p>\r\n0\r\n\r\n",
            )
            .await
        }
        "/chunked-forever" => chunked_forever(conn).await,
        "/drip" => drip(conn).await,
        "/slow-headers" => slow_headers(conn).await,
        "/silent" => silent(conn).await,
        "/huge-header" => {
            let value = "a".repeat(1024 * 1024);
            conn.send(
                200,
                &[("Content-Type", HTML), ("X-Huge", &value)],
                b"<p>huge header</p>",
            )
            .await
        }
        "/many-headers" => many_headers(conn).await,
        "/bad-status" => {
            let body = b"<p>bad status</p>";
            let head = format!(
                "HTTP/1.1 abc Nope\r\nContent-Type: {HTML}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            raw(conn, head.as_bytes(), body).await
        }
        "/cl-lie-small" => {
            let head = format!(
                "{}Content-Type: {HTML}\r\nContent-Length: 10\r\nConnection: close\r\n\r\n",
                status_line(200)
            );
            raw(conn, head.as_bytes(), &filler(5_000)).await
        }
        "/cl-lie-big" => {
            let head = format!(
                "{}Content-Type: {HTML}\r\nContent-Length: 100000\r\nConnection: close\r\n\r\n",
                status_line(200)
            );
            raw(conn, head.as_bytes(), b"0123456789").await
        }
        "/reset-midway" => reset_midway(conn).await,
        "/ctype/png-as-html" => {
            conn.send(200, &[("Content-Type", HTML)], documents::png())
                .await
        }
        "/ctype/html-as-octet" => {
            let page = simple_page(
                "Octet HTML",
                "An HTML page labelled application/octet-stream.",
            );
            conn.send(
                200,
                &[("Content-Type", "application/octet-stream")],
                page.as_bytes(),
            )
            .await
        }
        "/ctype/none" => {
            let page = simple_page(
                "No content type",
                "An HTML page without a Content-Type header.",
            );
            conn.send(200, &[], page.as_bytes()).await
        }
        _ => return None,
    };
    Some(done)
}

/// Writes `head` and `body` as they are, whatever they claim.
async fn raw(conn: &mut Conn, head: &[u8], body: &[u8]) -> io::Result<()> {
    conn.raw(head).await?;
    conn.raw(body).await
}

/// A compression bomb as `text/html` with a truthful `Content-Length` (its compressed size).
async fn bomb(conn: &mut Conn, bomb: Bomb) -> io::Result<()> {
    let body = bomb.body().await?;
    conn.send(
        200,
        &[
            ("Content-Type", HTML),
            ("Content-Encoding", bomb.content_encoding()),
        ],
        body,
    )
    .await
}

/// Never writes; waits for the client to close (or the server to drop).
async fn silent(conn: &mut Conn) -> io::Result<()> {
    let mut buf = [0u8; 1024];
    while conn.stream.read(&mut buf).await? > 0 {}
    Ok(())
}

/// 10,000 headers `X-Many-{i}: {i}`, then a small body.
async fn many_headers(conn: &mut Conn) -> io::Result<()> {
    let mut head = status_line(200);
    for i in 0..10_000 {
        let _ = write!(head, "X-Many-{i}: {i}\r\n");
    }
    let body = b"<p>many headers</p>";
    let _ = write!(
        head,
        "Content-Type: {HTML}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    raw(conn, head.as_bytes(), body).await
}

/// Half of the promised 10,000 bytes, a pause, then a TCP reset instead of the rest.
async fn reset_midway(conn: &mut Conn) -> io::Result<()> {
    let head = format!(
        "{}Content-Type: {HTML}\r\nContent-Length: 10000\r\nConnection: close\r\n\r\n",
        status_line(200)
    );
    raw(conn, head.as_bytes(), &filler(5_000)).await?;
    conn.stream.flush().await?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    conn.reset_on_drop()
}

/// `n` bytes of HTML-ish filler (no closing tags guaranteed).
fn filler(n: usize) -> Vec<u8> {
    const START: &[u8] = b"<!DOCTYPE html><html><head><title>Filler</title></head><body>\n";
    const LINE: &[u8] = b"<p>Filler text for size and length tests, repeated as needed.</p>\n";
    let mut out = Vec::with_capacity(n);
    out.extend_from_slice(&START[..START.len().min(n)]);
    while out.len() < n {
        let take = LINE.len().min(n - out.len());
        out.extend_from_slice(&LINE[..take]);
    }
    out
}

/// What `/big` is made of.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fill {
    /// HTML paragraphs of filler text.
    Paragraphs,
    /// One paragraph, then a `<script>` that never ends: an HTML page of scripts.
    Script,
    /// The paragraphs' lines as `text/plain`.
    Text,
}

/// Exactly `n` bytes of filler with a truthful `Content-Length`, in 64 KiB writes, under
/// `status`.
async fn big(conn: &mut Conn, n: u64, status: u16, fill: Fill) -> io::Result<()> {
    let content_type = if fill == Fill::Text {
        "text/plain; charset=utf-8"
    } else {
        HTML
    };
    let head = format!(
        "{}Content-Type: {content_type}\r\nContent-Length: {n}\r\nConnection: close\r\n\r\n",
        status_line(status)
    );
    conn.raw(head.as_bytes()).await?;
    if conn.head_only {
        return Ok(());
    }
    const BLOCK: usize = 64 * 1024;
    let (first, rest) = if fill == Fill::Script {
        const START: &[u8] = b"<!DOCTYPE html><html><head><title>Scripts</title></head><body>\n\
                               <p>The one paragraph a reader sees on this page of scripts.</p>\n\
                               <script>\n";
        const LINE: &[u8] = b"var filler = [1, 2, 3]; // an inline bundle, as big as it gets\n";
        let rest: Vec<u8> = LINE.iter().copied().cycle().take(BLOCK).collect();
        let mut first = START.to_vec();
        first.extend_from_slice(&rest[..BLOCK - START.len()]);
        (first, rest)
    } else {
        // Later blocks: the same line pattern without the document start.
        const LINE: &[u8] = b"<p>Filler text for size and length tests, repeated as needed.</p>\n";
        (
            filler(BLOCK),
            LINE.iter().copied().cycle().take(BLOCK).collect(),
        )
    };
    let mut left = n;
    let mut block = &first;
    while left > 0 {
        let take = left.min(BLOCK as u64) as usize;
        conn.raw(&block[..take]).await?;
        left -= take as u64;
        block = &rest;
    }
    Ok(())
}

/// A chunked body, one small chunk every 10 ms, until the client leaves.
async fn chunked_forever(conn: &mut Conn) -> io::Result<()> {
    let head = format!(
        "{}Content-Type: {HTML}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
        status_line(200)
    );
    conn.raw(head.as_bytes()).await?;
    if conn.head_only {
        return Ok(());
    }
    let start = b"<!DOCTYPE html><html><body>\n";
    conn.raw(format!("{:x}\r\n", start.len()).as_bytes())
        .await?;
    conn.raw(start).await?;
    conn.raw(b"\r\n").await?;
    let mut i: u64 = 0;
    loop {
        let piece = format!("<p>chunk {i}</p>\n");
        conn.raw(format!("{:x}\r\n{piece}\r\n", piece.len()).as_bytes())
            .await?;
        i += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The head at once, then the 100-byte body one byte every 2 s.
async fn drip(conn: &mut Conn) -> io::Result<()> {
    const BODY: &[u8] = b"<!DOCTYPE html><html><body><p>drip drip drip drip drip drip drip drip drip drip drip</p></body></html>";
    let body = &BODY[..100];
    let head = format!(
        "{}Content-Type: {HTML}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        status_line(200),
        body.len()
    );
    conn.raw(head.as_bytes()).await?;
    if conn.head_only {
        return Ok(());
    }
    for byte in body {
        tokio::time::sleep(Duration::from_secs(2)).await;
        conn.raw(std::slice::from_ref(byte)).await?;
    }
    Ok(())
}

/// The status line at once, then the rest of the head and a 2-byte body, a byte a second.
async fn slow_headers(conn: &mut Conn) -> io::Result<()> {
    conn.raw(status_line(200).as_bytes()).await?;
    let rest = format!(
        "X-Slow: {}\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok",
        "a".repeat(40)
    );
    for byte in rest.as_bytes() {
        tokio::time::sleep(Duration::from_secs(1)).await;
        conn.raw(std::slice::from_ref(byte)).await?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Charset fixtures
// ---------------------------------------------------------------------------
