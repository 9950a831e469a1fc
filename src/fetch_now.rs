//! One URL fetched now, for a caller that waits: served from the page cache when fresh,
//! otherwise recorded and queued like any fetch job (the pools, in this process or in
//! others, run it) and its end awaited. `POST /v1/fetch` and `trawl fetch` are its two faces;
//! [`submit`] queues any job so (a Firecrawl scrape's browse job).
//!
//! Not here: running the job (the runner does, on whatever worker takes it), or what a
//! caller does with a wait that ran out (the API answers 202; the CLI keeps waiting).

use std::time::Duration;

use tokio::sync::broadcast;
use trawl_workers::job::{ErrorCode, FetchJob, FetchResult, Job, JobError};

use crate::deps::Deps;
use crate::queue::{self, Envelope, Queue};
use crate::runner;
use crate::store::{self, NewJob, Status, Store};
use crate::tenant::Tenant;

/// How a fetch started.
#[derive(Debug)]
pub enum Started {
    /// A fresh page was in the cache: the result, `cached: true`.
    Cached(Box<FetchResult>),
    /// A job was queued: wait for it.
    Queued(Waiter),
}

/// Why a fetch could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The URL was refused (not a URL, scheme, SSRF guard): the job error says which.
    #[error("{}", .0.message)]
    Refused(JobError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// The queue failed.
    #[error(transparent)]
    Queue(#[from] queue::Error),
}

/// How a queued fetch stands after a wait.
#[derive(Debug)]
pub enum Ended {
    /// The job succeeded: its stored result.
    Succeeded(serde_json::Value),
    /// The job failed (or died): its error.
    Failed(JobError),
    /// The job was cancelled.
    Cancelled,
    /// Still `queued` or `running` when the wait ended: the job goes on.
    Pending(Status),
}

/// Serves `job` from the cache, or records and queues it for `tenant`. The job must have been
/// validated (`FetchJob::validate`). Another tenant's cached page is served only for a plain
/// public fetch, as a copy of the caller's own (`runner::serve_hit_to`).
pub async fn start(
    deps: &Deps,
    queue: &Queue,
    job: FetchJob,
    tenant: &Tenant,
) -> Result<Started, StartError> {
    let (url, options_hash) =
        runner::cache_key(&deps.fetch.client, &job, tenant).map_err(StartError::Refused)?;
    if let Some(hit) = runner::fresh_page(deps, &job, &url, &options_hash).await? {
        let new_id = ulid::Ulid::generate().to_string();
        let hit = runner::serve_hit_to(deps, hit, tenant, &new_id).await?;
        deps.metrics.cache_hit();
        let max_chars = deps.fetch.config.max_chars_for(&job);
        if job.archive {
            deps.store.request_archive_page(&hit.page.id).await?;
        }
        return Ok(Started::Cached(Box::new(runner::cached_result(
            &job, &hit, max_chars,
        ))));
    }
    Ok(Started::Queued(
        submit(deps, queue, Job::Fetch(job), tenant).await?,
    ))
}

/// Records and queues `job` for `tenant` (validated by the caller), and returns its waiter:
/// how a fetch that missed the cache starts, and how a browse job run for a waiting caller
/// does (a Firecrawl scrape with actions).
pub async fn submit(
    deps: &Deps,
    queue: &Queue,
    job: Job,
    tenant: &Tenant,
) -> Result<Waiter, StartError> {
    let id = ulid::Ulid::generate().to_string();
    let new_job = NewJob {
        tenant: tenant.clone(),
        ..NewJob::new(&id, &job, deps.config.max_attempts)
    };
    // Subscribe before queueing, so the end cannot slip between the two.
    let ended = deps.ended.subscribe();
    deps.store.create_jobs(&[new_job]).await?;
    queue
        .push(vec![Envelope {
            tenant: tenant.clone(),
            ..Envelope::new(id.clone(), job)
        }])
        .await?;
    Ok(Waiter { id, ended })
}

/// A queued fetch job being waited for.
#[derive(Debug)]
pub struct Waiter {
    id: String,
    ended: broadcast::Receiver<String>,
}

impl Waiter {
    /// The job's id.
    pub fn job_id(&self) -> &str {
        &self.id
    }

    /// Waits up to `wait` for the job to end: woken by this process's job ends, and polling
    /// the store every 500 ms (a worker elsewhere may run the job). Can be called again after
    /// `Ended::Pending`.
    pub async fn wait(&mut self, store: &Store, wait: Duration) -> Result<Ended, store::Error> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let record = store
                .job(&self.id)
                .await?
                .ok_or_else(|| store::Error::Corrupt {
                    what: "job",
                    detail: format!("job {} vanished", self.id),
                })?;
            match record.status {
                Status::Succeeded => {
                    return Ok(Ended::Succeeded(record.result.unwrap_or_default()));
                }
                Status::Failed | Status::Dead => {
                    return Ok(Ended::Failed(record.error.unwrap_or_else(|| {
                        JobError::new(ErrorCode::Internal, "the job failed without an error")
                    })));
                }
                Status::Cancelled => return Ok(Ended::Cancelled),
                Status::Queued | Status::Running => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(Ended::Pending(record.status));
            }
            let wake = (tokio::time::Instant::now() + Duration::from_millis(500)).min(deadline);
            loop {
                tokio::select! {
                    _ = tokio::time::sleep_until(wake) => break,
                    received = self.ended.recv() => match received {
                        Ok(ended_id) if ended_id == self.id => break,
                        Ok(_) => continue,
                        Err(broadcast::error::RecvError::Lagged(_)) => break,
                        Err(broadcast::error::RecvError::Closed) => {
                            tokio::time::sleep_until(wake).await;
                            break;
                        }
                    },
                }
            }
        }
    }
}
