//! Web search jobs and their results: a query to a search provider (SearxNG, DuckDuckGo, its
//! instant answers), the closed structure of a result (`rank`, `title`, `url`, `snippet`,
//! `engines`, `published`), what else a provider said (answers, infoboxes, suggestions, the
//! engines that did not answer, an instant answer), and image results.
//!
//! Not here: talking to the providers (`crate::search`), caching, rate limits and turning the
//! top results into fetch jobs (`trawl::web_search`, the runner).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Results a search returns when it does not say.
pub const DEFAULT_LIMIT: usize = 10;
/// Most results a search may ask for.
pub const MAX_LIMIT: usize = 50;
/// Longest query accepted, in bytes.
pub const MAX_QUERY_BYTES: usize = 2_048;

/// Which provider answers a search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// SearxNG when `search.searxng.url` is set, else DuckDuckGo; a provider that fails
    /// falls over to the next.
    #[default]
    Auto,
    /// The SearxNG instance at `search.searxng.url` (its JSON API).
    Searxng,
    /// DuckDuckGo's HTML results page.
    Duckduckgo,
    /// DuckDuckGo's instant answers (abstract, answer, definition, related topics).
    Instant,
}

impl Provider {
    /// The snake_case name (also the metrics label).
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::Auto => "auto",
            Provider::Searxng => "searxng",
            Provider::Duckduckgo => "duckduckgo",
            Provider::Instant => "instant",
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// SearxNG's safe-search levels (DuckDuckGo's `kp` takes the same three).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SafeSearch {
    /// No filtering.
    Off,
    /// Moderate filtering.
    Moderate,
    /// Strict filtering.
    Strict,
}

impl SafeSearch {
    /// SearxNG's number: 0, 1 or 2.
    pub fn level(self) -> u8 {
        match self {
            SafeSearch::Off => 0,
            SafeSearch::Moderate => 1,
            SafeSearch::Strict => 2,
        }
    }
}

/// A web search: the query, the provider and the options that change the answer. As a job
/// (`{"kind": "search", ...}`) it may also fetch (and archive) its top results.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchJob {
    /// What to search for (1 to 2,048 bytes, not only spaces).
    pub query: String,
    /// `auto` (the default), `searxng`, `duckduckgo` or `instant`.
    #[serde(default)]
    pub provider: Provider,
    /// Results returned, after duplicates are dropped: 1 to 50, default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 50)]
    pub limit: Option<usize>,
    /// Fetch this many of the top results as fetch jobs of the same batch (a job only;
    /// at most `limit`).
    #[serde(default, skip_serializing_if = "is_zero")]
    #[schema(maximum = 50)]
    pub fetch_top: usize,
    /// Archive the fetched results (with `fetch_top`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub archive: bool,
    /// The results' language, as the provider names it (`en`, `fr-FR`; DuckDuckGo: its
    /// region, `us-en`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Safe search: `off`, `moderate` or `strict`; absent, the provider's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safesearch: Option<SafeSearch>,
    /// SearxNG categories (`general`, `news`, `science`, …).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub categories: Vec<String>,
    /// SearxNG engines to ask (`wikipedia`, `duckduckgo`, …); engines the operator forbids
    /// are refused.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub engines: Vec<String>,
    /// The page of results, from 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 50)]
    pub page: Option<u32>,
    /// Seconds a cached answer may be served; 0 always asks the provider. Absent:
    /// `search.cache_ttl_secs`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 86_400)]
    pub cache_ttl: Option<u64>,
}

fn is_zero(value: &usize) -> bool {
    *value == 0
}

impl SearchJob {
    /// A search for `query` with every option at its default.
    pub fn new(query: &str) -> SearchJob {
        SearchJob {
            query: query.to_owned(),
            provider: Provider::Auto,
            limit: None,
            fetch_top: 0,
            archive: false,
            language: None,
            safesearch: None,
            categories: Vec::new(),
            engines: Vec::new(),
            page: None,
            cache_ttl: None,
        }
    }

    /// The limit in force: the job's, else [`DEFAULT_LIMIT`].
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT)
    }

    /// Checks the options against their bounds (what the operator forbids is checked where
    /// the configuration is known).
    pub fn validate(&self) -> Result<(), String> {
        if self.query.trim().is_empty() {
            return Err("query is empty".to_owned());
        }
        if self.query.len() > MAX_QUERY_BYTES {
            return Err(format!("query is longer than {MAX_QUERY_BYTES} bytes"));
        }
        if self.query.chars().any(char::is_control) {
            return Err("query holds a control character".to_owned());
        }
        let limit = self.limit();
        if limit == 0 || limit > MAX_LIMIT {
            return Err(format!("limit = {limit} is outside 1..={MAX_LIMIT}"));
        }
        if self.fetch_top > limit {
            return Err(format!(
                "fetch_top = {} is above the limit ({limit})",
                self.fetch_top
            ));
        }
        if self.archive && self.fetch_top == 0 {
            return Err("archive needs fetch_top (the results fetched are archived)".to_owned());
        }
        if self.page.is_some_and(|page| page == 0 || page > 50) {
            return Err("page is outside 1..=50".to_owned());
        }
        if self.cache_ttl.is_some_and(|ttl| ttl > 86_400) {
            return Err("cache_ttl is above 86400".to_owned());
        }
        for (name, values) in [("categories", &self.categories), ("engines", &self.engines)] {
            if values.len() > 32 {
                return Err(format!("{name} holds more than 32 names"));
            }
            if let Some(bad) = values.iter().find(|value| !is_name(value)) {
                return Err(format!(
                    "{name}: {bad:?} is not a name (letters, digits, space, '-', '_', '.')"
                ));
            }
        }
        if let Some(language) = &self.language
            && !is_name(language)
        {
            return Err(format!("language {language:?} is not a language code"));
        }
        Ok(())
    }
}

/// A provider's name for an engine, category or language: 1 to 64 ASCII letters, digits,
/// spaces, `-`, `_` or `.`.
fn is_name(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 64
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || " -_.".contains(c))
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SearchHit {
    /// 1 for the first result.
    pub rank: usize,
    /// The result's title (entities decoded).
    pub title: String,
    /// The result's URL (redirects decoded, normalised for deduplication).
    #[schema(format = "uri")]
    pub url: String,
    /// The provider's snippet, possibly empty.
    pub snippet: String,
    /// The engines that found it (SearxNG), or the provider's name.
    pub engines: Vec<String>,
    /// When the page was published, as the provider said it (RFC 3339 when SearxNG gives it).
    pub published: Option<String>,
}

/// An infobox (SearxNG): a summary of the query's subject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Infobox {
    /// Its title.
    pub title: String,
    /// Its text.
    pub content: String,
    /// Its page, when given.
    pub url: Option<String>,
    /// The engine that gave it.
    pub engine: Option<String>,
}

/// DuckDuckGo's instant answer.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct InstantAnswer {
    /// The subject's name.
    pub heading: Option<String>,
    /// The abstract (a summary, usually from an encyclopedia).
    #[serde(rename = "abstract")]
    pub abstract_text: Option<String>,
    /// Where the abstract comes from.
    pub abstract_source: Option<String>,
    /// The abstract's page.
    pub abstract_url: Option<String>,
    /// A direct answer (a calculation, a conversion).
    pub answer: Option<String>,
    /// What kind of answer it is.
    pub answer_type: Option<String>,
    /// A dictionary definition.
    pub definition: Option<String>,
    /// Where the definition comes from.
    pub definition_source: Option<String>,
    /// The definition's page.
    pub definition_url: Option<String>,
    /// An image of the subject.
    pub image: Option<String>,
}

impl InstantAnswer {
    /// True when DuckDuckGo had nothing to say.
    pub fn is_empty(&self) -> bool {
        *self == InstantAnswer::default()
    }
}

/// A search's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct SearchResult {
    /// The provider that answered (`searxng`, `duckduckgo` or `instant`).
    pub provider: Provider,
    /// The results, deduplicated by normalised URL, ranked from 1, at most `limit`.
    pub hits: Vec<SearchHit>,
    /// Direct answers (SearxNG).
    pub answers: Vec<String>,
    /// Infoboxes (SearxNG).
    pub infoboxes: Vec<Infobox>,
    /// Suggested queries (SearxNG) or corrections.
    pub suggestions: Vec<String>,
    /// Engines that did not answer, each with the reason SearxNG gave (`timeout`, …).
    pub unresponsive_engines: Vec<UnresponsiveEngine>,
    /// The instant answer (provider `instant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instant: Option<InstantAnswer>,
    /// Providers tried before the one that answered, with their errors (`auto`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_over: Vec<ProviderFailure>,
    /// True when served from the cache.
    pub cached: bool,
    /// The fetch jobs made of the top results (a search job with `fetch_top`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fetch_jobs: Vec<FetchedHit>,
}

/// An engine that did not answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct UnresponsiveEngine {
    /// The engine.
    pub engine: String,
    /// Why, as SearxNG said it.
    pub reason: String,
}

/// A provider that failed before another answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ProviderFailure {
    /// The provider.
    pub provider: Provider,
    /// Its error's code.
    pub code: super::ErrorCode,
    /// Its error's message.
    pub message: String,
}

/// A result turned into a fetch job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FetchedHit {
    /// The result's rank.
    pub rank: usize,
    /// The fetch job's id.
    pub job_id: String,
    /// The URL fetched.
    pub url: String,
}

/// An image search.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ImagesJob {
    /// What to search for.
    pub query: String,
    /// Results returned: 1 to 50, default 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(minimum = 1, maximum = 50)]
    pub limit: Option<usize>,
    /// DuckDuckGo's region (`us-en`, `fr-fr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub language: Option<String>,
    /// Safe search.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub safesearch: Option<SafeSearch>,
    /// Seconds a cached answer may be served; 0 always asks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(maximum = 86_400)]
    pub cache_ttl: Option<u64>,
}

impl ImagesJob {
    /// An image search for `query` with the defaults.
    pub fn new(query: &str) -> ImagesJob {
        ImagesJob {
            query: query.to_owned(),
            limit: None,
            language: None,
            safesearch: None,
            cache_ttl: None,
        }
    }

    /// The limit in force.
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(DEFAULT_LIMIT)
    }

    /// Checks the options against their bounds.
    pub fn validate(&self) -> Result<(), String> {
        let as_search = SearchJob {
            limit: self.limit,
            language: self.language.clone(),
            cache_ttl: self.cache_ttl,
            ..SearchJob::new(&self.query)
        };
        as_search.validate()
    }
}

/// One image result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImageHit {
    /// 1 for the first result.
    pub rank: usize,
    /// The image's title.
    pub title: String,
    /// The full image.
    #[schema(format = "uri")]
    pub image: String,
    /// A thumbnail.
    pub thumbnail: Option<String>,
    /// The page the image is on.
    pub source_page: Option<String>,
    /// Width in pixels.
    pub width: Option<u32>,
    /// Height in pixels.
    pub height: Option<u32>,
}

/// An image search's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImagesResult {
    /// The images, deduplicated by image URL.
    pub hits: Vec<ImageHit>,
    /// True when served from the cache.
    pub cached: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_jobs_are_checked_against_their_bounds() {
        assert!(SearchJob::new("rust async").validate().is_ok());
        for (job, fault) in [
            (SearchJob::new("   "), "empty"),
            (SearchJob::new(&"q".repeat(3_000)), "longer"),
            (SearchJob::new("a\nb"), "control"),
            (
                SearchJob {
                    limit: Some(51),
                    ..SearchJob::new("q")
                },
                "limit",
            ),
            (
                SearchJob {
                    fetch_top: 11,
                    ..SearchJob::new("q")
                },
                "fetch_top",
            ),
            (
                SearchJob {
                    archive: true,
                    ..SearchJob::new("q")
                },
                "archive",
            ),
            (
                SearchJob {
                    engines: vec!["bing&x=1".into()],
                    ..SearchJob::new("q")
                },
                "engines",
            ),
        ] {
            let error = job.validate().expect_err(fault);
            assert!(error.contains(fault), "{error}");
        }
    }

    #[test]
    fn the_json_form_is_closed() {
        let job: SearchJob =
            serde_json::from_str(r#"{"query":"q","provider":"searxng","fetch_top":2}"#)
                .expect("valid");
        assert_eq!(job.provider, Provider::Searxng);
        assert!(serde_json::from_str::<SearchJob>(r#"{"query":"q","nope":1}"#).is_err());
        assert!(serde_json::from_str::<SearchJob>(r#"{"query":"q","provider":"bing"}"#).is_err());
    }
}
