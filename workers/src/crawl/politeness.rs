//! Per-host politeness inside one process: at most N requests in flight per host, and a
//! minimum gap between the starts of two requests to it, raised (never lowered) by the host's
//! robots.txt `Crawl-delay`. Waiters for one host are served in the order they asked. Hosts
//! unused for a while are forgotten, so memory follows the hosts in recent use. [`Config`]
//! (`[politeness]`) also holds how long a crawl page waits for a robots.txt that cannot be
//! fetched, which the crawl in `trawl` applies.
//!
//! Not here: the gate shared by every worker of a namespace (`trawl`'s crawl module keeps it
//! in Redis, with these same limits, and falls back to this one when Redis is unreachable),
//! backing off on 429 or `Retry-After` (the runner's retry delay honours `Retry-After`), or
//! choosing which URL goes next.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;
use url::Url;

use crate::crawl::robots::MAX_CRAWL_DELAY;

/// Politeness limits. Every field is a `trawl.toml` key under `[politeness]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Requests in flight to one host at most (1..=1024).
    pub max_concurrent_per_host: usize,
    /// Least time between the starts of two requests to one host, in milliseconds
    /// (0..=60,000). A robots.txt `Crawl-delay` above it wins, up to 60 s.
    pub min_delay_ms: u64,
    /// Seconds a host may sit unused (nothing in flight or waiting, its last delay over) before
    /// the gate forgets it, which keeps memory bounded by the hosts in recent use (1..=86,400).
    pub idle_forget_secs: u64,
    /// Seconds a crawl page waits for its host's robots.txt while it cannot be fetched (5xx,
    /// 429, network failure), asking again with a growing pause (1 s doubling to 60 s); past
    /// this, the page ends `robots_unreachable` (0..=86,400; 0: at once).
    pub robots_wait_secs: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_concurrent_per_host: 2,
            min_delay_ms: 500,
            idle_forget_secs: 300,
            robots_wait_secs: 300,
        }
    }
}

/// A `[politeness]` setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `max_concurrent_per_host` is out of its bounds.
    #[error("politeness.max_concurrent_per_host = {0} is outside 1..=1024")]
    MaxConcurrentPerHost(usize),
    /// `min_delay_ms` is above its bound.
    #[error("politeness.min_delay_ms = {0} is above 60000")]
    MinDelay(u64),
    /// `idle_forget_secs` is out of its bounds.
    #[error("politeness.idle_forget_secs = {0} is outside 1..=86400")]
    IdleForget(u64),
    /// `robots_wait_secs` is above its bound.
    #[error("politeness.robots_wait_secs = {0} is above 86400")]
    RobotsWait(u64),
}

impl Config {
    /// Checks the values against their fixed bounds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=1024).contains(&self.max_concurrent_per_host) {
            return Err(ConfigError::MaxConcurrentPerHost(
                self.max_concurrent_per_host,
            ));
        }
        if self.min_delay_ms > 60_000 {
            return Err(ConfigError::MinDelay(self.min_delay_ms));
        }
        if !(1..=86_400).contains(&self.idle_forget_secs) {
            return Err(ConfigError::IdleForget(self.idle_forget_secs));
        }
        if self.robots_wait_secs > 86_400 {
            return Err(ConfigError::RobotsWait(self.robots_wait_secs));
        }
        Ok(())
    }
}

/// The per-host gate: take a [`Permit`] before each request to a host and drop it when the
/// response is read.
#[derive(Debug)]
pub struct HostGate {
    max_concurrent: usize,
    min_delay: Duration,
    idle_forget: Duration,
    hosts: Mutex<Hosts>,
}

/// Leave to send one request to a host; dropping it frees the host's slot.
#[derive(Debug)]
pub struct Permit {
    _slot: OwnedSemaphorePermit,
    // Keeps the host's state alive (and counted as in use) while the request runs.
    _host: Arc<HostState>,
    waited: Duration,
}

#[derive(Debug)]
struct Hosts {
    by_name: HashMap<String, Arc<HostState>>,
    last_sweep: Instant,
}

#[derive(Debug)]
struct HostState {
    slots: Arc<Semaphore>,
    /// Held while a waiter takes its slot and books its start: tokio's mutex is fair (FIFO),
    /// so waiters are served in the order they called `acquire`.
    schedule: tokio::sync::Mutex<Schedule>,
}

#[derive(Debug, Default)]
struct Schedule {
    last_start: Option<Instant>,
    last_delay: Duration,
}

impl HostGate {
    /// Builds a gate with the given limits (a concurrency of 0 is taken as 1).
    pub fn new(config: &Config) -> HostGate {
        HostGate {
            max_concurrent: config.max_concurrent_per_host.max(1),
            min_delay: Duration::from_millis(config.min_delay_ms),
            idle_forget: Duration::from_secs(config.idle_forget_secs.max(1)),
            hosts: Mutex::new(Hosts {
                by_name: HashMap::new(),
                last_sweep: Instant::now(),
            }),
        }
    }

    /// Waits until a request to `host` may start under the configured limits, and returns the
    /// permit for it. See [`HostGate::acquire_with_delay`].
    pub async fn acquire(&self, host: &str) -> Permit {
        self.acquire_with_delay(host, None).await
    }

    /// Waits until a request to `host` may start, with the host's robots.txt `Crawl-delay`
    /// (see [`HostGate::delay_for`]), and returns the permit for it.
    ///
    /// Waiters for one host are served first come, first served: each takes a free slot, then
    /// books the earliest start at least the delay after the previous start, then sleeps until
    /// it. `host` is any key (see [`host_key`]). Cancelling the call while it waits is safe;
    /// cancelling it after the start was booked leaves that start unused, so the next request
    /// waits as if it had happened.
    pub async fn acquire_with_delay(&self, host: &str, crawl_delay: Option<Duration>) -> Permit {
        let asked_at = Instant::now();
        let delay = self.delay_for(crawl_delay);
        let state = self.host_state(host);
        let mut schedule = state.schedule.lock().await;
        let slot = Arc::clone(&state.slots)
            .acquire_owned()
            .await
            .expect("the gate never closes its semaphores");
        let now = Instant::now();
        let start = schedule
            .last_start
            .map_or(now, |last| (last + delay).max(now));
        schedule.last_start = Some(start);
        schedule.last_delay = delay;
        drop(schedule);
        tokio::time::sleep_until(start).await;
        Permit {
            _slot: slot,
            _host: state,
            waited: start.saturating_duration_since(asked_at),
        }
    }

    /// The gap enforced between request starts: the configured minimum, or the `Crawl-delay`
    /// when larger, cut to the robots.txt cap of 60 s.
    pub fn delay_for(&self, crawl_delay: Option<Duration>) -> Duration {
        crawl_delay
            .map_or(self.min_delay, |delay| delay.max(self.min_delay))
            .min(MAX_CRAWL_DELAY.max(self.min_delay))
    }

    /// How many hosts the gate remembers right now.
    pub fn tracked_hosts(&self) -> usize {
        lock(&self.hosts).by_name.len()
    }

    /// Forgets every idle host now (the gate also does this by itself, at most once per
    /// `idle_forget_secs`, when a permit is asked for); returns how many were forgotten.
    pub fn forget_idle(&self) -> usize {
        let mut hosts = lock(&self.hosts);
        let now = Instant::now();
        hosts.last_sweep = now;
        sweep(&mut hosts.by_name, now, self.idle_forget)
    }

    fn host_state(&self, host: &str) -> Arc<HostState> {
        let mut hosts = lock(&self.hosts);
        let now = Instant::now();
        if now.saturating_duration_since(hosts.last_sweep) >= self.idle_forget {
            hosts.last_sweep = now;
            sweep(&mut hosts.by_name, now, self.idle_forget);
        }
        if let Some(state) = hosts.by_name.get(host) {
            return Arc::clone(state);
        }
        let state = Arc::new(HostState {
            slots: Arc::new(Semaphore::new(self.max_concurrent)),
            schedule: tokio::sync::Mutex::new(Schedule::default()),
        });
        hosts.by_name.insert(host.to_owned(), Arc::clone(&state));
        state
    }
}

impl Permit {
    /// How long the caller waited for this permit.
    pub fn waited(&self) -> Duration {
        self.waited
    }
}

/// Returns the gate key of a URL: its host name, lower-case, without a trailing dot and
/// without the port, so `http` and `https` (and every port) of one host share a budget.
/// Empty for a URL without a host.
pub fn host_key(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default();
    host.strip_suffix('.').unwrap_or(host).to_owned()
}

/// Removes the idle hosts; returns how many.
fn sweep(
    by_name: &mut HashMap<String, Arc<HostState>>,
    now: Instant,
    idle_forget: Duration,
) -> usize {
    let before = by_name.len();
    // The map's own reference is the only one when nobody holds a permit or waits for one, and
    // new references are only made under the map's lock, which the caller holds.
    by_name.retain(|_, state| {
        if Arc::strong_count(state) > 1 {
            return true;
        }
        match state.schedule.try_lock() {
            Ok(schedule) => schedule
                .last_start
                .is_some_and(|last| now < last + schedule.last_delay + idle_forget),
            Err(_) => true,
        }
    });
    before - by_name.len()
}

fn lock(hosts: &Mutex<Hosts>) -> MutexGuard<'_, Hosts> {
    // Nothing panics while holding the lock, and a map of host states stays usable anyway.
    hosts
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use tokio::sync::mpsc;

    use super::*;

    fn gate(max_concurrent_per_host: usize, min_delay_ms: u64) -> Arc<HostGate> {
        Arc::new(HostGate::new(&Config {
            max_concurrent_per_host,
            min_delay_ms,
            ..Config::default()
        }))
    }

    /// Spawns a task that takes a permit for `host`, reports its name and start time, holds the
    /// permit for `hold`, then drops it. Yields afterwards so the task queues in spawn order.
    async fn spawn_request(
        gate: &Arc<HostGate>,
        host: &'static str,
        name: &'static str,
        crawl_delay: Option<Duration>,
        hold: Duration,
        starts: &mpsc::UnboundedSender<(&'static str, Instant)>,
    ) {
        let gate = Arc::clone(gate);
        let starts = starts.clone();
        tokio::spawn(async move {
            let permit = gate.acquire_with_delay(host, crawl_delay).await;
            starts.send((name, Instant::now())).expect("receiver alive");
            tokio::time::sleep(hold).await;
            drop(permit);
        });
        tokio::task::yield_now().await;
    }

    async fn collect(
        mut starts: mpsc::UnboundedReceiver<(&'static str, Instant)>,
        n: usize,
        origin: Instant,
    ) -> Vec<(&'static str, Duration)> {
        let mut seen = Vec::new();
        for _ in 0..n {
            let (name, at) = starts.recv().await.expect("a start");
            seen.push((name, at - origin));
        }
        seen
    }

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    #[tokio::test(start_paused = true)]
    async fn starts_are_spaced_by_the_minimum_delay_in_arrival_order() {
        let gate = gate(4, 1000);
        let (tx, rx) = mpsc::unbounded_channel();
        let origin = Instant::now();
        for name in ["a", "b", "c", "d"] {
            spawn_request(&gate, "example.com", name, None, ms(10), &tx).await;
        }
        let seen = collect(rx, 4, origin).await;
        assert_eq!(
            seen,
            [
                ("a", ms(0)),
                ("b", ms(1000)),
                ("c", ms(2000)),
                ("d", ms(3000))
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn concurrency_is_capped_per_host() {
        let gate = gate(2, 0);
        let (tx, rx) = mpsc::unbounded_channel();
        let origin = Instant::now();
        spawn_request(&gate, "example.com", "a", None, ms(5000), &tx).await;
        spawn_request(&gate, "example.com", "b", None, ms(3000), &tx).await;
        spawn_request(&gate, "example.com", "c", None, ms(1000), &tx).await;
        spawn_request(&gate, "example.com", "d", None, ms(1000), &tx).await;
        let seen = collect(rx, 4, origin).await;
        // c takes b's slot when b finishes at 3 s; d takes the next one free: c's at 4 s.
        assert_eq!(
            seen,
            [("a", ms(0)), ("b", ms(0)), ("c", ms(3000)), ("d", ms(4000))]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn waiters_are_served_first_come_first_served() {
        let gate = gate(1, 0);
        let (tx, rx) = mpsc::unbounded_channel();
        let origin = Instant::now();
        let names = ["a", "b", "c", "d", "e", "f"];
        for name in names {
            spawn_request(&gate, "example.com", name, None, ms(100), &tx).await;
        }
        let seen = collect(rx, names.len(), origin).await;
        let order: Vec<&str> = seen.iter().map(|(name, _)| *name).collect();
        assert_eq!(order, names);
        for (index, (_, at)) in seen.iter().enumerate() {
            assert_eq!(*at, ms(100 * index as u64));
        }
    }

    #[tokio::test(start_paused = true)]
    async fn crawl_delay_raises_the_gap_but_never_lowers_it() {
        let gate = gate(4, 1000);
        assert_eq!(gate.delay_for(None), ms(1000));
        assert_eq!(gate.delay_for(Some(ms(200))), ms(1000));
        assert_eq!(gate.delay_for(Some(ms(3000))), ms(3000));
        assert_eq!(
            gate.delay_for(Some(Duration::from_secs(3600))),
            MAX_CRAWL_DELAY
        );

        let (tx, rx) = mpsc::unbounded_channel();
        let origin = Instant::now();
        for name in ["a", "b", "c"] {
            spawn_request(&gate, "slow.example", name, Some(ms(3000)), ms(10), &tx).await;
        }
        spawn_request(&gate, "slow.example", "d", Some(ms(200)), ms(10), &tx).await;
        let seen = collect(rx, 4, origin).await;
        assert_eq!(
            seen,
            [
                ("a", ms(0)),
                ("b", ms(3000)),
                ("c", ms(6000)),
                ("d", ms(7000))
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn hosts_do_not_wait_for_each_other() {
        let gate = gate(1, 10_000);
        let (tx, rx) = mpsc::unbounded_channel();
        let origin = Instant::now();
        spawn_request(&gate, "a.example", "a1", None, ms(10), &tx).await;
        spawn_request(&gate, "b.example", "b1", None, ms(10), &tx).await;
        spawn_request(&gate, "a.example", "a2", None, ms(10), &tx).await;
        spawn_request(&gate, "c.example", "c1", None, ms(10), &tx).await;
        let mut seen = collect(rx, 4, origin).await;
        seen.sort();
        assert_eq!(
            seen,
            [
                ("a1", ms(0)),
                ("a2", ms(10_000)),
                ("b1", ms(0)),
                ("c1", ms(0))
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_cancelled_waiter_does_not_block_the_queue() {
        let gate = gate(1, 0);
        let held = gate.acquire("example.com").await;
        let cancelled = tokio::time::timeout(ms(500), gate.acquire("example.com")).await;
        assert!(cancelled.is_err(), "the slot is taken");
        let (tx, rx) = mpsc::unbounded_channel();
        let origin = Instant::now();
        spawn_request(&gate, "example.com", "next", None, ms(10), &tx).await;
        tokio::time::sleep(ms(2000)).await;
        drop(held);
        let seen = collect(rx, 1, origin).await;
        assert_eq!(seen, [("next", ms(2000))]);
    }

    #[tokio::test(start_paused = true)]
    async fn permits_report_their_wait() {
        let gate = gate(1, 1500);
        let first = gate.acquire("example.com").await;
        assert_eq!(first.waited(), Duration::ZERO);
        drop(first);
        let second = gate.acquire("example.com").await;
        assert_eq!(second.waited(), ms(1500));
    }

    #[tokio::test(start_paused = true)]
    async fn idle_hosts_are_forgotten_and_busy_ones_kept() {
        let gate = Arc::new(HostGate::new(&Config {
            max_concurrent_per_host: 1,
            min_delay_ms: 1000,
            idle_forget_secs: 60,
            ..Config::default()
        }));
        for n in 0..100 {
            drop(gate.acquire(&format!("host{n}.example")).await);
        }
        let busy = gate.acquire("busy.example").await;
        // A waiter queued behind the busy host's only slot.
        let waiter = {
            let gate = Arc::clone(&gate);
            tokio::spawn(async move { drop(gate.acquire("busy.example").await) })
        };
        tokio::task::yield_now().await;
        assert_eq!(gate.tracked_hosts(), 101);
        assert_eq!(gate.forget_idle(), 0, "nothing is idle yet");

        tokio::time::advance(Duration::from_secs(62)).await;
        assert_eq!(gate.forget_idle(), 100);
        assert_eq!(gate.tracked_hosts(), 1);

        // The sweep also runs by itself when permits are asked for.
        drop(busy);
        waiter.await.expect("waiter finishes");
        tokio::time::advance(Duration::from_secs(62)).await;
        drop(gate.acquire("fresh.example").await);
        assert_eq!(gate.tracked_hosts(), 1, "busy.example was forgotten");

        // A forgotten host starts at once: its last delay was long over.
        let again = gate.acquire("host1.example").await;
        assert_eq!(again.waited(), Duration::ZERO);
    }

    #[tokio::test(start_paused = true)]
    async fn a_host_is_not_forgotten_while_its_delay_runs() {
        let gate = HostGate::new(&Config {
            max_concurrent_per_host: 1,
            min_delay_ms: 0,
            idle_forget_secs: 1,
            ..Config::default()
        });
        drop(
            gate.acquire_with_delay("example.com", Some(Duration::from_secs(30)))
                .await,
        );
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(gate.forget_idle(), 0);
        let next = gate
            .acquire_with_delay("example.com", Some(Duration::from_secs(30)))
            .await;
        assert_eq!(next.waited(), Duration::from_secs(25));
    }

    #[test]
    fn host_keys_ignore_port_scheme_and_trailing_dot() {
        let key = |input: &str| host_key(&Url::parse(input).expect("parses"));
        assert_eq!(key("https://Example.COM:8443/a"), "example.com");
        assert_eq!(key("http://example.com./"), "example.com");
        assert_eq!(key("http://[::1]:8080/"), "[::1]");
        assert_eq!(key("https://bücher.example/"), "xn--bcher-kva.example");
        assert_eq!(key("mailto:a@b.c"), "");
    }

    #[test]
    fn config_bounds() {
        assert_eq!(Config::default().validate(), Ok(()));
        let zero = Config {
            max_concurrent_per_host: 0,
            ..Config::default()
        };
        assert!(zero.validate().is_err());
        let slow = Config {
            min_delay_ms: 60_001,
            ..Config::default()
        };
        assert!(slow.validate().is_err());
        let never = Config {
            idle_forget_secs: 0,
            ..Config::default()
        };
        assert!(never.validate().is_err());
        let parsed: Config = serde_json::from_str(r#"{"min_delay_ms": 0}"#).expect("parses");
        assert_eq!(parsed.max_concurrent_per_host, 2);
        assert!(serde_json::from_str::<Config>(r#"{"delay": 1}"#).is_err());
    }
}
