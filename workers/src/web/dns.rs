//! Name resolution behind the SSRF guard: the resolver hands reqwest only addresses the policy
//! accepts, and refuses the whole host when any answer is blocked, so the address connected to
//! is always an address that was checked (no DNS-rebinding window).
//!
//! Not here: the policy itself (`web::ssrf`). `Dns::Static` is a scripted resolver for tests
//! and for pinning names (like curl's `--resolve`); it never touches real DNS.

use std::collections::{HashMap, HashSet};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::Mutex;

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::ssrf::{BlockReason, Policy};

/// Where answers come from.
#[derive(Clone, Default)]
pub enum Dns {
    /// The system resolver (getaddrinfo).
    #[default]
    System,
    /// A scripted map; see [`StaticDns`].
    Static(Arc<StaticDns>),
}

impl Dns {
    /// Addresses a dial map may connect to (exempt from the post-connect re-check).
    pub(crate) fn dial_targets(&self) -> HashSet<IpAddr> {
        match self {
            Dns::System => HashSet::new(),
            Dns::Static(map) => map.dial.values().copied().collect(),
        }
    }
}

/// A scripted resolver: each name has a sequence of answers (the last one repeats), so a test
/// can script a rebinding name (`public` first, `127.0.0.1` second). After an answer passes the
/// SSRF check, a dial map may send the connection elsewhere (a "public" test address to the
/// loopback fixture server), which is how tests reach a local server through a guard that
/// refuses loopback.
#[derive(Debug, Default)]
pub struct StaticDns {
    answers: HashMap<String, Vec<Vec<IpAddr>>>,
    dial: HashMap<IpAddr, IpAddr>,
    lookups: Mutex<HashMap<String, usize>>,
}

impl StaticDns {
    /// Returns an empty map: every name fails to resolve.
    pub fn new() -> Self {
        StaticDns::default()
    }

    /// Adds the answer for the next lookup of `name` (after earlier ones are used up).
    pub fn answer(mut self, name: &str, addresses: &[IpAddr]) -> Self {
        self.answers
            .entry(name.to_ascii_lowercase())
            .or_default()
            .push(addresses.to_vec());
        self
    }

    /// Connects to `to` whenever the checked answer is `from`.
    pub fn dial(mut self, from: IpAddr, to: IpAddr) -> Self {
        self.dial.insert(from, to);
        self
    }

    /// Returns how many times `name` was looked up.
    pub fn lookups(&self, name: &str) -> usize {
        self.lookups
            .lock()
            .map(|lookups| {
                lookups
                    .get(&name.to_ascii_lowercase())
                    .copied()
                    .unwrap_or(0)
            })
            .unwrap_or(0)
    }

    fn lookup(&self, name: &str) -> Option<Vec<IpAddr>> {
        let name = name.to_ascii_lowercase();
        let count = {
            let mut lookups = self.lookups.lock().ok()?;
            let count = lookups.entry(name.clone()).or_insert(0);
            *count += 1;
            *count
        };
        let sequence = self.answers.get(&name)?;
        let index = (count - 1).min(sequence.len().saturating_sub(1));
        sequence.get(index).cloned()
    }
}

/// Why resolution ended without addresses; carried through reqwest's error chain so the client
/// can report `blocked_destination` or `dns_error` precisely.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResolveFailure {
    #[error("{host} resolves to a blocked address ({reason})")]
    Blocked { host: String, reason: BlockReason },
    #[error("{host}: {message}")]
    Lookup { host: String, message: String },
}

/// The resolver given to reqwest.
pub(crate) struct GuardedResolver {
    policy: Arc<Policy>,
    dns: Dns,
    /// A name resolved under a policy that allows private networks: a configured proxy's
    /// host, which the operator chose (cloud metadata addresses stay refused).
    exempt: Option<(String, Arc<Policy>)>,
}

impl GuardedResolver {
    pub(crate) fn new(policy: Arc<Policy>, dns: Dns) -> Self {
        GuardedResolver {
            policy,
            dns,
            exempt: None,
        }
    }

    /// Lets `name` (lower-case) resolve to private addresses.
    pub(crate) fn exempt(mut self, name: Option<String>) -> Self {
        let open = Arc::new(Policy {
            allow_private_network: true,
            ..(*self.policy).clone()
        });
        self.exempt = name.map(|name| (name, open));
        self
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = match &self.exempt {
            Some((exempt, open))
                if name
                    .as_str()
                    .trim_end_matches('.')
                    .eq_ignore_ascii_case(exempt) =>
            {
                open.clone()
            }
            _ => self.policy.clone(),
        };
        let dns = self.dns.clone();
        Box::pin(async move {
            let addresses = resolve_checked(&policy, &dns, name.as_str())
                .await
                .map_err(|failure| Box::new(failure) as Box<dyn std::error::Error + Send + Sync>)?;
            let connect_to: Vec<SocketAddr> = addresses
                .into_iter()
                .map(|ip| SocketAddr::new(ip, 0))
                .collect();
            Ok(Box::new(connect_to.into_iter()) as Addrs)
        })
    }
}

/// Resolves `host` behind the policy, the one rule set shared by the HTTP client's resolver and
/// the browser's egress proxy: the host lists and `localhost` names are checked first (no lookup
/// for a refused name), then every answer is classified and one blocked answer refuses the whole
/// host; only then is the dial map applied. Returns the addresses to connect to, in order (never
/// empty). The host is compared lower-case without trailing dots.
pub(crate) async fn resolve_checked(
    policy: &Policy,
    dns: &Dns,
    host: &str,
) -> Result<Vec<IpAddr>, ResolveFailure> {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    // Host lists were checked on the URL already; checking again here keeps the resolver safe
    // on its own.
    if let Err(reason) = policy.check_host(&host) {
        return Err(ResolveFailure::Blocked { host, reason });
    }
    let answers: Vec<IpAddr> = match dns {
        Dns::System => match tokio::net::lookup_host((host.clone(), 0)).await {
            Ok(addresses) => addresses.map(|address| address.ip()).collect(),
            Err(error) => {
                let message = error.to_string();
                return Err(ResolveFailure::Lookup { host, message });
            }
        },
        Dns::Static(map) => map.lookup(&host).unwrap_or_default(),
    };
    if answers.is_empty() {
        let message = "no addresses".to_owned();
        return Err(ResolveFailure::Lookup { host, message });
    }
    // One blocked answer refuses the host: a name that mixes public and private answers is a
    // rebinding attempt or a misconfiguration either way.
    for ip in &answers {
        if let Err(reason) = policy.check_ip_for(&host, *ip) {
            return Err(ResolveFailure::Blocked { host, reason });
        }
    }
    Ok(answers
        .into_iter()
        .map(|ip| match dns {
            Dns::Static(map) => map.dial.get(&ip).copied().unwrap_or(ip),
            Dns::System => ip,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_answers_follow_their_script_then_repeat_the_last() {
        let public: IpAddr = "93.184.216.34".parse().expect("ip");
        let loopback: IpAddr = "127.0.0.1".parse().expect("ip");
        let dns = StaticDns::new()
            .answer("rebind.test", &[public])
            .answer("rebind.test", &[loopback]);
        assert_eq!(dns.lookup("REBIND.test"), Some(vec![public]));
        assert_eq!(dns.lookup("rebind.test"), Some(vec![loopback]));
        assert_eq!(dns.lookup("rebind.test"), Some(vec![loopback]));
        assert_eq!(dns.lookups("rebind.test"), 3);
        assert_eq!(dns.lookup("unknown.test"), None);
    }
}
