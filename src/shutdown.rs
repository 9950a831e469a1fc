//! The named shutdown of a process: one [`Shutdown`] handle (a tokio-util
//! `CancellationToken`) that the pools, the archive pool, the session host and the HTTP server
//! watch. Triggering it asks each part to stop taking new work; each part then finishes what
//! it runs and returns. Parts that must stop in order (the archive pool drains only after the
//! fetch pool has stopped) get a handle of their own from [`crate::app::App`], which triggers
//! them one after the other.
//!
//! Not here: the order of the teardown and its time limits (`app`), nor the process signals
//! (`cli`).

use std::future::Future;

use tokio_util::sync::CancellationToken;

/// A stop request shared by the parts of a process. Cloning gives another handle on the same
/// request.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
}

impl Shutdown {
    /// A request not yet made.
    pub fn new() -> Shutdown {
        Shutdown::default()
    }

    /// Asks every part watching this handle (and its children) to stop.
    pub fn trigger(&self) {
        self.token.cancel();
    }

    /// Whether the stop was asked.
    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Completes once the stop is asked (at once if it was).
    pub async fn wait(&self) {
        self.token.cancelled().await;
    }

    /// [`Shutdown::wait`] as an owned future, for a task or a server that outlives this handle.
    pub fn waiter(&self) -> impl Future<Output = ()> + Send + 'static {
        self.token.clone().cancelled_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_handle_and_waiter_sees_one_trigger() {
        let shutdown = Shutdown::new();
        let other = shutdown.clone();
        let waiter = other.waiter();
        assert!(!other.is_triggered());
        shutdown.trigger();
        tokio::time::timeout(std::time::Duration::from_secs(1), waiter)
            .await
            .expect("a waiter made before the trigger completes");
        assert!(other.is_triggered());
        tokio::time::timeout(std::time::Duration::from_secs(1), other.wait())
            .await
            .expect("waiting after the trigger completes at once");
    }
}
