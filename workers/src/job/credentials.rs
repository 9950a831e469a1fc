//! The credentials a browse job, a session or a rendered fetch carries: cookies, extra
//! request headers and localStorage entries, with their checks. Secrets: `Debug` shows only
//! counts, and a job read back shows them redacted (`Job::redacted_json`).
//!
//! Not here: applying them to a browser context (`crate::browse`).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::headers::CustomHeaders;
use super::object::objects_only;

/// Credentials a job or session browses with: cookies, extra request headers and
/// localStorage entries. Secrets: never logged (`Debug` shows only counts), never exported.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct Credentials {
    /// Cookies set before the first navigation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cookies: Vec<CookieSpec>,
    /// Headers added to the requests of the context to one origin each
    /// (`[{"origin": "https://app.example.com", "headers": {...}}]`); requests to any other
    /// origin (third-party resources, links followed elsewhere) never carry them.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        deserialize_with = "scoped_headers"
    )]
    pub headers: Vec<OriginHeaders>,
    /// localStorage entries per origin (`https://example.com` → key → value), written before
    /// the first navigation to that origin.
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub local_storage: HashMap<String, HashMap<String, String>>,
}

// Each is read from a JSON object only: serde's derive would also read an array of the fields
// in order (`"credentials": []` as no credentials).
objects_only!(Credentials => "credentials", OriginHeaders => "an origin's headers", CookieSpec => "a cookie");

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Credentials {{ {} cookies, {} headers, {} local_storage origins (redacted) }}",
            self.cookies.len(),
            self.header_count(),
            self.local_storage.len()
        )
    }
}

impl Credentials {
    /// A fetch's custom headers as a browser context's credentials: sent to `url`'s origin
    /// only (nothing when `headers` is empty or `url` does not parse).
    pub fn headers_for_origin_of(url: &str, headers: &CustomHeaders) -> Credentials {
        match url::Url::parse(url) {
            Ok(url) if !headers.is_empty() => Credentials {
                headers: vec![OriginHeaders {
                    origin: url.origin().ascii_serialization(),
                    headers: headers.to_map(),
                }],
                ..Credentials::default()
            },
            _ => Credentials::default(),
        }
    }

    /// True when there is nothing to set.
    pub fn is_empty(&self) -> bool {
        self.cookies.is_empty() && self.headers.is_empty() && self.local_storage.is_empty()
    }

    /// The headers given for `origin` (`scheme://host[:port]`, as `url::Origin` serialises
    /// it), merged over every entry naming that origin.
    pub fn headers_for(&self, origin: &str) -> Vec<(&str, &str)> {
        self.headers
            .iter()
            .filter(|entry| same_origin(&entry.origin, origin))
            .flat_map(|entry| {
                entry
                    .headers
                    .iter()
                    .map(|(name, value)| (name.as_str(), value.as_str()))
            })
            .collect()
    }

    /// A digest of every cookie, header and entry (map order aside), for cache keys: other
    /// credentials may see another page.
    pub fn digest(&self) -> String {
        use sha2::Digest as _;
        use std::collections::BTreeMap;
        fn sorted(map: &HashMap<String, String>) -> BTreeMap<&str, &str> {
            map.iter()
                .map(|(name, value)| (name.as_str(), value.as_str()))
                .collect()
        }
        let headers: Vec<(&str, BTreeMap<&str, &str>)> = self
            .headers
            .iter()
            .map(|entry| (entry.origin.as_str(), sorted(&entry.headers)))
            .collect();
        let storage: BTreeMap<&str, BTreeMap<&str, &str>> = self
            .local_storage
            .iter()
            .map(|(origin, entries)| (origin.as_str(), sorted(entries)))
            .collect();
        let canonical = serde_json::to_string(&(&self.cookies, headers, storage))
            .expect("credentials are plain data and serialise");
        hex::encode(&sha2::Sha256::digest(canonical.as_bytes())[..8])
    }

    /// How many headers there are, over every origin.
    pub fn header_count(&self) -> usize {
        self.headers.iter().map(|entry| entry.headers.len()).sum()
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
        for entry in &self.headers {
            if canonical_origin(&entry.origin).is_none() {
                return Err(format!(
                    "headers: origin {:?} is not an http(s) origin like https://app.example.com",
                    entry.origin
                ));
            }
            for (name, value) in &entry.headers {
                if name.is_empty()
                    || !name
                        .bytes()
                        .all(|byte| byte.is_ascii_alphanumeric() || b"-_".contains(&byte))
                {
                    return Err(format!("{name:?} is not a valid header name"));
                }
                if value.bytes().any(|byte| byte == b'\r' || byte == b'\n') {
                    return Err(format!("header {name:?}: a value holds a line break"));
                }
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

/// Headers for one origin.
#[derive(Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
pub struct OriginHeaders {
    /// The origin they are sent to: `https://app.example.com` (a port when not the
    /// scheme's own); no path.
    pub origin: String,
    /// Header name → value.
    pub headers: HashMap<String, String>,
}

/// `origin` as `scheme://host[:port]` (the default port left out), when it is an http(s)
/// origin without a path, query or user.
pub fn canonical_origin(origin: &str) -> Option<String> {
    let url = url::Url::parse(origin).ok()?;
    if !matches!(url.scheme(), "http" | "https")
        || url.host_str().is_none()
        || !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
        || !matches!(url.path(), "" | "/")
    {
        return None;
    }
    Some(url.origin().ascii_serialization())
}

fn same_origin(given: &str, origin: &str) -> bool {
    canonical_origin(given).is_some_and(|given| given == origin)
}

/// `headers` as a list of `{origin, headers}`; the former bare map (sent everywhere) is
/// refused with a message saying what to send instead. Read by a visitor of its own (not an
/// untagged enum) so that an entry's own error (an array where an object belongs, a missing
/// `origin`) reaches the client as it is.
fn scoped_headers<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<OriginHeaders>, D::Error> {
    struct Scoped;
    impl<'de> serde::de::Visitor<'de> for Scoped {
        type Value = Vec<OriginHeaders>;
        fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            formatter.write_str("a list of {\"origin\": ..., \"headers\": {...}} objects")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(
            self,
            mut entries: A,
        ) -> Result<Self::Value, A::Error> {
            let mut list = Vec::with_capacity(entries.size_hint().unwrap_or(0).min(64));
            while let Some(entry) = entries.next_element::<OriginHeaders>()? {
                list.push(entry);
            }
            Ok(list)
        }
        // Even an empty map: the documented form is the list (as the OpenAPI schema says).
        fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
            Err(serde::de::Error::custom(
                "credentials.headers must name the origin they are sent to: \
                 [{\"origin\": \"https://app.example.com\", \"headers\": {\"authorization\": \"...\"}}]",
            ))
        }
    }
    deserializer.deserialize_any(Scoped)
}

/// One cookie.
#[derive(Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(remote = "Self", deny_unknown_fields)]
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
    fn headers_belong_to_their_origin_and_a_bare_map_is_refused() {
        let credentials: Credentials = serde_json::from_str(
            r#"{"headers": [{"origin": "https://App.example.com:443/", "headers": {"x-a": "1"}}]}"#,
        )
        .expect("scoped headers parse");
        assert_eq!(credentials.validate(), Ok(()));
        assert_eq!(
            credentials.headers_for("https://app.example.com"),
            vec![("x-a", "1")]
        );
        assert!(
            credentials
                .headers_for("https://cdn.example.com")
                .is_empty()
        );
        assert!(credentials.headers_for("http://app.example.com").is_empty());
        let bare = serde_json::from_str::<Credentials>(r#"{"headers": {"x-a": "1"}}"#)
            .expect_err("a bare map is refused");
        assert!(bare.to_string().contains("origin"), "{bare}");
        // An entry's own fault is told as it is, through the job's buffered reading too.
        for given in [
            serde_json::json!({"headers": [["https://a.test", {"x-a": "1"}]]}),
            serde_json::json!({"cookies": [["a", "b"]]}),
            serde_json::json!([]),
        ] {
            let error = serde_json::from_value::<Credentials>(given.clone())
                .expect_err("an array where an object belongs is refused");
            assert!(
                error.to_string().contains("JSON object"),
                "{given}: {error}"
            );
        }
        let job = serde_json::json!({"kind": "fetch", "url": "http://a.test/",
            "credentials": {"headers": [{"headers": {"x-a": "1"}}]}});
        let error = serde_json::from_value::<super::super::Job>(job).expect_err("no origin");
        assert!(error.to_string().contains("origin"), "{error}");
    }

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
            headers: vec![OriginHeaders {
                origin: "https://example.com".to_owned(),
                headers: HashMap::from([("authorization".to_owned(), "Bearer t0ken".to_owned())]),
            }],
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
            headers: vec![OriginHeaders {
                origin: "https://example.com".to_owned(),
                headers: HashMap::from([("bad header".to_owned(), "x".to_owned())]),
            }],
            ..Credentials::default()
        };
        assert!(credentials.validate().is_err());
        let credentials = Credentials {
            headers: vec![OriginHeaders {
                origin: "https://example.com/path".to_owned(),
                headers: HashMap::new(),
            }],
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
