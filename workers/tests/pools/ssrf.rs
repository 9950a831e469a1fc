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
    for host in [
        "127.0.0.1",
        "localhost",
        "2130706433",
        "0x7f.1",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "127.1",
    ] {
        let url = format!("http://{host}:{port}/secret");
        assert_eq!(
            get_code(&site, &url).await,
            Err(ErrorCode::BlockedDestination),
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
