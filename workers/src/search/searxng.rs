//! SearxNG's JSON API: `GET {url}/search?q=&format=json&pageno=&language=&safesearch=
//! &categories=&engines=` → results (title, url, content, engine and engines, publishedDate),
//! answers, infoboxes, suggestions and corrections, and the engines that did not answer
//! (`unresponsive_engines`, `[engine, reason]` pairs).
//!
//! Engines the operator forbids are never requested: a search naming one is refused before
//! any request, and when forbidden engines are configured and the search names none, the
//! instance's enabled engines (of the search's categories, else the general ones) are read
//! from `GET {url}/config` and the allowed ones are named explicitly (the instance would
//! otherwise ask its defaults, which may include them). A
//! result credited only to forbidden engines is dropped all the same.
//!
//! Not here: deduplication and ranking (`search::rank`), caching and failover
//! (`trawl::web_search`).

use url::Url;

use super::{Config, Endpoint, Error, Found, Hit, status_error, unique};
use crate::job::{Infobox, Provider, SearchJob, UnresponsiveEngine};
use crate::web::json::{Object, parse_object};

const PROVIDER: Provider = Provider::Searxng;

/// Searches the instance at `endpoint` (its base URL is `search.searxng.url`).
pub async fn search(
    endpoint: Endpoint<'_>,
    job: &SearchJob,
    config: &Config,
) -> Result<Found, Error> {
    let engines = if !job.engines.is_empty() {
        job.engines.clone()
    } else if config.searxng.forbid_engines.is_empty() {
        Vec::new()
    } else {
        // Without categories SearxNG searches its general ones.
        let categories = if job.categories.is_empty() {
            vec!["general".to_owned()]
        } else {
            job.categories.clone()
        };
        let enabled = enabled_engines(endpoint, &categories).await?;
        let allowed: Vec<String> = enabled
            .into_iter()
            .filter(|engine| !config.forbids(engine))
            .collect();
        if allowed.is_empty() {
            return Err(Error::Invalid {
                provider: PROVIDER,
                what: "every engine the instance enables is forbidden \
                       (search.searxng.forbid_engines)"
                    .to_owned(),
            });
        }
        allowed
    };
    let url = search_url(endpoint.base, job, &engines);
    let response = endpoint
        .get(PROVIDER, &url, &[("accept", "application/json")])
        .await?;
    if response.status != 200 {
        return Err(status_error(PROVIDER, &response));
    }
    parse(&response.body, &|engine| config.forbids(engine)).map_err(|what| Error::Invalid {
        provider: PROVIDER,
        what,
    })
}

/// The search request's URL.
pub fn search_url(base: &Url, job: &SearchJob, engines: &[String]) -> Url {
    let mut url = base
        .join("search")
        .expect("a base URL joins a relative path");
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("q", &job.query)
            .append_pair("format", "json")
            .append_pair("pageno", &job.page.unwrap_or(1).to_string());
        if let Some(language) = &job.language {
            query.append_pair("language", language);
        }
        if let Some(safesearch) = job.safesearch {
            query.append_pair("safesearch", &safesearch.level().to_string());
        }
        if !job.categories.is_empty() {
            query.append_pair("categories", &job.categories.join(","));
        }
        if !engines.is_empty() {
            query.append_pair("engines", &engines.join(","));
        }
    }
    url
}

/// The engines the instance enables (of `categories`, when given), from `GET {url}/config`.
async fn enabled_engines(
    endpoint: Endpoint<'_>,
    categories: &[String],
) -> Result<Vec<String>, Error> {
    let url = endpoint
        .base
        .join("config")
        .expect("a base URL joins a relative path");
    let response = endpoint
        .get(PROVIDER, &url, &[("accept", "application/json")])
        .await?;
    if response.status != 200 {
        return Err(status_error(PROVIDER, &response));
    }
    parse_engines(&response.body, categories).map_err(|what| Error::Invalid {
        provider: PROVIDER,
        what: format!("/config: {what}"),
    })
}

/// The enabled engines of a `/config` answer, of `categories` when given.
fn parse_engines(body: &[u8], categories: &[String]) -> Result<Vec<String>, String> {
    let value = parse_object(body)?;
    let root = Object::root(&value, "")?;
    let mut names = Vec::new();
    for element in root.array("engines")? {
        let engine = element.object()?;
        let Some(name) = engine.text("name")? else {
            continue;
        };
        let enabled = engine_enabled(&element);
        let in_category = categories.is_empty()
            || engine
                .strings("categories")?
                .iter()
                .any(|category| categories.contains(category));
        if enabled && in_category {
            names.push(name);
        }
    }
    Ok(unique(names))
}

/// `enabled` is a boolean; an engine without it is enabled.
fn engine_enabled(element: &crate::web::json::Element<'_>) -> bool {
    element
        .value
        .get("enabled")
        .and_then(serde_json::Value::as_bool)
        .unwrap_or(true)
}

/// Reads a search answer. `forbidden` says which engines' credits are dropped.
pub fn parse(body: &[u8], forbidden: &dyn Fn(&str) -> bool) -> Result<Found, String> {
    let value = parse_object(body)?;
    let root = Object::root(&value, "")?;
    let mut found = Found::default();
    for element in root.array("results")? {
        let result = element.object()?;
        let Some(url) = result.text("url")? else {
            continue;
        };
        let Some(url) = Url::parse(&url)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https"))
        else {
            continue;
        };
        let mut engines = result.strings("engines")?;
        if let Some(engine) = result.text("engine")?
            && !engines.contains(&engine)
        {
            engines.insert(0, engine);
        }
        let credited = !engines.is_empty();
        engines.retain(|engine| !forbidden(engine));
        if credited && engines.is_empty() {
            continue;
        }
        found.hits.push(Hit {
            title: result.text("title")?.unwrap_or_default(),
            url,
            snippet: result.text("content")?.unwrap_or_default(),
            engines: unique(engines),
            published: result.text("publishedDate")?,
        });
    }
    for element in root.array("answers")? {
        // Strings in older instances, `{answer, url, engine}` objects in newer ones.
        if element.is_null() {
            continue;
        }
        let answer = match element.value {
            serde_json::Value::String(text) => Some(text.clone()),
            _ => element.object()?.text("answer")?,
        };
        found.answers.extend(answer);
    }
    for element in root.array("infoboxes")? {
        let infobox = element.object()?;
        let url = match infobox.array("urls")?.first() {
            Some(first) => first.object()?.text("url")?,
            None => None,
        };
        found.infoboxes.push(Infobox {
            title: infobox.text("infobox")?.unwrap_or_default(),
            content: infobox.text("content")?.unwrap_or_default(),
            url: infobox.text("id")?.or(url),
            engine: infobox.text("engine")?,
        });
    }
    let mut suggestions = root.strings("suggestions")?;
    suggestions.extend(root.strings("corrections")?);
    found.suggestions = unique(suggestions);
    for element in root.array("unresponsive_engines")? {
        // `[engine, reason]` pairs.
        let pair = match element.value {
            serde_json::Value::Array(pair) => pair,
            _ => {
                return Err(format!(
                    "unresponsive_engines holds {}, not an [engine, reason] pair",
                    element.value
                ));
            }
        };
        let engine = pair.first().and_then(serde_json::Value::as_str);
        let reason = pair.get(1).and_then(serde_json::Value::as_str);
        if let Some(engine) = engine {
            found.unresponsive_engines.push(UnresponsiveEngine {
                engine: engine.to_owned(),
                reason: reason.unwrap_or("unknown").to_owned(),
            });
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_answers_and_unresponsive_engines_are_read() {
        let body = br#"{
            "query": "rust", "number_of_results": 0,
            "results": [
                {"url": "https://www.rust-lang.org/", "title": "Rust", "content": "A language",
                 "engine": "duckduckgo", "engines": ["duckduckgo", "google"],
                 "publishedDate": "2024-05-01T00:00:00"},
                {"url": "https://doc.rust-lang.org/book/", "title": null, "content": null,
                 "engine": "google", "engines": ["google"], "publishedDate": null},
                {"url": null, "title": "no url"},
                {"url": "magnet:?xt=urn:btih:x", "title": "not the web"}
            ],
            "answers": ["an answer", {"answer": "another", "url": null}],
            "infoboxes": [{"infobox": "Rust", "content": "Rust is", "engine": "wikipedia",
                           "urls": [{"title": "site", "url": "https://www.rust-lang.org/"}]}],
            "suggestions": ["rust book", "rust book"], "corrections": [],
            "unresponsive_engines": [["bing", "timeout"], ["qwant", "CAPTCHA"]]
        }"#;
        let found = parse(body, &|engine| engine == "google").expect("parses");
        assert_eq!(found.hits.len(), 1, "{:?}", found.hits);
        assert_eq!(found.hits[0].engines, ["duckduckgo"]);
        assert_eq!(
            found.hits[0].published.as_deref(),
            Some("2024-05-01T00:00:00")
        );
        assert_eq!(found.answers, ["an answer", "another"]);
        assert_eq!(
            found.infoboxes[0].url.as_deref(),
            Some("https://www.rust-lang.org/")
        );
        assert_eq!(found.suggestions, ["rust book"]);
        assert_eq!(found.unresponsive_engines[1].reason, "CAPTCHA");
    }

    #[test]
    fn wrong_types_are_errors_that_name_the_field() {
        let error = parse(br#"{"results": [{"url": 5}]}"#, &|_| false).expect_err("a number");
        assert_eq!(error, "results[0].url is a number, not a string");
        let error = parse(br#"{"results": "none"}"#, &|_| false).expect_err("a string");
        assert!(error.contains("results is a string"), "{error}");
        assert!(parse(br#"{"results": null}"#, &|_| false).is_ok());
        assert!(parse(b"<html>", &|_| false).is_err());
    }

    #[test]
    fn the_request_names_every_option() {
        let base = Url::parse("http://searxng:8080/").expect("url");
        let job = SearchJob {
            language: Some("fr".into()),
            safesearch: Some(crate::job::SafeSearch::Strict),
            categories: vec!["news".into()],
            page: Some(2),
            ..SearchJob::new("café & co")
        };
        let url = search_url(&base, &job, &["wikipedia".into(), "brave".into()]);
        assert_eq!(
            url.as_str(),
            "http://searxng:8080/search?q=caf%C3%A9+%26+co&format=json&pageno=2&language=fr\
             &safesearch=2&categories=news&engines=wikipedia%2Cbrave"
        );
    }

    #[test]
    fn enabled_engines_come_from_the_config_answer() {
        let body = br#"{"engines": [
            {"name": "google", "enabled": true, "categories": ["general"]},
            {"name": "wikipedia", "enabled": true, "categories": ["general"]},
            {"name": "arxiv", "enabled": true, "categories": ["science"]},
            {"name": "yahoo", "enabled": false, "categories": ["general"]}
        ]}"#;
        assert_eq!(
            parse_engines(body, &[]).expect("parses"),
            ["google", "wikipedia", "arxiv"]
        );
        assert_eq!(
            parse_engines(body, &["science".into()]).expect("parses"),
            ["arxiv"]
        );
    }
}
