//! The SSRF guard's wiring: literal addresses, DNS answers at connect time, rebinding,
//! redirects, allow and block lists. Each blocked case also checks that nothing reached the
//! fixture server.

use trawl_workers::job::ErrorCode;
use trawl_workers::web::{self, Policy};

use crate::Site;

async fn get_code(site: &Site, url: &str) -> Result<u16, ErrorCode> {
    let parsed = site.client.parse_url(url).map_err(|error| error.code())?;
    site.client
        .get(&parsed, None)
        .await
        .map(|response| response.status)
        .map_err(|error| error.code())
}

#[tokio::test]
async fn the_default_policy_refuses_loopback_in_every_spelling() {
    let site = Site::start().await;
    let port = site.server.addr().port();
    for host in ["127.0.0.1", "localhost", "[::1]", "[::ffff:127.0.0.1]"] {
        let url = format!("http://{host}:{port}/secret");
        assert_eq!(
            get_code(&site, &url).await,
            Err(ErrorCode::BlockedDestination),
            "{url}"
        );
    }
    // Legacy IPv4 spellings are not normalised and judged: they are refused as malformed.
    for host in [
        "2130706433",
        "0x7f.1",
        "127.1",
        "0177.0.0.1",
        "１２７.０.０.１",
    ] {
        let url = format!("http://{host}:{port}/secret");
        assert_eq!(
            get_code(&site, &url).await,
            Err(ErrorCode::InvalidUrl),
            "{url}"
        );
    }
    assert_eq!(site.server.hits("/secret"), 0);
}

#[tokio::test]
async fn a_public_name_reaches_the_site_and_private_answers_are_refused() {
    let site = Site::start().await;
    assert_eq!(get_code(&site, &site.url("/")).await, Ok(200));
    for host in ["private.test", "mixed.test", "metadata.test"] {
        let url = site.url_on(host, "/secret");
        assert_eq!(
            get_code(&site, &url).await,
            Err(ErrorCode::BlockedDestination),
            "{host}"
        );
    }
    assert_eq!(site.server.hits("/secret"), 0);
    assert_eq!(
        get_code(&site, &site.url_on("unknown.test", "/")).await,
        Err(ErrorCode::DnsError)
    );
}

#[tokio::test]
async fn a_rebinding_name_is_checked_again_on_the_next_connection() {
    let site = Site::start().await;
    assert_eq!(
        get_code(&site, &site.url_on("rebind.test", "/")).await,
        Ok(200)
    );
    // The fixture closes every connection, so the second request resolves again and gets
    // the loopback answer, which the resolver refuses before any connect.
    assert_eq!(
        get_code(&site, &site.url_on("rebind.test", "/secret")).await,
        Err(ErrorCode::BlockedDestination)
    );
    assert_eq!(site.dns.lookups("rebind.test"), 2);
    assert_eq!(site.server.hits("/secret"), 0);
}

#[tokio::test]
async fn redirects_are_checked_on_every_hop() {
    let site = Site::start().await;
    let port = site.server.addr().port();
    let to_loopback = format!("/redirect?to=http://127.0.0.1:{port}/secret&code=302");
    assert_eq!(
        get_code(&site, &site.url(&to_loopback)).await,
        Err(ErrorCode::BlockedDestination)
    );
    let to_private = format!("/redirect?to=http://private.test:{port}/secret&code=307");
    assert_eq!(
        get_code(&site, &site.url(&to_private)).await,
        Err(ErrorCode::BlockedDestination)
    );
    let to_file = "/redirect?to=file:///etc/passwd&code=301";
    assert_eq!(
        get_code(&site, &site.url(to_file)).await,
        Err(ErrorCode::UnsupportedScheme)
    );
    assert_eq!(site.server.hits("/secret"), 0);
    let to_public = format!("/redirect?to=http://other.test:{port}/article/1&code=301");
    assert_eq!(get_code(&site, &site.url(&to_public)).await, Ok(200));
}

#[tokio::test]
async fn redirect_limits_loops_and_missing_locations_are_errors() {
    let site = Site::start().await;
    assert_eq!(
        get_code(&site, &site.url("/redirect-chain/3")).await,
        Ok(200)
    );
    assert_eq!(
        get_code(&site, &site.url("/redirect-chain/4")).await,
        Err(ErrorCode::TooManyRedirects)
    );
    assert_eq!(
        get_code(&site, &site.url("/loop/a")).await,
        Err(ErrorCode::RedirectLoop)
    );
    assert_eq!(
        get_code(&site, &site.url("/nolocation")).await,
        Err(ErrorCode::RedirectMissingLocation)
    );
    assert_eq!(
        get_code(&site, &site.url("/redirect-relative")).await,
        Ok(200)
    );
}

#[tokio::test]
async fn allow_and_block_lists_apply_before_dns() {
    let policy = Policy {
        block_hosts: vec!["*.test".to_owned()],
        ..Policy::default()
    };
    let site = Site::start_with(policy, web::Config::default()).await;
    assert_eq!(
        get_code(&site, &site.url("/")).await,
        Err(ErrorCode::BlockedDestination)
    );
    assert_eq!(site.dns.lookups("site.test"), 0);

    let policy = Policy {
        allow_hosts: vec!["other.test".to_owned()],
        ..Policy::default()
    };
    let site = Site::start_with(policy, web::Config::default()).await;
    assert_eq!(
        get_code(&site, &site.url("/")).await,
        Err(ErrorCode::BlockedDestination)
    );
    assert_eq!(
        get_code(&site, &site.url_on("other.test", "/")).await,
        Ok(200)
    );
    assert_eq!(site.dns.lookups("site.test"), 0);
}

#[tokio::test]
async fn private_networks_can_be_allowed_but_metadata_never() {
    let policy = Policy {
        allow_private_network: true,
        ..Policy::default()
    };
    let site = Site::start_with(policy, web::Config::default()).await;
    let direct = site.server.url("/");
    assert_eq!(get_code(&site, &direct).await, Ok(200));
    assert_eq!(
        get_code(&site, &site.url_on("metadata.test", "/")).await,
        Err(ErrorCode::BlockedDestination)
    );
    assert_eq!(
        get_code(&site, "http://169.254.169.254/latest/meta-data/").await,
        Err(ErrorCode::BlockedDestination)
    );
}

#[tokio::test]
async fn a_trusted_host_reaches_its_private_address_and_nothing_else_does() {
    let policy = Policy {
        trusted_hosts: vec!["internal.test".to_owned()],
        ..Policy::default()
    };
    let site = Site::start_with(policy, web::Config::default()).await;
    let port = site.server.addr().port();
    assert_eq!(
        get_code(&site, &site.url_on("internal.test", "/article/1")).await,
        Ok(200)
    );
    // Another private name, the loopback literal and metadata stay refused.
    for url in [
        site.url_on("internal-other.test", "/secret"),
        format!("http://127.0.0.1:{port}/secret"),
        site.url_on("metadata.test", "/secret"),
    ] {
        assert_eq!(
            get_code(&site, &url).await,
            Err(ErrorCode::BlockedDestination),
            "{url}"
        );
    }
    // A redirect from the trusted host to another private host is checked as that host.
    let onwards = format!("/redirect?to=http://internal-other.test:{port}/secret&code=302");
    assert_eq!(
        get_code(&site, &site.url_on("internal.test", &onwards)).await,
        Err(ErrorCode::BlockedDestination)
    );
    let to_loopback = format!("/redirect?to=http://127.0.0.1:{port}/secret&code=307");
    assert_eq!(
        get_code(&site, &site.url_on("internal.test", &to_loopback)).await,
        Err(ErrorCode::BlockedDestination)
    );
    assert_eq!(site.server.hits("/secret"), 0);
}

#[tokio::test]
async fn bad_input_is_refused_before_any_network_use() {
    let site = Site::start().await;
    for (input, code) in [
        (
            "gopher://127.0.0.1:6379/_INFO",
            ErrorCode::UnsupportedScheme,
        ),
        ("ftp://site.test/", ErrorCode::UnsupportedScheme),
        ("http://site.test:0/", ErrorCode::InvalidUrl),
        ("http://exa\nmple.com/", ErrorCode::InvalidUrl),
        ("  http://site.test/  ", ErrorCode::InvalidUrl),
        ("not a url", ErrorCode::InvalidUrl),
        ("http://999.1.1.1/", ErrorCode::InvalidUrl),
    ] {
        assert_eq!(get_code(&site, input).await, Err(code), "{input:?}");
    }
    assert!(site.server.requests().is_empty());
}

/// Issue "fetch hazards": URLs that must be refused at admission, before any lookup or
/// request (they were fetched, retried as transient, or normalised and fetched).
#[tokio::test]
async fn hazardous_urls_are_refused_at_admission() {
    let site = Site::start().await;
    let port = site.server.addr().port();
    let long = format!("http://site.test:{port}/{}", "a".repeat(9 * 1024));
    let cases = [
        // Credentials would be sent as Basic auth.
        format!("http://user:secret@site.test:{port}/secret"),
        format!("http://user@site.test:{port}/secret"),
        // Over 8 KiB: refused, not a transient protocol_error retried three times.
        long,
        // Spaces and a second `@` in the authority: parsers disagree on the host.
        format!("http://1.1.1.1 &@site.test:{port}# @3.3.3.3/secret"),
        format!("http://a@b@site.test:{port}/secret"),
        // A non-dotted-quad IPv4 form (8.8.8.8 written as 8.8.2056).
        "http://8.8.2056/secret".to_owned(),
        // Port 0: a malformed URL, and the message says so.
        "http://site.test:0/secret".to_owned(),
    ];
    for url in &cases {
        let error = site.client.parse_url(url).expect_err(url);
        assert_eq!(error.code(), ErrorCode::InvalidUrl, "{url}: {error}");
        assert!(!error.is_transient(), "{url}");
        assert!(
            !error.to_string().contains("blocked"),
            "{url}: code and message agree: {error}"
        );
    }
    let credentials = site
        .client
        .parse_url(&cases[0])
        .expect_err("credentials")
        .to_string();
    assert!(credentials.contains("headers"), "{credentials}");
    assert!(!credentials.contains("secret"), "{credentials}");
    assert!(site.server.requests().is_empty());
    assert_eq!(site.dns.lookups("site.test"), 0);

    // Allowed on request.
    let config = web::Config {
        allow_url_credentials: true,
        ..web::Config::default()
    };
    let site = Site::start_with(Policy::default(), config).await;
    let url = site.url("/echo-headers").replace("://", "://user:pw@");
    assert_eq!(get_code(&site, &url).await, Ok(200));
}

/// Issue "fetch hazards": cloud metadata names are refused before DNS even with
/// `allow_private_network`, other `*.internal` names unless listed in `internal_hosts`.
#[tokio::test]
async fn metadata_and_internal_names_are_refused_before_dns() {
    let policy = Policy {
        allow_private_network: true,
        ..Policy::default()
    };
    let site = Site::start_with(policy, web::Config::default()).await;
    let port = site.server.addr().port();
    for host in [
        "metadata.google.internal",
        "METADATA.GOOGLE.INTERNAL.",
        "metadata.goog",
        "instance-data",
        "db.internal",
        "instance-data.ec2.internal",
    ] {
        let url = format!("http://{host}:{port}/computeMetadata/v1/");
        let error = site.client.parse_url(&url).expect_err(host);
        assert_eq!(error.code(), ErrorCode::BlockedDestination, "{host}");
        assert_eq!(site.dns.lookups(&host.to_ascii_lowercase()), 0, "{host}");
    }
    let listed = Policy {
        allow_private_network: true,
        internal_hosts: vec![
            "*.corp.internal".to_owned(),
            "metadata.google.internal".to_owned(),
        ],
        ..Policy::default()
    };
    let site = Site::start_with(listed, web::Config::default()).await;
    // Listed: it goes on to DNS (which knows no such name here).
    assert_eq!(
        get_code(&site, &site.url_on("wiki.corp.internal", "/")).await,
        Err(ErrorCode::DnsError)
    );
    assert_eq!(site.dns.lookups("wiki.corp.internal"), 1);
    // Metadata names stay refused whatever the list says.
    assert_eq!(
        get_code(&site, &site.url_on("metadata.google.internal", "/")).await,
        Err(ErrorCode::BlockedDestination)
    );
    assert_eq!(site.dns.lookups("metadata.google.internal"), 0);
}
