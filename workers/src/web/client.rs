//! The SSRF-guarded HTTP client: every hop's URL is checked before the request, every DNS
//! answer is checked inside the resolver (so the address connected to is the address checked),
//! redirects are followed by hand (GET) or not at all (POST, for webhooks), and bytes, time and
//! headers are bounded. Requests go through the configured outbound proxies when there are
//! some (`web::proxy` says what the guard still checks then).
//!
//! Not here: what to do with the body (`web::extract`, `fetch`), nor retries (the runner and
//! the webhook sender decide those from `Error::is_transient`).

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use reqwest::header::{self, HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};
use url::Url;

use super::dns::{Dns, GuardedResolver, ResolveFailure, resolve_checked};
use super::proxy::{self, Choice, ProxyUrl, Rotation};
use super::ssrf::{BlockReason, Policy, UrlError};
use crate::job::ErrorCode;

/// Limits and identity of outgoing requests. Every field is a `trawl.toml` key under `[http]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// User-Agent sent with every request (Chrome-like by default: many sites serve bots less).
    pub user_agent: String,
    /// Accept-Language sent with every request.
    pub accept_language: String,
    /// Largest decoded body accepted, in bytes (after gzip/br/deflate/zstd decompression).
    /// Bounded to 1,000..=50,000,000.
    pub max_bytes: u64,
    /// Total time for one fetch, redirects included, in seconds.
    pub timeout_secs: u64,
    /// Time to establish a connection (TCP and TLS), in seconds.
    pub connect_timeout_secs: u64,
    /// Longest wait for the next bytes once connected (slow-drip defence), in seconds.
    pub read_timeout_secs: u64,
    /// Redirects followed before `too_many_redirects` (at most 10).
    pub max_redirects: usize,
    /// Most response headers accepted (HTTP/1); the head is also capped at ~400 KiB by hyper.
    pub max_headers: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            user_agent: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                         Chrome/131.0.0.0 Safari/537.36"
                .to_owned(),
            accept_language: "en-US,en;q=0.9".to_owned(),
            max_bytes: 750_000,
            timeout_secs: 30,
            connect_timeout_secs: 10,
            read_timeout_secs: 10,
            max_redirects: 3,
            max_headers: 256,
        }
    }
}

/// The smallest and largest `max_bytes` a configuration may set.
pub const MAX_BYTES_RANGE: std::ops::RangeInclusive<u64> = 1_000..=50_000_000;

/// Largest response body [`Client::post`] reads (64 KiB): the answer to a POST is an
/// acknowledgement, not content.
pub const POST_RESPONSE_MAX_BYTES: u64 = 64 * 1024;

/// Request headers [`Client::post`] refuses from its caller: they decide framing and routing,
/// which belong to the client.
const CLIENT_OWNED_HEADERS: [header::HeaderName; 4] = [
    header::HOST,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
];

impl Config {
    /// Checks the values against their fixed bounds.
    pub fn validate(&self) -> Result<(), String> {
        if !MAX_BYTES_RANGE.contains(&self.max_bytes) {
            return Err(format!(
                "http.max_bytes = {} is outside {}..={}",
                self.max_bytes,
                MAX_BYTES_RANGE.start(),
                MAX_BYTES_RANGE.end()
            ));
        }
        if self.max_redirects > 10 {
            return Err(format!(
                "http.max_redirects = {} is above 10",
                self.max_redirects
            ));
        }
        for (name, secs) in [
            ("timeout_secs", self.timeout_secs),
            ("connect_timeout_secs", self.connect_timeout_secs),
            ("read_timeout_secs", self.read_timeout_secs),
        ] {
            if secs == 0 || secs > 600 {
                return Err(format!("http.{name} = {secs} is outside 1..=600"));
            }
        }
        if self.max_headers == 0 {
            return Err("http.max_headers must be at least 1".to_owned());
        }
        Ok(())
    }
}

/// What went wrong while fetching, in trawl's terms.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The URL is not acceptable before any network use.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// A DNS answer (or a connected address) was refused by the SSRF guard.
    #[error("connection to {host} refused by ssrf guard: {reason}")]
    Blocked {
        /// The host name or address.
        host: String,
        /// Why it was refused.
        reason: BlockReason,
    },
    /// The name did not resolve.
    #[error("dns lookup of {host} failed: {message}")]
    Dns {
        /// The host name.
        host: String,
        /// The resolver's words.
        message: String,
    },
    /// The connection failed.
    #[error("connect failed: {0}")]
    Connect(String),
    /// The TLS handshake failed.
    #[error("tls failed: {0}")]
    Tls(String),
    /// More redirects than allowed.
    #[error("more than {limit} redirects")]
    TooManyRedirects {
        /// The configured limit.
        limit: usize,
    },
    /// A redirect back to a URL already visited.
    #[error("redirect loop back to {url}")]
    RedirectLoop {
        /// The URL seen twice.
        url: String,
    },
    /// A redirect status without a usable Location.
    #[error("redirect status {status} without a usable location")]
    MissingLocation {
        /// The redirect status.
        status: u16,
    },
    /// A time limit ran out.
    #[error("{phase} timed out after {seconds} s")]
    Timeout {
        /// `total`, `connect` or `read`.
        phase: &'static str,
        /// The limit that ran out.
        seconds: u64,
    },
    /// The decoded body exceeded the byte limit.
    #[error("body larger than {limit} bytes (after decompression)")]
    TooLarge {
        /// The configured limit.
        limit: u64,
    },
    /// The response head exceeded the header limits.
    #[error("response headers too large or too many")]
    HeadersTooLarge,
    /// The server broke the protocol (bad status line, short body, bad compression).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A job's proxy URL is unusable; nothing was sent.
    #[error("proxy: {0}")]
    Proxy(String),
    /// The caller's [`RedirectGuard`] refused a redirect's target; it was not requested.
    #[error("redirect to {url} not followed: {reason}")]
    RedirectRefused {
        /// The target refused.
        url: String,
        /// The code the guard gave.
        code: ErrorCode,
        /// The guard's words.
        reason: String,
    },
    /// A request header given by the caller is malformed or owned by the client; nothing was
    /// sent. A fault of the caller, not of the destination.
    #[error("request header {name:?} is invalid: {problem}")]
    InvalidHeader {
        /// The header name as given (never its value, which may be a secret).
        name: String,
        /// What is wrong with it.
        problem: &'static str,
    },
}

impl Error {
    /// Returns the public error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Url(UrlError::UnsupportedScheme(_)) => ErrorCode::UnsupportedScheme,
            // Port 0 is a malformed URL, not a destination.
            Error::Url(UrlError::Blocked {
                reason: BlockReason::Port,
                ..
            }) => ErrorCode::InvalidUrl,
            Error::Url(UrlError::Blocked { .. }) | Error::Blocked { .. } => {
                ErrorCode::BlockedDestination
            }
            Error::Url(_) => ErrorCode::InvalidUrl,
            Error::Dns { .. } => ErrorCode::DnsError,
            Error::Connect(_) => ErrorCode::ConnectError,
            Error::Tls(_) => ErrorCode::TlsError,
            Error::TooManyRedirects { .. } => ErrorCode::TooManyRedirects,
            Error::RedirectLoop { .. } => ErrorCode::RedirectLoop,
            Error::MissingLocation { .. } => ErrorCode::RedirectMissingLocation,
            Error::Timeout { .. } => ErrorCode::Timeout,
            Error::TooLarge { .. } => ErrorCode::TooLarge,
            Error::HeadersTooLarge => ErrorCode::HeadersTooLarge,
            Error::Protocol(_) => ErrorCode::ProtocolError,
            Error::InvalidHeader { .. } => ErrorCode::Internal,
            Error::Proxy(_) => ErrorCode::InvalidUrl,
            Error::RedirectRefused { code, .. } => *code,
        }
    }

    /// Names the proxy a transport failure happened through.
    fn through(self, label: &str) -> Error {
        match self {
            Error::Connect(message) => Error::Connect(format!("through proxy {label}: {message}")),
            Error::Protocol(message) => {
                Error::Protocol(format!("through proxy {label}: {message}"))
            }
            Error::Tls(message) => Error::Tls(format!("through proxy {label}: {message}")),
            other => other,
        }
    }

    /// True when the same request may succeed later: timeouts, failed connections, broken
    /// transfers and DNS failures (which are often brief). Policy refusals, limits and
    /// malformed URLs are permanent.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Dns { .. } | Error::Connect(_) | Error::Timeout { .. } | Error::Protocol(_)
        )
    }

    /// Returns the SSRF reason when the guard refused the destination (a metrics label).
    pub fn block_reason(&self) -> Option<BlockReason> {
        match self {
            Error::Url(UrlError::Blocked { reason, .. }) | Error::Blocked { reason, .. } => {
                Some(*reason)
            }
            _ => None,
        }
    }
}

/// Asked before a redirect is followed, with its target: `Err((code, reason))` refuses it.
pub type RedirectGuard = Arc<
    dyn Fn(Url) -> futures_util::future::BoxFuture<'static, Result<(), (ErrorCode, String)>>
        + Send
        + Sync,
>;

/// A response whose body has been read whole within the limits.
#[derive(Debug, Clone)]
pub struct Response {
    /// The URL after redirects.
    pub final_url: Url,
    /// The HTTP status of the final response.
    pub status: u16,
    /// The final response's headers.
    pub headers: HeaderMap,
    /// The decoded body (content-encoding removed).
    pub body: Bytes,
    /// The address the final response came from.
    pub remote_addr: Option<SocketAddr>,
    /// Every URL requested, the first one included, in order.
    pub hops: Vec<Url>,
}

impl Response {
    /// Returns the Content-Type header value, if any and valid UTF-8.
    pub fn content_type(&self) -> Option<&str> {
        self.headers
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
    }

    /// Returns a header value as text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|value| value.to_str().ok())
    }
}

/// The Accept header of every request.
const ACCEPT: &str =
    "text/html,application/xhtml+xml,application/xml;q=0.9,text/plain;q=0.8,*/*;q=0.7";

/// The Accept-Encoding header reqwest sends with the gzip, br, deflate and zstd features.
const ACCEPT_ENCODING: &str = "gzip, br, zstd, deflate";

/// The guarded client. Cheap to clone; share one per process so connections are pooled.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    proxies: Arc<Proxies>,
    policy: Arc<Policy>,
    config: Arc<Config>,
    /// Addresses a test dial map connects to instead of the checked ones; they are exempt from
    /// the post-connect re-check because the map itself was checked.
    dial_targets: Arc<HashSet<IpAddr>>,
    dns: Dns,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("policy", &self.policy)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// The client's proxies: the configured ones (a connection pool each) and the ones jobs
/// brought (built on first use, a few kept).
#[derive(Default)]
struct Proxies {
    configured: Vec<Proxied>,
    rotation: Rotation,
    /// Requests routed so far, for round-robin.
    counter: AtomicUsize,
    own: std::sync::Mutex<HashMap<ProxyUrl, reqwest::Client>>,
}

/// Jobs' own proxies kept built at once; beyond, the oldest set is dropped.
const OWN_PROXIES_KEPT: usize = 16;

struct Proxied {
    label: String,
    http: reqwest::Client,
}

/// How one request goes out.
struct Route {
    http: reqwest::Client,
    /// The proxy's label, when through one.
    proxy: Option<String>,
    /// A configured proxy: its address is not checked after connecting.
    trusted: bool,
}

/// Builds a reqwest client with the guard's resolver and limits, through `proxy` if given
/// (`trusted`: a configured proxy, whose own host name is resolved without the policy).
fn build_http(
    config: &Config,
    policy: &Arc<Policy>,
    dns: &Dns,
    proxy: Option<(&ProxyUrl, bool)>,
) -> Result<reqwest::Client, String> {
    let exempt = match proxy {
        Some((url, true)) => url
            .parse()
            .ok()
            .and_then(|url| url.host_str().map(str::to_ascii_lowercase)),
        _ => None,
    };
    let resolver = GuardedResolver::new(policy.clone(), dns.clone()).exempt(exempt);
    let mut default_headers = HeaderMap::new();
    default_headers.insert(header::ACCEPT, HeaderValue::from_static(ACCEPT));
    let accept_language = HeaderValue::from_str(&config.accept_language)
        .map_err(|_| "http.accept_language is not a valid header value".to_owned())?;
    default_headers.insert(header::ACCEPT_LANGUAGE, accept_language);
    let mut builder = reqwest::Client::builder()
        .user_agent(config.user_agent.clone())
        .default_headers(default_headers)
        .dns_resolver(resolver)
        .redirect(reqwest::redirect::Policy::none())
        // No proxy from the environment: proxies resolve names themselves, which would
        // bypass the resolver's checks; configured ones are added below, knowingly.
        .no_proxy()
        .connect_timeout(Duration::from_secs(config.connect_timeout_secs))
        .read_timeout(Duration::from_secs(config.read_timeout_secs))
        .http1_max_headers(config.max_headers)
        .http2_max_header_list_size(256 * 1024)
        .pool_max_idle_per_host(16);
    if let Some((url, _)) = proxy {
        let proxy = reqwest::Proxy::all(url.expose())
            .map_err(|error| format!("proxy {}: {error}", url.label()))?;
        builder = builder.proxy(proxy);
    }
    builder
        .build()
        .map_err(|error| format!("cannot build the http client: {error}"))
}

impl Client {
    /// Builds a client with the system resolver.
    pub fn new(config: Config, policy: Policy) -> Result<Self, String> {
        Self::with_dns(config, policy, Dns::System)
    }

    /// Builds a client with the given name resolution (a static map in tests).
    pub fn with_dns(config: Config, policy: Policy, dns: Dns) -> Result<Self, String> {
        config.validate()?;
        let policy = Arc::new(policy);
        let dial_targets = Arc::new(dns.dial_targets());
        let http = build_http(&config, &policy, &dns, None)?;
        Ok(Client {
            http,
            proxies: Arc::new(Proxies::default()),
            policy,
            config: Arc::new(config),
            dial_targets,
            dns,
        })
    }

    /// The same client, sending requests through the configured proxies (unless a request
    /// chooses otherwise): one connection pool per proxy.
    pub fn with_proxies(mut self, proxies: &proxy::Config) -> Result<Self, String> {
        proxies.validate()?;
        let configured = proxies
            .urls
            .iter()
            .map(|url| {
                Ok(Proxied {
                    label: url.label(),
                    http: build_http(&self.config, &self.policy, &self.dns, Some((url, true)))?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        self.proxies = Arc::new(Proxies {
            configured,
            rotation: proxies.rotation,
            ..Proxies::default()
        });
        Ok(self)
    }

    /// The configured proxies' labels (`scheme://host:port`), in order.
    pub fn proxy_labels(&self) -> Vec<String> {
        self.proxies
            .configured
            .iter()
            .map(|proxied| proxied.label.clone())
            .collect()
    }

    /// How a request to `url` goes out under `choice`.
    fn route(&self, url: &Url, choice: &Choice) -> Result<Route, Error> {
        let direct = || Route {
            http: self.http.clone(),
            proxy: None,
            trusted: false,
        };
        match choice {
            Choice::Direct => Ok(direct()),
            Choice::Configured if self.proxies.configured.is_empty() => Ok(direct()),
            Choice::Configured => {
                let proxies = &self.proxies;
                let counter = proxies.counter.fetch_add(1, Ordering::Relaxed);
                let host = url.host_str().unwrap_or_default();
                Ok(
                    match proxy::pick(proxies.rotation, proxies.configured.len(), host, counter)
                        .and_then(|index| proxies.configured.get(index))
                    {
                        Some(proxied) => Route {
                            http: proxied.http.clone(),
                            proxy: Some(proxied.label.clone()),
                            trusted: true,
                        },
                        None => direct(),
                    },
                )
            }
            Choice::Via(proxy_url) => {
                // A job's own proxy is a destination like any other.
                let parsed = proxy_url.parse().map_err(Error::Proxy)?;
                let host = parsed.host_str().unwrap_or_default();
                if let Err(reason) = self.policy.check_host(host) {
                    return Err(Error::Blocked {
                        host: format!("proxy {host}"),
                        reason,
                    });
                }
                let mut own = self
                    .proxies
                    .own
                    .lock()
                    .map_err(|_| Error::Proxy("the proxy table is poisoned".to_owned()))?;
                let http = match own.get(proxy_url) {
                    Some(http) => http.clone(),
                    None => {
                        let http = build_http(
                            &self.config,
                            &self.policy,
                            &self.dns,
                            Some((proxy_url, false)),
                        )
                        .map_err(Error::Proxy)?;
                        if own.len() >= OWN_PROXIES_KEPT {
                            own.clear();
                        }
                        own.insert(proxy_url.clone(), http.clone());
                        http
                    }
                };
                Ok(Route {
                    http,
                    proxy: Some(proxy_url.label()),
                    trusted: false,
                })
            }
        }
    }

    /// Before a request through a proxy that resolves names itself: the name is resolved
    /// here and refused when an answer is a blocked address (a failed lookup is left to the
    /// proxy, which may see other DNS).
    async fn check_name_for_proxy(&self, url: &Url, route: &Route) -> Result<(), Error> {
        if route.proxy.is_none() {
            return Ok(());
        }
        let Some(url::Host::Domain(host)) = url.host() else {
            return Ok(());
        };
        match resolve_checked(&self.policy, &self.dns, host).await {
            Err(ResolveFailure::Blocked { host, reason }) => Err(Error::Blocked { host, reason }),
            Ok(_) | Err(ResolveFailure::Lookup { .. }) => Ok(()),
        }
    }

    /// The name resolution the client uses (the browser's egress proxy uses the same).
    pub fn dns(&self) -> &Dns {
        &self.dns
    }

    /// The SSRF policy, shared.
    pub fn policy_arc(&self) -> Arc<Policy> {
        self.policy.clone()
    }

    /// Returns the SSRF policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The headers every request carries (besides Host), as WARC request records show them.
    pub fn request_headers(&self) -> Vec<(String, String)> {
        [
            ("User-Agent", self.config.user_agent.as_str()),
            ("Accept", ACCEPT),
            ("Accept-Language", self.config.accept_language.as_str()),
            ("Accept-Encoding", ACCEPT_ENCODING),
        ]
        .into_iter()
        .map(|(name, value)| (name.to_owned(), value.to_owned()))
        .collect()
    }

    /// Returns the limits in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Parses and checks a URL given by a user, without any network use.
    pub fn parse_url(&self, input: &str) -> Result<Url, Error> {
        Ok(self.policy.parse_url(input)?)
    }

    /// GETs `url`, following redirects by hand, with `max_bytes` as the body limit (the
    /// configured limit when `None`). Any status is returned; only transport and policy
    /// failures are errors.
    pub async fn get(&self, url: &Url, max_bytes: Option<u64>) -> Result<Response, Error> {
        self.get_with(url, max_bytes, &Choice::Configured).await
    }

    /// [`Client::get`] with a job's choice of proxy (`Choice::Direct`, or its own).
    pub async fn get_with(
        &self,
        url: &Url,
        max_bytes: Option<u64>,
        choice: &Choice,
    ) -> Result<Response, Error> {
        self.get_guarded(url, max_bytes, choice, None).await
    }

    /// [`Client::get_with`] asking `guard`, when given, before each redirect is followed (a
    /// crawl checks the target against robots.txt): a refusal ends the fetch with
    /// [`Error::RedirectRefused`] and the target is never requested. The guard's time counts
    /// against `http.timeout_secs`.
    pub async fn get_guarded(
        &self,
        url: &Url,
        max_bytes: Option<u64>,
        choice: &Choice,
        guard: Option<&RedirectGuard>,
    ) -> Result<Response, Error> {
        let limit = max_bytes.unwrap_or(self.config.max_bytes);
        self.within_total_timeout(self.get_inner(url, limit, choice, guard))
            .await
    }

    /// POSTs `body` to `url` with `headers` added to the client's defaults (a header given here
    /// replaces a default of the same name, e.g. `user-agent`).
    ///
    /// The URL and every address it resolves to go through the same SSRF guard as [`Client::get`].
    /// Redirects are not followed: a 3xx comes back as a response, since replaying a body to a
    /// new destination is the caller's decision. The response body is read up to
    /// [`POST_RESPONSE_MAX_BYTES`] (beyond that the result is [`Error::TooLarge`]), and the whole
    /// exchange is bounded by `http.timeout_secs`. Any status is returned; only transport and
    /// policy failures are errors.
    ///
    /// Headers are checked before any network use: an invalid name or value, or one of the
    /// headers the client owns (`host`, `content-length`, `transfer-encoding`, `connection`),
    /// is [`Error::InvalidHeader`].
    pub async fn post(
        &self,
        url: &Url,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Response, Error> {
        self.policy.check_url(url)?;
        let headers = request_headers(headers)?;
        self.within_total_timeout(self.post_inner(url, headers, body))
            .await
    }

    /// Runs `request` under the configured total time limit.
    async fn within_total_timeout(
        &self,
        request: impl Future<Output = Result<Response, Error>>,
    ) -> Result<Response, Error> {
        let total = Duration::from_secs(self.config.timeout_secs);
        match tokio::time::timeout(total, request).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout {
                phase: "total",
                seconds: self.config.timeout_secs,
            }),
        }
    }

    async fn get_inner(
        &self,
        url: &Url,
        limit: u64,
        choice: &Choice,
        guard: Option<&RedirectGuard>,
    ) -> Result<Response, Error> {
        let mut current = url.clone();
        let mut hops: Vec<Url> = Vec::new();
        loop {
            self.policy.check_url(&current)?;
            hops.push(current.clone());
            let route = self.route(&current, choice)?;
            self.check_name_for_proxy(&current, &route).await?;
            let response = self
                .send_checked(route.http.get(current.clone()), &current, &route)
                .await?;
            let status = response.status().as_u16();
            if matches!(status, 301 | 302 | 303 | 307 | 308) {
                let next = redirect_target(&current, response.headers())
                    .ok_or(Error::MissingLocation { status })?;
                if hops.iter().any(|seen| same_resource(seen, &next)) {
                    return Err(Error::RedirectLoop {
                        url: origin_of(&next),
                    });
                }
                if hops.len() > self.config.max_redirects {
                    return Err(Error::TooManyRedirects {
                        limit: self.config.max_redirects,
                    });
                }
                if let Some(guard) = guard
                    && let Err((code, reason)) = guard(next.clone()).await
                {
                    return Err(Error::RedirectRefused {
                        url: next.to_string(),
                        code,
                        reason,
                    });
                }
                current = next;
                continue;
            }
            return self.finish(response, current, hops, limit).await;
        }
    }

    async fn post_inner(
        &self,
        url: &Url,
        headers: HeaderMap,
        body: Bytes,
    ) -> Result<Response, Error> {
        let route = self.route(url, &Choice::Configured)?;
        self.check_name_for_proxy(url, &route).await?;
        let request = route.http.post(url.clone()).headers(headers).body(body);
        let response = self.send_checked(request, url, &route).await?;
        self.finish(
            response,
            url.clone(),
            vec![url.clone()],
            POST_RESPONSE_MAX_BYTES,
        )
        .await
    }

    /// Sends one `GET`, `POST` or `DELETE` with headers and an optional body, without
    /// following redirects: for API clients (trawl's CLI talking to `trawl serve`), through
    /// the same guard and time limit as every request, reading at most `max_bytes`.
    pub async fn call(
        &self,
        method: &str,
        url: &Url,
        headers: &[(&str, &str)],
        body: Option<Bytes>,
        max_bytes: u64,
    ) -> Result<Response, Error> {
        self.policy.check_url(url)?;
        let headers = request_headers(headers)?;
        let method = match method {
            "GET" => reqwest::Method::GET,
            "POST" => reqwest::Method::POST,
            "DELETE" => reqwest::Method::DELETE,
            _ => {
                return Err(Error::InvalidHeader {
                    name: "method".to_owned(),
                    problem: "must be GET, POST or DELETE",
                });
            }
        };
        let route = self.route(url, &Choice::Configured)?;
        let mut request = route.http.request(method, url.clone()).headers(headers);
        if let Some(body) = body {
            request = request.body(body);
        }
        self.within_total_timeout(async {
            self.check_name_for_proxy(url, &route).await?;
            let response = self.send_checked(request, url, &route).await?;
            self.finish(response, url.clone(), vec![url.clone()], max_bytes)
                .await
        })
        .await
    }

    /// Sends one request to `url` (already checked by the caller) and re-checks the address the
    /// response came from.
    async fn send_checked(
        &self,
        request: reqwest::RequestBuilder,
        url: &Url,
        route: &Route,
    ) -> Result<reqwest::Response, Error> {
        let response = request.send().await.map_err(|error| {
            let error = self.classify(url, error);
            match &route.proxy {
                Some(label) => error.through(label),
                None => error,
            }
        })?;
        // Through a configured proxy the address is the proxy's, which the operator chose.
        if let Some(addr) = response.remote_addr()
            && !route.trusted
            && !self.dial_targets.contains(&addr.ip())
            && let Err(reason) = self.policy.check_ip(addr.ip())
        {
            // Defence in depth: the resolver already refused such answers.
            return Err(Error::Blocked {
                host: addr.ip().to_string(),
                reason,
            });
        }
        Ok(response)
    }

    /// Reads the body of the final response within `limit` and assembles the [`Response`].
    async fn finish(
        &self,
        response: reqwest::Response,
        final_url: Url,
        hops: Vec<Url>,
        limit: u64,
    ) -> Result<Response, Error> {
        let status = response.status().as_u16();
        let remote_addr = response.remote_addr();
        let headers = response.headers().clone();
        let body = self.read_body(response, limit).await?;
        Ok(Response {
            final_url,
            status,
            headers,
            body,
            remote_addr,
            hops,
        })
    }

    async fn read_body(&self, mut response: reqwest::Response, limit: u64) -> Result<Bytes, Error> {
        let encoded = response.headers().contains_key(header::CONTENT_ENCODING);
        if !encoded
            && response
                .content_length()
                .is_some_and(|length| length > limit)
        {
            return Err(Error::TooLarge { limit });
        }
        let url = response.url().clone();
        let mut body = BytesMut::new();
        let started = Instant::now();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    // Counted after decompression: reqwest decodes the stream as it reads.
                    if (body.len() + chunk.len()) as u64 > limit {
                        return Err(Error::TooLarge { limit });
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(error) => {
                    tracing::debug!(
                        elapsed_ms = started.elapsed().as_millis() as u64,
                        "body read failed"
                    );
                    return Err(self.classify(&url, error));
                }
            }
        }
        Ok(body.freeze())
    }

    fn classify(&self, url: &Url, error: reqwest::Error) -> Error {
        let host = url.host_str().unwrap_or_default().to_owned();
        if let Some(failure) = find_source::<ResolveFailure>(&error) {
            return match failure {
                ResolveFailure::Blocked { host, reason } => Error::Blocked {
                    host: host.clone(),
                    reason: *reason,
                },
                ResolveFailure::Lookup { host, message } => Error::Dns {
                    host: host.clone(),
                    message: message.clone(),
                },
            };
        }
        let chain = error_chain(&error);
        if error.is_timeout() {
            let (phase, seconds) = if error.is_connect() {
                ("connect", self.config.connect_timeout_secs)
            } else {
                ("read", self.config.read_timeout_secs)
            };
            return Error::Timeout { phase, seconds };
        }
        let lower = chain.to_ascii_lowercase();
        if lower.contains("message head is too large") || lower.contains("too many headers") {
            return Error::HeadersTooLarge;
        }
        if lower.contains("certificate") || lower.contains("tls") || lower.contains("handshake") {
            return Error::Tls(format!("{host}: {chain}"));
        }
        if error.is_connect() {
            return Error::Connect(format!("{host}: {chain}"));
        }
        Error::Protocol(format!("{host}: {chain}"))
    }
}

/// Checks the caller's request headers and builds them into a map.
fn request_headers(headers: &[(&str, &str)]) -> Result<HeaderMap, Error> {
    let mut map = HeaderMap::with_capacity(headers.len());
    for (name, value) in headers {
        let invalid = |problem| Error::InvalidHeader {
            name: (*name).to_owned(),
            problem,
        };
        let header_name = header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| invalid("not a valid name"))?;
        if CLIENT_OWNED_HEADERS.contains(&header_name) {
            return Err(invalid("set by the client"));
        }
        let header_value =
            HeaderValue::from_str(value).map_err(|_| invalid("not a valid value"))?;
        map.append(header_name, header_value);
    }
    Ok(map)
}

/// Resolves the Location of a redirect against the current URL.
fn redirect_target(current: &Url, headers: &HeaderMap) -> Option<Url> {
    let location = headers.get(header::LOCATION)?.to_str().ok()?.trim();
    if location.is_empty() {
        return None;
    }
    let mut next = current.join(location).ok()?;
    next.set_fragment(None);
    Some(next)
}

/// True when two URLs name the same resource (fragments aside).
fn same_resource(a: &Url, b: &Url) -> bool {
    let mut a = a.clone();
    a.set_fragment(None);
    a == *b
}

/// Returns `scheme://host[:port]`, the most of a URL that goes into messages and logs.
pub fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

fn find_source<'a, T: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        current = error.source();
    }
    None
}

/// Joins an error and its sources, skipping reqwest's own URL-bearing top line.
fn error_chain(error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = std::error::Error::source(error);
    while let Some(source) = current {
        let text = source.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        current = source.source();
    }
    if parts.is_empty() {
        // reqwest's own message names the whole URL; keep its origin only.
        let mut text = error.to_string();
        if let Some(url) = error.url() {
            text = text.replace(url.as_str(), &origin_of(url));
        }
        parts.push(text);
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_locations_resolve_against_the_current_url() {
        let current = Url::parse("http://a.test/x/y").expect("url");
        let mut headers = HeaderMap::new();
        headers.insert(header::LOCATION, HeaderValue::from_static("../z#frag"));
        let next = redirect_target(&current, &headers).expect("target");
        assert_eq!(next.as_str(), "http://a.test/z");
        headers.insert(header::LOCATION, HeaderValue::from_static("  "));
        assert!(redirect_target(&current, &headers).is_none());
    }

    #[test]
    fn default_config_is_valid_and_bounds_are_enforced() {
        assert!(Config::default().validate().is_ok());
        let config = Config {
            max_bytes: 10,
            ..Config::default()
        };
        assert!(config.validate().is_err());
        let config = Config {
            max_redirects: 11,
            ..Config::default()
        };
        assert!(config.validate().is_err());
    }

    #[test]
    fn request_headers_are_checked_before_sending() {
        let map = request_headers(&[("content-type", "application/json"), ("X-Sig", "t=1")])
            .expect("valid headers");
        assert_eq!(map.get("x-sig").and_then(|v| v.to_str().ok()), Some("t=1"));
        for (name, value) in [
            ("bad name", "x"),
            ("x-token", "secret\nbreak"),
            ("Content-Length", "3"),
            ("host", "example.com"),
        ] {
            let error = request_headers(&[(name, value)]).expect_err(name);
            assert!(matches!(error, Error::InvalidHeader { .. }), "{name}");
            assert_eq!(error.code(), ErrorCode::Internal);
            assert!(!error.is_transient());
        }
        // The value may be a secret: the message names the header only.
        let error = request_headers(&[("x-token", "secret\nbreak")]).expect_err("newline");
        assert!(!error.to_string().contains("secret"), "{error}");
    }

    #[test]
    fn only_network_faults_are_transient() {
        assert!(
            Error::Timeout {
                phase: "total",
                seconds: 30
            }
            .is_transient()
        );
        assert!(Error::Connect("refused".into()).is_transient());
        assert!(!Error::TooLarge { limit: 1 }.is_transient());
        assert!(!Error::RedirectLoop { url: "x".into() }.is_transient());
        assert_eq!(Error::HeadersTooLarge.code(), ErrorCode::HeadersTooLarge);
    }
}
