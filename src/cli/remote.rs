//! A client for a running `trawl serve` (`--server URL`), used by `trawl enqueue` and
//! `trawl status`. It goes through trawl's own guarded HTTP client with private networks
//! allowed (the server is usually on loopback or a private network; cloud metadata addresses
//! stay refused).

use anyhow::{Context as _, bail};
use bytes::Bytes;
use trawl_workers::web;

/// How to reach the server.
#[derive(Debug, clap::Args)]
pub struct ServerArgs {
    /// Talk to a running `trawl serve` at this URL instead of the local store and queue.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// Bearer token for the server.
    #[arg(
        long,
        env = "TRAWL_TOKEN",
        value_name = "TOKEN",
        hide_env_values = true
    )]
    pub token: Option<String>,
}

/// A connection to the API.
pub(super) struct Remote {
    client: web::Client,
    base: url::Url,
    token: Option<String>,
}

impl Remote {
    /// Connects (lazily) to `server`.
    pub(super) fn new(server: &str, token: Option<String>) -> anyhow::Result<Remote> {
        let base =
            url::Url::parse(server).with_context(|| format!("--server {server:?} is not a URL"))?;
        // The server the user named is trusted, on a private network or an `*.internal` name.
        let policy = web::Policy {
            allow_private_network: true,
            internal_hosts: vec!["*.internal".to_owned()],
            ..web::Policy::default()
        };
        let client = web::Client::new(web::Config::default(), policy)?;
        Ok(Remote {
            client,
            base,
            token,
        })
    }

    /// Sends a request and returns the JSON answer; an error status becomes an error naming
    /// the server's code and message.
    pub(super) async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> anyhow::Result<serde_json::Value> {
        let url = self
            .base
            .join(path)
            .with_context(|| format!("building the URL for {path}"))?;
        let authorization = self.token.as_ref().map(|token| format!("Bearer {token}"));
        let mut headers: Vec<(&str, &str)> = vec![("accept", "application/json")];
        if let Some(value) = &authorization {
            headers.push(("authorization", value));
        }
        if body.is_some() {
            headers.push(("content-type", "application/json"));
        }
        let body = body.map(|json| Bytes::from(json.to_string()));
        let response = self
            .client
            .call(method, &url, &headers, body, 64 << 20)
            .await
            .with_context(|| format!("{method} {}", web::client::origin_of(&url)))?;
        let json: serde_json::Value =
            serde_json::from_slice(&response.body).unwrap_or(serde_json::Value::Null);
        if response.status >= 400 {
            let code = json["error"]["code"].as_str().unwrap_or("http_status");
            let message = json["error"]["message"].as_str().unwrap_or("no message");
            bail!("server answered {}: {code}: {message}", response.status);
        }
        Ok(json)
    }
}
