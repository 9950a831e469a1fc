//! Web search, the capability every surface calls: [`search`] (SearxNG, DuckDuckGo, its
//! instant answers) and [`images`] over the process's providers (`Deps::search`, a
//! `search_providers::Searcher`: configuration checks, cache, paces, failover, metrics), and
//! [`fetch_top`], which turns a search job's top results into fetch jobs of its batch.
//! `POST /v1/web/search`, `POST /v1/web/images`, `trawl web-search`, `trawl web-images` and
//! the runner's search jobs use these, and so do the MCP tools (`web_search`, `web_images`) and
//! the Firecrawl-compatible `POST /v1/search`.
//!
//! Not here: the providers' protocols (`trawl_workers::search`), the cache and paces
//! (`search_providers`), HTTP handlers (`api::web_search`).

use trawl_workers::job::{
    FetchJob, FetchedHit, ImagesJob, ImagesResult, Job, SearchHit, SearchJob, SearchResult,
};

use crate::deps::Deps;
use crate::queue::Envelope;
pub use crate::search_providers::{Config, SearchError, Searcher};
use crate::store::NewJob;
use crate::tenant::Scope;

/// Searches the web for `request`: checked against its bounds and the configuration (a
/// forbidden engine is `search_engine_forbidden`, SearxNG unconfigured `search_unconfigured`,
/// before anything is asked), served from the cache when fresh (`cached: true`), else asked of
/// the provider: under `auto`, SearxNG when `search.searxng.url` is set, falling over to
/// DuckDuckGo (the result's `provider` says which answered, `failed_over` what failed first).
/// Results are deduplicated by normalised URL and ranked from 1, at most `limit`.
///
/// `scope` is the caller's. The cache is shared between tenants: the public providers answer
/// everyone alike. `fetch_top` and `archive` are a job's business ([`fetch_top`]) and are
/// ignored here.
pub async fn search(
    deps: &Deps,
    scope: &Scope,
    request: SearchJob,
) -> Result<SearchResult, SearchError> {
    // The query is the caller's: never logged above debug, and not even there.
    tracing::debug!(
        tenant = scope.filter().unwrap_or("*"),
        provider = request.provider.as_str(),
        "web search"
    );
    deps.search.search(request).await
}

/// Searches DuckDuckGo's images for `request` (the `vqd` token from the search page, then
/// `i.js`), cached like [`search`].
pub async fn images(
    deps: &Deps,
    scope: &Scope,
    request: ImagesJob,
) -> Result<ImagesResult, SearchError> {
    tracing::debug!(tenant = scope.filter().unwrap_or("*"), "image search");
    deps.search.images(request).await
}

/// Checks a search request against its bounds and the configuration, without asking
/// anything (the API refuses a search job so at submission).
pub fn check(deps: &Deps, request: &SearchJob) -> Result<(), SearchError> {
    deps.search.check(request)
}

/// Makes the first `count` of `hits` fetch jobs of the search job `search` (same batch,
/// webhook and tenant; archived when `archive`): recorded in the store (ids derived from the
/// search job's id and the URL, so a search delivered again makes the same jobs, once) and
/// pushed on the queue. Their URLs go through the SSRF guard when they are fetched, like any.
pub async fn fetch_top(
    deps: &Deps,
    search: &Envelope,
    hits: &[SearchHit],
    count: usize,
    archive: bool,
) -> Result<Vec<FetchedHit>, FetchTopError> {
    let max_attempts = deps.config.max_attempts;
    let mut fetched = Vec::new();
    let mut new_jobs = Vec::new();
    let mut envelopes = Vec::new();
    for hit in hits.iter().take(count) {
        let id = follow_up_id(&search.id, &hit.url);
        let job = Job::Fetch(FetchJob {
            archive,
            ..FetchJob::new(&hit.url)
        });
        new_jobs.push(NewJob {
            batch_id: search.batch_id.clone(),
            webhook: search.webhook.clone(),
            tenant: search.tenant.clone(),
            ..NewJob::new(&id, &job, max_attempts)
        });
        envelopes.push(Envelope {
            batch_id: search.batch_id.clone(),
            webhook: search.webhook.clone(),
            tenant: search.tenant.clone(),
            ..Envelope::new(id.clone(), job)
        });
        fetched.push(FetchedHit {
            rank: hit.rank,
            job_id: id,
            url: hit.url.clone(),
        });
    }
    if new_jobs.is_empty() {
        return Ok(fetched);
    }
    deps.store
        .add_follow_up_jobs(search.batch_id.as_deref(), &new_jobs)
        .await
        .map_err(FetchTopError::Store)?;
    deps.queue
        .push(envelopes)
        .await
        .map_err(FetchTopError::Queue)?;
    Ok(fetched)
}

/// Why the top results could not be queued.
#[derive(Debug, thiserror::Error)]
pub enum FetchTopError {
    /// The store failed.
    #[error(transparent)]
    Store(crate::store::Error),
    /// The queue failed.
    #[error(transparent)]
    Queue(crate::queue::Error),
}

/// A follow-up's id: a ULID with the search job's time and a hash of its id and the URL.
fn follow_up_id(search_id: &str, url: &str) -> String {
    use sha2::Digest as _;
    let time = ulid::Ulid::from_string(search_id).map_or(0, |id| id.timestamp_ms());
    let mut hasher = sha2::Sha256::new();
    hasher.update(b"search\0");
    hasher.update(search_id.as_bytes());
    hasher.update([0]);
    hasher.update(url.as_bytes());
    let digest = hasher.finalize();
    let mut random = [0_u8; 16];
    random[6..].copy_from_slice(&digest[..10]);
    ulid::Ulid::from_parts(time, u128::from_be_bytes(random)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follow_up_ids_are_stable_per_search_and_url() {
        let search = ulid::Ulid::generate().to_string();
        let id = follow_up_id(&search, "https://a.example/");
        assert_eq!(id, follow_up_id(&search, "https://a.example/"));
        assert_ne!(id, follow_up_id(&search, "https://b.example/"));
        assert!(ulid::Ulid::from_string(&id).is_ok());
    }
}
