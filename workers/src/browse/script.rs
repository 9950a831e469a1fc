//! Scripted browse jobs: open a fresh context with the job's profile and credentials, load
//! the URL, run the actions in order (stopping at the first failure), and return every
//! action's outcome. A failure to load the first URL fails the job with its code; a browser
//! crash fails it as `browser_failed` (transient: retried on a fresh browser).
//!
//! With `store` (the default) the page the script ended on is taken too (its DOM, URL and
//! status) and handed to the runner in the result.
//!
//! Not here: the actions themselves (`actions`), extracting and storing the final page (the
//! runner, through `render::extract_rendered`).

use std::time::Instant;

use super::Pool;
use super::actions::{self, Failure, navigate};
use super::render::job_error;
use crate::job::{BrowseJob, BrowseResult, JobError};

/// Runs a browse job.
pub async fn run_script(pool: &Pool, job: &BrowseJob) -> Result<BrowseResult, JobError> {
    let started = Instant::now();
    job.validate()
        .map_err(|message| JobError::new(crate::job::ErrorCode::InvalidUrl, message))?;
    // A URL the guard refuses fails before a browser context is taken.
    if let Err(error) = pool.policy().parse_url(&job.url) {
        return Err(job_error(error.code(), error.to_string()));
    }
    let mut lease = pool
        .lease(job.profile, &job.credentials, true)
        .await
        .map_err(|error| error.to_job_error())?;
    match navigate(&lease, &job.url).await {
        Ok(()) => {}
        Err(Failure::Browser(error)) => {
            lease.browser_failed().await;
            return Err(error.to_job_error());
        }
        Err(Failure::Action { code, message }) => {
            lease.close().await;
            return Err(job_error(&code, message));
        }
    }
    let mut steps = Vec::with_capacity(job.actions.len());
    let mut completed = true;
    for action in &job.actions {
        match actions::run(&mut lease, action).await {
            Ok(outcome) => {
                let ok = outcome.ok;
                steps.push(outcome);
                if !ok {
                    completed = false;
                    break;
                }
            }
            Err(error) => {
                lease.browser_failed().await;
                return Err(error.to_job_error());
            }
        }
    }
    let timeout = std::time::Duration::from_secs(pool.config().command_timeout_secs);
    let final_url = super::with_timeout(timeout, lease.page().url())
        .await
        .ok()
        .flatten()
        .unwrap_or_else(|| job.url.clone());
    let title = actions::title(lease.page(), timeout).await;
    // The page the script ended on, for the runner to store (a page that cannot be taken is
    // a warning: the steps stand).
    let (page, page_warning) = if job.store {
        match super::render::capture(lease.page(), timeout).await {
            Ok(page) => (Some(page), None),
            Err(error) => (
                None,
                Some(format!("the final page could not be taken: {error}")),
            ),
        }
    } else {
        (None, None)
    };
    lease.close().await;
    Ok(BrowseResult {
        url: job.url.clone(),
        final_url,
        title,
        steps,
        completed,
        took_ms: started.elapsed().as_millis() as u64,
        page_id: None,
        page_warning,
        page,
    })
}
