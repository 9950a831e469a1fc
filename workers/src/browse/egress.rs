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
//! Not here: no TLS interception (CONNECT tunnels are opaque bytes), no caching, no
//! authentication, no HTTP/2 towards the browser, no content filtering; CDP-level request
//! interception is the browse pool's business (defence in depth only). Limits are per
//! [`Limits`]: concurrent connections, request head size, connect and idle timeouts.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::{JoinHandle, JoinSet};
use url::{Host, Url};

use crate::web::dns::{Dns, ResolveFailure, resolve_checked};
use crate::web::ssrf::{BlockReason, Policy};

/// How many refusals [`Egress::blocked_after`] can still report.
const BLOCK_LOG_CAPACITY: usize = 1_000;

/// Largest response head (status line and headers) accepted from an origin for a plain-http
/// request; the head is parsed to force `Connection: close` towards the browser.
const RESPONSE_HEAD_CAP: usize = 256 * 1024;

/// Most request headers accepted from the browser.
const MAX_REQUEST_HEADERS: usize = 128;

/// Most response headers accepted from an origin.
const MAX_RESPONSE_HEADERS: usize = 256;

/// How long a refused client connection is drained after the error answer, so that the
/// answer is not lost to a reset.
const LINGER: Duration = Duration::from_secs(1);

/// Request headers never forwarded to the origin (compared case-insensitively); the proxy adds
/// its own `Connection: close`.
const HOP_BY_HOP_REQUEST: [&str; 4] = [
    "proxy-connection",
    "proxy-authorization",
    "connection",
    "keep-alive",
];

/// Response headers replaced by `Connection: close` towards the browser.
const HOP_BY_HOP_RESPONSE: [&str; 3] = ["proxy-connection", "connection", "keep-alive"];

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

/// Why a request got an error answer instead of a tunnel.
#[derive(Debug)]
enum Refusal {
    /// The client went away before a complete request head; nothing to answer.
    Closed,
    /// Unparsable request, wrong form or scheme: `400`.
    BadRequest(&'static str),
    /// Request head over [`Limits::head_bytes`] or too many headers: `431`.
    HeadTooLarge,
    /// The policy refused the destination: `403`.
    Blocked {
        host: String,
        port: u16,
        reason: BlockReason,
        target: String,
    },
    /// The name did not resolve: `502 dns_error`.
    Dns { origin: String, message: String },
    /// No address accepted the connection: `502 connect_error`.
    Connect { origin: String, message: String },
    /// Connecting took too long: `502 timeout`.
    Timeout { origin: String },
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

/// Counts and logs a refusal and returns the answer to send.
fn refuse(shared: &Shared, refusal: Refusal) -> Vec<u8> {
    match refusal {
        Refusal::Blocked {
            host,
            port,
            reason,
            target,
        } => {
            tracing::info!(origin = %format!("{host}:{port}"), reason = reason.as_str(),
                "egress proxy blocked destination");
            tracing::debug!(dest = %target, reason = reason.as_str(), "egress proxy blocked target");
            let body = format!("trawl: blocked destination {host} ({reason})");
            shared.record_block(host, port, reason, target);
            error_answer("403 Forbidden", ("X-Trawl-Blocked", reason.as_str()), &body)
        }
        other => {
            shared.failed.fetch_add(1, Ordering::Relaxed);
            match other {
                Refusal::BadRequest(problem) => {
                    tracing::debug!(problem, "egress proxy bad request");
                    error_answer(
                        "400 Bad Request",
                        ("X-Trawl-Error", "bad_request"),
                        &format!("trawl: bad proxy request ({problem})"),
                    )
                }
                Refusal::HeadTooLarge => {
                    tracing::debug!("egress proxy request head too large");
                    error_answer(
                        "431 Request Header Fields Too Large",
                        ("X-Trawl-Error", "headers_too_large"),
                        "trawl: request head too large",
                    )
                }
                Refusal::Dns { origin, message } => {
                    tracing::debug!(%origin, %message, "egress proxy dns failure");
                    error_answer(
                        "502 Bad Gateway",
                        ("X-Trawl-Error", "dns_error"),
                        &format!("trawl: dns lookup failed for {origin}"),
                    )
                }
                Refusal::Connect { origin, message } => {
                    tracing::debug!(%origin, %message, "egress proxy connect failure");
                    error_answer(
                        "502 Bad Gateway",
                        ("X-Trawl-Error", "connect_error"),
                        &format!("trawl: cannot connect to {origin}"),
                    )
                }
                Refusal::Timeout { origin } => {
                    tracing::debug!(%origin, "egress proxy connect timeout");
                    error_answer(
                        "502 Bad Gateway",
                        ("X-Trawl-Error", "timeout"),
                        &format!("trawl: connect to {origin} timed out"),
                    )
                }
                Refusal::Closed | Refusal::Blocked { .. } => Vec::new(),
            }
        }
    }
}

fn error_answer(status: &str, header: (&str, &str), body: &str) -> Vec<u8> {
    format!(
        "HTTP/1.1 {status}\r\n{}: {}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        header.0,
        header.1,
        body.len()
    )
    .into_bytes()
}

/// Half-closes and drains the client for a moment, so that a client still sending (an
/// oversized head) reads the answer instead of a reset.
async fn linger(mut client: TcpStream) {
    let _ = client.shutdown().await;
    let mut sink = [0u8; 4096];
    let mut drained = 0usize;
    let _ = tokio::time::timeout(LINGER, async {
        while drained < 1024 * 1024 {
            match client.read(&mut sink).await {
                Ok(0) | Err(_) => break,
                Ok(n) => drained += n,
            }
        }
    })
    .await;
}

/// A parsed request head.
struct RequestHead {
    method: String,
    target: String,
    version: u8,
    /// Name and raw value of every header, in order.
    headers: Vec<(String, Vec<u8>)>,
    /// Bytes of the head, the blank line included.
    len: usize,
}

/// Parses a request head from the start of `buf`: `Ok(None)` while incomplete.
fn parse_request_head(buf: &[u8], cap: usize) -> Result<Option<RequestHead>, Refusal> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_REQUEST_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    match request.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            if len > cap {
                return Err(Refusal::HeadTooLarge);
            }
            let (Some(method), Some(target), Some(version)) =
                (request.method, request.path, request.version)
            else {
                return Err(Refusal::BadRequest("incomplete request line"));
            };
            Ok(Some(RequestHead {
                method: method.to_owned(),
                target: target.to_owned(),
                version,
                headers: request
                    .headers
                    .iter()
                    .map(|header| (header.name.to_owned(), header.value.to_vec()))
                    .collect(),
                len,
            }))
        }
        Ok(httparse::Status::Partial) if buf.len() >= cap => Err(Refusal::HeadTooLarge),
        Ok(httparse::Status::Partial) => Ok(None),
        Err(httparse::Error::TooManyHeaders) => Err(Refusal::HeadTooLarge),
        Err(_) => Err(Refusal::BadRequest("malformed request head")),
    }
}

/// Reads the request head; returns it with the bytes read after it.
async fn read_request_head(
    client: &mut TcpStream,
    limits: &Limits,
) -> Result<(RequestHead, Vec<u8>), Refusal> {
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let deadline = tokio::time::Instant::now() + limits.idle_timeout;
    loop {
        if let Some(head) = parse_request_head(&buf, limits.head_bytes)? {
            let rest = buf.split_off(head.len);
            return Ok((head, rest));
        }
        let mut chunk = [0u8; 8192];
        let read = tokio::time::timeout_at(deadline, client.read(&mut chunk)).await;
        match read {
            Ok(Ok(0)) | Ok(Err(_)) if buf.is_empty() => return Err(Refusal::Closed),
            Ok(Ok(0)) => return Err(Refusal::BadRequest("request head cut short")),
            Ok(Ok(n)) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Ok(Err(_)) => return Err(Refusal::Closed),
            Err(_) if buf.is_empty() => return Err(Refusal::Closed),
            Err(_) => return Err(Refusal::BadRequest("request head too slow")),
        }
    }
}

/// Parses a CONNECT authority (`host:port`, IPv6 in brackets); the host is normalised by the
/// `url` crate exactly as in a URL.
fn parse_authority(authority: &str) -> Option<(Host<String>, u16)> {
    if authority.bytes().any(|b| {
        matches!(b, b'/' | b'?' | b'#' | b'@' | b'\\' | b'%')
            || b.is_ascii_whitespace()
            || b.is_ascii_control()
    }) {
        return None;
    }
    let (host, port) = authority.rsplit_once(':')?;
    if host.is_empty() || port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let port: u16 = port.parse().ok()?;
    let url = Url::parse(&format!("http://{host}/")).ok()?;
    if url.port().is_some() || url.path() != "/" || !url.username().is_empty() {
        return None;
    }
    Some((url.host()?.to_owned(), port))
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

/// The request head as sent to the origin: origin-form target, proxy and hop-by-hop headers
/// dropped, `Connection: close` forced, Host kept as sent (added from the URL if missing).
fn rewrite_request_head(head: &RequestHead, url: &Url, host: &Host<String>, port: u16) -> Vec<u8> {
    let mut path = url.path().to_owned();
    if let Some(query) = url.query() {
        path.push('?');
        path.push_str(query);
    }
    let mut out = format!("{} {path} HTTP/1.{}\r\n", head.method, head.version).into_bytes();
    let mut has_host = false;
    for (name, value) in &head.headers {
        if HOP_BY_HOP_REQUEST
            .iter()
            .any(|drop| name.eq_ignore_ascii_case(drop))
        {
            continue;
        }
        has_host |= name.eq_ignore_ascii_case("host");
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    if !has_host {
        let host_header = match url.port() {
            Some(_) => format!("Host: {host}:{port}\r\n"),
            None => format!("Host: {host}\r\n"),
        };
        out.extend_from_slice(host_header.as_bytes());
    }
    out.extend_from_slice(b"Connection: close\r\n\r\n");
    out
}

/// Applies the policy to `host:port`, resolves it behind the policy, connects to the checked
/// addresses in order and re-checks the connected peer. `target` is what the block log shows.
async fn connect_checked(
    shared: &Shared,
    host: &Host<String>,
    port: u16,
    target: String,
) -> Result<TcpStream, Refusal> {
    let host_str = host.to_string();
    let blocked = |host: String, reason| Refusal::Blocked {
        host,
        port,
        reason,
        target: target.clone(),
    };
    if port == 0 {
        return Err(blocked(host_str, BlockReason::Port));
    }
    // Host lists apply to literal addresses too; a literal is also classified here.
    shared
        .policy
        .check_host(&host_str)
        .map_err(|reason| blocked(host_str.clone(), reason))?;
    let addresses: Vec<IpAddr> = match host {
        Host::Ipv4(ip) => vec![IpAddr::V4(*ip)],
        Host::Ipv6(ip) => vec![IpAddr::V6(*ip)],
        Host::Domain(domain) => resolve_checked(&shared.policy, &shared.dns, domain)
            .await
            .map_err(|failure| match failure {
                ResolveFailure::Blocked { host, reason } => blocked(host, reason),
                ResolveFailure::Lookup { host, message } => Refusal::Dns {
                    origin: format!("{host}:{port}"),
                    message,
                },
            })?,
    };
    let origin = format!("{host_str}:{port}");
    // Like hyper: the connect timeout is shared among the addresses.
    let count = u32::try_from(addresses.len()).unwrap_or(u32::MAX).max(1);
    let per_attempt = shared.limits.connect_timeout / count;
    let mut last = Refusal::Connect {
        origin: origin.clone(),
        message: "no address".to_owned(),
    };
    for ip in addresses {
        let address = SocketAddr::new(ip, port);
        match tokio::time::timeout(per_attempt, dial(address)).await {
            Ok(Ok(stream)) => {
                let peer = stream.peer_addr().map_err(|error| Refusal::Connect {
                    origin: origin.clone(),
                    message: error.to_string(),
                })?;
                // Defence in depth: the address was checked before connecting.
                if !shared.dial_targets.contains(&peer.ip())
                    && let Err(reason) = shared.policy.check_ip(peer.ip())
                {
                    return Err(blocked(peer.ip().to_string(), reason));
                }
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(error)) => {
                last = Refusal::Connect {
                    origin: origin.clone(),
                    message: error.to_string(),
                };
            }
            Err(_) => {
                last = Refusal::Timeout {
                    origin: origin.clone(),
                };
            }
        }
    }
    Err(last)
}

/// Opens the TCP connection. In unit tests it refuses every non-loopback address (and counts
/// the attempt), so a policy bug shows as a failed test, never as a packet.
async fn dial(address: SocketAddr) -> io::Result<TcpStream> {
    #[cfg(test)]
    if !address.ip().to_canonical().is_loopback() {
        tests::NON_LOOPBACK_DIALS.fetch_add(1, Ordering::SeqCst);
        return Err(io::Error::other("test guard: non-loopback dial refused"));
    }
    TcpStream::connect(address).await
}

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
async fn splice(
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

/// A parsed response head.
struct ResponseHead {
    len: usize,
    /// Final (`>= 200`, or `101`) rather than interim.
    is_final: bool,
    /// What to send to the browser.
    bytes: Vec<u8>,
}

fn parse_response_head(buf: &[u8]) -> io::Result<Option<ResponseHead>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
    let mut response = httparse::Response::new(&mut headers);
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    match response.parse(buf) {
        Ok(httparse::Status::Complete(len)) => {
            let code = response.code.ok_or_else(|| invalid("no status"))?;
            let raw = buf.get(..len).ok_or_else(|| invalid("head length"))?;
            if (100..200).contains(&code) {
                return Ok(Some(ResponseHead {
                    len,
                    is_final: code == 101,
                    bytes: raw.to_vec(),
                }));
            }
            let version = response.version.unwrap_or(1);
            let reason = response.reason.unwrap_or_default();
            let mut bytes = format!("HTTP/1.{version} {code} {reason}\r\n").into_bytes();
            for header in response.headers.iter() {
                if HOP_BY_HOP_RESPONSE
                    .iter()
                    .any(|drop| header.name.eq_ignore_ascii_case(drop))
                {
                    continue;
                }
                bytes.extend_from_slice(header.name.as_bytes());
                bytes.extend_from_slice(b": ");
                bytes.extend_from_slice(header.value);
                bytes.extend_from_slice(b"\r\n");
            }
            bytes.extend_from_slice(b"Connection: close\r\n\r\n");
            Ok(Some(ResponseHead {
                len,
                is_final: true,
                bytes,
            }))
        }
        Ok(httparse::Status::Partial) if buf.len() >= RESPONSE_HEAD_CAP => {
            Err(invalid("response head too large"))
        }
        Ok(httparse::Status::Partial) => Ok(None),
        Err(error) => Err(invalid(&format!("malformed response head: {error}"))),
    }
}

/// Forwards interim heads as they are and the final head with `Connection: close`, then the
/// body bytes read with it. An origin that closes without a byte gets the same from the proxy;
/// an unusable head gets a `502` (when nothing was forwarded yet).
async fn forward_response_head<R, W>(origin: &mut R, client: &mut W) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut buf: Vec<u8> = Vec::with_capacity(8192);
    let mut forwarded = false;
    loop {
        let parsed = match parse_response_head(&buf) {
            Ok(parsed) => parsed,
            Err(error) => {
                if !forwarded {
                    let answer = error_answer(
                        "502 Bad Gateway",
                        ("X-Trawl-Error", "protocol_error"),
                        "trawl: unusable response from origin",
                    );
                    let _ = client.write_all(&answer).await;
                }
                return Err(error);
            }
        };
        if let Some(head) = parsed {
            client.write_all(&head.bytes).await?;
            forwarded = true;
            buf.drain(..head.len);
            if head.is_final {
                return client.write_all(&buf).await;
            }
            continue;
        }
        let mut chunk = [0u8; 8192];
        let n = origin.read(&mut chunk).await?;
        if n == 0 {
            if buf.is_empty() {
                return Ok(());
            }
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "origin closed inside the response head",
            ));
        }
        buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web::dns::StaticDns;
    use std::sync::atomic::AtomicUsize;

    /// Dial attempts to non-loopback addresses (refused by `dial`); must stay 0.
    pub(super) static NON_LOOPBACK_DIALS: AtomicUsize = AtomicUsize::new(0);

    const PUBLIC: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(93, 184, 216, 34));
    const PUBLIC2: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(93, 184, 216, 35));
    const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
    const WAIT: Duration = Duration::from_secs(10);

    /// A loopback origin: counts accepts, records request heads, answers with the request line
    /// as body (keep-alive, to see the proxy force close), then closes.
    struct Origin {
        port: u16,
        accepts: Arc<AtomicUsize>,
        heads: Arc<Mutex<Vec<String>>>,
        task: JoinHandle<()>,
    }

    impl Drop for Origin {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    impl Origin {
        async fn start() -> Origin {
            let listener = TcpListener::bind((LOOPBACK, 0)).await.expect("bind origin");
            let port = listener.local_addr().expect("origin addr").port();
            let accepts = Arc::new(AtomicUsize::new(0));
            let heads = Arc::new(Mutex::new(Vec::new()));
            let (a, h) = (accepts.clone(), heads.clone());
            let task = tokio::spawn(async move {
                loop {
                    let Ok((mut stream, _)) = listener.accept().await else {
                        return;
                    };
                    a.fetch_add(1, Ordering::SeqCst);
                    let h = h.clone();
                    tokio::spawn(async move {
                        let mut buf = Vec::new();
                        let mut chunk = [0u8; 1024];
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match stream.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let head = String::from_utf8_lossy(&buf).into_owned();
                        let line = head.lines().next().unwrap_or_default().to_owned();
                        h.lock().expect("heads").push(head);
                        let answer = format!(
                            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\n\
                             Keep-Alive: timeout=5\r\nContent-Length: {}\r\n\r\n{line}",
                            line.len()
                        );
                        let _ = stream.write_all(answer.as_bytes()).await;
                    });
                }
            });
            Origin {
                port,
                accepts,
                heads,
                task,
            }
        }

        fn accepts(&self) -> usize {
            self.accepts.load(Ordering::SeqCst)
        }

        fn last_head(&self) -> String {
            self.heads
                .lock()
                .expect("heads")
                .last()
                .cloned()
                .unwrap_or_default()
        }
    }

    fn static_dns() -> Arc<StaticDns> {
        Arc::new(
            StaticDns::new()
                .answer("public.test", &[PUBLIC])
                .answer("closed.test", &[PUBLIC2])
                .answer("mixed.test", &[PUBLIC, "10.0.0.5".parse().expect("ip")])
                .answer("private.test", &["10.0.0.5".parse().expect("ip")])
                .answer("sub.evil.test", &[PUBLIC])
                .answer("empty.test", &[])
                .dial(PUBLIC, LOOPBACK)
                .dial(PUBLIC2, LOOPBACK),
        )
    }

    async fn proxy_with(policy: Policy, map: &Arc<StaticDns>, limits: Limits) -> Egress {
        Egress::start(Arc::new(policy), Dns::Static(map.clone()), limits)
            .await
            .expect("start egress")
    }

    async fn proxy(map: &Arc<StaticDns>) -> Egress {
        proxy_with(Policy::default(), map, Limits::default()).await
    }

    /// Sends raw bytes and reads everything until the proxy closes.
    async fn exchange(proxy: &Egress, raw: &[u8]) -> String {
        tokio::time::timeout(WAIT, async {
            let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
            let _ = stream.write_all(raw).await;
            let mut out = Vec::new();
            let _ = stream.read_to_end(&mut out).await;
            String::from_utf8_lossy(&out).into_owned()
        })
        .await
        .expect("exchange timed out")
    }

    /// Sends a CONNECT and returns the stream and the answer head.
    async fn connect(proxy: &Egress, authority: &str) -> (TcpStream, String) {
        tokio::time::timeout(WAIT, async {
            let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
            let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
            stream
                .write_all(request.as_bytes())
                .await
                .expect("write CONNECT");
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                match stream.read(&mut byte).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => head.push(byte[0]),
                }
            }
            (stream, String::from_utf8_lossy(&head).into_owned())
        })
        .await
        .expect("CONNECT timed out")
    }

    fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
        let head = answer.split("\r\n\r\n").next()?;
        head.lines().skip(1).find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim())
        })
    }

    fn assert_no_leak() {
        assert_eq!(NON_LOOPBACK_DIALS.load(Ordering::SeqCst), 0);
    }

    #[tokio::test]
    async fn plain_http_reaches_the_origin_in_origin_form_with_connection_close() {
        let origin = Origin::start().await;
        let map = static_dns();
        let egress = proxy(&map).await;
        assert_eq!(
            egress.proxy_server_arg(),
            format!("http://127.0.0.1:{}", egress.addr().port())
        );
        let port = origin.port;
        let request = format!(
            "GET http://public.test:{port}/a/b?q=1#frag HTTP/1.1\r\nHost: public.test:{port}\r\n\
             Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\n\
             Connection: keep-alive\r\nKeep-Alive: 300\r\nAccept: */*\r\n\r\n"
        );
        let answer = exchange(&egress, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert_eq!(header(&answer, "connection"), Some("close"), "{answer}");
        assert_eq!(header(&answer, "keep-alive"), None, "{answer}");
        assert!(answer.ends_with("GET /a/b?q=1 HTTP/1.1"), "{answer}");
        let head = origin.last_head();
        assert!(head.starts_with("GET /a/b?q=1 HTTP/1.1\r\n"), "{head}");
        assert!(
            head.contains(&format!("Host: public.test:{port}\r\n")),
            "{head}"
        );
        assert!(head.contains("Connection: close\r\n"), "{head}");
        assert!(head.contains("Accept: */*\r\n"), "{head}");
        let lower = head.to_ascii_lowercase();
        assert!(!lower.contains("proxy-"), "{head}");
        assert!(!lower.contains("keep-alive"), "{head}");
        assert_eq!(origin.accepts(), 1);
        assert_eq!(map.lookups("public.test"), 1);
        let stats = egress.stats();
        assert_eq!((stats.connections, stats.blocked, stats.failed), (1, 0, 0));
        assert_eq!(egress.last_seq(), 0);
        assert_no_leak();
    }

    #[tokio::test]
    async fn request_body_start_is_forwarded() {
        let origin = Origin::start().await;
        let map = static_dns();
        let egress = proxy(&map).await;
        let port = origin.port;
        let request = format!(
            "POST http://public.test:{port}/form HTTP/1.1\r\nHost: public.test:{port}\r\n\
             Content-Length: 5\r\n\r\nhello"
        );
        let answer = exchange(&egress, request.as_bytes()).await;
        assert!(answer.ends_with("POST /form HTTP/1.1"), "{answer}");
        assert!(origin.last_head().contains("Content-Length: 5\r\n"));
        assert_no_leak();
    }

    #[tokio::test]
    async fn connect_tunnels_bytes_both_ways() {
        let origin = Origin::start().await;
        let map = static_dns();
        let egress = proxy(&map).await;
        let (mut stream, head) = connect(&egress, &format!("public.test:{}", origin.port)).await;
        assert_eq!(head, "HTTP/1.1 200 Connection Established\r\n\r\n");
        let answer = tokio::time::timeout(WAIT, async {
            stream
                .write_all(b"GET /inside HTTP/1.1\r\nHost: public.test\r\n\r\n")
                .await
                .expect("write");
            let mut out = Vec::new();
            let _ = stream.read_to_end(&mut out).await;
            String::from_utf8_lossy(&out).into_owned()
        })
        .await
        .expect("tunnel timed out");
        // The tunnel is opaque: the origin's own Connection header passes unchanged.
        assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
        assert_eq!(header(&answer, "connection"), Some("keep-alive"));
        assert!(answer.ends_with("GET /inside HTTP/1.1"), "{answer}");
        assert_eq!(origin.accepts(), 1);
        assert_no_leak();
    }

    #[tokio::test]
    async fn blocked_literals_get_403_and_are_logged_without_connecting() {
        let origin = Origin::start().await;
        let map = static_dns();
        let egress = proxy(&map).await;
        let port = origin.port;
        let cases = [
            ("127.0.0.1", "127.0.0.1", BlockReason::Loopback),
            ("10.0.0.5", "10.0.0.5", BlockReason::Private),
            ("0x7f.1", "127.0.0.1", BlockReason::Loopback),
            ("[::1]", "[::1]", BlockReason::Loopback),
            ("169.254.169.254", "169.254.169.254", BlockReason::Metadata),
            (
                "[::ffff:7f00:1]",
                "[::ffff:7f00:1]",
                BlockReason::Ipv4Mapped,
            ),
            ("localhost", "localhost", BlockReason::Loopback),
            ("2130706433", "127.0.0.1", BlockReason::Loopback),
        ];
        let mut seq = egress.last_seq();
        for (input, host, reason) in cases {
            // CONNECT form.
            let (_, head) = connect(&egress, &format!("{input}:{port}")).await;
            assert!(
                head.starts_with("HTTP/1.1 403 Forbidden\r\n"),
                "{input}: {head}"
            );
            assert_eq!(header(&head, "x-trawl-blocked"), Some(reason.as_str()));
            let blocked = egress.blocked_after(seq);
            assert_eq!(blocked.len(), 1, "{input}");
            assert_eq!(blocked[0].host, host);
            assert_eq!(blocked[0].port, port);
            assert_eq!(blocked[0].reason, reason);
            assert_eq!(blocked[0].target, format!("{host}:{port}"));
            seq = egress.last_seq();
            // Absolute form.
            let request = format!("GET http://{input}:{port}/p?secret=1 HTTP/1.1\r\n\r\n");
            let answer = exchange(&egress, request.as_bytes()).await;
            assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
            assert_eq!(header(&answer, "x-trawl-blocked"), Some(reason.as_str()));
            assert_eq!(header(&answer, "connection"), Some("close"));
            assert_eq!(header(&answer, "content-type"), Some("text/plain"));
            assert!(
                answer.ends_with(&format!("trawl: blocked destination {host} ({reason})")),
                "{answer}"
            );
            let blocked = egress.blocked_after(seq);
            assert_eq!(blocked.len(), 1, "{input}");
            assert_eq!(blocked[0].target, format!("http://{host}:{port}/p"));
            seq = egress.last_seq();
        }
        assert_eq!(egress.blocked_after(0).len(), 2 * cases.len());
        assert_eq!(egress.stats().blocked, 2 * cases.len() as u64);
        assert_eq!(origin.accepts(), 0);
        assert_no_leak();
    }

    #[tokio::test]
    async fn names_with_any_blocked_answer_are_refused() {
        let origin = Origin::start().await;
        let map = static_dns();
        let egress = proxy(&map).await;
        for (name, reason) in [
            ("mixed.test", BlockReason::Private),
            ("private.test", BlockReason::Private),
        ] {
            let (_, head) = connect(&egress, &format!("{name}:{}", origin.port)).await;
            assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
            assert_eq!(header(&head, "x-trawl-blocked"), Some(reason.as_str()));
            let last = egress.blocked_after(0).pop().expect("logged");
            assert_eq!(last.host, name);
            assert_eq!(map.lookups(name), 1);
        }
        assert_eq!(origin.accepts(), 0);
        assert_no_leak();
    }

    #[tokio::test]
    async fn host_lists_refuse_before_dns() {
        let origin = Origin::start().await;
        let map = static_dns();
        let policy = Policy {
            block_hosts: vec!["*.evil.test".into()],
            ..Policy::default()
        };
        let egress = proxy_with(policy, &map, Limits::default()).await;
        let (_, head) = connect(&egress, &format!("sub.evil.test:{}", origin.port)).await;
        assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
        assert_eq!(header(&head, "x-trawl-blocked"), Some("blocked_host"));
        let request = format!(
            "GET http://SUB.Evil.Test.:{}/ HTTP/1.1\r\n\r\n",
            origin.port
        );
        let answer = exchange(&egress, request.as_bytes()).await;
        assert_eq!(header(&answer, "x-trawl-blocked"), Some("blocked_host"));
        assert_eq!(map.lookups("sub.evil.test"), 0);

        let policy = Policy {
            allow_hosts: vec!["other.test".into()],
            ..Policy::default()
        };
        let egress = proxy_with(policy, &map, Limits::default()).await;
        let (_, head) = connect(&egress, &format!("public.test:{}", origin.port)).await;
        assert_eq!(header(&head, "x-trawl-blocked"), Some("not_allowlisted"));
        assert_eq!(map.lookups("public.test"), 0);
        assert_eq!(origin.accepts(), 0);
        assert_no_leak();
    }

    #[tokio::test]
    async fn port_zero_is_blocked() {
        let map = static_dns();
        let egress = proxy(&map).await;
        let (_, head) = connect(&egress, "public.test:0").await;
        assert_eq!(header(&head, "x-trawl-blocked"), Some("port"));
        assert_eq!(map.lookups("public.test"), 0);
    }

    #[tokio::test]
    async fn dns_and_connect_failures_are_502() {
        let map = static_dns();
        let egress = proxy(&map).await;
        for name in ["empty.test", "unknown.test"] {
            let (_, head) = connect(&egress, &format!("{name}:443")).await;
            assert!(head.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{head}");
            assert_eq!(header(&head, "x-trawl-error"), Some("dns_error"));
        }
        let closed_port = {
            let listener = TcpListener::bind((LOOPBACK, 0)).await.expect("bind");
            listener.local_addr().expect("addr").port()
        };
        let (_, head) = connect(&egress, &format!("closed.test:{closed_port}")).await;
        assert!(head.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{head}");
        assert_eq!(header(&head, "x-trawl-error"), Some("connect_error"));
        let stats = egress.stats();
        assert_eq!((stats.blocked, stats.failed), (0, 3));
        assert_eq!(egress.last_seq(), 0);
        assert_no_leak();
    }

    #[tokio::test]
    async fn malformed_requests_get_400() {
        let map = static_dns();
        let egress = proxy(&map).await;
        for request in [
            "GET ftp://public.test/file HTTP/1.1\r\n\r\n",
            "GET https://public.test/ HTTP/1.1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: public.test\r\n\r\n",
            "GET * HTTP/1.1\r\n\r\n",
            "CONNECT public.test HTTP/1.1\r\n\r\n",
            "CONNECT ::1:443 HTTP/1.1\r\n\r\n",
            "CONNECT user@public.test:443 HTTP/1.1\r\n\r\n",
            "CONNECT public.test:443/x HTTP/1.1\r\n\r\n",
            "CONNECT public.test:99999 HTTP/1.1\r\n\r\n",
            "NOT A REQUEST\r\n\r\n",
        ] {
            let answer = exchange(&egress, request.as_bytes()).await;
            assert!(
                answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
                "{request:?}: {answer}"
            );
        }
        assert_eq!(map.lookups("public.test"), 0);
        assert_eq!(egress.stats().failed, 10);
        assert_no_leak();
    }

    #[tokio::test]
    async fn oversized_heads_get_431() {
        let map = static_dns();
        let limits = Limits {
            head_bytes: 1024,
            ..Limits::default()
        };
        let egress = proxy_with(Policy::default(), &map, limits).await;
        let mut request = b"GET http://public.test/ HTTP/1.1\r\nX-Big: ".to_vec();
        request.extend(std::iter::repeat_n(b'a', 4096));
        let answer = exchange(&egress, &request).await;
        assert!(
            answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
            "{answer}"
        );
        // Complete but over the cap.
        request.extend_from_slice(b"\r\n\r\n");
        let answer = exchange(&egress, &request).await;
        assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
        assert_eq!(map.lookups("public.test"), 0);
    }

    #[tokio::test]
    async fn private_network_policy_allows_loopback_but_not_metadata() {
        let origin = Origin::start().await;
        let map = static_dns();
        let policy = Policy {
            allow_private_network: true,
            ..Policy::default()
        };
        let egress = proxy_with(policy, &map, Limits::default()).await;
        let port = origin.port;
        let request =
            format!("GET http://127.0.0.1:{port}/local HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
        let answer = exchange(&egress, request.as_bytes()).await;
        assert!(answer.ends_with("GET /local HTTP/1.1"), "{answer}");
        let (_, head) = connect(&egress, &format!("127.0.0.1:{port}")).await;
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        let (_, head) = connect(&egress, "169.254.169.254:80").await;
        assert_eq!(header(&head, "x-trawl-blocked"), Some("metadata"));
        assert_eq!(origin.accepts(), 2);
        assert_no_leak();
    }

    #[tokio::test]
    async fn idle_tunnels_are_closed() {
        let origin = Origin::start().await;
        let map = static_dns();
        let limits = Limits {
            idle_timeout: Duration::from_millis(200),
            ..Limits::default()
        };
        let egress = proxy_with(Policy::default(), &map, limits).await;
        let (mut stream, head) = connect(&egress, &format!("public.test:{}", origin.port)).await;
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(WAIT, stream.read(&mut buf)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
    }

    #[tokio::test]
    async fn dropping_the_proxy_ends_listener_and_tunnels() {
        let origin = Origin::start().await;
        let map = static_dns();
        let egress = proxy(&map).await;
        let addr = egress.addr();
        let (mut stream, head) = connect(&egress, &format!("public.test:{}", origin.port)).await;
        assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
        drop(egress);
        let mut buf = [0u8; 16];
        let read = tokio::time::timeout(WAIT, stream.read(&mut buf)).await;
        assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
        assert!(TcpStream::connect(addr).await.is_err());
    }

    #[tokio::test]
    async fn block_log_keeps_the_last_thousand() {
        let map = static_dns();
        let egress = proxy(&map).await;
        for i in 0..1_005u16 {
            egress
                .shared
                .record_block("h".into(), i, BlockReason::Private, "h".into());
        }
        assert_eq!(egress.last_seq(), 1_005);
        let all = egress.blocked_after(0);
        assert_eq!(all.len(), 1_000);
        assert_eq!(all[0].seq, 6);
        assert_eq!(egress.blocked_after(1_003).len(), 2);
    }

    async fn rewrite(raw: &[u8]) -> (io::Result<()>, String) {
        let mut reader = raw;
        let mut out: Vec<u8> = Vec::new();
        let result = forward_response_head(&mut reader, &mut out).await;
        // What follows the head is copied by the caller.
        out.extend_from_slice(reader);
        (result, String::from_utf8_lossy(&out).into_owned())
    }

    #[tokio::test]
    async fn response_heads_are_rewritten_to_close() {
        let (result, out) = rewrite(
            b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n\
              HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\
              Proxy-Connection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
        )
        .await;
        assert!(result.is_ok());
        assert_eq!(
            out,
            "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n\
             HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
        );
        // An origin that closes without a byte: nothing is sent either.
        let (result, out) = rewrite(b"").await;
        assert!(result.is_ok());
        assert_eq!(out, "");
        // Garbage or a head cut short: a 502 when nothing was forwarded yet.
        for raw in [&b"SSH-2.0-OpenSSH\r\n\r\n"[..], b"HTTP/1.1 200 OK\r\nA: b"] {
            let (result, out) = rewrite(raw).await;
            assert!(result.is_err());
            if raw.starts_with(b"SSH") {
                assert!(out.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{out}");
                assert_eq!(header(&out, "x-trawl-error"), Some("protocol_error"));
            }
        }
    }

    #[test]
    fn authorities_parse_like_urls() {
        let parsed = |a: &str| parse_authority(a).map(|(h, p)| (h.to_string(), p));
        assert_eq!(parsed("Example.COM:443"), Some(("example.com".into(), 443)));
        assert_eq!(parsed("0x7f.1:80"), Some(("127.0.0.1".into(), 80)));
        assert_eq!(parsed("[::1]:443"), Some(("[::1]".into(), 443)));
        for bad in [
            "", ":443", "[::1]", "::1:443", "a:b:443", "a:", "a:+1", "a b:1", "%31:1",
        ] {
            assert_eq!(parsed(bad), None, "{bad:?}");
        }
    }
}
