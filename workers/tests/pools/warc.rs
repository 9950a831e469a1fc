//! WARC files written by `archive::warc`, checked by the reference reader: `warcio check`
//! (record framing and every block and payload digest), `warcio index` (record types, URIs,
//! offsets) and `warcio extract --payload` (the stored body comes back byte for byte).
//!
//! warcio is found at `$WARCIO_BIN`, else `~/.cache/trawl-venv/bin/warcio`; without it these
//! tests fail and say how to install it (the CI script installs the same pinned version).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use trawl_workers::archive::warc::{
    Exchange, REVISIT_PROFILE, Revisit, RollingWriter, Written, payload_digest,
};

/// The warcio release the tests are written against (CI installs the same).
const WARCIO_VERSION: &str = "1.8.1";

#[allow(clippy::disallowed_methods)] // test harness: locating an external tool
fn warcio() -> PathBuf {
    let path = match std::env::var_os("WARCIO_BIN") {
        Some(path) => PathBuf::from(path),
        None => {
            let home = std::env::var_os("HOME").expect("HOME is set");
            Path::new(&home).join(".cache/trawl-venv/bin/warcio")
        }
    };
    assert!(
        path.is_file(),
        "warcio not found at {} (set WARCIO_BIN, or install it: python3 -m venv \
         ~/.cache/trawl-venv && ~/.cache/trawl-venv/bin/pip install warcio=={WARCIO_VERSION})",
        path.display()
    );
    path
}

fn run(args: &[&str]) -> Output {
    let output = Command::new(warcio())
        .args(args)
        .output()
        .expect("warcio runs");
    assert!(
        output.status.success(),
        "warcio {args:?} failed: {}\nstdout:\n{}\nstderr:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// A fresh directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos();
        let dir =
            std::env::temp_dir().join(format!("trawl-warc-{name}-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect()
}

const HTML: &[u8] = b"<!doctype html><html><head><title>Caf\xc3\xa9</title></head>\
    <body><h1>Hello</h1><p>WARC test page.</p></body></html>\n";

/// Bytes that are not UTF-8 (Latin-1 "café crème" and a stray 0xFF).
const LATIN1: &[u8] = b"<p>caf\xe9 cr\xe8me \xff</p>";

fn binary_body() -> Vec<u8> {
    let mut body = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
    body.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    body.extend([0u8; 64]);
    body.extend(b"\r\n\r\nWARC/1.1\r\n");
    body
}

struct Case {
    url: &'static str,
    body: Vec<u8>,
    revisit: bool,
    written: Written,
}

/// Writes the test exchanges with `rolling`; returns them with where they went.
fn write_cases(rolling: &mut RollingWriter) -> Vec<Case> {
    let date: jiff::Timestamp = "2025-06-01T12:00:00.5Z".parse().expect("date");
    let request = headers(&[
        ("User-Agent", "trawl/0.1 (+test)"),
        ("Accept", "text/html,*/*;q=0.8"),
        ("Accept-Encoding", "gzip, br"),
    ]);
    let html_headers = headers(&[
        ("Content-Type", "text/html; charset=utf-8"),
        ("Content-Encoding", "gzip"),
        ("Transfer-Encoding", "chunked"),
        ("Vary", "Accept-Encoding"),
    ]);
    let binary_headers = headers(&[
        ("Content-Type", "image/png"),
        ("Content-Length", "4183"),
        ("X-Odd", "line\r\nWARC-Type: evil"),
    ]);
    let latin1_headers = headers(&[("Content-Type", "text/html; charset=iso-8859-1")]);
    let redirect_headers = headers(&[("Location", "/page"), ("Content-Length", "0")]);
    let metadata = headers(&[
        ("via", "http://site.test/"),
        ("fetchTimeMs", "42"),
        ("trawl-job-id", "01JTESTJOB"),
    ]);
    let binary = binary_body();

    let base = Exchange {
        url: "http://site.test/page",
        ip: Some("93.184.216.34".parse().expect("ip")),
        date,
        method: "GET",
        request_headers: &request,
        status: 200,
        reason: None,
        response_headers: &html_headers,
        body: HTML,
        truncated: None,
        metadata: &metadata,
    };
    let mut cases = Vec::new();
    let mut write = |ex: Exchange<'_>, revisit: Option<&Revisit<'_>>, url: &'static str| {
        let written = rolling
            .write_exchange(&ex, revisit)
            .expect("write exchange");
        Case {
            url,
            body: ex.body.to_vec(),
            revisit: revisit.is_some(),
            written,
        }
    };

    cases.push(write(base, None, "http://site.test/page"));
    cases.push(write(
        Exchange {
            url: "https://site.test/img.png?size=2",
            ip: Some("2001:db8::1".parse().expect("ip")),
            response_headers: &binary_headers,
            body: &binary,
            metadata: &[],
            ..base
        },
        None,
        "https://site.test/img.png?size=2",
    ));
    cases.push(write(
        Exchange {
            url: "http://site.test/latin1",
            ip: None,
            response_headers: &latin1_headers,
            body: LATIN1,
            // As a page reduced at the byte limit is written: warcio reads it all the same.
            truncated: Some("length"),
            ..base
        },
        None,
        "http://site.test/latin1",
    ));
    cases.push(write(
        Exchange {
            url: "http://site.test/old",
            status: 301,
            response_headers: &redirect_headers,
            body: b"",
            ..base
        },
        None,
        "http://site.test/old",
    ));
    let first = cases[0].written.clone();
    let later: jiff::Timestamp = "2025-06-02T08:30:00Z".parse().expect("date");
    cases.push(write(
        Exchange {
            date: later,
            ..base
        },
        Some(&Revisit {
            refers_to_uri: "http://site.test/page",
            refers_to_date: date,
            refers_to_record_id: Some(&first.response_record_id),
        }),
        "http://site.test/page",
    ));
    cases
}

/// Runs `warcio check -v` on `file`; returns how many records passed their digest checks.
fn check(file: &Path) -> usize {
    let file = file.to_str().expect("utf-8 path");
    let output = run(&["check", "-v", file]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stdout.contains("fail"), "warcio check:\n{stdout}");
    assert!(stderr.trim().is_empty(), "warcio check warned:\n{stderr}");
    stdout.matches("digest pass").count()
}

/// Runs `warcio index` on `file`; returns its JSON lines.
fn index(file: &Path) -> Vec<serde_json::Value> {
    let file = file.to_str().expect("utf-8 path");
    let output = run(&[
        "index",
        "-f",
        "offset,warc-type,warc-target-uri,warc-payload-digest,warc-profile,http:status,\
         http:content-length",
        file,
    ]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.trim().is_empty(), "warcio index warned:\n{stderr}");
    String::from_utf8(output.stdout)
        .expect("utf-8 index")
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON index line"))
        .collect()
}

fn extract_payload(file: &Path, offset: u64) -> Vec<u8> {
    let file = file.to_str().expect("utf-8 path");
    run(&["extract", "--payload", file, &offset.to_string()]).stdout
}

fn field<'a>(line: &'a serde_json::Value, name: &str) -> &'a str {
    line.get(name).and_then(|v| v.as_str()).unwrap_or("")
}

#[test]
fn warcio_checks_indexes_and_extracts_one_file() {
    let dir = TempDir::new("one");
    let mut rolling = RollingWriter::new(&dir.0, "trawl", "trawl/0.1.0").expect("writer");
    let cases = write_cases(&mut rolling);
    let files = rolling.finish().expect("finish");
    assert_eq!(files.len(), 1, "{files:?}");
    let file = &files[0];
    for case in &cases {
        assert_eq!(&case.written.file, file);
        assert_eq!(case.written.payload_digest, payload_digest(&case.body));
    }
    let leftovers: Vec<_> = std::fs::read_dir(&dir.0)
        .expect("dir")
        .map(|entry| entry.expect("entry").file_name())
        .collect();
    assert_eq!(leftovers.len(), 1, "no .open file left: {leftovers:?}");

    // Every record but the revisit has a digest that warcio recomputes and accepts:
    // warcinfo, 5 requests, 4 responses, 4 metadata records.
    assert_eq!(check(file), 1 + 5 + 4 + 4);

    let lines = index(file);
    let summary: Vec<(&str, &str)> = lines
        .iter()
        .map(|line| (field(line, "warc-type"), field(line, "warc-target-uri")))
        .collect();
    let mut expected = vec![("warcinfo", "")];
    for case in &cases {
        expected.push(("request", case.url));
        expected.push((if case.revisit { "revisit" } else { "response" }, case.url));
        if case.url != "https://site.test/img.png?size=2" {
            expected.push(("metadata", case.url));
        }
    }
    assert_eq!(summary, expected);

    for case in &cases {
        let offset = case.written.offset.to_string();
        let line = lines
            .iter()
            .find(|line| field(line, "offset") == offset)
            .expect("index has a record at the written offset");
        let kind = if case.revisit { "revisit" } else { "response" };
        assert_eq!(field(line, "warc-type"), kind);
        assert_eq!(
            field(line, "warc-payload-digest"),
            case.written.payload_digest
        );
        assert_eq!(
            field(line, "http:content-length"),
            case.body.len().to_string(),
            "the stored Content-Length is the stored body's"
        );
        if case.revisit {
            assert_eq!(field(line, "warc-profile"), REVISIT_PROFILE);
        } else {
            assert_eq!(
                extract_payload(file, case.written.offset),
                case.body,
                "payload of {}",
                case.url
            );
        }
    }
    let statuses: Vec<&str> = lines
        .iter()
        .filter(|line| matches!(field(line, "warc-type"), "response" | "revisit"))
        .map(|line| field(line, "http:status"))
        .collect();
    assert_eq!(statuses, ["200", "200", "200", "301", "200"]);

    // The whole HTML record as warcio prints it: renamed encoding headers, no injected line.
    let file_str = file.to_str().expect("utf-8 path");
    let html = run(&[
        "extract",
        "--headers",
        file_str,
        &cases[0].written.offset.to_string(),
    ])
    .stdout;
    let html = String::from_utf8_lossy(&html);
    assert!(
        html.contains("X-Trawl-Orig-Content-Encoding: gzip\r\n"),
        "{html}"
    );
    assert!(
        html.contains("X-Trawl-Orig-Transfer-Encoding: chunked\r\n"),
        "{html}"
    );
    assert!(!html.contains("\r\nContent-Encoding"), "{html}");
    let image = run(&[
        "extract",
        "--headers",
        file_str,
        &cases[1].written.offset.to_string(),
    ])
    .stdout;
    let image = String::from_utf8_lossy(&image);
    let warc_types = image
        .split("\r\n")
        .filter(|line| line.starts_with("WARC-Type:"))
        .count();
    assert_eq!(warc_types, 1, "{image}");
    assert!(
        image.contains("\r\nX-Odd: line  WARC-Type: evil\r\n"),
        "{image}"
    );
    assert!(
        image.contains("WARC-IP-Address: 2001:db8::1\r\n"),
        "{image}"
    );
    assert!(
        image.contains("X-Trawl-Orig-Content-Length: 4183\r\n"),
        "{image}"
    );
}

#[test]
fn warcio_accepts_every_file_of_a_rotation() {
    let dir = TempDir::new("rotate");
    let mut rolling = RollingWriter::new(&dir.0, "trawl", "trawl/0.1.0")
        .expect("writer")
        .with_max_bytes(1500);
    let cases = write_cases(&mut rolling);
    let files = rolling.finish().expect("finish");
    assert!(files.len() >= 3, "{files:?}");
    let mut seen = 0;
    for file in &files {
        let lines = index(file);
        assert_eq!(
            field(&lines[0], "warc-type"),
            "warcinfo",
            "{}",
            file.display()
        );
        check(file);
        seen += lines.len() - 1;
    }
    assert_eq!(seen, cases.len() * 3 - 1, "every record is in some file");
    for case in cases.iter().filter(|case| !case.revisit) {
        assert_eq!(
            extract_payload(&case.written.file, case.written.offset),
            case.body
        );
    }
}
