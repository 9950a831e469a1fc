//! When an idle worker looks at the queue: at once when this process pushed tasks to its lane,
//! else after a pause that doubles up to a second while the queue stays empty ([`WakeOrBackoff`]);
//! and, on the embedded queue, only then ([`Gated`]).
//!
//! apalis' SQLite backend fetches whenever its worker is polled while idle, and the worker is
//! woken by more than the poll strategy (a database driver's late wake after an empty fetch
//! is enough): measured, an idle `trawl serve` ran a thousand empty fetches a second, half a
//! core. [`Gated`] lets a poll reach the backend only when the strategy fired, a task just
//! came, or a fetch may be under way (a connection of the lane's own pool is in use, so a
//! fetch holding SQLite's write lock is always driven to its end).
//!
//! Not here: which queue or pool a worker runs on (`runner`, `queue`).

use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use apalis::prelude::{Backend, PollSnapshot, PollStrategy, WorkerContext};
use apalis_core::backend::{BackendConfig, WireFormatBackend};

/// The longest pause of an idle worker between two looks at the queue.
pub(crate) const MAX_IDLE_POLL: Duration = Duration::from_secs(1);

/// When an idle worker looks for tasks again: at once when this process pushed some to its
/// lane (`Queue::pushed`), else after a pause that starts at `runner.poll_interval_ms` and
/// doubles while the queue stays empty, up to [`MAX_IDLE_POLL`] (pushes from other
/// processes, retries coming due). A fetch that returns tasks brings the pause back down.
/// apalis' own strategies do not fit: its interval never backs off, and its backoff grows on
/// every poll of the worker, not on every empty fetch.
pub(crate) struct WakeOrBackoff {
    pushed: Arc<tokio::sync::Notify>,
    notified: std::pin::Pin<Box<tokio::sync::futures::OwnedNotified>>,
    timer: std::pin::Pin<Box<tokio::time::Sleep>>,
    base: Duration,
    pause: Duration,
    /// A fetch returned tasks since the timer last fired.
    busy: bool,
}

impl WakeOrBackoff {
    pub(crate) fn new(pushed: Arc<tokio::sync::Notify>, base: Duration) -> WakeOrBackoff {
        WakeOrBackoff {
            notified: Box::pin(pushed.clone().notified_owned()),
            pushed,
            timer: Box::pin(tokio::time::sleep(base)),
            base,
            pause: base,
            busy: false,
        }
    }

    /// A task came: look again soon.
    fn saw_task(&mut self) {
        self.busy = true;
        self.pause = self.base;
    }
}

impl PollStrategy for WakeOrBackoff {
    fn poll_drive(&mut self, cx: &mut Context<'_>, _: &PollSnapshot) -> Poll<Option<()>> {
        use std::future::Future as _;
        let mut ready = false;
        while self.notified.as_mut().poll(cx).is_ready() {
            // Look now, and soon again: a fetch already under way may have missed the push.
            self.notified = Box::pin(self.pushed.clone().notified_owned());
            self.pause = self.base;
            self.timer
                .as_mut()
                .reset(tokio::time::Instant::now() + self.base);
            ready = true;
        }
        while self.timer.as_mut().poll(cx).is_ready() {
            self.pause = if std::mem::take(&mut self.busy) {
                self.base
            } else {
                (self.pause * 2).min(MAX_IDLE_POLL.max(self.base))
            };
            self.timer
                .as_mut()
                .reset(tokio::time::Instant::now() + self.pause);
            ready = true;
        }
        if ready {
            Poll::Ready(Some(()))
        } else {
            Poll::Pending
        }
    }

    fn on_poll(&mut self, snapshot: &PollSnapshot) {
        if snapshot.consecutive_ready > 0 {
            self.saw_task();
        }
    }
}

/// Whether a fetch of this worker may be under way (a connection of its pool is in use).
pub(crate) type InUse = Arc<dyn Fn() -> bool + Send + Sync>;

/// A backend whose `poll_next` is passed on only when [`WakeOrBackoff`] fired, a task just
/// came (the buffer may hold more), or `in_use` says a fetch may be under way; otherwise the
/// worker sleeps on the strategy's wakers.
pub(crate) struct Gated<B> {
    backend: B,
    strategy: WakeOrBackoff,
    in_use: InUse,
    open: bool,
}

impl<B> Gated<B> {
    pub(crate) fn new(backend: B, strategy: WakeOrBackoff, in_use: InUse) -> Gated<B> {
        Gated {
            backend,
            strategy,
            in_use,
            // The first poll looks at once.
            open: true,
        }
    }
}

impl<B: Backend> Backend for Gated<B> {
    type Task = B::Task;
    type Error = B::Error;

    fn poll_ready(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Result<(), Self::Error>> {
        self.backend.poll_ready(cx, worker)
    }

    fn poll_next(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Option<Result<Self::Task, Self::Error>>> {
        if self
            .strategy
            .poll_drive(cx, &PollSnapshot::default())
            .is_ready()
        {
            self.open = true;
        }
        if !std::mem::take(&mut self.open) && !(self.in_use)() {
            return Poll::Pending;
        }
        let next = self.backend.poll_next(cx, worker);
        if let Poll::Ready(Some(Ok(_))) = &next {
            self.strategy.saw_task();
            self.open = true;
        }
        next
    }

    fn poll_close(
        &mut self,
        cx: &mut Context<'_>,
        worker: &WorkerContext,
    ) -> Poll<Result<(), Self::Error>> {
        self.backend.poll_close(cx, worker)
    }
}

impl<B: BackendConfig> BackendConfig for Gated<B> {
    type Args = B::Args;
    type Id = B::Id;
    type Kind = B::Kind;
    type Config = B::Config;
    type Layer = B::Layer;

    fn config(&self) -> &Self::Config {
        self.backend.config()
    }

    fn middleware(&mut self, worker: &mut WorkerContext) -> Self::Layer {
        self.backend.middleware(worker)
    }
}

impl<B: WireFormatBackend> WireFormatBackend for Gated<B> {
    type Codec = B::Codec;
    type Compact = B::Compact;

    fn codec(&self) -> &Self::Codec {
        self.backend.codec()
    }
}
