//! The store's batching tasks, the same for every engine: the group commit of finished pages,
//! the attempt counter, and the page cache's lookups. Each is a task that takes every request
//! waiting when it is free and hands the batch to the engine ([`Batches`]), which writes it
//! with multi-row statements in one transaction, or reads it with one statement: each
//! statement is a round trip to the engine (SQLite's connection thread), whatever it holds.
//!
//! Not here: the statements (`pages`, `jobs` and each engine's `Dialect`).

use std::collections::HashMap;
use std::future::Future;
use std::str::FromStr;

use tokio::sync::{mpsc, oneshot};

use super::blob::{Blob, ForArchive, Texts};
use super::rows::{self, to_json};
use super::{Error, NewPage, PageRecord, Status};

/// Pages written in one transaction at most (16 bound values per page row), and attempts
/// started by one statement at most.
const GROUP_COMMIT_PAGES: usize = 64;

/// What an engine writes in batches.
pub(super) trait Batches: Clone + Send + Sync + 'static {
    /// Ends the jobs of `pages` as succeeded (first end wins; a cancel request wins over the
    /// result) and stores the pages of the jobs this call ended as succeeded, blobs first, in
    /// one transaction. Returns, per page, the status its job ended with, or `None` when it
    /// had already ended.
    fn commit_group(
        &self,
        pages: &[PendingPage],
    ) -> impl Future<Output = Result<Vec<Option<Status>>, Error>> + Send;

    /// Starts an attempt of each job that may run (queued or running, no cancel requested):
    /// counts it and marks the job running. Returns (attempt number, attempts allowed) by id
    /// of the jobs started.
    fn start_group(
        &self,
        ids: &[&str],
    ) -> impl Future<Output = Result<HashMap<String, (u32, u32)>, Error>> + Send;

    /// Answers page cache lookups: per lookup, the newest page of its URL fetched with its
    /// options at or after its time, in the order of `wanted`.
    fn look_up_group(
        &self,
        wanted: &[CacheLookup],
    ) -> impl Future<Output = Result<Vec<Option<PageRecord>>, Error>> + Send;
}

/// A page cache lookup: the newest page of `url` fetched with `options_hash` at or after
/// `since_ms`.
#[derive(Debug)]
pub(super) struct CacheLookup {
    pub(super) url: String,
    pub(super) options_hash: String,
    pub(super) since_ms: i64,
}

/// A fetched page waiting for the group commit, with the channel its outcome goes back on.
pub(super) struct PendingPage {
    pub(super) job_id: String,
    pub(super) url: String,
    pub(super) final_url: String,
    pub(super) options_hash: String,
    pub(super) status: i64,
    pub(super) content_type: String,
    pub(super) title: Option<String>,
    pub(super) fetched_at: String,
    pub(super) fetched_at_ms: i64,
    pub(super) lines: i64,
    pub(super) info: String,
    pub(super) headers: String,
    pub(super) ip: Option<String>,
    pub(super) archive: bool,
    pub(super) tenant: String,
    pub(super) result: String,
    /// The attempt that produced the page: the job ends only if it is still the job's latest
    /// attempt (a worker that lost its job cannot commit late). `None`: no check.
    pub(super) attempt: Option<i64>,
    pub(super) text_blob: Blob,
    pub(super) raw_blob: Blob,
    reply: oneshot::Sender<Result<Option<Status>, Error>>,
}

impl PendingPage {
    /// The distinct blobs of `pages`, in sha256 order (a fixed order, so that two
    /// transactions inserting the same blobs cannot wait on each other in a cycle).
    pub(super) fn distinct_blobs<'a>(pages: &[&'a PendingPage]) -> Vec<&'a Blob> {
        let mut blobs: Vec<&Blob> = pages
            .iter()
            .flat_map(|page| [&page.text_blob, &page.raw_blob])
            .collect();
        blobs.sort_by(|a, b| a.sha256.cmp(&b.sha256));
        blobs.dedup_by(|a, b| a.sha256 == b.sha256);
        blobs
    }

    /// The `archive_state` a new page starts with.
    pub(super) fn archive_state(&self) -> Option<&'static str> {
        self.archive.then_some("pending")
    }
}

/// A job id whose attempt starts, with the channel its (number, max) goes back on: `None`
/// when the job could not start (ended, cancel requested, unknown).
type StartingAttempt = (String, oneshot::Sender<Result<Option<(u32, u32)>, Error>>);

/// A page cache lookup, with the channel its answer goes back on.
type PendingLookup = (
    CacheLookup,
    oneshot::Sender<Result<Option<PageRecord>, Error>>,
);

/// The handles of an engine's batching tasks; the tasks end when every handle is dropped.
#[derive(Debug, Clone)]
pub(super) struct Writer {
    /// Pages on their way to the group commit.
    committer: mpsc::Sender<PendingPage>,
    /// Attempts on their way to the attempt counter.
    starter: mpsc::Sender<StartingAttempt>,
    /// Page cache lookups on their way to the reader.
    looker: mpsc::Sender<PendingLookup>,
}

impl Writer {
    /// Spawns the batching tasks of `engine`.
    pub(super) fn spawn<E: Batches>(engine: E) -> Writer {
        let (committer, pending) = mpsc::channel(GROUP_COMMIT_PAGES * 4);
        tokio::spawn(commit_pages(engine.clone(), pending));
        let (starter, starting) = mpsc::channel(GROUP_COMMIT_PAGES * 4);
        tokio::spawn(start_attempts(engine.clone(), starting));
        let (looker, lookups) = mpsc::channel(GROUP_COMMIT_PAGES * 4);
        tokio::spawn(look_up_pages(engine, lookups));
        Writer {
            committer,
            starter,
            looker,
        }
    }

    /// The newest page of `url` fetched with `options_hash` at or after `since_ms`, looked up
    /// with others asked at the same time.
    pub(super) async fn cached_page(
        &self,
        url: &str,
        options_hash: &str,
        since_ms: i64,
    ) -> Result<Option<PageRecord>, Error> {
        let lookup = CacheLookup {
            url: url.to_owned(),
            options_hash: options_hash.to_owned(),
            since_ms,
        };
        ask(&self.looker, lookup, "page", "cache reader").await
    }

    /// Starts an attempt of job `id` with others starting at the same time: its (number,
    /// max), or `None` when it may not start.
    pub(super) async fn start_attempt(&self, id: &str) -> Result<Option<(u32, u32)>, Error> {
        ask(&self.starter, id.to_owned(), "job", "attempt writer").await
    }

    /// Compresses a page's blobs and has it committed with others finishing at the same
    /// time. A stored page's text goes to the read cache when it keeps written texts; a page
    /// to archive has its text and raw body held for this process's archive pool (when one
    /// runs). Returns the content hash and the status this call ended the job with.
    pub(super) async fn finish_with_page(
        &self,
        (texts, for_archive): (&Texts, &ForArchive),
        job_id: &str,
        page: NewPage<'_>,
        result_for: impl FnOnce(&str) -> String,
    ) -> Result<(String, Option<Status>), Error> {
        let (text_blob, raw_blob) = pack_page(page.text, page.raw).await?;
        let content_hash = text_blob.sha256.clone();
        let raw_hash = raw_blob.sha256.clone();
        // Held before the page is committed, so that the pool never finds a page to archive
        // whose text and raw body are not held yet (and then held for nobody).
        if page.archive {
            for_archive.remember(
                &content_hash,
                page.text,
                &raw_hash,
                page.raw,
                page.info.is_html(),
                page.lines,
            );
        }
        let fetched_at_ms = jiff::Timestamp::from_str(&page.info.fetched_at)
            .map(|timestamp| timestamp.as_millisecond())
            .unwrap_or_else(|_| jiff::Timestamp::now().as_millisecond());
        let (reply, answer) = oneshot::channel();
        let pending = PendingPage {
            job_id: job_id.to_owned(),
            url: page.url.to_owned(),
            final_url: page.final_url.to_owned(),
            options_hash: page.options_hash.to_owned(),
            status: i64::from(page.info.status),
            content_type: page.info.content_type.clone(),
            title: page.info.title.clone(),
            fetched_at: page.info.fetched_at.clone(),
            fetched_at_ms,
            lines: page.text.lines().count() as i64,
            info: to_json(page.info),
            headers: to_json(&page.headers),
            ip: page.ip.map(|ip| ip.to_string()),
            archive: page.archive,
            tenant: page.tenant.to_owned(),
            result: result_for(&content_hash),
            attempt: page.attempt.map(i64::from),
            text_blob,
            raw_blob,
            reply,
        };
        let gone = || Error::Corrupt {
            what: "page",
            detail: "the store's writer stopped".to_owned(),
        };
        let ended = match self.committer.send(pending).await {
            Ok(()) => answer.await.unwrap_or_else(|_| Err(gone())),
            Err(_) => Err(gone()),
        };
        if let Ok(Some(Status::Succeeded)) = ended {
            texts.written(&content_hash, page.text);
        } else if page.archive {
            // Not stored (the job had ended otherwise, or the store failed): not to archive.
            for_archive.forget(&content_hash, &raw_hash);
        }
        Ok((content_hash, ended?))
    }
}

/// Sends `request` to a batching task and waits for its answer; a task that stopped is a
/// [`Error::Corrupt`] of `what` naming the `task`.
async fn ask<T, R>(
    task_queue: &mpsc::Sender<(T, oneshot::Sender<Result<R, Error>>)>,
    request: T,
    what: &'static str,
    task: &str,
) -> Result<R, Error> {
    let (reply, answer) = oneshot::channel();
    let gone = || Error::Corrupt {
        what,
        detail: format!("the store's {task} stopped"),
    };
    task_queue
        .send((request, reply))
        .await
        .map_err(|_| gone())?;
    answer.await.map_err(|_| gone())?
}

/// Pages whose text and raw body together are at most this many bytes are hashed and
/// compressed on the calling task's thread: zstd level 1 runs at about 300 MB/s on HTML
/// (sha256 at 1.7 GB/s), so a 50 KB page with its text holds the thread about a quarter of a
/// millisecond, and a page at the bound under half of one. Handing every page to a blocking
/// thread cost more: up to one thread per job ending at once, each woken, then waking the job
/// (`benches/RESULTS.md`). Larger pages still go to a blocking thread, so that one big page
/// does not hold up the other tasks of the runtime's thread.
const PACK_INLINE_BYTES: usize = 128 * 1024;

/// A page's text and raw body as blobs: hashed, compressed at level 1, the fastest (level 3
/// cost twice the CPU for a few percent smaller blobs).
async fn pack_page(text: &str, raw: &[u8]) -> Result<(Blob, Blob), Error> {
    let pack = |text: &[u8], raw: &[u8]| (Blob::pack(text, 1), Blob::pack(raw, 1));
    if text.len() + raw.len() <= PACK_INLINE_BYTES {
        return Ok(pack(text.as_bytes(), raw));
    }
    let text = text.to_owned();
    let raw = raw.to_vec();
    tokio::task::spawn_blocking(move || pack(text.as_bytes(), &raw))
        .await
        .map_err(|error| Error::Corrupt {
            what: "blob",
            detail: format!("compression task failed: {error}"),
        })
}

/// The page writer: takes every page waiting (up to [`GROUP_COMMIT_PAGES`]) and commits them
/// together. Ends when every [`Writer`] handle is dropped.
async fn commit_pages<E: Batches>(engine: E, mut pending: mpsc::Receiver<PendingPage>) {
    let mut next: Vec<PendingPage> = Vec::new();
    loop {
        if next.is_empty() {
            match pending.recv().await {
                Some(page) => next.push(page),
                None => return,
            }
        }
        while next.len() < GROUP_COMMIT_PAGES {
            match pending.try_recv() {
                Ok(page) => next.push(page),
                Err(_) => break,
            }
        }
        // Two deliveries of one job in one group would match one row twice: the later one
        // waits for the next group (where it finds the job ended).
        let mut batch = Vec::with_capacity(next.len());
        let mut later = Vec::new();
        for page in next.drain(..) {
            if batch
                .iter()
                .any(|queued: &PendingPage| queued.job_id == page.job_id)
            {
                later.push(page);
            } else {
                batch.push(page);
            }
        }
        next = later;
        match engine.commit_group(&batch).await {
            Ok(ended) => {
                for (page, ended) in batch.into_iter().zip(ended) {
                    let _ = page.reply.send(Ok(ended));
                }
            }
            // One bad page must not fail its neighbours: on an error, each page is tried
            // alone and gets its own answer.
            Err(error) if batch.len() > 1 => {
                tracing::debug!(error = %error, pages = batch.len(), "group commit failed, committing pages one by one");
                for page in batch {
                    let ended = engine
                        .commit_group(std::slice::from_ref(&page))
                        .await
                        .map(|mut ended| ended.pop().flatten());
                    let _ = page.reply.send(ended);
                }
            }
            Err(error) => {
                for page in batch {
                    let _ = page.reply.send(Err(Error::Corrupt {
                        what: "page",
                        detail: error.to_string(),
                    }));
                }
            }
        }
    }
}

/// The attempt counter: takes every attempt waiting (up to [`GROUP_COMMIT_PAGES`]) and
/// starts them with one statement. Ends when every [`Writer`] handle is dropped.
async fn start_attempts<E: Batches>(engine: E, mut starting: mpsc::Receiver<StartingAttempt>) {
    let mut batch = Vec::with_capacity(GROUP_COMMIT_PAGES);
    while starting.recv_many(&mut batch, GROUP_COMMIT_PAGES).await > 0 {
        let batch = std::mem::take(&mut batch);
        let ids: Vec<&str> = batch.iter().map(|(id, _)| id.as_str()).collect();
        match engine.start_group(&ids).await {
            // An id delivered twice in one batch was counted once: both deliveries run (as
            // two deliveries of one job always may), and the first end wins.
            Ok(started) => {
                for (id, reply) in batch {
                    let _ = reply.send(Ok(started.get(&id).copied()));
                }
            }
            Err(error) => {
                let detail = error.to_string();
                for (_, reply) in batch {
                    let _ = reply.send(Err(Error::Corrupt {
                        what: "job attempt",
                        detail: detail.clone(),
                    }));
                }
            }
        }
    }
}

/// The cache reader: takes every lookup waiting (up to [`GROUP_COMMIT_PAGES`]) and answers
/// them with one statement. Ends when every [`Writer`] handle is dropped.
async fn look_up_pages<E: Batches>(engine: E, mut lookups: mpsc::Receiver<PendingLookup>) {
    let mut batch = Vec::with_capacity(GROUP_COMMIT_PAGES);
    while lookups.recv_many(&mut batch, GROUP_COMMIT_PAGES).await > 0 {
        let (wanted, replies): (Vec<CacheLookup>, Vec<_>) = batch.drain(..).unzip();
        match engine.look_up_group(&wanted).await {
            Ok(found) => {
                for (reply, page) in replies.into_iter().zip(found) {
                    let _ = reply.send(Ok(page));
                }
            }
            Err(error) => {
                let detail = error.to_string();
                for reply in replies {
                    let _ = reply.send(Err(Error::Corrupt {
                        what: "cached page",
                        detail: detail.clone(),
                    }));
                }
            }
        }
    }
}

/// The job ids of the pages a group commit ended (`ended` as [`ended_per_page`] returns it).
pub(super) fn ended_ids<'a>(pages: &'a [PendingPage], ended: &[Option<Status>]) -> Vec<&'a str> {
    pages
        .iter()
        .zip(ended)
        .filter(|(_, ended)| ended.is_some())
        .map(|(page, _)| page.job_id.as_str())
        .collect()
}

/// Per page of a group, the status its job ended with, from the rows (`id, status`) of the
/// jobs the group ended.
pub(super) fn ended_per_page(
    pages: &[PendingPage],
    found: &[impl rows::Columns],
) -> Result<Vec<Option<Status>>, Error> {
    let mut ended: Vec<Option<Status>> = vec![None; pages.len()];
    for row in found {
        let id = row.text("id")?;
        let status = rows::status(row.text("status")?)?;
        if let Some(index) = pages.iter().position(|page| page.job_id == id) {
            ended[index] = Some(status);
        }
    }
    Ok(ended)
}

#[cfg(test)]
mod tests {
    use sha2::{Digest as _, Sha256};

    use super::*;

    /// A page small enough to pack in place and one that goes to a blocking thread give the
    /// blobs of their own bytes: text and raw body each under its own hash, and unpacked
    /// back to what was packed.
    #[tokio::test]
    async fn pages_are_packed_in_place_or_on_a_blocking_thread_alike() {
        let small = ("a small page's text ".repeat(8), b"<p>small</p>".repeat(40));
        let big_text = "words of a big page ".repeat(PACK_INLINE_BYTES / 20);
        let big_raw = b"<p>a big page's markup</p>".repeat(PACK_INLINE_BYTES / 26 + 1);
        assert!(small.0.len() + small.1.len() <= PACK_INLINE_BYTES);
        assert!(big_text.len() + big_raw.len() > PACK_INLINE_BYTES);
        for (text, raw) in [(small.0.as_str(), &small.1[..]), (&big_text, &big_raw[..])] {
            let (text_blob, raw_blob) = pack_page(text, raw).await.unwrap();
            for (blob, bytes) in [(text_blob, text.as_bytes()), (raw_blob, raw)] {
                assert_eq!(blob.sha256, hex::encode(Sha256::digest(bytes)));
                assert_eq!(blob.size, bytes.len());
                assert_eq!(blob.codec, "zstd", "repeated text compresses");
                assert_eq!(Blob::unpack(blob.codec, blob.bytes).unwrap(), bytes);
            }
        }
    }
}
