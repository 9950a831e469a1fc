//! The search providers of a process ([`Searcher`]): a request is checked against the
//! operator's configuration (forbidden engines, configured providers), served from the cache
//! when an answer is fresh (`cached: true`), else asked of the provider in its turn (each
//! provider's pace: DuckDuckGo at most one request a second per process by default), falling
//! over from SearxNG to DuckDuckGo under `auto`, and its outcome is counted per provider.
//! Callers go through `web_search::search` and `web_search::images`, which take the shared
//! parts (`Deps`, which holds the `Searcher`).
//!
//! The providers' base URLs are the operator's, so each provider's client trusts exactly its
//! origin (a SearxNG on a private address is reachable, nothing else private is, not even by
//! a redirect from it). Result URLs are not fetched here: a search job's `fetch_top` makes
//! them fetch jobs, which go through the guard like any. The query is never logged at info
//! level or above.
//!
//! Not here: the providers' protocols (`trawl_workers::search`), turning results into fetch
//! jobs (`web_search`), HTTP handlers (`api::web_search`).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lru::LruCache;
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts};
use trawl_workers::job::{
    ErrorCode, ImagesJob, ImagesResult, JobError, Provider, ProviderFailure, SearchJob,
    SearchResult,
};
use trawl_workers::search::{self, Endpoint, Pace, images::Jar};
use trawl_workers::web;
use url::Url;

use crate::metrics::Metrics;

pub use trawl_workers::search::Config;

/// Why a search gave no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum SearchError {
    /// The request does not fit its bounds (an empty query, a limit above 50): nothing was
    /// asked.
    #[error("{0}")]
    Invalid(String),
    /// The request is refused by the configuration (`search_engine_forbidden`,
    /// `search_unconfigured`): nothing was asked.
    #[error("{0}")]
    Refused(JobError),
    /// Every provider tried failed; the error is the last one's, its message names each.
    #[error("{0}")]
    Failed(JobError),
}

impl SearchError {
    /// The error as a job stores it.
    pub fn to_job_error(&self) -> JobError {
        match self {
            SearchError::Invalid(message) => JobError::new(ErrorCode::Internal, message.clone()),
            SearchError::Refused(error) | SearchError::Failed(error) => error.clone(),
        }
    }
}

/// One provider's client (trusting its own origin), base URL and pace.
#[derive(Debug)]
struct Site {
    client: web::Client,
    base: Url,
}

impl Site {
    fn new(client: &web::Client, url: &str) -> Result<Site, String> {
        let base = search::base_url(url)?;
        let client = client
            .with_trusted_origin(&base)
            .map_err(|error| error.to_string())?;
        Ok(Site { client, base })
    }

    fn endpoint<'a>(&'a self, pace: &'a Pace) -> Endpoint<'a> {
        Endpoint {
            client: &self.client,
            base: &self.base,
            pace,
        }
    }
}

/// An answer in the cache.
#[derive(Debug, Clone)]
enum Answer {
    Search(Box<SearchResult>),
    Images(ImagesResult),
}

/// The search capability of a process: providers, their paces, the cookie jar, the cache and
/// the metrics. Built once with the application ([`Searcher::new`]), shared through `Deps`.
#[derive(Debug, Clone)]
pub struct Searcher {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    config: Config,
    searxng: Option<Site>,
    searxng_pace: Pace,
    html: Site,
    instant: Site,
    images: Site,
    duckduckgo_pace: Pace,
    jar: Jar,
    cache: Mutex<LruCache<String, (tokio::time::Instant, Answer)>>,
    requests: IntCounterVec,
    seconds: HistogramVec,
}

impl Searcher {
    /// The providers `config` names over `client`, counting into `metrics`
    /// (`trawl_web_search_total{provider,outcome}`, `trawl_web_search_duration_seconds`).
    pub fn new(
        config: &Config,
        client: &web::Client,
        metrics: &Metrics,
    ) -> Result<Searcher, String> {
        let requests = IntCounterVec::new(
            Opts::new(
                "web_search_total",
                "web searches, by provider and outcome (ok, cached, or the error code)",
            ),
            &["provider", "outcome"],
        )
        .expect("a valid metric");
        let seconds = HistogramVec::new(
            HistogramOpts::new(
                "web_search_duration_seconds",
                "time a provider took to answer a search (cache hits not counted)",
            )
            .buckets(vec![0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0]),
            &["provider"],
        )
        .expect("a valid metric");
        metrics.register(Box::new(requests.clone()));
        metrics.register(Box::new(seconds.clone()));
        Searcher::build(config, client, requests, seconds)
    }

    /// The same capability under another configuration, counting into the same metrics (its
    /// cache and paces start afresh).
    pub fn reconfigured(&self, config: &Config, client: &web::Client) -> Result<Searcher, String> {
        Searcher::build(
            config,
            client,
            self.inner.requests.clone(),
            self.inner.seconds.clone(),
        )
    }

    fn build(
        config: &Config,
        client: &web::Client,
        requests: IntCounterVec,
        seconds: HistogramVec,
    ) -> Result<Searcher, String> {
        config.validate()?;
        let searxng = match &config.searxng.url {
            Some(url) => Some(Site::new(client, url)?),
            None => None,
        };
        let entries = NonZeroUsize::new(config.cache_entries).unwrap_or(NonZeroUsize::MIN);
        Ok(Searcher {
            inner: Arc::new(Inner {
                searxng,
                searxng_pace: Pace::new(Duration::from_millis(config.searxng.min_interval_ms)),
                html: Site::new(client, &config.duckduckgo.html_url)?,
                instant: Site::new(client, &config.duckduckgo.instant_url)?,
                images: Site::new(client, &config.duckduckgo.images_url)?,
                duckduckgo_pace: Pace::new(Duration::from_millis(
                    config.duckduckgo.min_interval_ms,
                )),
                jar: Jar::new(),
                cache: Mutex::new(LruCache::new(entries)),
                requests,
                seconds,
                config: config.clone(),
            }),
        })
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Checks a request before anything is asked: its bounds, then the configuration (an
    /// engine the operator forbids, SearxNG asked for without `search.searxng.url`).
    pub fn check(&self, request: &SearchJob) -> Result<(), SearchError> {
        request.validate().map_err(SearchError::Invalid)?;
        if let Some(engine) = request
            .engines
            .iter()
            .find(|engine| self.inner.config.forbids(engine))
        {
            return Err(SearchError::Refused(JobError::new(
                ErrorCode::SearchEngineForbidden,
                format!(
                    "the engine {engine:?} is forbidden on this server \
                     (search.searxng.forbid_engines)"
                ),
            )));
        }
        if request.provider == Provider::Searxng && self.inner.searxng.is_none() {
            return Err(SearchError::Refused(JobError::new(
                ErrorCode::SearchUnconfigured,
                "no SearxNG instance is configured (search.searxng.url)",
            )));
        }
        Ok(())
    }

    /// The providers a request asks, in order.
    fn providers(&self, provider: Provider) -> Vec<Provider> {
        match provider {
            Provider::Auto if self.inner.searxng.is_some() => {
                vec![Provider::Searxng, Provider::Duckduckgo]
            }
            Provider::Auto => vec![Provider::Duckduckgo],
            other => vec![other],
        }
    }

    async fn ask(
        &self,
        provider: Provider,
        request: &SearchJob,
    ) -> Result<SearchResult, search::Error> {
        let inner = &self.inner;
        let found = match provider {
            Provider::Searxng => {
                let site = inner
                    .searxng
                    .as_ref()
                    .ok_or_else(|| search::Error::Invalid {
                        provider,
                        what: "no SearxNG instance is configured".to_owned(),
                    })?;
                search::searxng::search(site.endpoint(&inner.searxng_pace), request, &inner.config)
                    .await?
            }
            Provider::Duckduckgo | Provider::Auto => {
                search::duckduckgo::search(inner.html.endpoint(&inner.duckduckgo_pace), request)
                    .await?
            }
            Provider::Instant => {
                search::instant::search(inner.instant.endpoint(&inner.duckduckgo_pace), request)
                    .await?
            }
        };
        Ok(SearchResult {
            provider,
            hits: search::rank(found.hits, request.limit()),
            answers: found.answers,
            infoboxes: found.infoboxes,
            suggestions: found.suggestions,
            unresponsive_engines: found.unresponsive_engines,
            instant: found.instant,
            failed_over: Vec::new(),
            cached: false,
            fetch_jobs: Vec::new(),
        })
    }

    /// The cache's answer for `key` when younger than `ttl`.
    fn cached(&self, key: &str, ttl: Duration) -> Option<Answer> {
        let mut cache = self.inner.cache.lock().ok()?;
        let (at, answer) = cache.get(key)?;
        (at.elapsed() < ttl).then(|| answer.clone())
    }

    fn remember(&self, key: String, answer: Answer) {
        if let Ok(mut cache) = self.inner.cache.lock() {
            cache.put(key, (tokio::time::Instant::now(), answer));
        }
    }

    fn ttl(&self, asked: Option<u64>) -> Duration {
        Duration::from_secs(asked.unwrap_or(self.inner.config.cache_ttl_secs))
    }

    fn count(&self, provider: Provider, outcome: &str) {
        self.inner
            .requests
            .with_label_values(&[provider.as_str(), outcome])
            .inc();
    }

    /// Runs a search: checked, from the cache when fresh, else asked of the providers in
    /// turn (see `web_search::search`).
    pub async fn search(&self, request: SearchJob) -> Result<SearchResult, SearchError> {
        self.check(&request)?;
        let ttl = self.ttl(request.cache_ttl);
        let key = cache_key("search", &request);
        if !ttl.is_zero()
            && let Some(Answer::Search(mut result)) = self.cached(&key, ttl)
        {
            self.count(result.provider, "cached");
            result.cached = true;
            return Ok(*result);
        }
        let mut failures: Vec<(ProviderFailure, JobError)> = Vec::new();
        for provider in self.providers(request.provider) {
            let started = tokio::time::Instant::now();
            let answer = self.ask(provider, &request).await;
            self.inner
                .seconds
                .with_label_values(&[provider.as_str()])
                .observe(started.elapsed().as_secs_f64());
            match answer {
                Ok(mut result) => {
                    self.count(provider, "ok");
                    result.failed_over = failures.into_iter().map(|(failure, _)| failure).collect();
                    if !ttl.is_zero() {
                        self.remember(key, Answer::Search(Box::new(result.clone())));
                    }
                    return Ok(result);
                }
                Err(error) => {
                    let job_error = error.to_job_error();
                    self.count(provider, job_error.code.as_str());
                    tracing::debug!(provider = provider.as_str(), code = %job_error.code, "search provider failed");
                    failures.push((
                        ProviderFailure {
                            provider,
                            code: job_error.code,
                            message: job_error.message.clone(),
                        },
                        job_error,
                    ));
                }
            }
        }
        let messages: Vec<String> = failures
            .iter()
            .map(|(failure, _)| failure.message.clone())
            .collect();
        let (_, mut last) = failures.pop().expect("at least one provider was asked");
        if messages.len() > 1 {
            last.message = format!("every provider failed: {}", messages.join("; "));
        }
        Err(SearchError::Failed(last))
    }

    /// Runs an image search, cached like searches.
    pub async fn images(&self, request: ImagesJob) -> Result<ImagesResult, SearchError> {
        request.validate().map_err(SearchError::Invalid)?;
        let ttl = self.ttl(request.cache_ttl);
        let key = cache_key("images", &request);
        if !ttl.is_zero()
            && let Some(Answer::Images(mut result)) = self.cached(&key, ttl)
        {
            self.count(Provider::Duckduckgo, "cached");
            result.cached = true;
            return Ok(result);
        }
        let inner = &self.inner;
        let started = tokio::time::Instant::now();
        let answer = search::images::search(
            inner.images.endpoint(&inner.duckduckgo_pace),
            &inner.jar,
            &request,
        )
        .await;
        inner
            .seconds
            .with_label_values(&["duckduckgo"])
            .observe(started.elapsed().as_secs_f64());
        match answer {
            Ok(hits) => {
                self.count(Provider::Duckduckgo, "ok");
                let result = ImagesResult {
                    hits,
                    cached: false,
                };
                if !ttl.is_zero() {
                    self.remember(key, Answer::Images(result.clone()));
                }
                Ok(result)
            }
            Err(error) => {
                let job_error = error.to_job_error();
                self.count(Provider::Duckduckgo, job_error.code.as_str());
                Err(SearchError::Failed(job_error))
            }
        }
    }
}

/// The cache key of a request: its kind and every option that changes the answer (the
/// provider asked, the query, limit, language, safe search, categories, engines, page), not
/// what is done with it (`fetch_top`, `archive`, `cache_ttl`).
fn cache_key<T: serde::Serialize + Clone>(kind: &str, request: &T) -> String {
    let mut value = serde_json::to_value(request).expect("requests are plain data");
    if let Some(object) = value.as_object_mut() {
        for key in ["fetch_top", "archive", "cache_ttl"] {
            object.remove(key);
        }
    }
    format!("{kind}:{value}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_key_holds_what_changes_the_answer_only() {
        let plain = SearchJob::new("rust");
        let fetching = SearchJob {
            fetch_top: 3,
            archive: true,
            cache_ttl: Some(5),
            ..SearchJob::new("rust")
        };
        assert_eq!(cache_key("search", &plain), cache_key("search", &fetching));
        let other = SearchJob {
            limit: Some(5),
            ..SearchJob::new("rust")
        };
        assert_ne!(cache_key("search", &plain), cache_key("search", &other));
        let searxng = SearchJob {
            provider: Provider::Searxng,
            ..SearchJob::new("rust")
        };
        assert_ne!(cache_key("search", &plain), cache_key("search", &searxng));
    }
}
