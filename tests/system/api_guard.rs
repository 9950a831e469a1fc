//! The API in front of a browser, over raw HTTP against a real `trawl serve`: DNS rebinding
//! (a `Host` the server does not answer to is 421), cross-site changes (a foreign `Origin`
//! on a state-changing route is 403), exact token comparison and blank tokens refused at
//! start, a client dripping its headers cut off, connections per client bounded, request
//! rates and requests in flight per token limited (429 with `Retry-After`), and
//! `Idempotency-Key` replaying the first answer.

use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// A `trawl serve --no-pools` on a free loopback port, in its own data directory.
struct Served {
    port: u16,
    _child: tokio::process::Child,
    _dir: tempfile::TempDir,
}

impl Served {
    async fn start(env: &[(&str, &str)]) -> Served {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let mut command = tokio::process::Command::from(crate::trawl_command(dir.path()));
        command
            .args(["serve", "--no-pools", "--bind"])
            .arg(format!("127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().expect("trawl serve starts");
        for _ in 0..200 {
            if TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return Served {
                    port,
                    _child: child,
                    _dir: dir,
                };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("trawl serve did not listen on {port}");
    }

    /// Sends `method path` with `headers` (and a JSON body when given) on a fresh connection
    /// and returns the status and the whole answer.
    async fn send(
        &self,
        method: &str,
        path: &str,
        headers: &[&str],
        body: Option<&str>,
    ) -> (u16, String) {
        let mut request = format!("{method} {path} HTTP/1.1\r\nConnection: close\r\n");
        for header in headers {
            request.push_str(header);
            request.push_str("\r\n");
        }
        if let Some(body) = body {
            request.push_str(&format!(
                "Content-Type: application/json\r\nContent-Length: {}\r\n",
                body.len()
            ));
        }
        request.push_str("\r\n");
        request.push_str(body.unwrap_or(""));
        let mut stream = TcpStream::connect(("127.0.0.1", self.port))
            .await
            .expect("connects");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("request sent");
        let mut answer = String::new();
        tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer))
            .await
            .expect("answered in time")
            .expect("answer read");
        let status = answer
            .get(9..12)
            .and_then(|code| code.parse().ok())
            .unwrap_or_else(|| panic!("no status line in {answer:?}"));
        (status, answer)
    }

    fn host(&self) -> String {
        format!("Host: 127.0.0.1:{}", self.port)
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
    listener.local_addr().expect("address").port()
}

const JOB: &str = r#"{"kind": "fetch", "url": "http://a.test/"}"#;

#[tokio::test]
async fn a_page_rebinding_its_name_to_the_api_is_misdirected() {
    let served = Served::start(&[]).await;
    let port = served.port;
    let rebound = format!("Host: rebind.example:{port}");
    let (status, answer) = served.send("GET", "/healthz", &[&rebound], None).await;
    assert_eq!(status, 421, "{answer}");
    assert!(answer.contains("\"misdirected_request\""), "{answer}");
    let (status, answer) = served
        .send("POST", "/v1/jobs", &[&rebound], Some(JOB))
        .await;
    assert_eq!(status, 421, "{answer}");
    let (status, answer) = served
        .send(
            "GET",
            "/v1/jobs/01JZZZZZZZZZZZZZZZZZZZZZZZ",
            &[&rebound],
            None,
        )
        .await;
    assert_eq!(status, 421, "{answer}");

    // The names the server is reached by on loopback.
    for host in [
        served.host(),
        format!("Host: localhost:{port}"),
        format!("Host: LOCALHOST.:{port}"),
        format!("Host: app.localhost:{port}"),
    ] {
        let (status, answer) = served.send("GET", "/healthz", &[&host], None).await;
        assert_eq!(status, 200, "{host}: {answer}");
    }
}

#[tokio::test]
async fn changes_asked_by_pages_of_other_origins_are_refused() {
    let served = Served::start(&[]).await;
    let host = served.host();
    for origin in ["Origin: http://evil.example", "Origin: null"] {
        let (status, answer) = served
            .send("POST", "/v1/jobs", &[&host, origin], Some(JOB))
            .await;
        assert_eq!(status, 403, "{origin}: {answer}");
        assert!(answer.contains("\"forbidden_origin\""), "{answer}");
        let (status, answer) = served
            .send(
                "DELETE",
                "/v1/jobs/01JZZZZZZZZZZZZZZZZZZZZZZZ",
                &[&host, origin],
                None,
            )
            .await;
        assert_eq!(status, 403, "{origin}: {answer}");
    }
    // A page of an allowed origin, and a program (no Origin), may submit.
    for headers in [
        vec![host.as_str(), "Origin: http://localhost:3000"],
        vec![host.as_str()],
    ] {
        let (status, answer) = served.send("POST", "/v1/jobs", &headers, Some(JOB)).await;
        assert_eq!(status, 202, "{headers:?}: {answer}");
    }
    // Reading is left to the same-origin policy (the Host check stops rebound pages).
    let (status, answer) = served
        .send(
            "GET",
            "/v1/jobs/01JZZZZZZZZZZZZZZZZZZZZZZZ",
            &[&host, "Origin: http://evil.example"],
            None,
        )
        .await;
    assert_eq!(status, 404, "{answer}");
}

#[tokio::test]
async fn allowed_hosts_replace_the_loopback_names() {
    let served = Served::start(&[("TRAWL_API__ALLOWED_HOSTS", r#"["trawl.internal"]"#)]).await;
    let named = format!("Host: trawl.internal:{}", served.port);
    let (status, answer) = served.send("GET", "/healthz", &[&named], None).await;
    assert_eq!(status, 200, "{answer}");
    let (status, answer) = served
        .send("GET", "/healthz", &[&served.host()], None)
        .await;
    assert_eq!(status, 421, "{answer}");
    let (status, answer) = served
        .send(
            "POST",
            "/v1/jobs",
            &[&named, "Origin: https://trawl.internal"],
            Some(JOB),
        )
        .await;
    assert_eq!(status, 202, "{answer}");
}

#[tokio::test]
async fn a_bearer_token_is_compared_exactly() {
    let token = "an-exact-token-0123456789";
    let tokens = format!(r#"["{token}"]"#);
    let served = Served::start(&[("TRAWL_API__TOKENS", tokens.as_str())]).await;
    let host = served.host();
    let path = "/v1/jobs/01JZZZZZZZZZZZZZZZZZZZZZZZ";
    let exact = format!("Authorization: Bearer {token}");
    let (status, answer) = served.send("GET", path, &[&host, &exact], None).await;
    assert_eq!(status, 404, "{answer}");
    for spaced in [
        format!("Authorization: Bearer  {token}"),
        format!("Authorization: Bearer \t{token}"),
    ] {
        let (status, answer) = served.send("GET", path, &[&host, &spaced], None).await;
        assert_eq!(status, 401, "{spaced:?}: {answer}");
    }
}

#[tokio::test]
async fn blank_tokens_are_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    for tokens in [
        r#"["                        "]"#,
        r#"["a token with spaces inside"]"#,
    ] {
        let serve = tokio::process::Command::from(crate::trawl_command(dir.path()))
            .args(["serve", "--no-pools", "--bind", "127.0.0.1:0"])
            .env("TRAWL_API__TOKENS", tokens)
            .kill_on_drop(true)
            .output();
        let output = tokio::time::timeout(Duration::from_secs(20), serve)
            .await
            .unwrap_or_else(|_| panic!("trawl serve started with api.tokens = {tokens}"))
            .expect("trawl runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("api.tokens and api.admin_token must not be blank"),
            "{stderr}"
        );
    }
}

#[tokio::test]
async fn a_client_dripping_its_headers_is_cut_off() {
    let served = Served::start(&[("TRAWL_API__HEADER_READ_TIMEOUT_SECS", "2")]).await;
    let mut stream = TcpStream::connect(("127.0.0.1", served.port))
        .await
        .expect("connects");
    let started = Instant::now();
    stream
        .write_all(format!("GET /healthz HTTP/1.1\r\n{}\r\n", served.host()).as_bytes())
        .await
        .expect("request line sent");
    let mut buffer = [0_u8; 256];
    let cut_off = loop {
        if started.elapsed() > Duration::from_secs(12) {
            break None;
        }
        tokio::select! {
            read = stream.read(&mut buffer) => break Some(read),
            () = tokio::time::sleep(Duration::from_millis(500)) => {
                // One more header line, as a slow client would; a closed socket ends it.
                if stream.write_all(b"X-Drip: 1\r\n").await.is_err() {
                    break Some(Ok(0));
                }
            }
        }
    };
    let elapsed = started.elapsed();
    assert!(
        cut_off.is_some(),
        "a client dripping headers was still connected after {elapsed:?}"
    );
    assert!(
        elapsed < Duration::from_secs(5),
        "cut off after {elapsed:?}, the limit is 2 s"
    );
}

#[tokio::test]
async fn one_client_holds_at_most_its_share_of_connections() {
    let served = Served::start(&[("TRAWL_API__MAX_CONNECTIONS_PER_CLIENT", "3")]).await;
    // Three connections the server has counted: each answers a request and stays open. (The
    // start-up probe's connection may still be counted for a moment; a connection closed for
    // it is replaced until all three answer.)
    async fn answers(stream: &mut TcpStream, host: &str) -> bool {
        let request = format!("GET /healthz HTTP/1.1\r\n{host}\r\n\r\n");
        if stream.write_all(request.as_bytes()).await.is_err() {
            return false;
        }
        let mut buffer = [0_u8; 1024];
        matches!(
            tokio::time::timeout(Duration::from_secs(5), stream.read(&mut buffer)).await,
            Ok(Ok(n)) if n > 0 && buffer[..n].starts_with(b"HTTP/1.1 200")
        )
    }
    let mut held: Vec<TcpStream> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    while held.len() < 3 {
        assert!(
            Instant::now() < deadline,
            "three connections never all answered"
        );
        let mut stream = TcpStream::connect(("127.0.0.1", served.port))
            .await
            .expect("connects");
        if answers(&mut stream, &served.host()).await {
            held.push(stream);
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut extra = TcpStream::connect(("127.0.0.1", served.port))
        .await
        .expect("the kernel accepts");
    let mut buffer = [0_u8; 16];
    let read = tokio::time::timeout(Duration::from_secs(3), extra.read(&mut buffer))
        .await
        .expect("the connection one too many is closed at once");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    // A connection given back makes room for another.
    drop(held.pop());
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (status, answer) = served
        .send("GET", "/healthz", &[&served.host()], None)
        .await;
    assert_eq!(status, 200, "{answer}");
}

#[tokio::test]
async fn a_token_sending_too_fast_is_limited_and_another_token_is_not() {
    use futures_util::StreamExt as _;
    let (fast, other) = ("a-fast-token-0123456789", "another-token-0123456789");
    let tokens = format!(r#"["{fast}", "{other}"]"#);
    let served = Served::start(&[("TRAWL_API__TOKENS", tokens.as_str())]).await;
    let client = reqwest::Client::new();
    let url = format!(
        "http://127.0.0.1:{}/v1/jobs/01JZZZZZZZZZZZZZZZZZZZZZZZ",
        served.port
    );
    let started = Instant::now();
    let answers: Vec<(u16, Option<String>)> = futures_util::stream::iter(0..600)
        .map(|_| {
            let request = client.get(&url).bearer_auth(fast).send();
            async move {
                let response = request.await.expect("answered");
                let retry_after = response
                    .headers()
                    .get("retry-after")
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned);
                (response.status().as_u16(), retry_after)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let elapsed = started.elapsed();
    let limited: Vec<_> = answers
        .iter()
        .filter(|(status, _)| *status == 429)
        .collect();
    let served_ok = answers.iter().filter(|(status, _)| *status == 404).count();
    // 200 at once, then 100 a second: at most 200 + 100 × elapsed get through.
    let allowed = 200.0 + 100.0 * elapsed.as_secs_f64() + 16.0;
    assert!(
        (served_ok as f64) <= allowed && served_ok >= 200,
        "{served_ok} of 600 served in {elapsed:?}"
    );
    assert_eq!(limited.len() + served_ok, 600);
    assert!(
        limited.iter().all(|(_, retry_after)| retry_after
            .as_deref()
            .is_some_and(|s| s.parse::<u64>().is_ok_and(|s| s >= 1))),
        "a 429 without Retry-After"
    );
    let response = client
        .get(&url)
        .bearer_auth(other)
        .send()
        .await
        .expect("answered");
    assert_eq!(
        response.status().as_u16(),
        404,
        "another token has its own budget"
    );
}

#[tokio::test]
async fn requests_in_flight_per_client_are_bounded() {
    let served = Served::start(&[("TRAWL_API__MAX_REQUESTS_IN_FLIGHT", "1")]).await;
    let client = reqwest::Client::new();
    let base = format!("http://127.0.0.1:{}", served.port);
    // Without pools the synchronous fetch waits its whole timeout: one request in flight.
    let waiting = tokio::spawn(
        client
            .post(format!("{base}/v1/fetch"))
            .header("content-type", "application/json")
            .body(r#"{"url": "http://a.test/", "timeout_secs": 3}"#)
            .send(),
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let response = client
        .get(format!("{base}/v1/jobs/01JZZZZZZZZZZZZZZZZZZZZZZZ"))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 429);
    assert!(response.headers().contains_key("retry-after"));
    let first = waiting.await.expect("joins").expect("answered");
    assert_eq!(first.status().as_u16(), 202);
    let response = client
        .get(format!("{base}/v1/jobs/01JZZZZZZZZZZZZZZZZZZZZZZZ"))
        .send()
        .await
        .expect("answered");
    assert_eq!(response.status().as_u16(), 404, "the slot was given back");
}

#[tokio::test]
async fn an_idempotency_key_replays_the_first_answer_and_refuses_another_body() {
    let served = Served::start(&[]).await;
    let host = served.host();
    let send = |key: &'static str, body: &'static str, path: &'static str| {
        let host = host.clone();
        let served = &served;
        async move {
            let key = format!("Idempotency-Key: {key}");
            served.send("POST", path, &[&host, &key], Some(body)).await
        }
    };
    let body_of = |answer: &str| {
        answer
            .split("\r\n\r\n")
            .nth(1)
            .unwrap_or_default()
            .to_owned()
    };
    let (status, first) = send("key-1", JOB, "/v1/jobs").await;
    assert_eq!(status, 202, "{first}");
    let (status, again) = send("key-1", JOB, "/v1/jobs").await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(
        body_of(&again),
        body_of(&first),
        "the first answer, replayed"
    );
    assert!(
        again
            .to_ascii_lowercase()
            .contains("idempotent-replayed: true"),
        "{again}"
    );
    let (status, conflict) = send(
        "key-1",
        r#"{"kind": "fetch", "url": "http://b.test/"}"#,
        "/v1/jobs",
    )
    .await;
    assert_eq!(status, 409, "{conflict}");
    assert!(conflict.contains("\"idempotency_conflict\""), "{conflict}");
    let (status, other) = send("key-2", JOB, "/v1/jobs").await;
    assert_eq!(status, 202, "{other}");
    assert_ne!(
        body_of(&other),
        body_of(&first),
        "another key, another batch"
    );

    let crawl = r#"{"seeds": ["http://a.test/"]}"#;
    let (status, started) = send("crawl-1", crawl, "/v1/crawls").await;
    assert_eq!(status, 202, "{started}");
    let (status, replayed) = send("crawl-1", crawl, "/v1/crawls").await;
    assert_eq!(status, 202, "{replayed}");
    assert_eq!(body_of(&replayed), body_of(&started), "one crawl");
}
