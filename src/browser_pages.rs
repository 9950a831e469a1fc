//! Pages taken in the browser, stored like fetched pages: a browse job's final page (under
//! the job's own id, as the job ends) and the pages an `archive` action takes in a browse job
//! or an agent session (each under a job of its own, already succeeded, whose params say
//! where it was taken). Each is extracted as a rendered fetch is
//! (`browse::render::extract_rendered`, `extractor: "browser"`), with block-page verdicts
//! kept as warnings: the script or the agent chose that page.
//!
//! Not here: taking pages (`trawl_workers::browse`), running scripts (the runner) or
//! sessions (`sessions`), archiving (the archive pool takes what is queued).

use std::time::Instant;

use trawl_workers::browse::render::{Judge, extract_rendered};
use trawl_workers::fetch::{self, Fetched};
use trawl_workers::job::{ActionError, ActionOutcome, Format, JobError, RenderedPage};
use trawl_workers::web::normalize::normalize_url;

use crate::store::{self, NewJob, NewPage, Store};
use crate::tenant::Tenant;

/// Extracts a page the browser took, asked for as `requested_url`.
pub async fn extract(
    fetch: &fetch::Deps,
    requested_url: &str,
    page: RenderedPage,
    started: Instant,
) -> Result<Fetched, JobError> {
    extract_rendered(
        fetch,
        requested_url,
        page,
        Format::Markdown,
        started,
        Vec::new(),
        Judge::Warn,
    )
    .await
}

/// The store's form of an extracted browser page: `url` and the final URL normalised, an
/// options hash of its own (`browse:{id}`: never a cache hit for a fetch).
pub struct PageRow {
    url: String,
    final_url: String,
    options_hash: String,
}

impl PageRow {
    /// The row of page `id`, asked for as `requested_url`.
    pub fn new(id: &str, requested_url: &str, fetched: &Fetched) -> PageRow {
        let normalized = |raw: &str| {
            url::Url::parse(raw)
                .map(|url| normalize_url(&url).to_string())
                .unwrap_or_else(|_| raw.to_owned())
        };
        PageRow {
            url: normalized(requested_url),
            final_url: normalized(&fetched.info.final_url),
            options_hash: format!("browse:{id}"),
        }
    }

    /// The page to store.
    pub fn page<'a>(
        &'a self,
        fetched: &'a Fetched,
        archive: bool,
        attempt: Option<u32>,
        tenant: &'a str,
    ) -> NewPage<'a> {
        NewPage {
            url: &self.url,
            final_url: &self.final_url,
            options_hash: &self.options_hash,
            info: &fetched.info,
            text: &fetched.text,
            raw: &fetched.raw,
            headers: &fetched.headers,
            ip: fetched.ip,
            archive,
            lines: fetched.lines.as_deref(),
            attempt,
            tenant,
        }
    }
}

/// Stores the page an `archive` action took (`step.taken`; nothing to do without one) with
/// [`store_taken`]: its id goes in `step.page_id`, or the step fails with the extraction's
/// code. A browse job's steps and a session's share it.
pub async fn archive_step(
    fetch: &fetch::Deps,
    store: &Store,
    tenant: &Tenant,
    taken_from: serde_json::Value,
    step: &mut ActionOutcome,
) -> Result<(), store::Error> {
    let Some(taken) = step.taken.take() else {
        return Ok(());
    };
    match store_taken(fetch, store, tenant, taken_from, taken).await? {
        Ok(page_id) => step.page_id = Some(page_id),
        Err(error) => fail_step(
            step,
            error.code.as_str(),
            format!("the page was not stored: {}", error.message),
        ),
    }
    Ok(())
}

/// Marks an action failed with `code` and `message`.
pub fn fail_step(step: &mut ActionOutcome, code: &str, message: String) {
    step.ok = false;
    step.error = Some(ActionError {
        code: code.to_owned(),
        message,
    });
}

/// Stores a page an `archive` action took and queues it for the archive: a job of
/// `tenant`'s, kind `browse`, recorded and ended with the page at once (its params are
/// `taken_from`, e.g. `{"session": id, "step": 3}`). Returns the page's id, or why the page
/// could not be extracted (`Err` of the inner result: the action's failure).
pub async fn store_taken(
    fetch: &fetch::Deps,
    store: &Store,
    tenant: &Tenant,
    taken_from: serde_json::Value,
    page: RenderedPage,
) -> Result<Result<String, JobError>, store::Error> {
    let started = Instant::now();
    let url = page.url.clone();
    let fetched = match extract(fetch, &url, page, started).await {
        Ok(fetched) => fetched,
        Err(error) => return Ok(Err(error)),
    };
    let id = ulid::Ulid::generate().to_string();
    let params = serde_json::json!({"kind": "browse", "url": url, "taken_from": taken_from});
    store
        .create_jobs(&[NewJob {
            id: id.clone(),
            kind: "browse",
            batch_id: None,
            url: url.clone(),
            params,
            max_attempts: 1,
            webhook: None,
            crawl_id: None,
            tenant: tenant.clone(),
        }])
        .await?;
    let row = PageRow::new(&id, &url, &fetched);
    let result = serde_json::json!({
        "url": url,
        "final_url": fetched.info.final_url,
        "title": fetched.info.title,
        "page_id": id,
        "taken_from": taken_from,
    })
    .to_string();
    store
        .finish_with_page(&id, row.page(&fetched, true, None, tenant.as_str()), |_| {
            result
        })
        .await?;
    Ok(Ok(id))
}
