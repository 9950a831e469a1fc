//! Custom outbound headers: `http.headers` (every page request of a process) and a fetch
//! job's `headers`, for routing metadata or service tokens. Values are secrets: `Debug` and
//! the job records show names only. Names the protocol or trawl owns (Host, framing,
//! Content-Length, Connection, Cookie, Accept-Encoding, proxy authentication, …) are refused
//! by [`CustomHeaders::check`] and dropped whatever happens; on a redirect to another origin
//! only [`SAFE_ACROSS_ORIGINS`] is kept ([`across_origins`]).
//!
//! Part of the contract (a fetch job carries them, `http.headers` configures them); the
//! client sends them (`web::Client::get_guarded`). Not here: the browser's origin-scoped
//! credential headers (`credentials`).

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Most custom headers on one request.
pub const MAX_HEADERS: usize = 32;

/// Most bytes of names and values together.
pub const MAX_HEADER_BYTES: usize = 8 * 1024;

/// Names trawl or the protocol sets: never taken from a caller.
const RESERVED: &[&str] = &[
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "te",
    "trailer",
    "expect",
    "cookie",
    "accept-encoding",
    "proxy-authorization",
    "proxy-authenticate",
    "proxy-connection",
];

/// The custom headers kept on a redirect to another origin: they identify the client, not
/// its rights.
pub const SAFE_ACROSS_ORIGINS: &[&str] = &["accept", "accept-language", "user-agent"];

/// Header name → value, compared case-insensitively: names are lower-cased as the map is
/// built (deserialised or collected). Values are secrets: `Debug` shows names only.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "BTreeMap<String, String>", into = "BTreeMap<String, String>")]
pub struct CustomHeaders(BTreeMap<String, String>);

impl From<BTreeMap<String, String>> for CustomHeaders {
    fn from(map: BTreeMap<String, String>) -> Self {
        map.into_iter().collect()
    }
}

impl From<CustomHeaders> for BTreeMap<String, String> {
    fn from(headers: CustomHeaders) -> Self {
        headers.0
    }
}

impl std::fmt::Debug for CustomHeaders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.names()).finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for CustomHeaders {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(entries: I) -> Self {
        CustomHeaders(
            entries
                .into_iter()
                .map(|(name, value)| (name.into().to_ascii_lowercase(), value.into()))
                .collect(),
        )
    }
}

impl CustomHeaders {
    /// No header.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The names, lower-case.
    pub fn names(&self) -> impl Iterator<Item = &str> + '_ {
        self.0.keys().map(String::as_str)
    }

    /// Names and values as a map, for the browser's origin-scoped credentials.
    pub fn to_map(&self) -> std::collections::HashMap<String, String> {
        self.0.clone().into_iter().collect()
    }

    /// Checks every header before anything is queued: at most [`MAX_HEADERS`] and
    /// [`MAX_HEADER_BYTES`], valid names and values (no CR, LF or NUL), none of the names
    /// trawl sets. The message names the header, never its value.
    pub fn check(&self) -> Result<(), String> {
        if self.0.len() > MAX_HEADERS {
            return Err(format!(
                "at most {MAX_HEADERS} headers, not {}",
                self.0.len()
            ));
        }
        let bytes: usize = self
            .0
            .iter()
            .map(|(name, value)| name.len() + value.len())
            .sum();
        if bytes > MAX_HEADER_BYTES {
            return Err(format!(
                "{bytes} bytes of headers, above {MAX_HEADER_BYTES}"
            ));
        }
        self.0
            .iter()
            .try_for_each(|(name, value)| problem(name, value).map_or(Ok(()), Err))
    }

    /// `self` with `over`'s headers added, replacing those of the same name (a job's over
    /// the configured ones).
    pub fn merged(&self, over: &CustomHeaders) -> CustomHeaders {
        let mut merged = self.0.clone();
        merged.extend(over.0.clone());
        CustomHeaders(merged)
    }

    /// The headers for the request, the ones [`CustomHeaders::check`] would refuse dropped
    /// (and logged by name: the configuration's are only checked at start).
    pub fn header_map(&self) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in &self.0 {
            if let Some(problem) = problem(name, value) {
                tracing::warn!(header = %name, %problem, "custom header dropped");
                continue;
            }
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                let mut value = value;
                value.set_sensitive(true);
                map.insert(name, value);
            }
        }
        map
    }

    /// A short digest of names and values: what a cache key holds instead of the values.
    pub fn digest(&self) -> String {
        let mut hasher = Sha256::new();
        for (name, value) in &self.0 {
            hasher.update(name.as_bytes());
            hasher.update([0]);
            hasher.update(value.as_bytes());
            hasher.update([0]);
        }
        hex::encode(&hasher.finalize()[..8])
    }
}

/// What is wrong with one header, when something is.
fn problem(name: &str, value: &str) -> Option<String> {
    if HeaderName::from_bytes(name.as_bytes()).is_err() {
        return Some(format!("header {name:?}: not a valid header name"));
    }
    if RESERVED.contains(&name) || name.starts_with("sec-") {
        return Some(format!(
            "header {name:?}: set by trawl or the protocol, not by a caller"
        ));
    }
    if HeaderValue::from_str(value).is_err() || value.contains('\0') {
        return Some(format!(
            "header {name:?}: its value holds a character headers cannot carry (CR, LF, NUL or another control)"
        ));
    }
    None
}

/// Keeps, of a request's custom headers, those sent on after a redirect to another origin.
pub fn across_origins(headers: &HeaderMap) -> HeaderMap {
    headers
        .iter()
        .filter(|(name, _)| SAFE_ACROSS_ORIGINS.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect()
}

/// Serialises configured headers for display (`trawl config`): names, values redacted.
pub fn serialize_redacted<S: serde::Serializer>(
    headers: &CustomHeaders,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap as _;
    let mut map = serializer.serialize_map(Some(headers.len()))?;
    for name in headers.names() {
        map.serialize_entry(&name, "[redacted]")?;
    }
    map.end()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(entries: &[(&str, &str)]) -> CustomHeaders {
        entries.iter().copied().collect()
    }

    #[test]
    fn valid_headers_pass_and_values_never_show() {
        let custom = headers(&[("X-Service-Token", "s3cret"), ("User-Agent", "bot/1")]);
        assert_eq!(custom.check(), Ok(()));
        let shown = format!("{custom:?}");
        assert!(
            shown.contains("x-service-token") && !shown.contains("s3cret"),
            "{shown}"
        );
        let map = custom.header_map();
        assert_eq!(map.get("x-service-token").expect("kept"), "s3cret");
        assert!(map.get("x-service-token").expect("kept").is_sensitive());
    }

    #[test]
    fn reserved_and_malformed_headers_are_refused_and_dropped() {
        for (name, value) in [
            ("Host", "evil.test"),
            ("Content-Length", "0"),
            ("Transfer-Encoding", "chunked"),
            ("Cookie", "a=b"),
            ("Proxy-Authorization", "Basic x"),
            ("Sec-Fetch-Site", "none"),
            ("Bad Name", "x"),
            ("X-Split", "a\r\nInjected: yes"),
            ("X-Nul", "a\0b"),
        ] {
            let custom = headers(&[(name, value), ("X-Fine", "ok")]);
            let error = custom.check().expect_err(name);
            assert!(!error.contains(value) || value.len() < 3, "{error}");
            let map = custom.header_map();
            assert_eq!(map.len(), 1, "{name}: only X-Fine is sent");
            assert!(map.contains_key("x-fine"));
        }
        let many: CustomHeaders = (0..=MAX_HEADERS).map(|n| (format!("x-{n}"), "v")).collect();
        assert!(many.check().is_err());
        let big = headers(&[("x-big", &"v".repeat(MAX_HEADER_BYTES))]);
        assert!(big.check().is_err());
    }

    #[test]
    fn a_jobs_headers_replace_the_configured_ones_case_insensitively() {
        let configured = headers(&[("X-Route", "a"), ("Accept-Language", "fr")]);
        let job = headers(&[("x-route", "b")]);
        let merged = configured.merged(&job);
        assert_eq!(merged.len(), 2);
        assert_eq!(merged.header_map().get("x-route").expect("set"), "b");
        assert_ne!(configured.digest(), merged.digest());
    }

    #[test]
    fn only_identity_headers_cross_origins() {
        let map = headers(&[("Authorization", "Bearer t"), ("User-Agent", "bot/1")]).header_map();
        let kept = across_origins(&map);
        assert_eq!(kept.len(), 1);
        assert!(kept.contains_key("user-agent"));
    }
}
