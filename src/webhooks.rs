//! Webhook delivery: signs a job or batch event (HMAC-SHA256 over the timestamp and the JSON
//! body, in the `trawl-signature` header), POSTs it through the SSRF-guarded client (so a
//! webhook can reach nothing a fetch could not), and retries transient failures with
//! exponential backoff.
//!
//! Not here: deciding which events to send and where (the runner and the API name a URL per
//! job or batch), persisting deliveries (an event still being retried when the process stops is
//! lost; delivery is at least once only while the process runs), and receiving webhooks
//! ([`verify`] is the receiver's half, offered for tests and for Rust receivers).

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use subtle::ConstantTimeEq;
use trawl_workers::web;
use trawl_workers::web::client::origin_of;
use url::Url;

use crate::secret::Secret;

/// The longest wait between two attempts, whatever `retry_base_ms` and the attempt number.
pub const RETRY_MAX_DELAY: Duration = Duration::from_secs(60);

/// The header carrying the signature: `t=<unix seconds>,v1=<hex hmac-sha256>`.
pub const SIGNATURE_HEADER: &str = "trawl-signature";

/// The header carrying the event type (`started`, `page`, `completed`, `failed`).
pub const EVENT_HEADER: &str = "trawl-event";

/// The User-Agent of webhook requests (not the browser-like one used for fetches).
const USER_AGENT: &str = concat!("trawl/", env!("CARGO_PKG_VERSION"), " (webhooks)");

/// Bounds of `webhooks.max_attempts`.
const MAX_ATTEMPTS_RANGE: std::ops::RangeInclusive<u32> = 1..=20;

/// Bounds of `webhooks.retry_base_ms`.
const RETRY_BASE_MS_RANGE: std::ops::RangeInclusive<u64> = 1..=60_000;

/// Webhook settings. Every field is a `trawl.toml` key under `[webhooks]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Shared secret that signs every webhook (HMAC-SHA256 in the `trawl-signature` header);
    /// without it webhooks are disabled and jobs naming a webhook are refused. Shown as
    /// `[redacted]`.
    pub secret: Option<Secret>,
    /// Attempts per event before giving up (1..=20); only timeouts, connection failures, 408,
    /// 429 and 5xx are retried.
    pub max_attempts: u32,
    /// Wait before the first retry, in milliseconds (1..=60000); doubled per attempt, at most
    /// 60 s.
    pub retry_base_ms: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            secret: None,
            max_attempts: 5,
            retry_base_ms: 1_000,
        }
    }
}

/// A `[webhooks]` setting that cannot be used, or webhooks asked for without a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `secret` is empty.
    #[error("webhooks.secret is empty")]
    EmptySecret,
    /// `secret` is what `trawl config` prints in its place.
    #[error(
        "webhooks.secret is the placeholder \"[redacted]\" printed by trawl config, not a secret"
    )]
    PlaceholderSecret,
    /// `max_attempts` is out of its bounds.
    #[error(
        "webhooks.max_attempts = {0} is outside {start}..={end}",
        start = MAX_ATTEMPTS_RANGE.start(),
        end = MAX_ATTEMPTS_RANGE.end()
    )]
    MaxAttempts(u32),
    /// `retry_base_ms` is out of its bounds.
    #[error(
        "webhooks.retry_base_ms = {0} is outside {start}..={end}",
        start = RETRY_BASE_MS_RANGE.start(),
        end = RETRY_BASE_MS_RANGE.end()
    )]
    RetryBaseMs(u64),
    /// Webhooks were asked for without a secret to sign them with.
    #[error("webhooks need a signing secret: set webhooks.secret")]
    NoSecret,
}

impl Config {
    /// Checks the values against their fixed bounds. An empty secret, or the `[redacted]`
    /// placeholder that `trawl config` prints in its place, is refused.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(secret) = &self.secret {
            if secret.expose().is_empty() {
                return Err(ConfigError::EmptySecret);
            }
            if secret.expose() == "[redacted]" {
                return Err(ConfigError::PlaceholderSecret);
            }
        }
        if !MAX_ATTEMPTS_RANGE.contains(&self.max_attempts) {
            return Err(ConfigError::MaxAttempts(self.max_attempts));
        }
        if !RETRY_BASE_MS_RANGE.contains(&self.retry_base_ms) {
            return Err(ConfigError::RetryBaseMs(self.retry_base_ms));
        }
        Ok(())
    }

    /// Returns the wait after `failed_attempts` failed attempts (1 for the first retry):
    /// `retry_base_ms` doubled per attempt, at most [`RETRY_MAX_DELAY`].
    pub fn retry_delay(&self, failed_attempts: u32) -> Duration {
        trawl_workers::backoff::Backoff::new(
            Duration::from_millis(self.retry_base_ms),
            RETRY_MAX_DELAY,
        )
        .before_retry(failed_attempts)
    }
}

/// What happened, as named in the `type` field and the `trawl-event` header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventType {
    /// A job started its first attempt.
    Started,
    /// A job produced a page (one per page of a batch or crawl).
    Page,
    /// A batch or a crawl ended: every job in it succeeded or failed.
    Completed,
    /// A job failed for good.
    Failed,
}

impl EventType {
    /// Returns the snake_case name (`started`, `page`, `completed`, `failed`).
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Started => "started",
            EventType::Page => "page",
            EventType::Completed => "completed",
            EventType::Failed => "failed",
        }
    }
}

/// One webhook event, the JSON body of the POST.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// What happened (serialised as `type`).
    #[serde(rename = "type")]
    pub r#type: EventType,
    /// The job it is about (`null` for a batch's `completed`).
    pub job_id: Option<String>,
    /// The batch the job belongs to, if any.
    pub batch_id: Option<String>,
    /// The crawl the job belongs to, or the crawl that completed (crawl events only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crawl_id: Option<String>,
    /// When it happened, RFC 3339 in UTC.
    pub at: String,
    /// The details: a job's result or error, a batch's counts, a crawl's record.
    pub data: serde_json::Value,
}

impl Event {
    /// Returns an event of `event_type` happening now, about no job or batch yet (set
    /// `job_id` and `batch_id` afterwards).
    pub fn new(event_type: EventType, data: serde_json::Value) -> Event {
        Event {
            r#type: event_type,
            job_id: None,
            batch_id: None,
            crawl_id: None,
            at: jiff::Timestamp::now().to_string(),
            data,
        }
    }
}

/// Why an event was not delivered. Messages name the receiver's status or the transport error,
/// never the webhook URL (whose path or query may hold a token).
#[derive(Debug, thiserror::Error)]
pub enum DeliveryError {
    /// The URL or its destination was refused by the SSRF guard, or is not an http(s) URL.
    /// Not retried. On a first attempt nothing was sent; a later attempt is refused when the
    /// name has since resolved to a blocked address.
    #[error("webhook refused: {error}")]
    Refused {
        /// The client's reason (`invalid_url`, `unsupported_scheme`, `blocked_destination`).
        error: web::client::Error,
    },
    /// The receiver answered a status that retrying would not change (3xx, or a 4xx other than
    /// 408 and 429). Redirects are not followed.
    #[error("webhook rejected with status {status} after {attempts} attempt(s)")]
    Rejected {
        /// The receiver's status.
        status: u16,
        /// Attempts made, this one included.
        attempts: u32,
    },
    /// A failure that retrying would not change (TLS, a response over 64 KiB, bad headers).
    #[error("webhook failed after {attempts} attempt(s): {error}")]
    Failed {
        /// Attempts made, this one included.
        attempts: u32,
        /// The client's error.
        error: web::client::Error,
    },
    /// Every attempt failed with a transient failure.
    #[error("webhook gave up after {attempts} attempt(s), last: {last}")]
    GaveUp {
        /// Attempts made (`max_attempts`).
        attempts: u32,
        /// How the last attempt failed.
        last: LastFailure,
    },
}

/// How the last of a series of failed attempts ended.
#[derive(Debug, thiserror::Error)]
pub enum LastFailure {
    /// The receiver answered 408, 429 or 5xx.
    #[error("status {0}")]
    Status(u16),
    /// A transient transport failure (timeout, connection, protocol, DNS).
    #[error("{0}")]
    Transport(web::client::Error),
}

/// Signed webhook delivery through the guarded client. Cheap to clone (one per process).
#[derive(Debug, Clone)]
pub struct Webhooks {
    client: web::Client,
    config: Config,
    secret: Secret,
}

impl Webhooks {
    /// Checks `config` and builds the sender. Refuses a config without `secret`: webhooks are
    /// always signed. Destinations obey `client`'s SSRF policy.
    pub fn new(client: web::Client, config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        let Some(secret) = config.secret.clone() else {
            return Err(ConfigError::NoSecret);
        };
        Ok(Webhooks {
            client,
            config,
            secret,
        })
    }

    /// Returns the settings in force.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// POSTs `event` to `url` as JSON, signed afresh on every attempt, and returns the number
    /// of attempts used once a 2xx comes back.
    ///
    /// Timeouts, connection and protocol failures, 408, 429 and 5xx are retried after
    /// [`Config::retry_delay`] up to `max_attempts`; anything else ends at once (see
    /// [`DeliveryError`]). Each attempt is bounded by `http.timeout_secs`.
    pub async fn deliver_now(&self, url: &Url, event: &Event) -> Result<u32, DeliveryError> {
        let body = serde_json::to_vec(event)
            .expect("an event of strings, enums and json values always serialises");
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            let signature = sign(
                self.secret.expose(),
                jiff::Timestamp::now().as_second(),
                &body,
            );
            let headers = [
                ("content-type", "application/json"),
                ("user-agent", USER_AGENT),
                (EVENT_HEADER, event.r#type.as_str()),
                (SIGNATURE_HEADER, signature.as_str()),
            ];
            let last = match self.client.post(url, &headers, body.clone().into()).await {
                Ok(response) if (200..300).contains(&response.status) => return Ok(attempt),
                Ok(response) if is_retryable_status(response.status) => {
                    LastFailure::Status(response.status)
                }
                Ok(response) => {
                    return Err(DeliveryError::Rejected {
                        status: response.status,
                        attempts: attempt,
                    });
                }
                Err(error) if error.is_transient() => LastFailure::Transport(error),
                Err(error @ (web::client::Error::Url(_) | web::client::Error::Blocked { .. })) => {
                    return Err(DeliveryError::Refused { error });
                }
                Err(error) => {
                    return Err(DeliveryError::Failed {
                        attempts: attempt,
                        error,
                    });
                }
            };
            if attempt >= self.config.max_attempts {
                return Err(DeliveryError::GaveUp {
                    attempts: attempt,
                    last,
                });
            }
            let delay = self.config.retry_delay(attempt);
            // The final outcome is logged once by the caller; each retry is detail.
            tracing::debug!(
                origin = %origin_of(url),
                event = event.r#type.as_str(),
                attempt,
                delay_ms = delay.as_millis() as u64,
                failure = %last,
                "webhook attempt failed, will retry"
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// Delivers `event` to `url` on a new tokio task (so the caller never waits on a receiver)
    /// and logs the outcome: `debug` when delivered, `warn` when not, naming the URL's origin
    /// only (its path or query may hold a token). Must be called within a tokio runtime.
    pub fn deliver(&self, url: Url, event: Event) {
        let webhooks = self.clone();
        tokio::spawn(async move {
            let origin = origin_of(&url);
            match webhooks.deliver_now(&url, &event).await {
                Ok(attempts) => tracing::debug!(
                    origin = %origin,
                    event = event.r#type.as_str(),
                    attempts,
                    "webhook delivered"
                ),
                Err(error) => tracing::warn!(
                    origin = %origin,
                    event = event.r#type.as_str(),
                    error = %error,
                    "webhook not delivered"
                ),
            }
        });
    }
}

/// Returns the `trawl-signature` header value for `body` sent at `timestamp` (Unix seconds):
/// `t=<timestamp>,v1=<hex hmac-sha256(secret, "<timestamp>." + body)>`.
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let digest = signature_digest(secret, timestamp, body);
    format!("t={timestamp},v1={}", hex::encode(digest))
}

/// Checks a `trawl-signature` header: true when its timestamp is within `tolerance_secs` of
/// `now` (either way, Unix seconds) and one of its `v1` signatures is the HMAC of `body` under
/// `secret`, compared in constant time.
///
/// The header is `key=value` pairs separated by commas: exactly one `t`, at least one `v1`
/// (several allow a secret rotation), other keys ignored. Anything else (a pair without `=`,
/// a second `t`, a non-numeric timestamp, a negative tolerance) is false.
pub fn verify(secret: &str, header: &str, body: &[u8], now: i64, tolerance_secs: i64) -> bool {
    let Some((timestamp, signatures)) = parse_signature_header(header) else {
        return false;
    };
    let Ok(tolerance) = u64::try_from(tolerance_secs) else {
        return false;
    };
    if now.abs_diff(timestamp) > tolerance {
        return false;
    }
    let expected = signature_digest(secret, timestamp, body);
    // Every candidate is compared, so the time taken does not tell which one matched.
    let mut matched = subtle::Choice::from(0);
    for signature in signatures {
        if let Ok(given) = hex::decode(signature) {
            matched |= expected.as_slice().ct_eq(&given);
        }
    }
    matched.into()
}

/// The statuses worth retrying, where the receiver was slow or busy: 408, 429 and 5xx.
fn is_retryable_status(status: u16) -> bool {
    matches!(status, 408 | 429 | 500..=599)
}

/// HMAC-SHA256 of `"<timestamp>." + body` under `secret`.
fn signature_digest(secret: &str, timestamp: i64, body: &[u8]) -> [u8; 32] {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("hmac accepts keys of any length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac.finalize().into_bytes().into()
}

/// Splits a signature header into its timestamp and its `v1` values.
fn parse_signature_header(header: &str) -> Option<(i64, Vec<&str>)> {
    let mut timestamp: Option<i64> = None;
    let mut signatures = Vec::new();
    for pair in header.split(',') {
        let (key, value) = pair.trim().split_once('=')?;
        match key {
            "t" => {
                if timestamp.is_some() {
                    return None;
                }
                timestamp = Some(value.parse().ok()?);
            }
            "v1" => signatures.push(value),
            _ => {}
        }
    }
    if signatures.is_empty() {
        return None;
    }
    Some((timestamp?, signatures))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use testkit::FixtureServer;

    use super::*;

    const SECRET: &str = "whsec_test";
    const NOW: i64 = 1_700_000_000;

    #[test]
    fn sign_matches_a_known_vector() {
        // Computed independently: python3 hmac.new(b"whsec_test", b'1700000000.{"a":1}', sha256).
        assert_eq!(
            sign(SECRET, NOW, br#"{"a":1}"#),
            "t=1700000000,v1=38877139021993b830af32feea6e18a8da83eb2f6e49ee50bd9e4cf4ca4d3789"
        );
    }

    #[test]
    fn a_signature_verifies_with_the_same_secret_body_and_time() {
        let header = sign(SECRET, NOW, b"body");
        assert!(verify(SECRET, &header, b"body", NOW, 300));
        assert!(verify(SECRET, &header, b"body", NOW + 300, 300));
        assert!(verify(SECRET, &header, b"body", NOW - 300, 300));
        // Spaces after commas and unknown keys are tolerated; any matching v1 is enough.
        let v1 = header.split_once(",v1=").expect("v1").1;
        let rotated = format!("t={NOW}, v0=abc, v1={}, v1={v1}", "0".repeat(64));
        assert!(verify(SECRET, &rotated, b"body", NOW, 300));
    }

    #[test]
    fn a_tampered_body_does_not_verify() {
        let header = sign(SECRET, NOW, b"{\"n\":1}");
        assert!(!verify(SECRET, &header, b"{\"n\":2}", NOW, 300));
        assert!(!verify(SECRET, &header, b"", NOW, 300));
    }

    #[test]
    fn a_wrong_secret_does_not_verify() {
        let header = sign(SECRET, NOW, b"body");
        assert!(!verify("whsec_other", &header, b"body", NOW, 300));
        assert!(!verify("", &header, b"body", NOW, 300));
    }

    #[test]
    fn a_stale_or_future_timestamp_does_not_verify() {
        let header = sign(SECRET, NOW, b"body");
        assert!(!verify(SECRET, &header, b"body", NOW + 301, 300));
        assert!(!verify(SECRET, &header, b"body", NOW - 301, 300));
        assert!(!verify(SECRET, &header, b"body", NOW, -1));
        // A timestamp moved into the window does not carry the old signature with it.
        let v1 = header.split_once(",v1=").expect("v1").1;
        let moved = format!("t={},v1={v1}", NOW + 1000);
        assert!(!verify(SECRET, &moved, b"body", NOW + 1000, 300));
        // Extreme values neither overflow nor pass.
        let extreme = format!("t={},v1={v1}", i64::MIN);
        assert!(!verify(SECRET, &extreme, b"body", i64::MAX, 300));
    }

    #[test]
    fn malformed_headers_do_not_verify() {
        let header = sign(SECRET, NOW, b"body");
        let v1 = header.split_once(",v1=").expect("v1").1.to_owned();
        for malformed in [
            String::new(),
            ",".to_owned(),
            format!("t={NOW}"),
            format!("v1={v1}"),
            format!("t={NOW},v1"),
            format!("t=abc,v1={v1}"),
            format!("t={NOW},t={NOW},v1={v1}"),
            format!("t={NOW},v1={}", &v1[..63]),
            format!("t={NOW},v1={}", &v1[..62]),
            format!("t={NOW},v1={v1}00"),
            format!("t={NOW},v1=zz{}", &v1[2..]),
            format!("t={NOW};v1={v1}"),
            format!("T={NOW},V1={v1}"),
        ] {
            assert!(
                !verify(SECRET, &malformed, b"body", NOW, 300),
                "{malformed:?}"
            );
        }
    }

    #[test]
    fn config_defaults_bounds_and_secret_handling() {
        let config = Config::default();
        assert_eq!((config.max_attempts, config.retry_base_ms), (5, 1_000));
        assert!(config.secret.is_none());
        assert!(config.validate().is_ok());
        for bad in [
            Config {
                max_attempts: 0,
                ..Config::default()
            },
            Config {
                max_attempts: 21,
                ..Config::default()
            },
            Config {
                retry_base_ms: 0,
                ..Config::default()
            },
            Config {
                secret: Some(Secret::new("")),
                ..Config::default()
            },
            Config {
                secret: Some(Secret::new("[redacted]")),
                ..Config::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
        let parsed: Config = serde_json::from_str(r#"{"secret": "s3cret", "max_attempts": 3}"#)
            .expect("config parses");
        assert_eq!(parsed.secret.as_ref().map(Secret::expose), Some("s3cret"));
        assert_eq!((parsed.max_attempts, parsed.retry_base_ms), (3, 1_000));
        assert!(!format!("{parsed:?}").contains("s3cret"));
        let shown = serde_json::to_string(&parsed).expect("config serialises");
        assert!(
            !shown.contains("s3cret") && shown.contains("[redacted]"),
            "{shown}"
        );
        assert!(serde_json::from_str::<Config>(r#"{"retry_ms": 1}"#).is_err());
    }

    #[test]
    fn retry_delays_double_up_to_a_minute() {
        let config = Config::default();
        let delays: Vec<u64> = (1..=8)
            .map(|attempt| config.retry_delay(attempt).as_millis() as u64)
            .collect();
        assert_eq!(
            delays,
            [1_000, 2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]
        );
        assert_eq!(config.retry_delay(u32::MAX), RETRY_MAX_DELAY);
        let slowest = Config {
            retry_base_ms: 60_000,
            ..Config::default()
        };
        assert_eq!(slowest.retry_delay(20), RETRY_MAX_DELAY);
    }

    #[test]
    fn events_serialise_with_a_type_field_and_an_rfc3339_time() {
        let mut event = Event::new(EventType::Completed, serde_json::json!({"counts": {}}));
        event.batch_id = Some("01BATCH".to_owned());
        let json = serde_json::to_value(&event).expect("event serialises");
        assert_eq!(json["type"], "completed");
        assert_eq!(json["job_id"], serde_json::Value::Null);
        assert_eq!(json["batch_id"], "01BATCH");
        let at = json["at"].as_str().expect("at is a string");
        assert!(at.parse::<jiff::Timestamp>().is_ok(), "{at}");
        for (event_type, name) in [
            (EventType::Started, "started"),
            (EventType::Page, "page"),
            (EventType::Completed, "completed"),
            (EventType::Failed, "failed"),
        ] {
            assert_eq!(event_type.as_str(), name);
            assert_eq!(
                serde_json::to_value(event_type).expect("serialises"),
                serde_json::Value::String(name.to_owned())
            );
        }
    }

    fn loopback_client() -> web::Client {
        let policy = web::Policy {
            allow_private_network: true,
            ..Default::default()
        };
        web::Client::new(web::Config::default(), policy).expect("client builds")
    }

    fn webhooks_with(client: web::Client, max_attempts: u32) -> Webhooks {
        let config = Config {
            secret: Some(Secret::new(SECRET)),
            max_attempts,
            retry_base_ms: 10,
        };
        Webhooks::new(client, config).expect("webhooks build")
    }

    fn page_event() -> Event {
        let mut event = Event::new(
            EventType::Page,
            serde_json::json!({"url": "http://a.test/"}),
        );
        event.job_id = Some("01JOB".to_owned());
        event
    }

    fn url(server: &FixtureServer, path: &str) -> Url {
        Url::parse(&server.url(path)).expect("fixture url")
    }

    #[test]
    fn webhooks_refuse_a_config_without_a_secret() {
        let error = Webhooks::new(loopback_client(), Config::default()).expect_err("no secret");
        assert!(error.to_string().contains("webhooks.secret"), "{error}");
        let bad = Config {
            secret: Some(Secret::new(SECRET)),
            max_attempts: 0,
            ..Config::default()
        };
        assert!(Webhooks::new(loopback_client(), bad).is_err());
    }

    #[tokio::test]
    async fn an_event_arrives_signed_and_the_signature_verifies() {
        let server = FixtureServer::start().await.expect("fixture server starts");
        let webhooks = webhooks_with(loopback_client(), 5);
        let event = page_event();
        let attempts = webhooks
            .deliver_now(&url(&server, "/webhook"), &event)
            .await
            .expect("delivered");
        assert_eq!(attempts, 1);
        let requests = server.requests();
        assert_eq!(requests.len(), 1);
        let request = &requests[0];
        assert_eq!(request.method, "POST");
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(request.header("trawl-event"), Some("page"));
        let received: Event = serde_json::from_slice(&request.body).expect("body is an event");
        assert_eq!(received, event);
        let signature = request.header("trawl-signature").expect("signed");
        let now = jiff::Timestamp::now().as_second();
        assert!(verify(SECRET, signature, &request.body, now, 300));
        assert!(!verify("whsec_other", signature, &request.body, now, 300));
    }

    #[tokio::test]
    async fn a_flaky_receiver_gets_the_event_on_the_third_attempt() {
        let server = FixtureServer::start().await.expect("fixture server starts");
        let webhooks = webhooks_with(loopback_client(), 5);
        let started = Instant::now();
        let attempts = webhooks
            .deliver_now(&url(&server, "/webhook/flaky"), &page_event())
            .await
            .expect("delivered");
        assert_eq!(attempts, 3);
        assert_eq!(server.hits("/webhook/flaky"), 3);
        // Backoff of 10 ms, then 20 ms.
        assert!(started.elapsed() >= Duration::from_millis(30));
        let now = jiff::Timestamp::now().as_second();
        for request in server.requests() {
            let signature = request.header("trawl-signature").expect("signed");
            assert!(verify(SECRET, signature, &request.body, now, 300));
        }
    }

    #[tokio::test]
    async fn a_404_fails_at_once_after_one_attempt() {
        let server = FixtureServer::start().await.expect("fixture server starts");
        let webhooks = webhooks_with(loopback_client(), 5);
        let error = webhooks
            .deliver_now(&url(&server, "/status/404"), &page_event())
            .await
            .expect_err("404 is not delivered");
        assert!(
            matches!(
                error,
                DeliveryError::Rejected {
                    status: 404,
                    attempts: 1
                }
            ),
            "{error:?}"
        );
        assert_eq!(server.hits("/status/404"), 1);
    }

    #[tokio::test]
    async fn a_busy_receiver_is_given_up_on_after_max_attempts() {
        let server = FixtureServer::start().await.expect("fixture server starts");
        let webhooks = webhooks_with(loopback_client(), 3);
        let error = webhooks
            .deliver_now(&url(&server, "/status/503"), &page_event())
            .await
            .expect_err("503 every time");
        assert!(
            matches!(
                error,
                DeliveryError::GaveUp {
                    attempts: 3,
                    last: LastFailure::Status(503)
                }
            ),
            "{error:?}"
        );
        assert_eq!(server.hits("/status/503"), 3);
    }

    #[tokio::test]
    async fn a_closed_port_is_retried_then_given_up_on() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let webhooks = webhooks_with(loopback_client(), 2);
        let closed = Url::parse(&format!("http://127.0.0.1:{port}/webhook")).expect("url");
        let error = webhooks
            .deliver_now(&closed, &page_event())
            .await
            .expect_err("nothing listens");
        assert!(
            matches!(
                error,
                DeliveryError::GaveUp {
                    attempts: 2,
                    last: LastFailure::Transport(_)
                }
            ),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn a_slow_receiver_times_out() {
        let server = FixtureServer::start().await.expect("fixture server starts");
        let policy = web::Policy {
            allow_private_network: true,
            ..Default::default()
        };
        let config = web::Config {
            timeout_secs: 1,
            ..web::Config::default()
        };
        let client = web::Client::new(config, policy).expect("client builds");
        let webhooks = webhooks_with(client, 1);
        let error = webhooks
            .deliver_now(&url(&server, "/webhook/slow"), &page_event())
            .await
            .expect_err("too slow");
        assert!(
            matches!(
                &error,
                DeliveryError::GaveUp {
                    attempts: 1,
                    last: LastFailure::Transport(web::client::Error::Timeout { .. })
                }
            ),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn the_default_policy_refuses_a_loopback_webhook() {
        let server = FixtureServer::start().await.expect("fixture server starts");
        let client = web::Client::new(web::Config::default(), web::Policy::default())
            .expect("client builds");
        let webhooks = webhooks_with(client, 5);
        let error = webhooks
            .deliver_now(&url(&server, "/webhook"), &page_event())
            .await
            .expect_err("loopback is refused");
        let DeliveryError::Refused { error } = error else {
            panic!("expected a refusal, got {error:?}");
        };
        assert_eq!(
            error.code(),
            trawl_workers::job::ErrorCode::BlockedDestination
        );
        assert!(server.requests().is_empty());
        // Other schemes are refused too, before any network use.
        let ftp = Url::parse("ftp://example.com/hook").expect("url");
        assert!(matches!(
            webhooks.deliver_now(&ftp, &page_event()).await,
            Err(DeliveryError::Refused { .. })
        ));
    }

    /// Log lines captured by a test subscriber.
    #[derive(Clone, Default)]
    struct LogBuffer(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

    impl LogBuffer {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().expect("log lock")).into_owned()
        }
    }

    impl std::io::Write for LogBuffer {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("log lock").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogBuffer {
        type Writer = LogBuffer;

        fn make_writer(&'a self) -> Self::Writer {
            self.clone()
        }
    }

    #[tokio::test]
    async fn a_failed_delivery_is_logged_with_the_origin_only() {
        let logs = LogBuffer::default();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .finish();
        // The test runtime has one thread, so the spawned task logs to this subscriber.
        let _guard = tracing::subscriber::set_default(subscriber);
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        drop(listener);
        let webhooks = webhooks_with(loopback_client(), 2);
        let closed = Url::parse(&format!(
            "http://127.0.0.1:{port}/hook-path?token=t0ps3cret"
        ))
        .expect("url");
        webhooks.deliver(closed, page_event());
        let deadline = Instant::now() + Duration::from_secs(10);
        while !logs.text().contains("webhook not delivered") {
            assert!(
                Instant::now() < deadline,
                "no outcome logged: {}",
                logs.text()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let text = logs.text();
        assert!(text.contains("will retry"), "{text}");
        assert!(text.contains(&format!("http://127.0.0.1:{port}")), "{text}");
        assert!(
            !text.contains("hook-path") && !text.contains("t0ps3cret"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn deliver_sends_in_the_background() {
        let server = FixtureServer::start().await.expect("fixture server starts");
        let webhooks = webhooks_with(loopback_client(), 5);
        webhooks.deliver(url(&server, "/webhook?token=abc"), page_event());
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.hits("/webhook") == 0 {
            assert!(Instant::now() < deadline, "the webhook never arrived");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(server.requests()[0].path_and_query, "/webhook?token=abc");
    }
}
