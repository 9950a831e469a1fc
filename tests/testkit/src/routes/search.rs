//! The web search providers, answering like the real services: SearxNG's JSON API
//! (`/searxng/search`, `/searxng/config`), DuckDuckGo's HTML results page (`/ddg/html/`), its
//! instant answers (`/ddg/instant/`) and its image search (`/ddg/images/` with the `vqd` token
//! and a cookie, then `/ddg/images/i.js`). Built from the services' documented request
//! parameters and response shapes, not from copied pages.
//!
//! The query (`q`, `+` read as a space) picks the case: `empty`, `outage` (503), `ratelimit`
//! (429 with `Retry-After: 7`), `badjson`, `wrongtypes`, `nulls`, `redirect` (SearxNG: a 302
//! to another loopback origin), `blocked` (DuckDuckGo: 202 with the anomaly page), `forbidden`
//! (403), `challenge` (200 with the challenge form), `notoken` (images: a page without the
//! token); any other query answers results whose links point at this server's
//! `/article/1..=3` (with duplicates, ads, DuckDuckGo's own links and entities around them).

use std::io;

use crate::request::Request;
use crate::response::{Conn, HTML};
use crate::server::Ctx;

/// The `vqd` token the image search page hands out, and `i.js` requires.
pub const SEARCH_VQD: &str = "4-31415926535897932384";
/// The cookie the image search page sets, which `i.js` requires back.
pub const SEARCH_COOKIE: &str = "ddg_fixture=k9x2";

const JSON: &str = "application/json; charset=utf-8";

/// Answers the search provider routes; `None` for any other path.
pub(super) async fn route(conn: &mut Conn, ctx: &Ctx, req: &Request) -> Option<io::Result<()>> {
    let query = req.query("q").unwrap_or_default().replace('+', " ");
    let base = format!("http://{}", ctx.addr);
    let done = match req.path.as_str() {
        "/searxng/search" => searxng(conn, &base, &query).await,
        "/searxng/config" => {
            let body = r#"{"engines": [
                {"name": "google", "enabled": true, "categories": ["general", "web"], "shortcut": "go"},
                {"name": "bing", "enabled": true, "categories": ["general", "web"], "shortcut": "bi"},
                {"name": "wikipedia", "enabled": true, "categories": ["general"], "shortcut": "wp"},
                {"name": "arxiv", "enabled": true, "categories": ["science"], "shortcut": "arx"},
                {"name": "yahoo", "enabled": false, "categories": ["general"], "shortcut": "yh"}
            ], "categories": ["general", "science"], "default_locale": "", "autocomplete": ""}"#;
            conn.send(200, &[("Content-Type", JSON)], body.as_bytes())
                .await
        }
        "/ddg/html/" | "/ddg/html" => duckduckgo_html(conn, &base, &query).await,
        "/ddg/instant/" | "/ddg/instant" => instant(conn, &base, &query).await,
        "/ddg/images/" | "/ddg/images" => images_page(conn, &query).await,
        "/ddg/images/i.js" => images_json(conn, req, &base, &query).await,
        _ => return None,
    };
    Some(done)
}

/// Answers every failure case the providers share; `None` for a query that should succeed.
async fn failure(conn: &mut Conn, query: &str) -> Option<io::Result<()>> {
    let done = match query {
        "outage" => {
            conn.html(
                503,
                "<html><body><h1>503 Service Unavailable</h1></body></html>",
            )
            .await
        }
        "ratelimit" => {
            conn.send(
                429,
                &[("Content-Type", "text/plain"), ("Retry-After", "7")],
                b"Too Many Requests",
            )
            .await
        }
        "badjson" => {
            conn.send(200, &[("Content-Type", JSON)], b"{\"results\": [{\"url\": ")
                .await
        }
        _ => return None,
    };
    Some(done)
}

async fn searxng(conn: &mut Conn, base: &str, query: &str) -> io::Result<()> {
    if let Some(done) = failure(conn, query).await {
        return done;
    }
    let body = match query {
        "empty" => r#"{"query": "empty", "number_of_results": 0, "results": [], "answers": [],
            "corrections": [], "infoboxes": [], "suggestions": [], "unresponsive_engines": []}"#
            .to_owned(),
        "wrongtypes" => {
            r#"{"query": "wrongtypes", "results": [{"url": 42, "title": "x"}]}"#.to_owned()
        }
        "nulls" => r#"{"query": "nulls", "number_of_results": null,
            "results": [{"url": "https://nulls.example/page", "title": null, "content": null,
                         "engine": null, "engines": null, "publishedDate": null, "score": null},
                        {"url": null, "title": "no url at all"}],
            "answers": null, "corrections": null, "infoboxes": null, "suggestions": null,
            "unresponsive_engines": null}"#
            .to_owned(),
        "redirect" => {
            // Elsewhere on loopback: another origin, which the guard must refuse.
            let port = base.rsplit(':').next().unwrap_or("80");
            let location = format!("http://127.0.0.2:{port}/searxng/search?q=elsewhere");
            return conn.redirect(302, &location).await;
        }
        _ => format!(
            r#"{{"query": {query:?}, "number_of_results": 0,
            "results": [
              {{"url": "{base}/article/1", "title": "Article one", "content": "The first article.",
                "engine": "wikipedia", "engines": ["wikipedia", "bing"], "positions": [1, 2],
                "score": 4.0, "category": "general", "publishedDate": "2024-05-01T10:00:00"}},
              {{"url": "{base}/article/2?utm_source=searx", "title": "Article two",
                "content": "The second article.", "engine": "bing", "engines": ["bing"],
                "score": 2.0, "category": "general", "publishedDate": null}},
              {{"url": "{base}/article/1", "title": "Article one again", "content": "",
                "engine": "google", "engines": ["google"], "score": 1.5, "category": "general"}},
              {{"url": "https://only-google.example/", "title": "Only google",
                "content": "Found by google alone.", "engine": "google", "engines": ["google"],
                "score": 1.0, "category": "general"}},
              {{"url": "{base}/article/3", "title": "Article three", "content": "The third.",
                "engine": "wikipedia", "engines": ["wikipedia"], "score": 0.5,
                "category": "general"}}
            ],
            "answers": [{{"answer": "an answer", "url": null, "engine": "wikipedia"}}],
            "corrections": ["a correction"],
            "infoboxes": [{{"infobox": "Fixture", "id": "https://fixture.example/about",
              "content": "A fixture infobox.", "engine": "wikipedia",
              "urls": [{{"title": "site", "url": "https://fixture.example/"}}]}}],
            "suggestions": ["a suggestion"],
            "unresponsive_engines": [["qwant", "timeout"], ["brave", "CAPTCHA"]]}}"#
        ),
    };
    conn.send(200, &[("Content-Type", JSON)], body.as_bytes())
        .await
}

/// Percent-encodes `value` as a query value (everything but unreserved characters).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (byte as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect()
}

/// A DuckDuckGo result block.
fn ddg_result(href: &str, title: &str, snippet: &str) -> String {
    format!(
        r#"<div class="result results_links results_links_deep web-result">
  <div class="links_main links_deep result__body">
    <h2 class="result__title"><a rel="nofollow" class="result__a" href="{href}">{title}</a></h2>
    <div class="result__extras"><div class="result__extras__url">
      <a class="result__url" href="{href}">fixture</a></div></div>
    <a class="result__snippet" href="{href}">{snippet}</a>
    <div class="clear"></div>
  </div>
</div>"#
    )
}

async fn duckduckgo_html(conn: &mut Conn, base: &str, query: &str) -> io::Result<()> {
    if let Some(done) = failure(conn, query).await {
        return done;
    }
    let anomaly = r#"<html><body><div class="anomaly-modal__title">Unfortunately, bots use DuckDuckGo too.</div>
<form id="challenge-form" action="//duckduckgo.com/anomaly.js?sv=html" method="POST">
<div class="anomaly-modal__description">Please complete the following challenge.</div></form></body></html>"#;
    match query {
        "blocked" => return conn.html(202, anomaly).await,
        "forbidden" => return conn.html(403, "<html><body>Forbidden</body></html>").await,
        "challenge" => return conn.html(200, anomaly).await,
        "empty" => {
            let page = r#"<html><body><div id="links" class="results">
<div class="no-results">No results.</div></div></body></html>"#;
            return conn.html(200, page).await;
        }
        _ => {}
    }
    let once = |path: &str| {
        format!(
            "//duckduckgo.com/l/?uddg={}&amp;rut=0f1e2d",
            encode(&format!("{base}{path}"))
        )
    };
    let twice = |path: &str| {
        format!(
            "//duckduckgo.com/l/?uddg={}&amp;rut=3c4b5a",
            encode(&encode(&format!("{base}{path}")))
        )
    };
    let ad = r#"<div class="result results_links results_links_deep result--ad">
  <div class="links_main links_deep result__body">
    <h2 class="result__title"><a class="result__a" href="https://duckduckgo.com/y.js?ad_domain=ads.example&amp;u3=x">Buy now</a>
    <span class="badge--ad">Ad</span></h2>
    <a class="result__snippet" href="https://duckduckgo.com/y.js?x=1">Sponsored.</a></div></div>"#;
    let nested = format!(
        r#"<div class="result results_links results_links_deep web-result">
  <div class="links_main links_deep result__body">
    <h2 class="result__title"><a class="result__a" href="{}">Article three &mdash; the outer</a></h2>
    <a class="result__snippet" href="x">The outer block&#39;s snippet.</a>
    <div class="result result--sub"><div class="result__body">
      <h2 class="result__title"><a class="result__a" href="{}">Article two&#x27;s sub-result</a></h2>
      <a class="result__snippet" href="x">The inner block&apos;s snippet.</a></div></div>
  </div>
</div>"#,
        once("/article/3"),
        twice("/article/2?ref=ddg")
    );
    let page = format!(
        r#"<!DOCTYPE html><html><head><title>{query} at DuckDuckGo</title></head><body>
<div class="serp__results"><div id="links" class="results">
{ad}
{}
{}
{}
{nested}
{}
<div class="nav-link"><form action="/html/" method="post"><input type="submit" class="btn" value="Next"></form></div>
</div></div></body></html>"#,
        ddg_result(
            &once("/article/1"),
            "Tom &amp; Jerry&#x27;s <b>article</b> one",
            "The first &quot;article&quot; &hellip; with entities."
        ),
        ddg_result(
            &twice("/article/2"),
            "Article two, encoded twice",
            "The second article."
        ),
        ddg_result(
            &once("/article/1?utm_source=ddg"),
            "Article one again",
            "A duplicate."
        ),
        ddg_result(
            "https://duckduckgo.com/?q=more+results&amp;ia=web",
            "More at DuckDuckGo",
            "DuckDuckGo's own link."
        ),
    );
    conn.html(200, &page).await
}

async fn instant(conn: &mut Conn, base: &str, query: &str) -> io::Result<()> {
    if let Some(done) = failure(conn, query).await {
        return done;
    }
    let body = match query {
        "empty" => r#"{"Abstract": "", "AbstractText": "", "AbstractSource": "", "AbstractURL": "",
            "Answer": "", "AnswerType": "", "Definition": "", "DefinitionSource": "",
            "DefinitionURL": "", "Heading": "", "Image": "", "RelatedTopics": [], "Results": [],
            "Type": ""}"#
            .to_owned(),
        "wrongtypes" => r#"{"Heading": ["not", "text"], "RelatedTopics": []}"#.to_owned(),
        _ => format!(
            r#"{{"Abstract": "Fixtures are test data.", "AbstractText": "Fixtures are test data.",
            "AbstractSource": "Wikipedia", "AbstractURL": "https://en.wikipedia.org/wiki/Fixture",
            "Answer": "42", "AnswerType": "calc", "Definition": "a fixed thing",
            "DefinitionSource": "Wiktionary", "DefinitionURL": "https://en.wiktionary.org/wiki/fixture",
            "Heading": "Fixture", "Image": "/i/fixture.png", "ImageHeight": 100, "ImageWidth": 100,
            "Infobox": "", "Redirect": "", "Type": "A",
            "RelatedTopics": [
              {{"FirstURL": "{base}/article/1", "Icon": {{"Height": "", "URL": "", "Width": ""}},
                "Result": "<a href=\"{base}/article/1\">Article one</a>", "Text": "Article one - the first"}},
              {{"Name": "More", "Topics": [
                {{"FirstURL": "{base}/article/2", "Icon": {{"URL": ""}},
                  "Result": "", "Text": "Article two - the second"}}]}}
            ],
            "Results": [], "meta": null}}"#
        ),
    };
    conn.send(
        200,
        &[("Content-Type", "application/x-javascript")],
        body.as_bytes(),
    )
    .await
}

async fn images_page(conn: &mut Conn, query: &str) -> io::Result<()> {
    let cookie = format!("{SEARCH_COOKIE}; Path=/; SameSite=Lax");
    match query {
        "blocked" => return conn.html(403, "<html><body>Forbidden</body></html>").await,
        "notoken" => {
            let page = "<html><head><title>images</title></head><body>\
                        <script>var settings = {};</script></body></html>";
            return conn
                .send(
                    200,
                    &[("Content-Type", HTML), ("Set-Cookie", &cookie)],
                    page.as_bytes(),
                )
                .await;
        }
        _ => {}
    }
    let page = format!(
        "<!DOCTYPE html><html><head><title>{query} at DuckDuckGo</title></head><body>\
         <div id=\"react-layout\"></div>\
         <script>DDG.deep.initialize('/d.js?q=x&amp;t=D&amp;l=us-en&amp;s=0&amp;dl=en&amp;ct=US&amp;ss_mkt=us&amp;vqd={SEARCH_VQD}&amp;p_ent=&amp;ex=-1');\
         var vqd=\"{SEARCH_VQD}\";</script></body></html>"
    );
    conn.send(
        200,
        &[("Content-Type", HTML), ("Set-Cookie", &cookie)],
        page.as_bytes(),
    )
    .await
}

async fn images_json(conn: &mut Conn, req: &Request, base: &str, query: &str) -> io::Result<()> {
    // Like the real service: without the page's token, cookie and referer, no answer.
    let cookie_ok = req
        .header("cookie")
        .is_some_and(|cookie| cookie.split("; ").any(|pair| pair == SEARCH_COOKIE));
    if req.query("vqd") != Some(SEARCH_VQD) || !cookie_ok || req.header("referer").is_none() {
        return conn.html(403, "<html><body>Forbidden</body></html>").await;
    }
    if let Some(done) = failure(conn, query).await {
        return done;
    }
    let body = match query {
        "wrongtypes" => r#"{"results": [{"title": "x", "image": "https://img.example/x.jpg",
            "width": "wide", "height": 10}]}"#
            .to_owned(),
        "empty" => r#"{"results": [], "next": null, "query": "empty"}"#.to_owned(),
        _ => format!(
            r#"{{"ads": null, "query": {query:?}, "queryEncoded": "x", "response_type": "images",
            "results": [
              {{"height": 600, "width": 800, "image": "{base}/image.png",
                "thumbnail": "{base}/image.png?thumb=1", "url": "{base}/article/1",
                "title": "The first image", "source": "Bing", "image_token": "t1"}},
              {{"height": 300, "width": 400, "image": "https://img.example/second.jpg",
                "thumbnail": null, "url": "https://page.example/second", "title": "The second image",
                "source": "Bing"}},
              {{"height": 600, "width": 800, "image": "{base}/image.png",
                "thumbnail": "{base}/image.png?thumb=2", "url": "{base}/article/2",
                "title": "The first image again", "source": "Bing"}}
            ],
            "next": "i.js?q=x&o=json&p=1&s=100&u=bing&f=,,,,,&l=us-en"}}"#
        ),
    };
    conn.send(
        200,
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    )
    .await
}
