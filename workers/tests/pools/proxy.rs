//! Outbound proxies, for real: an HTTP proxy (the browser's egress proxy, run on its own) and a
//! minimal SOCKS5 server on loopback carry the client's requests to the fixture. The guard's
//! name checks still apply through them, a job's own proxy is checked as a destination, and
//! the rotation spreads or sticks as configured.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use trawl_workers::browse::egress::{Egress, Limits};
use trawl_workers::job::ErrorCode;
use trawl_workers::web::proxy::{self, Choice, ProxyUrl, Rotation};
use trawl_workers::web::{self, Dns, Policy};

use crate::Site;

async fn http_proxy(site: &Site) -> Egress {
    Egress::start(
        Arc::new(Policy::default()),
        Dns::Static(site.dns.clone()),
        Limits::default(),
    )
    .await
    .expect("proxy starts")
}

fn proxied(site: &Site, urls: &[String], rotation: Rotation) -> web::Client {
    site.client
        .clone()
        .with_proxies(&proxy::Config {
            urls: urls.iter().map(ProxyUrl::new).collect(),
            rotation,
            ..proxy::Config::default()
        })
        .expect("proxies configured")
}

async fn get(client: &web::Client, url: &str, choice: &Choice) -> Result<u16, web::client::Error> {
    let parsed = client.parse_url(url).expect("valid url");
    client
        .get_with(&parsed, None, choice)
        .await
        .map(|response| response.status)
}

#[tokio::test]
async fn a_configured_http_proxy_carries_fetches_and_names_are_still_checked() {
    let site = Site::start().await;
    let egress = http_proxy(&site).await;
    let client = proxied(
        &site,
        &[format!("http://{}", egress.addr())],
        Rotation::Host,
    );
    assert_eq!(
        client.proxy_labels(),
        vec![format!("http://{}", egress.addr())]
    );
    assert_eq!(
        get(&client, &site.url("/"), &Choice::Configured).await.ok(),
        Some(200)
    );
    let through = egress.stats().connections;
    assert!(through >= 1, "the fetch went through the proxy");
    // A name that resolves to a private address is refused here, before the proxy sees it.
    for host in ["private.test", "mixed.test", "metadata.test"] {
        let error = get(&client, &site.url_on(host, "/secret"), &Choice::Configured)
            .await
            .expect_err(host);
        assert_eq!(
            error.code(),
            ErrorCode::BlockedDestination,
            "{host}: {error}"
        );
    }
    // A literal loopback address, handed past parse_url: get refuses it on its own.
    let literal = url::Url::parse("http://127.0.0.1:9/secret").expect("url");
    let error = client
        .get_with(&literal, None, &Choice::Configured)
        .await
        .expect_err("a literal loopback address");
    assert_eq!(error.code(), ErrorCode::BlockedDestination);
    assert_eq!(egress.stats().connections, through);
    assert_eq!(site.server.hits("/secret"), 0);
    // A job that asks for no proxy goes direct.
    assert_eq!(
        get(&client, &site.url("/"), &Choice::Direct).await.ok(),
        Some(200)
    );
    assert_eq!(egress.stats().connections, through);
}

#[tokio::test]
async fn the_environments_proxy_resolves_names_and_no_proxy_hosts_go_direct() {
    let site = Site::start().await;
    // The proxy's own DNS answers `private.test` with a public address (split horizon): the
    // client's would refuse it, but through the environment's proxy the proxy resolves.
    let public: std::net::IpAddr = crate::PUBLIC.parse().expect("ip");
    let proxy_dns = web::StaticDns::new()
        .answer("private.test", &[public])
        .answer("site.test", &[public])
        .dial(public, site.server.addr().ip());
    let egress = Egress::start(
        Arc::new(Policy::default()),
        Dns::Static(Arc::new(proxy_dns)),
        Limits::default(),
    )
    .await
    .expect("proxy starts");
    let label = format!("http://{}", egress.addr());
    let environment = proxy::Environment::read(|name| match name {
        // No scheme: an http:// proxy, as curl reads it.
        "http_proxy" => Some(egress.addr().to_string()),
        "NO_PROXY" => Some("other.test, mixed.test".to_owned()),
        _ => None,
    });
    let trusting = proxy::Config {
        trust_env: true,
        environment: environment.clone(),
        ..proxy::Config::default()
    };
    let client = site
        .client
        .clone()
        .with_proxies(&trusting)
        .expect("the environment's proxy");
    assert_eq!(client.proxy_labels(), vec![label]);
    assert_eq!(
        get(
            &client,
            &site.url_on("private.test", "/"),
            &Choice::Configured
        )
        .await
        .ok(),
        Some(200),
        "the proxy resolved the name"
    );
    let through = egress.stats().connections;
    assert!(through >= 1, "the fetch went through the proxy");
    // The host-name checks stay: literal addresses and metadata names never reach the proxy.
    for url in [
        "http://127.0.0.1:9/secret".to_owned(),
        site.url_on("metadata.google.internal", "/secret"),
    ] {
        let parsed = url::Url::parse(&url).expect("url");
        let error = client
            .get_with(&parsed, None, &Choice::Configured)
            .await
            .expect_err(&url);
        assert_eq!(
            error.code(),
            ErrorCode::BlockedDestination,
            "{url}: {error}"
        );
    }
    // NO_PROXY hosts go direct, under the whole guard (mixed.test has a private answer).
    assert_eq!(
        get(
            &client,
            &site.url_on("other.test", "/"),
            &Choice::Configured
        )
        .await
        .ok(),
        Some(200)
    );
    let error = get(
        &client,
        &site.url_on("mixed.test", "/secret"),
        &Choice::Configured,
    )
    .await
    .expect_err("a private answer, directly");
    assert_eq!(error.code(), ErrorCode::BlockedDestination, "{error}");
    assert_eq!(
        egress.stats().connections,
        through,
        "none of these used the proxy"
    );
    assert_eq!(site.server.hits("/secret"), 0);
    // Not trusted, the same environment is ignored: the client's own lookup refuses.
    let ignoring = site
        .client
        .clone()
        .with_proxies(&proxy::Config {
            trust_env: false,
            environment,
            ..proxy::Config::default()
        })
        .expect("no proxies");
    assert!(ignoring.proxy_labels().is_empty());
    let error = get(
        &ignoring,
        &site.url_on("private.test", "/"),
        &Choice::Configured,
    )
    .await
    .expect_err("private.test is private here");
    assert_eq!(error.code(), ErrorCode::BlockedDestination, "{error}");
}

#[tokio::test]
async fn a_jobs_own_proxy_is_a_destination_the_guard_checks() {
    let site = Site::start().await;
    let egress = http_proxy(&site).await;
    let own = Choice::Via(ProxyUrl::new(format!("http://{}", egress.addr())));
    let error = get(&site.client, &site.url("/"), &own)
        .await
        .expect_err("a proxy on loopback is a blocked destination");
    assert_eq!(error.code(), ErrorCode::BlockedDestination, "{error}");
    assert_eq!(egress.stats().connections, 0);
    // Where private destinations are allowed, the job's proxy is used.
    let open = Site::start_with(
        Policy {
            allow_private_network: true,
            ..Policy::default()
        },
        web::Config::default(),
    )
    .await;
    let egress = http_proxy(&open).await;
    let own = Choice::Via(ProxyUrl::new(format!("http://{}", egress.addr())));
    assert_eq!(
        get(&open.client, &open.url("/"), &own).await.ok(),
        Some(200)
    );
    assert!(egress.stats().connections >= 1);
}

#[tokio::test]
async fn rotation_alternates_per_request_or_sticks_per_host() {
    let site = Site::start().await;
    let (first, second) = (http_proxy(&site).await, http_proxy(&site).await);
    let urls = [
        format!("http://{}", first.addr()),
        format!("http://{}", second.addr()),
    ];
    let round_robin = proxied(&site, &urls, Rotation::Request);
    for _ in 0..4 {
        assert_eq!(
            get(&round_robin, &site.url("/"), &Choice::Configured)
                .await
                .ok(),
            Some(200)
        );
    }
    assert_eq!(first.stats().connections, 2);
    assert_eq!(second.stats().connections, 2);

    let sticky = proxied(&site, &urls, Rotation::Host);
    for _ in 0..4 {
        assert_eq!(
            get(&sticky, &site.url("/"), &Choice::Configured).await.ok(),
            Some(200)
        );
    }
    let (a, b) = (
        first.stats().connections - 2,
        second.stats().connections - 2,
    );
    assert!(
        (a, b) == (4, 0) || (a, b) == (0, 4),
        "one host, one proxy: {a} and {b}"
    );
}

/// A minimal SOCKS5 server (no authentication, CONNECT only) that records the destination it
/// was asked for and connects every request to the fixture.
struct Socks {
    addr: std::net::SocketAddr,
    asked: Arc<std::sync::Mutex<Vec<String>>>,
    connections: Arc<AtomicU64>,
}

async fn socks_server(target: std::net::SocketAddr) -> Socks {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let addr = listener.local_addr().expect("addr");
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let connections = Arc::new(AtomicU64::new(0));
    let (log, count) = (asked.clone(), connections.clone());
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::Relaxed);
            let log = log.clone();
            tokio::spawn(async move {
                let mut head = [0_u8; 2];
                client.read_exact(&mut head).await?;
                let mut methods = vec![0_u8; usize::from(head[1])];
                client.read_exact(&mut methods).await?;
                client.write_all(&[5, 0]).await?;
                let mut request = [0_u8; 4];
                client.read_exact(&mut request).await?;
                let host = match request[3] {
                    1 => {
                        let mut ip = [0_u8; 4];
                        client.read_exact(&mut ip).await?;
                        std::net::Ipv4Addr::from(ip).to_string()
                    }
                    3 => {
                        let length = client.read_u8().await?;
                        let mut name = vec![0_u8; usize::from(length)];
                        client.read_exact(&mut name).await?;
                        String::from_utf8_lossy(&name).into_owned()
                    }
                    _ => return Ok::<(), std::io::Error>(()),
                };
                let port = client.read_u16().await?;
                log.lock().expect("log").push(format!("{host}:{port}"));
                let mut upstream = tokio::net::TcpStream::connect(target).await?;
                client.write_all(&[5, 0, 0, 1, 0, 0, 0, 0, 0, 0]).await?;
                tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
                Ok(())
            });
        }
    });
    Socks {
        addr,
        asked,
        connections,
    }
}

#[tokio::test]
async fn socks5h_sends_the_name_and_socks5_the_address_checked_here() {
    let site = Site::start().await;
    let socks = socks_server(site.server.addr()).await;
    let port = site.server.addr().port();
    let remote_dns = proxied(
        &site,
        &[format!("socks5h://{}", socks.addr)],
        Rotation::Host,
    );
    assert_eq!(
        get(&remote_dns, &site.url("/"), &Choice::Configured)
            .await
            .ok(),
        Some(200)
    );
    assert_eq!(
        socks.asked.lock().expect("log").last(),
        Some(&format!("site.test:{port}"))
    );
    let local_dns = proxied(&site, &[format!("socks5://{}", socks.addr)], Rotation::Host);
    assert_eq!(
        get(&local_dns, &site.url("/"), &Choice::Configured)
            .await
            .ok(),
        Some(200)
    );
    // Resolved here through the guard (and the test's dial map), then sent as an address.
    assert_eq!(
        socks.asked.lock().expect("log").last(),
        Some(&format!("127.0.0.1:{port}"))
    );
    let before = socks.connections.load(Ordering::Relaxed);
    for client in [&remote_dns, &local_dns] {
        let error = get(
            client,
            &site.url_on("private.test", "/secret"),
            &Choice::Configured,
        )
        .await
        .expect_err("a private answer");
        assert_eq!(error.code(), ErrorCode::BlockedDestination, "{error}");
    }
    assert_eq!(socks.connections.load(Ordering::Relaxed), before);
    assert_eq!(site.server.hits("/secret"), 0);
}

#[tokio::test]
async fn a_proxy_that_does_not_answer_is_a_connect_error_that_names_it() {
    let site = Site::start().await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
        listener.local_addr().expect("addr")
    };
    let client = proxied(&site, &[format!("http://user:pw@{closed}")], Rotation::Host);
    let error = get(&client, &site.url("/"), &Choice::Configured)
        .await
        .expect_err("nothing listens there");
    assert_eq!(error.code(), ErrorCode::ConnectError, "{error}");
    let message = error.to_string();
    assert!(
        message.contains(&format!("through proxy http://{closed}")),
        "{message}"
    );
    assert!(!message.contains("pw"), "{message}");
}
