//! What the bench's apalis workers run: the no-op job handler, shaped like `trawl::runner`'s,
//! the [`Tally`] of what the handlers saw (ids, first and last job, the pace per tenth), the
//! worker names and the stop signal. It does not build the workers nor talk to the backend.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use apalis::prelude::*;
use trawl::queue::Envelope;

/// What the handlers saw in one run.
#[derive(Debug, Default)]
pub(crate) struct Tally {
    /// When the first job reached a handler.
    pub(crate) first: OnceLock<Instant>,
    /// When the last handler returned.
    pub(crate) last: Mutex<Option<Instant>>,
    /// The envelope ids handled.
    pub(crate) seen: Mutex<HashSet<String>>,
    pub(crate) handled: AtomicU64,
    pub(crate) duplicates: AtomicU64,
    /// `tenths[k]`: when the `(k + 1)`-th tenth of the jobs had been handled.
    pub(crate) tenths: [OnceLock<Instant>; 10],
    /// Jobs per tenth.
    pub(crate) tenth: u64,
}

impl Tally {
    pub(crate) fn new(jobs: usize) -> Tally {
        Tally {
            tenth: (jobs as u64 / 10).max(1),
            ..Tally::default()
        }
    }

    /// Jobs/s in each tenth of the run (from the first job), showing whether the rate depends
    /// on how many jobs are queued.
    pub(crate) fn tenth_rates(&self) -> Vec<f64> {
        let Some(&first) = self.first.get() else {
            return Vec::new();
        };
        let mut previous = first;
        self.tenths
            .iter()
            .map_while(OnceLock::get)
            .map(|&at| {
                let secs = at.duration_since(previous).as_secs_f64();
                previous = at;
                self.tenth as f64 / secs
            })
            .collect()
    }

    pub(crate) fn record(&self, id: String) {
        let now = Instant::now();
        let _ = self.first.set(now);
        if !self.seen.lock().unwrap().insert(id) {
            self.duplicates.fetch_add(1, Ordering::Relaxed);
        }
        let now = Instant::now();
        *self.last.lock().unwrap() = Some(now);
        let handled = self.handled.fetch_add(1, Ordering::Release) + 1;
        if handled.is_multiple_of(self.tenth)
            && let Some(mark) = self.tenths.get((handled / self.tenth - 1) as usize)
        {
            let _ = mark.set(now);
        }
    }
}

/// The no-op job: shaped like `trawl::runner`'s handler (the job runs on its own tokio task,
/// its outcome goes back to apalis, which acknowledges it), but the job itself only notes its
/// envelope id.
pub(crate) async fn handle(
    envelope: Envelope,
    tally: Data<Arc<Tally>>,
) -> std::result::Result<(), BoxDynError> {
    let tally: Arc<Tally> = (*tally).clone();
    tokio::spawn(async move { tally.record(envelope.id) })
        .await
        .map_err(|join_error| format!("job panicked: {join_error}").into())
}

/// A worker name as the runner makes them: unique, since both engines refuse a name reused
/// within the orphan timeout.
pub(crate) fn worker_name() -> String {
    format!(
        "trawl-{}-{}",
        std::process::id(),
        ulid::Ulid::generate().to_string().to_ascii_lowercase()
    )
}

/// Completes when the workers are asked to stop (the runner's `StopSignal`).
pub(crate) type StopSignal = std::pin::Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>>;
