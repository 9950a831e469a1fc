//! Moving bytes between the browser and the origin until both directions end, an error, or
//! an idle timeout; for plain http the origin's response head is rewritten on the way.
//!
//! Not here: parsing heads (`http1`).

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;

use super::http1::forward_response_head;

/// When the last byte moved, in either direction.
struct Activity {
    start: Instant,
    last_ms: AtomicU64,
}

impl Activity {
    fn new() -> Self {
        Activity {
            start: Instant::now(),
            last_ms: AtomicU64::new(0),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn touch(&self) {
        self.last_ms.store(self.now_ms(), Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        Duration::from_millis(
            self.now_ms()
                .saturating_sub(self.last_ms.load(Ordering::Relaxed)),
        )
    }

    /// Resolves once nothing moved for `idle`.
    async fn idle(&self, idle: Duration) {
        loop {
            let idle_for = self.idle_for();
            if idle_for >= idle {
                return;
            }
            tokio::time::sleep(idle - idle_for).await;
        }
    }
}

/// A reader that records activity whenever bytes arrive.
struct Tracked<'a, R> {
    inner: R,
    activity: &'a Activity,
}

impl<R: AsyncRead + Unpin> AsyncRead for Tracked<'_, R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let this = &mut *self;
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.activity.touch();
        }
        poll
    }
}

/// Moves bytes both ways until both directions end (each end-of-stream is passed on as a
/// half-close), an error, or `idle` without traffic. With `rewrite_response`, the origin's
/// response head is rewritten to `Connection: close` first (interim 1xx heads pass as-is).
pub(super) async fn splice(
    client: TcpStream,
    origin: TcpStream,
    first_up: Vec<u8>,
    rewrite_response: bool,
    idle: Duration,
) -> io::Result<()> {
    let activity = Activity::new();
    let (client_r, mut client_w) = client.into_split();
    let (origin_r, mut origin_w) = origin.into_split();
    let mut client_r = Tracked {
        inner: client_r,
        activity: &activity,
    };
    let mut origin_r = Tracked {
        inner: origin_r,
        activity: &activity,
    };
    let up = async {
        if !first_up.is_empty() {
            origin_w.write_all(&first_up).await?;
        }
        tokio::io::copy(&mut client_r, &mut origin_w).await?;
        origin_w.shutdown().await
    };
    let down = async {
        if rewrite_response {
            forward_response_head(&mut origin_r, &mut client_w).await?;
        }
        tokio::io::copy(&mut origin_r, &mut client_w).await?;
        client_w.shutdown().await
    };
    tokio::select! {
        result = async { tokio::try_join!(up, down) } => result.map(|_| ()),
        () = activity.idle(idle) => Err(io::Error::new(io::ErrorKind::TimedOut, "idle timeout")),
    }
}
