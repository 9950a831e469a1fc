//! Exponential backoff: a delay that doubles from a base at each failure, up to a cap. One
//! rule for every retry of both crates (a job's retries, webhook deliveries, robots.txt that
//! could not be fetched, a pool worker started again after an outage), so they all read the
//! same way and none can overflow.
//!
//! Not here: jitter and a server's `Retry-After` (the job runner adds those), nor counting
//! failures (each caller knows its own).

use std::time::Duration;

/// Delays doubling from `base` up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    base: Duration,
    max: Duration,
}

impl Backoff {
    /// Delays from `base`, doubling, never above `max`.
    pub const fn new(base: Duration, max: Duration) -> Backoff {
        Backoff { base, max }
    }

    /// The delay after `doublings` doublings: `base` for 0, twice `base` for 1, … at most
    /// `max` (also for huge counts).
    pub fn delay(&self, doublings: u32) -> Duration {
        let factor = 1_u32.checked_shl(doublings.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// The delay before retry number `retry` (1 for the first retry): `base`, then doubling.
    pub fn before_retry(&self, retry: u32) -> Duration {
        self.delay(retry.saturating_sub(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_the_base_up_to_the_cap() {
        let backoff = Backoff::new(Duration::from_millis(250), Duration::from_secs(5));
        let delays: Vec<u128> = (0..7).map(|n| backoff.delay(n).as_millis()).collect();
        assert_eq!(delays, [250, 500, 1_000, 2_000, 4_000, 5_000, 5_000]);
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(5));
        assert_eq!(backoff.before_retry(1), Duration::from_millis(250));
        assert_eq!(backoff.before_retry(0), Duration::from_millis(250));
        assert_eq!(backoff.before_retry(3), Duration::from_secs(1));
        let huge = Backoff::new(Duration::from_secs(u64::MAX / 2), Duration::MAX);
        assert_eq!(
            huge.delay(40),
            Duration::MAX,
            "saturates instead of overflowing"
        );
    }
}
