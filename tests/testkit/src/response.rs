//! Writing responses by hand onto the socket: [`Conn`] sends well-formed ones (status line,
//! headers, `Content-Length`, `Connection: close`), and hands the raw socket to the routes
//! that must lie (wrong lengths, malformed status lines, resets).
//!
//! It holds no route logic and no state beyond the one connection it writes to; the small
//! HTML pages it builds (`simple_page`) are the ones every route uses for errors and notes.

use std::fmt::Write as _;
use std::io;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// The `Content-Type` of every HTML response that does not lie about its type.
pub(crate) const HTML: &str = "text/html; charset=utf-8";

/// The connection a route answers on: one response, then the server closes it.
pub(crate) struct Conn {
    pub(crate) stream: TcpStream,
    /// A `HEAD` request: send the head of the response, not its body.
    pub(crate) head_only: bool,
    /// Set when the route reset the connection: skip the graceful shutdown.
    pub(crate) reset: bool,
}

impl Conn {
    /// Writes `bytes` as they are.
    pub(crate) async fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await
    }

    /// A well-formed response with `Content-Length` (except for 204/304) and
    /// `Connection: close`. `headers` must not contain `Content-Length`.
    pub(crate) async fn send(
        &mut self,
        status: u16,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<()> {
        let bodiless = status == 204 || status == 304;
        let mut head = status_line(status);
        for (name, value) in headers {
            let _ = write!(head, "{name}: {value}\r\n");
        }
        if !bodiless {
            let _ = write!(head, "Content-Length: {}\r\n", body.len());
        }
        head.push_str("Connection: close\r\n\r\n");
        self.stream.write_all(head.as_bytes()).await?;
        if !bodiless && !self.head_only {
            self.stream.write_all(body).await?;
        }
        Ok(())
    }

    /// A well-formed HTML response.
    pub(crate) async fn html(&mut self, status: u16, body: &str) -> io::Result<()> {
        self.send(status, &[("Content-Type", HTML)], body.as_bytes())
            .await
    }

    /// A redirect with a small HTML body naming the target.
    pub(crate) async fn redirect(&mut self, status: u16, location: &str) -> io::Result<()> {
        let body = format!(
            "<!DOCTYPE html><html><head><title>Redirect</title></head>\
             <body><p>Moved to <a href=\"{0}\">{0}</a>.</p></body></html>",
            escape(location)
        );
        self.send(
            status,
            &[("Content-Type", HTML), ("Location", location)],
            body.as_bytes(),
        )
        .await
    }

    /// Abort the connection with a TCP RST when the socket is dropped.
    pub(crate) fn reset_on_drop(&mut self) -> io::Result<()> {
        self.reset = true;
        self.stream.set_zero_linger()
    }
}

/// `HTTP/1.1 {status} {reason}\r\n`, with the canonical reason phrase (`Status` for a code
/// that has none).
pub(crate) fn status_line(status: u16) -> String {
    format!("HTTP/1.1 {status} {}\r\n", reason(status))
}

/// The canonical reason phrase of `status`, `Status` when it has none.
pub(crate) fn reason(status: u16) -> &'static str {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|status| status.canonical_reason())
        .unwrap_or("Status")
}

/// `s` with the HTML metacharacters escaped, for text and attribute values.
pub(crate) fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A minimal HTML page: `title` as `<title>` and `<h1>`, `text` as one paragraph.
pub(crate) fn simple_page(title: &str, text: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{0}</title></head>\
         <body><h1>{0}</h1><p>{1}</p></body></html>",
        escape(title),
        escape(text)
    )
}
