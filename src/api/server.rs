//! Serves a router on a TCP listener (HTTP/1.1, and HTTP/2 with prior knowledge) with the
//! connection limits `axum::serve` does not offer: a client must send a request's head within
//! `api.header_read_timeout_secs` (a client sending a header line a second is cut off, not
//! kept for minutes), and one client IP address holds at most
//! `api.max_connections_per_client` connections (more are closed as they are accepted). Each
//! request carries its peer address (`ConnectInfo<SocketAddr>`). Stopping: no new
//! connections, open ones finish their requests, then the server ends.
//!
//! Not here: what the routes do, nor who may call them (`auth`, `guard`).

use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower_service::Service;

/// The limits a server holds its connections to.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest a client may take to send a request's head.
    pub header_read_timeout: Duration,
    /// Most connections open at once from one IP address.
    pub max_connections_per_client: usize,
}

impl Limits {
    /// The limits `[api]` sets.
    pub fn of(config: &super::Config) -> Limits {
        Limits {
            header_read_timeout: Duration::from_secs(config.header_read_timeout_secs),
            max_connections_per_client: config.max_connections_per_client,
        }
    }
}

/// Serves `router` on `listener` within `limits` until `stop` completes, then waits for the
/// open connections to finish their requests.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    stop: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let open = Arc::new(Mutex::new(HashMap::<IpAddr, usize>::new()));
    // Connections watch `stopping` (closed when the server stops) and hold `done` clones, so
    // the server knows when the last one ended.
    let (stopping_tx, stopping_rx) = watch::channel(());
    let (done_tx, done_rx) = watch::channel(());
    tokio::pin!(stop);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    wait_after_accept_error(&error).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let Some(slot) = Slot::take(&open, peer.ip(), limits.max_connections_per_client) else {
            tracing::debug!(peer = %peer.ip(), "too many connections from one client; closed");
            drop(stream);
            continue;
        };
        let router = router.clone();
        let mut stopping = stopping_rx.clone();
        let done = done_rx.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let _done = done;
            let service =
                hyper::service::service_fn(move |mut request: axum::http::Request<Incoming>| {
                    request.extensions_mut().insert(ConnectInfo(peer));
                    let mut router = router.clone();
                    async move {
                        // A Router is always ready; asking is the Service contract.
                        std::future::poll_fn(|cx| {
                            <Router as Service<axum::extract::Request>>::poll_ready(&mut router, cx)
                        })
                        .await?;
                        router.call(request.map(Body::new)).await
                    }
                });
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_read_timeout);
            let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
            tokio::pin!(connection);
            let mut shutting_down = false;
            loop {
                tokio::select! {
                    result = connection.as_mut() => {
                        if let Err(error) = result {
                            tracing::trace!(error = %error, "connection ended with an error");
                        }
                        break;
                    }
                    // Nothing is ever sent: `changed` fails once the server drops the sender.
                    _ = stopping.changed(), if !shutting_down => {
                        shutting_down = true;
                        connection.as_mut().graceful_shutdown();
                    }
                }
            }
        });
    }
    drop(listener);
    drop(stopping_rx);
    drop(stopping_tx);
    drop(done_rx);
    done_tx.closed().await;
    Ok(())
}

/// A connection's place in its client's count, given back when dropped.
struct Slot {
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
    ip: IpAddr,
}

impl Slot {
    /// Counts a new connection from `ip`, or `None` when it already has `max` open.
    fn take(open: &Arc<Mutex<HashMap<IpAddr, usize>>>, ip: IpAddr, max: usize) -> Option<Slot> {
        let mut counts = open.lock().unwrap_or_else(PoisonError::into_inner);
        let count = counts.entry(ip).or_insert(0);
        if *count >= max {
            return None;
        }
        *count += 1;
        Some(Slot {
            open: open.clone(),
            ip,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.open.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = counts.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                counts.remove(&self.ip);
            }
        }
    }
}

/// After a failed accept: go on at once when one connection failed, pause a moment when the
/// process is out of descriptors or memory (accepting again at once would spin).
async fn wait_after_accept_error(error: &std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::warn!(error = %error, "accepting a connection failed; pausing");
    tokio::time::sleep(Duration::from_millis(200)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_holds_at_most_its_share_and_gets_it_back() {
        let open = Arc::new(Mutex::new(HashMap::new()));
        let ip: IpAddr = "127.0.0.1".parse().expect("ip");
        let other: IpAddr = "127.0.0.2".parse().expect("ip");
        let first = Slot::take(&open, ip, 2).expect("first");
        let _second = Slot::take(&open, ip, 2).expect("second");
        assert!(Slot::take(&open, ip, 2).is_none());
        assert!(Slot::take(&open, other, 2).is_some());
        drop(first);
        assert!(Slot::take(&open, ip, 2).is_some());
    }
}
