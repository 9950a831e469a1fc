//! The public error codes every failure maps to ([`ErrorCode`]) and a failure as stored and
//! shown ([`JobError`]): code, message, HTTP status, evidence, and whether to try again.
//!
//! Not here: how a capability's own error maps to a code (each capability's `Error::code`
//! does that) or the HTTP status an API answer carries (the API's business).

use std::fmt;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// The public, snake_case name of every way a job can fail. Job results, API bodies and
/// metrics labels all use these names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The input is not a URL, or has raw control characters, or a bad port.
    InvalidUrl,
    /// A scheme other than http or https.
    UnsupportedScheme,
    /// The SSRF guard refused the destination (the message names the reason).
    BlockedDestination,
    /// The host name did not resolve.
    DnsError,
    /// The TCP connection failed (refused, reset, unreachable).
    ConnectError,
    /// The TLS handshake failed (bad certificate, protocol).
    TlsError,
    /// More redirects than allowed.
    TooManyRedirects,
    /// A redirect led back to a URL already visited.
    RedirectLoop,
    /// A redirect status without a usable Location header.
    RedirectMissingLocation,
    /// The total time, the connect time or the idle read time ran out.
    Timeout,
    /// The decoded body is larger than the byte limit.
    TooLarge,
    /// The response headers are too large or too many.
    HeadersTooLarge,
    /// The server answered with an error status.
    HttpStatus,
    /// The server broke the HTTP protocol (malformed response, body shorter than announced).
    ProtocolError,
    /// The content type cannot be extracted (images, archives, unknown binaries).
    UnsupportedContentType,
    /// The site answered with an anti-bot challenge, captcha or access-denied page.
    BlockedBySite,
    /// The page is a login wall.
    LoginRequired,
    /// The page has no readable content (an empty page or a JavaScript app shell).
    EmptyContent,
    /// The document could not be parsed or extracted.
    ExtractionFailed,
    /// Extraction exceeded its time or nesting limit.
    ExtractionLimit,
    /// The job was cancelled before it ended.
    Cancelled,
    /// The job's worker died on every attempt (a poison job).
    WorkerLost,
    /// A crawled page whose `rel=canonical` names a page the crawl already has, or a redirect
    /// to a page the crawl already has: stored once.
    DuplicateContent,
    /// A crawled page its host's robots.txt disallows (checked again when the page's turn
    /// comes: robots.txt may have changed, or could not be read when the link was found).
    RobotsDisallowed,
    /// A crawled page whose host's robots.txt could not be fetched (5xx, 429, network
    /// failure) for as long as `politeness.robots_wait_secs`: not fetched.
    RobotsUnreachable,
    /// A browser navigation failed with a network error the other codes do not name (the
    /// message carries Chromium's `net::ERR_*` text).
    NavigationFailed,
    /// Every browser slot of the worker is taken: try again later.
    BrowserBusy,
    /// The browser crashed, hung or could not be started (the job is retried on a fresh one).
    BrowserFailed,
    /// A fault inside trawl (store or queue unavailable); details are in the logs.
    Internal,
    /// A search provider answered with its anti-bot page (a challenge, "anomaly", or a 202
    /// or 403 instead of results): `evidence` says which.
    SearchBlocked,
    /// A search provider answered 429: `retry_after` says when to try again.
    SearchRateLimited,
    /// A search provider's answer could not be read: bad JSON, wrong types, or a page
    /// without what it should hold (DuckDuckGo's image token).
    SearchInvalidResponse,
    /// The search asked for an engine the operator forbids (`search.searxng.forbid_engines`).
    SearchEngineForbidden,
    /// The search asked for a provider that is not configured (SearxNG without
    /// `search.searxng.url`).
    SearchUnconfigured,
    /// A fallback extraction provider (Firecrawl, Crawl4AI) could not give the page: it
    /// answered an error status, an unusable answer, or led somewhere the guard refuses.
    /// `evidence` names the provider, `status` its status.
    ProviderFailed,
}

impl ErrorCode {
    /// Returns the snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidUrl => "invalid_url",
            ErrorCode::UnsupportedScheme => "unsupported_scheme",
            ErrorCode::BlockedDestination => "blocked_destination",
            ErrorCode::DnsError => "dns_error",
            ErrorCode::ConnectError => "connect_error",
            ErrorCode::TlsError => "tls_error",
            ErrorCode::TooManyRedirects => "too_many_redirects",
            ErrorCode::RedirectLoop => "redirect_loop",
            ErrorCode::RedirectMissingLocation => "redirect_missing_location",
            ErrorCode::Timeout => "timeout",
            ErrorCode::TooLarge => "too_large",
            ErrorCode::HeadersTooLarge => "headers_too_large",
            ErrorCode::HttpStatus => "http_status",
            ErrorCode::ProtocolError => "protocol_error",
            ErrorCode::UnsupportedContentType => "unsupported_content_type",
            ErrorCode::BlockedBySite => "blocked_by_site",
            ErrorCode::LoginRequired => "login_required",
            ErrorCode::EmptyContent => "empty_content",
            ErrorCode::ExtractionFailed => "extraction_failed",
            ErrorCode::ExtractionLimit => "extraction_limit",
            ErrorCode::Cancelled => "cancelled",
            ErrorCode::WorkerLost => "worker_lost",
            ErrorCode::DuplicateContent => "duplicate_content",
            ErrorCode::RobotsDisallowed => "robots_disallowed",
            ErrorCode::RobotsUnreachable => "robots_unreachable",
            ErrorCode::NavigationFailed => "navigation_failed",
            ErrorCode::BrowserBusy => "browser_busy",
            ErrorCode::BrowserFailed => "browser_failed",
            ErrorCode::Internal => "internal",
            ErrorCode::SearchBlocked => "search_blocked",
            ErrorCode::SearchRateLimited => "search_rate_limited",
            ErrorCode::SearchInvalidResponse => "search_invalid_response",
            ErrorCode::SearchEngineForbidden => "search_engine_forbidden",
            ErrorCode::SearchUnconfigured => "search_unconfigured",
            ErrorCode::ProviderFailed => "provider_failed",
        }
    }

    /// Every code, in declaration order (for documentation and tests).
    pub const ALL: [ErrorCode; 35] = [
        ErrorCode::InvalidUrl,
        ErrorCode::UnsupportedScheme,
        ErrorCode::BlockedDestination,
        ErrorCode::DnsError,
        ErrorCode::ConnectError,
        ErrorCode::TlsError,
        ErrorCode::TooManyRedirects,
        ErrorCode::RedirectLoop,
        ErrorCode::RedirectMissingLocation,
        ErrorCode::Timeout,
        ErrorCode::TooLarge,
        ErrorCode::HeadersTooLarge,
        ErrorCode::HttpStatus,
        ErrorCode::ProtocolError,
        ErrorCode::UnsupportedContentType,
        ErrorCode::BlockedBySite,
        ErrorCode::LoginRequired,
        ErrorCode::EmptyContent,
        ErrorCode::ExtractionFailed,
        ErrorCode::ExtractionLimit,
        ErrorCode::Cancelled,
        ErrorCode::WorkerLost,
        ErrorCode::DuplicateContent,
        ErrorCode::RobotsDisallowed,
        ErrorCode::RobotsUnreachable,
        ErrorCode::NavigationFailed,
        ErrorCode::BrowserBusy,
        ErrorCode::BrowserFailed,
        ErrorCode::Internal,
        ErrorCode::SearchBlocked,
        ErrorCode::SearchRateLimited,
        ErrorCode::SearchInvalidResponse,
        ErrorCode::SearchEngineForbidden,
        ErrorCode::SearchUnconfigured,
        ErrorCode::ProviderFailed,
    ];
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failure as stored and shown: the public code, a human message, and whether trying again
/// later may succeed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct JobError {
    /// The public error code.
    pub code: ErrorCode,
    /// What went wrong, in lowercase words, with the URL's origin at most (never secrets).
    pub message: String,
    /// HTTP status, for `http_status`, `blocked_by_site` and friends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    /// What gave a block page away (`blocked_by_site`, `login_required`, `empty_content`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence: Option<String>,
    /// True when a later attempt may succeed (timeouts, resets, 5xx, 429).
    #[serde(default)]
    pub transient: bool,
    /// Seconds the server asked to wait before trying again (Retry-After).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<u64>,
}

impl JobError {
    /// Returns an error with `code` and `message`, neither transient nor with details.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        JobError {
            code,
            message: message.into(),
            status: None,
            evidence: None,
            transient: false,
            retry_after: None,
        }
    }
}

impl fmt::Display for JobError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl std::error::Error for JobError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_serialise_as_their_names() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_string(&code).expect("serialises");
            assert_eq!(json, format!("\"{}\"", code.as_str()));
        }
    }
}
