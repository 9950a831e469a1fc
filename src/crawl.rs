//! Crawls: seeds → fetch jobs of the crawl; each fetched page's links → follow-up fetch jobs
//! when they are new to the crawl, in scope, pass the globs and robots.txt, are within
//! `max_depth` and the page budget (`max_pages`). Counters record what happened to every
//! URL (a page's end is counted by the store in the transaction that ends it); the crawl
//! completes when none of its jobs is queued or running (the pools look every 250 ms while
//! jobs end, every second when idle); a crawl with a webhook then gets its `completed` event
//! (its pages' events are sent as a batch's jobs' are, by the runner).
//!
//! The frontier is durable: follow-ups are jobs in the queue, and every URL the crawl has seen
//! is in the store (`crawl_urls`), so a crawl survives a restart of its workers. A page's new
//! URLs and the jobs of those to fetch are recorded in one transaction, then queued, before
//! the page's job ends, so a crawl never looks finished while one of its pages still has
//! links to queue. A follow-up's job id comes from the crawl and the URL: a page delivered
//! again (its worker died before queueing) pushes its still-queued follow-ups again, and the
//! queue holds each job once. Each process remembers the URLs the store has confirmed seen
//! (`SeenKeys`), so links found on every page are not written again.
//!
//! Not here: what the crawls of a process share (plans, robots.txt, politeness: `crawl_policy`),
//! parsing robots.txt and sitemaps, scope and glob rules (`trawl_workers::crawl`), fetching and
//! storing pages (`runner`).

use std::sync::Arc;

use trawl_workers::crawl::crawl_key;
use trawl_workers::crawl::sitemap::{SitemapLimits, parse_sitemap, sitemap_candidates};
use trawl_workers::job::{CrawlSpec, ErrorCode, FetchJob, Job};
use url::Url;

use crate::crawl_policy::Verdict;
pub use crate::crawl_policy::{Crawls, Plan, SharedGate, SharedTurn, Turn};
use crate::deps::Deps;
use crate::queue::{CrawlRef, Envelope, Queue};
use crate::store::{self, CrawlCounters, NewJob};
use crate::tenant::Tenant;

/// Why a crawl could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The spec or a seed is not acceptable (a 4xx for the API).
    #[error("{0}")]
    Invalid(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// The queue failed.
    #[error(transparent)]
    Queue(#[from] crate::queue::Error),
}

/// Seeds and sitemap pages recorded and queued per transaction.
const SEED_PART: usize = 5_000;
/// Sitemap files fetched per crawl at most (indexes included).
const MAX_SITEMAPS: usize = 50;
/// Largest sitemap file fetched (before decompression; the parser caps what it inflates).
const SITEMAP_MAX_BYTES: u64 = 10 << 20;

/// The check a crawl page's fetch makes before following a redirect: a target the crawl
/// already has (other than the page's own URL, `own_key`) is refused as `duplicate_content`
/// (it is fetched, or will be, by its own job); when the crawl obeys robots.txt, the target's
/// robots.txt must allow it. It does not wait for a robots.txt that cannot be fetched (the
/// fetch's own time limit runs): the target is refused as `robots_unreachable`. A store
/// failure lets the redirect through (the page's dedupe after the fetch still holds).
pub fn redirect_guard(
    deps: &Deps,
    plan: &Plan,
    own_key: String,
) -> trawl_workers::web::client::RedirectGuard {
    let crawls = deps.crawls.clone();
    let client = deps.fetch.client.clone();
    let store = deps.store.clone();
    let crawl_id = plan.id.clone();
    let robots = plan.spec.robots;
    Arc::new(move |target: Url| {
        let crawls = crawls.clone();
        let client = client.clone();
        let store = store.clone();
        let crawl_id = crawl_id.clone();
        let own_key = own_key.clone();
        Box::pin(async move {
            let key = crawl_key(&target);
            if key != own_key && store.crawl_url_seen(&crawl_id, &key).await.unwrap_or(false) {
                return Err((
                    ErrorCode::DuplicateContent,
                    "the redirect's target is a page this crawl already has".to_owned(),
                ));
            }
            if !robots {
                return Ok(());
            }
            let target_robots = crawls.robots(&client, &target).await;
            match Verdict::of(&target_robots, &target) {
                Verdict::Unreachable => Err((
                    ErrorCode::RobotsUnreachable,
                    format!(
                        "robots.txt of {} could not be fetched",
                        target.origin().ascii_serialization()
                    ),
                )),
                Verdict::Disallowed => Err((
                    ErrorCode::RobotsDisallowed,
                    "robots.txt disallows the target".to_owned(),
                )),
                Verdict::Allowed(_) => Ok(()),
            }
        })
    })
}

/// Starts a crawl: records it, reads sitemaps when asked, and queues its first pages.
/// Returns the crawl id once its first pages are queued.
pub async fn start(deps: &Deps, queue: &Queue, spec: CrawlSpec) -> Result<String, StartError> {
    let plan = create(deps, spec).await?;
    seed(deps, queue, &plan).await?;
    Ok(plan.id.clone())
}

/// Checks a crawl of the default tenant and records it as running (see [`create_for`]).
pub async fn create(deps: &Deps, spec: CrawlSpec) -> Result<Arc<Plan>, StartError> {
    create_for(deps, spec, Tenant::default()).await
}

/// Checks a crawl of `tenant` and records it as running, without queueing anything yet (see
/// [`seed`]). The API answers after this and seeds in the background: reading robots.txt and
/// sitemaps of remote sites may take a while.
pub async fn create_for(
    deps: &Deps,
    spec: CrawlSpec,
    tenant: Tenant,
) -> Result<Arc<Plan>, StartError> {
    spec.validate().map_err(StartError::Invalid)?;
    let mut seeds = Vec::with_capacity(spec.seeds.len());
    for seed in &spec.seeds {
        let url = trawl_workers::fetch::check_url(&deps.fetch.client, seed)
            .map_err(|error| StartError::Invalid(format!("seed {seed:?}: {}", error.message)))?;
        seeds.push(url);
    }
    let id = ulid::Ulid::generate().to_string();
    let spec_json = serde_json::to_value(&spec).expect("crawl specs serialise");
    deps.store.create_crawl(&id, &tenant, &spec_json).await?;
    let plan = Arc::new(Plan::new(&id, tenant, spec, seeds).map_err(StartError::Invalid)?);
    deps.crawls.remember(plan.clone());
    Ok(plan)
}

/// Queues a created crawl's first pages: its seeds and, when asked, its sitemaps' pages. A
/// crawl with nothing to queue (all disallowed, say) completes here.
pub async fn seed(deps: &Deps, queue: &Queue, plan: &Plan) -> Result<(), StartError> {
    let mut first: Vec<(Url, u32)> = plan.seeds.iter().map(|seed| (seed.clone(), 0)).collect();
    if plan.spec.sitemap {
        first.extend(
            sitemap_urls(deps, &plan.seeds)
                .await
                .into_iter()
                .map(|url| (url, 0)),
        );
    }
    // In parts, so a sitemap of 100,000 pages is not held as 100,000 jobs at once.
    let followed = async {
        for part in first.chunks(SEED_PART) {
            follow(deps, queue, plan, part.to_vec()).await?;
        }
        Ok(())
    }
    .await;
    // Whatever happened, a crawl with no job left is complete (so a failed seeding does not
    // leave it running for ever).
    if deps.store.complete_crawl_if_done(&plan.id).await? {
        announce_completed(deps, std::slice::from_ref(&plan.id)).await;
    }
    followed
}

/// Tells this process's listeners of each crawl just completed (by this process:
/// [`Deps::completed_crawls`]), and sends the `completed` event of each that has a webhook:
/// the crawl's record as its data.
pub async fn announce_completed(deps: &Deps, crawl_ids: &[String]) {
    for id in crawl_ids {
        // No listener is no error: nothing in this process follows the crawl.
        let _ = deps.completed_crawls.send(id.clone());
    }
    let Some(webhooks) = &deps.webhooks else {
        return;
    };
    for id in crawl_ids {
        let record = match deps.store.crawl(id).await {
            Ok(Some(record)) => record,
            Ok(None) => continue,
            Err(error) => {
                tracing::warn!(crawl_id = %id, error = %error, "reading a completed crawl failed");
                continue;
            }
        };
        let Some(url) = record
            .spec
            .webhook
            .as_deref()
            .and_then(|url| url::Url::parse(url).ok())
        else {
            continue;
        };
        let mut event = crate::webhooks::Event::new(
            crate::webhooks::EventType::Completed,
            serde_json::to_value(&record).unwrap_or_default(),
        );
        event.crawl_id = Some(id.clone());
        webhooks.deliver(url, event);
    }
}

/// The page URLs of the sitemaps of the seeds' sites (robots.txt Sitemap lines, then
/// /sitemap.xml and /sitemap_index.xml), following sitemap indexes, at most
/// `MAX_SITEMAPS` (50) files. Unreadable sitemaps are skipped (logged).
pub async fn sitemap_urls(deps: &Deps, seeds: &[Url]) -> Vec<Url> {
    let client = &deps.fetch.client;
    let mut pending: Vec<Url> = Vec::new();
    for seed in seeds {
        let robots = deps.crawls.robots(client, seed).await;
        pending.extend(sitemap_candidates(seed, Some(&robots)));
    }
    let mut seen = std::collections::HashSet::new();
    let mut urls = Vec::new();
    let limits = SitemapLimits::default();
    let mut fetched = 0;
    while let Some(sitemap) = pending.pop() {
        if fetched >= MAX_SITEMAPS || !seen.insert(crawl_key(&sitemap)) {
            continue;
        }
        fetched += 1;
        let body = match client.get(&sitemap, Some(SITEMAP_MAX_BYTES)).await {
            Ok(response) if (200..300).contains(&response.status) => response.body,
            Ok(response) => {
                tracing::debug!(status = response.status, "sitemap not there");
                continue;
            }
            Err(error) => {
                tracing::debug!(error = %error, "sitemap not fetched");
                continue;
            }
        };
        match parse_sitemap(&body, &limits) {
            Ok(parsed) => {
                urls.extend(parsed.urls.into_iter().map(|entry| entry.loc));
                // Nested sitemaps go first, in the order listed.
                pending.extend(parsed.sitemaps.into_iter().rev());
            }
            Err(error) => tracing::warn!(error = %error, "sitemap not readable"),
        }
    }
    urls
}

/// Queues the URLs a crawl found (with their depth) that are new to it, in scope, allowed by
/// robots.txt and within its budget, and counts what happened to each.
pub async fn follow(
    deps: &Deps,
    queue: &Queue,
    plan: &Plan,
    found: Vec<(Url, u32)>,
) -> Result<CrawlCounters, StartError> {
    follow_from(deps, queue, plan, &[], found, false)
        .await
        .map(|(counters, _)| counters)
}

/// [`follow`] for the links of a fetched page, recording the page's own keys (`page_keys`: its
/// final URL, its canonical URL) as seen in the same write; they are never queued from its
/// links. Returns the counters and which page keys were new to the crawl.
pub async fn follow_from(
    deps: &Deps,
    queue: &Queue,
    plan: &Plan,
    page_keys: &[String],
    found: Vec<(Url, u32)>,
    again: bool,
) -> Result<(CrawlCounters, std::collections::HashSet<String>), StartError> {
    let mut counted = CrawlCounters::default();
    let mut candidates: Vec<(String, Url, u32)> = Vec::with_capacity(found.len());
    let mut distinct: std::collections::HashSet<String> = page_keys.iter().cloned().collect();
    for (url, depth) in found {
        if depth > plan.spec.max_depth {
            counted.skipped_depth += 1;
            continue;
        }
        if !matches!(url.scheme(), "http" | "https") {
            continue;
        }
        let key = crawl_key(&url);
        if distinct.insert(key.clone()) {
            candidates.push((key, url, depth));
        }
    }
    // Keys this process already knows are seen are not new: they are left out of the write.
    // A page delivered again (`again`) keeps its links all the same: its first delivery may
    // have died after their jobs were created and before they were queued.
    let (own, candidates) = {
        let known = plan
            .seen
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let own: Vec<&String> = page_keys
            .iter()
            .filter(|key| !known.contains(key))
            .collect();
        let candidates: Vec<(String, Url, u32)> = candidates
            .into_iter()
            .filter(|(key, _, _)| again || !known.contains(key))
            .collect();
        (own, candidates)
    };
    // What becomes of each link if it is new: scope and robots.txt first (a host whose
    // robots.txt cannot be fetched now is not decided here: its pages are queued and wait for
    // it when their turn comes, `Crawls::admit`), then a job with an id of its own (the same
    // for the same URL of the same crawl, so the queue holds it once however often it is
    // pushed).
    let mut jobs: Vec<NewJob> = Vec::new();
    let mut envelopes: Vec<Envelope> = Vec::new();
    // Per candidate: skipped (scope, robots), or the index of its job.
    let mut fates: Vec<Result<usize, store::Fate<'static>>> = Vec::with_capacity(candidates.len());
    for (key, url, depth) in &candidates {
        if !plan.in_scope(url) {
            fates.push(Err(store::Fate::Scope));
            continue;
        }
        if plan.spec.robots {
            let robots = deps.crawls.robots(&deps.fetch.client, url).await;
            if matches!(Verdict::of(&robots, url), Verdict::Disallowed) {
                fates.push(Err(store::Fate::Robots));
                continue;
            }
        }
        let id = follow_up_id(&plan.id, key);
        let job = Job::Fetch(FetchJob {
            format: plan.spec.format,
            archive: plan.spec.archive,
            render: plan.spec.render,
            proxy: plan.spec.proxy.clone(),
            cache_ttl: plan.spec.cache_ttl,
            ..FetchJob::new(url.to_string())
        });
        jobs.push(NewJob {
            crawl_id: Some(plan.id.clone()),
            tenant: plan.tenant.clone(),
            webhook: plan.spec.webhook.clone(),
            ..NewJob::new(&id, &job, deps.config.max_attempts)
        });
        envelopes.push(Envelope {
            crawl: Some(CrawlRef {
                id: plan.id.clone(),
                depth: *depth,
            }),
            tenant: plan.tenant.clone(),
            webhook: plan.spec.webhook.clone(),
            ..Envelope::new(id, job)
        });
        fates.push(Ok(jobs.len() - 1));
    }
    let found: Vec<store::Found<'_>> = own
        .iter()
        .map(|key| store::Found {
            key: key.as_str(),
            fate: store::Fate::Own,
        })
        .chain(
            candidates
                .iter()
                .zip(&fates)
                .map(|((key, _, _), fate)| store::Found {
                    key: key.as_str(),
                    fate: match fate {
                        Ok(job) => store::Fate::Queue(&jobs[*job]),
                        Err(skipped) => *skipped,
                    },
                }),
        )
        .collect();
    // Most pages of a crawl find no link new to this process: then nothing is written.
    let followed = if found.is_empty() && counted == CrawlCounters::default() {
        store::Followed::default()
    } else {
        deps.store
            .follow_crawl(&plan.id, plan.spec.max_pages, &found, &counted)
            .await?
    };
    plan.seen
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .remember(found.iter().map(|found| found.key));
    let mut to_queue: std::collections::HashSet<String> =
        followed.created.iter().cloned().collect();
    if again {
        let not_new: Vec<String> = found
            .iter()
            .filter_map(|found| match found.fate {
                store::Fate::Queue(job) if !followed.new.contains(found.key) => {
                    Some(job.id.clone())
                }
                _ => None,
            })
            .collect();
        if !not_new.is_empty() {
            to_queue.extend(deps.store.queued_jobs(&not_new).await?);
        }
    }
    if !to_queue.is_empty() {
        envelopes.retain(|envelope| to_queue.contains(&envelope.id));
        queue.push(envelopes).await?;
    }
    let new_page_keys: std::collections::HashSet<String> = page_keys
        .iter()
        .filter(|key| followed.new.contains(*key))
        .cloned()
        .collect();
    Ok((followed.counters, new_page_keys))
}

/// The id of the job that fetches `key` for a crawl: a ULID with the crawl's time and 80
/// bits of a digest of the crawl and the key, so that a page delivered again (its first
/// worker died) queues the same jobs, and the queue, keyed by job id, holds each once.
fn follow_up_id(crawl_id: &str, key: &str) -> String {
    use sha2::Digest as _;
    let time = ulid::Ulid::from_string(crawl_id).map_or(0, |id| id.timestamp_ms());
    let mut hasher = sha2::Sha256::new();
    hasher.update(crawl_id.as_bytes());
    hasher.update([0]);
    hasher.update(key.as_bytes());
    let digest = hasher.finalize();
    let mut random = [0_u8; 16];
    random[6..].copy_from_slice(&digest[..10]);
    ulid::Ulid::from_parts(time, u128::from_be_bytes(random)).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follow_up_ids_are_the_same_for_the_same_url_of_the_same_crawl() {
        let crawl = ulid::Ulid::generate();
        let id = follow_up_id(&crawl.to_string(), "http://a.test/p/1");
        assert_eq!(id, follow_up_id(&crawl.to_string(), "http://a.test/p/1"));
        assert_ne!(id, follow_up_id(&crawl.to_string(), "http://a.test/p/2"));
        let other = ulid::Ulid::generate().to_string();
        assert_ne!(id, follow_up_id(&other, "http://a.test/p/1"));
        let parsed = ulid::Ulid::from_string(&id).expect("a ULID");
        assert_eq!(parsed.timestamp_ms(), crawl.timestamp_ms());
    }
}
