//! The fallback extraction providers, answering like the real services: Firecrawl's scrape
//! API (`POST /firecrawl/v1/scrape`, `/firecrawl/v2/scrape`: `{"success", "data":
//! {"markdown", "html", "links", "metadata"}}`, errors as `{"success": false, "error"}`) and a
//! Crawl4AI server (`POST /crawl4ai/crawl`: `{"success", "results": [...]}` with markdown as
//! `{"raw_markdown", "fit_markdown"}`; `POST /crawl4ai/md`: `{"markdown", "success"}`; errors
//! as FastAPI's `{"detail"}`). Built from the services' documented request and response
//! shapes, not from copied answers.
//!
//! Firecrawl answers 401 unless `Authorization: Bearer` [`FIRECRAWL_KEY`]; Crawl4AI answers
//! 401 to a token other than [`CRAWL4AI_TOKEN`] (none is fine). The page URL the request asks
//! about picks the case by its `case` query parameter: `outage` (5xx), `ratelimit` (429 with
//! `Retry-After: 3`), `payment` (402), `badjson`, `wrongtypes`, `nulls`, `failed` (the
//! provider could not read the page), `metadata` (the provider says it ended at the cloud
//! metadata address), `single` (Crawl4AI: one result at the top level), `notfound` (the page
//! answered 404); any other page reads as "Rescued page" with links to `/article/1` and `/2`.

use std::io;

use crate::request::Request;
use crate::response::Conn;
use crate::server::Ctx;

/// The key the Firecrawl routes require.
pub const FIRECRAWL_KEY: &str = "fc-fixture-key";
/// The token the Crawl4AI routes accept (none is accepted too).
pub const CRAWL4AI_TOKEN: &str = "c4-fixture-token";

const JSON: &str = "application/json";

/// Answers the provider routes; `None` for any other path.
pub(super) async fn route(conn: &mut Conn, ctx: &Ctx, req: &Request) -> Option<io::Result<()>> {
    let provider = match req.path.as_str() {
        "/firecrawl/v1/scrape" | "/firecrawl/v2/scrape" => Provider::Firecrawl,
        "/crawl4ai/crawl" => Provider::Crawl4aiCrawl,
        "/crawl4ai/md" => Provider::Crawl4aiMd,
        _ => return None,
    };
    if !req.method.eq_ignore_ascii_case("POST") {
        return Some(
            conn.send(
                405,
                &[("Allow", "POST"), ("Content-Type", JSON)],
                br#"{"detail":"Method Not Allowed"}"#,
            )
            .await,
        );
    }
    let authorization = req.header("authorization");
    let denied = match provider {
        Provider::Firecrawl => authorization != Some(&format!("Bearer {FIRECRAWL_KEY}")),
        _ => authorization.is_some_and(|value| value != format!("Bearer {CRAWL4AI_TOKEN}")),
    };
    if denied {
        let body = match provider {
            Provider::Firecrawl => r#"{"success":false,"error":"Unauthorized: Invalid token"}"#,
            _ => r#"{"detail":"Invalid token"}"#,
        };
        return Some(
            conn.send(401, &[("Content-Type", JSON)], body.as_bytes())
                .await,
        );
    }
    let Some(page) = page_url(&req.body) else {
        let body = match provider {
            Provider::Firecrawl => r#"{"success":false,"error":"Bad Request: url is required"}"#,
            _ => {
                r#"{"detail":[{"loc":["body","url"],"msg":"field required","type":"value_error.missing"}]}"#
            }
        };
        return Some(
            conn.send(422, &[("Content-Type", JSON)], body.as_bytes())
                .await,
        );
    };
    let base = format!("http://{}", ctx.addr);
    Some(answer(conn, provider, &base, &page).await)
}

#[derive(Clone, Copy, PartialEq)]
enum Provider {
    Firecrawl,
    Crawl4aiCrawl,
    Crawl4aiMd,
}

/// The first URL in the request body (`"url": "…"` or `"urls": ["…"]`).
fn page_url(body: &[u8]) -> Option<String> {
    let body = std::str::from_utf8(body).ok()?;
    let key = body.find("\"url")?;
    let start = body[key..].find("\"http")? + key + 1;
    let end = body[start..].find('"')? + start;
    Some(body[start..end].replace("\\/", "/"))
}

/// The page URL's `case` parameter.
fn case_of(page: &str) -> &str {
    page.split_once("case=")
        .map(|(_, rest)| rest.split(['&', '#']).next().unwrap_or_default())
        .unwrap_or_default()
}

async fn answer(conn: &mut Conn, provider: Provider, base: &str, page: &str) -> io::Result<()> {
    let firecrawl = provider == Provider::Firecrawl;
    let json = |status: u16, body: String| (status, body);
    let (status, body) = match case_of(page) {
        "outage" if firecrawl => json(
            503,
            r#"{"success":false,"error":"Service Unavailable"}"#.to_owned(),
        ),
        "outage" => json(500, r#"{"detail":"Crawl failed: browser crashed"}"#.to_owned()),
        "ratelimit" => {
            let body = if firecrawl {
                r#"{"success":false,"error":"Rate limit exceeded. Consumed (req/min): 21, Remaining (req/min): 0."}"#
            } else {
                r#"{"detail":"Rate limit exceeded"}"#
            };
            return conn
                .send(429, &[("Content-Type", JSON), ("Retry-After", "3")], body.as_bytes())
                .await;
        }
        "payment" => json(
            402,
            r#"{"success":false,"error":"Payment required: insufficient credits"}"#.to_owned(),
        ),
        "badjson" => json(200, r##"{"success":true,"data":{"markdown":"# Cut"##.to_owned()),
        "wrongtypes" if firecrawl => json(200, r#"{"success":true,"data":{"markdown":42}}"#.to_owned()),
        "wrongtypes" => json(200, r#"{"success":true,"results":[{"markdown":42}]}"#.to_owned()),
        "nulls" if firecrawl => json(200, r#"{"success":true,"data":null}"#.to_owned()),
        "nulls" if provider == Provider::Crawl4aiMd => {
            json(200, r#"{"url":null,"markdown":null,"success":true}"#.to_owned())
        }
        "nulls" => json(200, r#"{"success":true,"results":[{"url":null,"markdown":null,"success":true}]}"#.to_owned()),
        "failed" if firecrawl => json(
            200,
            r#"{"success":false,"error":"Failed to scrape URL: all engines failed"}"#.to_owned(),
        ),
        "failed" => json(
            200,
            r#"{"success":true,"results":[{"url":"PAGE","success":false,"error_message":"net::ERR_CONNECTION_REFUSED","markdown":null}]}"#
                .replace("PAGE", page),
        ),
        case => {
            let ended = if case == "metadata" {
                "http://169.254.169.254/latest/meta-data/".to_owned()
            } else {
                page.to_owned()
            };
            let status = if case == "notfound" { 404 } else { 200 };
            json(200, success(provider, base, page, &ended, status, case == "single"))
        }
    };
    conn.send(status, &[("Content-Type", JSON)], body.as_bytes())
        .await
}

/// A successful answer: the page read as "Rescued page".
fn success(
    provider: Provider,
    base: &str,
    page: &str,
    ended: &str,
    status: u16,
    single: bool,
) -> String {
    let by = match provider {
        Provider::Firecrawl => "Firecrawl",
        _ => "Crawl4AI",
    };
    let markdown = format!(
        "# Rescued page\\n\\nThe provider {by} read this page for trawl, which found no article \
         in it.\\n\\n## What it holds\\n\\nA paragraph of the main content, long enough to count."
    );
    let html = format!(
        "<h1>Rescued page</h1><p>The provider {by} read this page for trawl, which found no \
         article in it.</p><h2>What it holds</h2><p>A paragraph of the main content, long \
         enough to count.</p>"
    );
    match provider {
        Provider::Firecrawl => format!(
            r#"{{"success":true,"data":{{"markdown":"{markdown}","html":"{html}","rawHtml":"<html><body>{html}</body></html>","links":["{base}/article/1","/article/2","mailto:me@example.com"],"metadata":{{"title":"Rescued page","description":"Read by {by}","language":"en","sourceURL":"{page}","url":"{ended}","statusCode":{status}}}}}}}"#
        ),
        Provider::Crawl4aiMd => format!(
            r#"{{"url":"{ended}","filter":"fit","query":null,"cache":"0","markdown":"{markdown}","success":true}}"#
        ),
        Provider::Crawl4aiCrawl => {
            let result = format!(
                r#"{{"url":"{page}","redirected_url":"{ended}","success":true,"status_code":{status},"html":"<html><body><nav>Menu</nav>{html}</body></html>","cleaned_html":"{html}","markdown":{{"raw_markdown":"Menu\\n\\n{markdown}","fit_markdown":"{markdown}"}},"metadata":{{"title":"Rescued page","description":"Read by {by}"}},"links":{{"internal":[{{"href":"{base}/article/1","text":"one"}},{{"href":"/article/2","text":"two"}}],"external":[]}}}}"#
            );
            if single {
                result
            } else {
                format!(r#"{{"success":true,"results":[{result}]}}"#)
            }
        }
    }
}
