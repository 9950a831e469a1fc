//! The egress proxy against loopback origins and a static resolver: what is refused, what
//! is forwarded and how, and the bounds.

use std::sync::atomic::AtomicUsize;

use tokio::io::AsyncReadExt;

use super::http1::{forward_response_head, parse_authority};
use super::*;
use crate::web::dns::StaticDns;

/// Dial attempts to non-loopback addresses (refused by `dial`); must stay 0.
pub(super) static NON_LOOPBACK_DIALS: AtomicUsize = AtomicUsize::new(0);

const PUBLIC: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(93, 184, 216, 34));
const PUBLIC2: IpAddr = IpAddr::V4(std::net::Ipv4Addr::new(93, 184, 216, 35));
const LOOPBACK: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);
const WAIT: Duration = Duration::from_secs(10);

/// A loopback origin: counts accepts, records request heads, answers with the request line
/// as body (keep-alive, to see the proxy force close), then closes.
struct Origin {
    port: u16,
    accepts: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Origin {
    async fn start() -> Origin {
        let listener = TcpListener::bind((LOOPBACK, 0)).await.expect("bind origin");
        let port = listener.local_addr().expect("origin addr").port();
        let accepts = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (a, h) = (accepts.clone(), heads.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                a.fetch_add(1, Ordering::SeqCst);
                let h = h.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 1024];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    let head = String::from_utf8_lossy(&buf).into_owned();
                    let line = head.lines().next().unwrap_or_default().to_owned();
                    h.lock().expect("heads").push(head);
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive\r\n\
                         Keep-Alive: timeout=5\r\nContent-Length: {}\r\n\r\n{line}",
                        line.len()
                    );
                    let _ = stream.write_all(answer.as_bytes()).await;
                });
            }
        });
        Origin {
            port,
            accepts,
            heads,
            task,
        }
    }

    fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }

    fn last_head(&self) -> String {
        self.heads
            .lock()
            .expect("heads")
            .last()
            .cloned()
            .unwrap_or_default()
    }
}

fn static_dns() -> Arc<StaticDns> {
    Arc::new(
        StaticDns::new()
            .answer("public.test", &[PUBLIC])
            .answer("closed.test", &[PUBLIC2])
            .answer("mixed.test", &[PUBLIC, "10.0.0.5".parse().expect("ip")])
            .answer("private.test", &["10.0.0.5".parse().expect("ip")])
            .answer("sub.evil.test", &[PUBLIC])
            .answer("empty.test", &[])
            .dial(PUBLIC, LOOPBACK)
            .dial(PUBLIC2, LOOPBACK),
    )
}

async fn proxy_with(policy: Policy, map: &Arc<StaticDns>, limits: Limits) -> Egress {
    Egress::start(Arc::new(policy), Dns::Static(map.clone()), limits)
        .await
        .expect("start egress")
}

async fn proxy(map: &Arc<StaticDns>) -> Egress {
    proxy_with(Policy::default(), map, Limits::default()).await
}

/// Sends raw bytes and reads everything until the proxy closes.
async fn exchange(proxy: &Egress, raw: &[u8]) -> String {
    tokio::time::timeout(WAIT, async {
        let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
        let _ = stream.write_all(raw).await;
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    })
    .await
    .expect("exchange timed out")
}

/// Sends a CONNECT and returns the stream and the answer head.
async fn connect(proxy: &Egress, authority: &str) -> (TcpStream, String) {
    tokio::time::timeout(WAIT, async {
        let mut stream = TcpStream::connect(proxy.addr()).await.expect("connect");
        let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("write CONNECT");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            match stream.read(&mut byte).await {
                Ok(0) | Err(_) => break,
                Ok(_) => head.push(byte[0]),
            }
        }
        (stream, String::from_utf8_lossy(&head).into_owned())
    })
    .await
    .expect("CONNECT timed out")
}

fn header<'a>(answer: &'a str, name: &str) -> Option<&'a str> {
    let head = answer.split("\r\n\r\n").next()?;
    head.lines().skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.eq_ignore_ascii_case(name).then(|| v.trim())
    })
}

fn assert_no_leak() {
    assert_eq!(NON_LOOPBACK_DIALS.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn plain_http_reaches_the_origin_in_origin_form_with_connection_close() {
    let origin = Origin::start().await;
    let map = static_dns();
    let egress = proxy(&map).await;
    assert_eq!(
        egress.proxy_server_arg(),
        format!("http://127.0.0.1:{}", egress.addr().port())
    );
    let port = origin.port;
    let request = format!(
        "GET http://public.test:{port}/a/b?q=1#frag HTTP/1.1\r\nHost: public.test:{port}\r\n\
         Proxy-Connection: keep-alive\r\nProxy-Authorization: Basic eDp5\r\n\
         Connection: keep-alive\r\nKeep-Alive: 300\r\nAccept: */*\r\n\r\n"
    );
    let answer = exchange(&egress, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert_eq!(header(&answer, "connection"), Some("close"), "{answer}");
    assert_eq!(header(&answer, "keep-alive"), None, "{answer}");
    assert!(answer.ends_with("GET /a/b?q=1 HTTP/1.1"), "{answer}");
    let head = origin.last_head();
    assert!(head.starts_with("GET /a/b?q=1 HTTP/1.1\r\n"), "{head}");
    assert!(
        head.contains(&format!("Host: public.test:{port}\r\n")),
        "{head}"
    );
    assert!(head.contains("Connection: close\r\n"), "{head}");
    assert!(head.contains("Accept: */*\r\n"), "{head}");
    let lower = head.to_ascii_lowercase();
    assert!(!lower.contains("proxy-"), "{head}");
    assert!(!lower.contains("keep-alive"), "{head}");
    assert_eq!(origin.accepts(), 1);
    assert_eq!(map.lookups("public.test"), 1);
    let stats = egress.stats();
    assert_eq!((stats.connections, stats.blocked, stats.failed), (1, 0, 0));
    assert_eq!(egress.last_seq(), 0);
    assert_no_leak();
}

#[tokio::test]
async fn request_body_start_is_forwarded() {
    let origin = Origin::start().await;
    let map = static_dns();
    let egress = proxy(&map).await;
    let port = origin.port;
    let request = format!(
        "POST http://public.test:{port}/form HTTP/1.1\r\nHost: public.test:{port}\r\n\
         Content-Length: 5\r\n\r\nhello"
    );
    let answer = exchange(&egress, request.as_bytes()).await;
    assert!(answer.ends_with("POST /form HTTP/1.1"), "{answer}");
    assert!(origin.last_head().contains("Content-Length: 5\r\n"));
    assert_no_leak();
}

#[tokio::test]
async fn connect_tunnels_bytes_both_ways() {
    let origin = Origin::start().await;
    let map = static_dns();
    let egress = proxy(&map).await;
    let (mut stream, head) = connect(&egress, &format!("public.test:{}", origin.port)).await;
    assert_eq!(head, "HTTP/1.1 200 Connection Established\r\n\r\n");
    let answer = tokio::time::timeout(WAIT, async {
        stream
            .write_all(b"GET /inside HTTP/1.1\r\nHost: public.test\r\n\r\n")
            .await
            .expect("write");
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    })
    .await
    .expect("tunnel timed out");
    // The tunnel is opaque: the origin's own Connection header passes unchanged.
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert_eq!(header(&answer, "connection"), Some("keep-alive"));
    assert!(answer.ends_with("GET /inside HTTP/1.1"), "{answer}");
    assert_eq!(origin.accepts(), 1);
    assert_no_leak();
}

#[tokio::test]
async fn blocked_literals_get_403_and_are_logged_without_connecting() {
    let origin = Origin::start().await;
    let map = static_dns();
    let egress = proxy(&map).await;
    let port = origin.port;
    let cases = [
        ("127.0.0.1", "127.0.0.1", BlockReason::Loopback),
        ("10.0.0.5", "10.0.0.5", BlockReason::Private),
        ("0x7f.1", "127.0.0.1", BlockReason::Loopback),
        ("[::1]", "[::1]", BlockReason::Loopback),
        ("169.254.169.254", "169.254.169.254", BlockReason::Metadata),
        (
            "[::ffff:7f00:1]",
            "[::ffff:7f00:1]",
            BlockReason::Ipv4Mapped,
        ),
        ("localhost", "localhost", BlockReason::Loopback),
        ("2130706433", "127.0.0.1", BlockReason::Loopback),
    ];
    let mut seq = egress.last_seq();
    for (input, host, reason) in cases {
        // CONNECT form.
        let (_, head) = connect(&egress, &format!("{input}:{port}")).await;
        assert!(
            head.starts_with("HTTP/1.1 403 Forbidden\r\n"),
            "{input}: {head}"
        );
        assert_eq!(header(&head, "x-trawl-blocked"), Some(reason.as_str()));
        let blocked = egress.blocked_after(seq);
        assert_eq!(blocked.len(), 1, "{input}");
        assert_eq!(blocked[0].host, host);
        assert_eq!(blocked[0].port, port);
        assert_eq!(blocked[0].reason, reason);
        assert_eq!(blocked[0].target, format!("{host}:{port}"));
        seq = egress.last_seq();
        // Absolute form.
        let request = format!("GET http://{input}:{port}/p?secret=1 HTTP/1.1\r\n\r\n");
        let answer = exchange(&egress, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{answer}");
        assert_eq!(header(&answer, "x-trawl-blocked"), Some(reason.as_str()));
        assert_eq!(header(&answer, "connection"), Some("close"));
        assert_eq!(header(&answer, "content-type"), Some("text/plain"));
        assert!(
            answer.ends_with(&format!("trawl: blocked destination {host} ({reason})")),
            "{answer}"
        );
        let blocked = egress.blocked_after(seq);
        assert_eq!(blocked.len(), 1, "{input}");
        assert_eq!(blocked[0].target, format!("http://{host}:{port}/p"));
        seq = egress.last_seq();
    }
    assert_eq!(egress.blocked_after(0).len(), 2 * cases.len());
    assert_eq!(egress.stats().blocked, 2 * cases.len() as u64);
    assert_eq!(origin.accepts(), 0);
    assert_no_leak();
}

#[tokio::test]
async fn names_with_any_blocked_answer_are_refused() {
    let origin = Origin::start().await;
    let map = static_dns();
    let egress = proxy(&map).await;
    for (name, reason) in [
        ("mixed.test", BlockReason::Private),
        ("private.test", BlockReason::Private),
    ] {
        let (_, head) = connect(&egress, &format!("{name}:{}", origin.port)).await;
        assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
        assert_eq!(header(&head, "x-trawl-blocked"), Some(reason.as_str()));
        let last = egress.blocked_after(0).pop().expect("logged");
        assert_eq!(last.host, name);
        assert_eq!(map.lookups(name), 1);
    }
    assert_eq!(origin.accepts(), 0);
    assert_no_leak();
}

#[tokio::test]
async fn host_lists_refuse_before_dns() {
    let origin = Origin::start().await;
    let map = static_dns();
    let policy = Policy {
        block_hosts: vec!["*.evil.test".into()],
        ..Policy::default()
    };
    let egress = proxy_with(policy, &map, Limits::default()).await;
    let (_, head) = connect(&egress, &format!("sub.evil.test:{}", origin.port)).await;
    assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
    assert_eq!(header(&head, "x-trawl-blocked"), Some("blocked_host"));
    let request = format!(
        "GET http://SUB.Evil.Test.:{}/ HTTP/1.1\r\n\r\n",
        origin.port
    );
    let answer = exchange(&egress, request.as_bytes()).await;
    assert_eq!(header(&answer, "x-trawl-blocked"), Some("blocked_host"));
    assert_eq!(map.lookups("sub.evil.test"), 0);

    let policy = Policy {
        allow_hosts: vec!["other.test".into()],
        ..Policy::default()
    };
    let egress = proxy_with(policy, &map, Limits::default()).await;
    let (_, head) = connect(&egress, &format!("public.test:{}", origin.port)).await;
    assert_eq!(header(&head, "x-trawl-blocked"), Some("not_allowlisted"));
    assert_eq!(map.lookups("public.test"), 0);
    assert_eq!(origin.accepts(), 0);
    assert_no_leak();
}

#[tokio::test]
async fn port_zero_is_blocked() {
    let map = static_dns();
    let egress = proxy(&map).await;
    let (_, head) = connect(&egress, "public.test:0").await;
    assert_eq!(header(&head, "x-trawl-blocked"), Some("port"));
    assert_eq!(map.lookups("public.test"), 0);
}

#[tokio::test]
async fn dns_and_connect_failures_are_502() {
    let map = static_dns();
    let egress = proxy(&map).await;
    for name in ["empty.test", "unknown.test"] {
        let (_, head) = connect(&egress, &format!("{name}:443")).await;
        assert!(head.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{head}");
        assert_eq!(header(&head, "x-trawl-error"), Some("dns_error"));
    }
    let closed_port = {
        let listener = TcpListener::bind((LOOPBACK, 0)).await.expect("bind");
        listener.local_addr().expect("addr").port()
    };
    let (_, head) = connect(&egress, &format!("closed.test:{closed_port}")).await;
    assert!(head.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{head}");
    assert_eq!(header(&head, "x-trawl-error"), Some("connect_error"));
    let stats = egress.stats();
    assert_eq!((stats.blocked, stats.failed), (0, 3));
    assert_eq!(egress.last_seq(), 0);
    assert_no_leak();
}

#[tokio::test]
async fn malformed_requests_get_400() {
    let map = static_dns();
    let egress = proxy(&map).await;
    for request in [
        "GET ftp://public.test/file HTTP/1.1\r\n\r\n",
        "GET https://public.test/ HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: public.test\r\n\r\n",
        "GET * HTTP/1.1\r\n\r\n",
        "CONNECT public.test HTTP/1.1\r\n\r\n",
        "CONNECT ::1:443 HTTP/1.1\r\n\r\n",
        "CONNECT user@public.test:443 HTTP/1.1\r\n\r\n",
        "CONNECT public.test:443/x HTTP/1.1\r\n\r\n",
        "CONNECT public.test:99999 HTTP/1.1\r\n\r\n",
        "NOT A REQUEST\r\n\r\n",
    ] {
        let answer = exchange(&egress, request.as_bytes()).await;
        assert!(
            answer.starts_with("HTTP/1.1 400 Bad Request\r\n"),
            "{request:?}: {answer}"
        );
    }
    assert_eq!(map.lookups("public.test"), 0);
    assert_eq!(egress.stats().failed, 10);
    assert_no_leak();
}

#[tokio::test]
async fn oversized_heads_get_431() {
    let map = static_dns();
    let limits = Limits {
        head_bytes: 1024,
        ..Limits::default()
    };
    let egress = proxy_with(Policy::default(), &map, limits).await;
    let mut request = b"GET http://public.test/ HTTP/1.1\r\nX-Big: ".to_vec();
    request.extend(std::iter::repeat_n(b'a', 4096));
    let answer = exchange(&egress, &request).await;
    assert!(
        answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{answer}"
    );
    // Complete but over the cap.
    request.extend_from_slice(b"\r\n\r\n");
    let answer = exchange(&egress, &request).await;
    assert!(answer.starts_with("HTTP/1.1 431 "), "{answer}");
    assert_eq!(map.lookups("public.test"), 0);
}

#[tokio::test]
async fn private_network_policy_allows_loopback_but_not_metadata() {
    let origin = Origin::start().await;
    let map = static_dns();
    let policy = Policy {
        allow_private_network: true,
        ..Policy::default()
    };
    let egress = proxy_with(policy, &map, Limits::default()).await;
    let port = origin.port;
    let request =
        format!("GET http://127.0.0.1:{port}/local HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    let answer = exchange(&egress, request.as_bytes()).await;
    assert!(answer.ends_with("GET /local HTTP/1.1"), "{answer}");
    let (_, head) = connect(&egress, &format!("127.0.0.1:{port}")).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let (_, head) = connect(&egress, "169.254.169.254:80").await;
    assert_eq!(header(&head, "x-trawl-blocked"), Some("metadata"));
    assert_eq!(origin.accepts(), 2);
    assert_no_leak();
}

#[tokio::test]
async fn idle_tunnels_are_closed() {
    let origin = Origin::start().await;
    let map = static_dns();
    let limits = Limits {
        idle_timeout: Duration::from_millis(200),
        ..Limits::default()
    };
    let egress = proxy_with(Policy::default(), &map, limits).await;
    let (mut stream, head) = connect(&egress, &format!("public.test:{}", origin.port)).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(WAIT, stream.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
}

#[tokio::test]
async fn dropping_the_proxy_ends_listener_and_tunnels() {
    let origin = Origin::start().await;
    let map = static_dns();
    let egress = proxy(&map).await;
    let addr = egress.addr();
    let (mut stream, head) = connect(&egress, &format!("public.test:{}", origin.port)).await;
    assert!(head.starts_with("HTTP/1.1 200 "), "{head}");
    drop(egress);
    let mut buf = [0u8; 16];
    let read = tokio::time::timeout(WAIT, stream.read(&mut buf)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?}");
    assert!(TcpStream::connect(addr).await.is_err());
}

#[tokio::test]
async fn block_log_keeps_the_last_thousand() {
    let map = static_dns();
    let egress = proxy(&map).await;
    for i in 0..1_005u16 {
        egress
            .shared
            .record_block("h".into(), i, BlockReason::Private, "h".into());
    }
    assert_eq!(egress.last_seq(), 1_005);
    let all = egress.blocked_after(0);
    assert_eq!(all.len(), 1_000);
    assert_eq!(all[0].seq, 6);
    assert_eq!(egress.blocked_after(1_003).len(), 2);
}

async fn rewrite(raw: &[u8]) -> (io::Result<()>, String) {
    let mut reader = raw;
    let mut out: Vec<u8> = Vec::new();
    let result = forward_response_head(&mut reader, &mut out).await;
    // What follows the head is copied by the caller.
    out.extend_from_slice(reader);
    (result, String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn response_heads_are_rewritten_to_close() {
    let (result, out) = rewrite(
        b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n\
          HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\n\
          Proxy-Connection: keep-alive\r\nContent-Length: 2\r\n\r\nok",
    )
    .await;
    assert!(result.is_ok());
    assert_eq!(
        out,
        "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n\
         HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
    );
    // An origin that closes without a byte: nothing is sent either.
    let (result, out) = rewrite(b"").await;
    assert!(result.is_ok());
    assert_eq!(out, "");
    // Garbage or a head cut short: a 502 when nothing was forwarded yet.
    for raw in [&b"SSH-2.0-OpenSSH\r\n\r\n"[..], b"HTTP/1.1 200 OK\r\nA: b"] {
        let (result, out) = rewrite(raw).await;
        assert!(result.is_err());
        if raw.starts_with(b"SSH") {
            assert!(out.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{out}");
            assert_eq!(header(&out, "x-trawl-error"), Some("protocol_error"));
        }
    }
}

#[test]
fn authorities_parse_like_urls() {
    let parsed = |a: &str| parse_authority(a).map(|(h, p)| (h.to_string(), p));
    assert_eq!(parsed("Example.COM:443"), Some(("example.com".into(), 443)));
    assert_eq!(parsed("0x7f.1:80"), Some(("127.0.0.1".into(), 80)));
    assert_eq!(parsed("[::1]:443"), Some(("[::1]".into(), 443)));
    for bad in [
        "", ":443", "[::1]", "::1:443", "a:b:443", "a:", "a:+1", "a b:1", "%31:1",
    ] {
        assert_eq!(parsed(bad), None, "{bad:?}");
    }
}
