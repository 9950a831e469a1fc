//! The job contract shared by producers (CLI, API) and consumers (the runner and the pools):
//! job kinds with their stable JSON form (`{"kind": "fetch", ...}`), their results, the plain
//! data they carry, and the public error codes every failure maps to. This module sits at the
//! bottom of the crate: it imports no capability module (`web`, `fetch`, `crawl`, `browse`),
//! and those re-export the types of theirs that live here.
//!
//! - `error`: [`ErrorCode`] and [`JobError`].
//! - `fetch`: [`FetchJob`], its format and render mode, and [`FetchResult`].
//! - `browse`: [`BrowseJob`], the device [`Profile`], and [`BrowseResult`].
//! - `action`: the browser [`Action`]s a script or session runs and their [`ActionOutcome`].
//! - `credentials`: the cookies, headers and localStorage a browse job carries.
//! - `headers`: a fetch job's (and `http.headers`') [`CustomHeaders`], checked.
//! - `object`: structs read from JSON objects only (serde's derive also takes arrays).
//! - `crawl`: [`CrawlSpec`].
//! - `scope`: a crawl's [`Scope`] and its include/exclude [`UrlFilter`].
//! - `proxy`: the proxy a job asks for ([`Choice`], [`ProxyUrl`]).
//! - `search`: [`SearchJob`] (web search), [`ImagesJob`] and their results.
//!
//! Not here: how jobs are queued or stored (`trawl::queue`, `trawl::store`), nor the work itself
//! (`fetch`, `browse`, `web`).

mod action;
mod browse;
mod crawl;
mod credentials;
mod error;
mod fetch;
pub mod headers;
pub mod object;
mod proxy;
mod scope;
mod search;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

pub use action::{
    Action, ActionError, ActionOutcome, Image, KEYS, MAX_WAIT_MS, ReadScope, ScrollDirection,
    WaitUntil, mask,
};
pub use browse::{BrowseJob, BrowseResult, MAX_ACTIONS, Profile, RenderedPage};
pub use crawl::CrawlSpec;
pub use credentials::{CookieSpec, Credentials, OriginHeaders, canonical_origin};
pub use error::{ErrorCode, JobError};
pub use fetch::{
    Content, Extractor, Fallback, FetchJob, FetchResult, Format, MAX_CACHE_TTL_SECS, Meta,
    PageType, Render, RenderMode,
};
pub use headers::CustomHeaders;
pub use proxy::{Choice, ProxyUrl, SCHEMES, redact_option};
pub use scope::{FilterError, MAX_GLOB_LEN, MAX_GLOBS, Scope, UrlFilter};
pub use search::{
    DEFAULT_LIMIT as SEARCH_DEFAULT_LIMIT, FetchedHit, ImageHit, ImagesJob, ImagesResult, Infobox,
    InstantAnswer, MAX_LIMIT as SEARCH_MAX_LIMIT, MAX_QUERY_BYTES as SEARCH_MAX_QUERY_BYTES,
    Provider, ProviderFailure, SafeSearch, SearchHit, SearchJob, SearchResult, UnresponsiveEngine,
};

/// A unit of work as it travels through the queue: options and URLs, never page bodies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(remote = "Self", tag = "kind", rename_all = "snake_case")]
pub enum Job {
    /// One URL over plain HTTP, extracted to markdown, text or HTML.
    Fetch(FetchJob),
    /// A script of browser actions on a page, in a fresh browser context.
    Browse(BrowseJob),
    /// A web search, whose top results may become fetch jobs of the same batch.
    Search(SearchJob),
}

// Read from a JSON object only (a sequence's first element would be taken for `kind`).
object::objects_only!(Job => "a job");

impl Job {
    /// Returns the job kind as its snake_case name (`"fetch"`).
    pub fn kind(&self) -> &'static str {
        match self {
            Job::Fetch(_) => "fetch",
            Job::Browse(_) => "browse",
            Job::Search(_) => "search",
        }
    }

    /// Checks the options against their bounds (the URL is checked by the fetch client).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Job::Fetch(job) => job.validate(),
            Job::Browse(job) => job.validate(),
            Job::Search(job) => job.validate(),
        }
    }

    /// Returns the URL the job is about, for logs and summaries (a search job has none: the
    /// empty string; its query is never logged).
    pub fn url(&self) -> &str {
        match self {
            Job::Fetch(job) => &job.url,
            Job::Browse(job) => &job.url,
            Job::Search(_) => "",
        }
    }

    /// The job's JSON form as it may be stored and shown: credentials (cookies, headers,
    /// localStorage) are replaced by their counts. The queue carries the job itself.
    pub fn redacted_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).expect("jobs are plain data and serialise");
        if let Job::Fetch(job) = self
            && let Some(proxy) = &job.proxy
        {
            value["proxy"] = serde_json::Value::String(proxy::redact_option(proxy));
        }
        if let Job::Fetch(job) = self
            && !job.headers.is_empty()
        {
            // Values are secrets: the record shows the names.
            value["headers"] = job
                .headers
                .names()
                .map(|name| (name.to_owned(), serde_json::Value::from("[redacted]")))
                .collect::<serde_json::Map<_, _>>()
                .into();
        }
        if let Job::Browse(job) = self {
            // A `type` marked secret shows its text masked.
            let actions: Vec<Action> = job
                .actions
                .iter()
                .map(|action| action.logged(false))
                .collect();
            value["actions"] = serde_json::to_value(actions).expect("actions serialise");
        }
        let credentials = match self {
            Job::Browse(job) => Some(&job.credentials),
            Job::Fetch(job) => Some(&job.credentials),
            Job::Search(_) => None,
        };
        if let Some(credentials) = credentials.filter(|credentials| !credentials.is_empty()) {
            value["credentials"] = serde_json::json!({
                "redacted": true,
                "cookies": credentials.cookies.len(),
                "headers": credentials.header_count(),
                "local_storage": credentials.local_storage.len(),
            });
        }
        value
    }

    /// True when the job needs the browser pool (browse jobs, fetches with `render: true`).
    pub fn needs_browser(&self) -> bool {
        match self {
            Job::Fetch(job) => job.render.is_on(),
            Job::Browse(_) => true,
            Job::Search(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fetchs_headers_are_shown_by_name_and_keep_its_page_apart() {
        let job = FetchJob {
            headers: [("X-Service-Token", "tok-123")].into_iter().collect(),
            ..FetchJob::new("https://example.com/")
        };
        let shown = Job::Fetch(job.clone()).redacted_json().to_string();
        assert!(
            shown.contains("x-service-token") && !shown.contains("tok-123"),
            "{shown}"
        );
        assert!(!format!("{job:?}").contains("tok-123"));
        assert!(!job.shares_cache());
        // The queue's envelope keeps the value: the worker needs it.
        let queued = serde_json::to_string(&Job::Fetch(job)).expect("serialises");
        assert!(queued.contains("tok-123"));
    }

    #[test]
    fn job_json_form_is_tagged_by_kind() {
        let job: Job = serde_json::from_str(r#"{"kind":"fetch","url":"https://example.com/"}"#)
            .expect("valid job");
        assert_eq!(job, Job::Fetch(FetchJob::new("https://example.com/")));
        let json = serde_json::to_value(&job).expect("serialises");
        assert_eq!(json["kind"], "fetch");
        assert_eq!(json["format"], "markdown");
        assert!(json.get("extract").is_none(), "one name: {json}");
    }

    #[test]
    fn the_former_name_of_format_is_still_accepted() {
        let job: Job = serde_json::from_str(
            r#"{"kind":"fetch","url":"https://example.com/","extract":"text"}"#,
        )
        .expect("the alias is accepted");
        let Job::Fetch(job) = job else {
            panic!("a fetch job")
        };
        assert_eq!(job.format, Format::Text);
        let spec: CrawlSpec =
            serde_json::from_str(r#"{"seeds":["https://example.com/"],"extract":"html"}"#)
                .expect("the alias is accepted in crawls too");
        assert_eq!(spec.format, Format::Html);
    }

    #[test]
    fn unknown_fields_and_kinds_are_refused() {
        assert!(serde_json::from_str::<Job>(r#"{"kind":"fetch","url":"x","nope":1}"#).is_err());
        assert!(serde_json::from_str::<Job>(r#"{"kind":"teleport","url":"x"}"#).is_err());
    }
}
