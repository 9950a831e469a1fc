//! The redirect routes: a redirect to any URL with any 3xx code, chains of a given length,
//! a loop that never ends, a redirect without `Location`, and a relative `Location`.
//!
//! They only answer; counting hops, refusing loops and resolving relative targets is the
//! client's job, which is what these routes test.

use std::io;

use crate::request::Request;
use crate::response::{Conn, simple_page};

/// Answers the redirect routes; `None` for any other path.
pub(super) async fn route(conn: &mut Conn, req: &Request) -> Option<io::Result<()>> {
    let done = match req.path.as_str() {
        "/redirect" => {
            let to = req.query("to").unwrap_or("/");
            let code = req.query("code").unwrap_or("302");
            match code.parse::<u16>() {
                Ok(c @ (301 | 302 | 303 | 307 | 308)) => conn.redirect(c, to).await,
                _ => {
                    conn.html(
                        400,
                        &simple_page("Bad Request", "code must be 301, 302, 303, 307 or 308"),
                    )
                    .await
                }
            }
        }
        "/loop/a" => conn.redirect(302, "/loop/b").await,
        "/loop/b" => conn.redirect(302, "/loop/a").await,
        "/nolocation" => {
            conn.html(
                302,
                &simple_page("Found", "A redirect without a Location header."),
            )
            .await
        }
        "/redirect-relative" => conn.redirect(302, "../article/1").await,
        path => {
            let n = path
                .strip_prefix("/redirect-chain/")
                .and_then(|s| s.parse::<u32>().ok())?;
            if n == 0 {
                conn.html(
                    200,
                    &simple_page("End of chain", "The redirect chain ends here."),
                )
                .await
            } else {
                conn.redirect(302, &format!("/redirect-chain/{}", n - 1))
                    .await
            }
        }
    };
    Some(done)
}
