//! The credentials a browse job or session carries: cookies, extra request headers and
//! localStorage entries, with their checks. Secrets: `Debug` shows only counts, and a job read
//! back shows them redacted (`Job::redacted_json`).
//!
//! Not here: applying them to a browser context (`crate::browse`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Credentials a job or session browses with: cookies, extra request headers and
/// localStorage entries. Secrets: never logged (`Debug` shows only counts), never exported.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Credentials {
    /// Cookies set before the first navigation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cookies: Vec<CookieSpec>,
    /// Headers added to every request of the context.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub headers: HashMap<String, String>,
    /// localStorage entries per origin (`https://example.com` → key → value), written before
    /// the first navigation to that origin.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub local_storage: HashMap<String, HashMap<String, String>>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials {{ {} cookies, {} headers, {} local_storage origins (redacted) }}",
            self.cookies.len(),
            self.headers.len(),
            self.local_storage.len()
        )
    }
}

impl Credentials {
    /// True when there is nothing to set.
    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty() && self.headers.is_empty() && self.local_storage.is_empty()
    }

    /// Checks names and values (header names, cookie domains or URLs, origins).
    pub fn validate(&self) -> Result<(), String> {
        for cookie in &self.cookies {
            if cookie.name.is_empty() {
                return Err("a cookie needs a name".to_owned());
            }
            if cookie.url.is_none() && cookie.domain.is_none() {
                return Err(format!("cookie {:?} needs a url or a domain", cookie.name));
            }
        }
        for name in self.headers.keys() {
            if name.is_empty()
                || !name
                    .bytes()
                    .all(|byte| byte.is_ascii_alphanumeric() || b"-_".contains(&byte))
            {
                return Err(format!("{name:?} is not a valid header name"));
            }
        }
        for origin in self.local_storage.keys() {
            match url::Url::parse(origin) {
                Ok(url) if matches!(url.scheme(), "http" | "https") => {}
                _ => {
                    return Err(format!(
                        "local_storage key {origin:?} is not an http(s) origin"
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One cookie.
#[derive(Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CookieSpec {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// The URL it belongs to (sets domain, path and secure), or use `domain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Its domain (`.example.com` for every subdomain).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
    /// Its path (`/` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Sent over https only.
    #[serde(default)]
    pub secure: bool,
    /// Hidden from scripts.
    #[serde(default)]
    pub http_only: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_show_their_values_in_debug() {
        let credentials = Credentials {
            cookies: vec![CookieSpec {
                name: "session".to_owned(),
                value: "s3cret-value".to_owned(),
                url: Some("https://example.com/".to_owned()),
                domain: None,
                path: None,
                secure: true,
                http_only: true,
            }],
            headers: HashMap::from([("authorization".to_owned(), "Bearer t0ken".to_owned())]),
            local_storage: HashMap::new(),
        };
        let shown = format!("{credentials:?}");
        assert!(!shown.contains("s3cret"));
        assert!(!shown.contains("t0ken"));
        assert!(shown.contains("1 cookies"));
        assert_eq!(credentials.validate(), Ok(()));
    }

    #[test]
    fn bad_credentials_are_named() {
        let credentials = Credentials {
            headers: HashMap::from([("bad header".to_owned(), "x".to_owned())]),
            ..Credentials::default()
        };
        assert!(credentials.validate().is_err());
        let credentials = Credentials {
            local_storage: HashMap::from([("file:///etc".to_owned(), HashMap::new())]),
            ..Credentials::default()
        };
        assert!(credentials.validate().is_err());
    }
}
