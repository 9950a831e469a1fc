//! Tests of the WARC writer: records parsed back and checked field by field, digests, the
//! header rewrite, sanitising, refused input and file rotation.

use super::*;
use flate2::bufread::GzDecoder;
use std::io::Read;

/// One parsed record: its offset, WARC header lines and block.
#[derive(Debug)]
struct Record {
    offset: u64,
    head: String,
    block: Vec<u8>,
}

impl Record {
    fn fields(&self, name: &str) -> Vec<&str> {
        self.head
            .split("\r\n")
            .filter_map(|line| line.split_once(": "))
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
            .collect()
    }

    fn field(&self, name: &str) -> &str {
        let values = self.fields(name);
        assert_eq!(values.len(), 1, "{name} in {}", self.head);
        values[0]
    }

    fn kind(&self) -> &str {
        self.field("WARC-Type")
    }
}

/// Splits `data` member by member, checking each holds exactly one well-framed record.
fn records(data: &[u8]) -> Vec<Record> {
    let mut rest = data;
    let mut out = Vec::new();
    while !rest.is_empty() {
        let offset = (data.len() - rest.len()) as u64;
        let mut decoder = GzDecoder::new(rest);
        let mut raw = Vec::new();
        decoder.read_to_end(&mut raw).expect("gzip member");
        rest = decoder.into_inner();
        let split = raw
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .expect("end of WARC headers");
        let head = std::str::from_utf8(&raw[..split + 2])
            .expect("utf-8 head")
            .to_owned();
        assert!(head.starts_with("WARC/1.1\r\n"), "{head}");
        // CRLF only: every LF in the header block follows a CR.
        for (i, &b) in head.as_bytes().iter().enumerate() {
            if b == b'\n' {
                assert_eq!(head.as_bytes()[i - 1], b'\r', "bare LF in {head}");
            }
            if b == b'\r' {
                assert_eq!(head.as_bytes()[i + 1], b'\n', "bare CR in {head}");
            }
        }
        let block_start = split + 4;
        let record = Record {
            offset,
            head,
            block: Vec::new(),
        };
        let length: usize = record.field("Content-Length").parse().expect("length");
        assert_eq!(
            raw.len(),
            block_start + length + 4,
            "Content-Length is the block length, then CRLF CRLF ends the member"
        );
        assert_eq!(&raw[block_start + length..], b"\r\n\r\n");
        let block = raw[block_start..block_start + length].to_vec();
        assert_eq!(record.field("WARC-Block-Digest"), sha1_digest(&[&block]));
        out.push(Record { block, ..record });
    }
    out
}

fn headers(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn date() -> jiff::Timestamp {
    "2025-03-04T05:06:07.123456789Z".parse().expect("date")
}

fn exchange<'a>(
    url: &'a str,
    req: &'a [(String, String)],
    resp: &'a [(String, String)],
    body: &'a [u8],
    meta: &'a [(String, String)],
) -> Exchange<'a> {
    Exchange {
        url,
        ip: Some("93.184.216.34".parse().expect("ip")),
        date: date(),
        method: "GET",
        request_headers: req,
        status: 200,
        reason: None,
        response_headers: resp,
        body,
        truncated: None,
        metadata: meta,
    }
}

/// The HTTP head and payload of a response block.
fn http_parts(block: &[u8]) -> (String, &[u8]) {
    let split = block
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("end of HTTP headers");
    (
        String::from_utf8(block[..split + 4].to_vec()).expect("utf-8"),
        &block[split + 4..],
    )
}

#[test]
fn payload_digest_of_known_strings() {
    // Expected values from Python: base64.b32encode(hashlib.sha1(s).digest()).
    assert_eq!(
        payload_digest(b"hello world"),
        "sha1:FKXGYNOJJ7H3IFO35FPUBC445EPOQRXN"
    );
    assert_eq!(payload_digest(b""), "sha1:3I42H3S6NNFQ2MSVX7XZKYAYSCX5QBYJ");
}

#[test]
fn exchange_layout_request_response_metadata() {
    let req = headers(&[("User-Agent", "trawl-test"), ("Accept", "*/*")]);
    let resp = headers(&[
        ("Content-Type", "text/html; charset=utf-8"),
        ("Server", "x"),
    ]);
    let meta = headers(&[("via", "http://example.com/"), ("trawl-job-id", "01J")]);
    let body = b"hello world";
    let ex = exchange(
        "http://Example.com:8080/a/b?q=1#frag",
        &req,
        &resp,
        body,
        &meta,
    );
    let mut writer = RecordWriter::new(Vec::new(), "trawl/0.1", "test.warc.gz").expect("new");
    let warcinfo_id = writer.warcinfo_id().to_owned();
    let written = writer.write_exchange(&ex, None).expect("write");
    let end = writer.bytes_written();
    let data = writer.finish().expect("finish");
    assert_eq!(end, data.len() as u64);
    assert_eq!(
        written.payload_digest,
        "sha1:FKXGYNOJJ7H3IFO35FPUBC445EPOQRXN"
    );
    assert_eq!(written.file, PathBuf::from("test.warc.gz"));
    assert!(!written.revisit);
    assert!(written.response_record_id.starts_with("<urn:uuid:"));
    assert!(written.response_record_id.ends_with('>'));

    let recs = records(&data);
    let kinds: Vec<&str> = recs.iter().map(Record::kind).collect();
    assert_eq!(kinds, ["warcinfo", "request", "response", "metadata"]);

    let info = &recs[0];
    assert_eq!(info.offset, 0);
    assert_eq!(info.field("WARC-Record-ID"), warcinfo_id);
    assert_eq!(info.field("WARC-Filename"), "test.warc.gz");
    assert_eq!(info.field("Content-Type"), "application/warc-fields");
    let info_block = String::from_utf8(info.block.clone()).expect("utf-8");
    assert!(
        info_block.contains("software: trawl/0.1\r\n"),
        "{info_block}"
    );
    assert!(info_block.contains("format: WARC File Format 1.1\r\n"));
    assert!(info.fields("WARC-Warcinfo-ID").is_empty());

    for rec in &recs[1..] {
        assert_eq!(rec.field("WARC-Warcinfo-ID"), warcinfo_id);
        assert_eq!(rec.field("WARC-Date"), "2025-03-04T05:06:07.123456Z");
        assert_eq!(
            rec.field("WARC-Target-URI"),
            "http://example.com:8080/a/b?q=1"
        );
    }

    let request = &recs[1];
    assert_eq!(
        request.field("Content-Type"),
        "application/http;msgtype=request"
    );
    assert_eq!(
        request.field("WARC-Concurrent-To"),
        written.response_record_id
    );
    assert_eq!(request.field("WARC-IP-Address"), "93.184.216.34");
    assert_eq!(
        String::from_utf8(request.block.clone()).expect("utf-8"),
        "GET /a/b?q=1 HTTP/1.1\r\nHost: example.com:8080\r\nUser-Agent: trawl-test\r\n\
         Accept: */*\r\n\r\n"
    );

    let response = &recs[2];
    assert_eq!(response.offset, written.offset);
    assert_eq!(response.field("WARC-Record-ID"), written.response_record_id);
    assert_eq!(
        response.field("Content-Type"),
        "application/http;msgtype=response"
    );
    assert_eq!(
        response.field("WARC-Payload-Digest"),
        written.payload_digest
    );
    assert_eq!(response.field("WARC-IP-Address"), "93.184.216.34");
    assert!(response.fields("WARC-Concurrent-To").is_empty());
    let (http, payload) = http_parts(&response.block);
    assert_eq!(payload, body);
    assert_eq!(
        http,
        "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nServer: x\r\n\
         Content-Length: 11\r\n\r\n"
    );

    let metadata = &recs[3];
    assert_eq!(metadata.field("Content-Type"), "application/warc-fields");
    assert_eq!(
        metadata.field("WARC-Concurrent-To"),
        written.response_record_id
    );
    assert_eq!(
        metadata.block,
        b"via: http://example.com/\r\ntrawl-job-id: 01J\r\n"
    );

    // The offset alone is enough to read the response back (what a CDX lookup does).
    let tail = records(&data[written.offset as usize..]);
    assert_eq!(tail[0].field("WARC-Record-ID"), written.response_record_id);
}

#[test]
fn encoding_and_length_headers_are_renamed() {
    let resp = headers(&[
        ("Content-Type", "text/plain"),
        ("content-encoding", "gzip"),
        ("Transfer-Encoding", "chunked"),
        ("Content-Length", "999"),
    ]);
    let body = b"decoded text";
    let ex = exchange("https://example.com/", &[], &resp, body, &[]);
    let mut writer = RecordWriter::new(Vec::new(), "t", "f.warc.gz").expect("new");
    writer.write_exchange(&ex, None).expect("write");
    let data = writer.finish().expect("finish");
    let recs = records(&data);
    let kinds: Vec<&str> = recs.iter().map(Record::kind).collect();
    assert_eq!(
        kinds,
        ["warcinfo", "request", "response"],
        "no metadata record"
    );
    assert!(recs[1].fields("WARC-IP-Address").len() == 1);
    let (http, payload) = http_parts(&recs[2].block);
    assert_eq!(payload, body);
    assert_eq!(
        http,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\
         X-Trawl-Orig-Content-Encoding: gzip\r\nX-Trawl-Orig-Transfer-Encoding: chunked\r\n\
         X-Trawl-Orig-Content-Length: 999\r\nContent-Length: 12\r\n\r\n"
    );
}

#[test]
fn header_injection_is_neutralised() {
    let req = headers(&[("X-Evil", "a\r\nWARC-Type: evil"), ("Bad\r\nName: x", "v")]);
    let resp = headers(&[
        ("Set-Cookie", "a=b\nContent-Length: 0\r\n\r\nWARC/1.1"),
        ("Na me:", "v\u{0}\u{7f}"),
    ]);
    let meta = headers(&[("via\r\nWARC-Type", "x\ny\rz")]);
    let mut ex = exchange("http://example.com/", &req, &resp, b"body", &meta);
    ex.reason = Some("OK\r\nX-Injected: 1");
    ex.method = "GET /x HTTP/1.1\r\n";
    let mut writer = RecordWriter::new(Vec::new(), "trawl\r\nx: y", "f\nx.warc.gz").expect("new");
    writer.write_exchange(&ex, None).expect("write");
    let data = writer.finish().expect("finish");
    let recs = records(&data);
    assert_eq!(recs.len(), 4);
    for rec in &recs {
        assert_eq!(rec.fields("WARC-Type").len(), 1);
        assert!(!rec.head.contains("evil"));
    }
    assert_eq!(recs[0].field("WARC-Filename"), "f x.warc.gz");
    assert_eq!(
        recs[0].block.split(|&b| b == b'\n').count(),
        4,
        "three lines"
    );
    let request = String::from_utf8(recs[1].block.clone()).expect("utf-8");
    assert_eq!(
        request,
        "GET__x_HTTP_1.1__ / HTTP/1.1\r\nHost: example.com\r\n\
         X-Evil: a  WARC-Type: evil\r\nBad__Name__x: v\r\n\r\n"
    );
    let (http, payload) = http_parts(&recs[2].block);
    assert_eq!(payload, b"body");
    assert_eq!(
        http,
        "HTTP/1.1 200 OK  X-Injected: 1\r\n\
         Set-Cookie: a=b Content-Length: 0    WARC/1.1\r\nNa_me_: v  \r\n\
         Content-Length: 4\r\n\r\n"
    );
    assert_eq!(recs[3].block, b"via__WARC-Type: x y z\r\n");
}

#[test]
fn revisit_has_headers_only_and_the_payload_digest() {
    let resp = headers(&[("Content-Type", "text/html"), ("Content-Encoding", "br")]);
    let body = b"<html>same as before</html>";
    let ex = exchange("http://example.com/page", &[], &resp, body, &[]);
    let earlier: jiff::Timestamp = "2024-01-02T03:04:05Z".parse().expect("date");
    let rv = Revisit {
        refers_to_uri: "http://example.com/page",
        refers_to_date: earlier,
        refers_to_record_id: Some("urn:uuid:00000000-0000-4000-8000-000000000000"),
    };
    let mut writer = RecordWriter::new(Vec::new(), "t", "f.warc.gz").expect("new");
    let written = writer.write_exchange(&ex, Some(&rv)).expect("write");
    let data = writer.finish().expect("finish");
    assert!(written.revisit);
    assert_eq!(written.payload_digest, payload_digest(body));
    let recs = records(&data);
    let kinds: Vec<&str> = recs.iter().map(Record::kind).collect();
    assert_eq!(kinds, ["warcinfo", "request", "revisit"]);
    let revisit = &recs[2];
    assert_eq!(revisit.offset, written.offset);
    assert_eq!(revisit.field("WARC-Profile"), REVISIT_PROFILE);
    assert_eq!(
        revisit.field("WARC-Refers-To-Target-URI"),
        "http://example.com/page"
    );
    assert_eq!(
        revisit.field("WARC-Refers-To-Date"),
        "2024-01-02T03:04:05.000000Z"
    );
    assert_eq!(
        revisit.field("WARC-Refers-To"),
        "<urn:uuid:00000000-0000-4000-8000-000000000000>"
    );
    assert_eq!(revisit.field("WARC-Payload-Digest"), payload_digest(body));
    assert_eq!(
        revisit.field("Content-Type"),
        "application/http;msgtype=response"
    );
    let (http, payload) = http_parts(&revisit.block);
    assert!(payload.is_empty(), "a revisit carries no body");
    assert_eq!(
        http,
        "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Trawl-Orig-Content-Encoding: br\r\n\
         Content-Length: 27\r\n\r\n"
    );
    assert_eq!(
        recs[1].field("WARC-Concurrent-To"),
        written.response_record_id
    );
}

#[test]
fn bad_input_is_refused_without_writing() {
    let mut writer = RecordWriter::new(Vec::new(), "t", "f.warc.gz").expect("new");
    let before = writer.bytes_written();
    for url in ["ftp://example.com/", "not a url", "data:text/plain,hi"] {
        let ex = exchange(url, &[], &[], b"", &[]);
        let err = writer.write_exchange(&ex, None).expect_err(url);
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    }
    let mut ex = exchange("http://example.com/", &[], &[], b"", &[]);
    ex.status = 42;
    assert!(writer.write_exchange(&ex, None).is_err());
    ex.status = 200;
    ex.method = "";
    assert!(writer.write_exchange(&ex, None).is_err());
    assert_eq!(writer.bytes_written(), before);
    // Input errors do not poison the writer.
    ex.method = "HEAD";
    ex.status = 599;
    writer.write_exchange(&ex, None).expect("valid exchange");
    let recs = records(&writer.finish().expect("finish"));
    assert!(
        http_parts(&recs[2].block)
            .0
            .starts_with("HTTP/1.1 599 \r\n")
    );
    assert!(recs[1].block.starts_with(b"HEAD / HTTP/1.1\r\n"));
}

/// A sink that fails after `left` bytes.
struct Failing {
    left: usize,
}

impl Write for Failing {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.left == 0 {
            return Err(io::Error::other("disk full"));
        }
        let n = buf.len().min(self.left);
        self.left -= n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failed_write_poisons_the_writer() {
    let mut writer = RecordWriter::new(Failing { left: 400 }, "t", "f").expect("new");
    let body = vec![7u8; 10_000];
    let ex = exchange("http://example.com/", &[], &[], &body, &[]);
    assert!(writer.write_exchange(&ex, None).is_err());
    assert!(writer.write_exchange(&ex, None).is_err());
    assert!(writer.finish().is_err());
}

#[test]
fn many_records_and_large_bodies_round_trip() {
    let mut writer = RecordWriter::new(Vec::new(), "t", "f").expect("new");
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7919 % 251) as u8).collect();
    let mut offsets = Vec::new();
    for i in 0..200usize {
        let body = &big[..(i * 1499) % big.len()];
        let ex = exchange("http://example.com/x", &[], &[], body, &[]);
        offsets.push((
            writer.write_exchange(&ex, None).expect("write").offset,
            body,
        ));
    }
    let data = writer.finish().expect("finish");
    let recs = records(&data);
    assert_eq!(recs.len(), 1 + 2 * 200);
    for (offset, body) in offsets {
        let rec = recs
            .iter()
            .find(|r| r.offset == offset)
            .expect("record at offset");
        assert_eq!(http_parts(&rec.block).1, body);
        assert_eq!(rec.field("WARC-Payload-Digest"), payload_digest(body));
    }
}

/// A fresh directory under the system temp dir, removed when dropped (pass or fail).
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!(
            "trawl-warc-{name}-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn rolling_writer_rotates_by_size_and_never_reuses_a_name() {
    let temp = TempDir::new("roll");
    let dir = &temp.0;
    let body = vec![b'a'; 5000];
    let ex = exchange("http://example.com/r", &[], &[], &body, &[]);
    let mut rolling = RollingWriter::new(dir, "crawl", "trawl/test")
        .expect("rolling")
        .with_max_bytes(1);
    let mut written = Vec::new();
    for _ in 0..3 {
        written.push(rolling.write_exchange(&ex, None).expect("write"));
    }
    assert_eq!(rolling.closed_files().len(), 3);
    let files = rolling.finish().expect("finish");
    assert_eq!(files.len(), 3);
    for (file, w) in files.iter().zip(&written) {
        assert_eq!(&w.file, file);
        let name = file.file_name().expect("name").to_str().expect("utf-8");
        // crawl-YYYYMMDDHHMMSS-NNNNN.warc.gz
        let parts: Vec<&str> = name
            .strip_suffix(".warc.gz")
            .expect("suffix")
            .split('-')
            .collect();
        assert_eq!(parts.len(), 3, "{name}");
        assert_eq!(parts[0], "crawl");
        assert_eq!(parts[1].len(), 14);
        assert_eq!(parts[2].len(), 5);
        let recs = records(&std::fs::read(file).expect("read"));
        let kinds: Vec<&str> = recs.iter().map(Record::kind).collect();
        assert_eq!(kinds, ["warcinfo", "request", "response"]);
        assert_eq!(recs[0].field("WARC-Filename"), name);
        assert_eq!(recs[2].offset, w.offset);
    }

    // A second writer with a large limit: one file for several exchanges; an existing
    // name (same second, same sequence) is skipped, never appended to.
    let before: Vec<_> = std::fs::read_dir(dir).expect("dir").collect();
    let mut rolling = RollingWriter::new(dir, "crawl", "trawl/test").expect("rolling");
    let first = rolling.write_exchange(&ex, None).expect("write");
    // Open (not yet closed) file: `.open` name on disk.
    let open = PathBuf::from(format!("{}.open", first.file.display()));
    assert!(open.exists());
    assert!(!first.file.exists());
    rolling.sync().expect("sync");
    rolling.write_exchange(&ex, None).expect("write");
    let more = rolling.finish().expect("finish");
    assert_eq!(more, std::slice::from_ref(&first.file));
    assert!(!files.contains(&first.file));
    assert!(!open.exists());
    let recs = records(&std::fs::read(&first.file).expect("read"));
    assert_eq!(recs.len(), 5);
    let after: Vec<_> = std::fs::read_dir(dir).expect("dir").collect();
    assert_eq!(after.len(), before.len() + 1);
    for file in &files {
        assert_eq!(
            records(&std::fs::read(file).expect("read")).len(),
            3,
            "untouched"
        );
    }

    // A writer that writes nothing, bad input included, leaves no file.
    let mut rolling = RollingWriter::new(dir, "crawl", "t").expect("rolling");
    let bad_url = exchange("ftp://example.com/", &[], &[], b"", &[]);
    assert!(rolling.write_exchange(&bad_url, None).is_err());
    let bad_status = Exchange { status: 7, ..ex };
    assert!(rolling.write_exchange(&bad_status, None).is_err());
    assert!(rolling.finish().expect("finish").is_empty());
    assert_eq!(std::fs::read_dir(dir).expect("dir").count(), after.len());
    assert!(RollingWriter::new(dir, "../x", "t").is_err());
}
