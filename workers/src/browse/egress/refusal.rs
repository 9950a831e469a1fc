//! Why a request got an error answer instead of a tunnel, the answer itself (`403` with
//! `X-Trawl-Blocked`, `400`, `431`, `502` with `X-Trawl-Error`), and its accounting: blocks go
//! to the block log, other failures to the `failed` counter.
//!
//! Not here: deciding to refuse (`connect`, `http1`, the admission in the parent module).

use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Shared;
use crate::web::ssrf::BlockReason;

/// How long a refused client connection is drained after the error answer, so that the
/// answer is not lost to a reset.
const LINGER: Duration = Duration::from_secs(1);

/// Why a request got an error answer instead of a tunnel.
#[derive(Debug)]
pub(super) enum Refusal {
    /// The client went away before a complete request head; nothing to answer.
    Closed,
    /// Unparsable request, wrong form or scheme: `400`.
    BadRequest(&'static str),
    /// Request head over [`super::Limits::head_bytes`] or too many headers: `431`.
    HeadTooLarge,
    /// The policy refused the destination: `403`.
    Blocked {
        host: String,
        port: u16,
        reason: BlockReason,
        target: String,
    },
    /// The name did not resolve: `502 dns_error`.
    Dns { origin: String, message: String },
    /// No address accepted the connection: `502 connect_error`.
    Connect { origin: String, message: String },
    /// Connecting took too long: `502 timeout`.
    Timeout { origin: String },
}

/// Counts and logs a refusal and returns the answer to send.
pub(super) fn refuse(shared: &Shared, refusal: Refusal) -> Vec<u8> {
    match refusal {
        Refusal::Blocked {
            host,
            port,
            reason,
            target,
        } => {
            tracing::info!(origin = %format!("{host}:{port}"), reason = reason.as_str(),
                "egress proxy blocked destination");
            tracing::debug!(dest = %target, reason = reason.as_str(), "egress proxy blocked target");
            let body = format!("trawl: blocked destination {host} ({reason})");
            shared.record_block(host, port, reason, target);
            error_answer("403 Forbidden", ("X-Trawl-Blocked", reason.as_str()), &body)
        }
        other => {
            shared.failed.fetch_add(1, Ordering::Relaxed);
            match other {
                Refusal::BadRequest(problem) => {
                    tracing::debug!(problem, "egress proxy bad request");
                    error_answer(
                        "400 Bad Request",
                        ("X-Trawl-Error", "bad_request"),
                        &format!("trawl: bad proxy request ({problem})"),
                    )
                }
                Refusal::HeadTooLarge => {
                    tracing::debug!("egress proxy request head too large");
                    error_answer(
                        "431 Request Header Fields Too Large",
                        ("X-Trawl-Error", "headers_too_large"),
                        "trawl: request head too large",
                    )
                }
                Refusal::Dns { origin, message } => {
                    tracing::debug!(%origin, %message, "egress proxy dns failure");
                    error_answer(
                        "502 Bad Gateway",
                        ("X-Trawl-Error", "dns_error"),
                        &format!("trawl: dns lookup failed for {origin}"),
                    )
                }
                Refusal::Connect { origin, message } => {
                    tracing::debug!(%origin, %message, "egress proxy connect failure");
                    error_answer(
                        "502 Bad Gateway",
                        ("X-Trawl-Error", "connect_error"),
                        &format!("trawl: cannot connect to {origin}"),
                    )
                }
                Refusal::Timeout { origin } => {
                    tracing::debug!(%origin, "egress proxy connect timeout");
                    error_answer(
                        "502 Bad Gateway",
                        ("X-Trawl-Error", "timeout"),
                        &format!("trawl: connect to {origin} timed out"),
                    )
                }
                Refusal::Closed | Refusal::Blocked { .. } => Vec::new(),
            }
        }
    }
}

pub(super) fn error_answer(status: &str, header: (&str, &str), body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\n{}: {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        header.0,
        header.1,
        body.len()
    )
    .into_bytes()
}

/// Half-closes and drains the client for a moment, so that a client still sending (an
/// oversized head) reads the answer instead of a reset.
pub(super) async fn linger(mut client: TcpStream) {
    let _ = client.shutdown().await;
    let mut sink = [0u8; 4096];
    let mut drained = 0usize;
    let _ = tokio::time::timeout(LINGER, async {
        while drained < 1024 * 1024 {
            match client.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}
