//! A fetch job's result as the store keeps it: without its `content.text`, which is the
//! page's text, already kept once (zstd-compressed, in `blobs`) under the result's
//! `content_hash`. Reading a job puts the text back, cut to the result's `content.length`
//! characters as it was when the job ended, so every reader (API, `trawl run --out`, MCP,
//! the Firecrawl-compatible API) sees the whole result.
//!
//! Kept in the result, the text was about 40 % of a crawl's store (20 KB of JSON a page,
//! uncompressed, beside its compressed copy). Results stored with their text (by earlier
//! versions, and every other kind of job) are read as they are. The SQL stays in the engines
//! (`jobs`): this module changes only the JSON they are given and give back.

use serde_json::Value;
use trawl_workers::fetch::truncate_chars;
use trawl_workers::job::FetchResult;

use super::{EndedJob, Error, JobRecord, Store};

/// `result` as the store keeps it: its JSON with `content.text` left out. Only for a result
/// whose `content_hash` names a stored page's text (a page just fetched, or one the cache
/// served).
pub fn stored_fetch_result(result: &FetchResult) -> Value {
    let mut value = serde_json::to_value(result).expect("results serialise");
    if let Some(content) = value.get_mut("content").and_then(Value::as_object_mut) {
        content.remove("text");
    }
    value
}

impl Store {
    /// Puts a stored fetch result's text back (see the module's comment); any other result is
    /// left as it is. Returns whether it put a text back.
    async fn put_text_back(&self, result: &mut Value) -> Result<bool, Error> {
        let Some(content) = result.get("content").and_then(Value::as_object) else {
            return Ok(false);
        };
        if content.contains_key("text") {
            return Ok(false);
        }
        let length = content
            .get("length")
            .and_then(Value::as_u64)
            .and_then(|length| usize::try_from(length).ok());
        let hash = result.get("content_hash").and_then(Value::as_str);
        let (Some(length), Some(hash)) = (length, hash) else {
            return Err(Error::Corrupt {
                what: "job result",
                detail: "a result stored without its text names no length or content hash"
                    .to_owned(),
            });
        };
        let text = self.shared_text(hash).await?;
        let shown = Value::String(truncate_chars(&text, length).to_owned());
        if let Some(content) = result.get_mut("content").and_then(Value::as_object_mut) {
            content.insert("text".to_owned(), shown);
        }
        Ok(true)
    }

    /// Returns one job, a fetch result's text put back.
    pub async fn job(&self, id: &str) -> Result<Option<JobRecord>, Error> {
        let job = match &self.engine {
            super::Engine::Sqlite(engine) => engine.job(id).await?,
            super::Engine::Postgres(engine) => engine.job(id).await?,
        };
        let Some(mut job) = job else {
            return Ok(None);
        };
        if let Some(result) = &mut job.result {
            self.put_text_back(result).await?;
        }
        Ok(Some(job))
    }

    /// Returns the jobs of a batch that ended after `after_seq`, in the order they ended,
    /// fetch results' texts put back.
    pub async fn ended_since(
        &self,
        batch_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<EndedJob>, Error> {
        self.ended_in("batch_id", batch_id, after_seq, limit).await
    }

    /// Returns the jobs of a crawl that ended after `after_seq`, in the order they ended,
    /// fetch results' texts put back.
    pub async fn crawl_ended_since(
        &self,
        crawl_id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<EndedJob>, Error> {
        self.ended_in("crawl_id", crawl_id, after_seq, limit).await
    }

    /// The jobs whose `column` (`batch_id` or `crawl_id`) is `id` that ended after
    /// `after_seq`, in the order they ended; each result is parsed, and written again only
    /// when its text was put back ([`Store::put_text_back`]).
    async fn ended_in(
        &self,
        column: &'static str,
        id: &str,
        after_seq: i64,
        limit: u32,
    ) -> Result<Vec<EndedJob>, Error> {
        let mut jobs = match &self.engine {
            super::Engine::Sqlite(engine) => engine.ended_in(column, id, after_seq, limit).await?,
            super::Engine::Postgres(engine) => {
                engine.ended_in(column, id, after_seq, limit).await?
            }
        };
        for job in &mut jobs {
            let Some(text) = &job.result else { continue };
            let mut result: Value = serde_json::from_str(text).map_err(|error| Error::Corrupt {
                what: "job result",
                detail: error.to_string(),
            })?;
            if self.put_text_back(&mut result).await? {
                job.result = Some(result.to_string());
            }
        }
        Ok(jobs)
    }
}
