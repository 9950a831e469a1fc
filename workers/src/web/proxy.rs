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
}

impl Config {
    /// Checks every URL.
    pub fn validate(&self) -> Result<(), String> {
        for (number, url) in self.urls.iter().enumerate() {
            url.parse()
                .map_err(|error| format!("proxy.urls[{number}]: {error}"))?;
        }
        Ok(())
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
            rotation: Rotation::Host,
        };
        let error = config.validate().unwrap_err();
        assert!(error.starts_with("proxy.urls[1]"), "{error}");
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
