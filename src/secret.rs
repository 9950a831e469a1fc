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
