//! The Firecrawl request types (camelCase, v1 and v2 in one shape: the fields either sends are
//! accepted, unknown fields refused) and how scrape options map onto a trawl fetch job:
//! `formats` → which parts of the document are built, `maxAge` → the cache TTL,
//! `storeInCache: false` → a fetch kept out of the cache, `waitFor` → rendering in Chromium,
//! `timeout` → how long the answer waits. Options trawl cannot honour are refused here, each
//! with a message naming it.
//!
//! Not here: building documents (`document`) or running anything (the handlers).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use trawl_workers::job::{Action, BrowseJob, FetchJob, Format, Profile, Render, ScrollDirection};
use utoipa::ToSchema;

use super::FcError;

/// One entry of `formats`: a name (`"markdown"`) or an object with a `type` (`{"type":
/// "screenshot", "fullPage": true}`).
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[serde(untagged)]
#[schema(as = FirecrawlFormat)]
pub(crate) enum FormatEntry {
    /// `markdown`, `html`, `rawHtml` or `links`.
    Name(String),
    /// A format with options; its `type` names it.
    Object(FormatObject),
}

/// A format given as an object.
#[derive(Debug, Clone, PartialEq, Deserialize, ToSchema)]
#[schema(as = FirecrawlFormatObject)]
pub(crate) struct FormatObject {
    /// The format's name.
    #[serde(rename = "type")]
    pub(crate) kind: String,
    /// The format's options (none of the formats trawl builds takes any).
    #[serde(flatten)]
    pub(crate) options: BTreeMap<String, serde_json::Value>,
}

/// The parts of a Firecrawl document a request asks for, and the elements they are read from.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Wanted {
    /// The page as markdown (the main content).
    pub(crate) markdown: bool,
    /// The main content as cleaned HTML.
    pub(crate) html: bool,
    /// The body as received.
    pub(crate) raw_html: bool,
    /// The page's links.
    pub(crate) links: bool,
    /// CSS selectors of the elements markdown and html are read from (`includeTags`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) include_tags: Vec<String>,
    /// CSS selectors of the elements left out of markdown and html (`excludeTags`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) exclude_tags: Vec<String>,
    /// The whole page, not its main content (`onlyMainContent: false`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub(crate) whole_page: bool,
    /// A PNG of the page the browser ended on (`screenshot`: `Some(full_page)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) screenshot: Option<bool>,
}

impl Wanted {
    /// Whether elements are selected before markdown and html are read.
    pub(crate) fn selects(&self) -> bool {
        !self.include_tags.is_empty() || !self.exclude_tags.is_empty()
    }
}

/// Declares a request type holding the scrape options (the same fields in a scrape, a batch
/// scrape and a crawl's `scrapeOptions`) beside its own fields, and `take_options` to move
/// them out as [`ScrapeOptions`].
macro_rules! with_scrape_options {
    (
        $(#[$meta:meta])*
        pub(crate) struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                pub(crate) $field:ident: $type:ty,
            )*
        }
    ) => {
        #[derive(Debug, Clone, Default, PartialEq, Deserialize, ToSchema)]
        #[serde(deny_unknown_fields, rename_all = "camelCase")]
        $(#[$meta])*
        pub(crate) struct $name {
            $(
                $(#[$field_meta])*
                pub(crate) $field: $type,
            )*
            /// The parts of the document to build: `markdown` (the default), `html` (the main
            /// content as cleaned HTML), `rawHtml` (the body as received), `links`, and on
            /// `/scrape` `screenshot` (`screenshot@fullPage`, `{"type": "screenshot",
            /// "fullPage": true}`: a PNG data URL; the page is loaded in Chromium). Others
            /// (`json`, `summary`, `changeTracking`, `images`, `branding`, …) are refused.
            #[serde(default)]
            pub(crate) formats: Option<Vec<FormatEntry>>,
            /// Only the main content (Readability, the default); `false`: markdown and html of
            /// the whole page (navigation, header and footer included; scripts and styles
            /// left out), read again from the stored body.
            #[serde(default)]
            pub(crate) only_main_content: Option<bool>,
            /// CSS selectors (tag names, `.class`, `#id`, any selector; at most 64): markdown
            /// and html are read from the matching elements only (the page's head kept, so
            /// its title and metadata too). rawHtml and links stay the whole page's.
            #[serde(default)]
            pub(crate) include_tags: Option<Vec<String>>,
            /// CSS selectors (at most 64) of elements removed before markdown and html are
            /// read.
            #[serde(default)]
            pub(crate) exclude_tags: Option<Vec<String>>,
            /// Request headers for the page (a service token, routing metadata): secrets, sent
            /// to the URL's origin only (Accept, Accept-Language and User-Agent also after a
            /// redirect elsewhere); names trawl sets (Host, Cookie, …) are refused. Not on
            /// crawls.
            #[serde(default)]
            pub(crate) headers: Option<BTreeMap<String, String>>,
            /// Milliseconds to wait before reading the page: any value above 0 renders it in
            /// Chromium, which waits for the network to be idle (600 ms quiet, at most 6 s).
            #[serde(default)]
            #[schema(maximum = 60_000)]
            pub(crate) wait_for: Option<u64>,
            /// Milliseconds the answer waits for the page (capped by
            /// `api.sync_timeout_secs`); past it, 408 `SCRAPE_TIMEOUT` and the job goes on.
            #[serde(default)]
            #[schema(minimum = 1, maximum = 3_600_000)]
            pub(crate) timeout: Option<u64>,
            /// On `/scrape`, `true` loads the page in Chromium as a phone-sized touch device
            /// (trawl's `mobile` profile); elsewhere it is refused.
            #[serde(default)]
            pub(crate) mobile: Option<bool>,
            /// `true` is refused: trawl always verifies TLS.
            #[serde(default)]
            pub(crate) skip_tls_verification: Option<bool>,
            /// Accepted: trawl's markdown never inlines images as base64.
            #[serde(default)]
            pub(crate) remove_base64_images: Option<bool>,
            /// Accepted: plain fetches load no ads; rendered pages load what the page does.
            #[serde(default)]
            pub(crate) block_ads: Option<bool>,
            /// Accepted: trawl has one speed.
            #[serde(default)]
            pub(crate) fast_mode: Option<bool>,
            /// `basic` or `auto`: the configured proxies (`proxy.urls`); `stealth` and
            /// `enhanced` are refused.
            #[serde(default)]
            pub(crate) proxy: Option<String>,
            /// Milliseconds a stored page may be served instead of fetching (trawl's cache
            /// TTL, in seconds, rounded down; at most ten years); 0 always fetches.
            #[serde(default)]
            pub(crate) max_age: Option<u64>,
            /// `false`: the page is fetched and not served to later requests from the cache
            /// (trawl's `cache_ttl: 0`, which also skips reading the cache).
            #[serde(default)]
            pub(crate) store_in_cache: Option<bool>,
            /// Documents from PDFs are always read (`["pdf"]`); other parsers are refused.
            #[serde(default)]
            pub(crate) parsers: Option<Vec<serde_json::Value>>,
            /// v1: `true` is what trawl does (PDFs are read as text); `false` is refused.
            #[serde(default, rename = "parsePDF")]
            pub(crate) parse_pdf: Option<bool>,
            /// On `/scrape` (at most 100): `wait` (`milliseconds` or `selector`), `click`
            /// (`selector`), `write` (`text`, into the focused element), `press` (`key`),
            /// `scroll` (`direction` up or down), `screenshot` (`fullPage`), `scrape` (the HTML
            /// at that point), run as a trawl browse job in Chromium; the document is read
            /// from the page they end on. `executeJavascript` and `pdf` are refused.
            #[serde(default)]
            pub(crate) actions: Option<Vec<serde_json::Value>>,
            /// Refused (trawl has no geolocated fetches).
            #[serde(default)]
            pub(crate) location: Option<serde_json::Value>,
            /// Refused when true (trawl stores every page).
            #[serde(default)]
            pub(crate) zero_data_retention: Option<bool>,
            /// Refused when true (served from the cache only).
            #[serde(default)]
            pub(crate) lockdown: Option<bool>,
            /// Refused.
            #[serde(default)]
            pub(crate) use_mock: Option<String>,
            /// Refused when set.
            #[serde(default)]
            pub(crate) min_age: Option<serde_json::Value>,
            /// Refused when true (needs a model).
            #[serde(default)]
            pub(crate) check_prompt_injection: Option<bool>,
            /// Refused when set (needs a model).
            #[serde(default, rename = "redactPII")]
            pub(crate) redact_pii: Option<serde_json::Value>,
            /// Refused when set.
            #[serde(default)]
            pub(crate) threat_protection: Option<serde_json::Value>,
            /// Refused when set.
            #[serde(default)]
            pub(crate) audit_metadata: Option<serde_json::Value>,
            /// Refused when set (browser profiles are not kept between requests).
            #[serde(default)]
            pub(crate) profile: Option<serde_json::Value>,
            /// Refused when true.
            #[serde(default)]
            pub(crate) domain_tools: Option<bool>,
            /// Refused when set.
            #[serde(default)]
            pub(crate) tool_detail: Option<String>,
            /// v1: refused when set (needs a model).
            #[serde(default)]
            pub(crate) json_options: Option<serde_json::Value>,
            /// v1: refused when set (needs a model).
            #[serde(default)]
            pub(crate) extract: Option<serde_json::Value>,
            /// v1: refused when set.
            #[serde(default)]
            pub(crate) change_tracking_options: Option<serde_json::Value>,
            /// A client's tag (firecrawl-py sends `langchain`, …): accepted, not used.
            #[serde(default)]
            pub(crate) integration: Option<String>,
            /// The client's name and version (firecrawl-py sends it with every request):
            /// accepted, not used.
            #[serde(default)]
            pub(crate) origin: Option<String>,
        }

        impl $name {
            /// Moves the scrape options out.
            #[allow(dead_code)]
            pub(crate) fn take_options(&mut self) -> ScrapeOptions {
                ScrapeOptions {
                    formats: self.formats.take(),
                    only_main_content: self.only_main_content.take(),
                    include_tags: self.include_tags.take(),
                    exclude_tags: self.exclude_tags.take(),
                    headers: self.headers.take(),
                    wait_for: self.wait_for.take(),
                    timeout: self.timeout.take(),
                    mobile: self.mobile.take(),
                    skip_tls_verification: self.skip_tls_verification.take(),
                    remove_base64_images: self.remove_base64_images.take(),
                    block_ads: self.block_ads.take(),
                    fast_mode: self.fast_mode.take(),
                    proxy: self.proxy.take(),
                    max_age: self.max_age.take(),
                    store_in_cache: self.store_in_cache.take(),
                    parsers: self.parsers.take(),
                    parse_pdf: self.parse_pdf.take(),
                    actions: self.actions.take(),
                    location: self.location.take(),
                    zero_data_retention: self.zero_data_retention.take(),
                    lockdown: self.lockdown.take(),
                    use_mock: self.use_mock.take(),
                    min_age: self.min_age.take(),
                    check_prompt_injection: self.check_prompt_injection.take(),
                    redact_pii: self.redact_pii.take(),
                    threat_protection: self.threat_protection.take(),
                    audit_metadata: self.audit_metadata.take(),
                    profile: self.profile.take(),
                    domain_tools: self.domain_tools.take(),
                    tool_detail: self.tool_detail.take(),
                    json_options: self.json_options.take(),
                    extract: self.extract.take(),
                    change_tracking_options: self.change_tracking_options.take(),
                    integration: self.integration.take(),
                    origin: self.origin.take(),
                }
            }
        }
    };
}

with_scrape_options! {
    /// Scrape options: how each page is fetched and which parts of its document are built.
    #[schema(as = FirecrawlScrapeOptions)]
    pub(crate) struct ScrapeOptions {}
}

with_scrape_options! {
    /// `POST /v1/scrape`, `POST /v2/scrape`: one URL, scraped now.
    #[schema(as = FirecrawlScrapeRequest)]
    pub(crate) struct ScrapeRequest {
        /// The http or https URL.
        #[schema(format = "uri")]
        pub(crate) url: String,
    }
}

with_scrape_options! {
    /// `POST /v1/batch/scrape`, `POST /v2/batch/scrape`: URLs scraped as one trawl batch (the
    /// scrape options apply to each).
    #[schema(as = FirecrawlBatchScrapeRequest)]
    pub(crate) struct BatchScrapeRequest {
        /// The http or https URLs (at most `api.max_batch`).
        pub(crate) urls: Vec<String>,
        /// Leave out URLs trawl refuses (they are listed in `invalidURLs`) instead of refusing
        /// the whole batch.
        #[serde(default, rename = "ignoreInvalidURLs")]
        pub(crate) ignore_invalid_urls: Option<bool>,
        /// Refused when set (a batch is not extended).
        #[serde(default)]
        pub(crate) append_to_id: Option<String>,
        /// Refused when set (trawl's webhooks are `POST /v1/jobs` batches').
        #[serde(default)]
        pub(crate) webhook: Option<serde_json::Value>,
        /// Refused when set (the pools and politeness decide).
        #[serde(default)]
        pub(crate) max_concurrency: Option<u64>,
    }
}

/// A fetch job planned from scrape options, with what its document holds and how long the
/// answer waits.
#[derive(Debug, Clone)]
pub(crate) struct Planned {
    /// The job.
    pub(crate) job: FetchJob,
    /// The document's parts.
    pub(crate) wanted: Wanted,
    /// The answer's wait, when the request set one.
    pub(crate) wait: Option<Duration>,
}

/// A scrape run in the browser (a screenshot, actions, `mobile: true`): a trawl browse job
/// storing the page it ends on, the document's parts, and what each of its steps gives back.
#[derive(Debug, Clone)]
pub(crate) struct BrowsePlanned {
    /// The job.
    pub(crate) job: BrowseJob,
    /// The document's parts.
    pub(crate) wanted: Wanted,
    /// One per action of the job, in order.
    pub(crate) roles: Vec<StepRole>,
    /// The answer's wait, when the request set one.
    pub(crate) wait: Option<Duration>,
}

/// What a browse step of a scrape gives back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StepRole {
    /// Nothing (`wait`, `click`, `write`, `press`, `scroll`).
    Quiet,
    /// An entry of the document's `actions.screenshots`.
    Screenshot,
    /// An entry of the document's `actions.scrapes` (the HTML at that point).
    Scrape,
    /// The document's `screenshot` (the `screenshot` format, taken last).
    Document,
}

/// How a scrape runs.
#[derive(Debug, Clone)]
pub(crate) enum ScrapePlan {
    /// A fetch job (plain HTTP, or rendered for `waitFor`), through the page cache.
    Fetch(Planned),
    /// A browse job.
    Browse(BrowsePlanned),
}

impl ScrapeOptions {
    /// Plans a scrape of `url`: a fetch job, or a browse job when the request needs the
    /// browser (a screenshot, actions, `mobile: true`).
    pub(crate) fn plan_scrape(&self, url: &str) -> Result<ScrapePlan, FcError> {
        self.refuse_unsupported()?;
        let wanted = self.wanted()?;
        if !self.needs_browser(&wanted) {
            return self.plan_fetch(url, wanted).map(ScrapePlan::Fetch);
        }
        self.custom_headers()
            .check()
            .map_err(|message| FcError::bad_request(format!("headers: {message}")))?;
        let mut actions = Vec::new();
        let mut roles = Vec::new();
        // waitFor: a wait before the actions, in steps a wait action allows.
        let mut wait_for = self.wait_for.unwrap_or(0);
        while wait_for > 0 {
            let ms = wait_for.min(trawl_workers::job::MAX_WAIT_MS);
            actions.push(Action::Wait {
                selector: None,
                text: None,
                idle: false,
                ms: Some(ms),
            });
            roles.push(StepRole::Quiet);
            wait_for -= ms;
        }
        for (number, action) in self.actions.iter().flatten().enumerate() {
            let (action, role) = browse_action(number, action)?;
            actions.push(action);
            roles.push(role);
        }
        if let Some(full_page) = wanted.screenshot {
            actions.push(Action::Screenshot {
                grid: false,
                grid_step: None,
                full_page,
            });
            roles.push(StepRole::Document);
        }
        let job = BrowseJob {
            url: url.to_owned(),
            actions,
            profile: if self.mobile == Some(true) {
                Profile::Mobile
            } else {
                Profile::Desktop
            },
            credentials: trawl_workers::job::Credentials::headers_for_origin_of(
                url,
                &self.custom_headers(),
            ),
            store: true,
            archive: false,
        };
        job.validate()
            .map_err(|message| FcError::bad_request(format!("actions: {message}")))?;
        Ok(ScrapePlan::Browse(BrowsePlanned {
            job,
            wanted,
            roles,
            wait: self.timeout.map(Duration::from_millis),
        }))
    }

    /// The request's `headers`.
    fn custom_headers(&self) -> trawl_workers::job::CustomHeaders {
        self.headers
            .iter()
            .flatten()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect()
    }

    /// Whether the scrape needs the browser: a screenshot, actions, or a mobile device.
    fn needs_browser(&self, wanted: &Wanted) -> bool {
        wanted.screenshot.is_some()
            || self
                .actions
                .as_ref()
                .is_some_and(|actions| !actions.is_empty())
            || self.mobile == Some(true)
    }

    /// Refuses what trawl cannot honour, and plans the fetch job of `url` (a batch scrape's,
    /// a crawl's and a search's pages; `/scrape` plans with [`ScrapeOptions::plan_scrape`]).
    pub(crate) fn plan(&self, url: &str) -> Result<Planned, FcError> {
        self.refuse_unsupported()?;
        let wanted = self.wanted()?;
        if self.needs_browser(&wanted) {
            return Err(FcError::unsupported(
                "screenshot, actions and mobile: true load one page in the browser: they are \
                 supported on /v1/scrape and /v2/scrape, not on batch scrapes, crawls or searches",
            ));
        }
        self.plan_fetch(url, wanted)
    }

    /// The fetch job of `url` with the document's parts `wanted` (the options checked).
    fn plan_fetch(&self, url: &str, wanted: Wanted) -> Result<Planned, FcError> {
        let cache_ttl = match (self.store_in_cache, self.max_age) {
            (Some(false), _) => Some(0),
            (_, Some(max_age)) => Some(max_age / 1_000),
            _ => None,
        };
        if self
            .max_age
            .is_some_and(|ms| ms / 1_000 > trawl_workers::job::MAX_CACHE_TTL_SECS)
        {
            return Err(FcError::bad_request("maxAge is above ten years"));
        }
        let render = if self.wait_for.unwrap_or(0) > 0 {
            Render::Flag(true)
        } else {
            Render::default()
        };
        let job = FetchJob {
            url: url.to_owned(),
            format: Format::Markdown,
            max_chars: None,
            cache_ttl,
            archive: false,
            render,
            proxy: None,
            headers: self.custom_headers(),
            fallback: None,
            credentials: Default::default(),
        };
        job.validate().map_err(FcError::bad_request)?;
        Ok(Planned {
            job,
            wanted,
            wait: self.timeout.map(Duration::from_millis),
        })
    }

    /// The parts of the document asked for (markdown when `formats` is absent or empty).
    pub(crate) fn wanted(&self) -> Result<Wanted, FcError> {
        let mut wanted = Wanted::default();
        let formats = self.formats.as_deref().unwrap_or_default();
        for format in formats {
            let (name, option) = match format {
                FormatEntry::Name(name) => (name.as_str(), None),
                FormatEntry::Object(object) => (object.kind.as_str(), object.options.keys().next()),
            };
            if let FormatEntry::Object(object) = format
                && name == "screenshot"
            {
                if let Some(option) = object.options.keys().find(|key| *key != "fullPage") {
                    return Err(FcError::unsupported(format!(
                        "format \"screenshot\": option {option:?} is not supported (fullPage is)"
                    )));
                }
                let full_page = match object.options.get("fullPage") {
                    None | Some(serde_json::Value::Null) => false,
                    Some(serde_json::Value::Bool(full_page)) => *full_page,
                    Some(other) => {
                        return Err(FcError::bad_request(format!(
                            "format \"screenshot\": fullPage must be a boolean, not {other}"
                        )));
                    }
                };
                wanted.screenshot = Some(full_page);
                continue;
            }
            if let Some(option) = option
                && matches!(name, "markdown" | "html" | "rawHtml" | "links")
            {
                return Err(FcError::unsupported(format!(
                    "format {name:?}: option {option:?} is not supported"
                )));
            }
            match name {
                "markdown" => wanted.markdown = true,
                "html" => wanted.html = true,
                "rawHtml" => wanted.raw_html = true,
                "links" => wanted.links = true,
                "json" | "extract" | "summary" | "query" | "question" | "highlights" => {
                    return Err(FcError::unsupported(format!(
                        "format {name:?} needs a language model, and this trawl has none configured"
                    )));
                }
                "screenshot" => wanted.screenshot = Some(false),
                "screenshot@fullPage" => wanted.screenshot = Some(true),
                other => {
                    return Err(FcError::unsupported(format!(
                        "format {other:?} is not supported (markdown, html, rawHtml, links and \
                         screenshot are)"
                    )));
                }
            }
        }
        if formats.is_empty() {
            wanted.markdown = true;
        }
        wanted.whole_page = self.only_main_content == Some(false);
        for (option, given, selectors) in [
            ("includeTags", &self.include_tags, &mut wanted.include_tags),
            ("excludeTags", &self.exclude_tags, &mut wanted.exclude_tags),
        ] {
            let given = given.clone().unwrap_or_default();
            trawl_workers::web::select::check(&given)
                .map_err(|error| FcError::bad_request(format!("{option}: {error}")))?;
            *selectors = given;
        }
        Ok(wanted)
    }

    /// Refuses every option trawl cannot honour, naming it.
    fn refuse_unsupported(&self) -> Result<(), FcError> {
        let refuse = |option: &str, why: &str| {
            Err(FcError::unsupported(format!(
                "{option} is not supported by trawl: {why}"
            )))
        };
        if self.wait_for.is_some_and(|ms| ms > 60_000) {
            return Err(FcError::bad_request("waitFor is above 60000 ms"));
        }
        if self.timeout.is_some_and(|ms| ms > 3_600_000) {
            return Err(FcError::bad_request("timeout is above 3600000 ms"));
        }
        if self.timeout == Some(0) {
            return Err(FcError::bad_request("timeout must be positive"));
        }
        if self.skip_tls_verification == Some(true) {
            return refuse("skipTlsVerification: true", "TLS is always verified");
        }
        match self.proxy.as_deref() {
            None | Some("basic") | Some("auto") => {}
            Some(other) => {
                return refuse(
                    &format!("proxy {other:?}"),
                    "only the configured proxies (\"basic\", \"auto\") are used",
                );
            }
        }
        for parser in self.parsers.iter().flatten() {
            let pdf = parser.as_str() == Some("pdf")
                || (parser.get("type").and_then(|kind| kind.as_str()) == Some("pdf")
                    && parser.as_object().is_some_and(|object| object.len() == 1));
            if !pdf {
                return refuse(
                    &format!("parser {parser}"),
                    "PDFs are always read as text; no other parser exists",
                );
            }
        }
        if self.parse_pdf == Some(false) {
            return refuse("parsePDF: false", "PDFs are always read as text");
        }
        let set = |value: &Option<serde_json::Value>| {
            value
                .as_ref()
                .is_some_and(|value| !value.is_null() && *value != serde_json::Value::Bool(false))
        };
        for (option, value, why) in [
            (
                "location",
                &self.location,
                "trawl has no geolocated fetches",
            ),
            ("minAge", &self.min_age, "pages are served by maxAge only"),
            ("redactPII", &self.redact_pii, "it needs a language model"),
            (
                "threatProtection",
                &self.threat_protection,
                "trawl has no threat feed",
            ),
            (
                "auditMetadata",
                &self.audit_metadata,
                "trawl has no SIEM log",
            ),
            (
                "profile",
                &self.profile,
                "browser profiles are not kept between requests",
            ),
            (
                "jsonOptions",
                &self.json_options,
                "it needs a language model",
            ),
            ("extract", &self.extract, "it needs a language model"),
            (
                "changeTrackingOptions",
                &self.change_tracking_options,
                "trawl does not track changes",
            ),
        ] {
            if set(value) {
                return refuse(option, why);
            }
        }
        if self.zero_data_retention == Some(true) {
            return refuse(
                "zeroDataRetention: true",
                "trawl stores every page it fetches",
            );
        }
        if self.lockdown == Some(true) {
            return refuse("lockdown: true", "trawl has no cache-only mode");
        }
        if self.use_mock.is_some() {
            return refuse("useMock", "trawl has no mocks");
        }
        if self.check_prompt_injection == Some(true) {
            return refuse("checkPromptInjection: true", "it needs a language model");
        }
        if self.domain_tools == Some(true) || self.tool_detail.is_some() {
            return refuse("domainTools/toolDetail", "trawl has no domain tools");
        }
        Ok(())
    }
}

/// One Firecrawl action as a trawl browse action, and what its step gives back. `number` is
/// its place in `actions` (0-based, for the messages).
fn browse_action(number: usize, action: &serde_json::Value) -> Result<(Action, StepRole), FcError> {
    use serde_json::Value;
    let at = format!("actions[{number}]");
    let object = action
        .as_object()
        .ok_or_else(|| FcError::bad_request(format!("{at}: an object with a \"type\"")))?;
    let kind = object
        .get("type")
        .and_then(Value::as_str)
        .ok_or_else(|| FcError::bad_request(format!("{at}: \"type\" names the action")))?;
    let only = |keys: &[&str]| match object
        .keys()
        .find(|key| *key != "type" && !keys.contains(&key.as_str()))
    {
        Some(key) => Err(FcError::unsupported(format!(
            "{at} ({kind}): option {key:?} is not supported"
        ))),
        None => Ok(()),
    };
    let text = |key: &str, required: bool| match object.get(key) {
        Some(Value::String(text)) => Ok(Some(text.clone())),
        None | Some(Value::Null) if !required => Ok(None),
        _ => Err(FcError::bad_request(format!(
            "{at} ({kind}): {key} must be a string"
        ))),
    };
    let quiet = |action: Action| Ok((action, StepRole::Quiet));
    match kind {
        "wait" => {
            only(&["milliseconds", "selector"])?;
            let ms = match object.get("milliseconds") {
                None | Some(Value::Null) => None,
                Some(value) => Some(value.as_u64().ok_or_else(|| {
                    FcError::bad_request(format!(
                        "{at} (wait): milliseconds must be a whole number"
                    ))
                })?),
            };
            let selector = text("selector", false)?;
            if ms.is_none() && selector.is_none() {
                return Err(FcError::bad_request(format!(
                    "{at} (wait): give milliseconds or a selector"
                )));
            }
            quiet(Action::Wait {
                selector,
                text: None,
                idle: false,
                ms,
            })
        }
        "click" => {
            only(&["selector", "all"])?;
            if object.get("all") == Some(&Value::Bool(true)) {
                return Err(FcError::unsupported(format!(
                    "{at} (click): all: true is not supported (one element is clicked)"
                )));
            }
            quiet(Action::Click {
                index: None,
                selector: text("selector", true)?,
                role: None,
                name: None,
                x: None,
                y: None,
            })
        }
        "write" => {
            only(&["text"])?;
            quiet(Action::Type {
                index: None,
                selector: None,
                role: None,
                name: None,
                text: text("text", true)?.unwrap_or_default(),
                submit: false,
                secret: false,
            })
        }
        "press" => {
            only(&["key"])?;
            quiet(Action::Press {
                key: text("key", true)?.unwrap_or_default(),
            })
        }
        "scroll" => {
            only(&["direction"])?;
            let direction = match text("direction", false)?.as_deref() {
                None | Some("down") => ScrollDirection::Down,
                Some("up") => ScrollDirection::Up,
                Some(other) => {
                    return Err(FcError::bad_request(format!(
                        "{at} (scroll): direction is up or down, not {other:?}"
                    )));
                }
            };
            quiet(Action::Scroll { direction })
        }
        "screenshot" => {
            only(&["fullPage"])?;
            let full_page = match object.get("fullPage") {
                None | Some(Value::Null) => false,
                Some(Value::Bool(full_page)) => *full_page,
                Some(_) => {
                    return Err(FcError::bad_request(format!(
                        "{at} (screenshot): fullPage must be a boolean"
                    )));
                }
            };
            Ok((
                Action::Screenshot {
                    grid: false,
                    grid_step: None,
                    full_page,
                },
                StepRole::Screenshot,
            ))
        }
        "scrape" => {
            only(&[])?;
            Ok((Action::ReadHtml, StepRole::Scrape))
        }
        "executeJavascript" => Err(FcError::unsupported(format!(
            "{at}: executeJavascript is not supported by trawl: it runs no caller's JavaScript \
             in its browser"
        ))),
        "pdf" => Err(FcError::unsupported(format!(
            "{at}: pdf is not supported by trawl: it prints no pages"
        ))),
        other => Err(FcError::unsupported(format!(
            "{at}: action {other:?} is not supported (wait, click, write, press, scroll, \
             screenshot and scrape are)"
        ))),
    }
}

/// Translates one of Firecrawl's `includePaths`/`excludePaths` regular expressions into
/// trawl's globs (matched on the path and query, segment-wise). Accepted: literal path
/// characters (`\.` for a dot), `.*` (any run of characters), a leading `^` (anchored at the
/// path's start; otherwise the pattern may start at any segment) and a trailing `$` (anchored
/// at the end; otherwise anything may follow). `.*` between two `/` (or at an end) crosses
/// segments (`**`); inside a segment it stays in it (`*`). Anything else is refused.
pub(crate) fn regex_to_globs(pattern: &str) -> Result<Vec<String>, String> {
    let refused = || {
        format!(
            "path pattern {pattern:?}: trawl maps literal paths with `.*`, `^` and `$` onto \
             its globs; other regular expression syntax is not supported"
        )
    };
    let (anchored, body) = match pattern.strip_prefix('^') {
        Some(rest) => (true, rest),
        None => (false, pattern),
    };
    let (ended, body) = match body.strip_suffix('$') {
        Some(rest) if !rest.ends_with('\\') => (true, rest),
        _ => (false, body),
    };
    // The body as literal text with `\u{0}` marking each `.*`.
    let mut text = String::new();
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(escaped @ ('.' | '/' | '-' | '_' | '~' | '?' | '+' | '(' | ')')) => {
                    text.push(escaped)
                }
                _ => return Err(refused()),
            },
            '.' if chars.peek() == Some(&'*') => {
                chars.next();
                text.push('\u{0}');
            }
            c if c.is_ascii_alphanumeric() || "/-_~%=&".contains(c) => text.push(c),
            _ => return Err(refused()),
        }
    }
    if text.is_empty() {
        return Ok(vec!["/**".to_owned()]);
    }
    // `^.*…` is as unanchored as `…`.
    let anchored = anchored && !text.starts_with('\u{0}');
    let mut glob = String::new();
    if anchored {
        if !text.starts_with('/') {
            glob.push('/');
        }
    } else {
        text = text.trim_start_matches('/').to_owned();
        if !(text == "\u{0}" || text.starts_with("\u{0}/")) {
            glob.push_str("**/");
        }
    }
    let characters: Vec<char> = text.chars().collect();
    for (index, c) in characters.iter().enumerate() {
        match c {
            '\u{0}' => {
                let before = index == 0 || characters[index - 1] == '/';
                let after = index + 1 == characters.len() || characters[index + 1] == '/';
                if before && after {
                    glob.push_str("**");
                } else {
                    glob.push('*');
                }
            }
            '*' | '?' | '[' | ']' | '{' | '}' => {
                glob.push('\\');
                glob.push(*c);
            }
            c => glob.push(*c),
        }
    }
    let mut globs = vec![glob.clone()];
    if !ended && !glob.ends_with("**") {
        if glob.ends_with('/') {
            globs = vec![format!("{glob}**")];
        } else {
            globs.push(format!("{glob}/**"));
        }
    }
    Ok(globs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sdk_defaults_are_accepted_and_map_onto_a_fetch_job() {
        let request: ScrapeRequest = serde_json::from_value(serde_json::json!({
            "url": "https://example.com/",
            "formats": ["markdown", "html", {"type": "rawHtml"}, "links"],
            "onlyMainContent": true, "mobile": false, "removeBase64Images": true,
            "fastMode": false, "blockAds": true, "maxAge": 14_400_000, "storeInCache": true,
            "origin": "python-sdk@4.55.0", "integration": "langchain", "timeout": 30_000,
        }))
        .expect("the SDK's request parses");
        let mut request = request;
        let planned = request
            .take_options()
            .plan(&request.url)
            .expect("nothing refused");
        assert_eq!(planned.job.cache_ttl, Some(14_400));
        assert!(planned.job.render.is_off());
        assert_eq!(planned.wait, Some(Duration::from_secs(30)));
        assert_eq!(
            planned.wanted,
            Wanted {
                markdown: true,
                html: true,
                raw_html: true,
                links: true,
                ..Wanted::default()
            }
        );
    }

    #[test]
    fn tags_are_css_selectors_checked_before_anything_runs() {
        let options: ScrapeOptions = serde_json::from_value(serde_json::json!({
            "includeTags": ["article", ".post"], "excludeTags": ["#comments"]
        }))
        .expect("parses");
        let wanted = options.plan("https://example.com/").expect("plans").wanted;
        assert_eq!(wanted.include_tags, ["article", ".post"]);
        assert_eq!(wanted.exclude_tags, ["#comments"]);
        assert!(wanted.selects());
        let options: ScrapeOptions =
            serde_json::from_value(serde_json::json!({"excludeTags": ["div["]})).expect("parses");
        let error = options.plan("https://example.com/").expect_err("refused");
        assert_eq!(error.status, axum::http::StatusCode::BAD_REQUEST);
        assert!(error.message.contains("excludeTags") && error.message.contains("div["));
        let stored = serde_json::to_string(&Wanted {
            markdown: true,
            ..Wanted::default()
        })
        .expect("serialises");
        assert!(
            !stored.contains("tags"),
            "records of before stay readable: {stored}"
        );
    }

    #[test]
    fn what_trawl_cannot_honour_is_refused_by_name() {
        for (body, named) in [
            (
                serde_json::json!({"formats": [{"type": "json", "prompt": "x"}]}),
                "json",
            ),
            (
                serde_json::json!({"formats": ["summary"]}),
                "language model",
            ),
            (serde_json::json!({"formats": ["screenshot"]}), "screenshot"),
            (
                serde_json::json!({"location": {"country": "DE"}}),
                "location",
            ),
            (serde_json::json!({"proxy": "stealth"}), "stealth"),
            (
                serde_json::json!({"actions": [{"type": "click"}]}),
                "actions",
            ),
            (serde_json::json!({"skipTlsVerification": true}), "TLS"),
        ] {
            let options: ScrapeOptions = serde_json::from_value(body.clone()).expect("parses");
            let error = options.plan("https://example.com/").expect_err("refused");
            assert_eq!(error.status, axum::http::StatusCode::BAD_REQUEST, "{body}");
            assert!(error.message.contains(named), "{body}: {}", error.message);
        }
        assert!(
            serde_json::from_value::<ScrapeOptions>(serde_json::json!({"teleport": true})).is_err(),
            "unknown fields are refused"
        );
    }

    #[test]
    fn storing_nothing_means_a_fetch_kept_out_of_the_cache() {
        let options: ScrapeOptions =
            serde_json::from_value(serde_json::json!({"storeInCache": false, "maxAge": 60_000}))
                .expect("parses");
        assert_eq!(
            options
                .plan("https://example.com/")
                .expect("plans")
                .job
                .cache_ttl,
            Some(0)
        );
        let options: ScrapeOptions =
            serde_json::from_value(serde_json::json!({"waitFor": 500})).expect("parses");
        assert!(
            options
                .plan("https://example.com/")
                .expect("plans")
                .job
                .render
                .is_on()
        );
    }

    #[test]
    fn path_patterns_become_globs() {
        let globs = |pattern: &str| regex_to_globs(pattern).expect(pattern);
        assert_eq!(globs("blog/.*"), ["**/blog/**"]);
        assert_eq!(globs("^/blog/.*"), ["/blog/**"]);
        assert_eq!(globs("^/docs$"), ["/docs"]);
        assert_eq!(globs("^/docs"), ["/docs", "/docs/**"]);
        assert_eq!(globs(".*\\.pdf$"), ["**/*.pdf"]);
        assert_eq!(globs(".*/private/.*"), ["**/private/**"]);
        assert_eq!(globs("^/a/.*/b$"), ["/a/**/b"]);
        for bad in ["blog/(a|b)", "[0-9]+", "a.b", "\\d"] {
            assert!(regex_to_globs(bad).is_err(), "{bad}");
        }
        for pattern in [
            "blog/.*",
            "^/docs",
            ".*\\.pdf$",
            "^/a/.*/b$",
            ".*/private/.*",
        ] {
            trawl_workers::job::UrlFilter::new(&globs(pattern), &[])
                .unwrap_or_else(|error| panic!("{pattern}: {error}"));
        }
    }
}
