//! The browser's egress proxy: an in-process HTTP forward proxy on `127.0.0.1` that applies
//! trawl's SSRF policy to every connection headless Chromium opens.
//!
//! Chromium is launched with `--proxy-server=` [`Egress::proxy_server_arg`] and
//! `--proxy-bypass-list=<-loopback>`, so navigations, redirects, subresources, workers and
//! WebSockets all arrive here, either as `CONNECT host:port` (https, wss) or as an
//! absolute-form `http://` request. Each destination goes through the same rules as the HTTP
//! client (`web::client`): the host lists and `localhost` names ([`Policy::check_host`]),
//! literal addresses classified after the `url` crate's normalisation (`0x7f.1` is
//! `127.0.0.1`), names resolved through the same [`Dns`] with the whole name refused when any
//! answer is blocked (`web::dns::resolve_checked`), connections made only to the checked
//! addresses (the dial map applied after the check), and the connected peer re-checked.
//! Refusals answer `403` with `X-Trawl-Blocked: <reason>` and are kept in a bounded log
//! ([`Egress::blocked_after`]) so the browse pool can report `blocked_destination` for a
//! navigation. Plain-http requests are forwarded one per client connection
//! (`Connection: close` both ways), because the next request on a kept-alive proxy connection
//! may be meant for another host.
//!
//! This module holds the proxy ([`Egress`]), its bounds, block log and counters, and the
//! admission of each request; the rest is split by role:
//!
//! - `http1`: parsing and rewriting HTTP/1 request and response heads (httparse).
//! - `connect`: the policy checks, the guarded resolution and the dial to checked addresses.
//! - `splice`: moving bytes both ways with an idle timeout.
//! - `refusal`: the error answers (`403`, `400`, `431`, `502`) and their accounting.
//!
//! Not here: no TLS interception (CONNECT tunnels are opaque bytes), no caching, no
//! authentication, no HTTP/2 towards the browser, no content filtering; CDP-level request
//! interception is the browse pool's business (defence in depth only). Limits are per
//! [`Limits`]: concurrent connections, request head size, connect and idle timeouts.

mod connect;
mod http1;
mod refusal;
mod splice;
#[cfg(test)]
mod tests;

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};
use url::Url;

use connect::connect_checked;
use http1::{parse_authority, read_request_head, rewrite_request_head};
use refusal::{Refusal, linger, refuse};
use splice::splice;

use crate::web::dns::Dns;
use crate::web::ssrf::{BlockReason, Policy};

/// How many refusals [`Egress::blocked_after`] can still report.
const BLOCK_LOG_CAPACITY: usize = 1_000;

/// Bounds of the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Client connections served at once; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// Largest request head (request line and headers) in bytes; larger heads get `431`.
    pub head_bytes: usize,
    /// Time to connect to the destination (shared among its addresses, like hyper does).
    pub connect_timeout: Duration,
    /// A connection with no bytes in either direction for this long is closed (also the
    /// longest wait for a request head and for a response head).
    pub idle_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_connections: 256,
            head_bytes: 64 * 1024,
            connect_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
        }
    }
}

/// One refused destination, as kept in the block log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    /// Position in the log, from 1, increasing.
    pub seq: u64,
    /// The host as the `url` crate serialises it (lower-case, IDNA applied, IPv4 in dotted
    /// form, IPv6 in brackets).
    pub host: String,
    /// The destination port.
    pub port: u16,
    /// Why it was refused.
    pub reason: BlockReason,
    /// `http://host:port/path` (without the query) for plain http, `host:port` for CONNECT.
    pub target: String,
}

/// Counters since start.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Client connections accepted.
    pub connections: u64,
    /// Requests refused by the policy (`403`).
    pub blocked: u64,
    /// Requests that ended in another error answer: malformed or oversized request (`400`,
    /// `431`), DNS failure, connect failure or timeout, unusable origin response (`502`).
    pub failed: u64,
}

/// The running proxy. Dropping it stops the listener and ends every live connection.
pub struct Egress {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl fmt::Debug for Egress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Egress")
            .field("addr", &self.addr)
            .field("limits", &self.shared.limits)
            .finish_non_exhaustive()
    }
}

impl Drop for Egress {
    fn drop(&mut self) {
        // The accept task owns the JoinSet of connection tasks: dropping it aborts them all.
        self.accept.abort();
    }
}

impl Egress {
    /// Binds `127.0.0.1:0` and spawns the accept loop on the current Tokio runtime.
    pub async fn start(policy: Arc<Policy>, dns: Dns, limits: Limits) -> io::Result<Egress> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            dial_targets: dns.dial_targets(),
            policy,
            dns,
            limits,
            connections: AtomicU64::new(0),
            blocked: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            log: Mutex::new(BlockLog::default()),
        });
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        tracing::debug!(%addr, "egress proxy listening");
        Ok(Egress {
            addr,
            shared,
            accept,
        })
    }

    /// The address the proxy listens on (always `127.0.0.1`).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The value for Chromium's `--proxy-server=`, e.g. `http://127.0.0.1:41234`.
    pub fn proxy_server_arg(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Refusals logged after `seq` (pass [`Egress::last_seq`] taken before a navigation), in
    /// order; only the last 1,000 refusals are kept.
    pub fn blocked_after(&self, seq: u64) -> Vec<Blocked> {
        let log = self.shared.lock_log();
        log.entries
            .iter()
            .filter(|entry| entry.seq > seq)
            .cloned()
            .collect()
    }

    /// The sequence number of the latest refusal (0 before the first).
    pub fn last_seq(&self) -> u64 {
        self.shared.lock_log().last_seq
    }

    /// Counters since start.
    pub fn stats(&self) -> Stats {
        Stats {
            connections: self.shared.connections.load(Ordering::Relaxed),
            blocked: self.shared.blocked.load(Ordering::Relaxed),
            failed: self.shared.failed.load(Ordering::Relaxed),
        }
    }
}

/// State shared by the accept loop and the connection tasks.
struct Shared {
    policy: Arc<Policy>,
    dns: Dns,
    /// Addresses the dial map connects to: exempt from the peer re-check, since the address
    /// that led to them was checked.
    dial_targets: HashSet<IpAddr>,
    limits: Limits,
    connections: AtomicU64,
    blocked: AtomicU64,
    failed: AtomicU64,
    log: Mutex<BlockLog>,
}

#[derive(Default)]
struct BlockLog {
    last_seq: u64,
    entries: VecDeque<Blocked>,
}

impl Shared {
    fn lock_log(&self) -> std::sync::MutexGuard<'_, BlockLog> {
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record_block(&self, host: String, port: u16, reason: BlockReason, target: String) {
        self.blocked.fetch_add(1, Ordering::Relaxed);
        let mut log = self.lock_log();
        log.last_seq += 1;
        let seq = log.last_seq;
        if log.entries.len() >= BLOCK_LOG_CAPACITY {
            log.entries.pop_front();
        }
        log.entries.push_back(Blocked {
            seq,
            host,
            port,
            reason,
            target,
        });
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    let permits = Arc::new(Semaphore::new(shared.limits.max_connections.max(1)));
    let mut connections = JoinSet::new();
    loop {
        let Ok(permit) = permits.clone().acquire_owned().await else {
            return;
        };
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of descriptors and the like: back off instead of spinning.
                tracing::warn!(%error, "egress proxy accept failed");
                drop(permit);
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        while connections.try_join_next().is_some() {}
        shared.connections.fetch_add(1, Ordering::Relaxed);
        let shared = shared.clone();
        connections.spawn(async move {
            handle(&shared, stream).await;
            drop(permit);
        });
    }
}

/// A request that passed the checks, with its connected origin socket.
struct Admitted {
    origin: TcpStream,
    /// `true` for CONNECT (answer `200`, then opaque bytes), `false` for plain http (the
    /// rewritten head is in `first_up`, and the response head gets rewritten).
    tunnel: bool,
    /// Bytes to send to the origin before splicing.
    first_up: Vec<u8>,
    /// `host:port`, for logs.
    label: String,
}

async fn handle(shared: &Shared, mut client: TcpStream) {
    let _ = client.set_nodelay(true);
    match admit(shared, &mut client).await {
        Ok(admitted) => {
            let Admitted {
                origin,
                tunnel,
                first_up,
                label,
            } = admitted;
            if tunnel
                && let Err(error) = client
                    .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
                    .await
            {
                tracing::debug!(origin = %label, %error, "egress client gone before tunnel");
                return;
            }
            let idle = shared.limits.idle_timeout;
            match splice(client, origin, first_up, !tunnel, idle).await {
                Ok(()) => tracing::debug!(origin = %label, "egress connection done"),
                Err(error) => tracing::debug!(origin = %label, %error, "egress connection ended"),
            }
        }
        Err(Refusal::Closed) => {}
        Err(refusal) => {
            let answer = refuse(shared, refusal);
            if client.write_all(&answer).await.is_ok() {
                linger(client).await;
            }
        }
    }
}

/// Reads and checks the request, connects to the destination and prepares what goes first.
async fn admit(shared: &Shared, client: &mut TcpStream) -> Result<Admitted, Refusal> {
    let (head, rest) = read_request_head(client, &shared.limits).await?;
    if head.method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) =
            parse_authority(&head.target).ok_or(Refusal::BadRequest("invalid CONNECT target"))?;
        let label = format!("{host}:{port}");
        tracing::debug!(dest = %label, "egress CONNECT");
        let origin = connect_checked(shared, &host, port, label.clone()).await?;
        return Ok(Admitted {
            origin,
            tunnel: true,
            first_up: rest,
            label,
        });
    }
    if head.target.starts_with('/') || head.target == "*" {
        return Err(Refusal::BadRequest("origin-form request to a proxy"));
    }
    let url = Url::parse(&head.target).map_err(|_| Refusal::BadRequest("invalid request URL"))?;
    if url.scheme() != "http" {
        return Err(Refusal::BadRequest("only http:// is proxied; use CONNECT"));
    }
    let host = url
        .host()
        .ok_or(Refusal::BadRequest("request URL without host"))?
        .to_owned();
    let port = url
        .port_or_known_default()
        .ok_or(Refusal::BadRequest("request URL without port"))?;
    let label = format!("{host}:{port}");
    let target = format!("http://{label}{}", url.path());
    tracing::debug!(dest = %target, method = %head.method, "egress http request");
    let origin = connect_checked(shared, &host, port, target).await?;
    let mut first_up = rewrite_request_head(&head, &url, &host, port);
    first_up.extend_from_slice(&rest);
    Ok(Admitted {
        origin,
        tunnel: false,
        first_up,
        label,
    })
}
