//! The webhook receivers: `POST` endpoints that answer `ok`, fail a fixed number of times
//! first, or take their time, so webhook delivery (retries, timeouts) can be tested. The
//! body each one received is in the server's request log.
//!
//! They check nothing about the body or its signature; tests read the log for that.

use std::io;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::request::Request;
use crate::response::Conn;
use crate::server::Ctx;

/// How many requests to `/webhook/flaky` get a 500 before it answers 200.
pub const WEBHOOK_FLAKY_FAILURES: u64 = 2;

/// How long `/webhook/slow` waits before answering.
pub const WEBHOOK_SLOW_DELAY: Duration = Duration::from_secs(30);

/// Answers `/webhook`, `/webhook/flaky` and `/webhook/slow`; `None` for any other path.
pub(super) async fn route(conn: &mut Conn, ctx: &Ctx, req: &Request) -> Option<io::Result<()>> {
    match req.path.as_str() {
        "/webhook" | "/webhook/flaky" | "/webhook/slow" => Some(webhook(conn, ctx, req).await),
        _ => None,
    }
}

/// The webhook receivers: `ok` for a POST, unless the route says otherwise.
async fn webhook(conn: &mut Conn, ctx: &Ctx, req: &Request) -> io::Result<()> {
    if !req.method.eq_ignore_ascii_case("POST") {
        return conn
            .send(
                405,
                &[
                    ("Content-Type", "text/plain; charset=utf-8"),
                    ("Allow", "POST"),
                ],
                b"method not allowed",
            )
            .await;
    }
    let flaky_requests = if req.path == "/webhook/flaky" {
        ctx.webhook_flaky_requests.fetch_add(1, Ordering::SeqCst) + 1
    } else {
        0
    };
    match req.path.as_str() {
        "/webhook/flaky" if flaky_requests <= WEBHOOK_FLAKY_FAILURES => {
            return conn
                .send(
                    500,
                    &[("Content-Type", "text/plain; charset=utf-8")],
                    b"try again",
                )
                .await;
        }
        "/webhook/slow" => tokio::time::sleep(WEBHOOK_SLOW_DELAY).await,
        _ => {}
    }
    conn.send(200, &[("Content-Type", "text/plain; charset=utf-8")], b"ok")
        .await
}
