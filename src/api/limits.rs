//! Per-client request limits on the protected routes: a rate (a token bucket refilled at
//! `api.rate_limit_per_second`, holding at most `api.rate_limit_burst`) and a number of
//! requests being handled at once (`api.max_requests_in_flight`), counted per bearer token
//! (its fingerprint) or, on a server without tokens, per client IP address. A request over
//! either limit is answered 429 `rate_limited` with `Retry-After`. A limit set to 0 is off.
//!
//! Hand-written rather than `governor`: that crate is not in the build, and a keyed bucket
//! with an in-flight count is a few lines; `governor` has no in-flight count.
//!
//! Not here: who the client is (`auth` records it), connection limits (`server`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse as _, Response};

use super::auth::TokenId;
use super::error::{ApiError, ApiErrorCode};

/// Past this many clients remembered, idle ones with a full bucket are forgotten.
const FORGET_ABOVE: usize = 10_000;

/// The limits of one router's clients.
#[derive(Debug)]
pub(super) struct Limiter {
    /// Whether the server has tokens: clients are then told apart by token, else by address.
    has_tokens: bool,
    per_second: f64,
    burst: f64,
    max_in_flight: usize,
    clients: Mutex<HashMap<String, Client>>,
}

#[derive(Debug)]
struct Client {
    /// Requests the client may still make at once (refilled over time, at most `burst`).
    tokens: f64,
    refilled: Instant,
    in_flight: usize,
}

/// A request admitted: counted in flight until dropped.
struct Admitted {
    limiter: Arc<Limiter>,
    key: String,
}

impl Limiter {
    /// The limits `[api]` sets.
    pub(super) fn new(config: &super::Config) -> Arc<Limiter> {
        Arc::new(Limiter {
            has_tokens: !config.tokens.is_empty() || config.admin_token.is_some(),
            per_second: f64::from(config.rate_limit_per_second),
            burst: f64::from(config.rate_limit_burst.max(1)),
            max_in_flight: config.max_requests_in_flight,
            clients: Mutex::new(HashMap::new()),
        })
    }

    /// Admits a request of `key` now, or says how long to wait.
    fn admit(self: &Arc<Self>, key: &str, now: Instant) -> Result<Admitted, Duration> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if clients.len() > FORGET_ABOVE {
            let burst = self.burst;
            clients.retain(|_, client| client.in_flight > 0 || client.tokens < burst);
        }
        let client = clients.entry(key.to_owned()).or_insert(Client {
            tokens: self.burst,
            refilled: now,
            in_flight: 0,
        });
        if self.max_in_flight > 0 && client.in_flight >= self.max_in_flight {
            return Err(Duration::from_secs(1));
        }
        if self.per_second > 0.0 {
            let elapsed = now.saturating_duration_since(client.refilled).as_secs_f64();
            client.tokens = (client.tokens + elapsed * self.per_second).min(self.burst);
            client.refilled = now;
            if client.tokens < 1.0 {
                return Err(Duration::from_secs_f64(
                    (1.0 - client.tokens) / self.per_second,
                ));
            }
            client.tokens -= 1.0;
        }
        client.in_flight += 1;
        Ok(Admitted {
            limiter: self.clone(),
            key: key.to_owned(),
        })
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut clients = self
            .limiter
            .clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(client) = clients.get_mut(&self.key) {
            client.in_flight = client.in_flight.saturating_sub(1);
        }
    }
}

/// Lets a request through within its client's limits, else answers 429 `rate_limited` with
/// `Retry-After` (whole seconds, at least 1). Runs after `auth`, which names the client.
pub(super) async fn limit_requests(
    State(limiter): State<Arc<Limiter>>,
    request: Request,
    next: Next,
) -> Response {
    if limiter.per_second <= 0.0 && limiter.max_in_flight == 0 {
        return next.run(request).await;
    }
    let Some(key) = client_key(&request, limiter.has_tokens) else {
        // The admin token is not limited.
        return next.run(request).await;
    };
    match limiter.admit(&key, Instant::now()) {
        Ok(admitted) => {
            let response = next.run(request).await;
            drop(admitted);
            response
        }
        Err(wait) => {
            let mut response = ApiError::new(
                ApiErrorCode::RateLimited,
                "too many requests from this client; retry after the Retry-After seconds",
            )
            .into_response();
            let seconds = wait.as_secs_f64().ceil().max(1.0) as u64;
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
            response
        }
    }
}

/// Who the client is: with tokens, the token `auth` found (its fingerprint; `None` for the
/// admin token, which is not limited); without, its IP address (any `Authorization` it sends
/// is ignored, so it cannot pick fresh buckets).
fn client_key(request: &Request, has_tokens: bool) -> Option<String> {
    if has_tokens && let Some(TokenId(token)) = request.extensions().get::<TokenId>() {
        return token.as_ref().map(|token| format!("token:{token}"));
    }
    Some(
        match request.extensions().get::<ConnectInfo<SocketAddr>>() {
            Some(ConnectInfo(peer)) => format!("ip:{}", peer.ip()),
            None => "ip:unknown".to_owned(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(per_second: u32, burst: u32, max_in_flight: usize) -> Arc<Limiter> {
        Limiter::new(&crate::api::Config {
            rate_limit_per_second: per_second,
            rate_limit_burst: burst,
            max_requests_in_flight: max_in_flight,
            ..crate::api::Config::default()
        })
    }

    #[test]
    fn a_burst_is_allowed_then_the_rate_refills_it() {
        let limiter = limiter(10, 5, 0);
        let start = Instant::now();
        for _ in 0..5 {
            drop(limiter.admit("a", start).expect("within the burst"));
        }
        let wait = limiter.admit("a", start).err().expect("over the burst");
        assert!(wait <= Duration::from_millis(100), "{wait:?}");
        assert!(
            limiter.admit("b", start).is_ok(),
            "another client has its own"
        );
        let later = start + Duration::from_millis(250);
        for _ in 0..2 {
            drop(limiter.admit("a", later).expect("refilled"));
        }
    }

    #[test]
    fn requests_in_flight_are_bounded_and_given_back() {
        let limiter = limiter(0, 1, 2);
        let now = Instant::now();
        let first = limiter.admit("a", now).expect("first");
        let _second = limiter.admit("a", now).expect("second");
        assert!(limiter.admit("a", now).is_err());
        drop(first);
        assert!(limiter.admit("a", now).is_ok());
    }
}
