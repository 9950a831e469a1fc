//! A Crawl4AI server's API (its Docker image): `POST /crawl` (`{"urls": [url],
//! "crawler_config": …}` → `{"success", "results": [...]}`, or a single result at the top or
//! under `result` from older servers) or `POST /md` (`{"url", "f": "fit"}` → `{"markdown",
//! "success"}`). Markdown comes as a string or as `{"raw_markdown", "fit_markdown"}` (the
//! pruned main content, preferred); errors as a status with FastAPI's `{"detail": …}`, or a
//! result with `success: false` and `error_message`.
//!
//! Not here: when Crawl4AI is asked, its token and base URL (`fallback`).

use serde::{Deserialize, Serialize};
use url::Url;

use super::{Error, Kind, Provider, Scraped, absolute_links, error_message, one_line};
use crate::web::json::Object;

/// The endpoint asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Endpoint {
    /// `POST /crawl`: markdown, links, title and status.
    #[default]
    Crawl,
    /// `POST /md`: markdown alone.
    Md,
}

impl Endpoint {
    /// The endpoint, below the base URL.
    pub(super) fn path(self) -> &'static str {
        match self {
            Endpoint::Crawl => "crawl",
            Endpoint::Md => "md",
        }
    }
}

/// Asks the server for `url`.
pub(super) async fn scrape(provider: &Provider, url: &Url) -> Result<Scraped, Error> {
    if provider.markdown_only {
        let body = serde_json::json!({"url": url.as_str(), "f": "fit", "q": null, "c": "0"});
        let answer = provider.post(body).await?;
        return read_md(url, &answer);
    }
    // The pruning filter gives `fit_markdown`: the main content, like Firecrawl's
    // onlyMainContent.
    let body = serde_json::json!({
        "urls": [url.as_str()],
        "browser_config": {"type": "BrowserConfig", "params": {"headless": true}},
        "crawler_config": {"type": "CrawlerRunConfig", "params": {
            "cache_mode": "bypass",
            "markdown_generator": {"type": "DefaultMarkdownGenerator", "params": {
                "content_filter": {"type": "PruningContentFilter", "params": {}}
            }}
        }}
    });
    let answer = provider.post(body).await?;
    read_crawl(url, &answer)
}

fn invalid(what: String) -> Error {
    Error::Invalid {
        provider: Kind::Crawl4ai,
        what,
    }
}

fn refused(answer: &serde_json::Value) -> Error {
    Error::Refused {
        provider: Kind::Crawl4ai,
        message: error_message(answer)
            .map(|message| one_line(&message))
            .unwrap_or_else(|| "success: false".to_owned()),
    }
}

/// Reads `/md`'s answer.
pub(super) fn read_md(url: &Url, answer: &serde_json::Value) -> Result<Scraped, Error> {
    let root = Object::root(answer, "").map_err(invalid)?;
    if root.boolean("success").map_err(invalid)? == Some(false) {
        return Err(refused(answer));
    }
    let markdown = root
        .string("markdown")
        .map_err(invalid)?
        .ok_or_else(|| invalid("no markdown".to_owned()))?;
    let final_url = match root.text("url").map_err(invalid)? {
        Some(text) => {
            Url::parse(&text).map_err(|error| invalid(format!("url {text:?}: {error}")))?
        }
        None => url.clone(),
    };
    finish(Scraped {
        provider: Kind::Crawl4ai,
        final_url,
        status: 200,
        title: None,
        description: None,
        lang: None,
        markdown,
        html: None,
        raw_html: None,
        links: Vec::new(),
        warning: None,
    })
}

/// Reads `/crawl`'s answer: the first result.
pub(super) fn read_crawl(url: &Url, answer: &serde_json::Value) -> Result<Scraped, Error> {
    let root = Object::root(answer, "").map_err(invalid)?;
    if root.boolean("success").map_err(invalid)? == Some(false) && !root.has("results") {
        return Err(refused(answer));
    }
    let (result, value) = if root.has("results") {
        let results = root.array("results").map_err(invalid)?;
        let first = results
            .first()
            .ok_or_else(|| invalid("results is empty".to_owned()))?;
        (first.object().map_err(invalid)?, first.value)
    } else if let Some(result) = root.object("result").map_err(invalid)? {
        (result, answer.get("result").unwrap_or(answer))
    } else {
        (Object::root(answer, "").map_err(invalid)?, answer)
    };
    if result.boolean("success").map_err(invalid)? == Some(false) {
        return Err(refused(value));
    }
    let markdown = match result.value("markdown") {
        None => String::new(),
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(serde_json::Value::Object(_)) => {
            let parts = result
                .object("markdown")
                .map_err(invalid)?
                .ok_or_else(|| invalid("no markdown".to_owned()))?;
            match parts.text("fit_markdown").map_err(invalid)? {
                Some(fit) => fit,
                None => parts
                    .string("raw_markdown")
                    .map_err(invalid)?
                    .unwrap_or_default(),
            }
        }
        Some(_) => {
            return Err(invalid(
                "markdown is neither a string nor an object".to_owned(),
            ));
        }
    };
    let status = super::page_status(result.count("status_code").map_err(invalid)?, "status_code")
        .map_err(invalid)?;
    let final_url = match result
        .text("redirected_url")
        .map_err(invalid)?
        .or(result.text("url").map_err(invalid)?)
    {
        Some(text) => {
            Url::parse(&text).map_err(|error| invalid(format!("url {text:?}: {error}")))?
        }
        None => url.clone(),
    };
    let metadata = result.object("metadata").map_err(invalid)?;
    let meta = |key: &str| -> Result<Option<String>, Error> {
        match &metadata {
            Some(metadata) => metadata.text(key).map_err(invalid),
            None => Ok(None),
        }
    };
    let mut links = Vec::new();
    if let Some(groups) = result.object("links").map_err(invalid)? {
        for group in ["internal", "external"] {
            for link in groups.array(group).map_err(invalid)? {
                match link.value {
                    serde_json::Value::String(href) => links.push(href.clone()),
                    _ => {
                        if let Some(href) = link
                            .object()
                            .map_err(invalid)?
                            .text("href")
                            .map_err(invalid)?
                        {
                            links.push(href);
                        }
                    }
                }
            }
        }
    }
    finish(Scraped {
        provider: Kind::Crawl4ai,
        status,
        title: meta("title")?,
        description: meta("description")?,
        lang: meta("language")?,
        markdown,
        html: result.text("cleaned_html").map_err(invalid)?,
        raw_html: result.text("html").map_err(invalid)?,
        links: absolute_links(&final_url, links),
        warning: None,
        final_url,
    })
}

/// An answer without markdown reads nothing.
fn finish(scraped: Scraped) -> Result<Scraped, Error> {
    if scraped.markdown.trim().is_empty() {
        return Err(Error::Refused {
            provider: Kind::Crawl4ai,
            message: format!("status {}: the markdown is empty", scraped.status),
        });
    }
    Ok(scraped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url() -> Url {
        Url::parse("https://forum.test/t/1").expect("url")
    }

    #[test]
    fn crawl_answers_in_each_shape_give_the_fit_markdown() {
        let result = serde_json::json!({
            "url": "https://forum.test/t/1",
            "redirected_url": "https://forum.test/t/1/",
            "success": true,
            "status_code": 200,
            "cleaned_html": "<p>Post</p>",
            "markdown": {"raw_markdown": "nav\n\nPost", "fit_markdown": "Post"},
            "metadata": {"title": "Thread"},
            "links": {"internal": [{"href": "/t/2", "text": "next"}], "external": ["https://x.test/"]}
        });
        for answer in [
            serde_json::json!({"success": true, "results": [result.clone()]}),
            serde_json::json!({"result": result.clone()}),
            result.clone(),
        ] {
            let scraped = read_crawl(&url(), &answer).expect("scraped");
            assert_eq!(scraped.markdown, "Post");
            assert_eq!(scraped.title.as_deref(), Some("Thread"));
            assert_eq!(scraped.final_url.as_str(), "https://forum.test/t/1/");
            assert_eq!(
                scraped.links,
                vec!["https://forum.test/t/2", "https://x.test/"]
            );
        }
        let plain = serde_json::json!({"results": [{"markdown": "Just text", "success": true}]});
        assert_eq!(
            read_crawl(&url(), &plain).expect("string").markdown,
            "Just text"
        );
        let raw_only = serde_json::json!({"results": [{"markdown": {"raw_markdown": "Raw", "fit_markdown": ""}}]});
        assert_eq!(read_crawl(&url(), &raw_only).expect("raw").markdown, "Raw");
    }

    #[test]
    fn failures_and_wrong_types_are_typed() {
        let failed = serde_json::json!({"success": true, "results": [{"success": false,
            "error_message": "net::ERR_NAME_NOT_RESOLVED", "markdown": null}]});
        let error = read_crawl(&url(), &failed).expect_err("failed");
        assert!(
            error.to_string().contains("ERR_NAME_NOT_RESOLVED"),
            "{error}"
        );
        assert!(read_crawl(&url(), &serde_json::json!({"results": []})).is_err());
        let wrong = serde_json::json!({"results": [{"markdown": 5}]});
        assert!(matches!(
            read_crawl(&url(), &wrong),
            Err(Error::Invalid { .. })
        ));
        let md = serde_json::json!({"url": "https://forum.test/t/1", "filter": "fit",
            "markdown": "Post", "success": true});
        assert_eq!(read_md(&url(), &md).expect("md").markdown, "Post");
        assert!(read_md(&url(), &serde_json::json!({"success": true})).is_err());
        assert!(read_md(&url(), &serde_json::json!({"markdown": ""})).is_err());
    }
}
