//! The crawling routes: `/robots.txt` (the default or what a test set), XML sitemaps (a
//! urlset with entries a parser must skip, an index, a gzipped urlset), a text sitemap, and
//! a gzipped sitemap that turns into a bomb after its first entry.
//!
//! Absolute URLs in these bodies name the host the client asked for (its `Host` header),
//! so a test that reaches the fixture under another name gets URLs under that name. The
//! generated crawl site's robots.txt and sitemaps are in `crawl_site`, not here.

use std::fmt::Write as _;
use std::io::{self, Write as _};

use crate::bombs::Bomb;
use crate::request::Request;
use crate::response::Conn;
use crate::server::Ctx;

/// The default body of `/robots.txt`. `{origin}` stands for `http://` followed by the
/// request's `Host` header, so the sitemap URL names the host the client asked for.
pub const ROBOTS_TXT: &str = "# The trawl fixture's robots.txt.
User-agent: *
Disallow: /

User-agent: trawl
Allow: /private/open$
Disallow: /private/
Disallow: /*.pdf$
Crawl-delay: 1

Sitemap: {origin}/sitemap-index.xml
";

/// How many pages `/sitemap-a.xml.gz` lists: `/site/0` to `/site/{SITEMAP_A_PAGES - 1}`.
pub const SITEMAP_A_PAGES: u64 = 100;

const SITEMAP_NS: &str = "http://www.sitemaps.org/schemas/sitemap/0.9";

/// Answers the robots.txt and sitemap routes; `None` for any other path.
pub(super) async fn route(conn: &mut Conn, ctx: &Ctx, req: &Request) -> Option<io::Result<()>> {
    let done = match req.path.as_str() {
        "/robots.txt" => {
            let (status, body) = ctx.robots().unwrap_or((200, ROBOTS_TXT.to_owned()));
            let body = body.replace("{origin}", &origin(ctx, req));
            conn.send(
                status,
                &[("Content-Type", "text/plain; charset=utf-8")],
                body.as_bytes(),
            )
            .await
        }
        "/sitemap.xml" => xml(conn, &sitemap_xml(&origin(ctx, req))).await,
        "/sitemap-index.xml" => xml(conn, &sitemap_index_xml(&origin(ctx, req))).await,
        "/sitemap-a.xml.gz" => {
            let paths: Vec<String> = (0..SITEMAP_A_PAGES).map(|n| format!("/site/{n}")).collect();
            let body = gzip(urlset(&origin(ctx, req), &paths).as_bytes());
            conn.send(200, &[("Content-Type", "application/gzip")], &body)
                .await
        }
        "/sitemap-b.xml" => {
            let paths: Vec<String> = (1..=3).map(|n| format!("/article/{n}")).collect();
            xml(conn, &urlset(&origin(ctx, req), &paths)).await
        }
        "/sitemap.txt" => {
            let origin = origin(ctx, req);
            let body = format!(
                "{origin}/\n{origin}/article/1\n{origin}/article/2\nnot a url\n{origin}/article/3\n"
            );
            conn.send(
                200,
                &[("Content-Type", "text/plain; charset=utf-8")],
                body.as_bytes(),
            )
            .await
        }
        "/sitemap-bomb.xml.gz" => sitemap_bomb(conn, ctx, req).await,
        _ => return None,
    };
    Some(done)
}

/// Two gzip members: a urlset opening with one entry and an unfinished `<loc>`, then the
/// gzip bomb.
async fn sitemap_bomb(conn: &mut Conn, ctx: &Ctx, req: &Request) -> io::Result<()> {
    let opening = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"{SITEMAP_NS}\">\n\
         <url><loc>{}/</loc></url>\n<url><loc>",
        origin(ctx, req)
    );
    let mut body = gzip(opening.as_bytes());
    body.extend_from_slice(Bomb::Gzip.body().await?);
    conn.send(200, &[("Content-Type", "application/gzip")], &body)
        .await
}

/// `http://` and the request's `Host` header (when it looks like a host),
/// else the server's own address.
fn origin(ctx: &Ctx, req: &Request) -> String {
    let host = req
        .header("host")
        .filter(|host| {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
        })
        .map_or_else(|| ctx.addr.to_string(), str::to_owned);
    format!("http://{host}")
}

async fn xml(conn: &mut Conn, body: &str) -> io::Result<()> {
    conn.send(
        200,
        &[("Content-Type", "application/xml; charset=utf-8")],
        body.as_bytes(),
    )
    .await
}

fn sitemap_xml(origin: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <urlset xmlns=\"{SITEMAP_NS}\" xmlns:image=\"http://www.google.com/schemas/sitemap-image/1.1\">\n\
         <url><loc>{origin}/</loc><lastmod>2024-05-01</lastmod><changefreq>daily</changefreq></url>\n\
         <url><loc>{origin}/article/1</loc><lastmod>2024-05-02T10:00:00+00:00</lastmod>\
         <image:image><image:loc>{origin}/image.png</image:loc></image:image></url>\n\
         <url><loc>{origin}/article/2</loc></url>\n\
         <url><loc>{origin}/article/3</loc><priority>0.5</priority></url>\n\
         <url><loc>/relative/page</loc></url>\n\
         <url><loc>ftp://example.com/file</loc></url>\n\
         </urlset>\n"
    )
}

fn sitemap_index_xml(origin: &str) -> String {
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <sitemapindex xmlns=\"{SITEMAP_NS}\">\n\
         <sitemap><loc>{origin}/sitemap-a.xml.gz</loc><lastmod>2024-05-01</lastmod></sitemap>\n\
         <sitemap><loc>{origin}/sitemap-b.xml</loc></sitemap>\n\
         </sitemapindex>\n"
    )
}

fn urlset(origin: &str, paths: &[String]) -> String {
    let mut s =
        format!("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"{SITEMAP_NS}\">\n");
    for path in paths {
        let _ = writeln!(s, "<url><loc>{origin}{path}</loc></url>");
    }
    s.push_str("</urlset>\n");
    s
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    enc.write_all(bytes).expect("writing to a Vec cannot fail");
    enc.finish().expect("writing to a Vec cannot fail")
}
