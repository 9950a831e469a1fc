//! The client's `[http]` configuration: identity headers, byte and time limits, and the
//! bounds each value must stay within.
//!
//! Not here: proxies (`web::proxy`) or the SSRF policy (`web::ssrf`), which have their own
//! sections.

use serde::{Deserialize, Serialize};

/// Limits and identity of outgoing requests. Every field is a `trawl.toml` key under `[http]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// User-Agent sent with every request (Chrome-like by default: many sites serve bots less).
    pub user_agent: String,
    /// Accept-Language sent with every request.
    pub accept_language: String,
    /// Largest decoded body kept, in bytes (after gzip/br/deflate/zstd decompression); other
    /// bodies over it end `too_large`. An HTML page over it is reduced as it streams (scripts,
    /// styles, SVG and comments dropped: `max_bytes` counts what is kept) and, when still over,
    /// cut there with `truncated: true` and a warning. Bounded to 1,000..=50,000,000.
    pub max_bytes: u64,
    /// Hard cap on the decoded bytes read of an HTML page being reduced (against compression
    /// bombs and endless pages): past it the page ends `too_large`. At least `max_bytes`, at
    /// most 200,000,000.
    pub max_decoded_bytes: u64,
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
    /// Accept a user name or password in a URL (`https://user:pass@host/`), which is then sent
    /// as Basic auth; refused (`invalid_url`) by default.
    pub allow_url_credentials: bool,
    /// Headers sent with every page request (fetches, robots.txt, sitemaps; never to search
    /// or fallback providers, webhooks or the browser), under a job's own `headers`: routing
    /// metadata, a service token. Values are secrets (`trawl config` shows names only); the
    /// names trawl sets are refused, and a redirect to another origin keeps only Accept,
    /// Accept-Language and User-Agent.
    #[serde(serialize_with = "crate::job::headers::serialize_redacted")]
    pub headers: crate::job::CustomHeaders,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            user_agent: "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) \
                         Chrome/131.0.0.0 Safari/537.36"
                .to_owned(),
            accept_language: "en-US,en;q=0.9".to_owned(),
            max_bytes: 750_000,
            max_decoded_bytes: 20_000_000,
            timeout_secs: 30,
            connect_timeout_secs: 10,
            read_timeout_secs: 10,
            max_redirects: 3,
            max_headers: 256,
            allow_url_credentials: false,
            headers: Default::default(),
        }
    }
}

/// The smallest and largest `max_bytes` a configuration may set.
pub const MAX_BYTES_RANGE: std::ops::RangeInclusive<u64> = 1_000..=50_000_000;

/// The largest `max_decoded_bytes` a configuration may set.
pub const MAX_DECODED_BYTES: u64 = 200_000_000;

impl Config {
    /// Checks the values against their fixed bounds.
    pub fn validate(&self) -> Result<(), String> {
        self.headers
            .check()
            .map_err(|message| format!("http.headers: {message}"))?;
        if !MAX_BYTES_RANGE.contains(&self.max_bytes) {
            return Err(format!(
                "http.max_bytes = {} is outside {}..={}",
                self.max_bytes,
                MAX_BYTES_RANGE.start(),
                MAX_BYTES_RANGE.end()
            ));
        }
        if self.max_decoded_bytes < self.max_bytes || self.max_decoded_bytes > MAX_DECODED_BYTES {
            return Err(format!(
                "http.max_decoded_bytes = {} is outside http.max_bytes ({})..={MAX_DECODED_BYTES}",
                self.max_decoded_bytes, self.max_bytes
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_config_is_valid_and_bounds_are_enforced() {
        assert!(Config::default().validate().is_ok());
        let config = Config {
            max_bytes: 10,
            ..Config::default()
        };
        assert!(config.validate().is_err());
        let config = Config {
            max_decoded_bytes: 700_000,
            ..Config::default()
        };
        assert!(config.validate().is_err(), "under max_bytes");
        let config = Config {
            max_redirects: 11,
            ..Config::default()
        };
        assert!(config.validate().is_err());
    }
}
