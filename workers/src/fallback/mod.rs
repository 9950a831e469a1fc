//! Fallback extraction providers: when trawl's own extraction finds no readable content (an
//! empty shell, a challenge page, no article), a configured provider may read the page
//! instead — Firecrawl's scrape API (`firecrawl`: `POST /v1/scrape` or `/v2/scrape`, markdown
//! of the main content) or a Crawl4AI server (`crawl4ai`: `POST /crawl` or `/md`). Each is a
//! client of the real service's public interface, over the guarded client, and answers what
//! the service said ([`Scraped`]) or a typed [`Error`].
//!
//! What keeps it safe:
//! - The base URL is locked. Firecrawl's hosted API is reached only at its official HTTPS
//!   endpoint ([`FIRECRAWL_HOSTED`]); any other base URL is a self-hosted server, reached
//!   only at a private or loopback address (`web::Client::with_private_origin`: a name that
//!   resolves to a public address is refused before any byte, key included, is sent).
//!   Crawl4AI has no hosted endpoint: its base URL is always self-hosted.
//! - The key is a secret ([`ApiKey`]): given inline or as `env:NAME`, resolved once as the
//!   configuration loads (an unset variable stops trawl at start), never shown.
//! - Only the page's URL is sent: a job's custom headers and credentials never reach a
//!   provider. The URL is checked first (its host resolved through the SSRF policy: a
//!   self-hosted provider on the operator's network must not be pointed at internal
//!   addresses), and so is the URL the provider says it ended on (a redirect the provider
//!   followed into a private address discards the answer).
//!
//! Not here: when a provider is asked and what becomes of its answer (`fetch::rescue`,
//! `fetch::by_provider`), the job's choice ([`Fallback`], the contract's).

pub mod crawl4ai;
pub mod firecrawl;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use url::Url;

pub use crate::job::Fallback;
use crate::job::{ErrorCode, JobError};
use crate::web;
use crate::web::dns::{ResolveFailure, resolve_checked};
use crate::web::ssrf::BlockReason;

/// Firecrawl's hosted API: the one public base URL a Firecrawl provider may have.
pub const FIRECRAWL_HOSTED: &str = "https://api.firecrawl.dev/";

/// Largest provider answer read, in bytes (markdown, HTML and raw HTML of one page).
pub const MAX_RESPONSE_BYTES: u64 = 16 * 1024 * 1024;

/// A provider's key: the value, or `env:NAME` (read from the environment when the providers
/// are built). Never shown: `Debug` and serialisation print `[redacted]`.
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ApiKey(String);

impl ApiKey {
    /// Wraps a value or reference.
    pub fn new(value: impl Into<String>) -> ApiKey {
        ApiKey(value.into())
    }

    /// The key itself. `key` names the setting in messages. An `env:NAME` reference must have
    /// been resolved first ([`ApiKey::resolve_from`]; trawl's configuration does it as it
    /// loads).
    pub fn resolve(&self, key: &str) -> Result<String, String> {
        if let Some(name) = self.0.strip_prefix("env:") {
            return Err(format!(
                "{key} = \"env:{name}\" was not resolved from the environment"
            ));
        }
        if self.0.trim().is_empty() {
            return Err(format!("{key} is empty"));
        }
        Ok(self.0.clone())
    }

    /// The key with an `env:NAME` reference replaced by the variable's value, which `lookup`
    /// reads (a value is kept as it is). An unset or empty variable, or a bad name, is an
    /// error naming `key`.
    pub fn resolve_from(
        &self,
        key: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<ApiKey, String> {
        let Some(name) = self.0.strip_prefix("env:") else {
            return Ok(self.clone());
        };
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(format!(
                "{key} = \"env:{name}\": {name:?} is not an environment variable name"
            ));
        }
        match lookup(name) {
            Some(value) if !value.trim().is_empty() => Ok(ApiKey(value)),
            Some(_) => Err(format!(
                "{key} = \"env:{name}\": the environment variable {name} is empty"
            )),
            None => Err(format!(
                "{key} = \"env:{name}\": the environment variable {name} is not set"
            )),
        }
    }
}

impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Serialize for ApiKey {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("[redacted]")
    }
}

/// `[fetch.firecrawl]`: Firecrawl's scrape API.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FirecrawlConfig {
    /// The base URL: Firecrawl's hosted API (`https://api.firecrawl.dev`, taken when only a
    /// key is set) or a self-hosted server, which must be at a private or loopback address
    /// (`http://firecrawl:3002`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The API key (`Authorization: Bearer`): the value or `env:NAME`. Needed by the hosted
    /// API; a self-hosted server may do without.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<ApiKey>,
    /// The API version asked: `v1` (`/v1/scrape`) or `v2` (`/v2/scrape`).
    pub api: firecrawl::Api,
}

/// `[fetch.crawl4ai]`: a Crawl4AI server (its Docker image's API).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Crawl4aiConfig {
    /// The server's base URL, at a private or loopback address (`http://crawl4ai:11235`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The server's token when it requires one (`Authorization: Bearer`): the value or
    /// `env:NAME`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<ApiKey>,
    /// The endpoint asked: `crawl` (`POST /crawl`: markdown, links, title, status) or `md`
    /// (`POST /md`: markdown alone).
    pub endpoint: crawl4ai::Endpoint,
}

/// The two kinds of provider.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Firecrawl.
    Firecrawl,
    /// Crawl4AI.
    Crawl4ai,
}

impl Kind {
    /// `"firecrawl"` or `"crawl4ai"`, as results and messages name them.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Firecrawl => "firecrawl",
            Kind::Crawl4ai => "crawl4ai",
        }
    }
}

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One configured provider: its client (trusting exactly its origin), endpoint and key.
pub struct Provider {
    kind: Kind,
    client: web::Client,
    /// The scrape endpoint's URL.
    endpoint: Url,
    key: Option<String>,
    /// Crawl4AI's `md` endpoint rather than `crawl`.
    markdown_only: bool,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("kind", &self.kind)
            .field("endpoint", &self.endpoint.as_str())
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

impl Provider {
    /// Which provider this is.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    /// The request's headers: JSON, and the key when there is one.
    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![("content-type", "application/json".to_owned())];
        if let Some(key) = &self.key {
            headers.push(("authorization", format!("Bearer {key}")));
        }
        headers
    }

    /// POSTs `body` to the endpoint and hands back the status and the body as JSON (an error
    /// status whose body says why becomes [`Error::Status`] with that message).
    async fn post(&self, body: serde_json::Value) -> Result<serde_json::Value, Error> {
        let headers = self.headers();
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(name, value)| (*name, value.as_str()))
            .collect();
        let body = bytes::Bytes::from(body.to_string());
        let response = self
            .client
            .call(
                "POST",
                &self.endpoint,
                &headers,
                Some(body),
                MAX_RESPONSE_BYTES,
            )
            .await
            .map_err(|error| Error::Web {
                provider: self.kind,
                error,
            })?;
        let parsed = web::json::parse_object(&response.body);
        if !(200..300).contains(&response.status) {
            let message = parsed
                .ok()
                .and_then(|value| error_message(&value))
                .map(|message| one_line(&message));
            return Err(Error::Status {
                provider: self.kind,
                status: response.status,
                message,
                retry_after: response
                    .header("retry-after")
                    .and_then(|value| value.trim().parse::<u64>().ok()),
            });
        }
        parsed.map_err(|what| Error::Invalid {
            provider: self.kind,
            what,
        })
    }
}

/// The message an error answer carries: `error` (Firecrawl), `detail` (FastAPI, Crawl4AI's
/// server: a string or a list of `{msg}`), `error_message` or `message`.
fn error_message(value: &serde_json::Value) -> Option<String> {
    let field = |name: &str| value.get(name).and_then(serde_json::Value::as_str);
    field("error")
        .or_else(|| field("error_message"))
        .or_else(|| field("message"))
        .or_else(|| field("detail"))
        .map(str::to_owned)
        .or_else(|| {
            let details = value.get("detail")?.as_array()?;
            let messages: Vec<&str> = details
                .iter()
                .filter_map(|item| item.get("msg").and_then(serde_json::Value::as_str))
                .collect();
            (!messages.is_empty()).then(|| messages.join("; "))
        })
        .filter(|message| !message.trim().is_empty())
}

/// A provider's message, on one line and at most 200 characters (it is shown to users).
fn one_line(message: &str) -> String {
    let flat = message.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(200) {
        Some((index, _)) => format!("{}…", &flat[..index]),
        None => flat,
    }
}

/// A page status a provider reported (`field` names it), 200 when it did not say.
fn page_status(status: Option<u32>, field: &str) -> Result<u16, String> {
    match status {
        Some(status) => u16::try_from(status)
            .ok()
            .filter(|status| (100..600).contains(status))
            .ok_or_else(|| format!("{field} {status} is no status")),
        None => Ok(200),
    }
}

/// What a provider gave for one page.
#[derive(Debug, Clone, PartialEq)]
pub struct Scraped {
    /// The provider.
    pub provider: Kind,
    /// Where the provider says it ended (its redirects followed), checked by the guard.
    pub final_url: Url,
    /// The page's status as the provider saw it (200 when it does not say).
    pub status: u16,
    /// The title.
    pub title: Option<String>,
    /// The description.
    pub description: Option<String>,
    /// The language.
    pub lang: Option<String>,
    /// Markdown of the main content.
    pub markdown: String,
    /// HTML of the main content, when the provider gave it.
    pub html: Option<String>,
    /// The page's HTML as the provider loaded it, when it gave it.
    pub raw_html: Option<String>,
    /// Links on the page, as the provider listed them.
    pub links: Vec<String>,
    /// What the provider warned about.
    pub warning: Option<String>,
}

/// Why a provider gave no page.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request failed before an answer (refused by the guard, DNS, connect, timeout, …).
    #[error("{provider}: {error}")]
    Web {
        /// The provider.
        provider: Kind,
        /// The client's error.
        error: web::client::Error,
    },
    /// The provider answered with an error status.
    #[error("{provider}: answered status {status}{}", message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Status {
        /// The provider.
        provider: Kind,
        /// The status.
        status: u16,
        /// What the answer said, on one line.
        message: Option<String>,
        /// Seconds from Retry-After.
        retry_after: Option<u64>,
    },
    /// The provider answered that it could not read the page (`success: false`).
    #[error("{provider}: could not read the page ({message})")]
    Refused {
        /// The provider.
        provider: Kind,
        /// What it said.
        message: String,
    },
    /// The answer could not be read: bad JSON, wrong types, no markdown.
    #[error("{provider}: unreadable answer: {what}")]
    Invalid {
        /// The provider.
        provider: Kind,
        /// What is wrong with it.
        what: String,
    },
    /// The page's URL, or where the provider ended, is a destination the guard refuses.
    #[error("{provider}: {url} is a blocked destination ({reason})")]
    Blocked {
        /// The provider.
        provider: Kind,
        /// The refused URL's host.
        url: String,
        /// Why.
        reason: BlockReason,
    },
    /// A job asked for a provider this process has not configured.
    #[error("{0} is not configured here (fetch.{0})")]
    Unconfigured(Kind),
}

impl Error {
    /// The public error code: the network's for a failed request, `blocked_destination` for a
    /// refused URL, `provider_failed` for the rest.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Web { error, .. } => error.code(),
            Error::Blocked { .. } => ErrorCode::BlockedDestination,
            _ => ErrorCode::ProviderFailed,
        }
    }

    /// True when asking again later may succeed: network faults, 408, 429 and 5xx.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Web { error, .. } => error.is_transient(),
            Error::Status { status, .. } => matches!(status, 408 | 429 | 500..=599),
            _ => false,
        }
    }

    /// Converts into the stored, public form (`evidence` names the provider).
    pub fn to_job_error(&self) -> JobError {
        let mut error = JobError::new(self.code(), self.to_string());
        error.transient = self.is_transient();
        error.evidence = Some(
            match self {
                Error::Web { provider, .. }
                | Error::Status { provider, .. }
                | Error::Refused { provider, .. }
                | Error::Invalid { provider, .. }
                | Error::Blocked { provider, .. } => *provider,
                Error::Unconfigured(kind) => *kind,
            }
            .as_str()
            .to_owned(),
        );
        if let Error::Status {
            status,
            retry_after,
            ..
        } = self
        {
            error.status = Some(*status);
            error.retry_after = *retry_after;
        }
        error
    }
}

/// The providers of a process, from `[fetch]`: which are configured, which is asked by
/// default, and whether trawl's own extraction runs first. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Providers {
    firecrawl: Option<Arc<Provider>>,
    crawl4ai: Option<Arc<Provider>>,
    default: Fallback,
    readability: bool,
}

impl Providers {
    /// No provider: trawl's own extraction alone.
    pub fn none() -> Providers {
        Providers {
            readability: true,
            ..Providers::default()
        }
    }

    /// Builds the configured providers over `client`: keys checked (an `env:` reference not
    /// resolved is an error), base URLs locked (see the module's notes).
    /// `readability = false` needs a provider to send pages to.
    pub fn new(
        client: &web::Client,
        default: Fallback,
        readability: bool,
        firecrawl: &FirecrawlConfig,
        crawl4ai: &Crawl4aiConfig,
    ) -> Result<Providers, String> {
        let firecrawl = match (&firecrawl.url, &firecrawl.key) {
            (None, None) => None,
            (url, key) => {
                let url = url.as_deref().unwrap_or(FIRECRAWL_HOSTED);
                let base = base_url("fetch.firecrawl.url", url)?;
                let hosted = is_firecrawl_hosted(&base);
                let key = key
                    .as_ref()
                    .map(|key| key.resolve("fetch.firecrawl.key"))
                    .transpose()?;
                if hosted && key.is_none() {
                    return Err(
                        "fetch.firecrawl: the hosted API (https://api.firecrawl.dev) needs \
                         fetch.firecrawl.key"
                            .to_owned(),
                    );
                }
                let client = locked_client(client, &base, hosted, "fetch.firecrawl.url")?;
                let endpoint = join(&base, firecrawl.api.path())?;
                Some(Arc::new(Provider {
                    kind: Kind::Firecrawl,
                    client,
                    endpoint,
                    key,
                    markdown_only: false,
                }))
            }
        };
        let crawl4ai = match &crawl4ai.url {
            None if crawl4ai.key.is_some() => {
                return Err("fetch.crawl4ai.key is set without fetch.crawl4ai.url".to_owned());
            }
            None => None,
            Some(url) => {
                let base = base_url("fetch.crawl4ai.url", url)?;
                let key = crawl4ai
                    .key
                    .as_ref()
                    .map(|key| key.resolve("fetch.crawl4ai.key"))
                    .transpose()?;
                let client = locked_client(client, &base, false, "fetch.crawl4ai.url")?;
                let endpoint = join(&base, crawl4ai.endpoint.path())?;
                Some(Arc::new(Provider {
                    kind: Kind::Crawl4ai,
                    client,
                    endpoint,
                    key,
                    markdown_only: crawl4ai.endpoint == crawl4ai::Endpoint::Md,
                }))
            }
        };
        let providers = Providers {
            firecrawl,
            crawl4ai,
            default,
            readability,
        };
        match default {
            Fallback::Firecrawl if providers.firecrawl.is_none() => {
                return Err("fetch.fallback = \"firecrawl\" needs [fetch.firecrawl]".to_owned());
            }
            Fallback::Crawl4ai if providers.crawl4ai.is_none() => {
                return Err("fetch.fallback = \"crawl4ai\" needs fetch.crawl4ai.url".to_owned());
            }
            _ => {}
        }
        if !readability && providers.chosen(None).is_empty() {
            return Err(
                "fetch.readability = false sends pages straight to a fallback provider, and \
                 none is configured or chosen (fetch.fallback, [fetch.firecrawl], \
                 [fetch.crawl4ai])"
                    .to_owned(),
            );
        }
        Ok(providers)
    }

    /// The providers a job asks, in turn: its own choice, else `fetch.fallback` (`auto`:
    /// every configured one, Firecrawl first). A provider named but not configured is an
    /// error in the list, reported with the job's outcome.
    pub fn chosen(&self, job: Option<Fallback>) -> Vec<Result<&Provider, Error>> {
        fn pick(provider: &Option<Arc<Provider>>, kind: Kind) -> Result<&Provider, Error> {
            match provider {
                Some(provider) => Ok(provider.as_ref()),
                None => Err(Error::Unconfigured(kind)),
            }
        }
        match job.unwrap_or(self.default) {
            Fallback::None => Vec::new(),
            Fallback::Firecrawl => vec![pick(&self.firecrawl, Kind::Firecrawl)],
            Fallback::Crawl4ai => vec![pick(&self.crawl4ai, Kind::Crawl4ai)],
            Fallback::Auto => [&self.firecrawl, &self.crawl4ai]
                .into_iter()
                .flatten()
                .map(|provider| Ok(provider.as_ref()))
                .collect(),
        }
    }

    /// Whether a job's page goes straight to a provider (`fetch.readability = false`, and the
    /// job does not say `fallback: "none"`).
    pub fn straight(&self, job: Option<Fallback>) -> bool {
        !self.readability && job != Some(Fallback::None)
    }

    /// The configured providers' names, for `trawl config` and logs.
    pub fn configured(&self) -> Vec<Kind> {
        [&self.firecrawl, &self.crawl4ai]
            .into_iter()
            .flatten()
            .map(|provider| provider.kind)
            .collect()
    }
}

/// Asks `provider` for the page at `url`: the URL checked first (its host resolved under the
/// client's policy), the answer read, and where the provider ended checked too.
pub async fn scrape(
    provider: &Provider,
    client: &web::Client,
    url: &Url,
) -> Result<Scraped, Error> {
    check_destination(provider.kind, client, url).await?;
    let scraped = match provider.kind {
        Kind::Firecrawl => firecrawl::scrape(provider, url).await?,
        Kind::Crawl4ai => crawl4ai::scrape(provider, url).await?,
    };
    if scraped.final_url != *url {
        check_destination(provider.kind, client, &scraped.final_url).await?;
    }
    if scraped.status >= 400 {
        return Err(Error::Refused {
            provider: provider.kind,
            message: format!("the page answered status {}", scraped.status),
        });
    }
    Ok(scraped)
}

/// Refuses a URL the guard would refuse: its host checked by the policy and, for a name,
/// every address it resolves to (a failed lookup is left to the provider, which may see other
/// DNS).
async fn check_destination(provider: Kind, client: &web::Client, url: &Url) -> Result<(), Error> {
    let blocked = |reason| Error::Blocked {
        provider,
        url: web::client::origin_of(url),
        reason,
    };
    match client.policy().check_url(url) {
        Err(web::ssrf::UrlError::Blocked { reason, .. }) => return Err(blocked(reason)),
        Err(other) => {
            return Err(Error::Invalid {
                provider,
                what: format!("the page's URL: {other}"),
            });
        }
        Ok(()) => {}
    }
    if let Some(url::Host::Domain(host)) = url.host() {
        match resolve_checked(client.policy(), client.dns(), host).await {
            Err(ResolveFailure::Blocked { reason, .. }) => return Err(blocked(reason)),
            Ok(_) | Err(ResolveFailure::Lookup { .. }) => {}
        }
    }
    Ok(())
}

/// Whether `base` is Firecrawl's hosted API: `https://api.firecrawl.dev` on its default port.
fn is_firecrawl_hosted(base: &Url) -> bool {
    base.host_str() == Some("api.firecrawl.dev")
}

/// A client for a provider's origin: the hosted API through the guard as it is (public,
/// HTTPS, its official host), a self-hosted server at private or loopback addresses only.
fn locked_client(
    client: &web::Client,
    base: &Url,
    hosted: bool,
    key: &str,
) -> Result<web::Client, String> {
    if hosted {
        if base.scheme() != "https" || base.port().is_some() || base.path() != "/" {
            return Err(format!(
                "{key} = {base}: Firecrawl's hosted API is {FIRECRAWL_HOSTED} exactly"
            ));
        }
        return Ok(client.clone());
    }
    let public_literal = match base.host() {
        Some(url::Host::Ipv4(ip)) => web::ssrf::classify(ip.into()).is_none(),
        Some(url::Host::Ipv6(ip)) => web::ssrf::classify(ip.into()).is_none(),
        _ => false,
    };
    if public_literal {
        return Err(format!(
            "{key} = {base}: a self-hosted provider must be at a private or loopback address \
             (the operator's own server)"
        ));
    }
    if let Some(host) = base.host_str()
        && host.ends_with(".firecrawl.dev")
    {
        return Err(format!(
            "{key} = {base}: Firecrawl's hosted API is {FIRECRAWL_HOSTED} exactly"
        ));
    }
    client
        .with_private_origin(base)
        .map_err(|error| format!("{key} = {base}: {error}"))
}

/// Parses a provider's base URL: http(s), a host, no credentials, query or fragment; the path
/// ends with `/`.
fn base_url(key: &str, input: &str) -> Result<Url, String> {
    web::client::base_url(input).map_err(|problem| format!("{key} = {input:?}: {problem}"))
}

fn join(base: &Url, path: &str) -> Result<Url, String> {
    base.join(path)
        .map_err(|error| format!("{base} + {path}: {error}"))
}

/// Absolute http(s) links from a provider's list, resolved against the page, in order,
/// without duplicates.
fn absolute_links(page: &Url, links: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    links
        .into_iter()
        .filter_map(|link| page.join(link.trim()).ok())
        .filter(|link| matches!(link.scheme(), "http" | "https"))
        .map(|link| web::normalize::normalize_url(&link).to_string())
        .filter(|link| seen.insert(link.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client() -> web::Client {
        web::Client::new(web::Config::default(), web::Policy::default()).expect("client")
    }

    #[test]
    fn keys_resolve_from_the_environment_or_stop_with_the_reason() {
        let lookup = |name: &str| (name == "FC_KEY").then(|| "fc-from-env".to_owned());
        assert_eq!(ApiKey::new("fc-123").resolve("k"), Ok("fc-123".to_owned()));
        let resolved = ApiKey::new("env:FC_KEY")
            .resolve_from("k", &lookup)
            .expect("set");
        assert_eq!(resolved.resolve("k"), Ok("fc-from-env".to_owned()));
        let unset = ApiKey::new("env:TRAWL_TEST_UNSET")
            .resolve_from("fetch.firecrawl.key", &lookup)
            .expect_err("unset");
        assert!(unset.contains("TRAWL_TEST_UNSET is not set"), "{unset}");
        assert!(ApiKey::new("env:1BAD").resolve_from("k", &lookup).is_err());
        assert!(
            ApiKey::new("env:FC_KEY").resolve("k").is_err(),
            "unresolved"
        );
        assert!(ApiKey::new("  ").resolve("k").is_err());
        let shown = format!(
            "{:?} {}",
            ApiKey::new("fc-secret"),
            serde_json::to_string(&ApiKey::new("fc-secret")).expect("serialises")
        );
        assert!(!shown.contains("fc-secret"), "{shown}");
    }

    #[test]
    fn base_urls_are_locked_to_the_hosted_api_or_a_private_server() {
        let build = |url: &str, key: Option<&str>| {
            Providers::new(
                &client(),
                Fallback::Auto,
                true,
                &FirecrawlConfig {
                    url: Some(url.to_owned()),
                    key: key.map(ApiKey::new),
                    api: firecrawl::Api::V1,
                },
                &Crawl4aiConfig::default(),
            )
        };
        assert!(build("https://api.firecrawl.dev", Some("fc-1")).is_ok());
        assert!(build("https://api.firecrawl.dev/", None).is_err(), "no key");
        for refused in [
            "http://api.firecrawl.dev/",
            "https://api.firecrawl.dev:8443/",
            "https://api.firecrawl.dev/proxy/",
            "https://evil.firecrawl.dev/",
            "https://user:pw@firecrawl.local/",
            "ftp://10.0.0.5/",
        ] {
            assert!(build(refused, Some("fc-1")).is_err(), "{refused} accepted");
        }
        // Self-hosted: accepted here, checked at every connection (private addresses only).
        assert!(build("http://10.0.0.5:3002", None).is_ok());
        assert!(build("http://firecrawl:3002", None).is_ok());
        let straight_without = Providers::new(
            &client(),
            Fallback::Auto,
            false,
            &FirecrawlConfig::default(),
            &Crawl4aiConfig::default(),
        );
        assert!(straight_without.is_err());
        let named_without = Providers::new(
            &client(),
            Fallback::Crawl4ai,
            true,
            &FirecrawlConfig::default(),
            &Crawl4aiConfig::default(),
        );
        assert!(named_without.is_err());
    }

    #[test]
    fn auto_asks_every_configured_provider_firecrawl_first() {
        let providers = Providers::new(
            &client(),
            Fallback::Auto,
            true,
            &FirecrawlConfig {
                url: Some("http://127.0.0.1:3002".into()),
                ..FirecrawlConfig::default()
            },
            &Crawl4aiConfig {
                url: Some("http://127.0.0.1:11235".into()),
                ..Crawl4aiConfig::default()
            },
        )
        .expect("providers");
        let kinds = |job| {
            providers
                .chosen(job)
                .into_iter()
                .map(|provider| provider.map(Provider::kind).map_err(|e| e.to_string()))
                .collect::<Vec<_>>()
        };
        assert_eq!(kinds(None), vec![Ok(Kind::Firecrawl), Ok(Kind::Crawl4ai)]);
        assert_eq!(kinds(Some(Fallback::Crawl4ai)), vec![Ok(Kind::Crawl4ai)]);
        assert!(kinds(Some(Fallback::None)).is_empty());
        let only = Providers::none();
        assert!(only.chosen(None).is_empty());
        assert_eq!(
            only.chosen(Some(Fallback::Firecrawl))[0]
                .as_ref()
                .map(|_| ())
                .map_err(|e| e.to_string()),
            Err("firecrawl is not configured here (fetch.firecrawl)".to_owned())
        );
        assert!(format!("{providers:?}").contains("127.0.0.1"));
    }

    #[tokio::test]
    async fn a_self_hosted_name_resolving_to_a_public_address_is_refused_before_sending() {
        let dns =
            web::StaticDns::new().answer("firecrawl.test", &["93.184.216.34".parse().expect("ip")]);
        let client = web::Client::with_dns(
            web::Config::default(),
            web::Policy::default(),
            web::Dns::Static(Arc::new(dns)),
        )
        .expect("client");
        let providers = Providers::new(
            &client,
            Fallback::Auto,
            true,
            &FirecrawlConfig {
                url: Some("http://firecrawl.test:3002".into()),
                ..FirecrawlConfig::default()
            },
            &Crawl4aiConfig::default(),
        )
        .expect("providers");
        let provider = providers
            .chosen(None)
            .into_iter()
            .next()
            .expect("one")
            .expect("configured");
        // The page's own name does not resolve here: left to the provider.
        let page = Url::parse("https://example.com/").expect("url");
        let error = scrape(provider, &client, &page).await.expect_err("refused");
        assert_eq!(error.code(), ErrorCode::BlockedDestination, "{error}");
        assert!(error.to_string().contains("public"), "{error}");
        // A page whose name resolves to a blocked address is never sent.
        let metadata =
            web::StaticDns::new().answer("sneaky.test", &["169.254.169.254".parse().expect("ip")]);
        let guarded = web::Client::with_dns(
            web::Config::default(),
            web::Policy::default(),
            web::Dns::Static(Arc::new(metadata)),
        )
        .expect("client");
        let page = Url::parse("https://sneaky.test/").expect("url");
        let error = scrape(provider, &guarded, &page)
            .await
            .expect_err("refused");
        assert!(
            matches!(
                error,
                Error::Blocked {
                    reason: BlockReason::Metadata,
                    ..
                }
            ),
            "{error}"
        );
    }

    #[test]
    fn links_are_absolute_http_and_unique() {
        let page = Url::parse("https://a.test/dir/page").expect("url");
        let links = absolute_links(
            &page,
            [
                "/x".to_owned(),
                "https://a.test/x".to_owned(),
                "mailto:me@a.test".to_owned(),
                "other".to_owned(),
            ],
        );
        assert_eq!(links, vec!["https://a.test/x", "https://a.test/dir/other"]);
    }

    #[test]
    fn error_answers_carry_their_message_on_one_line() {
        let value = serde_json::json!({"success": false, "error": "Payment\n required"});
        assert_eq!(error_message(&value).as_deref(), Some("Payment\n required"));
        assert_eq!(one_line("Payment\n required"), "Payment required");
        let fastapi = serde_json::json!({"detail": [{"msg": "field required"}, {"msg": "bad"}]});
        assert_eq!(
            error_message(&fastapi).as_deref(),
            Some("field required; bad")
        );
        let error = Error::Status {
            provider: Kind::Firecrawl,
            status: 429,
            message: Some("slow down".into()),
            retry_after: Some(7),
        };
        let job = error.to_job_error();
        assert_eq!(job.code, ErrorCode::ProviderFailed);
        assert!(job.transient);
        assert_eq!((job.status, job.retry_after), (Some(429), Some(7)));
        assert_eq!(job.evidence.as_deref(), Some("firecrawl"));
        assert!(job.message.contains("slow down"), "{}", job.message);
    }
}
