//! DuckDuckGo's image search, in its two steps: the search page
//! (`GET {images_url}?q=&iax=images&ia=images`) holds the `vqd` token; then
//! `GET {images_url}i.js?l=&o=json&q=&vqd=&f=,,,,,&p=` with the same headers, a referer and the
//! cookies the page set (kept per host in a [`Jar`]) answers the images (`image`,
//! `thumbnail`, `url` of the page, `title`, `width`, `height`).
//!
//! A page without the token, an answer that is not JSON, or fields of the wrong type are
//! typed errors ([`Error::Invalid`]); the anti-bot answers of the HTML search apply here too.
//!
//! Not here: caching and pacing (the caller's `Pace` spaces both requests).

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use url::Url;

use super::{Endpoint, Error, status_error};
use crate::job::{ImageHit, ImagesJob, Provider, SafeSearch};
use crate::web;
use crate::web::json::{Object, parse_object};

const PROVIDER: Provider = Provider::Duckduckgo;

/// Cookies kept per host, as DuckDuckGo's pages set them (name and value only: they go back
/// to the same host, never elsewhere).
#[derive(Debug, Default)]
pub struct Jar {
    hosts: Mutex<HashMap<String, BTreeMap<String, String>>>,
}

/// Hosts whose cookies are kept at most (the jar serves a few provider hosts).
const JAR_HOSTS: usize = 16;

impl Jar {
    /// An empty jar.
    pub fn new() -> Jar {
        Jar::default()
    }

    /// Keeps the cookies `response` set for its host.
    pub fn keep(&self, response: &web::Response) {
        let Some(host) = response.final_url.host_str() else {
            return;
        };
        let Ok(mut hosts) = self.hosts.lock() else {
            return;
        };
        if hosts.len() >= JAR_HOSTS && !hosts.contains_key(host) {
            hosts.clear();
        }
        let cookies = hosts.entry(host.to_ascii_lowercase()).or_default();
        for value in response.headers.get_all("set-cookie") {
            let Ok(value) = value.to_str() else { continue };
            let pair = value.split(';').next().unwrap_or_default();
            if let Some((name, value)) = pair.split_once('=') {
                let name = name.trim();
                if !name.is_empty() && cookies.len() < 50 {
                    cookies.insert(name.to_owned(), value.trim().to_owned());
                }
            }
        }
    }

    /// The `Cookie` header for `url`'s host, if it has cookies.
    pub fn header_for(&self, url: &Url) -> Option<String> {
        let host = url.host_str()?.to_ascii_lowercase();
        let hosts = self.hosts.lock().ok()?;
        let cookies = hosts.get(&host).filter(|cookies| !cookies.is_empty())?;
        Some(
            cookies
                .iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect::<Vec<_>>()
                .join("; "),
        )
    }
}

/// Searches images at `endpoint` (`search.duckduckgo.images_url`), keeping cookies in `jar`.
pub async fn search(
    endpoint: Endpoint<'_>,
    jar: &Jar,
    job: &ImagesJob,
) -> Result<Vec<ImageHit>, Error> {
    let mut page_url = endpoint.base.clone();
    page_url
        .query_pairs_mut()
        .append_pair("q", &job.query)
        .append_pair("iax", "images")
        .append_pair("ia", "images");
    let cookie = jar.header_for(&page_url);
    let mut headers: Vec<(&str, &str)> = Vec::new();
    if let Some(cookie) = &cookie {
        headers.push(("cookie", cookie));
    }
    let page = endpoint.get(PROVIDER, &page_url, &headers).await?;
    jar.keep(&page);
    let body = super::body_text(&page);
    if let Some(evidence) = super::duckduckgo::block_evidence(page.status, &body) {
        return Err(Error::Blocked {
            provider: PROVIDER,
            status: page.status,
            evidence,
        });
    }
    if page.status != 200 {
        return Err(status_error(PROVIDER, &page));
    }
    let vqd = vqd_token(&body).ok_or_else(|| Error::Invalid {
        provider: PROVIDER,
        what: "the search page holds no vqd token".to_owned(),
    })?;

    let url = images_url(endpoint.base, job, &vqd);
    let cookie = jar.header_for(&url);
    let referer = page_url.to_string();
    let mut headers: Vec<(&str, &str)> = vec![
        ("accept", "application/json, text/javascript, */*; q=0.01"),
        ("referer", &referer),
        ("x-requested-with", "XMLHttpRequest"),
    ];
    if let Some(cookie) = &cookie {
        headers.push(("cookie", cookie));
    }
    let answer = endpoint.get(PROVIDER, &url, &headers).await?;
    jar.keep(&answer);
    if let Some(evidence) =
        super::duckduckgo::block_evidence(answer.status, &super::body_text(&answer))
    {
        return Err(Error::Blocked {
            provider: PROVIDER,
            status: answer.status,
            evidence,
        });
    }
    if answer.status != 200 {
        return Err(status_error(PROVIDER, &answer));
    }
    parse(&answer.body, job.limit()).map_err(|what| Error::Invalid {
        provider: PROVIDER,
        what: format!("i.js: {what}"),
    })
}

/// The `i.js` request's URL.
pub fn images_url(base: &Url, job: &ImagesJob, vqd: &str) -> Url {
    let mut url = base.join("i.js").expect("a base URL joins a relative path");
    let safesearch = match job.safesearch {
        Some(SafeSearch::Off) => "-1",
        Some(SafeSearch::Strict | SafeSearch::Moderate) | None => "1",
    };
    url.query_pairs_mut()
        .append_pair("l", job.language.as_deref().unwrap_or("us-en"))
        .append_pair("o", "json")
        .append_pair("q", &job.query)
        .append_pair("vqd", vqd)
        .append_pair("f", ",,,,,")
        .append_pair("p", safesearch);
    url
}

/// The `vqd` token in a search page: `vqd="4-123…"`, `vqd='4-…'` or `vqd=4-…&`.
pub fn vqd_token(page: &str) -> Option<String> {
    let mut rest = page;
    while let Some(at) = rest.find("vqd") {
        rest = &rest[at + 3..];
        // `vqd=…`, `vqd: …`, or `"vqd":"…"` (the key's closing quote first).
        let after = rest.trim_start_matches(['"', '\'']).trim_start();
        let Some(value) = after.strip_prefix(['=', ':']) else {
            continue;
        };
        let value = value.trim_start().trim_start_matches(['"', '\'']);
        let token: String = value
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        if token.len() >= 5 && token.contains('-') {
            return Some(token);
        }
    }
    None
}

/// Reads an `i.js` answer, keeping at most `limit` images, unique by image URL.
pub fn parse(body: &[u8], limit: usize) -> Result<Vec<ImageHit>, String> {
    let value = parse_object(body)?;
    let root = Object::root(&value, "")?;
    if value.get("results").is_none() {
        return Err("the answer has no results".to_owned());
    }
    let mut hits: Vec<ImageHit> = Vec::new();
    for element in root.array("results")? {
        let result = element.object()?;
        let Some(image) = result.text("image")? else {
            continue;
        };
        if Url::parse(&image)
            .map(|url| !matches!(url.scheme(), "http" | "https"))
            .unwrap_or(true)
            || hits.iter().any(|hit| hit.image == image)
        {
            continue;
        }
        let thumbnail = result.text("thumbnail")?;
        let source_page = result.text("url")?;
        let title = result.text("title")?.unwrap_or_default();
        let width = result.count("width")?;
        let height = result.count("height")?;
        if hits.len() == limit {
            break;
        }
        hits.push(ImageHit {
            rank: hits.len() + 1,
            title,
            image,
            thumbnail,
            source_page,
            width,
            height,
        });
    }
    Ok(hits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_found_in_its_spellings() {
        assert_eq!(
            vqd_token("<script>vqd=\"4-1234567890\";</script>").as_deref(),
            Some("4-1234567890")
        );
        assert_eq!(
            vqd_token("nrj('/d.js?q=x&vqd=4-abc_DEF-9&p=1')").as_deref(),
            Some("4-abc_DEF-9")
        );
        assert_eq!(
            vqd_token("{\"vqd\":\"4-55555\"}").as_deref(),
            Some("4-55555")
        );
        assert_eq!(vqd_token("<p>no token, vqd is elsewhere</p>"), None);
    }

    #[test]
    fn images_are_read_and_wrong_types_refused() {
        let body = br#"{"results": [
            {"title": "A", "image": "https://img.example/a.jpg", "thumbnail": "https://t.example/a",
             "url": "https://page.example/a", "width": 800, "height": 600, "source": "Bing"},
            {"title": "dup", "image": "https://img.example/a.jpg", "width": 1, "height": 1},
            {"title": null, "image": "https://img.example/b.png", "thumbnail": null,
             "url": null, "width": null, "height": "480"}
        ], "next": "i.js?s=100"}"#;
        let hits = parse(body, 10).expect("parses");
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].width, Some(800));
        assert_eq!(hits[1].height, Some(480));
        assert_eq!(hits[1].rank, 2);
        let error = parse(
            br#"{"results": [{"image": "https://x/", "width": "wide"}]}"#,
            10,
        )
        .expect_err("wrong type");
        assert!(error.contains("results[0].width"), "{error}");
        assert!(parse(b"not json", 10).is_err());
        assert!(parse(br#"{"next": "x"}"#, 10).is_err());
    }
}
