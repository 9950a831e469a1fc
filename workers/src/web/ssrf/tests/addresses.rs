//! Tests of the address classes: every IPv4 and IPv6 class with its boundaries, IPv6 forms
//! that embed an IPv4 address, and what `allow_private_network` relaxes and keeps.

use super::*;

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
        // The retired 6to4 relay anycast (RFC 7526).
        ("192.88.99.0", Some(Reserved)),
        ("192.88.99.1", Some(Reserved)),
        ("192.88.99.255", Some(Reserved)),
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
        ("192.88.98.255", None),
        ("192.88.100.0", None),
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
    assert_eq!(p.parse_url("http://127.0.0.1:0/"), Err(UrlError::PortZero));
}
