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
//! Not here: which origins are trusted (the search configuration decides, `trawl::web_search`).

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

impl Client {
    /// The same client, with the origin of `base` (its scheme, host and port) reachable even
    /// when it is, or resolves to, a private or loopback address. Requests to other origins
    /// are guarded as before. `base` must be an http(s) URL with a host.
    pub fn with_trusted_origin(&self, base: &Url) -> Result<Client, ClientError> {
        let origin = base.origin();
        let host = base
            .host_str()
            .filter(|_| origin.is_tuple() && matches!(base.scheme(), "http" | "https"))
            .ok_or_else(|| ClientError::Config(format!("{base} is not an http(s) origin")))?;
        let mut policy = Policy {
            allow_private_network: true,
            allow_hosts: Vec::new(),
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
