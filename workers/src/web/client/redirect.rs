//! Following redirects by hand: each hop's target is resolved against the current URL,
//! checked by the SSRF policy (and by the caller's [`RedirectGuard`]) before it is requested,
//! and counted; a target already visited is a loop.
//!
//! Not here: sending a hop or reading the final body (`Client` and `response`). POSTs never
//! follow redirects.

use std::sync::Arc;

use reqwest::header::{self, HeaderMap};
use url::Url;

use super::response::Over;
use super::{Client, Error, Response};
use crate::job::ErrorCode;
use crate::web::proxy::Choice;

/// Asked before a redirect is followed, with its target: `Err((code, reason))` refuses it.
pub type RedirectGuard = Arc<
    dyn Fn(Url) -> futures_util::future::BoxFuture<'static, Result<(), (ErrorCode, String)>>
        + Send
        + Sync,
>;

impl Client {
    /// GETs `url`, following up to `max_redirects` redirects by hand: each target is checked
    /// by the policy (and by `guard`, when given) before it is requested, and a target seen
    /// before is a loop.
    pub(super) async fn get_inner(
        &self,
        url: &Url,
        limit: u64,
        choice: &Choice,
        guard: Option<&RedirectGuard>,
        headers: &HeaderMap,
    ) -> Result<Response, Error> {
        let mut current = url.clone();
        let mut hops: Vec<Url> = Vec::new();
        loop {
            // The trusted origin (when the client has one) is checked under its own policy;
            // every other hop, a redirect from it included, under the client's.
            let route = match self.trusted_route(&current) {
                Some((route, policy)) => {
                    policy.check_url(&current)?;
                    route
                }
                None => {
                    self.policy.check_url(&current)?;
                    self.route(&current, choice)?
                }
            };
            hops.push(current.clone());
            self.check_name_for_proxy(&current, &route).await?;
            let mut request = route.http.get(current.clone());
            // The caller's headers go to the first URL's origin; to another, only those that
            // identify the client (Accept, Accept-Language, User-Agent).
            if !headers.is_empty() {
                if current.origin() == url.origin() {
                    request = request.headers(headers.clone());
                } else {
                    request = request.headers(crate::job::headers::across_origins(headers));
                }
            }
            let response = self.send_checked(request, &current, &route).await?;
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
            // Pages are kept past the limit, reduced, up to the hard cap on bytes read.
            let over = Over::Reduce {
                cap: self.config.max_decoded_bytes.max(limit),
            };
            return self.finish(response, current, hops, limit, over).await;
        }
    }
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

#[cfg(test)]
mod tests {
    use reqwest::header::HeaderValue;

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
}
