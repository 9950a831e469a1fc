//! Connecting to a destination the way the HTTP client would: the port and the host lists
//! first, literal addresses classified, names resolved behind the policy (the whole name
//! refused when any answer is blocked), connections only to checked addresses, the connect
//! timeout shared among them, and the connected peer checked again.
//!
//! Not here: the policy itself (`web::ssrf`) or the resolver (`web::dns`).

use std::io;
use std::net::{IpAddr, SocketAddr};

use tokio::net::TcpStream;
use url::Host;

use super::Shared;
use super::refusal::Refusal;
use crate::web::dns::{ResolveFailure, resolve_checked};
use crate::web::ssrf::BlockReason;

/// Applies the policy to `host:port`, resolves it behind the policy, connects to the checked
/// addresses in order and re-checks the connected peer. `target` is what the block log shows.
pub(super) async fn connect_checked(
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
                    && let Err(reason) = shared.policy.check_ip_for(&host_str, peer.ip())
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
pub(super) async fn dial(address: SocketAddr) -> io::Result<TcpStream> {
    #[cfg(test)]
    if !address.ip().to_canonical().is_loopback() {
        super::tests::NON_LOOPBACK_DIALS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        return Err(io::Error::other("test guard: non-loopback dial refused"));
    }
    TcpStream::connect(address).await
}
