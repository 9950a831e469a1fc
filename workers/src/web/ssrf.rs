//! SSRF policy: decides, without any I/O, whether a destination may be fetched.
//!
//! This module classifies destinations: it parses user-supplied URLs strictly
//! ([`Policy::parse_url`]), refuses every scheme other than `http`/`https`,
//! refuses port 0, applies the configured host allow and block lists
//! ([`Policy::check_host`]), blocks `localhost`-style names, and classifies
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
    /// The port is not allowed (port 0).
    Port,
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
            UrlError::Invalid(_) | UrlError::ControlCharacter | UrlError::MissingHost => {
                "invalid_url"
            }
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
        /// `"allow_hosts"` or `"block_hosts"`.
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
}

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
        if input.chars().any(control_character) {
            return Err(UrlError::ControlCharacter);
        }
        if input.starts_with(char::is_whitespace) || input.ends_with(char::is_whitespace) {
            return Err(UrlError::Invalid(
                "leading or trailing whitespace".to_owned(),
            ));
        }
        let url = Url::parse(input).map_err(|e| UrlError::Invalid(e.to_string()))?;
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
            return Err(blocked(BlockReason::Port));
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
        match host {
            NormHost::Ip(ip) => self.check_ip(*ip)?,
            NormHost::Domain(domain) => {
                if is_localhost_name(domain) && !self.allow_private_network {
                    return Err(BlockReason::Loopback);
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
        let Some(reason) = classify(ip) else {
            return Ok(());
        };
        if !self.allow_private_network {
            return Err(reason);
        }
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
    /// only `block_hosts` may use the `*.` wildcard prefix. Invalid entries
    /// never match, so call this when loading the configuration to fail
    /// closed on typos.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if let Some(entry) = self
            .allow_hosts
            .iter()
            .find(|entry| parse_exact_entry(entry).is_none())
        {
            return Err(PolicyError::InvalidHostEntry {
                list: "allow_hosts",
                entry: entry.clone(),
            });
        }
        if let Some(entry) = self
            .block_hosts
            .iter()
            .find(|entry| parse_block_entry(entry).is_none())
        {
            return Err(PolicyError::InvalidHostEntry {
                list: "block_hosts",
                entry: entry.clone(),
            });
        }
        Ok(())
    }
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
        [192, 0, 0, _] | [198, 18..=19, ..] => Reserved,
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
mod tests {
    use super::*;
    use BlockReason::*;

    fn ip(s: &str) -> IpAddr {
        s.parse()
            .unwrap_or_else(|e| panic!("bad test address {s}: {e}"))
    }

    #[track_caller]
    fn assert_class(cases: &[(&str, Option<BlockReason>)]) {
        for (addr, expected) in cases {
            assert_eq!(classify(ip(addr)), *expected, "classify({addr})");
            let policy = Policy::default();
            assert_eq!(
                policy.check_ip(ip(addr)),
                expected.map_or(Ok(()), Err),
                "check_ip({addr})"
            );
        }
    }

    fn default_policy() -> Policy {
        Policy::default()
    }

    fn private_policy() -> Policy {
        Policy {
            allow_private_network: true,
            ..Policy::default()
        }
    }

    #[track_caller]
    fn assert_url_ok(policy: &Policy, input: &str, host: &str) {
        match policy.parse_url(input) {
            Ok(url) => assert_eq!(url.host_str(), Some(host), "host of {input:?}"),
            Err(e) => panic!("{input:?} should pass, got {e:?}"),
        }
    }

    #[track_caller]
    fn assert_url_blocked(policy: &Policy, input: &str, reason: BlockReason) {
        match policy.parse_url(input) {
            Err(UrlError::Blocked { reason: got, .. }) => {
                assert_eq!(got, reason, "reason for {input:?}")
            }
            other => panic!("{input:?} should be blocked as {reason:?}, got {other:?}"),
        }
    }

    #[track_caller]
    fn assert_url_invalid(input: &str) {
        match default_policy().parse_url(input) {
            Err(UrlError::Invalid(_)) => {}
            other => panic!("{input:?} should be invalid, got {other:?}"),
        }
    }

    // ---- IPv4 classes, with boundaries -------------------------------------

    #[test]
    fn v4_unspecified_this_network() {
        assert_class(&[
            ("0.0.0.0", Some(Unspecified)),
            ("0.1.2.3", Some(Unspecified)),
            ("0.255.255.255", Some(Unspecified)),
            ("1.0.0.0", None),
        ]);
    }

    #[test]
    fn v4_private_10() {
        assert_class(&[
            ("9.255.255.255", None),
            ("10.0.0.0", Some(Private)),
            ("10.255.255.255", Some(Private)),
            ("11.0.0.0", None),
        ]);
    }

    #[test]
    fn v4_private_172_16() {
        assert_class(&[
            ("172.15.255.255", None),
            ("172.16.0.0", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("172.32.0.0", None),
        ]);
    }

    #[test]
    fn v4_private_192_168() {
        assert_class(&[
            ("192.167.255.255", None),
            ("192.168.0.0", Some(Private)),
            ("192.168.255.255", Some(Private)),
            ("192.169.0.0", None),
        ]);
    }

    #[test]
    fn v4_loopback() {
        assert_class(&[
            ("126.255.255.255", None),
            ("127.0.0.0", Some(Loopback)),
            ("127.0.0.1", Some(Loopback)),
            ("127.255.255.255", Some(Loopback)),
            ("128.0.0.0", None),
        ]);
    }

    #[test]
    fn v4_link_local() {
        assert_class(&[
            ("169.253.255.255", None),
            ("169.254.0.0", Some(LinkLocal)),
            ("169.254.0.1", Some(LinkLocal)),
            ("169.254.168.255", Some(LinkLocal)),
            ("169.254.171.0", Some(LinkLocal)),
            ("169.254.255.255", Some(LinkLocal)),
            ("169.255.0.0", None),
        ]);
    }

    #[test]
    fn v4_metadata() {
        assert_class(&[
            ("169.254.169.254", Some(Metadata)),
            ("169.254.170.2", Some(Metadata)),
            ("169.254.170.23", Some(Metadata)),
            ("169.254.169.0", Some(Metadata)),
            ("169.254.170.255", Some(Metadata)),
            ("169.254.0.23", Some(Metadata)),
            ("100.100.100.200", Some(Metadata)),
            ("100.100.100.199", Some(Cgnat)),
            ("100.100.100.201", Some(Cgnat)),
            ("192.0.0.192", Some(Metadata)),
            ("168.63.129.16", Some(Metadata)),
            ("168.63.129.15", None),
            ("168.63.129.17", None),
        ]);
    }

    #[test]
    fn v4_cgnat() {
        assert_class(&[
            ("100.63.255.255", None),
            ("100.64.0.0", Some(Cgnat)),
            ("100.127.255.255", Some(Cgnat)),
            ("100.128.0.0", None),
        ]);
    }

    #[test]
    fn v4_reserved() {
        assert_class(&[
            ("191.255.255.255", None),
            ("192.0.0.0", Some(Reserved)),
            ("192.0.0.255", Some(Reserved)),
            ("192.0.1.0", None),
            ("198.17.255.255", None),
            ("198.18.0.0", Some(Reserved)),
            ("198.19.255.255", Some(Reserved)),
            ("198.20.0.0", None),
            ("239.255.255.255", Some(Multicast)),
            ("240.0.0.0", Some(Reserved)),
            ("255.255.255.254", Some(Reserved)),
        ]);
    }

    #[test]
    fn v4_broadcast() {
        assert_class(&[
            ("255.255.255.255", Some(Broadcast)),
            ("255.255.255.254", Some(Reserved)),
        ]);
    }

    #[test]
    fn v4_multicast() {
        assert_class(&[
            ("223.255.255.255", None),
            ("224.0.0.0", Some(Multicast)),
            ("224.0.0.251", Some(Multicast)),
            ("239.255.255.255", Some(Multicast)),
            ("240.0.0.0", Some(Reserved)),
        ]);
    }

    #[test]
    fn v4_documentation() {
        assert_class(&[
            ("192.0.1.255", None),
            ("192.0.2.0", Some(Documentation)),
            ("192.0.2.255", Some(Documentation)),
            ("192.0.3.0", None),
            ("198.51.99.255", None),
            ("198.51.100.0", Some(Documentation)),
            ("198.51.100.255", Some(Documentation)),
            ("198.51.101.0", None),
            ("203.0.112.255", None),
            ("203.0.113.0", Some(Documentation)),
            ("203.0.113.255", Some(Documentation)),
            ("203.0.114.0", None),
        ]);
    }

    #[test]
    fn v4_public() {
        assert_class(&[
            ("93.184.216.34", None),
            ("8.8.8.8", None),
            ("1.1.1.1", None),
            ("223.255.255.255", None),
            ("192.88.99.1", None),
        ]);
    }

    // ---- IPv6 classes -------------------------------------------------------

    #[test]
    fn v6_unspecified_and_loopback() {
        assert_class(&[
            ("::", Some(Unspecified)),
            ("::1", Some(Loopback)),
            ("::2", Some(Ipv4Mapped)), // v4-compatible 0.0.0.2
        ]);
    }

    #[test]
    fn v6_link_local() {
        assert_class(&[
            ("fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some(Reserved)),
            ("fe80::", Some(LinkLocal)),
            ("fe80::1", Some(LinkLocal)),
            ("febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some(LinkLocal)),
            ("fec0::", Some(UniqueLocal)),
        ]);
    }

    #[test]
    fn v6_site_local_as_unique_local() {
        assert_class(&[
            ("fec0::", Some(UniqueLocal)),
            ("fec0::1", Some(UniqueLocal)),
            ("feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some(UniqueLocal)),
            ("ff00::", Some(Multicast)),
        ]);
    }

    #[test]
    fn v6_unique_local() {
        assert_class(&[
            ("fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some(Reserved)),
            ("fc00::", Some(UniqueLocal)),
            ("fd12:3456:789a::1", Some(UniqueLocal)),
            ("fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some(UniqueLocal)),
            ("fe00::", Some(Reserved)),
        ]);
    }

    #[test]
    fn v6_multicast() {
        assert_class(&[
            ("ff00::", Some(Multicast)),
            ("ff02::1", Some(Multicast)),
            ("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some(Multicast)),
        ]);
    }

    #[test]
    fn v6_documentation() {
        assert_class(&[
            ("2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", None),
            ("2001:db8::", Some(Documentation)),
            (
                "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
                Some(Documentation),
            ),
            ("2001:db9::", None),
            ("3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
            ("3fff::", Some(Documentation)),
            (
                "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff",
                Some(Documentation),
            ),
            ("3fff:1000::", None),
        ]);
    }

    #[test]
    fn v6_ietf_protocol_assignments_reserved() {
        assert_class(&[
            ("2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
            ("2001::", Some(Reserved)),
            ("2001:0:4136:e378:8000:63bf:3fff:fdd2", Some(Reserved)), // Teredo
            ("2001:2::1", Some(Reserved)),                            // benchmarking
            ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", Some(Reserved)),
            ("2001:200::", None),
        ]);
    }

    #[test]
    fn v6_discard_and_non_global_unicast_reserved() {
        assert_class(&[
            ("100::", Some(Reserved)),
            ("100::ffff:ffff:ffff:ffff", Some(Reserved)),
            ("64:ff9b:1::1", Some(Reserved)),
            ("1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", Some(Reserved)),
            ("2000::", None),
            ("3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
            ("4000::", Some(Reserved)),
            ("5f00::1", Some(Reserved)),
            ("::1:0:0:1", Some(Reserved)),
        ]);
    }

    #[test]
    fn v6_public() {
        assert_class(&[
            ("2606:4700::1111", None),
            ("2001:4860:4860::8888", None),
            ("2a00:1450:4001:80b::200e", None),
        ]);
    }

    #[test]
    fn v6_v4_mapped() {
        assert_class(&[
            ("::ffff:127.0.0.1", Some(Ipv4Mapped)),
            ("::ffff:7f00:1", Some(Ipv4Mapped)),
            ("::ffff:10.0.0.1", Some(Ipv4Mapped)),
            ("::ffff:0.0.0.0", Some(Ipv4Mapped)),
            ("::ffff:255.255.255.255", Some(Ipv4Mapped)),
            ("::ffff:169.254.169.254", Some(Metadata)),
            ("::ffff:100.100.100.200", Some(Metadata)),
            ("::ffff:8.8.8.8", None),
            ("::ffff:93.184.216.34", None),
            ("::fffe:7f00:1", Some(Reserved)),
        ]);
    }

    #[test]
    fn v6_v4_compatible() {
        assert_class(&[
            ("::127.0.0.1", Some(Ipv4Mapped)),
            ("::7f00:1", Some(Ipv4Mapped)),
            ("::10.1.2.3", Some(Ipv4Mapped)),
            ("::169.254.169.254", Some(Metadata)),
            ("::8.8.8.8", None),
        ]);
    }

    #[test]
    fn v6_siit() {
        assert_class(&[
            ("::ffff:0:127.0.0.1", Some(Ipv4Mapped)),
            ("::ffff:0:7f00:1", Some(Ipv4Mapped)),
            ("::ffff:0:a9fe:a9fe", Some(Metadata)),
            ("::ffff:0:808:808", None),
        ]);
    }

    #[test]
    fn v6_nat64() {
        assert_class(&[
            ("64:ff9b::127.0.0.1", Some(Ipv4Mapped)),
            ("64:ff9b::192.168.1.1", Some(Ipv4Mapped)),
            ("64:ff9b::169.254.169.254", Some(Metadata)),
            ("64:ff9b::8.8.8.8", None),
            ("64:ff9b::5db8:d822", None), // 93.184.216.34
        ]);
    }

    #[test]
    fn v6_6to4() {
        assert_class(&[
            ("2002:7f00:1::", Some(Ipv4Mapped)),
            ("2002:7f00:0001:ffff:ffff:ffff:ffff:ffff", Some(Ipv4Mapped)),
            ("2002:a00:1::1", Some(Ipv4Mapped)),
            ("2002:a9fe:a9fe::", Some(Metadata)),
            ("2002:c000:0204::", Some(Ipv4Mapped)), // 192.0.2.4 documentation
            ("2002:808:808::1", None),
            ("2001:ffff:ffff:ffff:ffff:ffff:ffff:ffff", None),
            ("2003::", None),
        ]);
    }

    #[test]
    fn v6_metadata() {
        assert_class(&[
            ("fd00:ec2::254", Some(Metadata)),
            ("fd00:ec2::23", Some(Metadata)),
            ("fd00:ec2:0:1::254", Some(UniqueLocal)),
            ("fd20:ce::254", Some(Metadata)),
            ("fd20:ce::253", Some(UniqueLocal)),
            ("fe80::a9fe:a9fe", Some(Metadata)),
            ("fe80::a9fe:a9fd", Some(LinkLocal)),
        ]);
    }

    #[test]
    fn embedded_ipv4_extraction() {
        let v6 = |s: &str| s.parse::<Ipv6Addr>().unwrap();
        let v4 = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        assert_eq!(embedded_ipv4(v6("::ffff:1.2.3.4")), Some(v4("1.2.3.4")));
        assert_eq!(embedded_ipv4(v6("::1.2.3.4")), Some(v4("1.2.3.4")));
        assert_eq!(embedded_ipv4(v6("::ffff:0:1.2.3.4")), Some(v4("1.2.3.4")));
        assert_eq!(embedded_ipv4(v6("64:ff9b::1.2.3.4")), Some(v4("1.2.3.4")));
        assert_eq!(embedded_ipv4(v6("2002:102:304::99")), Some(v4("1.2.3.4")));
        assert_eq!(embedded_ipv4(v6("::")), None);
        assert_eq!(embedded_ipv4(v6("::1")), None);
        assert_eq!(embedded_ipv4(v6("2606:4700::1111")), None);
        assert_eq!(embedded_ipv4(v6("64:ff9b:1::1.2.3.4")), None);
    }

    // ---- allow_private_network ----------------------------------------------

    #[test]
    fn allow_private_network_allows_private_classes() {
        let p = private_policy();
        for addr in [
            "10.0.0.1",
            "127.0.0.1",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.1.1",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd12::1",
            "fec0::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::10.0.0.1",
            "2002:a00:1::",
            "8.8.8.8",
        ] {
            assert_eq!(p.check_ip(ip(addr)), Ok(()), "{addr}");
        }
    }

    #[test]
    fn allow_private_network_keeps_metadata_and_special_blocked() {
        let p = private_policy();
        for (addr, reason) in [
            ("169.254.169.254", Metadata),
            ("169.254.170.2", Metadata),
            ("100.100.100.200", Metadata),
            ("fd00:ec2::254", Metadata),
            ("fe80::a9fe:a9fe", Metadata),
            ("::ffff:169.254.169.254", Metadata),
            ("::169.254.169.254", Metadata),
            ("::ffff:0:169.254.169.254", Metadata),
            ("64:ff9b::a9fe:a9fe", Metadata),
            ("2002:a9fe:a9fe::", Metadata),
            ("0.0.0.0", Unspecified),
            ("::", Unspecified),
            ("::ffff:0.0.0.0", Ipv4Mapped),
            ("224.0.0.1", Multicast),
            ("ff02::1", Multicast),
            ("::ffff:224.0.0.1", Ipv4Mapped),
            ("255.255.255.255", Broadcast),
            ("240.0.0.1", Reserved),
            ("198.18.0.1", Reserved),
            ("192.0.2.1", Documentation),
            ("2001:db8::1", Documentation),
            ("100::1", Reserved),
        ] {
            assert_eq!(p.check_ip(ip(addr)), Err(reason), "{addr}");
        }
    }

    #[test]
    fn allow_private_network_urls() {
        let p = private_policy();
        assert_url_ok(&p, "http://10.0.0.1/", "10.0.0.1");
        assert_url_ok(&p, "http://127.0.0.1:8080/x", "127.0.0.1");
        assert_url_ok(&p, "http://localhost/", "localhost");
        assert_url_ok(&p, "http://[::ffff:10.0.0.1]/", "[::ffff:a00:1]");
        assert_url_blocked(&p, "http://169.254.169.254/latest/meta-data/", Metadata);
        assert_url_blocked(&p, "http://[::ffff:169.254.169.254]/", Metadata);
        assert_url_blocked(&p, "http://0.0.0.0/", Unspecified);
        assert_url_blocked(&p, "http://127.0.0.1:0/", Port);
    }

    // ---- URL spellings (safety.md §3.0) ---------------------------------------

    #[test]
    fn url_odd_ipv4_spellings_are_loopback() {
        let p = default_policy();
        for input in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://0x7f000001/",
            "http://127.1/",
            "http://017700000001/",
            "http://0177.1/",
            "http://0x7f.0x0.0x0.0x1/",
            "http://127.0.0.1./",
            "HTTP://127.0.0.1/",
            "https://127.0.0.1:8443/",
        ] {
            assert_url_blocked(&p, input, Loopback);
        }
    }

    #[test]
    fn url_zero_is_unspecified() {
        assert_url_blocked(&default_policy(), "http://0/", Unspecified);
        assert_url_blocked(&default_policy(), "http://0.0.0.0:8080/", Unspecified);
    }

    #[test]
    fn url_metadata_spellings() {
        let p = default_policy();
        for input in [
            "http://169.254.169.254/latest/meta-data/",
            "http://2852039166/",
            "http://0xa9.0xfe.0xa9.0xfe/",
            "http://0xa9fea9fe/",
            "http://[::ffff:169.254.169.254]/",
            "http://[::ffff:a9fe:a9fe]/",
            "http://[fd00:ec2::254]/",
            "http://100.100.100.200/",
        ] {
            assert_url_blocked(&p, input, Metadata);
        }
    }

    #[test]
    fn url_unicode_and_percent_encoded_ipv4() {
        let p = default_policy();
        for input in [
            "http://１２７.０.０.１/",
            "http://127。0。0。1/",
            "http://127．0．0．1/",
            "http://%31%32%37.0.0.1/",
        ] {
            assert_url_blocked(&p, input, Loopback);
        }
    }

    #[test]
    fn url_localhost_names() {
        let p = default_policy();
        for input in [
            "http://localhost/",
            "http://LOCALHOST/",
            "http://localhost./",
            "http://localhost:8080/",
            "http://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/",
            "http://ⅼocalhost/",
            "http://local\u{200B}host/",
            "http://foo.localhost/",
            "http://a.b.localhost./",
            "http://localhost.localdomain/",
            "http://ip6-localhost/",
            "http://%6c%6f%63%61%6c%68%6f%73%74/",
            "http://localhost。/",
        ] {
            assert_url_blocked(&p, input, Loopback);
        }
        assert_url_ok(&p, "http://localhost.example.com/", "localhost.example.com");
        assert_url_ok(&p, "http://notlocalhost/", "notlocalhost");
    }

    #[test]
    fn url_ipv6_literals() {
        let p = default_policy();
        assert_url_blocked(&p, "http://[::1]/", Loopback);
        assert_url_blocked(&p, "http://[::]/", Unspecified);
        assert_url_blocked(&p, "http://[::ffff:7f00:1]/", Ipv4Mapped);
        assert_url_blocked(&p, "http://[::ffff:127.0.0.1]/", Ipv4Mapped);
        assert_url_blocked(&p, "http://[::127.0.0.1]/", Ipv4Mapped);
        assert_url_blocked(&p, "http://[::ffff:0:127.0.0.1]/", Ipv4Mapped);
        assert_url_blocked(&p, "http://[64:ff9b::127.0.0.1]/", Ipv4Mapped);
        assert_url_blocked(&p, "http://[2002:7f00:1::]/", Ipv4Mapped);
        assert_url_blocked(&p, "http://[fe80::1]/", LinkLocal);
        assert_url_blocked(&p, "http://[fc00::1]/", UniqueLocal);
        assert_url_blocked(&p, "http://[ff02::1]/", Multicast);
        assert_url_ok(&p, "http://[2606:4700::1111]/", "[2606:4700::1111]");
        assert_url_ok(&p, "http://[::ffff:8.8.8.8]/", "[::ffff:808:808]");
    }

    #[test]
    fn url_userinfo_tricks() {
        let p = default_policy();
        assert_url_blocked(&p, "http://evil.com@127.0.0.1/", Loopback);
        assert_url_blocked(&p, "http://user:pass@10.0.0.1/", Private);
        assert_url_ok(&p, "https://127.0.0.1:443@evil.com/", "evil.com");
        assert_url_ok(&p, "http://127.0.0.1%2f@evil.com/", "evil.com");
    }

    #[test]
    fn url_backslash_and_fragment_tricks() {
        let p = default_policy();
        assert_url_blocked(&p, "http://127.0.0.1:80\\@evil.com/", Loopback);
        assert_url_blocked(&p, "http://127.0.0.1#@evil.com/", Loopback);
        assert_url_blocked(&p, "http:\\\\127.0.0.1\\", Loopback);
    }

    #[test]
    fn url_lenient_forms() {
        let p = default_policy();
        assert_url_blocked(&p, "http:127.0.0.1/", Loopback);
        assert_url_blocked(&p, "http:/\\127.0.0.1/", Loopback);
        assert_url_blocked(&p, "http:///127.0.0.1/", Loopback);
    }

    #[test]
    fn url_unsupported_schemes() {
        let p = default_policy();
        for (input, scheme) in [
            ("gopher://127.0.0.1:6379/_INFO", "gopher"),
            ("gopher://example.com/", "gopher"),
            ("file:///etc/passwd", "file"),
            ("file://127.0.0.1/etc/passwd", "file"),
            ("ftp://example.com/", "ftp"),
            ("ftp://127.0.0.1/", "ftp"),
            ("javascript:alert(1)", "javascript"),
            ("data:text/html,<script>alert(1)</script>", "data"),
            ("ws://example.com/", "ws"),
            ("wss://example.com/", "wss"),
            ("dict://127.0.0.1:11211/", "dict"),
            ("HtTpX://example.com/", "httpx"),
        ] {
            assert_eq!(
                p.parse_url(input),
                Err(UrlError::UnsupportedScheme(scheme.to_owned())),
                "{input}"
            );
        }
    }

    #[test]
    fn url_port_zero_and_invalid_ports() {
        let p = default_policy();
        assert_url_blocked(&p, "http://127.0.0.1:0/", Port);
        assert_url_blocked(&p, "http://example.com:0/", Port);
        assert_url_blocked(&p, "https://example.com:00/", Port);
        assert_url_ok(&p, "http://example.com:80/", "example.com");
        assert_url_ok(&p, "http://example.com:65535/", "example.com");
        assert_url_invalid("http://example.com:65536/");
        assert_url_invalid("http://example.com:99999/");
        assert_url_invalid("http://example.com:-1/");
    }

    #[test]
    fn url_parse_errors() {
        for input in [
            "http://08.0.0.1/",
            "http://999.1.1.1/",
            "http://[fe80::1%25lo]/",
            "http://[fe80::1%lo]/",
            "http://[::1/",
            "http://",
            "",
            "example.com",
            "/relative/path",
            "http://exa mple.com/",
        ] {
            assert_url_invalid(input);
        }
    }

    #[test]
    fn url_control_characters_rejected_before_parsing() {
        let p = default_policy();
        for input in [
            "http://exa\nmple.com/",
            "http://exa\tmple.com/",
            "http://ex\rample.com/a\r\nb",
            "http://example.com/\0",
            "http://127.0.0.1/\x7f",
            "http://example.com/\x1b[31m",
            "\x0chttp://example.com/",
            "http://example.com/\u{85}",
            "http://example.com/\n",
        ] {
            assert_eq!(
                p.parse_url(input),
                Err(UrlError::ControlCharacter),
                "{input:?}"
            );
        }
    }

    #[test]
    fn url_surrounding_whitespace_rejected() {
        for input in [
            "  http://127.0.0.1/  ",
            " http://example.com/",
            "http://example.com/ ",
            "\u{3000}http://example.com/",
            "http://example.com/\u{a0}",
        ] {
            assert_url_invalid(input);
        }
    }

    #[test]
    fn url_public_hosts_pass() {
        let p = default_policy();
        assert_url_ok(&p, "http://example.com/", "example.com");
        assert_url_ok(&p, "https://EXAMPLE.com./path?q=1#f", "example.com.");
        assert_url_ok(&p, "http://93.184.216.34/", "93.184.216.34");
        assert_url_ok(&p, "https://8.8.8.8/", "8.8.8.8");
        assert_url_ok(&p, "https://bücher.de/", "xn--bcher-kva.de");
        assert_url_ok(&p, "http://user:pw@example.com/", "example.com");
        assert_url_ok(&p, "http://example.com/a%20b", "example.com");
    }

    #[test]
    fn check_url_on_parsed_urls() {
        let p = default_policy();
        // Url::parse itself strips tab/newline; check_url still judges the host.
        let url = Url::parse("http://127.0.0.\n1/").unwrap();
        assert_eq!(
            p.check_url(&url),
            Err(UrlError::Blocked {
                host: "127.0.0.1".into(),
                reason: Loopback
            })
        );
        let url = Url::parse("gopher://127.0.0.1/").unwrap();
        assert_eq!(
            p.check_url(&url),
            Err(UrlError::UnsupportedScheme("gopher".into()))
        );
        let url = Url::parse("http://[::1]:8080/").unwrap();
        assert_eq!(
            p.check_url(&url),
            Err(UrlError::Blocked {
                host: "[::1]".into(),
                reason: Loopback
            })
        );
        // A redirect target resolved against a base is checked the same way.
        let base = Url::parse("https://example.com/a/b").unwrap();
        let hop = base.join("//169.254.169.254/latest").unwrap();
        assert_eq!(
            p.check_url(&hop).map_err(|e| e.block_reason()),
            Err(Some(Metadata))
        );
        let hop = base.join("/c?d").unwrap();
        assert_eq!(p.check_url(&hop), Ok(()));
    }

    // ---- host lists -----------------------------------------------------------

    #[test]
    fn blocklist_exact_and_wildcard() {
        let p = Policy {
            block_hosts: vec!["*.example.com".into(), "bad.org".into()],
            ..Policy::default()
        };
        for host in [
            "example.com",
            "evil.example.com",
            "EVIL.example.com.",
            "a.b.example.com",
            "Example.COM",
            "bad.org",
            "BAD.ORG.",
        ] {
            assert_eq!(p.check_host(host), Err(BlockedHost), "{host}");
        }
        for host in [
            "notexample.com",
            "example.com.evil.net",
            "sub.bad.org",
            "example.org",
        ] {
            assert_eq!(p.check_host(host), Ok(()), "{host}");
        }
        assert_url_blocked(&p, "http://EVIL.example.com./x", BlockedHost);
        assert_url_blocked(&p, "https://user@Evil.Example.Com:8443/", BlockedHost);
        assert_url_ok(&p, "http://notexample.com/", "notexample.com");
    }

    #[test]
    fn blocklist_entries_are_normalised() {
        let p = Policy {
            block_hosts: vec![
                " *.Example.COM. ".into(),
                "BÜCHER.de".into(),
                "[::1]".into(),
                "2001:4860:4860::8888".into(),
                "0x08080808".into(),
            ],
            ..Policy::default()
        };
        assert_eq!(p.check_host("www.example.com"), Err(BlockedHost));
        assert_eq!(p.check_host("xn--bcher-kva.de"), Err(BlockedHost));
        assert_eq!(p.check_host("bücher.de"), Err(BlockedHost));
        assert_eq!(p.check_host("[::1]"), Err(BlockedHost));
        assert_eq!(p.check_host("[2001:4860:4860:0::8888]"), Err(BlockedHost));
        assert_url_blocked(&p, "http://8.8.8.8/", BlockedHost);
        assert_url_blocked(&p, "http://134744072/", BlockedHost);
        assert_eq!(p.check_host("8.8.4.4"), Ok(()));
    }

    #[test]
    fn allowlist_exact_only() {
        let p = Policy {
            allow_hosts: vec!["Docs.Example.com.".into(), "93.184.216.34".into()],
            ..Policy::default()
        };
        assert_eq!(p.check_host("docs.example.com"), Ok(()));
        assert_eq!(p.check_host("DOCS.EXAMPLE.COM."), Ok(()));
        assert_eq!(p.check_host("93.184.216.34"), Ok(()));
        assert_eq!(p.check_host("example.com"), Err(NotAllowlisted));
        assert_eq!(p.check_host("a.docs.example.com"), Err(NotAllowlisted));
        assert_eq!(p.check_host("8.8.8.8"), Err(NotAllowlisted));
        assert_url_ok(&p, "https://docs.example.com/guide", "docs.example.com");
        assert_url_blocked(&p, "https://other.example.com/", NotAllowlisted);
        // Address classes win over (and are reported before) the allow list.
        assert_url_blocked(&p, "http://127.0.0.1/", Loopback);
        assert_url_blocked(&p, "http://localhost/", Loopback);
    }

    #[test]
    fn allowlist_never_overrides_address_classes() {
        let p = Policy {
            allow_hosts: vec!["localhost".into(), "10.0.0.1".into()],
            ..Policy::default()
        };
        assert_eq!(p.check_host("localhost"), Err(Loopback));
        assert_eq!(p.check_host("10.0.0.1"), Err(Private));
        let p = Policy {
            allow_private_network: true,
            ..p
        };
        assert_eq!(p.check_host("localhost"), Ok(()));
        assert_eq!(p.check_host("10.0.0.1"), Ok(()));
        assert_eq!(p.check_host("10.0.0.2"), Err(NotAllowlisted));
    }

    #[test]
    fn blocklist_wins_over_allowlist_and_private_network() {
        let p = Policy {
            allow_private_network: true,
            allow_hosts: vec!["intranet.corp".into()],
            block_hosts: vec!["*.corp".into()],
        };
        assert_eq!(p.check_host("intranet.corp"), Err(BlockedHost));
    }

    #[test]
    fn check_host_normalises_like_the_url_parser() {
        let p = default_policy();
        assert_eq!(p.check_host("localhost"), Err(Loopback));
        assert_eq!(p.check_host("LocalHost."), Err(Loopback));
        assert_eq!(p.check_host("ⓛⓞⓒⓐⓛⓗⓞⓢⓣ"), Err(Loopback));
        assert_eq!(p.check_host("x.localhost"), Err(Loopback));
        assert_eq!(p.check_host("127.0.0.1"), Err(Loopback));
        assert_eq!(p.check_host("2130706433"), Err(Loopback));
        assert_eq!(p.check_host("0x7f.1"), Err(Loopback));
        assert_eq!(p.check_host("[::1]"), Err(Loopback));
        assert_eq!(p.check_host("::1"), Err(Loopback));
        assert_eq!(p.check_host("169.254.169.254"), Err(Metadata));
        assert_eq!(p.check_host("example.com"), Ok(()));
        assert_eq!(p.check_host("example.com."), Ok(()));
        // Unparsable hosts fail closed.
        for bad in ["", ".", "exa mple.com", "a/b", "[::1", "999.1.1.1", "x@y"] {
            assert_eq!(p.check_host(bad), Err(BlockedHost), "{bad:?}");
        }
        let pp = private_policy();
        assert_eq!(pp.check_host("localhost"), Ok(()));
        assert_eq!(pp.check_host("foo.localhost"), Ok(()));
        assert_eq!(pp.check_host("169.254.169.254"), Err(Metadata));
    }

    #[test]
    fn validate_reports_bad_entries() {
        assert_eq!(Policy::default().validate(), Ok(()));
        let ok = Policy {
            allow_private_network: false,
            allow_hosts: vec!["example.com".into(), "[::1]".into(), "10.0.0.1".into()],
            block_hosts: vec!["*.example.org".into(), "bad.net".into()],
        };
        assert_eq!(ok.validate(), Ok(()));
        for (allow, block, list, entry) in [
            (
                vec!["*.example.com"],
                vec![],
                "allow_hosts",
                "*.example.com",
            ),
            (vec!["exa mple.com"], vec![], "allow_hosts", "exa mple.com"),
            (vec![], vec!["*"], "block_hosts", "*"),
            (
                vec![],
                vec!["*.*.example.com"],
                "block_hosts",
                "*.*.example.com",
            ),
            (vec![], vec!["foo.*.com"], "block_hosts", "foo.*.com"),
            (vec![], vec!["*.10.0.0.1"], "block_hosts", "*.10.0.0.1"),
            (vec![], vec![""], "block_hosts", ""),
        ] {
            let p = Policy {
                allow_private_network: false,
                allow_hosts: allow.into_iter().map(String::from).collect(),
                block_hosts: block.into_iter().map(String::from).collect(),
            };
            assert_eq!(
                p.validate(),
                Err(PolicyError::InvalidHostEntry {
                    list,
                    entry: entry.to_owned()
                }),
                "{entry:?}"
            );
        }
    }

    #[test]
    fn invalid_allow_entries_fail_closed() {
        let p = Policy {
            allow_hosts: vec!["*.example.com".into()],
            ..Policy::default()
        };
        assert_eq!(p.check_host("www.example.com"), Err(NotAllowlisted));
        assert_eq!(p.check_host("example.com"), Err(NotAllowlisted));
    }

    // ---- errors, names and serde ----------------------------------------------

    const ALL_REASONS: [BlockReason; 15] = [
        Loopback,
        Private,
        LinkLocal,
        Metadata,
        Cgnat,
        Multicast,
        Broadcast,
        Reserved,
        Unspecified,
        Documentation,
        UniqueLocal,
        Ipv4Mapped,
        BlockedHost,
        NotAllowlisted,
        Port,
    ];

    #[test]
    fn reason_names_match_serde() {
        use serde::Deserialize;
        use serde::de::IntoDeserializer;
        use serde::de::value::{Error as DeError, StrDeserializer};
        let mut seen = std::collections::HashSet::new();
        for reason in ALL_REASONS {
            let name = reason.as_str();
            assert!(seen.insert(name), "duplicate name {name}");
            assert!(
                name.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
                "{name} is not snake_case"
            );
            assert_eq!(reason.to_string(), name);
            let de: StrDeserializer<'_, DeError> = name.into_deserializer();
            assert_eq!(BlockReason::deserialize(de), Ok(reason));
        }
        let de: StrDeserializer<'_, DeError> = "Loopback".into_deserializer();
        assert!(BlockReason::deserialize(de).is_err());
        assert_eq!(Ipv4Mapped.as_str(), "ipv4_mapped");
        assert_eq!(NotAllowlisted.as_str(), "not_allowlisted");
    }

    #[test]
    fn policy_deserialises_with_defaults_and_rejects_unknown_fields() {
        use serde::Deserialize;
        use serde::de::value::{Error as DeError, MapDeserializer};
        let de: MapDeserializer<'_, _, DeError> =
            MapDeserializer::new(vec![("allow_private_network", true)].into_iter());
        let p = Policy::deserialize(de).unwrap();
        assert!(p.allow_private_network);
        assert!(p.allow_hosts.is_empty() && p.block_hosts.is_empty());

        let de: MapDeserializer<'_, _, DeError> =
            MapDeserializer::new(Vec::<(&str, bool)>::new().into_iter());
        let p = Policy::deserialize(de).unwrap();
        assert!(!p.allow_private_network);

        let de: MapDeserializer<'_, _, DeError> =
            MapDeserializer::new(vec![("allow_private_networks", true)].into_iter());
        let err = Policy::deserialize(de).unwrap_err().to_string();
        assert!(err.contains("unknown field"), "{err}");
    }

    #[test]
    fn default_policy_is_strict() {
        let p = Policy::default();
        assert!(!p.allow_private_network);
        assert!(p.allow_hosts.is_empty());
        assert!(p.block_hosts.is_empty());
    }

    #[test]
    fn error_codes_and_messages() {
        let p = default_policy();
        let e = p.parse_url("http://127.0.0.1/").unwrap_err();
        assert_eq!(e.code(), "blocked_destination");
        assert_eq!(e.block_reason(), Some(Loopback));
        assert_eq!(e.to_string(), "blocked destination 127.0.0.1: loopback");
        let e = p.parse_url("gopher://x/").unwrap_err();
        assert_eq!(e.code(), "unsupported_scheme");
        assert_eq!(e.block_reason(), None);
        assert!(e.to_string().contains("gopher"));
        assert_eq!(
            p.parse_url("http://a\nb/").unwrap_err().code(),
            "invalid_url"
        );
        assert_eq!(p.parse_url("nope").unwrap_err().code(), "invalid_url");
        assert_eq!(UrlError::MissingHost.code(), "invalid_url");
        let e = p.parse_url("http://[fd00:ec2::254]/").unwrap_err();
        assert_eq!(
            e,
            UrlError::Blocked {
                host: "[fd00:ec2::254]".into(),
                reason: Metadata
            }
        );
    }
}
