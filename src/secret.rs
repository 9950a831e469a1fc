//! Secret values of the configuration (API tokens, signing keys, database and Redis URLs):
//! read from a plain string, never shown by `Debug` or serialised back, so `trawl config` and
//! logs print `[redacted]`. At the bottom of the crate: the configuration, the API, webhooks
//! and sessions all hold secrets.
//!
//! Not here: comparing tokens (the API's auth does it in constant time).

use serde::{Deserialize, Serialize};

/// A secret value (a token, a signing key): deserialised from a plain string, never shown by
/// `Debug` or serialised back (so `trawl config` and logs print `[redacted]`).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// Returns the value, for the one place that needs it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The value as a URL fit for messages: its password replaced by `***` and its query
    /// (which may carry one) dropped; `[redacted]` when it does not parse as a URL.
    pub fn redacted_url(&self) -> String {
        let Ok(mut url) = url::Url::parse(&self.0) else {
            return "[redacted]".to_owned();
        };
        if url.password().is_some() && url.set_password(Some("***")).is_err() {
            return "[redacted]".to_owned();
        }
        url.set_query(None);
        url.set_fragment(None);
        url.to_string()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl Serialize for Secret {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_passwords_or_queries() {
        let url = Secret::new("postgres://trawl:s3cret@db.internal:5432/trawl?password=s3cret");
        assert_eq!(
            url.redacted_url(),
            "postgres://trawl:***@db.internal:5432/trawl"
        );
        assert_eq!(
            Secret::new("redis://127.0.0.1:1/").redacted_url(),
            "redis://127.0.0.1:1/"
        );
        assert_eq!(Secret::new("not a url s3cret").redacted_url(), "[redacted]");
    }
}
