//! Prometheus metrics: jobs by kind and outcome, job durations, fetched bytes, SSRF refusals
//! by reason, API requests by route and status, and the queue depth (read from the store at
//! scrape time). One registry per process, rendered in the text format at `GET /metrics`.
//!
//! Not here: deciding what to count (the runner and the API call these).

use prometheus::{
    Encoder as _, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};

/// The process's metrics.
#[derive(Debug, Clone)]
pub struct Metrics {
    registry: Registry,
    jobs: IntCounterVec,
    job_seconds: HistogramVec,
    fetch_bytes: IntCounter,
    ssrf_blocked: IntCounterVec,
    cache_hits: IntCounter,
    api_requests: IntCounterVec,
    queue_depth: IntGauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Metrics {
        let registry =
            Registry::new_custom(Some("trawl".to_owned()), None).expect("a valid prefix");
        let jobs = IntCounterVec::new(
            Opts::new("jobs_total", "jobs ended, by kind and outcome"),
            &["kind", "outcome"],
        )
        .expect("valid metric");
        let job_seconds = HistogramVec::new(
            HistogramOpts::new(
                "job_duration_seconds",
                "time from a job's first attempt to its end",
            )
            .buckets(vec![
                0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
            ]),
            &["kind"],
        )
        .expect("valid metric");
        let fetch_bytes = IntCounter::new("fetch_bytes_total", "decoded response bytes fetched")
            .expect("valid metric");
        let ssrf_blocked = IntCounterVec::new(
            Opts::new(
                "ssrf_blocked_total",
                "destinations refused by the ssrf guard, by reason",
            ),
            &["reason"],
        )
        .expect("valid metric");
        let cache_hits = IntCounter::new("cache_hits_total", "fetches served from the page cache")
            .expect("valid metric");
        let api_requests = IntCounterVec::new(
            Opts::new("api_requests_total", "api requests, by route and status"),
            &["route", "status"],
        )
        .expect("valid metric");
        let queue_depth =
            IntGauge::new("queue_depth", "jobs queued and not yet started").expect("valid metric");
        for collector in [
            Box::new(jobs.clone()) as Box<dyn prometheus::core::Collector>,
            Box::new(job_seconds.clone()),
            Box::new(fetch_bytes.clone()),
            Box::new(ssrf_blocked.clone()),
            Box::new(cache_hits.clone()),
            Box::new(api_requests.clone()),
            Box::new(queue_depth.clone()),
        ] {
            registry
                .register(collector)
                .expect("each metric registers once");
        }
        Metrics {
            registry,
            jobs,
            job_seconds,
            fetch_bytes,
            ssrf_blocked,
            cache_hits,
            api_requests,
            queue_depth,
        }
    }

    /// Counts a job's end.
    pub fn job_ended(&self, kind: &str, outcome: &str, seconds: Option<f64>) {
        self.jobs.with_label_values(&[kind, outcome]).inc();
        if let Some(seconds) = seconds {
            self.job_seconds.with_label_values(&[kind]).observe(seconds);
        }
    }

    /// Counts fetched bytes.
    pub fn fetched(&self, bytes: usize) {
        self.fetch_bytes.inc_by(bytes as u64);
    }

    /// Counts an SSRF refusal.
    pub fn ssrf_blocked(&self, reason: &str) {
        self.ssrf_blocked.with_label_values(&[reason]).inc();
    }

    /// Counts a cache hit.
    pub fn cache_hit(&self) {
        self.cache_hits.inc();
    }

    /// Counts an API request.
    pub fn api_request(&self, route: &str, status: u16) {
        self.api_requests
            .with_label_values(&[route, &status.to_string()])
            .inc();
    }

    /// Registers another module's collector (web search's counters) in this registry; a
    /// collector registered twice is counted once.
    pub fn register(&self, collector: Box<dyn prometheus::core::Collector>) {
        if let Err(error) = self.registry.register(collector) {
            tracing::debug!(error = %error, "metric not registered");
        }
    }

    /// Sets the queue depth.
    pub fn set_queue_depth(&self, depth: u64) {
        self.queue_depth.set(depth as i64);
    }

    /// Renders every metric in the Prometheus text format.
    pub fn render(&self) -> String {
        let mut buffer = Vec::new();
        if TextEncoder::new()
            .encode(&self.registry.gather(), &mut buffer)
            .is_err()
        {
            return String::new();
        }
        String::from_utf8(buffer).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counted_values_with_the_prefix() {
        let metrics = Metrics::new();
        metrics.job_ended("fetch", "succeeded", Some(0.2));
        metrics.ssrf_blocked("loopback");
        metrics.set_queue_depth(7);
        let text = metrics.render();
        assert!(
            text.contains("trawl_jobs_total{kind=\"fetch\",outcome=\"succeeded\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("trawl_ssrf_blocked_total{reason=\"loopback\"} 1"),
            "{text}"
        );
        assert!(text.contains("trawl_queue_depth 7"), "{text}");
    }
}
