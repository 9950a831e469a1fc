//! A plain-HTTP forward proxy on 127.0.0.1 that sends every request to one address (a fixture
//! server), whatever host the request names: enough for a fetch to go "through a proxy" (a
//! job's own, or the environment's), and to show that the proxy, not trawl, resolved the name.
//! It records each request target it was asked for.
//!
//! Not here: CONNECT (https through the proxy), authentication (credentials in its URL are
//! accepted and ignored), keep-alive beyond one forwarded exchange per connection.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// The running proxy; stops when dropped.
pub struct ForwardProxy {
    address: SocketAddr,
    asked: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ForwardProxy {
    /// Binds 127.0.0.1:0 and forwards every request to `target`.
    pub async fn start(target: SocketAddr) -> ForwardProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let address = listener.local_addr().expect("address");
        let asked = Arc::new(Mutex::new(Vec::new()));
        let log = asked.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match client.read(&mut byte).await {
                            Ok(1) => head.push(byte[0]),
                            _ => return,
                        }
                    }
                    // `GET http://host:port/path HTTP/1.1` → `GET /path HTTP/1.1`.
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let Some((line, rest)) = head.split_once("\r\n") else {
                        return;
                    };
                    let mut parts = line.splitn(3, ' ');
                    let (Some(method), Some(target_url), Some(version)) =
                        (parts.next(), parts.next(), parts.next())
                    else {
                        return;
                    };
                    log.lock().expect("log").push(target_url.to_owned());
                    let path = target_url
                        .split_once("://")
                        .and_then(|(_, after)| after.find('/').map(|at| &after[at..]))
                        .unwrap_or(target_url);
                    let Ok(mut upstream) = tokio::net::TcpStream::connect(target).await else {
                        return;
                    };
                    let request = format!("{method} {path} {version}\r\n{rest}");
                    if upstream.write_all(request.as_bytes()).await.is_err() {
                        return;
                    }
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
                });
            }
        });
        ForwardProxy {
            address,
            asked,
            task,
        }
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.address
    }

    /// The proxy's URL with a user name (each tenant's own credentials, say).
    pub fn url(&self, user: &str) -> String {
        format!("http://{user}:secret@{}", self.address)
    }

    /// The request targets asked for so far (`http://host:port/path`), in order.
    pub fn asked(&self) -> Vec<String> {
        self.asked.lock().expect("log").clone()
    }
}

impl Drop for ForwardProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
