//! The SSRF-guarded HTTP client: every hop's URL is checked before the request, every DNS
//! answer is checked inside the resolver (so the address connected to is the address checked),
//! redirects are followed by hand (GET) or not at all (POST, for webhooks), and bytes, time and
//! headers are bounded. Requests go through the configured outbound proxies when there are
//! some (`web::proxy` says what the guard still checks then).
//!
//! This file holds [`Client`]: building it, its requests (`get`, `post`, `call`) and the
//! address re-check after connecting. Around it: `config` (the `[http]` limits), `error` (what
//! went wrong, and how reqwest's failures map to it), `route` (direct or through which proxy),
//! `redirect` (following redirects by hand) and `response` (reading the body within limits).
//!
//! Not here: what to do with the body (`web::extract`, `fetch`), nor retries (the runner and
//! the webhook sender decide those from `Error::is_transient`).

mod config;
mod error;
mod origin;
mod redirect;
mod reduce;
mod response;
mod route;

use std::collections::HashSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{self, HeaderMap, HeaderValue};
use url::Url;

pub use config::{Config, MAX_BYTES_RANGE, MAX_DECODED_BYTES};
pub use error::{ClientError, Error};
pub use origin::base_url;
pub use redirect::{RedirectGuard, origin_of};
use response::Over;
pub use response::{Reduced, Response};
use route::{Proxies, Route, build_http};

use super::dns::Dns;
use super::proxy::Choice;
use super::ssrf::{Policy, UrlError};
use crate::job::CustomHeaders;

/// Largest response body [`Client::post`] reads (64 KiB): the answer to a POST is an
/// acknowledgement, not content.
pub const POST_RESPONSE_MAX_BYTES: u64 = 64 * 1024;

/// Most bytes of an error response's body (status 400 and above) a GET reads (64 KiB):
/// enough for a block page or an error's detail; the rest is not read, so a huge error body
/// neither hides the status behind `too_large` nor costs its transfer.
pub const ERROR_BODY_MAX_BYTES: u64 = 64 * 1024;

/// Request headers [`Client::post`] refuses from its caller: they decide framing and routing,
/// which belong to the client.
const CLIENT_OWNED_HEADERS: [header::HeaderName; 4] = [
    header::HOST,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
];

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
    /// The one origin reachable on a private address, when the caller named one
    /// (`with_trusted_origin`).
    trusted: Option<Arc<origin::TrustedOrigin>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("policy", &self.policy)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Builds a client with the system resolver.
    pub fn new(config: Config, policy: Policy) -> Result<Self, ClientError> {
        Self::with_dns(config, policy, Dns::System)
    }

    /// Builds a client with the given name resolution (a static map in tests).
    pub fn with_dns(config: Config, policy: Policy, dns: Dns) -> Result<Self, ClientError> {
        config.validate().map_err(ClientError::Config)?;
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
            trusted: None,
        })
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

    /// Parses and checks a URL given by a user, without any network use: the policy's checks
    /// ([`Policy::parse_url`]), and no user name or password unless
    /// `http.allow_url_credentials`.
    pub fn parse_url(&self, input: &str) -> Result<Url, Error> {
        let url = self.policy.parse_url(input)?;
        if !self.config.allow_url_credentials
            && (!url.username().is_empty() || url.password().is_some())
        {
            return Err(Error::Url(UrlError::Credentials));
        }
        Ok(url)
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
        self.get_guarded(url, max_bytes, choice, None, &CustomHeaders::default())
            .await
    }

    /// [`Client::get_with`] asking `guard`, when given, before each redirect is followed (a
    /// crawl checks the target against robots.txt): a refusal ends the fetch with
    /// [`Error::RedirectRefused`] and the target is never requested. The guard's time counts
    /// against `http.timeout_secs`. `headers` (a job's) go over the configured
    /// `http.headers`; both are sent to the URL's origin, and only
    /// [`SAFE_ACROSS_ORIGINS`](crate::job::headers::SAFE_ACROSS_ORIGINS) after a redirect to
    /// another.
    pub async fn get_guarded(
        &self,
        url: &Url,
        max_bytes: Option<u64>,
        choice: &Choice,
        guard: Option<&RedirectGuard>,
        headers: &CustomHeaders,
    ) -> Result<Response, Error> {
        let limit = max_bytes.unwrap_or(self.config.max_bytes);
        let headers = if headers.is_empty() {
            self.config.headers.header_map()
        } else {
            self.config.headers.merged(headers).header_map()
        };
        self.within_total_timeout(self.get_inner(url, limit, choice, guard, &headers))
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
            Over::Refuse,
        )
        .await
    }

    /// Sends one `GET`, `POST` or `DELETE` with headers and an optional body, without
    /// following redirects: for API clients (trawl's CLI talking to `trawl serve`), through
    /// the same guard and time limit as every request (the trusted origin, when the client has
    /// one, under its own policy), reading at most `max_bytes`.
    pub async fn call(
        &self,
        method: &str,
        url: &Url,
        headers: &[(&str, &str)],
        body: Option<Bytes>,
        max_bytes: u64,
    ) -> Result<Response, Error> {
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
        // The trusted origin (when the client has one) is checked under its own policy.
        let route = match self.trusted_route(url) {
            Some((route, policy)) => {
                policy.check_url(url)?;
                route
            }
            None => {
                self.policy.check_url(url)?;
                self.route(url, &Choice::Configured)?
            }
        };
        let mut request = route.http.request(method, url.clone()).headers(headers);
        if let Some(body) = body {
            request = request.body(body);
        }
        self.within_total_timeout(async {
            self.check_name_for_proxy(url, &route).await?;
            let response = self.send_checked(request, url, &route).await?;
            self.finish(
                response,
                url.clone(),
                vec![url.clone()],
                max_bytes,
                Over::Refuse,
            )
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
        // Both framings at once is how request smuggling and response splitting start
        // (RFC 9112 §6.3 lets a client refuse it); hyper would silently prefer
        // Transfer-Encoding.
        if response.version() <= reqwest::Version::HTTP_11
            && response.headers().contains_key(header::TRANSFER_ENCODING)
            && response.headers().contains_key(header::CONTENT_LENGTH)
        {
            return Err(Error::Protocol(format!(
                "{}: response has both transfer-encoding and content-length",
                origin_of(url)
            )));
        }
        // Through a configured proxy the address is the proxy's, which the operator chose.
        let policy = route.policy.as_deref().unwrap_or(&self.policy);
        if let Some(addr) = response.remote_addr()
            && !route.trusted
            && !self.dial_targets.contains(&addr.ip())
            && let Err(reason) = policy.check_ip_for(url.host_str().unwrap_or_default(), addr.ip())
        {
            // Defence in depth: the resolver already refused such answers.
            return Err(Error::Blocked {
                host: addr.ip().to_string(),
                reason,
            });
        }
        Ok(response)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::ErrorCode;

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
}
