//! How a request goes out: directly, through one of the configured proxies (round-robin or
//! sticky per host, a connection pool each), through the environment's proxy for its scheme
//! (`proxy.trust_env`, unless `NO_PROXY` names the host), or through a job's own proxy
//! (checked like any destination, built on first use). Builds the reqwest clients behind each
//! route, all with the guard's resolver and the configured limits.
//!
//! Not here: proxy configuration and the rotation rule (`web::proxy`), or sending.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use reqwest::header::{self, HeaderMap, HeaderValue};
use url::Url;

use super::{ACCEPT, Client, ClientError, Config, Error};
use crate::web::dns::{Dns, GuardedResolver, ResolveFailure, resolve_checked};
use crate::web::proxy::{self, Choice, ProxyUrl, Rotation};
use crate::web::ssrf::Policy;

/// The client's proxies: the configured ones (a connection pool each) and the ones jobs
/// brought (built on first use, a few kept).
#[derive(Default)]
pub(super) struct Proxies {
    configured: Vec<Proxied>,
    rotation: Rotation,
    /// Requests routed so far, for round-robin.
    counter: AtomicUsize,
    /// The environment's proxies, when trusted and no list is configured.
    environment: Option<FromEnvironment>,
    own: std::sync::Mutex<HashMap<ProxyUrl, reqwest::Client>>,
}

/// `proxy.trust_env`: a proxy per scheme and the `NO_PROXY` rules (hyper-util's matcher, the
/// one reqwest uses for its own environment support; only its yes-or-no is taken here).
struct FromEnvironment {
    /// Each distinct proxy the variables name, a connection pool each.
    proxied: Vec<Proxied>,
    /// Which of them serves `http://` URLs.
    http: Option<usize>,
    /// Which of them serves `https://` URLs.
    https: Option<usize>,
    matcher: hyper_util::client::proxy::matcher::Matcher,
}

/// Jobs' own proxies kept built at once; beyond, the oldest set is dropped.
const OWN_PROXIES_KEPT: usize = 16;

struct Proxied {
    label: String,
    http: reqwest::Client,
}

/// How one request goes out.
pub(super) struct Route {
    pub(super) http: reqwest::Client,
    /// The proxy's label, when through one.
    pub(super) proxy: Option<String>,
    /// A configured proxy: its address is not checked after connecting.
    pub(super) trusted: bool,
    /// The policy the connected address is checked under, when not the client's (the
    /// trusted origin's).
    pub(super) policy: Option<Arc<Policy>>,
    /// A proxy that resolves names, whose names are looked up here first (not the
    /// environment's: `proxy.trust_env` lets the proxy resolve them).
    pub(super) resolve_first: bool,
}

/// Builds a reqwest client with the guard's resolver and limits, through `proxy` if given
/// (`trusted`: a configured proxy, whose own host name is resolved without the policy).
pub(super) fn build_http(
    config: &Config,
    policy: &Arc<Policy>,
    dns: &Dns,
    proxy: Option<(&ProxyUrl, bool)>,
) -> Result<reqwest::Client, ClientError> {
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
    let accept_language =
        HeaderValue::from_str(&config.accept_language).map_err(|_| ClientError::AcceptLanguage)?;
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
        let proxy = reqwest::Proxy::all(url.expose()).map_err(|error| ClientError::Proxy {
            label: url.label(),
            error,
        })?;
        builder = builder.proxy(proxy);
    }
    builder.build().map_err(ClientError::Build)
}

impl Client {
    /// The same client, sending requests through the configured proxies (unless a request
    /// chooses otherwise): one connection pool per proxy.
    pub fn with_proxies(mut self, proxies: &proxy::Config) -> Result<Self, ClientError> {
        proxies.validate().map_err(ClientError::Proxies)?;
        let proxied = |url: &ProxyUrl| {
            Ok(Proxied {
                label: url.label(),
                http: build_http(&self.config, &self.policy, &self.dns, Some((url, true)))?,
            })
        };
        let configured = proxies
            .urls
            .iter()
            .map(proxied)
            .collect::<Result<Vec<_>, ClientError>>()?;
        let environment = match &proxies.environment {
            found if proxies.trust_env && found.proxies().next().is_some() => {
                // One pool per distinct proxy (ALL_PROXY, or the same value twice, is one).
                let mut proxied_list: Vec<Proxied> = Vec::new();
                let mut index_of = |entry: &Option<(String, ProxyUrl)>| {
                    let Some((_, url)) = entry else {
                        return Ok(None);
                    };
                    let label = url.label();
                    if let Some(at) = proxied_list.iter().position(|p| p.label == label) {
                        return Ok(Some(at));
                    }
                    proxied_list.push(proxied(url)?);
                    Ok::<_, ClientError>(Some(proxied_list.len() - 1))
                };
                let (http, https) = (index_of(&found.http)?, index_of(&found.https)?);
                let mut matcher = hyper_util::client::proxy::matcher::Matcher::builder()
                    .no(found.no_proxy.as_str());
                // The matcher is asked only whether to intercept: any proxy value will do.
                if http.is_some() {
                    matcher = matcher.http("http://proxy.invalid:1");
                }
                if https.is_some() {
                    matcher = matcher.https("http://proxy.invalid:1");
                }
                Some(FromEnvironment {
                    proxied: proxied_list,
                    http,
                    https,
                    matcher: matcher.build(),
                })
            }
            _ => None,
        };
        self.proxies = Arc::new(Proxies {
            configured,
            rotation: proxies.rotation,
            environment,
            ..Proxies::default()
        });
        Ok(self)
    }

    /// The proxies' labels (`scheme://host:port`): the configured ones in order, else the
    /// environment's (each once).
    pub fn proxy_labels(&self) -> Vec<String> {
        let environment = self
            .proxies
            .environment
            .iter()
            .flat_map(|found| found.proxied.iter());
        self.proxies
            .configured
            .iter()
            .chain(environment)
            .map(|proxied| proxied.label.clone())
            .collect()
    }

    /// The environment's proxy for `url`, unless `NO_PROXY` names its host.
    fn environment_route(&self, url: &Url) -> Option<Route> {
        let found = self.proxies.environment.as_ref()?;
        let index = match url.scheme() {
            "https" => found.https,
            _ => found.http,
        }?;
        let proxied = found.proxied.get(index)?;
        let host = url.host_str()?;
        let authority = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_owned(),
        };
        let uri = http::Uri::builder()
            .scheme(url.scheme())
            .authority(authority)
            .path_and_query("/")
            .build()
            .ok()?;
        found.matcher.intercept(&uri)?;
        Some(Route {
            http: proxied.http.clone(),
            proxy: Some(proxied.label.clone()),
            trusted: true,
            policy: None,
            resolve_first: false,
        })
    }

    /// How a request to `url` goes out under `choice`.
    pub(super) fn route(&self, url: &Url, choice: &Choice) -> Result<Route, Error> {
        let direct = || Route {
            http: self.http.clone(),
            proxy: None,
            trusted: false,
            policy: None,
            resolve_first: false,
        };
        match choice {
            Choice::Direct => Ok(direct()),
            Choice::Configured if self.proxies.configured.is_empty() => {
                Ok(self.environment_route(url).unwrap_or_else(direct))
            }
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
                            policy: None,
                            resolve_first: true,
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
                        .map_err(|error| Error::Proxy(error.to_string()))?;
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
                    policy: None,
                    resolve_first: true,
                })
            }
        }
    }

    /// Before a request through a proxy that resolves names itself: the name is resolved
    /// here and refused when an answer is a blocked address (a failed lookup is left to the
    /// proxy, which may see other DNS). Not for the environment's proxies, trusted to resolve.
    pub(super) async fn check_name_for_proxy(&self, url: &Url, route: &Route) -> Result<(), Error> {
        if !route.resolve_first {
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
}
