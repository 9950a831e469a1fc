//! The proxy a job asks for: none given (the configured ones), `"direct"`, or a proxy URL of
//! its own ([`Choice`]); proxy URLs ([`ProxyUrl`]) that never show their password; and the
//! redacted form of a job's `proxy` option.
//!
//! Not here: the configured proxy list and how a request picks one (`crate::web::proxy`), nor
//! sending requests through them (`crate::web::client`).

use serde::{Deserialize, Serialize};
use url::Url;

/// A proxy URL. Its password never shows: `Debug` and serialisation replace it.
#[derive(Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(transparent)]
pub struct ProxyUrl(String);

/// The schemes a proxy URL may have.
pub const SCHEMES: [&str; 4] = ["http", "https", "socks5", "socks5h"];

impl ProxyUrl {
    /// Wraps a URL (checked by [`ProxyUrl::parse`]).
    pub fn new(url: impl Into<String>) -> ProxyUrl {
        ProxyUrl(url.into())
    }

    /// The URL, credentials included, for the one place that connects with it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Parses and checks the URL: a known scheme, a host and a port, no path or query.
    pub fn parse(&self) -> Result<Url, String> {
        let url = Url::parse(&self.0).map_err(|error| format!("not a URL ({error})"))?;
        if !SCHEMES.contains(&url.scheme()) {
            return Err(format!(
                "scheme {:?} is not a proxy scheme (http, https, socks5, socks5h)",
                url.scheme()
            ));
        }
        if url.host_str().is_none_or(str::is_empty) {
            return Err("a proxy URL needs a host".to_owned());
        }
        if url.port_or_known_default().is_none() {
            return Err("a socks proxy URL needs a port".to_owned());
        }
        if url.path() != "/" && !url.path().is_empty() || url.query().is_some() {
            return Err("a proxy URL has no path or query".to_owned());
        }
        Ok(url)
    }

    /// `scheme://host:port`, without credentials: how logs and errors name the proxy.
    pub fn label(&self) -> String {
        match self.parse() {
            Ok(url) => format!(
                "{}://{}:{}",
                url.scheme(),
                url.host_str().unwrap_or_default(),
                url.port_or_known_default().unwrap_or_default()
            ),
            Err(_) => "(invalid proxy URL)".to_owned(),
        }
    }

    /// The URL with its password replaced, for display.
    pub fn redacted(&self) -> String {
        match Url::parse(&self.0) {
            Ok(mut url) if url.password().is_some() => {
                let _ = url.set_password(Some("[redacted]"));
                url.to_string()
            }
            Ok(url) => url.to_string(),
            Err(_) => "[redacted]".to_owned(),
        }
    }
}

impl std::fmt::Debug for ProxyUrl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl Serialize for ProxyUrl {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.redacted())
    }
}

/// How one request goes out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Choice {
    /// Through the configured proxies, if any (the default).
    #[default]
    Configured,
    /// Straight to the site, whatever is configured.
    Direct,
    /// Through this proxy (a job's own).
    Via(ProxyUrl),
}

impl Choice {
    /// A job's `proxy` option: none, `"direct"`, or a proxy URL.
    pub fn from_option(option: Option<&str>) -> Result<Choice, String> {
        match option {
            None => Ok(Choice::Configured),
            Some("direct") => Ok(Choice::Direct),
            Some(url) => {
                let url = ProxyUrl::new(url);
                url.parse()
                    .map_err(|error| format!("proxy: {error}; give \"direct\" or a proxy URL"))?;
                Ok(Choice::Via(url))
            }
        }
    }
}

/// Redacts the password of a job's `proxy` option for storage and display.
pub fn redact_option(option: &str) -> String {
    if option == "direct" {
        option.to_owned()
    } else {
        ProxyUrl::new(option).redacted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_chooses_direct_a_proxy_of_its_own_or_the_configured_ones() {
        assert_eq!(Choice::from_option(None), Ok(Choice::Configured));
        assert_eq!(Choice::from_option(Some("direct")), Ok(Choice::Direct));
        assert_eq!(
            Choice::from_option(Some("socks5://p:1080")),
            Ok(Choice::Via(ProxyUrl::new("socks5://p:1080")))
        );
        let error = Choice::from_option(Some("nope")).unwrap_err();
        assert!(error.contains("\"direct\""), "{error}");
        assert_eq!(redact_option("direct"), "direct");
        assert!(!redact_option("http://u:pw@p:1/").contains("pw"));
    }
}
