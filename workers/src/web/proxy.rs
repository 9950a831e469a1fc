//! Outbound proxies: the configured list (`[proxy]`: http, https, socks5 and socks5h URLs,
//! credentials allowed), how a request picks one (rotation per request, or sticky per host so a
//! site always sees the same exit). A job's own choice (`"direct"`, or a proxy URL of its own)
//! and proxy URLs themselves are part of the job contract (`crate::job`) and re-exported here.
//! The guarded client builds one connection pool per proxy and asks here which to use.
//!
//! What the SSRF guard still does through a proxy: the URL's host is checked (IP literals,
//! blocked names, `localhost`), and the name is resolved here first and refused when any answer
//! is a blocked address (a failed lookup is left to the proxy, which may see other DNS). What
//! it cannot do: see the address the proxy resolves and connects to (http and socks5h proxies
//! resolve names themselves), so a name answered differently at the proxy, or re-bound between
//! the two lookups, is not caught. socks5 (without h) resolves here, through the guard, and
//! sends the checked address. A job's own proxy is itself a destination: its address goes
//! through the guard like any other (a configured proxy is trusted, wherever it is).
//!
//! With `proxy.trust_env` the environment's proxies are used instead (`HTTP_PROXY`,
//! `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`, upper or lower case, as curl reads them; read once
//! at start by the configuration, `Environment`): a request goes through the one for its
//! scheme unless `NO_PROXY` names its host, and the proxy resolves the name (no lookup here
//! first, so a fake-IP or split-horizon proxy stack sees names only); the host-name checks
//! (IP literals, blocked names, `localhost`) still apply, and a `NO_PROXY` host is reached
//! directly under the whole guard.
//!
//! Not here: sending requests (`client`), the browser's egress proxy (`browse::egress`).

use serde::{Deserialize, Serialize};
use sha2::Digest as _;

pub use crate::job::{Choice, ProxyUrl, SCHEMES, redact_option};

/// The proxies every request goes through unless its job says otherwise. Every field is a
/// `trawl.toml` key under `[proxy]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Proxy URLs: `http://[user:pass@]host:port`, `https://…`, `socks5://…` (names resolved
    /// here) or `socks5h://…` (names resolved by the proxy). Empty: no proxy.
    pub urls: Vec<ProxyUrl>,
    /// How a request picks one of them.
    pub rotation: Rotation,
    /// Use the environment's proxies (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY`)
    /// and let them resolve names; not together with `urls`.
    pub trust_env: bool,
    /// The proxy environment, read at start when `trust_env` is set (never serialised).
    #[serde(skip)]
    pub environment: Environment,
}

impl Config {
    /// Checks every URL, the environment's too when it is trusted.
    pub fn validate(&self) -> Result<(), String> {
        for (number, url) in self.urls.iter().enumerate() {
            url.parse()
                .map_err(|error| format!("proxy.urls[{number}]: {error}"))?;
        }
        if self.trust_env {
            if !self.urls.is_empty() {
                return Err("proxy.trust_env and proxy.urls are both set: use the \
                            environment's proxies or the listed ones, not both"
                    .to_owned());
            }
            for (variable, url) in self.environment.proxies() {
                url.parse().map_err(|error| {
                    format!("proxy.trust_env: {variable} = {}: {error}", url.redacted())
                })?;
            }
        }
        Ok(())
    }
}

/// The environment's proxy settings, as curl reads them: the first set (non-empty) of each
/// pair of names, upper case first; `ALL_PROXY` stands in for a missing `HTTP_PROXY` or
/// `HTTPS_PROXY`; a value without a scheme is an `http://` proxy. `HTTP_PROXY` in upper case
/// is ignored when `REQUEST_METHOD` is set (under CGI a client's `Proxy:` header arrives as
/// `HTTP_PROXY`: "httpoxy").
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Environment {
    /// For `http://` URLs: the variable it came from and the proxy.
    pub http: Option<(String, ProxyUrl)>,
    /// For `https://` URLs: the variable it came from and the proxy.
    pub https: Option<(String, ProxyUrl)>,
    /// `NO_PROXY`: hosts, domains (and their subdomains), IP addresses and networks reached
    /// directly; `*` for every host.
    pub no_proxy: String,
}

impl Environment {
    /// Reads the settings through `lookup` (a variable's value, if set).
    pub fn read(lookup: impl Fn(&str) -> Option<String>) -> Environment {
        let cgi = lookup("REQUEST_METHOD").is_some();
        let first = |names: &[&str]| {
            names.iter().find_map(|name| {
                let value = lookup(name)?;
                let value = value.trim();
                (!value.is_empty()).then(|| {
                    let url = if value.contains("://") {
                        value.to_owned()
                    } else {
                        format!("http://{value}")
                    };
                    ((*name).to_owned(), ProxyUrl::new(url))
                })
            })
        };
        let all = first(&["ALL_PROXY", "all_proxy"]);
        let http = if cgi {
            first(&["http_proxy"])
        } else {
            first(&["HTTP_PROXY", "http_proxy"])
        };
        Environment {
            http: http.or_else(|| all.clone()),
            https: first(&["HTTPS_PROXY", "https_proxy"]).or(all),
            no_proxy: ["NO_PROXY", "no_proxy"]
                .iter()
                .find_map(|name| lookup(name).filter(|value| !value.trim().is_empty()))
                .unwrap_or_default(),
        }
    }

    /// The proxies set, with the variable each came from.
    pub fn proxies(&self) -> impl Iterator<Item = (&str, &ProxyUrl)> {
        [&self.http, &self.https]
            .into_iter()
            .flatten()
            .map(|(variable, url)| (variable.as_str(), url))
    }
}

/// How a request picks a proxy from the list.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rotation {
    /// The same proxy for every request to one host (by a hash of the host name, so every
    /// worker picks the same one): a site sees one exit address, and its cookies and rate
    /// limits stay coherent.
    #[default]
    Host,
    /// The next proxy for each request, round-robin.
    Request,
}

/// Which configured proxy serves a request to `host` (`counter`: a running count of requests,
/// for round-robin). `None` when the list is empty.
pub fn pick(rotation: Rotation, count: usize, host: &str, counter: usize) -> Option<usize> {
    if count == 0 {
        return None;
    }
    Some(match rotation {
        Rotation::Request => counter % count,
        Rotation::Host => {
            let digest = sha2::Sha256::digest(host.to_ascii_lowercase().as_bytes());
            let mut first = [0_u8; 8];
            first.copy_from_slice(&digest[..8]);
            (u64::from_be_bytes(first) % count as u64) as usize
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_urls_are_checked_and_never_show_their_password() {
        let url = ProxyUrl::new("http://ada:s3cret@proxy.internal:3128");
        assert!(url.parse().is_ok());
        assert_eq!(url.label(), "http://proxy.internal:3128");
        assert!(!format!("{url:?}").contains("s3cret"));
        let json = serde_json::to_string(&url).expect("serialises");
        assert!(!json.contains("s3cret") && json.contains("ada"), "{json}");
        assert_eq!(
            ProxyUrl::new("socks5h://10.0.0.7:1080").label(),
            "socks5h://10.0.0.7:1080"
        );
        for bad in [
            "ftp://proxy:21",
            "proxy:3128",
            "socks5://proxy",
            "http://proxy:3128/path",
            "http://proxy:3128/?q=1",
        ] {
            assert!(ProxyUrl::new(bad).parse().is_err(), "{bad} accepted");
        }
        let config = Config {
            urls: vec![ProxyUrl::new("http://a:1"), ProxyUrl::new("gopher://b:2")],
            ..Config::default()
        };
        let error = config.validate().unwrap_err();
        assert!(error.starts_with("proxy.urls[1]"), "{error}");
    }

    fn environment(pairs: &[(&str, &str)]) -> Environment {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        Environment::read(|name| map.get(name).cloned())
    }

    fn proxy_of(entry: &Option<(String, ProxyUrl)>) -> Option<(String, String)> {
        entry
            .as_ref()
            .map(|(variable, url)| (variable.clone(), url.label()))
    }

    #[test]
    fn the_environment_is_read_as_curl_reads_it() {
        let read = environment(&[
            ("HTTP_PROXY", "proxy.internal:3128"),
            ("http_proxy", "http://other:1"),
            ("https_proxy", "http://ada:pw@secure.internal:8443/"),
            ("ALL_PROXY", "socks5h://all.internal:1080"),
            ("no_proxy", "intranet.example, 10.0.0.0/8"),
        ]);
        assert_eq!(
            proxy_of(&read.http),
            Some((
                "HTTP_PROXY".to_owned(),
                "http://proxy.internal:3128".to_owned()
            )),
            "upper case first; no scheme: http"
        );
        assert_eq!(
            proxy_of(&read.https),
            Some((
                "https_proxy".to_owned(),
                "http://secure.internal:8443".to_owned()
            ))
        );
        assert_eq!(read.no_proxy, "intranet.example, 10.0.0.0/8");
        assert!(!format!("{read:?}").contains("pw@"), "{read:?}");
        // ALL_PROXY stands in for what is missing; empty values are unset.
        let read = environment(&[
            ("all_proxy", "socks5h://all.internal:1080"),
            ("HTTPS_PROXY", " "),
        ]);
        assert_eq!(
            proxy_of(&read.https),
            Some((
                "all_proxy".to_owned(),
                "socks5h://all.internal:1080".to_owned()
            ))
        );
        assert_eq!(proxy_of(&read.http), proxy_of(&read.https));
        // Under CGI, HTTP_PROXY may be a client's header: only the lower-case name counts.
        let read = environment(&[("REQUEST_METHOD", "GET"), ("HTTP_PROXY", "evil:1")]);
        assert_eq!(read.http, None);
        assert_eq!(environment(&[]), Environment::default());
    }

    #[test]
    fn a_trusted_environment_is_checked_and_excludes_listed_proxies() {
        let trusting = |pairs: &[(&str, &str)]| Config {
            trust_env: true,
            environment: environment(pairs),
            ..Config::default()
        };
        assert_eq!(trusting(&[]).validate(), Ok(()), "no proxy set: direct");
        assert_eq!(
            trusting(&[("https_proxy", "proxy:3128")]).validate(),
            Ok(())
        );
        let error = trusting(&[("HTTPS_PROXY", "gopher://proxy:70")])
            .validate()
            .unwrap_err();
        assert!(
            error.starts_with("proxy.trust_env: HTTPS_PROXY = gopher://proxy:70"),
            "{error}"
        );
        let error = trusting(&[("ALL_PROXY", "http://ada:s3cret@proxy:1/path")])
            .validate()
            .unwrap_err();
        assert!(
            error.contains("ALL_PROXY") && !error.contains("s3cret"),
            "{error}"
        );
        let both = Config {
            urls: vec![ProxyUrl::new("http://a:1")],
            ..trusting(&[])
        };
        assert!(both.validate().unwrap_err().contains("both set"));
        // Not trusted: the environment is not even looked at.
        let ignored = Config {
            trust_env: false,
            ..trusting(&[("HTTPS_PROXY", "gopher://proxy:70")])
        };
        assert_eq!(ignored.validate(), Ok(()));
    }

    #[test]
    fn rotation_is_sticky_per_host_or_round_robin() {
        assert_eq!(pick(Rotation::Host, 0, "a.example", 0), None);
        let hosts: Vec<String> = (0..50).map(|n| format!("site{n}.example")).collect();
        for host in &hosts {
            let first = pick(Rotation::Host, 3, host, 0);
            for counter in 1..5 {
                assert_eq!(pick(Rotation::Host, 3, host, counter), first);
            }
            assert_eq!(pick(Rotation::Host, 3, &host.to_uppercase(), 9), first);
        }
        let used: std::collections::HashSet<Option<usize>> = hosts
            .iter()
            .map(|host| pick(Rotation::Host, 3, host, 0))
            .collect();
        assert_eq!(used.len(), 3, "hosts spread over every proxy");
        let turns: Vec<Option<usize>> = (0..6)
            .map(|counter| pick(Rotation::Request, 3, "a.example", counter))
            .collect();
        assert_eq!(
            turns,
            vec![Some(0), Some(1), Some(2), Some(0), Some(1), Some(2)]
        );
    }
}
