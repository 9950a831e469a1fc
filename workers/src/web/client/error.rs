//! What can go wrong: [`Error`], a failed fetch in trawl's terms (with its public error code
//! and whether a retry may help), how reqwest's failures map onto it, and [`ClientError`], a
//! client that could not be built.
//!
//! Not here: deciding to retry (the runner and the webhook sender do, from
//! [`Error::is_transient`]).

use url::Url;

use super::{Client, origin_of};
use crate::job::ErrorCode;
use crate::web::dns::ResolveFailure;
use crate::web::ssrf::{BlockReason, UrlError};

/// What went wrong while fetching, in trawl's terms.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The URL is not acceptable before any network use.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// A DNS answer (or a connected address) was refused by the SSRF guard.
    #[error("connection to {host} refused by ssrf guard: {reason}")]
    Blocked {
        /// The host name or address.
        host: String,
        /// Why it was refused.
        reason: BlockReason,
    },
    /// The name did not resolve.
    #[error("dns lookup of {host} failed: {message}")]
    Dns {
        /// The host name.
        host: String,
        /// The resolver's words.
        message: String,
    },
    /// The connection failed.
    #[error("connect failed: {0}")]
    Connect(String),
    /// The TLS handshake failed.
    #[error("tls failed: {0}")]
    Tls(String),
    /// More redirects than allowed.
    #[error("more than {limit} redirects")]
    TooManyRedirects {
        /// The configured limit.
        limit: usize,
    },
    /// A redirect back to a URL already visited.
    #[error("redirect loop back to {url}")]
    RedirectLoop {
        /// The URL seen twice.
        url: String,
    },
    /// A redirect status without a usable Location.
    #[error("redirect status {status} without a usable location")]
    MissingLocation {
        /// The redirect status.
        status: u16,
    },
    /// A time limit ran out.
    #[error("{phase} timed out after {seconds} s")]
    Timeout {
        /// `total`, `connect` or `read`.
        phase: &'static str,
        /// The limit that ran out.
        seconds: u64,
    },
    /// The decoded body exceeded the byte limit.
    #[error("body larger than {limit} bytes (after decompression)")]
    TooLarge {
        /// The configured limit.
        limit: u64,
    },
    /// The response head exceeded the header limits.
    #[error("response headers too large or too many")]
    HeadersTooLarge,
    /// The server broke the protocol (bad status line, short body, bad compression).
    #[error("protocol error: {0}")]
    Protocol(String),
    /// A job's proxy URL is unusable; nothing was sent.
    #[error("proxy: {0}")]
    Proxy(String),
    /// The caller's [`RedirectGuard`](super::RedirectGuard) refused a redirect's target; it was
    /// not requested.
    #[error("redirect to {url} not followed: {reason}")]
    RedirectRefused {
        /// The target refused.
        url: String,
        /// The code the guard gave.
        code: ErrorCode,
        /// The guard's words.
        reason: String,
    },
    /// A request header given by the caller is malformed or owned by the client; nothing was
    /// sent. A fault of the caller, not of the destination.
    #[error("request header {name:?} is invalid: {problem}")]
    InvalidHeader {
        /// The header name as given (never its value, which may be a secret).
        name: String,
        /// What is wrong with it.
        problem: &'static str,
    },
}

impl Error {
    /// Returns the public error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            Error::Url(UrlError::UnsupportedScheme(_)) => ErrorCode::UnsupportedScheme,
            Error::Url(UrlError::Blocked { .. }) | Error::Blocked { .. } => {
                ErrorCode::BlockedDestination
            }
            Error::Url(_) => ErrorCode::InvalidUrl,
            Error::Dns { .. } => ErrorCode::DnsError,
            Error::Connect(_) => ErrorCode::ConnectError,
            Error::Tls(_) => ErrorCode::TlsError,
            Error::TooManyRedirects { .. } => ErrorCode::TooManyRedirects,
            Error::RedirectLoop { .. } => ErrorCode::RedirectLoop,
            Error::MissingLocation { .. } => ErrorCode::RedirectMissingLocation,
            Error::Timeout { .. } => ErrorCode::Timeout,
            Error::TooLarge { .. } => ErrorCode::TooLarge,
            Error::HeadersTooLarge => ErrorCode::HeadersTooLarge,
            Error::Protocol(_) => ErrorCode::ProtocolError,
            Error::InvalidHeader { .. } => ErrorCode::Internal,
            Error::Proxy(_) => ErrorCode::InvalidUrl,
            Error::RedirectRefused { code, .. } => *code,
        }
    }

    /// Names the proxy a transport failure happened through.
    pub(super) fn through(self, label: &str) -> Error {
        match self {
            Error::Connect(message) => Error::Connect(format!("through proxy {label}: {message}")),
            Error::Protocol(message) => {
                Error::Protocol(format!("through proxy {label}: {message}"))
            }
            Error::Tls(message) => Error::Tls(format!("through proxy {label}: {message}")),
            other => other,
        }
    }

    /// True when the same request may succeed later: timeouts, failed connections, broken
    /// transfers and DNS failures (which are often brief). Policy refusals, limits and
    /// malformed URLs are permanent.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Dns { .. } | Error::Connect(_) | Error::Timeout { .. } | Error::Protocol(_)
        )
    }

    /// Returns the SSRF reason when the guard refused the destination (a metrics label).
    pub fn block_reason(&self) -> Option<BlockReason> {
        match self {
            Error::Url(UrlError::Blocked { reason, .. }) | Error::Blocked { reason, .. } => {
                Some(*reason)
            }
            _ => None,
        }
    }
}

/// Why a [`Client`] could not be built. The messages name the `trawl.toml` key or the proxy at
/// fault; reqwest's error is part of the message rather than a source, so an error chain
/// printed with `{:#}` says it once.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// An `[http]` value is outside its bounds; the message names the key.
    #[error("{0}")]
    Config(String),
    /// The `[proxy]` section is invalid; the message names the entry.
    #[error("{0}")]
    Proxies(String),
    /// `http.accept_language` cannot be sent as a header value.
    #[error("http.accept_language is not a valid header value")]
    AcceptLanguage,
    /// reqwest refused a proxy URL.
    #[error("proxy {label}: {error}")]
    Proxy {
        /// The proxy's label (`scheme://host:port`, no credentials).
        label: String,
        /// reqwest's words.
        error: reqwest::Error,
    },
    /// reqwest could not build the client.
    #[error("cannot build the http client: {0}")]
    Build(reqwest::Error),
}

impl Client {
    /// Turns a reqwest failure for `url` into trawl's terms: a refusal or lookup failure of the
    /// guarded resolver, a timeout of the phase that ran out, oversized headers, TLS, connect or
    /// protocol failures.
    pub(super) fn classify(&self, url: &Url, error: reqwest::Error) -> Error {
        let host = url.host_str().unwrap_or_default().to_owned();
        if let Some(failure) = find_source::<ResolveFailure>(&error) {
            return match failure {
                ResolveFailure::Blocked { host, reason } => Error::Blocked {
                    host: host.clone(),
                    reason: *reason,
                },
                ResolveFailure::Lookup { host, message } => Error::Dns {
                    host: host.clone(),
                    message: message.clone(),
                },
            };
        }
        let chain = error_chain(&error);
        if error.is_timeout() {
            let (phase, seconds) = if error.is_connect() {
                ("connect", self.config.connect_timeout_secs)
            } else {
                ("read", self.config.read_timeout_secs)
            };
            return Error::Timeout { phase, seconds };
        }
        let lower = chain.to_ascii_lowercase();
        if lower.contains("message head is too large") || lower.contains("too many headers") {
            return Error::HeadersTooLarge;
        }
        // Any rustls error is TLS, including the one an https request to a plain-HTTP server
        // gets ("received corrupt message"), whose words name no certificate or handshake.
        if find_in_chain::<rustls::Error>(&error).is_some()
            || lower.contains("certificate")
            || lower.contains("tls")
            || lower.contains("handshake")
        {
            return Error::Tls(format!("{host}: {chain}"));
        }
        if error.is_connect() {
            return Error::Connect(format!("{host}: {chain}"));
        }
        Error::Protocol(format!("{host}: {chain}"))
    }
}

/// [`find_source`], also looking inside `io::Error`s, whose `source` skips the error they
/// wrap (tokio-rustls wraps rustls' errors so).
fn find_in_chain<'a, T: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        if let Some(inner) = error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            && let Some(found) = find_in_chain::<T>(inner)
        {
            return Some(found);
        }
        current = error.source();
    }
    None
}

fn find_source<'a, T: std::error::Error + 'static>(
    error: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        current = error.source();
    }
    None
}

/// Joins an error and its sources, skipping reqwest's own URL-bearing top line.
fn error_chain(error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current = std::error::Error::source(error);
    while let Some(source) = current {
        let text = source.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        current = source.source();
    }
    if parts.is_empty() {
        // reqwest's own message names the whole URL; keep its origin only.
        let mut text = error.to_string();
        if let Some(url) = error.url() {
            text = text.replace(url.as_str(), &origin_of(url));
        }
        parts.push(text);
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_network_faults_are_transient() {
        assert!(
            Error::Timeout {
                phase: "total",
                seconds: 30
            }
            .is_transient()
        );
        assert!(Error::Connect("refused".into()).is_transient());
        assert!(!Error::TooLarge { limit: 1 }.is_transient());
        assert!(!Error::RedirectLoop { url: "x".into() }.is_transient());
        assert_eq!(Error::HeadersTooLarge.code(), ErrorCode::HeadersTooLarge);
    }
}
