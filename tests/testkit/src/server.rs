//! The server itself: [`FixtureServer`] binds `127.0.0.1:0`, accepts connections, reads each
//! request (head and `Content-Length` body), records it in a log tests can read, lets the
//! routes answer, and closes the connection.
//!
//! One request per connection: no keep-alive, no pipelining, no HTTP/2, no TLS. What each
//! path answers is in `routes`; how responses are written is in `response`. Dropping the
//! server stops it and aborts every connection still open.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{JoinHandle, JoinSet};

use crate::request::{Head, parse_head, read_head};
use crate::response::{Conn, simple_page};
use crate::routes::route;

/// Largest request body the server reads (and records) before answering.
const MAX_REQUEST_BODY: u64 = 1024 * 1024;

/// One request as the server received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// The request method, as sent (`GET`, `HEAD`, `POST`, ...).
    pub method: String,
    /// The request target as sent, reduced to path and query if the client
    /// used the absolute form (`http://host/path?q`).
    pub path_and_query: String,
    /// The request headers in the order received, names lowercased, values
    /// trimmed of surrounding whitespace.
    pub headers: Vec<(String, String)>,
    /// The request body as received, read by `Content-Length` and cut at
    /// 1 MiB; empty when the request had no `Content-Length`.
    pub body: Vec<u8>,
}

impl RecordedRequest {
    /// The value of the first header named `name` (case-insensitive), if any.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A running fixture server on `127.0.0.1` with an ephemeral port.
///
/// Dropping it stops accepting connections and aborts every connection task
/// (the abort takes effect the next time the tokio runtime runs them).
///
/// # Routes
///
/// Content pages:
/// - `/` — index page linking to `/article/1`, `/article/2`, `/article/3`
///   only. Everything reachable from `/` by links stays within `/` and
///   `/article/1..=3` (plus `#fragments` and the absolute canonical URL).
/// - `/article/{n}` — an article page, see [`article_page`](crate::article_page) and
///   [`article_title`](crate::article_title).
/// - `/site/{n}` for `n < 1_000_000` — see [`site_page`](crate::site_page).
/// - `/slow/article/{n}?ms=M` — `/article/{n}` after `M` ms (default 1,000, at most 60,000).
/// - `/text.txt`, `/data.json`, `/readme.md`, `/image.png`, `/pdf/ok` (two
///   pages: "Page one text", "Page two text"), `/pdf/broken` (garbage bytes
///   labelled `application/pdf`).
///
/// Redirects:
/// - `/redirect?to=URL&code=C` — `C` in 301, 302, 303, 307, 308 (default
///   302), `Location: URL` (default `/`). Query values are percent-decoded
///   (`+` is kept as is), so percent-encode `&` and `?` inside `URL`.
/// - `/redirect-chain/{n}` — 302 to `/redirect-chain/{n-1}`; `n = 0` is a
///   200 page.
/// - `/loop/a` ↔ `/loop/b` — 302 to each other forever.
/// - `/nolocation` — 302 without `Location`.
/// - `/redirect-relative` — 302 with `Location: ../article/1` (resolves to
///   `/article/1`).
///
/// Compression bombs (each decompresses to [`BOMB_DECOMPRESSED_LEN`](crate::BOMB_DECOMPRESSED_LEN) zero
/// bytes, `Content-Type: text/html`, with a truthful `Content-Length` of the
/// compressed size): `/bomb/gzip`, `/bomb/deflate` (zlib-wrapped, as HTTP
/// specifies), `/bomb/br`, `/bomb/zstd`, `/bomb/nested` (gzip of the gzip
/// bomb, `Content-Encoding: gzip, gzip`).
///
/// Hostile transport:
/// - `/big?bytes=N&status=S&fill=F` — exactly `N` bytes (default 1 MiB) of HTML-ish text
///   with `Content-Length: N`, streamed in 64 KiB writes, under status `S` (default 200);
///   `fill=script`: one paragraph, then a `<script>` to the end; `fill=text`: the same lines
///   as `text/plain`.
/// - `/te-and-cl` — `Transfer-Encoding: chunked` and `Content-Length: 5` at once, then a
///   well-formed chunked body.
/// - Any path over https (a TLS handshake at this plain-HTTP server) — a plain-text 400, as
///   plain-HTTP servers answer.
/// - `/chunked-forever` — chunked body, one small chunk every 10 ms, until
///   the client leaves.
/// - `/drip` — headers with `Content-Length: 100` at once, then one body byte
///   every 2 s (the first after 2 s): the body completes after about 200 s.
/// - `/slow-headers` — the status line at once, then the rest of the head one
///   byte per second (about 110 s) and then a 2-byte body `ok`.
/// - `/silent` — reads the request and never writes; closes when the client
///   closes.
/// - `/huge-header` — one `X-Huge` header whose value is 1 MiB of `a`.
/// - `/many-headers` — 10,000 headers `X-Many-{i}: {i}`.
/// - `/bad-status` — status line `HTTP/1.1 abc Nope`.
/// - `/cl-lie-small` — `Content-Length: 10` followed by 5,000 body bytes.
/// - `/cl-lie-big` — `Content-Length: 100000` followed by 10 bytes and a
///   normal close (FIN).
/// - `/reset-midway` — `Content-Length: 10000`, 5,000 bytes, a 100 ms pause,
///   then a TCP reset (`SO_LINGER` 0).
///
/// Content types and charsets:
/// - `/ctype/png-as-html` (PNG bytes as `text/html`),
///   `/ctype/html-as-octet` (HTML as `application/octet-stream`),
///   `/ctype/none` (HTML without `Content-Type`).
/// - `/charset/latin1-header`, `/charset/latin1-meta`,
///   `/charset/utf8-bom`, `/charset/utf16-bom`, `/charset/bogus` — a page
///   whose text decodes to "café résumé"; `/charset/sjis-meta` — a page whose
///   text decodes to "日本語のテキスト". See [`CHARSET_TEXT`](crate::CHARSET_TEXT) and
///   [`CHARSET_TEXT_JA`](crate::CHARSET_TEXT_JA).
/// - `/nest/div?n=N`, `/nest/ulli?n=N` — `N` nested `<div>` or `<ul><li>`
///   (default 1,000, at most 1,000,000) around the text `deep text`.
///
/// Status and headers:
/// - `/status/{code}` — that status (200..=599) with a small HTML body (no
///   body for 204 and 304; no `Location` for 3xx).
/// - `/retry-after` — 503 with `Retry-After: 1`.
/// - `/setcookie` — 200 with two `Set-Cookie` headers.
/// - `/attachment` — a CSV with `Content-Disposition: attachment`.
/// - `/echo-headers` — `text/plain`, one `name: value` line per received
///   header (names lowercased, in order).
///
/// Webhook receivers (`POST` only; other methods get 405 with
/// `Allow: POST`; the body is in [`RecordedRequest::body`]):
/// - `/webhook` — 200 with the `text/plain` body `ok`.
/// - `/webhook/flaky` — 500 for the first [`WEBHOOK_FLAKY_FAILURES`](crate::WEBHOOK_FLAKY_FAILURES) (2)
///   POSTs to this server instance, then 200 `ok`.
/// - `/webhook/slow` — waits [`WEBHOOK_SLOW_DELAY`](crate::WEBHOOK_SLOW_DELAY) (30 s), then 200 `ok`.
///
/// Block pages: `/blocked/cloudflare` (403 challenge page, with
/// `Server: cloudflare` and `cf-mitigated: challenge` headers),
/// `/blocked/captcha`, `/blocked/login`, `/blocked/shell`, `/blocked/empty`
/// (all 200).
///
/// Crawling (absolute URLs in these bodies are `http://` followed by the
/// request's `Host` header, written `{origin}` here):
/// - `/robots.txt` — [`ROBOTS_TXT`](crate::ROBOTS_TXT) as `text/plain`, or what
///   [`FixtureServer::set_robots`] set.
/// - `/sitemap.xml` — a `<urlset>` of `{origin}/` (lastmod `2024-05-01`),
///   `{origin}/article/1` (lastmod `2024-05-02T10:00:00+00:00`, with an
///   `<image:image>` extension), `{origin}/article/2`, `{origin}/article/3`,
///   plus two entries a parser must skip: `/relative/page` and
///   `ftp://example.com/file`.
/// - `/sitemap-index.xml` — a `<sitemapindex>` of `{origin}/sitemap-a.xml.gz`
///   and `{origin}/sitemap-b.xml`.
/// - `/sitemap-a.xml.gz` — a gzip-compressed `<urlset>` of `{origin}/site/{n}`
///   for `n < SITEMAP_A_PAGES`, as `application/gzip` (no
///   `Content-Encoding`: the body stays compressed).
/// - `/sitemap-b.xml` — a `<urlset>` of `{origin}/article/1..=3`.
/// - `/sitemap.txt` — a text sitemap: `{origin}/`, `{origin}/article/1..=3`
///   and one line `not a url`.
/// - `/sitemap-bomb.xml.gz` — `application/gzip`, two gzip members: a
///   `<urlset>` opening with one entry and an unfinished `<loc>`, then
///   [`BOMB_DECOMPRESSED_LEN`](crate::BOMB_DECOMPRESSED_LEN) zero bytes.
///
/// Web search providers (the query `q` picks the case: `empty`, `outage`, `ratelimit`,
/// `badjson`, `wrongtypes`, `nulls`, `redirect`, `blocked`, `forbidden`, `challenge`,
/// `notoken`; any other query answers results linking to `/article/1..=3`):
/// - `/searxng/search` — SearxNG's JSON API (`format=json`): results with duplicates, one
///   credited to `google` alone, answers, an infobox, suggestions, corrections and
///   `unresponsive_engines`; `/searxng/config` — its engines (google, bing, wikipedia,
///   arxiv; yahoo disabled).
/// - `/ddg/html/` — DuckDuckGo's HTML results: an ad, `uddg` links encoded once and twice,
///   entities, a duplicate, DuckDuckGo's own link, nested result blocks; `blocked` (202),
///   `forbidden` (403) and `challenge` (200) answer its anti-bot page.
/// - `/ddg/instant/` — instant answers: abstract, answer, definition, related topics.
/// - `/ddg/images/` — the image search page with the `vqd` token
///   ([`SEARCH_VQD`](crate::SEARCH_VQD)) and a cookie ([`SEARCH_COOKIE`](crate::SEARCH_COOKIE));
///   `/ddg/images/i.js` — the images, only with that token, cookie and a referer (else 403).
///
/// Fallback extraction providers (`POST`; the page URL's `case` parameter picks the case:
/// `outage`, `ratelimit`, `payment`, `badjson`, `wrongtypes`, `nulls`, `failed`, `metadata`,
/// `single`, `notfound`; any other page reads as "Rescued page"):
/// - `/firecrawl/v1/scrape`, `/firecrawl/v2/scrape` — Firecrawl's scrape API, only with
///   `Authorization: Bearer` [`FIRECRAWL_KEY`](crate::FIRECRAWL_KEY) (else 401).
/// - `/crawl4ai/crawl`, `/crawl4ai/md` — a Crawl4AI server; a token other than
///   [`CRAWL4AI_TOKEN`](crate::CRAWL4AI_TOKEN) is a 401.
///
/// Anything else: 404 with a small HTML body. A `HEAD` request gets the
/// headers of the ordinary routes without their body.
pub struct FixtureServer {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<RecordedRequest>>>,
    robots: Arc<Mutex<Option<(u16, String)>>>,
    accept_task: JoinHandle<()>,
}

impl FixtureServer {
    /// Binds `127.0.0.1:0` and starts serving on the current tokio runtime.
    pub async fn start() -> io::Result<FixtureServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let robots = Arc::new(Mutex::new(None));
        let ctx = Arc::new(Ctx {
            addr,
            log: Arc::clone(&log),
            robots: Arc::clone(&robots),
            webhook_flaky_requests: AtomicU64::new(0),
        });
        let accept_task = tokio::spawn(accept_loop(listener, ctx));
        Ok(FixtureServer {
            addr,
            log,
            robots,
            accept_task,
        })
    }

    /// The address the server listens on (`127.0.0.1` and its port).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` followed by `path` (which should start with
    /// `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// A copy of every request recorded so far, oldest first. A request is
    /// recorded once its head has been read, before the response is written.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.log).clone()
    }

    /// How many recorded requests have a `path_and_query` starting with
    /// `path_prefix`.
    pub fn hits(&self, path_prefix: &str) -> usize {
        lock(&self.log)
            .iter()
            .filter(|r| r.path_and_query.starts_with(path_prefix))
            .count()
    }

    /// Makes `/robots.txt` answer `status` with `body` (`text/plain`;
    /// `{origin}` is replaced as in [`ROBOTS_TXT`](crate::ROBOTS_TXT)) from now on.
    pub fn set_robots(&self, status: u16, body: &str) {
        *lock(&self.robots) = Some((status, body.to_owned()));
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        // Dropping the accept task's future drops the listener and the
        // JoinSet of connection tasks, which aborts them all.
        self.accept_task.abort();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave the log inconsistent
    // (pushes and clones only), so a poisoned lock is still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the routes may know of the server they answer for.
pub(crate) struct Ctx {
    /// The server's own address (`127.0.0.1:PORT`).
    pub(crate) addr: SocketAddr,
    log: Arc<Mutex<Vec<RecordedRequest>>>,
    /// What `/robots.txt` answers instead of [`ROBOTS_TXT`](crate::ROBOTS_TXT), if set.
    robots: Arc<Mutex<Option<(u16, String)>>>,
    /// POSTs seen by `/webhook/flaky` on this server.
    pub(crate) webhook_flaky_requests: AtomicU64,
}

impl Ctx {
    /// The status and body [`FixtureServer::set_robots`] set, if it was called.
    pub(crate) fn robots(&self) -> Option<(u16, String)> {
        lock(&self.robots).clone()
    }
}

async fn accept_loop(listener: TcpListener, ctx: Arc<Ctx>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => {
                    let ctx = Arc::clone(&ctx);
                    conns.spawn(async move {
                        // Errors here mean the client went away; nothing to do.
                        let _ = handle(stream, &ctx).await;
                    });
                }
                // E.g. too many open files: back off instead of spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
}

async fn handle(stream: TcpStream, ctx: &Ctx) -> io::Result<()> {
    let _ = stream.set_nodelay(true);
    let mut conn = Conn {
        stream,
        head_only: false,
        reset: false,
    };
    let (head, rest) = match read_head(&mut conn.stream).await? {
        Head::Complete(head, rest) => (head, rest),
        Head::Closed => return Ok(()),
        // As plain-HTTP servers do (nginx, hyper): a 400 in plain text, which the client's TLS
        // layer reads as a corrupt record.
        Head::Tls => {
            conn.html(
                400,
                &simple_page("Bad Request", "This server speaks plain HTTP."),
            )
            .await?;
            return lingering_close(conn.stream).await;
        }
        Head::TooLarge => {
            conn.html(
                431,
                &simple_page("Request head too large", "The limit is 64 KiB."),
            )
            .await?;
            return lingering_close(conn.stream).await;
        }
    };
    let Some(mut req) = parse_head(&head) else {
        conn.html(400, &simple_page("Bad Request", "Malformed request head."))
            .await?;
        return lingering_close(conn.stream).await;
    };
    // Read the request body (also so that closing the socket does not turn
    // into a reset because of unread data).
    let mut body = Vec::new();
    if let Some(len) = req
        .header("content-length")
        .and_then(|v| v.parse::<u64>().ok())
    {
        let wanted = len.min(MAX_REQUEST_BODY);
        body = rest;
        body.truncate(wanted as usize);
        let remaining = wanted.saturating_sub(body.len() as u64);
        if remaining > 0 {
            let mut reader = (&mut conn.stream).take(remaining);
            let _ =
                tokio::time::timeout(Duration::from_secs(5), reader.read_to_end(&mut body)).await;
        }
    }
    req.body = body.clone();
    lock(&ctx.log).push(RecordedRequest {
        method: req.method.clone(),
        path_and_query: req.path_and_query.clone(),
        headers: req.headers.clone(),
        body,
    });
    conn.head_only = req.method.eq_ignore_ascii_case("HEAD");
    route(&mut conn, ctx, &req).await?;
    if conn.reset {
        drop(conn);
        return Ok(());
    }
    lingering_close(conn.stream).await
}

/// Sends FIN, then reads and discards what the client still sends (at most
/// 1 MiB, at most 2 s) so that unread request bytes do not turn the close
/// into a reset that could destroy the response in flight.
async fn lingering_close(mut stream: TcpStream) -> io::Result<()> {
    stream.flush().await?;
    stream.shutdown().await?;
    let mut sink = tokio::io::sink();
    let mut rest = stream.take(MAX_REQUEST_BODY);
    let _ = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::io::copy(&mut rest, &mut sink),
    )
    .await;
    Ok(())
}
