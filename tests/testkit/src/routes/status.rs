//! The status and header routes: any status code with a small page, a 503 with
//! `Retry-After`, cookies, a CSV attachment, and an echo of the request's headers.
//!
//! They test how the client reports statuses and reads headers; none of them lies about
//! its body (the lying ones are in `hostile`).

use std::fmt::Write as _;
use std::io;

use crate::request::Request;
use crate::response::{Conn, HTML, reason, simple_page};

/// Answers the status and header routes; `None` for any other path.
pub(super) async fn route(conn: &mut Conn, req: &Request) -> Option<io::Result<()>> {
    let done = match req.path.as_str() {
        "/retry-after" => {
            let page = simple_page("Service Unavailable", "Try again in a second.");
            conn.send(
                503,
                &[("Content-Type", HTML), ("Retry-After", "1")],
                page.as_bytes(),
            )
            .await
        }
        "/setcookie" => {
            let page = simple_page("Cookies", "Two cookies were set.");
            conn.send(
                200,
                &[
                    ("Content-Type", HTML),
                    ("Set-Cookie", "trawl_session=abc123; Path=/; HttpOnly"),
                    ("Set-Cookie", "theme=dark; Max-Age=3600; Path=/"),
                ],
                page.as_bytes(),
            )
            .await
        }
        "/attachment" => {
            conn.send(
                200,
                &[
                    ("Content-Type", "text/csv; charset=utf-8"),
                    ("Content-Disposition", "attachment; filename=\"report.csv\""),
                ],
                b"id,name,count\n1,lantern,3\n2,harbor,5\n",
            )
            .await
        }
        "/echo-headers" => {
            let mut text = String::new();
            for (name, value) in &req.headers {
                let _ = writeln!(text, "{name}: {value}");
            }
            conn.send(
                200,
                &[("Content-Type", "text/plain; charset=utf-8")],
                text.as_bytes(),
            )
            .await
        }
        path => {
            let code = path
                .strip_prefix("/status/")
                .and_then(|s| s.parse::<u16>().ok())
                .filter(|code| (200..=599).contains(code))?;
            let page = simple_page(&format!("Status {code}"), reason(code));
            conn.html(code, &page).await
        }
    };
    Some(done)
}
