//! What a web browser on the user's machine may not make the API do. A loopback server
//! without tokens trusts whoever can reach it, and a web page can reach it: through DNS
//! rebinding (its own name re-pointed at 127.0.0.1, so the browser treats the API as the
//! page's origin) or with plain cross-site requests (forms, `fetch` without reading the
//! answer). So every request must name an allowed host in `Host` (421 `misdirected_request`
//! otherwise: a rebound name is not one), and a request that changes something (any method
//! but GET, HEAD and OPTIONS) carrying an `Origin` must come from an allowed host too (403
//! `forbidden_origin`). Requests without `Origin` come from programs, not pages, and pass.
//!
//! Not here: tokens (`auth`), which hosts are allowed (`Config::allows_host`), connection
//! limits (`server`).

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};

use super::AppState;
use super::error::{ApiError, ApiErrorCode};

/// Answers 421 when the request names a host the API does not answer to, and 403 when a
/// request that changes something comes from a page of a host that is not allowed.
pub(super) async fn check_host_and_origin(
    State(state): State<AppState>,
    request: Request,
    next: Next,
) -> Response {
    // HTTP/1.1 names the host in `Host`, HTTP/2 in the URI's authority. A request naming none
    // comes from no browser (browsers always send one): nothing to check.
    let host = match request.headers().get(header::HOST) {
        Some(value) => Some(value.to_str().ok().and_then(host_of_authority)),
        None => request.uri().authority().map(|authority| {
            (!authority.as_str().contains('@')).then(|| authority.host().to_owned())
        }),
    };
    if let Some(host) = host {
        let allowed = host
            .as_deref()
            .is_some_and(|host| state.config.allows_host(host));
        if !allowed {
            return ApiError::new(
                ApiErrorCode::MisdirectedRequest,
                "this server does not answer to that host name; add it to api.allowed_hosts",
            )
            .into_response();
        }
    }
    let changes_state = !matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    );
    if changes_state && let Some(origin) = request.headers().get(header::ORIGIN) {
        let allowed = origin
            .to_str()
            .ok()
            .and_then(host_of_origin)
            .is_some_and(|host| state.config.allows_host(&host));
        if !allowed {
            return ApiError::new(
                ApiErrorCode::ForbiddenOrigin,
                "requests from pages of that origin may not change anything here",
            )
            .into_response();
        }
    }
    next.run(request).await
}

/// The host of a `Host` header (`name`, `name:port`, `[v6]:port`), or `None` when it is not
/// one (user info, a path, garbage).
fn host_of_authority(value: &str) -> Option<String> {
    if value.contains('@') {
        return None;
    }
    let authority: axum::http::uri::Authority = value.parse().ok()?;
    Some(authority.host().to_owned())
}

/// The host of an `Origin` header (`scheme://host[:port]`); `None` for `null` (sandboxed
/// pages, files) and anything that is not an http(s) origin.
fn host_of_origin(value: &str) -> Option<String> {
    let origin = url::Url::parse(value).ok()?;
    if !matches!(origin.scheme(), "http" | "https") {
        return None;
    }
    origin.host_str().map(str::to_owned)
}

/// A host name as compared: lowercase, without a trailing dot.
pub(super) fn normalize_host(host: &str) -> String {
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether an `allowed_hosts` entry is a bare host: a name or an IP address (IPv6 in
/// brackets), with no scheme, port, path or user info.
pub(super) fn is_host_name(entry: &str) -> bool {
    if let Some(inner) = entry
        .strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
    {
        return inner.parse::<std::net::Ipv6Addr>().is_ok();
    }
    !entry.is_empty()
        && entry
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.' || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Config;

    #[test]
    fn hosts_are_read_without_ports_and_user_info_is_refused() {
        assert_eq!(
            host_of_authority("127.0.0.1:8787").as_deref(),
            Some("127.0.0.1")
        );
        assert_eq!(host_of_authority("[::1]:80").as_deref(), Some("[::1]"));
        assert_eq!(
            host_of_authority("Evil.Example").as_deref(),
            Some("Evil.Example")
        );
        assert_eq!(host_of_authority("user@127.0.0.1"), None);
        assert_eq!(
            host_of_origin("http://localhost:3000").as_deref(),
            Some("localhost")
        );
        assert_eq!(host_of_origin("null"), None);
        assert_eq!(host_of_origin("chrome-extension://abc"), None);
    }

    #[test]
    fn a_loopback_bind_answers_to_its_address_and_localhost_only() {
        let config = Config::default();
        for host in ["127.0.0.1", "localhost", "LOCALHOST.", "app.localhost"] {
            assert!(config.allows_host(host), "{host}");
        }
        for host in [
            "evil.example",
            "127.0.0.2",
            "[::1]",
            "localhost.evil.example",
        ] {
            assert!(!config.allows_host(host), "{host}");
        }
        let v6 = Config {
            bind: "[::1]:8787".to_owned(),
            ..Config::default()
        };
        assert!(v6.allows_host("[::1]"));
        let public = Config {
            bind: "0.0.0.0:8787".to_owned(),
            tokens: vec![crate::secret::Secret::new("0123456789abcdef").into()],
            ..Config::default()
        };
        assert!(public.allows_host("trawl.example"));
        let listed = Config {
            allowed_hosts: vec!["trawl.internal".to_owned()],
            ..Config::default()
        };
        assert!(listed.allows_host("Trawl.Internal"));
        assert!(!listed.allows_host("127.0.0.1"));
        listed.validate().expect("a host name is a valid entry");
        let bad = Config {
            allowed_hosts: vec!["http://trawl.internal:80".to_owned()],
            ..Config::default()
        };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn blank_or_spaced_tokens_are_refused() {
        for token in [
            "                    ",
            " a-token-of-16-chars",
            "a token of 16 chars\t",
        ] {
            let config = Config {
                tokens: vec![crate::secret::Secret::new(token).into()],
                ..Config::default()
            };
            assert_eq!(
                config.validate(),
                Err(crate::api::ConfigError::BlankToken),
                "{token:?}"
            );
        }
    }
}
