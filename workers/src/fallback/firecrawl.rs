//! Firecrawl's scrape API (`POST /v1/scrape`, or `/v2/scrape`): the page's main content as
//! markdown (`onlyMainContent`), with its HTML, raw HTML, links and metadata, read from
//! `{"success": true, "data": {...}}`; an error answer is `{"success": false, "error": …}`
//! with its status (402 payment required, 429 rate limited, 5xx).
//!
//! Not here: when Firecrawl is asked, its key and base URL (`fallback`).

use serde::{Deserialize, Serialize};
use url::Url;

use super::{Error, Kind, Provider, Scraped, absolute_links, error_message, one_line};
use crate::web::json::Object;

/// The API version asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `/v1/scrape`.
    #[default]
    V1,
    /// `/v2/scrape`.
    V2,
}

impl Api {
    /// The scrape endpoint, below the base URL.
    pub(super) fn path(self) -> &'static str {
        match self {
            Api::V1 => "v1/scrape",
            Api::V2 => "v2/scrape",
        }
    }
}

/// Asks Firecrawl for `url`.
pub(super) async fn scrape(provider: &Provider, url: &Url) -> Result<Scraped, Error> {
    let body = serde_json::json!({
        "url": url.as_str(),
        "formats": ["markdown", "html", "rawHtml", "links"],
        "onlyMainContent": true,
    });
    // Both versions take these formats and answer the same shape for them.
    let answer = provider.post(body).await?;
    read(url, &answer)
}

/// Reads a scrape answer.
pub(super) fn read(url: &Url, answer: &serde_json::Value) -> Result<Scraped, Error> {
    let invalid = |what: String| Error::Invalid {
        provider: Kind::Firecrawl,
        what,
    };
    let root = Object::root(answer, "").map_err(invalid)?;
    if root.boolean("success").map_err(invalid)? == Some(false) {
        return Err(Error::Refused {
            provider: Kind::Firecrawl,
            message: error_message(answer)
                .map(|message| one_line(&message))
                .unwrap_or_else(|| "success: false".to_owned()),
        });
    }
    let data = root
        .object("data")
        .map_err(invalid)?
        .ok_or_else(|| invalid("no data".to_owned()))?;
    let markdown = data
        .string("markdown")
        .map_err(invalid)?
        .unwrap_or_default();
    let metadata = data.object("metadata").map_err(invalid)?;
    let meta = |key: &str| -> Result<Option<String>, Error> {
        match &metadata {
            Some(metadata) => first_text(metadata, key).map_err(invalid),
            None => Ok(None),
        }
    };
    let status = match &metadata {
        Some(metadata) => metadata.count("statusCode").map_err(invalid)?,
        None => None,
    };
    let status = super::page_status(status, "data.metadata.statusCode").map_err(invalid)?;
    let final_url = match meta("url")?.or(meta("sourceURL")?) {
        Some(text) => Url::parse(&text)
            .map_err(|error| invalid(format!("data.metadata.url {text:?}: {error}")))?,
        None => url.clone(),
    };
    if markdown.trim().is_empty() {
        let why = meta("error")?.unwrap_or_else(|| "no markdown".to_owned());
        return Err(Error::Refused {
            provider: Kind::Firecrawl,
            message: one_line(&format!("status {status}: {why}")),
        });
    }
    let links = absolute_links(&final_url, data.strings("links").map_err(invalid)?);
    let warning = root
        .text("warning")
        .map_err(invalid)?
        .or(data.text("warning").map_err(invalid)?)
        .map(|warning| one_line(&warning));
    Ok(Scraped {
        provider: Kind::Firecrawl,
        status,
        title: meta("title")?,
        description: meta("description")?,
        lang: meta("language")?,
        markdown,
        html: data.text("html").map_err(invalid)?,
        raw_html: data.text("rawHtml").map_err(invalid)?,
        links,
        warning,
        final_url,
    })
}

/// A metadata field, which Firecrawl gives as a string or a list of strings (the first one).
fn first_text(object: &Object<'_>, key: &str) -> Result<Option<String>, String> {
    match object.value(key) {
        Some(serde_json::Value::Array(_)) => Ok(object
            .strings(key)?
            .into_iter()
            .map(|text| text.trim().to_owned())
            .find(|text| !text.is_empty())),
        _ => object.text(key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> Url {
        Url::parse("https://shop.test/item").expect("url")
    }

    #[test]
    fn a_scrape_answer_gives_markdown_metadata_and_links() {
        let answer = serde_json::json!({
            "success": true,
            "data": {
                "markdown": "# Kettle\n\nBoils water.",
                "html": "<h1>Kettle</h1><p>Boils water.</p>",
                "links": ["/cart", "https://shop.test/cart", "javascript:void(0)"],
                "metadata": {
                    "title": ["Kettle", "ignored"],
                    "language": "en",
                    "sourceURL": "https://shop.test/item",
                    "url": "https://shop.test/item?ref=1",
                    "statusCode": 200
                }
            }
        });
        let scraped = read(&url(), &answer).expect("scraped");
        assert_eq!(scraped.title.as_deref(), Some("Kettle"));
        assert_eq!(scraped.lang.as_deref(), Some("en"));
        assert_eq!(scraped.final_url.as_str(), "https://shop.test/item?ref=1");
        assert_eq!(scraped.links, vec!["https://shop.test/cart"]);
        assert!(scraped.raw_html.is_none());
    }

    #[test]
    fn failures_and_wrong_types_are_typed() {
        let refused = serde_json::json!({"success": false, "error": "Request timed out"});
        assert!(
            matches!(read(&url(), &refused), Err(Error::Refused { message, .. }) if message == "Request timed out")
        );
        let wrong = serde_json::json!({"success": true, "data": {"markdown": 3}});
        let error = read(&url(), &wrong).expect_err("wrong type");
        assert!(
            error.to_string().contains("data.markdown is a number"),
            "{error}"
        );
        let empty = serde_json::json!({"success": true, "data": {"markdown": "",
            "metadata": {"statusCode": 403, "error": "blocked"}}});
        let error = read(&url(), &empty).expect_err("empty");
        assert!(error.to_string().contains("status 403: blocked"), "{error}");
        let no_data = serde_json::json!({"success": true, "data": null});
        assert!(matches!(read(&url(), &no_data), Err(Error::Invalid { .. })));
        let bad_status = serde_json::json!({"success": true, "data": {"markdown": "x",
            "metadata": {"statusCode": 9000}}});
        assert!(read(&url(), &bad_status).is_err());
    }
}
