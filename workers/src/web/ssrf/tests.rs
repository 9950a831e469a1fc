//! Tests of the SSRF policy's URLs, host lists, errors and configuration; the address classes
//! are tested in `addresses`.

use super::*;
use BlockReason::*;

mod addresses;

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

// ---- URL spellings that must not slip past the guard -----------------------

#[track_caller]
fn assert_url_legacy_ipv4(input: &str) {
    match default_policy().parse_url(input) {
        Err(error @ UrlError::LegacyIpv4(_)) => assert_eq!(error.code(), "invalid_url"),
        other => panic!("{input:?} should be a legacy IPv4 form, got {other:?}"),
    }
}

#[test]
fn url_dotted_quads_are_judged_and_odd_ipv4_spellings_refused() {
    let p = default_policy();
    for input in [
        "http://127.0.0.1/",
        "HTTP://127.0.0.1/",
        "https://127.0.0.1:8443/",
    ] {
        assert_url_blocked(&p, input, Loopback);
    }
    for input in [
        "http://2130706433/",
        "http://0x7f.1/",
        "http://0177.0.0.1/",
        "http://0x7f000001/",
        "http://127.1/",
        "http://017700000001/",
        "http://0177.1/",
        "http://0x7f.0x0.0x0.0x1/",
        "http://127.0.0.1./",
        "http://8.8.2056/",
        "http://user@0x7f.1:8080/",
    ] {
        assert_url_legacy_ipv4(input);
    }
}

#[test]
fn url_zero_is_unspecified() {
    assert_url_blocked(&default_policy(), "http://0.0.0.0/", Unspecified);
    assert_url_blocked(&default_policy(), "http://0.0.0.0:8080/", Unspecified);
    // `0` alone is a legacy spelling of 0.0.0.0.
    assert_url_legacy_ipv4("http://0/");
}

#[test]
fn url_metadata_spellings() {
    let p = default_policy();
    for input in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:169.254.169.254]/",
        "http://[::ffff:a9fe:a9fe]/",
        "http://[fd00:ec2::254]/",
        "http://100.100.100.200/",
    ] {
        assert_url_blocked(&p, input, Metadata);
    }
    for input in [
        "http://2852039166/",
        "http://0xa9.0xfe.0xa9.0xfe/",
        "http://0xa9fea9fe/",
    ] {
        assert_url_legacy_ipv4(input);
    }
}

#[test]
fn url_unicode_and_percent_encoded_ipv4() {
    for input in [
        "http://１２７.０.０.１/",
        "http://127。0。0。1/",
        "http://127．0．0．1/",
        "http://%31%32%37.0.0.1/",
    ] {
        assert_url_legacy_ipv4(input);
    }
}

#[test]
fn url_length_is_bounded() {
    let p = default_policy();
    let head = "http://example.com/";
    let fits = format!("{head}{}", "a".repeat(MAX_URL_BYTES - head.len()));
    assert_url_ok(&p, &fits, "example.com");
    let over = format!("{fits}a");
    assert_eq!(
        p.parse_url(&over),
        Err(UrlError::TooLong {
            limit: MAX_URL_BYTES
        })
    );
    assert_eq!(p.parse_url(&over).unwrap_err().code(), "invalid_url");
}

#[test]
fn url_forbidden_code_points_in_the_authority() {
    let p = default_policy();
    for (input, c) in [
        ("http://1.1.1.1 &@2.2.2.2# @3.3.3.3/", ' '),
        ("http://a b@example.com/", ' '),
        ("http://a<b@example.com/", '<'),
        ("http://a|b@example.com/", '|'),
        ("http://a^b@example.com/", '^'),
        ("http://a@b@example.com/", '@'),
    ] {
        assert_eq!(
            p.parse_url(input),
            Err(UrlError::ForbiddenCodePoint(c)),
            "{input}"
        );
    }
    // Outside the authority they are the path's business.
    assert_url_ok(&p, "http://example.com/a b?c=<d>#e f", "example.com");
    assert_url_ok(&p, "http://example.com/?next=a@b@c", "example.com");
}

#[test]
fn metadata_names_are_refused_whatever_the_configuration() {
    let lenient = Policy {
        allow_private_network: true,
        allow_hosts: vec!["metadata.google.internal".to_owned()],
        internal_hosts: vec!["metadata.google.internal".to_owned(), "*.goog".to_owned()],
        ..Policy::default()
    };
    for p in [default_policy(), lenient] {
        for input in [
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://METADATA.google.internal./",
            "http://metadata.goog/",
            "http://instance-data/latest/",
        ] {
            assert_url_blocked(&p, input, Metadata);
        }
    }
}

#[test]
fn internal_names_need_listing() {
    let p = private_policy();
    assert_url_blocked(&p, "http://db.internal/", InternalName);
    assert_url_blocked(&p, "http://internal/", InternalName);
    assert_url_blocked(&p, "http://instance-data.ec2.internal/", InternalName);
    assert_url_ok(&p, "http://internal.example.com/", "internal.example.com");
    let listed = Policy {
        internal_hosts: vec!["db.internal".to_owned(), "*.corp.internal".to_owned()],
        ..Policy::default()
    };
    assert_url_ok(&listed, "http://db.internal/", "db.internal");
    assert_url_ok(&listed, "http://wiki.corp.internal/", "wiki.corp.internal");
    assert_url_blocked(&listed, "http://other.internal/", InternalName);
    assert_eq!(
        Policy {
            internal_hosts: vec!["a*.internal".to_owned()],
            ..Policy::default()
        }
        .validate(),
        Err(PolicyError::InvalidHostEntry {
            list: "internal_hosts",
            entry: "a*.internal".to_owned()
        })
    );
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
    for input in [
        "http://127.0.0.1:0/",
        "http://example.com:0/",
        "https://example.com:00/",
    ] {
        let error = p.parse_url(input).unwrap_err();
        assert_eq!(error, UrlError::PortZero, "{input}");
        assert_eq!(error.code(), "invalid_url");
        assert_eq!(error.to_string(), "invalid URL: port 0");
    }
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
    // The same address spelt as one number is not judged: it is refused as malformed.
    assert_url_legacy_ipv4("http://134744072/");
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
        internal_hosts: Vec::new(),
        trusted_hosts: vec!["intranet.corp".into()],
        allow_fake_ip: false,
        private_only: false,
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
        internal_hosts: vec!["db.internal".into(), "*.corp.internal".into()],
        trusted_hosts: vec!["wiki.corp.example".into(), "10.0.0.5".into()],
        allow_fake_ip: false,
        private_only: false,
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
            internal_hosts: Vec::new(),
            trusted_hosts: Vec::new(),
            allow_fake_ip: false,
            private_only: false,
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

const ALL_REASONS: [BlockReason; 17] = [
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
    InternalName,
    Public,
];

#[test]
fn a_private_only_policy_refuses_public_addresses_and_metadata() {
    let policy = Policy {
        allow_private_network: true,
        private_only: true,
        ..Policy::default()
    };
    for private in ["127.0.0.1", "10.1.2.3", "192.168.0.9", "::1", "fd00::5"] {
        assert_eq!(
            policy.check_ip(private.parse().expect("ip")),
            Ok(()),
            "{private}"
        );
    }
    assert_eq!(
        policy.check_ip("93.184.216.34".parse().expect("ip")),
        Err(Public)
    );
    assert_eq!(
        policy.check_ip("169.254.169.254".parse().expect("ip")),
        Err(Metadata)
    );
    // Not a configuration key.
    assert!(!toml_key_exists("private_only"));
}

fn toml_key_exists(key: &str) -> bool {
    serde_json::to_value(Policy::default())
        .expect("serialises")
        .get(key)
        .is_some()
}

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

#[test]
fn trusted_hosts_open_their_private_addresses_only() {
    let policy = Policy {
        trusted_hosts: vec![
            "Wiki.Corp.Example.".to_owned(),
            "10.0.0.5".to_owned(),
            "localhost".to_owned(),
        ],
        ..Policy::default()
    };
    policy.validate().expect("valid entries");
    let private: IpAddr = "10.1.2.3".parse().expect("ip");
    let loopback: IpAddr = "127.0.0.1".parse().expect("ip");
    let mapped: IpAddr = "::ffff:10.1.2.3".parse().expect("ip");
    // The trusted name may resolve to private and loopback addresses (and IPv6 forms of them).
    assert_eq!(policy.check_ip_for("wiki.corp.example", private), Ok(()));
    assert_eq!(policy.check_ip_for("WIKI.corp.example.", loopback), Ok(()));
    assert_eq!(policy.check_ip_for("wiki.corp.example", mapped), Ok(()));
    // Never to cloud metadata, nor to the other blocked classes.
    for blocked in ["169.254.169.254", "0.0.0.0", "224.0.0.1", "fd00:ec2::254"] {
        let ip: IpAddr = blocked.parse().expect("ip");
        assert!(
            policy.check_ip_for("wiki.corp.example", ip).is_err(),
            "{blocked}"
        );
    }
    // Another host resolving to the same private address stays blocked (a redirect from the
    // trusted host to it is checked as it).
    assert_eq!(
        policy.check_ip_for("other.corp.example", private),
        Err(Private)
    );
    assert_eq!(policy.check_ip_for("corp.example", private), Err(Private));
    assert_eq!(policy.check_ip(private), Err(Private));
    // A trusted literal, and the trusted localhost name; not other literals.
    assert_url_ok(&policy, "http://10.0.0.5:8080/x", "10.0.0.5");
    assert_url_ok(&policy, "http://localhost/x", "localhost");
    assert_url_blocked(&policy, "http://10.0.0.6/x", Private);
    assert_url_blocked(&policy, "http://127.0.0.1/x", Loopback);
    // Entries are exact hosts.
    let wildcard = Policy {
        trusted_hosts: vec!["*.corp.example".to_owned()],
        ..Policy::default()
    };
    assert!(matches!(
        wildcard.validate(),
        Err(PolicyError::InvalidHostEntry {
            list: "trusted_hosts",
            ..
        })
    ));
}

#[test]
fn fake_ip_answers_pass_only_when_allowed() {
    let fake: IpAddr = "198.18.0.7".parse().expect("ip");
    let mapped: IpAddr = "::ffff:198.19.255.1".parse().expect("ip");
    assert_eq!(default_policy().check_ip(fake), Err(Reserved));
    assert!(private_policy().check_ip(fake).is_err());
    let policy = Policy {
        allow_fake_ip: true,
        ..Policy::default()
    };
    assert_eq!(policy.check_ip(fake), Ok(()));
    assert_eq!(policy.check_ip(mapped), Ok(()));
    assert_eq!(policy.check_ip_for("any.example", fake), Ok(()));
    // Nothing else opens with it.
    for other in ["192.0.2.1", "10.0.0.1", "127.0.0.1", "169.254.169.254"] {
        let ip: IpAddr = other.parse().expect("ip");
        assert!(policy.check_ip(ip).is_err(), "{other}");
    }
}
