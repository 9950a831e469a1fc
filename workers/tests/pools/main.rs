//! Pool tests that need sockets: the fetch pool against the fixture server's friendly and
//! hostile routes, through the real guarded client, and that client's POST (webhooks). Names resolve through a scripted resolver
//! (`site.test` → a public address, dialled to the loopback fixture), so the default policy,
//! which refuses loopback, is the one under test. Run inside a private network namespace by
//! the test script, so a classification bug can never send a packet off the machine.

mod crawl;
mod fetch;
mod post;
mod proxy;
mod snapshots;
mod ssrf;
mod warc;

use std::net::IpAddr;
use std::sync::Arc;

use testkit::FixtureServer;
use trawl_workers::web::{self, Dns, Policy, StaticDns};

/// The "public" address the fixture hides behind.
pub const PUBLIC: &str = "93.184.216.34";

/// A fixture server and a client that reaches it as `http://site.test:PORT`.
pub struct Site {
    /// The fixture server on 127.0.0.1.
    pub server: FixtureServer,
    /// The scripted resolver (lookup counts).
    pub dns: Arc<StaticDns>,
    /// The guarded client under test.
    pub client: web::Client,
}

impl Site {
    /// Starts the fixture server with the default policy and short time limits.
    pub async fn start() -> Site {
        Site::start_with(Policy::default(), web::Config::default()).await
    }

    /// Starts the fixture server with a given policy and limits.
    pub async fn start_with(policy: Policy, mut config: web::Config) -> Site {
        let server = FixtureServer::start().await.expect("fixture server starts");
        let public: IpAddr = PUBLIC.parse().expect("ip");
        let loopback: IpAddr = "127.0.0.1".parse().expect("ip");
        let dns = Arc::new(
            StaticDns::new()
                .answer("site.test", &[public])
                .answer("other.test", &[public])
                .answer("rebind.test", &[public])
                .answer("rebind.test", &[loopback])
                .answer("private.test", &[IpAddr::from([10, 0, 0, 5])])
                .answer("mixed.test", &[public, IpAddr::from([192, 168, 1, 1])])
                .answer("metadata.test", &[IpAddr::from([169, 254, 169, 254])])
                // Internal services on private addresses, dialled on the fixture.
                .answer("internal.test", &[IpAddr::from([10, 9, 8, 7])])
                .answer("internal-other.test", &[IpAddr::from([10, 9, 8, 8])])
                .dial(public, loopback)
                .dial(IpAddr::from([10, 9, 8, 7]), loopback)
                .dial(IpAddr::from([10, 9, 8, 8]), loopback),
        );
        config.timeout_secs = config.timeout_secs.min(6);
        config.read_timeout_secs = config.read_timeout_secs.min(2);
        config.connect_timeout_secs = config.connect_timeout_secs.min(2);
        let client =
            web::Client::with_dns(config, policy, Dns::Static(dns.clone())).expect("client builds");
        Site {
            server,
            dns,
            client,
        }
    }

    /// `http://site.test:PORT/path`.
    pub fn url(&self, path: &str) -> String {
        self.url_on("site.test", path)
    }

    /// `http://HOST:PORT/path`.
    pub fn url_on(&self, host: &str, path: &str) -> String {
        format!("http://{host}:{}{path}", self.server.addr().port())
    }
}
