//! The friendly routes: the index, articles (also slowed down), the million `/site/{n}`
//! pages, the browser tests' pages and their JSON, plain documents (text, JSON, markdown,
//! PNG, PDF, a broken PDF) and deeply nested markup.
//!
//! Every answer here is honest: the right status, type and length. The pages themselves are
//! made in `pages`, `documents` and `browser`; this module only maps paths to them.

use std::io;
use std::time::Duration;

use crate::browser;
use crate::documents;
use crate::pages::{SITE_PAGES, article_page, index_page, site_page};
use crate::request::Request;
use crate::response::Conn;
use crate::server::Ctx;

/// Answers the friendly routes; `None` for any other path.
pub(super) async fn route(conn: &mut Conn, ctx: &Ctx, req: &Request) -> Option<io::Result<()>> {
    let path = req.path.as_str();
    let done = match path {
        "/" => conn.html(200, &index_page()).await,
        "/text.txt" => {
            conn.send(
                200,
                &[("Content-Type", "text/plain; charset=utf-8")],
                b"Plain text fixture.\nSecond line of plain text.\n",
            )
            .await
        }
        "/data.json" => {
            conn.send(
                200,
                &[("Content-Type", "application/json")],
                br#"{"name":"trawl fixture","items":[1,2,3],"nested":{"ok":true}}"#,
            )
            .await
        }
        "/readme.md" => {
            conn.send(
                200,
                &[("Content-Type", "text/markdown; charset=utf-8")],
                b"# Fixture readme\n\nA *markdown* document with a [link](/article/1).\n\n- one\n- two\n",
            )
            .await
        }
        "/image.png" => {
            conn.send(200, &[("Content-Type", "image/png")], documents::png())
                .await
        }
        "/pdf/ok" => {
            conn.send(200, &[("Content-Type", "application/pdf")], documents::pdf())
                .await
        }
        "/pdf/broken" => {
            conn.send(
                200,
                &[("Content-Type", "application/pdf")],
                &documents::broken_pdf(),
            )
            .await
        }
        "/nest/div" | "/nest/ulli" => nested(conn, req).await,
        _ => return numbered(conn, ctx, req).await,
    };
    Some(done)
}

/// The routes with a number or a name in the path.
async fn numbered(conn: &mut Conn, ctx: &Ctx, req: &Request) -> Option<io::Result<()>> {
    let path = req.path.as_str();
    if let Some(n) = path
        .strip_prefix("/article/")
        .and_then(|s| s.parse::<u64>().ok())
    {
        let base = format!("http://{}", ctx.addr);
        return Some(conn.html(200, &article_page(n, &base)).await);
    }
    if let Some(name) = path.strip_prefix("/browser/api/") {
        let page = req
            .query("page")
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0);
        if name == "article" {
            // Slower than the quiet period's start, so only a network-idle wait sees it.
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        if let Some(body) = browser::api(name, page) {
            return Some(
                conn.send(
                    200,
                    &[("Content-Type", "application/json")],
                    body.as_bytes(),
                )
                .await,
            );
        }
    }
    if let Some(name) = path.strip_prefix("/browser/")
        && let Some(body) = browser::page(name, &ctx.addr.to_string())
    {
        return Some(conn.html(200, &body).await);
    }
    if let Some(n) = path
        .strip_prefix("/slow/article/")
        .and_then(|s| s.parse::<u64>().ok())
    {
        let ms = req
            .query("ms")
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(1_000)
            .min(60_000);
        tokio::time::sleep(Duration::from_millis(ms)).await;
        let base = format!("http://{}", ctx.addr);
        return Some(conn.html(200, &article_page(n, &base)).await);
    }
    if let Some(n) = path
        .strip_prefix("/site/")
        .and_then(|s| s.parse::<u64>().ok())
        && n < SITE_PAGES
    {
        return Some(conn.html(200, &site_page(n)).await);
    }
    None
}

/// `/nest/div?n=N` and `/nest/ulli?n=N`: `N` nested `<div>` or `<ul><li>` around `deep text`.
async fn nested(conn: &mut Conn, req: &Request) -> io::Result<()> {
    let n = req
        .query("n")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1_000)
        .min(1_000_000);
    let (open, close) = if req.path == "/nest/div" {
        ("<div>", "</div>")
    } else {
        ("<ul><li>", "</li></ul>")
    };
    let mut page = String::with_capacity(n * (open.len() + close.len()) + 200);
    page.push_str("<!DOCTYPE html><html><head><title>Nested</title></head><body>\n");
    for _ in 0..n {
        page.push_str(open);
    }
    page.push_str("deep text");
    for _ in 0..n {
        page.push_str(close);
    }
    page.push_str("\n</body></html>\n");
    conn.html(200, &page).await
}
