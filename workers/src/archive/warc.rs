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
//! Those figures are miniz_oxide's; the build now uses flate2's zlib-rs backend (see
//! `workers/Cargo.toml`), whose level 2 took deflate from 4.5 % to 2.9 % of all the CPU of a
//! `trawl crawl --archive` profile.

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
    /// Why `body` is not the whole payload as served (`WARC-Truncated` of the response:
    /// `length` for a page reduced or cut at the byte limit), `None` when it is.
    pub truncated: Option<&'a str>,
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
            head.push_opt("WARC-Truncated", ex.truncated);
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
mod tests;
