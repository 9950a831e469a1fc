//! DuckDuckGo's HTML results page: `GET {html_url}?q=&kl=&kp=&s=` → each result's title
//! (`a.result__a`, entities decoded by the HTML parser), its link (DuckDuckGo's redirect
//! `//duckduckgo.com/l/?uddg=<target>` decoded, also when the target is percent-encoded twice)
//! and its snippet (`.result__snippet`). Ads (`.result--ad`, `y.js` click links), links to
//! DuckDuckGo itself and anything not http(s) are dropped. Result blocks may nest: each title
//! link belongs to its nearest `.result` block.
//!
//! The anti-bot page is never an empty result: a 202 or 403 answer, or a page with the
//! challenge form or the "anomaly" notice, is [`Error::Blocked`] with the evidence.
//!
//! Not here: deduplication and ranking (`search::rank`), pacing (`search::Pace`).

use dom_query::{Document, Selection};
use url::Url;

use super::{Endpoint, Error, Found, Hit, status_error};
use crate::job::{Provider, SafeSearch, SearchJob};

const PROVIDER: Provider = Provider::Duckduckgo;

/// Results on one page of the HTML version (the `s` offset of the next page).
const PAGE_SIZE: u32 = 30;

/// Searches DuckDuckGo's HTML page at `endpoint` (`search.duckduckgo.html_url`).
pub async fn search(endpoint: Endpoint<'_>, job: &SearchJob) -> Result<Found, Error> {
    let url = search_url(endpoint.base, job);
    let response = endpoint.get(PROVIDER, &url, &[]).await?;
    let body = super::body_text(&response);
    if let Some(evidence) = block_evidence(response.status, &body) {
        return Err(Error::Blocked {
            provider: PROVIDER,
            status: response.status,
            evidence,
        });
    }
    if response.status != 200 {
        return Err(status_error(PROVIDER, &response));
    }
    parse(&body, endpoint.base).map_err(|what| Error::Invalid {
        provider: PROVIDER,
        what,
    })
}

/// The results page's URL.
pub fn search_url(base: &Url, job: &SearchJob) -> Url {
    let mut url = base.clone();
    {
        let mut query = url.query_pairs_mut();
        query.append_pair("q", &job.query);
        if let Some(region) = &job.language {
            query.append_pair("kl", region);
        }
        if let Some(safesearch) = job.safesearch {
            query.append_pair("kp", kp(safesearch));
        }
        if let Some(page) = job.page.filter(|page| *page > 1) {
            query.append_pair("s", &((page - 1) * PAGE_SIZE).to_string());
        }
    }
    url
}

/// DuckDuckGo's `kp` value for a safe-search level.
pub(crate) fn kp(safesearch: SafeSearch) -> &'static str {
    match safesearch {
        SafeSearch::Strict => "1",
        SafeSearch::Moderate => "-1",
        SafeSearch::Off => "-2",
    }
}

/// What marks DuckDuckGo's anti-bot answer, if `status` and `body` are one.
pub fn block_evidence(status: u16, body: &str) -> Option<String> {
    if status == 202 || status == 403 {
        return Some(format!("status {status} instead of results"));
    }
    let lower = body.to_ascii_lowercase();
    [
        ("anomaly-modal", "the anomaly notice (anomaly-modal)"),
        ("challenge-form", "the challenge form (challenge-form)"),
        ("anomaly.js", "the anomaly script (anomaly.js)"),
        (
            "bots use duckduckgo too",
            "the bot notice (\"bots use DuckDuckGo too\")",
        ),
    ]
    .into_iter()
    .find(|(marker, _)| lower.contains(marker))
    .map(|(_, evidence)| evidence.to_owned())
}

/// Reads a results page (`base` resolves relative links).
pub fn parse(html: &str, base: &Url) -> Result<Found, String> {
    let document = Document::from(html);
    let mut found = Found::default();
    let anchors = document.select("a.result__a");
    if anchors.is_empty() {
        // A page without results says so; one that says nothing is not a results page.
        if document.select(".no-results").exists()
            || document.select("#links").exists()
            || document.select(".serp__results").exists()
        {
            return Ok(found);
        }
        return Err("the page holds neither results nor a no-results notice".to_owned());
    }
    for anchor in anchors.iter() {
        let block = nearest_result(&anchor);
        if block.as_ref().is_some_and(is_ad) {
            continue;
        }
        let Some(href) = anchor.attr("href") else {
            continue;
        };
        let Some(url) = result_url(&href, base) else {
            continue;
        };
        let snippet = block
            .as_ref()
            .map(|block| clean(&block.select(".result__snippet").first().text()))
            .unwrap_or_default();
        found.hits.push(Hit {
            title: clean(&anchor.text()),
            url,
            snippet,
            engines: vec![PROVIDER.as_str().to_owned()],
            published: None,
        });
    }
    Ok(found)
}

/// The nearest ancestor block with the class `result`.
fn nearest_result<'a>(anchor: &Selection<'a>) -> Option<Selection<'a>> {
    let mut current = anchor.parent();
    while current.exists() {
        if current.has_class("result") {
            return Some(current);
        }
        current = current.parent();
    }
    None
}

/// An ad block: `result--ad` on it or any block around it, or a sponsored badge inside.
fn is_ad(block: &Selection<'_>) -> bool {
    let mut current = block.clone();
    while current.exists() {
        if current.has_class("result--ad") || current.has_class("result--ad--small") {
            return true;
        }
        current = current.parent();
    }
    block.select(".badge--ad").exists()
}

/// Collapses whitespace.
fn clean(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The target of a result link: DuckDuckGo's `/l/?uddg=` redirect decoded (once more when
/// the target is still percent-encoded), or the link itself; `None` for ads, DuckDuckGo's
/// own pages and anything not http(s).
pub fn result_url(href: &str, base: &Url) -> Option<Url> {
    let link = base.join(href.trim()).ok()?;
    let target = if is_duckduckgo(&link) && link.path() == "/l/" {
        let uddg = link
            .query_pairs()
            .find(|(key, _)| key == "uddg")
            .map(|(_, value)| value.into_owned())?;
        let decoded = if looks_encoded(&uddg) {
            percent_decode(&uddg)?
        } else {
            uddg
        };
        Url::parse(&decoded).ok()?
    } else {
        link
    };
    if !matches!(target.scheme(), "http" | "https") || is_duckduckgo(&target) {
        return None;
    }
    Some(target)
}

fn is_duckduckgo(url: &Url) -> bool {
    url.host_str().is_some_and(|host| {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        host == "duckduckgo.com" || host.ends_with(".duckduckgo.com")
    })
}

/// True when a decoded `uddg` value is still percent-encoded (`https%3A%2F%2F…`).
fn looks_encoded(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    lower.starts_with("http%3a") || lower.starts_with("https%3a")
}

/// Decodes `%XX` escapes (and nothing else: a `+` stays a `+`).
fn percent_decode(value: &str) -> Option<String> {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut index = 0;
    while index < bytes.len() {
        if bytes[index] == b'%' {
            let hex = value.get(index + 1..index + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            index += 3;
        } else {
            out.push(bytes[index]);
            index += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url::parse("https://html.duckduckgo.com/html/").expect("url")
    }

    #[test]
    fn redirect_links_are_decoded_once_or_twice() {
        let once = "//duckduckgo.com/l/?uddg=https%3A%2F%2Fexample.com%2Fa%3Fb%3D1%26c%3D2&rut=x";
        assert_eq!(
            result_url(once, &base()).expect("a link").as_str(),
            "https://example.com/a?b=1&c=2"
        );
        let twice = "//duckduckgo.com/l/?uddg=https%253A%252F%252Fexample.com%252Fx%253Fq%253Da%252Bb&rut=y";
        assert_eq!(
            result_url(twice, &base()).expect("a link").as_str(),
            "https://example.com/x?q=a+b"
        );
        assert_eq!(
            result_url("https://direct.example/p", &base())
                .expect("a link")
                .as_str(),
            "https://direct.example/p"
        );
        for dropped in [
            "https://duckduckgo.com/y.js?ad_provider=bing",
            "/?q=more",
            "javascript:void(0)",
            "//duckduckgo.com/l/?rut=no-target",
        ] {
            assert!(result_url(dropped, &base()).is_none(), "{dropped}");
        }
    }

    #[test]
    fn anti_bot_answers_are_recognised() {
        assert!(block_evidence(202, "").is_some());
        assert!(block_evidence(403, "").is_some());
        let page = "<form id=\"challenge-form\" action=\"/anomaly\"></form>";
        assert!(
            block_evidence(200, page)
                .expect("blocked")
                .contains("challenge-form")
        );
        assert!(block_evidence(200, "<div class=\"result\"></div>").is_none());
    }

    #[test]
    fn ads_are_dropped_and_entities_decoded() {
        let html = r#"<div id="links">
          <div class="result results_links result--ad"><h2 class="result__title">
            <a class="result__a" href="https://duckduckgo.com/y.js?ad=1">Ad</a></h2></div>
          <div class="result results_links"><div class="links_main result__body">
            <h2 class="result__title"><a class="result__a"
              href="//duckduckgo.com/l/?uddg=https%3A%2F%2Fa.example%2F&amp;rut=1">Tom &amp; Jerry&#x27;s <b>page</b></a></h2>
            <a class="result__snippet" href="x">It&#39;s   a   snippet</a></div></div>
        </div>"#;
        let found = parse(html, &base()).expect("parses");
        assert_eq!(found.hits.len(), 1);
        assert_eq!(found.hits[0].title, "Tom & Jerry's page");
        assert_eq!(found.hits[0].snippet, "It's a snippet");
        assert_eq!(found.hits[0].url.as_str(), "https://a.example/");
        let empty = parse("<div class=\"no-results\">No results.</div>", &base()).expect("empty");
        assert!(empty.hits.is_empty());
        assert!(parse("<p>something else</p>", &base()).is_err());
    }
}
