//! One origin the operator trusts: a search provider the configuration names (a SearxNG on
//! `http://searxng:8080`, a fixture on loopback) may sit on a private address, so requests to
//! exactly that origin (scheme, host and port) are checked under the policy with private
//! networks allowed, through a connection pool of their own whose resolver knows only that
//! host. Every other URL, a redirect from the provider included, goes through the guard as
//! usual: another port or host on a private address is still refused.
//!
//! What stays refused at the trusted origin too: cloud metadata addresses and names, the
//! block list, and the address classes `allow_private_network` never lifts (reserved,
//! multicast, documentation, …).
//!
//! A self-hosted service (a fallback extraction provider) is trusted the same way, and more
//! narrowly: its origin is reachable only at a private or loopback address
//! (`with_private_origin`).
//!
//! Not here: which origins are trusted (the search configuration decides, `trawl::web_search`;
//! the fetch configuration, `fallback`).

use std::sync::Arc;

use reqwest::header::HeaderMap;
use url::Url;

use super::route::{Route, build_http};
use super::{Client, ClientError, Error, Response};
use crate::web::ssrf::Policy;

/// The trusted origin and its own connection pool.
pub(super) struct TrustedOrigin {
    origin: url::Origin,
    http: reqwest::Client,
    policy: Arc<Policy>,
}

/// Parses a service's base URL (a search or extraction provider the operator names): http(s), a host, no credentials, query or fragment; the path
/// ends with `/` so relative paths join below it.
pub fn base_url(input: &str) -> Result<Url, String> {
    let mut url = Url::parse(input).map_err(|error| error.to_string())?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err("not an http(s) URL with a host".to_owned());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("holds credentials".to_owned());
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err("holds a query or fragment".to_owned());
    }
    if !url.path().ends_with('/') {
        let path = format!("{}/", url.path());
        url.set_path(&path);
    }
    Ok(url)
}

impl Client {
    /// The same client, with the origin of `base` (its scheme, host and port) reachable even
    /// when it is, or resolves to, a private or loopback address. Requests to other origins
    /// are guarded as before. `base` must be an http(s) URL with a host.
    pub fn with_trusted_origin(&self, base: &Url) -> Result<Client, ClientError> {
        self.trusting(base, false)
    }

    /// [`Client::with_trusted_origin`] for a service the operator runs: the origin of `base`
    /// is reachable only at a private or loopback address (a public answer, or a name that
    /// resolves to one, is refused with [`BlockReason::Public`] before any byte is sent), so
    /// what is sent there (an API key, the URL asked about) stays on the operator's network.
    ///
    /// [`BlockReason::Public`]: crate::web::ssrf::BlockReason::Public
    pub fn with_private_origin(&self, base: &Url) -> Result<Client, ClientError> {
        self.trusting(base, true)
    }

    fn trusting(&self, base: &Url, private_only: bool) -> Result<Client, ClientError> {
        let origin = base.origin();
        let host = base
            .host_str()
            .filter(|_| origin.is_tuple() && matches!(base.scheme(), "http" | "https"))
            .ok_or_else(|| ClientError::Config(format!("{base} is not an http(s) origin")))?;
        let mut policy = Policy {
            allow_private_network: true,
            allow_hosts: Vec::new(),
            private_only,
            ..self.policy().clone()
        };
        // A provider named under `.internal` is the operator's choice like its address.
        if host.ends_with(".internal") || host == "internal" {
            policy.internal_hosts.push(host.to_owned());
        }
        let policy = Arc::new(policy);
        let http = build_http(self.config(), &policy, self.dns(), None)?;
        let mut client = self.clone();
        client.trusted = Some(Arc::new(TrustedOrigin {
            origin,
            http,
            policy,
        }));
        Ok(client)
    }

    /// The trusted origin's route and policy when `url` is at that origin.
    pub(super) fn trusted_route(&self, url: &Url) -> Option<(Route, Arc<Policy>)> {
        let trusted = self.trusted.as_ref()?;
        (url.origin() == trusted.origin).then(|| {
            (
                Route {
                    http: trusted.http.clone(),
                    proxy: None,
                    trusted: false,
                    policy: Some(trusted.policy.clone()),
                    resolve_first: false,
                },
                trusted.policy.clone(),
            )
        })
    }

    /// GETs `url` like [`Client::get`], sending `headers` (cookies, a referer) with every hop
    /// at the first URL's origin and with none elsewhere (a redirect to another origin gets
    /// only the client's defaults).
    pub async fn get_with_headers(
        &self,
        url: &Url,
        headers: &[(&str, &str)],
        max_bytes: Option<u64>,
    ) -> Result<Response, Error> {
        let headers: HeaderMap = super::request_headers(headers)?;
        let limit = max_bytes.unwrap_or(self.config().max_bytes);
        self.within_total_timeout(self.get_inner(
            url,
            limit,
            &crate::web::proxy::Choice::Configured,
            None,
            &headers,
        ))
        .await
    }
}
