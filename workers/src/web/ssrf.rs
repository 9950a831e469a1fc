//! SSRF policy: decides, without any I/O, whether a destination may be fetched.
//!
//! This module classifies destinations: it parses user-supplied URLs strictly
//! ([`Policy::parse_url`]: at most [`MAX_URL_BYTES`], no forbidden code
//! points in the authority, IPv4 literals only as dotted quads), refuses every
//! scheme other than `http`/`https`, refuses port 0, applies the configured
//! host allow and block lists ([`Policy::check_host`]), blocks `localhost`-style
//! names, cloud metadata names and `*.internal` names, and classifies
//! literal IPv4/IPv6 hosts and resolved addresses ([`Policy::check_ip`],
//! [`classify`]) into loopback, private, link-local, cloud metadata, CGNAT,
//! multicast, broadcast, reserved, unspecified, documentation and unique-local
//! classes, including IPv6 forms that embed an IPv4 address (v4-mapped,
//! v4-compatible, SIIT, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`).
//!
//! It does not resolve names and opens no sockets. Domain names pass
//! [`Policy::check_url`] (after the host lists); the HTTP client must call
//! [`Policy::check_ip`] on *every* address it resolved, at connect time,
//! refuse the name if any answer is blocked, connect only to the checked
//! addresses, and never re-resolve. Redirects are
//! followed by hand and each hop goes through [`Policy::check_url`] again
//! before any DNS lookup.
//!
//! Decisions worth knowing:
//! - Names are refused before any DNS lookup when they are cloud metadata
//!   names (`metadata.google.internal`, `metadata.goog`, `instance-data`,
//!   whatever the configuration) or end in `.internal` and are not listed in
//!   `internal_hosts`: such names resolve to the provider's internal network,
//!   which the address classes alone may not recognise.
//! - A legacy IPv4 literal (`2130706433`, `0x7f.1`, `127.1`, `0177.0.0.1`,
//!   full-width digits, percent-encoded digits) is refused by
//!   [`Policy::parse_url`] as invalid rather than normalised: such spellings
//!   exist to slip past filters, never to name a web server.
//! - `allow_private_network` relaxes exactly [`BlockReason::Loopback`],
//!   [`BlockReason::Private`], [`BlockReason::LinkLocal`],
//!   [`BlockReason::Cgnat`] and [`BlockReason::UniqueLocal`] (and the
//!   `localhost` names); every other class stays blocked, cloud metadata
//!   included.
//! - Cloud metadata covers more than the single well-known address:
//!   `169.254.169.0/24` and `169.254.170.0/24` (AWS IMDS, DNS, NTP, ECS and EKS
//!   agents), `169.254.0.23` (Tencent), `100.100.100.200` (Alibaba),
//!   `192.0.0.192` (Oracle), `168.63.129.16` (Azure WireServer, a public
//!   address that only answers inside Azure), `fd00:ec2::/64` (AWS IPv6),
//!   `fd20:ce::254` (GCP IPv6), `fe80::a9fe:a9fe` (OpenStack IPv6), and every
//!   IPv6 form that embeds a metadata IPv4 address.
//! - An IPv6 address that embeds a blocked IPv4 address is reported as
//!   [`BlockReason::Ipv4Mapped`], except when the embedded address is cloud
//!   metadata, which is reported as [`BlockReason::Metadata`] so that it can
//!   be alerted on. With `allow_private_network`, the embedded address's own
//!   class decides (`::ffff:10.0.0.1` is allowed, `::ffff:169.254.169.254`
//!   is not).
//! - IPv6 outside `2000::/3` that is not otherwise classified is
//!   [`BlockReason::Reserved`] (fail closed), as is all of `2001::/23`
//!   (Teredo, benchmarking, ORCHID, and the few anycast services in it).
//! - Block-list entries are exact hosts or `*.example.com`, which matches
//!   `example.com` itself and every subdomain. Allow-list entries are exact
//!   hosts. Entries and hosts are compared after IDNA, lower-casing and
//!   trailing-dot removal; IP entries match literal IP hosts only (resolved
//!   addresses are not matched against the lists). The allow list never
//!   overrides an address class: an allow-listed host that is or resolves to
//!   a private address is still blocked unless `allow_private_network`.
//! - `trusted_hosts` (exact hosts, compared like the allow list) lifts the
//!   private-network classes for those hosts alone: the client checks every
//!   address a name resolved to with [`Policy::check_ip_for`] and the name it
//!   resolved. Cloud metadata stays blocked for them, and a redirect to
//!   another private host is checked as that host (blocked).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use url::{Host, Url};

/// Why a destination was refused; serialised snake_case, shown to users and
/// used as a metrics label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockReason {
    /// `127.0.0.0/8`, `::1`, and `localhost` names.
    Loopback,
    /// RFC 1918: `10/8`, `172.16/12`, `192.168/16`.
    Private,
    /// `169.254/16` (outside the metadata addresses) and `fe80::/10`.
    LinkLocal,
    /// Cloud instance metadata endpoints (never allowed).
    Metadata,
    /// Carrier-grade NAT, `100.64/10`.
    Cgnat,
    /// `224/4` and `ff00::/8`.
    Multicast,
    /// `255.255.255.255`.
    Broadcast,
    /// Reserved or special-purpose ranges that are never a web server.
    Reserved,
    /// `0.0.0.0/8` and `::`.
    Unspecified,
    /// Documentation ranges (`192.0.2/24`, `198.51.100/24`, `203.0.113/24`,
    /// `2001:db8::/32`, `3fff::/20`).
    Documentation,
    /// IPv6 unique local `fc00::/7` and deprecated site-local `fec0::/10`.
    UniqueLocal,
    /// An IPv6 address embedding an IPv4 address that is itself blocked.
    Ipv4Mapped,
    /// The host is on the configured block list.
    BlockedHost,
    /// An allow list is configured and the host is not on it.
    NotAllowlisted,
    /// The port is not allowed (port 0, in a browser's CONNECT).
    Port,
    /// A `*.internal` name not listed in `internal_hosts`.
    InternalName,
    /// A public address where only a private or loopback one may be: a self-hosted service
    /// the operator named (a fallback extraction provider) must be the operator's own.
    Public,
}

impl BlockReason {
    /// The snake_case name, identical to the serde form; use it as the
    /// metrics label.
    pub fn as_str(self) -> &'static str {
        match self {
            BlockReason::Loopback => "loopback",
            BlockReason::Private => "private",
            BlockReason::LinkLocal => "link_local",
            BlockReason::Metadata => "metadata",
            BlockReason::Cgnat => "cgnat",
            BlockReason::Multicast => "multicast",
            BlockReason::Broadcast => "broadcast",
            BlockReason::Reserved => "reserved",
            BlockReason::Unspecified => "unspecified",
            BlockReason::Documentation => "documentation",
            BlockReason::UniqueLocal => "unique_local",
            BlockReason::Ipv4Mapped => "ipv4_mapped",
            BlockReason::BlockedHost => "blocked_host",
            BlockReason::NotAllowlisted => "not_allowlisted",
            BlockReason::Port => "port",
            BlockReason::InternalName => "internal_name",
            BlockReason::Public => "public",
        }
    }

    /// Whether `allow_private_network` lifts this reason.
    fn is_private_network(self) -> bool {
        matches!(
            self,
            BlockReason::Loopback
                | BlockReason::Private
                | BlockReason::LinkLocal
                | BlockReason::Cgnat
                | BlockReason::UniqueLocal
        )
    }
}

impl fmt::Display for BlockReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a URL was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum UrlError {
    /// The input is not a valid absolute URL (or has surrounding whitespace).
    #[error("invalid URL: {0}")]
    Invalid(String),
    /// The input contains a raw control character (C0, DEL or C1).
    #[error("invalid URL: contains a control character")]
    ControlCharacter,
    /// The scheme is not `http` or `https`.
    #[error("unsupported scheme {0:?}: only http and https are allowed")]
    UnsupportedScheme(String),
    /// The URL has no host.
    #[error("invalid URL: no host")]
    MissingHost,
    /// The URL is longer than [`MAX_URL_BYTES`].
    #[error("invalid URL: longer than {limit} bytes")]
    TooLong {
        /// The limit.
        limit: usize,
    },
    /// The authority holds a code point a host may not hold (a space, `<`, `>`, `^`, `|`, a
    /// second `@`), which parsers read differently.
    #[error("invalid URL: {0:?} is not allowed in the host part")]
    ForbiddenCodePoint(char),
    /// An IPv4 address spelt other than as four decimal numbers (`2130706433`, `0x7f.1`,
    /// `127.1`, `0177.0.0.1`, full-width or percent-encoded digits).
    #[error("invalid URL: the IPv4 address {0:?} is not a dotted quad")]
    LegacyIpv4(String),
    /// Port 0, which no server listens on.
    #[error("invalid URL: port 0")]
    PortZero,
    /// A user name or password in the URL (refused by the client unless
    /// `http.allow_url_credentials`): it would be sent as Basic auth to every hop.
    #[error(
        "invalid URL: a user name or password in the URL would be sent as basic auth; give \
         credentials as a browse job's `credentials.headers` (an Authorization header), or set \
         http.allow_url_credentials"
    )]
    Credentials,
    /// The destination is refused by the policy.
    #[error("blocked destination {host}: {reason}")]
    Blocked {
        /// The host as serialised by the URL (IPv6 in brackets).
        host: String,
        /// Why it was refused.
        reason: BlockReason,
    },
}

impl UrlError {
    /// The stable API error code: `invalid_url`, `unsupported_scheme` or
    /// `blocked_destination` (with [`UrlError::block_reason`] as detail).
    pub fn code(&self) -> &'static str {
        match self {
            UrlError::Invalid(_)
            | UrlError::ControlCharacter
            | UrlError::MissingHost
            | UrlError::TooLong { .. }
            | UrlError::ForbiddenCodePoint(_)
            | UrlError::LegacyIpv4(_)
            | UrlError::PortZero
            | UrlError::Credentials => "invalid_url",
            UrlError::UnsupportedScheme(_) => "unsupported_scheme",
            UrlError::Blocked { .. } => "blocked_destination",
        }
    }

    /// The block reason, for `Blocked` errors.
    pub fn block_reason(&self) -> Option<BlockReason> {
        match self {
            UrlError::Blocked { reason, .. } => Some(*reason),
            _ => None,
        }
    }
}

/// A configuration error found by [`Policy::validate`].
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PolicyError {
    /// An entry of `allow_hosts` or `block_hosts` is not a valid host or
    /// pattern (it would never match).
    #[error("invalid entry {entry:?} in {list}")]
    InvalidHostEntry {
        /// `"allow_hosts"`, `"block_hosts"`, `"internal_hosts"` or `"trusted_hosts"`.
        list: &'static str,
        /// The offending entry, as configured.
        entry: String,
    },
}

/// The SSRF policy; the default blocks every non-public destination and has
/// no host lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(default, deny_unknown_fields)]
pub struct Policy {
    /// Allow loopback, RFC 1918, link-local, CGNAT and unique-local
    /// destinations (and `localhost` names). Cloud metadata, unspecified,
    /// multicast, broadcast, reserved and documentation addresses stay
    /// blocked.
    pub allow_private_network: bool,
    /// Exact hosts; when non-empty only these hosts are allowed. Compared
    /// case-insensitively, after IDNA and trailing-dot removal.
    pub allow_hosts: Vec<String>,
    /// Exact hosts, or `*.example.com`, which matches `example.com` and any
    /// subdomain of it. Compared like `allow_hosts`.
    pub block_hosts: Vec<String>,
    /// Names under `.internal` that may be fetched: exact hosts, or `*.corp.internal`, which
    /// matches `corp.internal` and its subdomains. Every other `*.internal` name is refused
    /// before DNS. Cloud metadata names stay refused whatever this says, and the addresses
    /// a listed name resolves to are still checked.
    pub internal_hosts: Vec<String>,
    /// Internal services that may be (or resolve to) private addresses: exact host names or
    /// IP literals (`wiki.corp.example`, `10.0.0.5`), compared like `allow_hosts`. For these
    /// hosts alone the classes `allow_private_network` lifts are lifted; cloud metadata and
    /// every other class stay blocked, every other private destination stays blocked, and a
    /// redirect from a trusted host is checked as the host it leads to.
    pub trusted_hosts: Vec<String>,
    /// Accept answers in 198.18.0.0/15, the range fake-IP DNS of Clash- or Surge-style proxy
    /// stacks hands out (the proxy connects to the real host by name). Off by default: the
    /// range is otherwise reserved for benchmarking and refused.
    pub allow_fake_ip: bool,
    /// Refuse every public address: only private, loopback and the other classes
    /// `allow_private_network` lifts are accepted (with it set). Not a configuration key: the
    /// client sets it for a self-hosted service's origin (`web::Client::with_private_origin`).
    #[serde(skip)]
    pub private_only: bool,
}

/// The longest URL [`Policy::parse_url`] accepts, in bytes (8 KiB): longer ones are refused
/// before parsing, since servers refuse them too and a queue should not carry them.
pub const MAX_URL_BYTES: usize = 8 * 1024;

/// Cloud instance metadata names, refused before DNS whatever the configuration says.
const METADATA_NAMES: [&str; 3] = ["metadata.google.internal", "metadata.goog", "instance-data"];

/// A host normalised for comparison.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NormHost {
    /// ASCII (IDNA-applied), lower-case, without trailing dots.
    Domain(String),
    Ip(IpAddr),
}

/// A normalised block-list entry.
enum HostPattern {
    Exact(NormHost),
    /// `*.suffix`: matches `suffix` and any subdomain of it.
    Suffix(String),
}

impl HostPattern {
    fn matches(&self, host: &NormHost) -> bool {
        match (self, host) {
            (HostPattern::Exact(entry), host) => entry == host,
            (HostPattern::Suffix(suffix), NormHost::Domain(domain)) => domain
                .strip_suffix(suffix.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.ends_with('.')),
            (HostPattern::Suffix(_), NormHost::Ip(_)) => false,
        }
    }
}

fn strip_trailing_dots(domain: &str) -> &str {
    domain.trim_end_matches('.')
}

fn norm_domain(domain: &str) -> Option<NormHost> {
    let domain = strip_trailing_dots(domain);
    if domain.is_empty() {
        return None;
    }
    Some(NormHost::Domain(domain.to_ascii_lowercase()))
}

/// Normalises a parsed URL host.
fn norm_url_host(host: &Host<&str>) -> Option<NormHost> {
    match host {
        Host::Domain(domain) => norm_domain(domain),
        Host::Ipv4(ip) => Some(NormHost::Ip(IpAddr::V4(*ip))),
        Host::Ipv6(ip) => Some(NormHost::Ip(IpAddr::V6(*ip))),
    }
}

/// Normalises a host string the way the URL parser would (IDNA, odd IPv4
/// spellings, brackets); also accepts a bare IPv6 address.
fn norm_host_str(input: &str) -> Option<NormHost> {
    if let Ok(ip) = input.parse::<Ipv6Addr>() {
        return Some(NormHost::Ip(IpAddr::V6(ip)));
    }
    match Host::parse(input).ok()? {
        Host::Domain(domain) => norm_domain(&domain),
        Host::Ipv4(ip) => Some(NormHost::Ip(IpAddr::V4(ip))),
        Host::Ipv6(ip) => Some(NormHost::Ip(IpAddr::V6(ip))),
    }
}

fn parse_exact_entry(entry: &str) -> Option<NormHost> {
    let entry = entry.trim();
    if entry.contains('*') {
        return None;
    }
    norm_host_str(entry)
}

fn parse_block_entry(entry: &str) -> Option<HostPattern> {
    let entry = entry.trim();
    match entry.strip_prefix("*.") {
        Some(rest) if !rest.contains('*') => match norm_host_str(rest)? {
            NormHost::Domain(domain) => Some(HostPattern::Suffix(domain)),
            NormHost::Ip(_) => None,
        },
        Some(_) => None,
        None => parse_exact_entry(entry).map(HostPattern::Exact),
    }
}

/// Names that always mean this machine (RFC 6761 `localhost` and
/// `*.localhost`, plus the usual `/etc/hosts` aliases).
fn is_localhost_name(domain: &str) -> bool {
    domain == "localhost"
        || domain.ends_with(".localhost")
        || matches!(
            domain,
            "localhost.localdomain" | "ip6-localhost" | "ip6-loopback"
        )
}

/// `*.internal` (ICANN reserved it for private use; clouds name their internal hosts so).
fn is_internal_name(domain: &str) -> bool {
    domain == "internal" || domain.ends_with(".internal")
}

/// Checks the authority as written, before the URL parser rewrote it: no code point that
/// parsers disagree on (a space, `<`, `>`, `^`, `|`, a second `@`), and an IPv4 host written
/// as the dotted quad it parsed to. The authority is what follows the scheme and its
/// slashes (or backslashes, which special schemes read as slashes), up to the path, query
/// or fragment.
fn check_authority(input: &str, url: &Url) -> Result<(), UrlError> {
    let Some((_, rest)) = input.split_once(':') else {
        return Ok(());
    };
    let rest = rest.trim_start_matches(['/', '\\']);
    let end = rest.find(['/', '\\', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..end];
    if let Some(c) = authority
        .chars()
        .find(|c| matches!(c, ' ' | '<' | '>' | '^' | '|' | '"' | '`' | '{' | '}'))
    {
        return Err(UrlError::ForbiddenCodePoint(c));
    }
    if authority.matches('@').count() > 1 {
        return Err(UrlError::ForbiddenCodePoint('@'));
    }
    if let Some(Host::Ipv4(ip)) = url.host() {
        let host_port = authority
            .rsplit_once('@')
            .map_or(authority, |(_, host)| host);
        let host = host_port
            .rsplit_once(':')
            .map_or(host_port, |(host, _)| host);
        if host != ip.to_string() {
            return Err(UrlError::LegacyIpv4(host.to_owned()));
        }
    }
    Ok(())
}

fn control_character(c: char) -> bool {
    // C0, DEL and C1 controls. The url crate silently strips tab, CR and LF
    // and trims C0/space, so they must be refused before parsing.
    c.is_control()
}

impl Policy {
    /// Parses user input strictly: rejects raw control characters (`\t`,
    /// `\r`, `\n`, `\0` and every other C0/DEL/C1 control) and leading or
    /// trailing whitespace *before* parsing (the url crate silently strips
    /// them), then parses with [`url::Url::parse`] and applies
    /// [`Policy::check_url`].
    pub fn parse_url(&self, input: &str) -> Result<Url, UrlError> {
        if input.len() > MAX_URL_BYTES {
            return Err(UrlError::TooLong {
                limit: MAX_URL_BYTES,
            });
        }
        if input.chars().any(control_character) {
            return Err(UrlError::ControlCharacter);
        }
        if input.starts_with(char::is_whitespace) || input.ends_with(char::is_whitespace) {
            return Err(UrlError::Invalid(
                "leading or trailing whitespace".to_owned(),
            ));
        }
        let url = Url::parse(input).map_err(|e| UrlError::Invalid(e.to_string()))?;
        check_authority(input, &url)?;
        self.check_url(&url)?;
        Ok(url)
    }

    /// Checks a parsed URL: scheme `http`/`https` only (checked first:
    /// non-special schemes give opaque hosts); host present; port not 0;
    /// host block/allow lists (case-insensitive, trailing dots stripped, IDNA
    /// already applied by url); `localhost` names; literal IPv4/IPv6 hosts
    /// classified with [`Policy::check_ip`]. Domain names pass: their DNS
    /// answers are checked later with [`Policy::check_ip`].
    pub fn check_url(&self, url: &Url) -> Result<(), UrlError> {
        let scheme = url.scheme();
        if scheme != "http" && scheme != "https" {
            return Err(UrlError::UnsupportedScheme(scheme.to_owned()));
        }
        let host = url.host().ok_or(UrlError::MissingHost)?;
        let host_str = url.host_str().unwrap_or_default();
        let blocked = |reason| UrlError::Blocked {
            host: host_str.to_owned(),
            reason,
        };
        if url.port() == Some(0) {
            return Err(UrlError::PortZero);
        }
        let host = norm_url_host(&host).ok_or(UrlError::MissingHost)?;
        self.check_norm_host(&host).map_err(blocked)
    }

    /// Checks the host name part only (block list, `localhost` names, allow
    /// list); used again on every redirect hop before DNS. The host is
    /// normalised like the URL parser does (IDNA, case, trailing dots, odd
    /// IPv4 spellings, `[v6]` or bare IPv6), and a literal IP is also
    /// classified with [`Policy::check_ip`]. A host that cannot be parsed is
    /// refused as [`BlockReason::BlockedHost`].
    pub fn check_host(&self, host: &str) -> Result<(), BlockReason> {
        let host = norm_host_str(host).ok_or(BlockReason::BlockedHost)?;
        self.check_norm_host(&host)
    }

    fn check_norm_host(&self, host: &NormHost) -> Result<(), BlockReason> {
        if self
            .block_hosts
            .iter()
            .filter_map(|entry| parse_block_entry(entry))
            .any(|pattern| pattern.matches(host))
        {
            return Err(BlockReason::BlockedHost);
        }
        let trusted = self.is_trusted_norm(host);
        match host {
            NormHost::Ip(ip) if trusted => self.check_trusted_ip(*ip)?,
            NormHost::Ip(ip) => self.check_ip(*ip)?,
            NormHost::Domain(domain) => {
                if is_localhost_name(domain) && !self.allow_private_network && !trusted {
                    return Err(BlockReason::Loopback);
                }
                if METADATA_NAMES.contains(&domain.as_str()) {
                    return Err(BlockReason::Metadata);
                }
                if is_internal_name(domain)
                    && !self
                        .internal_hosts
                        .iter()
                        .filter_map(|entry| parse_block_entry(entry))
                        .any(|pattern| pattern.matches(host))
                {
                    return Err(BlockReason::InternalName);
                }
            }
        }
        if !self.allow_hosts.is_empty()
            && !self
                .allow_hosts
                .iter()
                .filter_map(|entry| parse_exact_entry(entry))
                .any(|entry| &entry == host)
        {
            return Err(BlockReason::NotAllowlisted);
        }
        Ok(())
    }

    /// Classifies one address (a literal host or a DNS answer). With
    /// `allow_private_network = true`, loopback, private, link-local, CGNAT
    /// and unique-local addresses (also when embedded in IPv6) are allowed,
    /// but cloud metadata addresses stay blocked (169.254.169.254,
    /// 169.254.170.2, 100.100.100.200, fd00:ec2::254, the IPv6 forms that
    /// embed them, and the others listed in the module docs), and so do
    /// unspecified, multicast, broadcast, reserved and documentation
    /// addresses.
    pub fn check_ip(&self, ip: IpAddr) -> Result<(), BlockReason> {
        if self.allow_fake_ip && is_fake_ip(ip) {
            return Ok(());
        }
        if self.allow_private_network {
            self.check_trusted_ip(ip)
        } else {
            classify(ip).map_or(Ok(()), Err)
        }
    }

    /// Classifies an address `host` resolved to (or is), as [`Policy::check_ip`] does, but
    /// for a host of `trusted_hosts` as if `allow_private_network` were set. The HTTP client
    /// and the browser's egress proxy call this with the host of the request.
    pub fn check_ip_for(&self, host: &str, ip: IpAddr) -> Result<(), BlockReason> {
        if !self.allow_private_network && self.is_trusted(host) {
            self.check_trusted_ip(ip)
        } else {
            self.check_ip(ip)
        }
    }

    /// Whether `host` (a URL's host, a name to resolve) is one of `trusted_hosts`.
    pub fn is_trusted(&self, host: &str) -> bool {
        !self.trusted_hosts.is_empty()
            && norm_host_str(host).is_some_and(|host| self.is_trusted_norm(&host))
    }

    fn is_trusted_norm(&self, host: &NormHost) -> bool {
        self.trusted_hosts
            .iter()
            .filter_map(|entry| parse_exact_entry(entry))
            .any(|entry| &entry == host)
    }

    /// An address checked with the private-network classes lifted (cloud metadata and the
    /// rest still blocked).
    fn check_trusted_ip(&self, ip: IpAddr) -> Result<(), BlockReason> {
        if self.allow_fake_ip && is_fake_ip(ip) {
            return Ok(());
        }
        let Some(reason) = classify(ip) else {
            return if self.private_only {
                Err(BlockReason::Public)
            } else {
                Ok(())
            };
        };
        let effective = match ip {
            IpAddr::V6(v6) if reason == BlockReason::Ipv4Mapped => {
                embedded_ipv4(v6).and_then(classify_v4).unwrap_or(reason)
            }
            _ => reason,
        };
        if effective.is_private_network() {
            Ok(())
        } else {
            Err(reason)
        }
    }

    /// Checks the configuration: every list entry must be a valid host, and
    /// only `block_hosts` and `internal_hosts` may use the `*.` wildcard prefix.
    /// Invalid entries never match, so call this when loading the configuration
    /// to fail closed on typos.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let exact: fn(&str) -> bool = |entry| parse_exact_entry(entry).is_some();
        let pattern: fn(&str) -> bool = |entry| parse_block_entry(entry).is_some();
        for (list, entries, valid) in [
            ("allow_hosts", &self.allow_hosts, exact),
            ("trusted_hosts", &self.trusted_hosts, exact),
            ("block_hosts", &self.block_hosts, pattern),
            ("internal_hosts", &self.internal_hosts, pattern),
        ] {
            if let Some(entry) = entries.iter().find(|entry| !valid(entry)) {
                return Err(PolicyError::InvalidHostEntry {
                    list,
                    entry: entry.clone(),
                });
            }
        }
        Ok(())
    }
}

/// Whether `ip` is in 198.18.0.0/15 (also IPv4-mapped): fake-IP DNS answers.
fn is_fake_ip(ip: IpAddr) -> bool {
    let v4 = match ip {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4,
            None => return false,
        },
    };
    matches!(v4.octets(), [198, 18..=19, ..])
}

/// The classification without policy: `None` when globally routable.
pub fn classify(ip: IpAddr) -> Option<BlockReason> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<BlockReason> {
    use BlockReason::*;
    let reason = match ip.octets() {
        [0, ..] => Unspecified,
        [255, 255, 255, 255] => Broadcast,
        [127, ..] => Loopback,
        [10, ..] | [172, 16..=31, ..] | [192, 168, ..] => Private,
        // AWS (IMDS .254, DNS .253, NTP .123, ECS 170.2, EKS 170.23), GCP,
        // Azure, OpenStack, DigitalOcean...; Tencent 169.254.0.23.
        [169, 254, 169 | 170, _] | [169, 254, 0, 23] => Metadata,
        [169, 254, ..] => LinkLocal,
        // Alibaba Cloud.
        [100, 100, 100, 200] => Metadata,
        [100, 64..=127, ..] => Cgnat,
        // Oracle Cloud (legacy) and Azure WireServer.
        [192, 0, 0, 192] | [168, 63, 129, 16] => Metadata,
        [224..=239, ..] => Multicast,
        [240..=255, ..] => Reserved,
        // IETF protocol assignments, benchmarking, and the deprecated 6to4 relay anycast
        // (RFC 7526): none is a web server.
        [192, 0, 0, _] | [198, 18..=19, ..] | [192, 88, 99, _] => Reserved,
        [192, 0, 2, _] | [198, 51, 100, _] | [203, 0, 113, _] => Documentation,
        _ => return None,
    };
    Some(reason)
}

/// The IPv4 address embedded in an IPv6 address, for the forms that reach
/// (or are translated to) that IPv4 address: v4-mapped `::ffff:0:0/96`,
/// v4-compatible `::/96` (excluding `::` and `::1`), SIIT `::ffff:0:0:0/96`,
/// NAT64 `64:ff9b::/96` and 6to4 `2002::/16` (bits 16..48).
fn embedded_ipv4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let o = ip.octets();
    let low = Ipv4Addr::new(o[12], o[13], o[14], o[15]);
    match ip.segments() {
        [0, 0, 0, 0, 0, 0xffff, _, _] => Some(low),
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, _, _] => Some(low),
        [0, 0, 0, 0, 0xffff, 0, _, _] => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x2002, ..] => Some(Ipv4Addr::new(o[2], o[3], o[4], o[5])),
        _ => None,
    }
}

fn classify_v6(ip: Ipv6Addr) -> Option<BlockReason> {
    use BlockReason::*;
    if ip.is_unspecified() {
        return Some(Unspecified);
    }
    if ip.is_loopback() {
        return Some(Loopback);
    }
    if let Some(v4) = embedded_ipv4(ip) {
        return classify_v4(v4).map(|inner| {
            if inner == Metadata {
                Metadata
            } else {
                Ipv4Mapped
            }
        });
    }
    let s = ip.segments();
    let reason = match s {
        // AWS IMDS (fd00:ec2::254) and its DNS/NTP/EKS neighbours.
        [0xfd00, 0x0ec2, 0, 0, ..] => Metadata,
        // GCP IPv6 metadata server; OpenStack's fe80::a9fe:a9fe.
        [0xfd20, 0x00ce, 0, 0, 0, 0, 0, 0x0254] | [0xfe80, 0, 0, 0, 0, 0, 0xa9fe, 0xa9fe] => {
            Metadata
        }
        [a, ..] if a & 0xff00 == 0xff00 => Multicast,
        [a, ..] if a & 0xffc0 == 0xfe80 => LinkLocal,
        // Deprecated site-local fec0::/10, treated as unique local.
        [a, ..] if a & 0xffc0 == 0xfec0 => UniqueLocal,
        [a, ..] if a & 0xfe00 == 0xfc00 => UniqueLocal,
        [0x2001, 0x0db8, ..] => Documentation,
        [0x3fff, b, ..] if b < 0x1000 => Documentation,
        // IETF protocol assignments 2001::/23 (Teredo, benchmarking, ORCHID,
        // a few anycast services): none is a web server.
        [0x2001, b, ..] if b < 0x0200 => Reserved,
        // Everything outside global unicast 2000::/3 that is not handled
        // above: discard 100::/64, local-use NAT64 64:ff9b:1::/48,
        // unassigned ::/8 space, ...
        [a, ..] if a & 0xe000 != 0x2000 => Reserved,
        _ => return None,
    };
    Some(reason)
}

#[cfg(test)]
mod tests;
