//! DuckDuckGo's instant answers: `GET {instant_url}?q=&format=json&no_html=1&skip_disambig=1`
//! → the abstract (`AbstractText`, `AbstractSource`, `AbstractURL`), the answer (`Answer`,
//! `AnswerType`), the definition (`Definition`, `DefinitionSource`, `DefinitionURL`), the
//! image, and the related topics (`RelatedTopics`, whose groups hold `Topics` of their own),
//! which become the results (`FirstURL`, `Text`).
//!
//! Not here: the HTML results (`duckduckgo`), ranking (`search::rank`).

use url::Url;

use super::{Endpoint, Error, Found, Hit, status_error};
use crate::job::{InstantAnswer, Provider, SearchJob};
use crate::web::json::{Object, parse_object};

const PROVIDER: Provider = Provider::Instant;

/// Asks the instant answers API at `endpoint` (`search.duckduckgo.instant_url`).
pub async fn search(endpoint: Endpoint<'_>, job: &SearchJob) -> Result<Found, Error> {
    let mut url = endpoint.base.clone();
    url.query_pairs_mut()
        .append_pair("q", &job.query)
        .append_pair("format", "json")
        .append_pair("no_html", "1")
        .append_pair("skip_disambig", "1");
    let response = endpoint
        .get(PROVIDER, &url, &[("accept", "application/json")])
        .await?;
    if response.status != 200 {
        return Err(status_error(PROVIDER, &response));
    }
    parse(&response.body, endpoint.base).map_err(|what| Error::Invalid {
        provider: PROVIDER,
        what,
    })
}

/// Reads an instant answer (`base` resolves the relative image path).
pub fn parse(body: &[u8], base: &Url) -> Result<Found, String> {
    let value = parse_object(body)?;
    let root = Object::root(&value, "")?;
    // `Answer` is a string, except for a few answer types that send an object: those
    // are not text, and are left out.
    let answer = match root.string("Answer") {
        Ok(answer) => answer.filter(|answer| !answer.trim().is_empty()),
        Err(_)
            if value
                .get("Answer")
                .is_some_and(serde_json::Value::is_object) =>
        {
            None
        }
        Err(error) => return Err(error),
    };
    let image = root
        .text("Image")?
        .and_then(|image| base.join(&image).ok())
        .map(|image| image.to_string());
    let instant = InstantAnswer {
        heading: root.text("Heading")?,
        abstract_text: root.text("AbstractText")?,
        abstract_source: root.text("AbstractSource")?,
        abstract_url: root.text("AbstractURL")?,
        answer,
        answer_type: root.text("AnswerType")?,
        definition: root.text("Definition")?,
        definition_source: root.text("DefinitionSource")?,
        definition_url: root.text("DefinitionURL")?,
        image,
    };
    let mut found = Found::default();
    for key in ["Results", "RelatedTopics"] {
        for element in root.array(key)? {
            let topic = element.object()?;
            let group = topic.array("Topics")?;
            if group.is_empty() {
                found.hits.extend(topic_hit(&topic)?);
            }
            for inner in group {
                found.hits.extend(topic_hit(&inner.object()?)?);
            }
        }
    }
    found.instant = Some(instant);
    Ok(found)
}

/// A related topic as a result: its `FirstURL` and `Text` (the text before " - " is its
/// title).
fn topic_hit(topic: &Object<'_>) -> Result<Option<Hit>, String> {
    let Some(url) = topic.text("FirstURL")? else {
        return Ok(None);
    };
    let Some(url) = Url::parse(&url)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https"))
    else {
        return Ok(None);
    };
    let text = topic.text("Text")?.unwrap_or_default();
    let title = text
        .split_once(" - ")
        .map_or(text.as_str(), |(title, _)| title)
        .to_owned();
    Ok(Some(Hit {
        title,
        url,
        snippet: text,
        engines: vec!["duckduckgo".to_owned()],
        published: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abstract_answer_definition_and_topics_are_read() {
        let body = br#"{"Heading": "Rust", "AbstractText": "Rust is a language.",
            "AbstractSource": "Wikipedia", "AbstractURL": "https://en.wikipedia.org/wiki/Rust",
            "Image": "/i/rust.png", "Answer": "", "AnswerType": "", "Definition": null,
            "RelatedTopics": [
              {"FirstURL": "https://duckduckgo.com/Cargo", "Text": "Cargo - the package manager"},
              {"Name": "Tools", "Topics": [
                {"FirstURL": "https://duckduckgo.com/Rustup", "Text": "Rustup - installer"}]}
            ], "Results": [], "Type": "A"}"#;
        let base = Url::parse("https://api.duckduckgo.com/").expect("url");
        let found = parse(body, &base).expect("parses");
        let instant = found.instant.expect("an answer");
        assert_eq!(instant.abstract_source.as_deref(), Some("Wikipedia"));
        assert_eq!(instant.answer, None);
        assert_eq!(
            instant.image.as_deref(),
            Some("https://api.duckduckgo.com/i/rust.png")
        );
        assert_eq!(found.hits.len(), 2);
        assert_eq!(found.hits[1].title, "Rustup");
        assert!(parse(br#"{"RelatedTopics": {"a": 1}}"#, &base).is_err());
    }
}
