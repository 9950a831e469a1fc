//! WARC/1.1 (ISO 28500:2017) records, one gzip member each, in rolling `.warc.gz` files.
//!
//! One fetch ([`Exchange`]) becomes, in this order:
//! 1. a `request` record: the HTTP request rebuilt from the URL (`METHOD path?query HTTP/1.1`,
//!    `Host`, then the request headers given);
//! 2. a `response` record (status line, headers, body), or a `revisit` record with profile
//!    [`REVISIT_PROFILE`] (status line and headers only, no body, the same payload digest) when
//!    a [`Revisit`] is given;
//! 3. a `metadata` record (`application/warc-fields`, the caller's `key: value` lines) when the
//!    exchange carries any.
//!
//! Request and metadata records point at the response (or revisit) with `WARC-Concurrent-To`;
//! every record names the file's `warcinfo` record (always the first one of a file) with
//! `WARC-Warcinfo-ID`. The three records share the exchange's `WARC-Date` (written with
//! microseconds, as WARC/1.1 allows). Digests are SHA-1 in base32 (`sha1:` + 32 characters),
//! the form warcio and pywb verify: `WARC-Block-Digest` on every record, `WARC-Payload-Digest`
//! (the body alone) on responses and revisits.
//!
//! # The body is stored decoded: header rewrite
//!
//! trawl keeps the body as the HTTP client returned it, with `Content-Encoding` and
//! `Transfer-Encoding` already undone, so the server's own headers would lie about the stored
//! bytes (a replay tool would try to gunzip plain HTML or de-chunk it, and the payload digest
//! would not match). In response and revisit records the server's `Content-Encoding`,
//! `Transfer-Encoding` and `Content-Length` headers are therefore renamed
//! `X-Trawl-Orig-Content-Encoding`, `X-Trawl-Orig-Transfer-Encoding` and
//! `X-Trawl-Orig-Content-Length` (values kept), and one `Content-Length` with the stored body's
//! length is appended. The payload digest is the SHA-1 of exactly the stored body, which is
//! what `warcio check` recomputes and what `warcio extract --payload` returns.
//!
//! # Sanitising
//!
//! Nothing a server or caller supplies can add a line to a record: in header values (HTTP and
//! WARC, the reason phrase and metadata values included) CR, LF and every other control
//! character but tab become a space; header names and the method keep only RFC 9110 token
//! characters (others become `_`); URIs are written in their `url` crate serialisation, without
//! fragment, so they are ASCII with no spaces. Only `http` and `https` URLs are accepted.
//! Status lines are written `HTTP/1.1` whatever the version spoken (HTTP/2 responses too), as
//! replay tools expect.
//!
//! # Files, rotation and crashes
//!
//! [`RecordWriter`] writes to any sink and counts the compressed bytes, so [`Written::offset`]
//! is the CDX offset of the response record. [`RollingWriter`] writes
//! `{prefix}-{YYYYMMDDHHMMSS}-{seq:05}.warc.gz` files in one directory:
//! - a file is created with `create_new` under the name `NAME.warc.gz.open` and renamed to
//!   `NAME.warc.gz` when it is closed; an existing file is never opened for append, and a name
//!   whose final or `.open` form exists is skipped (the sequence number goes up);
//! - a file is closed, and the next exchange opens a new one, once its size reaches
//!   `max_bytes` (default [`DEFAULT_MAX_BYTES`], 1 GB); an exchange's records are never split
//!   across files, so a file can pass the limit by one exchange;
//! - fsync: on close (rotation, [`RollingWriter::finish`]) the file is flushed and
//!   `fsync`ed, renamed, and the directory is `fsync`ed. There is no fsync per record;
//!   [`RollingWriter::sync`] forces one for callers that must make what they wrote durable
//!   before recording offsets elsewhere;
//! - crash rule: a `*.warc.gz.open` file is one that was never closed (crash, I/O error, or a
//!   writer dropped without `finish`). Every gzip member in it that is complete is a valid
//!   record; the last member may be cut short. Readers must not treat `.open` files as part of
//!   the archive; they can be salvaged by keeping the complete members.
//!
//! A single writer must own a `(directory, prefix)` pair at a time.
//!
//! # Cost
//!
//! One deflate state is kept per writer and reset for each member (a fresh `GzEncoder` per
//! record, which allocates the whole miniz_oxide state each time, made writing 2.2 times
//! slower at level 1), the body is fed to it from the caller's slice (never copied), and the
//! header blocks are built in reused buffers. The body is hashed twice, once for the payload
//! digest and once inside the block digest (the block starts with the HTTP headers).
//! The compression level is [`DEFAULT_LEVEL`] (2): on 195 HTML pages (mean 36 KB) level 1
//! gave 32.3% of the raw size at ~215 MB/s, level 2 27.0% at ~170 MB/s, level 6 (zlib's
//! default) 24.6% at ~65 MB/s, level 9 24.6% at ~50 MB/s: level 2 keeps most of the
//! saving at under half the CPU of the default. [`RecordWriter::with_level`] chooses another.

use std::fmt::Write as _;
use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use data_encoding::BASE32;
use flate2::{Compress, Compression, Crc, FlushCompress, Status};
use sha1::{Digest, Sha1};
use url::Url;

/// The `WARC-Profile` of revisit records: the payload is identical to an earlier capture's.
pub const REVISIT_PROFILE: &str =
    "http://netpreserve.org/warc/1.1/revisit/identical-payload-digest";

/// Default size at which [`RollingWriter`] closes a file and starts the next (1 GB).
pub const DEFAULT_MAX_BYTES: u64 = 1_000_000_000;

/// Default deflate level (0–9) of each record's gzip member; see the module doc for why 2.
pub const DEFAULT_LEVEL: u32 = 2;

/// The server headers renamed in stored responses, because the body is stored decoded.
const REWRITTEN: [(&str, &str); 3] = [
    ("content-encoding", "X-Trawl-Orig-Content-Encoding"),
    ("transfer-encoding", "X-Trawl-Orig-Transfer-Encoding"),
    ("content-length", "X-Trawl-Orig-Content-Length"),
];

/// One HTTP fetch to archive: what was asked, what came back, and notes about it.
#[derive(Debug, Clone, Copy)]
pub struct Exchange<'a> {
    /// The URL requested (after redirects: the one this response answers). `http` or `https`.
    pub url: &'a str,
    /// The address the response came from, when known (`WARC-IP-Address`).
    pub ip: Option<IpAddr>,
    /// When the fetch began; the `WARC-Date` of every record of the exchange.
    pub date: jiff::Timestamp,
    /// The request method, e.g. `GET`.
    pub method: &'a str,
    /// The request headers sent (a `Host` header is added when absent).
    pub request_headers: &'a [(String, String)],
    /// The HTTP status code (100–999).
    pub status: u16,
    /// The reason phrase; the standard one for the status when `None`.
    pub reason: Option<&'a str>,
    /// The response headers as received (encoding and length headers get renamed).
    pub response_headers: &'a [(String, String)],
    /// The decoded body: content and transfer encodings already removed.
    pub body: &'a [u8],
    /// `key: value` lines of the metadata record (e.g. `via`, `fetchTimeMs`, `trawl-job-id`);
    /// no metadata record when empty.
    pub metadata: &'a [(String, String)],
}

/// Makes the response a `revisit` of an earlier capture with the same payload.
#[derive(Debug, Clone, Copy)]
pub struct Revisit<'a> {
    /// The earlier capture's `WARC-Target-URI`.
    pub refers_to_uri: &'a str,
    /// The earlier capture's `WARC-Date`.
    pub refers_to_date: jiff::Timestamp,
    /// The earlier response's `WARC-Record-ID` (`<urn:uuid:…>`), when known.
    pub refers_to_record_id: Option<&'a str>,
}

/// Where an exchange went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Written {
    /// `WARC-Record-ID` of the response (or revisit) record, `<urn:uuid:…>`.
    pub response_record_id: String,
    /// `sha1:` + base32 of the body, as in `WARC-Payload-Digest`.
    pub payload_digest: String,
    /// The file holding the records: its final `.warc.gz` name for [`RollingWriter`] (the
    /// file is `….open` until closed), the `filename` given for [`RecordWriter`].
    pub file: PathBuf,
    /// Offset of the response (or revisit) record's gzip member in the file (for CDX).
    pub offset: u64,
    /// Whether a revisit record was written instead of a response.
    pub revisit: bool,
}

/// `sha1:` + base32 of `body`: the `WARC-Payload-Digest` of a response carrying it.
pub fn payload_digest(body: &[u8]) -> String {
    sha1_digest(&[body])
}

fn sha1_digest(parts: &[&[u8]]) -> String {
    let mut hasher = Sha1::new();
    for part in parts {
        hasher.update(part);
    }
    format!("sha1:{}", BASE32.encode(&hasher.finalize()))
}

fn invalid(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, message.into())
}

fn record_id() -> String {
    format!("<urn:uuid:{}>", uuid::Uuid::new_v4())
}

/// `YYYY-MM-DDThh:mm:ss.ssssssZ` (W3C-DTF, UTC, microseconds).
fn warc_date(ts: jiff::Timestamp) -> io::Result<String> {
    jiff::fmt::strtime::format("%Y-%m-%dT%H:%M:%S%.6fZ", ts).map_err(io::Error::other)
}

/// Parses an `http`/`https` URL and drops its fragment.
fn http_url(url: &str) -> io::Result<Url> {
    let mut parsed = Url::parse(url).map_err(|e| invalid(format!("bad URL {url:?}: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(invalid(format!("not an http(s) URL: {url:?}")));
    }
    parsed.set_fragment(None);
    Ok(parsed)
}

/// Checks what would make an exchange unwritable; returns its parsed URL.
fn validate(ex: &Exchange<'_>) -> io::Result<Url> {
    if !(100..=999).contains(&ex.status) {
        return Err(invalid(format!(
            "HTTP status {} is not 100..=999",
            ex.status
        )));
    }
    if ex.method.is_empty() {
        return Err(invalid("empty HTTP method"));
    }
    http_url(ex.url)
}

/// A URI for a WARC header: its URL serialisation if it parses, else percent-encoded.
fn clean_uri(uri: &str) -> String {
    match Url::parse(uri) {
        Ok(mut parsed) => {
            parsed.set_fragment(None);
            parsed.into()
        }
        Err(_) => {
            let mut out = String::with_capacity(uri.len());
            for &b in uri.as_bytes() {
                if b <= b' ' || b >= 0x7f {
                    let _ = write!(out, "%{b:02X}");
                } else {
                    out.push(char::from(b));
                }
            }
            out
        }
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Appends a header name (or method): token characters only, others become `_`.
fn push_token(buf: &mut Vec<u8>, name: &str) {
    if name.is_empty() {
        buf.push(b'_');
    }
    buf.extend(name.bytes().map(|b| if is_tchar(b) { b } else { b'_' }));
}

/// Appends a header value: CR, LF and other controls (tab aside) become spaces. Bytes ≥ 0x80
/// are kept, so UTF-8 stays valid.
fn push_value(buf: &mut Vec<u8>, value: &str) {
    buf.extend(value.bytes().map(|b| {
        if (b < 0x20 && b != b'\t') || b == 0x7f {
            b' '
        } else {
            b
        }
    }));
}

/// Appends `name: value\r\n`, sanitised.
fn push_header(buf: &mut Vec<u8>, name: &str, value: &str) {
    push_token(buf, name);
    buf.extend_from_slice(b": ");
    push_value(buf, value);
    buf.extend_from_slice(b"\r\n");
}

/// Standard reason phrases (RFC 9110 and common extensions).
fn reason_phrase(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        417 => "Expectation Failed",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        451 => "Unavailable For Legal Reasons",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "",
    }
}

/// The WARC header fields of one record, written in the order pushed.
struct Head<'a> {
    fields: [(&'static str, &'a str); 14],
    len: usize,
}

impl<'a> Head<'a> {
    fn new(kind: &'a str, id: &'a str, date: &'a str) -> Self {
        let mut head = Head {
            fields: [("", ""); 14],
            len: 0,
        };
        head.push("WARC-Type", kind);
        head.push("WARC-Record-ID", id);
        head.push("WARC-Date", date);
        head
    }

    fn push(&mut self, name: &'static str, value: &'a str) {
        // Fixed capacity: a revisit, the longest, has 13 fields plus Content-Length.
        debug_assert!(self.len < self.fields.len(), "too many WARC fields");
        if let Some(slot) = self.fields.get_mut(self.len) {
            *slot = (name, value);
            self.len += 1;
        }
    }

    fn push_opt(&mut self, name: &'static str, value: Option<&'a str>) {
        if let Some(value) = value {
            self.push(name, value);
        }
    }

    /// `WARC/1.1`, the fields, `Content-Length`, blank line.
    fn write(&self, buf: &mut Vec<u8>, content_length: usize) {
        buf.clear();
        buf.extend_from_slice(b"WARC/1.1\r\n");
        for (name, value) in &self.fields[..self.len] {
            push_header(buf, name, value);
        }
        let _ = write!(buf, "Content-Length: {content_length}\r\n\r\n");
    }
}

/// A sink that counts what goes through it and writes gzip members with one reused deflate
/// state.
struct Members<W> {
    sink: W,
    written: u64,
    deflate: Compress,
    out: Vec<u8>,
}

const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

impl<W: Write> Members<W> {
    fn put(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.sink.write_all(bytes)?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    /// Writes `parts` as one gzip member; returns the member's offset.
    fn member(&mut self, parts: &[&[u8]]) -> io::Result<u64> {
        let start = self.written;
        self.deflate.reset();
        let mut crc = Crc::new();
        self.put(&GZIP_HEADER)?;
        for part in parts {
            crc.update(part);
            let mut input = *part;
            while !input.is_empty() {
                let used = self.deflate_step(input, FlushCompress::None)?.0;
                input = &input[used..];
            }
        }
        loop {
            let (_, status) = self.deflate_step(&[], FlushCompress::Finish)?;
            if status == Status::StreamEnd {
                break;
            }
        }
        self.put(&crc.sum().to_le_bytes())?;
        self.put(&crc.amount().to_le_bytes())?;
        Ok(start)
    }

    /// One deflate call into `out`, written to the sink; returns the input bytes consumed.
    fn deflate_step(&mut self, input: &[u8], flush: FlushCompress) -> io::Result<(usize, Status)> {
        self.out.clear();
        let before = self.deflate.total_in();
        let status = self
            .deflate
            .compress_vec(input, &mut self.out, flush)
            .map_err(io::Error::other)?;
        let used = usize::try_from(self.deflate.total_in() - before).map_err(io::Error::other)?;
        if used == 0 && self.out.is_empty() && status != Status::StreamEnd {
            return Err(io::Error::other("deflate made no progress"));
        }
        let Members {
            sink, written, out, ..
        } = self;
        sink.write_all(out)?;
        *written += out.len() as u64;
        Ok((used, status))
    }
}

/// Writes WARC records to one sink: a `warcinfo` record first, then the records of each
/// exchange. After an I/O error the writer refuses further records (the sink may hold a
/// partial member).
pub struct RecordWriter<W: Write> {
    out: Members<W>,
    warcinfo_id: String,
    file: PathBuf,
    head: Vec<u8>,
    block: Vec<u8>,
    failed: bool,
}

impl<W: Write> std::fmt::Debug for RecordWriter<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordWriter")
            .field("file", &self.file)
            .field("warcinfo_id", &self.warcinfo_id)
            .field("bytes_written", &self.out.written)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl<W: Write> RecordWriter<W> {
    /// Starts a WARC on `sink` at [`DEFAULT_LEVEL`] and writes its `warcinfo` record
    /// (`software`, `format`, `conformsTo`; `WARC-Filename: filename`).
    pub fn new(sink: W, software: &str, filename: &str) -> io::Result<Self> {
        Self::with_level(sink, software, filename, DEFAULT_LEVEL)
    }

    /// [`RecordWriter::new`] with a deflate level from 0 (stored) to 9 (smallest).
    pub fn with_level(sink: W, software: &str, filename: &str, level: u32) -> io::Result<Self> {
        if level > 9 {
            return Err(invalid(format!("compression level {level} is not 0..=9")));
        }
        let mut writer = RecordWriter {
            out: Members {
                sink,
                written: 0,
                deflate: Compress::new(Compression::new(level), false),
                out: Vec::with_capacity(64 * 1024),
            },
            warcinfo_id: record_id(),
            file: PathBuf::from(filename),
            head: Vec::with_capacity(1024),
            block: Vec::with_capacity(4096),
            failed: false,
        };
        writer.block.clear();
        push_header(&mut writer.block, "software", software);
        push_header(&mut writer.block, "format", "WARC File Format 1.1");
        push_header(
            &mut writer.block,
            "conformsTo",
            "http://iipc.github.io/warc-specifications/specifications/warc-format/warc-1.1/",
        );
        let date = warc_date(jiff::Timestamp::now())?;
        let digest = sha1_digest(&[&writer.block]);
        let mut head = Head::new("warcinfo", &writer.warcinfo_id, &date);
        head.push("WARC-Filename", filename);
        head.push("Content-Type", "application/warc-fields");
        head.push("WARC-Block-Digest", &digest);
        head.write(&mut writer.head, writer.block.len());
        writer
            .out
            .member(&[&writer.head, &writer.block, b"\r\n\r\n"])?;
        Ok(writer)
    }

    /// Compressed bytes written to the sink so far: the offset of the next record.
    pub fn bytes_written(&self) -> u64 {
        self.out.written
    }

    /// The `WARC-Record-ID` of this WARC's `warcinfo` record.
    pub fn warcinfo_id(&self) -> &str {
        &self.warcinfo_id
    }

    /// Writes the exchange's `request`, `response` (or `revisit` when `revisit` is given) and,
    /// when it has metadata, `metadata` records. Fails with `InvalidInput`, writing nothing,
    /// for a non-http(s) URL, a status outside 100–999 or an empty method.
    pub fn write_exchange(
        &mut self,
        ex: &Exchange<'_>,
        revisit: Option<&Revisit<'_>>,
    ) -> io::Result<Written> {
        if self.failed {
            return Err(io::Error::other(
                "an earlier write failed; this WARC writer takes no more records",
            ));
        }
        let url = validate(ex)?;
        let result = self.write_records(ex, &url, revisit);
        if result.is_err() {
            self.failed = true;
        }
        result
    }

    fn write_records(
        &mut self,
        ex: &Exchange<'_>,
        url: &Url,
        revisit: Option<&Revisit<'_>>,
    ) -> io::Result<Written> {
        let date = warc_date(ex.date)?;
        let ip = ex.ip.map(|ip| ip.to_string());
        let response_id = record_id();
        let payload = payload_digest(ex.body);

        // Request: reconstructed, no body.
        self.block.clear();
        push_token(&mut self.block, ex.method);
        self.block.push(b' ');
        self.block.extend_from_slice(
            url[url::Position::BeforePath..url::Position::AfterQuery].as_bytes(),
        );
        self.block.extend_from_slice(b" HTTP/1.1\r\n");
        if !ex
            .request_headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("host"))
        {
            let host = &url[url::Position::BeforeHost..url::Position::AfterPort];
            push_header(&mut self.block, "Host", host);
        }
        for (name, value) in ex.request_headers {
            push_header(&mut self.block, name, value);
        }
        self.block.extend_from_slice(b"\r\n");
        let request_id = record_id();
        let digest = sha1_digest(&[&self.block]);
        let mut head = Head::new("request", &request_id, &date);
        head.push("WARC-Target-URI", url.as_str());
        head.push_opt("WARC-IP-Address", ip.as_deref());
        head.push("WARC-Concurrent-To", &response_id);
        head.push("WARC-Warcinfo-ID", &self.warcinfo_id);
        head.push("Content-Type", "application/http;msgtype=request");
        head.push("WARC-Block-Digest", &digest);
        head.write(&mut self.head, self.block.len());
        self.out.member(&[&self.head, &self.block, b"\r\n\r\n"])?;

        // Response or revisit: status line, rewritten headers, then the body (response only).
        self.block.clear();
        let reason = ex.reason.unwrap_or_else(|| reason_phrase(ex.status));
        let _ = write!(self.block, "HTTP/1.1 {} ", ex.status);
        push_value(&mut self.block, reason);
        self.block.extend_from_slice(b"\r\n");
        for (name, value) in ex.response_headers {
            let renamed = REWRITTEN
                .iter()
                .find(|(lower, _)| name.eq_ignore_ascii_case(lower))
                .map_or(name.as_str(), |(_, renamed)| renamed);
            push_header(&mut self.block, renamed, value);
        }
        let _ = write!(self.block, "Content-Length: {}\r\n\r\n", ex.body.len());
        let refers_date;
        let refers_uri;
        let refers_id;
        let offset = if let Some(rv) = revisit {
            refers_date = warc_date(rv.refers_to_date)?;
            refers_uri = clean_uri(rv.refers_to_uri);
            refers_id = rv.refers_to_record_id.map(|id| {
                if id.starts_with('<') {
                    id.to_owned()
                } else {
                    format!("<{id}>")
                }
            });
            let digest = sha1_digest(&[&self.block]);
            let mut head = Head::new("revisit", &response_id, &date);
            head.push("WARC-Target-URI", url.as_str());
            head.push_opt("WARC-IP-Address", ip.as_deref());
            head.push("WARC-Warcinfo-ID", &self.warcinfo_id);
            head.push("WARC-Profile", REVISIT_PROFILE);
            head.push("WARC-Refers-To-Target-URI", &refers_uri);
            head.push("WARC-Refers-To-Date", &refers_date);
            head.push_opt("WARC-Refers-To", refers_id.as_deref());
            head.push("Content-Type", "application/http;msgtype=response");
            head.push("WARC-Block-Digest", &digest);
            head.push("WARC-Payload-Digest", &payload);
            head.write(&mut self.head, self.block.len());
            self.out.member(&[&self.head, &self.block, b"\r\n\r\n"])?
        } else {
            let digest = sha1_digest(&[&self.block, ex.body]);
            let mut head = Head::new("response", &response_id, &date);
            head.push("WARC-Target-URI", url.as_str());
            head.push_opt("WARC-IP-Address", ip.as_deref());
            head.push("WARC-Warcinfo-ID", &self.warcinfo_id);
            head.push("Content-Type", "application/http;msgtype=response");
            head.push("WARC-Block-Digest", &digest);
            head.push("WARC-Payload-Digest", &payload);
            head.write(&mut self.head, self.block.len() + ex.body.len());
            self.out
                .member(&[&self.head, &self.block, ex.body, b"\r\n\r\n"])?
        };

        // Metadata: the caller's fields.
        if !ex.metadata.is_empty() {
            self.block.clear();
            for (name, value) in ex.metadata {
                push_header(&mut self.block, name, value);
            }
            let metadata_id = record_id();
            let digest = sha1_digest(&[&self.block]);
            let mut head = Head::new("metadata", &metadata_id, &date);
            head.push("WARC-Target-URI", url.as_str());
            head.push("WARC-Concurrent-To", &response_id);
            head.push("WARC-Warcinfo-ID", &self.warcinfo_id);
            head.push("Content-Type", "application/warc-fields");
            head.push("WARC-Block-Digest", &digest);
            head.write(&mut self.head, self.block.len());
            self.out.member(&[&self.head, &self.block, b"\r\n\r\n"])?;
        }

        Ok(Written {
            response_record_id: response_id,
            payload_digest: payload,
            file: self.file.clone(),
            offset,
            revisit: revisit.is_some(),
        })
    }

    /// Flushes the sink and returns it. Fails if an earlier write failed.
    pub fn finish(mut self) -> io::Result<W> {
        if self.failed {
            return Err(io::Error::other(
                "an earlier write failed; the WARC is incomplete",
            ));
        }
        self.out.sink.flush()?;
        Ok(self.out.sink)
    }

    /// Flushes the sink.
    fn flush(&mut self) -> io::Result<()> {
        self.out.sink.flush()
    }
}

/// The file a [`RollingWriter`] is writing.
#[derive(Debug)]
struct OpenFile {
    writer: RecordWriter<BufWriter<File>>,
    open_path: PathBuf,
    final_path: PathBuf,
}

/// Writes exchanges to `{prefix}-{YYYYMMDDHHMMSS}-{seq:05}.warc.gz` files in one directory,
/// starting a new file once the current one reaches `max_bytes`. Files are written as
/// `….warc.gz.open` and renamed when closed; see the module doc for the crash and fsync rules.
/// A file is opened at the first exchange after creation or rotation, so no file holds only a
/// `warcinfo` record.
#[derive(Debug)]
pub struct RollingWriter {
    dir: PathBuf,
    prefix: String,
    software: String,
    max_bytes: u64,
    level: u32,
    seq: u32,
    current: Option<OpenFile>,
    closed: Vec<PathBuf>,
}

impl RollingWriter {
    /// A writer of files named `{prefix}-…` in `dir` (created if missing). The prefix must be
    /// non-empty, must not start with `.` and must not contain a path separator.
    pub fn new(dir: impl Into<PathBuf>, prefix: &str, software: &str) -> io::Result<Self> {
        if prefix.is_empty()
            || prefix.starts_with('.')
            || prefix.contains(['/', '\\'])
            || prefix.chars().any(char::is_control)
        {
            return Err(invalid(format!("bad WARC file prefix {prefix:?}")));
        }
        let dir = dir.into();
        std::fs::create_dir_all(&dir)?;
        Ok(RollingWriter {
            dir,
            prefix: prefix.to_owned(),
            software: software.to_owned(),
            max_bytes: DEFAULT_MAX_BYTES,
            level: DEFAULT_LEVEL,
            seq: 0,
            current: None,
            closed: Vec::new(),
        })
    }

    /// Sets the size (compressed bytes) at which a file is closed; at least 1.
    pub fn with_max_bytes(mut self, max_bytes: u64) -> Self {
        self.max_bytes = max_bytes.max(1);
        self
    }

    /// Sets the deflate level (0–9, clamped) of files opened from now on.
    pub fn with_level(mut self, level: u32) -> Self {
        self.level = level.min(9);
        self
    }

    /// The files closed so far (final `.warc.gz` paths), oldest first.
    pub fn closed_files(&self) -> &[PathBuf] {
        &self.closed
    }

    /// Writes an exchange as [`RecordWriter::write_exchange`] does, opening a file first if
    /// none is open and closing it afterwards if it reached `max_bytes`. After an I/O error
    /// the file is abandoned as `.open` (see the crash rule) and the next exchange opens a
    /// new one.
    pub fn write_exchange(
        &mut self,
        ex: &Exchange<'_>,
        revisit: Option<&Revisit<'_>>,
    ) -> io::Result<Written> {
        // Reject bad input before opening a file for it.
        validate(ex)?;
        let current = match self.current.take() {
            Some(current) => current,
            None => self.open_next()?,
        };
        let current = self.current.insert(current);
        let written = match current.writer.write_exchange(ex, revisit) {
            Ok(written) => written,
            Err(e) => {
                if current.writer.failed {
                    // Abandoned as `.open`: it may end with a partial member.
                    self.current = None;
                }
                return Err(e);
            }
        };
        if current.writer.bytes_written() >= self.max_bytes {
            self.close_current()?;
        }
        Ok(written)
    }

    /// Flushes the open file's buffer and fsyncs it (it keeps its `.open` name).
    pub fn sync(&mut self) -> io::Result<()> {
        if let Some(current) = &mut self.current {
            current.writer.flush()?;
            current.writer.out.sink.get_ref().sync_all()?;
        }
        Ok(())
    }

    /// Closes the open file, if any, and returns every file this writer closed, oldest first.
    pub fn finish(mut self) -> io::Result<Vec<PathBuf>> {
        self.close_current()?;
        Ok(std::mem::take(&mut self.closed))
    }

    fn open_next(&mut self) -> io::Result<OpenFile> {
        let stamp = jiff::fmt::strtime::format("%Y%m%d%H%M%S", jiff::Timestamp::now())
            .map_err(io::Error::other)?;
        loop {
            let name = format!("{}-{stamp}-{:05}.warc.gz", self.prefix, self.seq);
            self.seq = self
                .seq
                .checked_add(1)
                .ok_or_else(|| io::Error::other("WARC file sequence exhausted"))?;
            let final_path = self.dir.join(&name);
            let open_path = self.dir.join(format!("{name}.open"));
            if final_path.try_exists()? {
                continue;
            }
            let file = match OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&open_path)
            {
                Ok(file) => file,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            };
            let sink = BufWriter::with_capacity(256 * 1024, file);
            let mut writer = RecordWriter::with_level(sink, &self.software, &name, self.level)?;
            writer.file.clone_from(&final_path);
            return Ok(OpenFile {
                writer,
                open_path,
                final_path,
            });
        }
    }

    fn close_current(&mut self) -> io::Result<()> {
        let Some(current) = self.current.take() else {
            return Ok(());
        };
        let file = current
            .writer
            .finish()?
            .into_inner()
            .map_err(|e| e.into_error())?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&current.open_path, &current.final_path)?;
        sync_dir(&self.dir)?;
        self.closed.push(current.final_path);
        Ok(())
    }
}

/// Makes a rename durable (Unix: fsync the directory; elsewhere a no-op).
fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(unix)]
    {
        File::open(dir)?.sync_all()?;
    }
    #[cfg(not(unix))]
    {
        let _ = dir;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
        let mut writer =
            RecordWriter::new(Vec::new(), "trawl\r\nx: y", "f\nx.warc.gz").expect("new");
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
}
