//! Sitemaps (sitemaps.org protocol 0.9): XML `<urlset>` files (page URLs with `lastmod`), XML
//! `<sitemapindex>` files (URLs of more sitemaps), and plain-text files (one URL per line), any
//! of them gzip-compressed. Parsing streams (quick-xml over a capped gzip decoder), keeps within
//! the protocol's limits (50 MiB decompressed, 50,000 entries), and never panics on bad input:
//! bad entries are counted and skipped, malformed XML yields what was read before and around
//! the damage.
//!
//! Not here: fetching (the caller GETs with the guarded `web::Client`), following a sitemap
//! index (the caller fetches the nested sitemaps it wants, with its own depth and count
//! limits), scope and robots checks on the listed URLs, or RSS/Atom feeds used as sitemaps.

use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Read};

use flate2::bufread::MultiGzDecoder;
use quick_xml::Reader;
use quick_xml::events::Event;
use url::Url;

use crate::crawl::robots::Robots;
use crate::crawl::scope::crawl_key;
use crate::job::ErrorCode;

/// The protocol's limit on a sitemap's uncompressed size: 50 MiB (52,428,800 bytes).
pub const MAX_SITEMAP_BYTES: u64 = 52_428_800;

/// The protocol's limit on entries (URLs or nested sitemaps) in one file.
pub const MAX_SITEMAP_ENTRIES: usize = 50_000;

/// Longest `loc` kept, in bytes (the protocol allows "less than 2,048 characters").
pub const MAX_LOC_LEN: usize = 2_048;

/// Longest `lastmod` kept, in bytes; a longer one is dropped (W3C datetimes are ~30).
const MAX_LASTMOD_LEN: usize = 64;

/// XML errors after which parsing gives up on a file.
const MAX_XML_ERRORS: usize = 100;

/// How much of one file [`parse_sitemap`] will read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SitemapLimits {
    /// Most bytes read after decompression; more is [`SitemapError::TooLarge`].
    pub max_bytes: u64,
    /// Most entries kept (URLs and nested sitemaps together); later ones are counted in
    /// [`Sitemap::over_limit`] and dropped.
    pub max_entries: usize,
}

impl Default for SitemapLimits {
    fn default() -> Self {
        SitemapLimits {
            max_bytes: MAX_SITEMAP_BYTES,
            max_entries: MAX_SITEMAP_ENTRIES,
        }
    }
}

/// Which kind of sitemap a file turned out to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SitemapFormat {
    /// An XML `<urlset>`: page URLs.
    UrlSet,
    /// An XML `<sitemapindex>`: URLs of more sitemaps.
    Index,
    /// Plain text, one URL per line (also an empty file, and XML without a root element).
    Text,
}

/// One page URL listed by a sitemap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SitemapUrl {
    /// The page URL: absolute, `http` or `https`, at most [`MAX_LOC_LEN`] bytes.
    pub loc: Url,
    /// The `lastmod` text as written (trimmed, not validated), if present and at most 64 bytes.
    pub lastmod: Option<String>,
}

/// What one sitemap file lists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sitemap {
    /// The kind of file.
    pub format: SitemapFormat,
    /// True when the body was gzip-compressed (detected by its magic bytes).
    pub gzipped: bool,
    /// Page URLs (`<url><loc>` entries, or the lines of a text file), in file order.
    pub urls: Vec<SitemapUrl>,
    /// Nested sitemap URLs (`<sitemap><loc>` entries), in file order.
    pub sitemaps: Vec<Url>,
    /// Entries dropped because their `loc` is missing, relative, not `http(s)`, not a URL, or
    /// longer than [`MAX_LOC_LEN`]; for text files, non-blank lines that are not such a URL.
    pub skipped: usize,
    /// Well-formed entries dropped because [`SitemapLimits::max_entries`] was reached.
    pub over_limit: usize,
    /// XML errors met (syntax, unknown entities, mismatched tags). Parsing resumes after each
    /// one it can get past, and stops after 100 or when the reader cannot move on.
    pub errors: usize,
}

/// Why a sitemap file could not be read at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SitemapError {
    /// More than [`SitemapLimits::max_bytes`] after decompression (a gzip bomb stops here).
    #[error("sitemap larger than {limit} bytes after decompression")]
    TooLarge {
        /// The limit that was reached.
        limit: u64,
    },
    /// The body starts like gzip but does not decompress.
    #[error("sitemap gzip stream is corrupt: {0}")]
    Gzip(String),
    /// The body is XML whose root is neither `<urlset>` nor `<sitemapindex>` (often an HTML
    /// error page served with 200).
    #[error("not a sitemap: the root element is <{root}>")]
    NotSitemap {
        /// The root element's local name, cut to 64 characters.
        root: String,
    },
}

impl SitemapError {
    /// Returns the public error code.
    pub fn code(&self) -> ErrorCode {
        match self {
            SitemapError::TooLarge { .. } => ErrorCode::TooLarge,
            SitemapError::Gzip(_) | SitemapError::NotSitemap { .. } => ErrorCode::ExtractionFailed,
        }
    }

    /// False: the same bytes fail the same way.
    pub fn is_transient(&self) -> bool {
        false
    }
}

/// Parses one sitemap file. Gzip is recognised by its magic bytes (`1f 8b`), whatever the
/// file's name or content type, and several concatenated gzip members are read as one stream.
/// After an optional byte-order mark and whitespace, a body starting with `<` is XML and
/// anything else is plain text. `loc` values are trimmed and entity references resolved
/// (`&amp;` → `&`); a raw `&` is tolerated. Elements are recognised by local name at their
/// place in the tree (`*/url/loc`, `*/sitemap/loc`, `*/url/lastmod`), whatever their namespace
/// prefix, so extension elements such as `<image:image><image:loc>` are ignored.
///
/// Memory stays within about `max_bytes`: the body is never decompressed whole, but one XML
/// text node or text line may be buffered up to the cap before it is refused.
pub fn parse_sitemap(body: &[u8], limits: &SitemapLimits) -> Result<Sitemap, SitemapError> {
    let gzipped = body.starts_with(&[0x1f, 0x8b]);
    if gzipped {
        let decoder = Capped {
            inner: MultiGzDecoder::new(body),
            remaining: limits.max_bytes,
        };
        parse_stream(BufReader::with_capacity(64 * 1024, decoder), true, limits)
    } else {
        if body.len() as u64 > limits.max_bytes {
            return Err(SitemapError::TooLarge {
                limit: limits.max_bytes,
            });
        }
        parse_stream(body, false, limits)
    }
}

/// Returns where to look for a site's sitemaps, in order and without duplicates: the
/// `Sitemap` lines of its robots.txt (any host), then `/sitemap.xml` and `/sitemap_index.xml`
/// at the seed's origin. Empty for a seed that is not `http(s)`.
pub fn sitemap_candidates(seed: &Url, robots: Option<&Robots>) -> Vec<Url> {
    if !matches!(seed.scheme(), "http" | "https") || !seed.has_host() {
        return Vec::new();
    }
    let listed = robots
        .map(Robots::sitemaps)
        .unwrap_or_default()
        .iter()
        .cloned();
    let conventional = ["/sitemap.xml", "/sitemap_index.xml"]
        .into_iter()
        .filter_map(|path| seed.join(path).ok());
    let mut seen = HashSet::new();
    listed
        .chain(conventional)
        .filter(|url| seen.insert(crawl_key(url)))
        .collect()
}

/// A reader that yields at most `remaining` bytes and then fails if the inner reader has more.
struct Capped<R> {
    inner: R,
    remaining: u64,
}

/// The error a [`Capped`] reader fails with once its limit is passed.
#[derive(Debug)]
struct CapExceeded;

impl std::fmt::Display for CapExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("decompressed size limit reached")
    }
}

impl std::error::Error for CapExceeded {}

impl<R: Read> Read for Capped<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        if self.remaining == 0 {
            // Exactly at the limit: fine if the stream ends here, a breach if it goes on.
            let mut probe = [0u8; 1];
            return match self.inner.read(&mut probe)? {
                0 => Ok(0),
                _ => Err(io::Error::other(CapExceeded)),
            };
        }
        let allowed = buf
            .len()
            .min(usize::try_from(self.remaining).unwrap_or(usize::MAX));
        let read = self.inner.read(&mut buf[..allowed])?;
        self.remaining -= read as u64;
        Ok(read)
    }
}

/// Maps a read failure: the cap is [`SitemapError::TooLarge`]; anything else can only come from
/// the gzip decoder (plain bodies are in memory).
fn read_failure(error: &io::Error, limits: &SitemapLimits) -> SitemapError {
    if error
        .get_ref()
        .is_some_and(|inner| inner.is::<CapExceeded>())
    {
        SitemapError::TooLarge {
            limit: limits.max_bytes,
        }
    } else {
        SitemapError::Gzip(error.to_string())
    }
}

fn parse_stream<R: BufRead>(
    mut input: R,
    gzipped: bool,
    limits: &SitemapLimits,
) -> Result<Sitemap, SitemapError> {
    let first = skip_preamble(&mut input).map_err(|error| read_failure(&error, limits))?;
    let mut sitemap = Sitemap {
        format: SitemapFormat::Text,
        gzipped,
        urls: Vec::new(),
        sitemaps: Vec::new(),
        skipped: 0,
        over_limit: 0,
        errors: 0,
    };
    if first == Some(b'<') {
        parse_xml(input, limits, &mut sitemap)?;
    } else {
        parse_text(input, limits, &mut sitemap)?;
    }
    Ok(sitemap)
}

/// Consumes a UTF-8 byte-order mark and leading whitespace; returns the next byte, if any.
fn skip_preamble<R: BufRead>(input: &mut R) -> io::Result<Option<u8>> {
    let mut at_start = true;
    loop {
        let buffer = input.fill_buf()?;
        if buffer.is_empty() {
            return Ok(None);
        }
        let mut skip = 0;
        if at_start && buffer.starts_with(b"\xef\xbb\xbf") {
            skip = 3;
        }
        at_start = false;
        skip += buffer[skip..]
            .iter()
            .take_while(|byte| byte.is_ascii_whitespace())
            .count();
        if skip < buffer.len() {
            let next = buffer[skip];
            input.consume(skip);
            return Ok(Some(next));
        }
        let consumed = buffer.len();
        input.consume(consumed);
    }
}

fn parse_text<R: BufRead>(
    mut input: R,
    limits: &SitemapLimits,
    sitemap: &mut Sitemap,
) -> Result<(), SitemapError> {
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = input
            .read_until(b'\n', &mut line)
            .map_err(|error| read_failure(&error, limits))?;
        if read == 0 {
            return Ok(());
        }
        let Ok(text) = std::str::from_utf8(&line) else {
            sitemap.skipped += 1;
            continue;
        };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        match web_url(text) {
            Some(loc) => push_entry(sitemap, limits, Entry::Page { loc, lastmod: None }),
            None => sitemap.skipped += 1,
        }
    }
}

/// Which element of an entry the parser is inside.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Loc,
    Lastmod,
}

/// An entry being read: `<url>` or `<sitemap>`.
struct Open {
    is_sitemap: bool,
    loc: Option<String>,
    lastmod: Option<String>,
    field: Option<Field>,
    text: String,
    text_too_long: bool,
}

/// A finished, valid entry.
enum Entry {
    Page { loc: Url, lastmod: Option<String> },
    Nested(Url),
}

fn parse_xml<R: BufRead>(
    input: R,
    limits: &SitemapLimits,
    sitemap: &mut Sitemap,
) -> Result<(), SitemapError> {
    let mut reader = Reader::from_reader(input);
    let config = reader.config_mut();
    // Many sitemaps carry raw `&` in query strings; accept it as text.
    config.allow_dangling_amp = true;
    // End tags are checked here instead, so that a mismatch is counted and parsing goes on
    // with the structure it can still see.
    config.check_end_names = false;
    config.allow_unmatched_ends = true;
    let mut buffer = Vec::new();
    let mut depth: usize = 0;
    // Local names of the open elements down to the entries' fields (depth 3).
    let mut names: Vec<String> = Vec::new();
    let mut open: Option<Open> = None;
    let mut last_error_at: Option<u64> = None;
    loop {
        buffer.clear();
        let event = match reader.read_event_into(&mut buffer) {
            Ok(event) => event,
            Err(quick_xml::Error::Io(error)) => return Err(read_failure(&error, limits)),
            Err(_) => {
                sitemap.errors += 1;
                let position = reader.buffer_position();
                if sitemap.errors >= MAX_XML_ERRORS || last_error_at == Some(position) {
                    return Ok(());
                }
                last_error_at = Some(position);
                continue;
            }
        };
        match event {
            Event::Start(element) => {
                depth += 1;
                let name = element.local_name();
                if depth <= 3 {
                    names.push(name.as_ref().to_owned());
                }
                open_element(name.as_ref(), depth, &mut open, sitemap)?;
            }
            Event::Empty(element) => {
                let name = element.local_name();
                open_element(name.as_ref(), depth + 1, &mut open, sitemap)?;
                close_element(depth + 1, &mut open, limits, sitemap);
            }
            Event::End(element) => {
                if depth == 0 {
                    sitemap.errors += 1;
                    continue;
                }
                if depth <= 3 && names.pop().as_deref() != Some(element.local_name().as_ref()) {
                    sitemap.errors += 1;
                }
                close_element(depth, &mut open, limits, sitemap);
                depth -= 1;
            }
            Event::Text(text) if depth == 3 => {
                push_text(&mut open, &text.xml10_content());
            }
            Event::CData(data) if depth == 3 => {
                push_text(&mut open, &data.xml10_content());
            }
            Event::GeneralRef(reference) if depth == 3 => {
                let resolved = match reference.resolve_char_ref() {
                    Ok(Some(character)) => Some(character.to_string()),
                    Ok(None) => {
                        quick_xml::escape::resolve_predefined_entity(&reference).map(str::to_owned)
                    }
                    Err(_) => None,
                };
                match resolved {
                    Some(text) => push_text(&mut open, &text),
                    None => sitemap.errors += 1,
                }
            }
            Event::Eof => {
                if depth > 0 {
                    // The file ended inside an element: it was cut short.
                    sitemap.errors += 1;
                }
                return Ok(());
            }
            _ => {}
        }
    }
}

/// Handles an opening tag at `depth` (the root is 1).
fn open_element(
    name: &str,
    depth: usize,
    open: &mut Option<Open>,
    sitemap: &mut Sitemap,
) -> Result<(), SitemapError> {
    match depth {
        1 => match name {
            "urlset" => sitemap.format = SitemapFormat::UrlSet,
            "sitemapindex" => sitemap.format = SitemapFormat::Index,
            // A second, foreign root after a sitemap's: junk after the document.
            _ if sitemap.format != SitemapFormat::Text => sitemap.errors += 1,
            _ => {
                let root = name.chars().take(64).collect();
                return Err(SitemapError::NotSitemap { root });
            }
        },
        2 => {
            *open = match name {
                "url" => Some(Open::new(false)),
                "sitemap" => Some(Open::new(true)),
                _ => None,
            };
        }
        3 => {
            if let Some(entry) = open.as_mut() {
                entry.field = match name {
                    "loc" => Some(Field::Loc),
                    "lastmod" => Some(Field::Lastmod),
                    _ => None,
                };
                entry.text.clear();
                entry.text_too_long = false;
            }
        }
        _ => {}
    }
    Ok(())
}

/// Handles a closing tag at `depth`.
fn close_element(
    depth: usize,
    open: &mut Option<Open>,
    limits: &SitemapLimits,
    sitemap: &mut Sitemap,
) {
    match depth {
        2 => {
            if let Some(entry) = open.take() {
                finish_entry(entry, limits, sitemap);
            }
        }
        3 => {
            if let Some(entry) = open.as_mut() {
                let text = std::mem::take(&mut entry.text);
                let value = (!entry.text_too_long).then(|| text.trim().to_owned());
                match entry.field.take() {
                    // The first `loc` counts, even if it is bad; a long one is remembered as bad.
                    Some(Field::Loc) if entry.loc.is_none() => {
                        entry.loc = Some(value.unwrap_or_default());
                    }
                    Some(Field::Lastmod) if entry.lastmod.is_none() => {
                        entry.lastmod = value.filter(|lastmod| {
                            !lastmod.is_empty() && lastmod.len() <= MAX_LASTMOD_LEN
                        });
                    }
                    _ => {}
                }
            }
        }
        _ => {}
    }
}

fn push_text(open: &mut Option<Open>, text: &str) {
    let Some(entry) = open.as_mut() else {
        return;
    };
    if entry.field.is_none() || entry.text_too_long {
        return;
    }
    // Whitespace around the value is trimmed later, so allow some slack for it.
    if entry.text.len() + text.len() > MAX_LOC_LEN + 256 {
        entry.text_too_long = true;
        entry.text.clear();
        return;
    }
    entry.text.push_str(text);
}

fn finish_entry(entry: Open, limits: &SitemapLimits, sitemap: &mut Sitemap) {
    let Some(loc) = entry.loc.as_deref().and_then(web_url) else {
        sitemap.skipped += 1;
        return;
    };
    let finished = if entry.is_sitemap {
        Entry::Nested(loc)
    } else {
        Entry::Page {
            loc,
            lastmod: entry.lastmod,
        }
    };
    push_entry(sitemap, limits, finished);
}

fn push_entry(sitemap: &mut Sitemap, limits: &SitemapLimits, entry: Entry) {
    if sitemap.urls.len() + sitemap.sitemaps.len() >= limits.max_entries {
        sitemap.over_limit += 1;
        return;
    }
    match entry {
        Entry::Page { loc, lastmod } => sitemap.urls.push(SitemapUrl { loc, lastmod }),
        Entry::Nested(loc) => sitemap.sitemaps.push(loc),
    }
}

/// Parses an absolute `http(s)` URL with a host, at most [`MAX_LOC_LEN`] bytes.
fn web_url(text: &str) -> Option<Url> {
    if text.is_empty() || text.len() > MAX_LOC_LEN {
        return None;
    }
    let url = Url::parse(text).ok()?;
    (matches!(url.scheme(), "http" | "https") && url.has_host()).then_some(url)
}

impl Open {
    fn new(is_sitemap: bool) -> Open {
        Open {
            is_sitemap,
            loc: None,
            lastmod: None,
            field: None,
            text: String::new(),
            text_too_long: false,
        }
    }
}

#[cfg(test)]
mod tests;
