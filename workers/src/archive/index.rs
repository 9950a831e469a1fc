//! The archive's full-text index: one tantivy document per chunk, every fetch of a URL kept as a
//! version, BM25 search over the latest versions (or over the archive as it was at a time).
//!
//! Versions: each fetch of a URL is a version with its own `page_id`, and each version is valid
//! from its `fetched_at` until `valid_until` (the next version's `fetched_at`, or [`FAR_FUTURE`]
//! for the latest). Default search sees the latest version of each URL; `as_of` sees the
//! versions with `fetched_at <= as_of < valid_until`. [`ArchiveWriter::add_page`] keeps these
//! windows consistent, including for versions that arrive out of order; the rule is on that
//! method.
//!
//! Schema (one document per chunk): `chunk_id` ("{page_id}:{index}"), `page_id` (also a fast
//! field, for the per-page collapse), `url`, `host` (lowercased, also fast), `lang`,
//! `content_hash`: untokenized strings, stored. `title`, `headings` (one value per heading of
//! the chunk's path, outermost first), `text`: tokenized with tantivy's `default` tokenizer
//! (split on non-alphanumerics, lowercase; no stemming, so every language is treated alike),
//! with positions (phrase queries), stored. `fetched_at` (indexed, stored, fast) and
//! `valid_until` (indexed, fast, not stored): dates, microsecond precision in the fast fields,
//! second precision in the inverted index. `chunk_index`: stored u64.
//!
//! Search: BM25 over `title`, `headings` and `text`, pruned with block-max WAND. The filters
//! (host, dates, latest / as-of) are checked on fast fields while collecting rather than added
//! as query clauses, which would turn off the pruning; per-page collapse ranks more candidates
//! than asked and keeps at most `per_page` per `page_id`. Stored documents are read and
//! snippets made for the final hits only.
//!
//! Everything here is blocking CPU and disk work: call it from a blocking thread.
//!
//! Not here: chunking (`archive::chunk`), deciding what to archive, or the HTTP API.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tantivy::collector::{Collector, Count, DocSetCollector, SegmentCollector};
use tantivy::columnar::{Column, StrColumn};
use tantivy::directory::MmapDirectory;
use tantivy::directory::error::LockError;
use tantivy::query::{BooleanQuery, ConstScoreQuery, Occur, Query, QueryParser, TermQuery, Weight};
use tantivy::schema::{
    DateOptions, DateTimePrecision, FAST, Field, IndexRecordOption, STORED, STRING, Schema, TEXT,
    Value,
};
use tantivy::snippet::SnippetGenerator;
use tantivy::{
    DateTime, DocAddress, DocId, Index, IndexReader, IndexWriter, ReloadPolicy, Score, Searcher,
    SegmentReader, TantivyDocument, TantivyError, Term,
};

use crate::archive::chunk::Chunk;

/// `valid_until` of the latest version of a URL: 2200-01-01T00:00:00Z, in microseconds since
/// the Unix epoch (tantivy dates end in 2262). Timestamps at or after it are clamped below it.
pub const FAR_FUTURE: i64 = 7_258_118_400 * 1_000_000;

/// The earliest instant tantivy can hold, in microseconds (earlier timestamps are clamped).
const MIN_MICROS: i64 = i64::MIN / 1_000 + 1;

/// Most hits one search returns, whatever `k` asks.
pub const MAX_K: usize = 100;

/// Most candidates one search ranks before the per-page collapse gives up growing.
const MAX_CANDIDATES: usize = 10_000;

/// First candidate count of a collapsing search is capped at this.
const MAX_FIRST_CANDIDATES: usize = 1_000;

/// Characters of chunk text in a hit's snippet.
const SNIPPET_CHARS: usize = 200;

/// Query-time boost of the `title` field over `text`.
const TITLE_BOOST: f32 = 1.5;

/// Query-time boost of the `headings` field over `text`.
const HEADINGS_BOOST: f32 = 1.3;

/// Why an index operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The search query is empty or did not parse; the message is fit for a 400 response.
    #[error("bad query: {0}")]
    Query(String),
    /// Another writer holds the index lock (one writer per index, in any process).
    #[error("the archive index already has a writer")]
    Busy,
    /// The directory holds an index with another schema, or a document did not fit the schema.
    #[error("archive index schema: {0}")]
    Schema(String),
    /// tantivy failed.
    #[error("archive index: {0}")]
    Index(TantivyError),
    /// The filesystem failed.
    #[error("archive index io: {0}")]
    Io(#[from] std::io::Error),
}

impl From<TantivyError> for Error {
    fn from(e: TantivyError) -> Self {
        match e {
            TantivyError::LockFailure(LockError::LockBusy, _) => Error::Busy,
            TantivyError::SchemaError(msg) => Error::Schema(msg),
            other => Error::Index(other),
        }
    }
}

/// One fetched version of a page, ready to index: its metadata and its chunks.
#[derive(Debug, Clone, Copy)]
pub struct PageDoc<'a> {
    /// Identifier of this version (one fetch of `url`); unique across the archive.
    pub page_id: &'a str,
    /// The page's URL, exactly as stored (versions of a page share it).
    pub url: &'a str,
    /// The URL's host, filterable by exact (ASCII case-insensitive) match.
    pub host: &'a str,
    /// The page title, when it has one.
    pub title: Option<&'a str>,
    /// When this version was fetched.
    pub fetched_at: jiff::Timestamp,
    /// The page's language tag, when known.
    pub lang: Option<&'a str>,
    /// Hash of the page content; a new version with the latest one's hash is not indexed.
    pub content_hash: &'a str,
    /// The page's chunks, one document each.
    pub chunks: &'a [Chunk],
}

/// What [`ArchiveWriter::add_page`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Added {
    /// The version was indexed (visible after the next commit).
    Indexed {
        /// Chunks of this version written.
        chunks: usize,
        /// Chunks of the version it superseded whose validity window was closed (rewritten with
        /// the new `valid_until`); 0 for a URL's first version.
        replaced: usize,
    },
    /// Nothing was written: this `page_id` is already indexed, or the version it would follow
    /// has the same content hash.
    Unchanged,
}

/// A search: the query text, filters and result shape.
#[derive(Debug, Clone)]
pub struct SearchQuery {
    /// tantivy query language over `title`, `headings` and `text`: terms (any may match; more
    /// matches rank higher), `+must`, `-must_not`, `"phrases"`, `field:value`, `AND`/`OR`.
    pub text: String,
    /// Only chunks of pages from this host (exact, ASCII case-insensitive).
    pub host: Option<String>,
    /// Only versions fetched at or after this instant.
    pub after: Option<jiff::Timestamp>,
    /// Only versions fetched strictly before this instant.
    pub before: Option<jiff::Timestamp>,
    /// Search the archive as it was at this instant (the version of each URL valid then)
    /// instead of the latest versions.
    pub as_of: Option<jiff::Timestamp>,
    /// Hits wanted; clamped to `1..=MAX_K`.
    pub k: usize,
    /// Most chunks of one page in the hits (default 2); 0 means no limit.
    pub per_page: usize,
}

impl SearchQuery {
    /// A search for `text` with the defaults: latest versions, no filters, 10 hits, 2 per page.
    pub fn new(text: impl Into<String>) -> Self {
        SearchQuery {
            text: text.into(),
            ..SearchQuery::default()
        }
    }
}

impl Default for SearchQuery {
    fn default() -> Self {
        SearchQuery {
            text: String::new(),
            host: None,
            after: None,
            before: None,
            as_of: None,
            k: 10,
            per_page: 2,
        }
    }
}

/// One matching chunk.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Hit {
    /// "{page_id}:{chunk index}".
    pub chunk_id: String,
    /// The version (fetch) the chunk belongs to.
    pub page_id: String,
    /// The page's URL.
    pub url: String,
    /// The page title, when it has one.
    pub title: Option<String>,
    /// The chunk's heading path, outermost first.
    pub headings: Vec<String>,
    /// The chunk's text.
    pub text: String,
    /// About 200 characters of `text` around the best match, HTML-escaped, matched terms in
    /// `<b>…</b>`; the start of `text` (escaped, no `<b>`) when only title or headings matched.
    pub snippet: String,
    /// BM25 score (filters add nothing).
    pub score: f32,
    /// When the version was fetched, RFC 3339.
    pub fetched_at: String,
    /// The page's language tag, when known.
    pub lang: Option<String>,
}

/// The schema's fields.
#[derive(Debug, Clone, Copy)]
struct Fields {
    chunk_id: Field,
    page_id: Field,
    url: Field,
    host: Field,
    title: Field,
    headings: Field,
    text: Field,
    fetched_at: Field,
    valid_until: Field,
    lang: Field,
    content_hash: Field,
    chunk_index: Field,
}

const PAGE_ID: &str = "page_id";
const HOST: &str = "host";
const FETCHED_AT: &str = "fetched_at";
const VALID_UNTIL: &str = "valid_until";

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let date = DateOptions::default()
        .set_indexed()
        .set_fast()
        .set_precision(DateTimePrecision::Microseconds);
    let fields = Fields {
        chunk_id: b.add_text_field("chunk_id", STRING | STORED),
        page_id: b.add_text_field(PAGE_ID, STRING | STORED | FAST),
        url: b.add_text_field("url", STRING | STORED),
        host: b.add_text_field(HOST, STRING | STORED | FAST),
        title: b.add_text_field("title", TEXT | STORED),
        headings: b.add_text_field("headings", TEXT | STORED),
        text: b.add_text_field("text", TEXT | STORED),
        fetched_at: b.add_date_field(FETCHED_AT, date.clone().set_stored()),
        valid_until: b.add_date_field(VALID_UNTIL, date),
        lang: b.add_text_field("lang", STRING | STORED),
        content_hash: b.add_text_field("content_hash", STRING | STORED),
        chunk_index: b.add_u64_field("chunk_index", STORED),
    };
    (b.build(), fields)
}

/// Microseconds since the epoch, clamped to what tantivy holds and below [`FAR_FUTURE`].
fn micros(ts: jiff::Timestamp) -> i64 {
    ts.as_microsecond().clamp(MIN_MICROS, FAR_FUTURE - 1)
}

fn date(micros: i64) -> DateTime {
    DateTime::from_timestamp_micros(micros)
}

/// The archive's chunk index: a cheap, clonable handle for searching, and the way to its one
/// writer.
#[derive(Clone)]
pub struct ArchiveIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    parser: Arc<QueryParser>,
}

impl std::fmt::Debug for ArchiveIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveIndex")
            .field("num_chunks", &self.num_chunks())
            .finish_non_exhaustive()
    }
}

impl ArchiveIndex {
    /// Opens the index in `dir`, creating the directory and an empty index when there is none.
    /// An index with another schema is [`Error::Schema`].
    pub fn open_or_create(dir: &Path) -> Result<Self, Error> {
        std::fs::create_dir_all(dir)?;
        let (schema, fields) = schema();
        let directory = MmapDirectory::open(dir).map_err(TantivyError::from)?;
        let index = Index::open_or_create(directory, schema).map_err(|e| match e {
            TantivyError::SchemaError(msg) => Error::Schema(format!("{}: {msg}", dir.display())),
            other => Error::from(other),
        })?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::OnCommitWithDelay)
            .try_into()?;
        // Disjunction by default (any term may match, BM25 ranks chunks with more of them
        // higher): agents ask in natural language, and the best passage rarely holds every
        // word of the question. `+term` makes a term required.
        let mut parser =
            QueryParser::for_index(&index, vec![fields.title, fields.headings, fields.text]);
        parser.set_field_boost(fields.title, TITLE_BOOST);
        parser.set_field_boost(fields.headings, HEADINGS_BOOST);
        Ok(ArchiveIndex {
            index,
            reader,
            fields,
            parser: Arc::new(parser),
        })
    }

    /// The index's one writer, with `heap_bytes` of indexing memory (at least 15 MB; tantivy
    /// splits it over up to 8 threads of at least 15 MB each). [`Error::Busy`] while another
    /// writer, in this process or another, holds the lock.
    pub fn writer(&self, heap_bytes: usize) -> Result<ArchiveWriter, Error> {
        let writer = self.index.writer::<TantivyDocument>(heap_bytes)?;
        Ok(ArchiveWriter {
            index: self.clone(),
            writer,
            urls: HashMap::new(),
            pages: HashSet::new(),
            pending: 0,
            since: None,
        })
    }

    /// Makes the last commit visible to searches now. [`ArchiveWriter::commit`] already does;
    /// this is for a process that only reads while another one writes (it would otherwise see
    /// the commit after a short delay).
    pub fn reload(&self) -> Result<(), Error> {
        self.reader.reload()?;
        Ok(())
    }

    /// Chunks in the index, all versions, as of the last reload.
    pub fn num_chunks(&self) -> u64 {
        self.reader.searcher().num_docs()
    }

    /// The best chunks for `q`, best first, at most `per_page` of them from one page.
    ///
    /// Empty or unparsable query text is [`Error::Query`].
    pub fn search(&self, q: &SearchQuery) -> Result<Vec<Hit>, Error> {
        let text = q.text.trim();
        if text.is_empty() {
            return Err(Error::Query("the query is empty".to_string()));
        }
        let parsed = self
            .parser
            .parse_query(text)
            .map_err(|e| Error::Query(e.to_string()))?;
        let f = &self.fields;
        let k = q.k.clamp(1, MAX_K);

        let filter = Filter {
            host: q.host.as_ref().map(|h| h.to_ascii_lowercase()),
            after: q.after.map(micros),
            before: q.before.map(micros),
            as_of: q.as_of.map(micros),
        };

        // A host is also a required term of the query: its (usually short) posting list then
        // drives the search, where checking it per document while collecting would score
        // every match of a common word before k matches from that host turned up. It scores
        // nothing, so ranks are the same.
        let query: Box<dyn Query> = match &filter.host {
            Some(host) => Box::new(BooleanQuery::new(vec![
                (Occur::Must, parsed.box_clone()),
                (
                    Occur::Must,
                    Box::new(ConstScoreQuery::new(
                        Box::new(TermQuery::new(
                            Term::from_field_text(f.host, host),
                            IndexRecordOption::Basic,
                        )),
                        0.0,
                    )),
                ),
            ])),
            None => parsed.box_clone(),
        };
        let searcher = self.reader.searcher();
        let top = if q.per_page == 0 || q.per_page >= k {
            searcher.search(&*query, &FilteredTop { limit: k, filter })?
        } else {
            collapsed_top(&searcher, &*query, &filter, k, q.per_page)?
        };
        if top.is_empty() {
            return Ok(Vec::new());
        }

        let mut snippets = SnippetGenerator::create(&searcher, &*parsed, f.text)?;
        snippets.set_max_num_chars(SNIPPET_CHARS);
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
            let text = first_str(&doc, f.text).unwrap_or_default();
            let snippet = snippets.snippet_from_doc(&doc);
            let snippet = if snippet.is_empty() {
                head_snippet(&text, SNIPPET_CHARS)
            } else {
                snippet.to_html()
            };
            let fetched_at = doc
                .get_first(f.fetched_at)
                .and_then(|v| v.as_datetime())
                .and_then(|d| jiff::Timestamp::from_microsecond(d.into_timestamp_micros()).ok())
                .map(|t| t.to_string())
                .unwrap_or_default();
            hits.push(Hit {
                chunk_id: first_str(&doc, f.chunk_id).unwrap_or_default(),
                page_id: first_str(&doc, f.page_id).unwrap_or_default(),
                url: first_str(&doc, f.url).unwrap_or_default(),
                title: first_str(&doc, f.title),
                headings: doc
                    .get_all(f.headings)
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect(),
                text,
                snippet,
                score,
                fetched_at,
                lang: first_str(&doc, f.lang),
            });
        }
        Ok(hits)
    }
}

/// Chunks of latest versions: `valid_until` = [`FAR_FUTURE`] (a term of the inverted index).
fn latest_query(f: &Fields) -> Box<dyn Query> {
    Box::new(TermQuery::new(
        Term::from_field_date_for_search(f.valid_until, date(FAR_FUTURE)),
        IndexRecordOption::Basic,
    ))
}

/// The top `k` of `query` with at most `per_page` chunks per `page_id`: ranks more candidates
/// than `k` (growing ×4 until `k` survive the collapse, the matches run out, or
/// `MAX_CANDIDATES` were ranked) and keeps them in score order. Reads only fast fields.
fn collapsed_top(
    searcher: &Searcher,
    query: &dyn Query,
    filter: &Filter,
    k: usize,
    per_page: usize,
) -> Result<Vec<(f32, DocAddress)>, Error> {
    let mut columns: HashMap<u32, Option<StrColumn>> = HashMap::new();
    // (segment, term ordinal) → page number; page_id → page number (pages span segments).
    let mut by_ord: HashMap<(u32, u64), usize> = HashMap::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    let mut limit = k
        .saturating_mul(per_page)
        .saturating_mul(4)
        .min(MAX_FIRST_CANDIDATES)
        .max(k);
    let mut page_id = String::new();
    loop {
        let mut anonymous = usize::MAX;
        let candidates = searcher.search(
            query,
            &FilteredTop {
                limit,
                filter: filter.clone(),
            },
        )?;
        let exhausted = candidates.len() < limit;
        let mut counts: HashMap<usize, usize> = HashMap::new();
        let mut kept = Vec::with_capacity(k);
        for (score, addr) in candidates {
            let seg = addr.segment_ord;
            let column = match columns.get(&seg) {
                Some(c) => c,
                None => {
                    let c = searcher.segment_reader(seg).fast_fields().str(PAGE_ID)?;
                    columns.entry(seg).or_insert(c)
                }
            };
            // A document without a page_id (never written so) counts as its own page.
            let page = match column
                .as_ref()
                .and_then(|c| c.term_ords(addr.doc_id).next())
            {
                Some(ord) => match by_ord.get(&(seg, ord)) {
                    Some(&page) => page,
                    None => {
                        page_id.clear();
                        if let Some(c) = column {
                            c.ord_to_str(ord, &mut page_id)?;
                        }
                        let next = by_id.len();
                        let page = *by_id.entry(page_id.clone()).or_insert(next);
                        by_ord.insert((seg, ord), page);
                        page
                    }
                },
                None => {
                    anonymous -= 1;
                    anonymous
                }
            };
            let count = counts.entry(page).or_insert(0);
            if *count < per_page {
                *count += 1;
                kept.push((score, addr));
                if kept.len() == k {
                    break;
                }
            }
        }
        if kept.len() == k || exhausted || limit >= MAX_CANDIDATES {
            return Ok(kept);
        }
        limit = limit.saturating_mul(4).min(MAX_CANDIDATES);
    }
}

/// Search filters, checked on fast fields while collecting (times in microseconds).
///
/// Filters are not query clauses: a conjunction with them would keep tantivy from pruning with
/// block-max WAND, and scoring every match of a common word in a million chunks is too slow.
#[derive(Debug, Clone)]
struct Filter {
    host: Option<String>,
    after: Option<i64>,
    before: Option<i64>,
    as_of: Option<i64>,
}

/// The best `limit` documents by score among those passing `filter`, best first (ties: lower
/// address first). Collects with `Weight::for_each_pruning`, so unions of terms are pruned
/// with block-max WAND against the filtered top's threshold.
struct FilteredTop {
    limit: usize,
    filter: Filter,
}

impl Collector for FilteredTop {
    type Fruit = Vec<(Score, DocAddress)>;
    type Child = FilteredTopSegment;

    fn for_segment(
        &self,
        segment_ord: u32,
        reader: &SegmentReader,
    ) -> tantivy::Result<Self::Child> {
        Ok(FilteredTopSegment {
            segment_ord,
            filter: SegmentFilter::new(&self.filter, reader)?,
            top: BinaryHeap::with_capacity(self.limit + 1),
            limit: self.limit,
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Self::Fruit>) -> tantivy::Result<Self::Fruit> {
        let mut all: Vec<(Score, DocAddress)> = fruits.into_iter().flatten().collect();
        all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        all.truncate(self.limit);
        Ok(all)
    }

    fn collect_segment(
        &self,
        weight: &dyn Weight,
        segment_ord: u32,
        reader: &SegmentReader,
    ) -> tantivy::Result<Self::Fruit> {
        let mut segment = self.for_segment(segment_ord, reader)?;
        if segment.filter.is_none() {
            return Ok(Vec::new());
        }
        let alive = reader.alive_bitset();
        let mut threshold = Score::MIN;
        weight.for_each_pruning(Score::MIN, reader, &mut |doc, score| {
            if !alive.is_some_and(|a| a.is_deleted(doc)) {
                segment.collect(doc, score);
                threshold = segment.threshold();
            }
            threshold
        })?;
        Ok(segment.harvest())
    }
}

/// A (score, doc) ordered by score, then lower doc first; in a `Reverse` heap the root is the
/// worst kept.
#[derive(Debug, Clone, Copy)]
struct Scored(Score, DocId);

impl PartialEq for Scored {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == std::cmp::Ordering::Equal
    }
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0).then(other.1.cmp(&self.1))
    }
}

struct FilteredTopSegment {
    segment_ord: u32,
    /// `None`: no document of this segment can pass.
    filter: Option<SegmentFilter>,
    top: BinaryHeap<Reverse<Scored>>,
    limit: usize,
}

impl FilteredTopSegment {
    /// Scores at or below this cannot enter the top any more.
    fn threshold(&self) -> Score {
        match self.top.peek() {
            Some(Reverse(worst)) if self.top.len() >= self.limit => worst.0,
            _ => Score::MIN,
        }
    }
}

impl SegmentCollector for FilteredTopSegment {
    type Fruit = Vec<(Score, DocAddress)>;

    fn collect(&mut self, doc: DocId, score: Score) {
        if !self.filter.as_ref().is_some_and(|f| f.matches(doc)) {
            return;
        }
        let scored = Scored(score, doc);
        if self.top.len() < self.limit {
            self.top.push(Reverse(scored));
        } else if self
            .top
            .peek()
            .is_some_and(|Reverse(worst)| scored > *worst)
        {
            self.top.pop();
            self.top.push(Reverse(scored));
        }
    }

    fn harvest(self) -> Self::Fruit {
        let segment_ord = self.segment_ord;
        self.top
            .into_sorted_vec()
            .into_iter()
            .map(|Reverse(Scored(score, doc))| (score, DocAddress::new(segment_ord, doc)))
            .collect()
    }
}

/// [`Filter`] bound to one segment's fast-field columns.
struct SegmentFilter {
    /// Term-ordinal column of `host`, and the wanted host's ordinal in this segment.
    host: Option<(Column<u64>, u64)>,
    fetched_at: Column<DateTime>,
    valid_until: Column<DateTime>,
    after: Option<i64>,
    before: Option<i64>,
    as_of: Option<i64>,
}

impl SegmentFilter {
    /// `None` when no document of the segment can pass (the host does not occur in it).
    fn new(filter: &Filter, reader: &SegmentReader) -> tantivy::Result<Option<Self>> {
        let fast = reader.fast_fields();
        let host = match &filter.host {
            None => None,
            Some(host) => {
                let Some(column) = fast.str(HOST)? else {
                    return Ok(None);
                };
                let Some(ord) = column.dictionary().term_ord(host)? else {
                    return Ok(None);
                };
                Some((column.ords().clone(), ord))
            }
        };
        Ok(Some(SegmentFilter {
            host,
            fetched_at: fast.date(FETCHED_AT)?,
            valid_until: fast.date(VALID_UNTIL)?,
            after: filter.after,
            before: filter.before,
            as_of: filter.as_of,
        }))
    }

    fn matches(&self, doc: DocId) -> bool {
        if let Some((column, ord)) = &self.host
            && column.first(doc) != Some(*ord)
        {
            return false;
        }
        let micros =
            |column: &Column<DateTime>| column.first(doc).map(|d| d.into_timestamp_micros());
        let valid_until = micros(&self.valid_until).unwrap_or(FAR_FUTURE);
        match self.as_of {
            None if valid_until < FAR_FUTURE => return false,
            None => {}
            Some(at) if valid_until <= at => return false,
            Some(_) => {}
        }
        if self.after.is_none() && self.before.is_none() && self.as_of.is_none() {
            return true;
        }
        let Some(fetched_at) = micros(&self.fetched_at) else {
            return false;
        };
        self.as_of.is_none_or(|at| fetched_at <= at)
            && self.after.is_none_or(|t| fetched_at >= t)
            && self.before.is_none_or(|t| fetched_at < t)
    }
}

fn first_str(doc: &TantivyDocument, field: Field) -> Option<String> {
    doc.get_first(field)
        .and_then(|v| v.as_str().map(str::to_string))
}

/// The first `max_chars` characters of `text` (cut at a space when one is near), HTML-escaped,
/// with "…" when cut.
fn head_snippet(text: &str, max_chars: usize) -> String {
    let text = text.trim();
    let cut = match text.char_indices().nth(max_chars) {
        None => text,
        Some((end, _)) => {
            let head = &text[..end];
            match head.rfind(char::is_whitespace) {
                Some(space) if space >= end / 2 => &head[..space],
                _ => head,
            }
        }
    };
    let mut out = String::with_capacity(cut.len() + 8);
    for c in cut.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#x27;"),
            c => out.push(c),
        }
    }
    if cut.len() < text.len() {
        out.push('…');
    }
    out
}

/// One version of a URL as the writer knows it.
#[derive(Debug)]
struct Version {
    page_id: String,
    content_hash: String,
    fetched_at: i64,
    valid_until: i64,
    /// Its chunk documents, stored fields only (no `valid_until`), in chunk order.
    docs: Vec<TantivyDocument>,
}

/// What the writer knows of one URL's versions since the last commit: every version it
/// wrote or rewrote, plus the ones read from the index. `complete` when all committed versions
/// were read; otherwise only the committed latest one was.
#[derive(Debug, Default)]
struct UrlState {
    versions: Vec<Version>,
    complete: bool,
}

impl UrlState {
    fn latest(&self) -> Option<&Version> {
        self.versions
            .iter()
            .filter(|v| v.valid_until == FAR_FUTURE)
            .max_by_key(|v| v.fetched_at)
    }
}

/// The index's one writer: adds versions of pages and commits them in batches. Until
/// [`commit`](Self::commit), adds are invisible to searches and the writer remembers the
/// versions it wrote so that later adds of the same URL build on them. Dropping it without
/// committing discards the uncommitted adds.
pub struct ArchiveWriter {
    index: ArchiveIndex,
    writer: IndexWriter<TantivyDocument>,
    /// URLs written since the last commit.
    urls: HashMap<String, UrlState>,
    /// page_ids written since the last commit.
    pages: HashSet<String>,
    /// Pages indexed since the last commit.
    pending: usize,
    /// When the first of them was.
    since: Option<Instant>,
}

impl std::fmt::Debug for ArchiveWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArchiveWriter")
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

impl ArchiveWriter {
    /// Writes one version of a page (visible after the next commit).
    ///
    /// The rule: a `page_id` already indexed (committed, or written since the last commit) is
    /// [`Added::Unchanged`], so re-runs after a crash are harmless. Otherwise the version
    /// `V` of the URL valid at the new `fetched_at` (`V.fetched_at <= fetched_at <
    /// V.valid_until`; for a newer fetch that is the latest version) is looked up:
    /// - same `content_hash` as `V`: [`Added::Unchanged`], nothing written;
    /// - else `V`'s chunks are rewritten with `valid_until` = the new `fetched_at` (deleted by
    ///   their `page_id` term and re-added from their stored fields), and the new chunks get
    ///   `V`'s old `valid_until` (so a newer fetch becomes the latest, an older one is inserted
    ///   into history);
    /// - with no such `V` (a URL's first version, or one older than all its versions): the new
    ///   chunks are valid until the URL's earliest later `fetched_at`, or [`FAR_FUTURE`].
    ///
    /// A page without chunks writes nothing of its own but still closes `V`'s window (the
    /// URL drops out of default search). Ties: a fetch at the same instant as `V` replaces it.
    ///
    /// Each call runs a few term lookups on the committed index and reads the stored chunks of
    /// the version it closes. After an error the writer's state is unknown: drop it.
    pub fn add_page(&mut self, page: &PageDoc<'_>) -> Result<Added, Error> {
        if self.pages.contains(page.page_id) {
            return Ok(Added::Unchanged);
        }
        let searcher = self.index.reader.searcher();
        let f = self.index.fields;
        let page_term = Term::from_field_text(f.page_id, page.page_id);
        if searcher.search(&TermQuery::new(page_term, IndexRecordOption::Basic), &Count)? > 0 {
            return Ok(Added::Unchanged);
        }
        let at = micros(page.fetched_at);
        let url_term = Term::from_field_text(f.url, page.url);

        let was_pending = self.urls.contains_key(page.url);
        let mut state = match self.urls.remove(page.url) {
            Some(state) => state,
            None => {
                let latest = BooleanQuery::new(vec![
                    (
                        Occur::Must,
                        Box::new(TermQuery::new(url_term.clone(), IndexRecordOption::Basic))
                            as Box<dyn Query>,
                    ),
                    (Occur::Must, latest_query(&f)),
                ]);
                UrlState {
                    versions: self.load_versions(&searcher, &latest)?,
                    complete: false,
                }
            }
        };
        let newest = state.latest().is_some_and(|v| v.fetched_at <= at);
        if !newest && !state.complete {
            let all = TermQuery::new(url_term, IndexRecordOption::Basic);
            for version in self.load_versions(&searcher, &all)? {
                if !state.versions.iter().any(|v| v.page_id == version.page_id) {
                    state.versions.push(version);
                }
            }
            state.complete = true;
        }

        let covering = state
            .versions
            .iter()
            .enumerate()
            .filter(|(_, v)| v.fetched_at <= at && at < v.valid_until)
            .max_by_key(|(_, v)| v.fetched_at)
            .map(|(i, _)| i);
        let result = self.write_version(page, at, &mut state, covering);
        // Keep what was read only when something was written: unchanged pages must not grow
        // the writer's memory between commits.
        if was_pending || matches!(result, Ok(Added::Indexed { .. })) {
            self.urls.insert(page.url.to_string(), state);
        }
        result
    }

    fn write_version(
        &mut self,
        page: &PageDoc<'_>,
        at: i64,
        state: &mut UrlState,
        covering: Option<usize>,
    ) -> Result<Added, Error> {
        let f = self.index.fields;
        let (valid_until, replaced) = match covering {
            Some(i) => {
                let v = &mut state.versions[i];
                if v.content_hash == page.content_hash {
                    return Ok(Added::Unchanged);
                }
                let valid_until = v.valid_until;
                v.valid_until = at;
                self.writer
                    .delete_term(Term::from_field_text(f.page_id, &v.page_id));
                for doc in &v.docs {
                    self.add_doc(doc, at)?;
                }
                (valid_until, v.docs.len())
            }
            None => {
                let next = state
                    .versions
                    .iter()
                    .map(|v| v.fetched_at)
                    .filter(|&t| t > at)
                    .min()
                    .unwrap_or(FAR_FUTURE);
                (next, 0)
            }
        };
        let docs: Vec<TantivyDocument> = page
            .chunks
            .iter()
            .map(|chunk| chunk_doc(&f, page, at, chunk))
            .collect();
        for doc in &docs {
            self.add_doc(doc, valid_until)?;
        }
        let chunks = docs.len();
        state.versions.push(Version {
            page_id: page.page_id.to_string(),
            content_hash: page.content_hash.to_string(),
            fetched_at: at,
            valid_until,
            docs,
        });
        self.pages.insert(page.page_id.to_string());
        self.pending += 1;
        self.since.get_or_insert_with(Instant::now);
        Ok(Added::Indexed { chunks, replaced })
    }

    fn add_doc(&self, stored: &TantivyDocument, valid_until: i64) -> Result<(), Error> {
        let mut doc = stored.clone();
        doc.add_date(self.index.fields.valid_until, date(valid_until));
        self.writer.add_document(doc)?;
        Ok(())
    }

    /// The committed versions matching `query`, their documents grouped by `page_id`.
    fn load_versions(&self, searcher: &Searcher, query: &dyn Query) -> Result<Vec<Version>, Error> {
        let f = &self.index.fields;
        let addrs = searcher.search(query, &DocSetCollector)?;
        let mut columns = HashMap::new();
        let mut versions: HashMap<String, (Version, Vec<u64>)> = HashMap::new();
        for addr in addrs {
            let seg = addr.segment_ord;
            let column = match columns.get(&seg) {
                Some(c) => c,
                None => {
                    let c = searcher
                        .segment_reader(seg)
                        .fast_fields()
                        .date(VALID_UNTIL)?;
                    columns.entry(seg).or_insert(c)
                }
            };
            let valid_until = column
                .first(addr.doc_id)
                .map_or(FAR_FUTURE, |d| d.into_timestamp_micros());
            let doc: TantivyDocument = searcher.doc(addr)?;
            let page_id = first_str(&doc, f.page_id).unwrap_or_default();
            let index = doc
                .get_first(f.chunk_index)
                .and_then(|v| v.as_u64())
                .unwrap_or(0);
            let (version, order) = versions.entry(page_id.clone()).or_insert_with(|| {
                (
                    Version {
                        page_id,
                        content_hash: first_str(&doc, f.content_hash).unwrap_or_default(),
                        fetched_at: doc
                            .get_first(f.fetched_at)
                            .and_then(|v| v.as_datetime())
                            .map_or(0, |d| d.into_timestamp_micros()),
                        valid_until,
                        docs: Vec::new(),
                    },
                    Vec::new(),
                )
            });
            version.docs.push(doc);
            order.push(index);
        }
        Ok(versions
            .into_values()
            .map(|(mut version, order)| {
                let mut docs: Vec<(u64, TantivyDocument)> =
                    order.into_iter().zip(version.docs).collect();
                docs.sort_by_key(|(i, _)| *i);
                version.docs = docs.into_iter().map(|(_, d)| d).collect();
                version
            })
            .collect())
    }

    /// Pages indexed since the last commit.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Makes everything written so far durable and visible to searches (the reader is
    /// reloaded before this returns). After an error, drop the writer and open a new one.
    pub fn commit(&mut self) -> Result<(), Error> {
        self.writer.commit()?;
        self.urls.clear();
        self.pages.clear();
        self.pending = 0;
        self.since = None;
        self.index.reader.reload()?;
        Ok(())
    }

    /// Commits when at least `max_pages` pages are pending, or when the oldest pending page
    /// waited `max_age` or longer; returns whether it committed. Call it after each add and on
    /// a timer (it does not wake up by itself).
    pub fn commit_if_due(&mut self, max_pages: usize, max_age: Duration) -> Result<bool, Error> {
        let due = match self.since {
            None => false,
            Some(since) => self.pending >= max_pages || since.elapsed() >= max_age,
        };
        if due {
            self.commit()?;
        }
        Ok(due)
    }
}

/// A chunk's document, stored fields only (`valid_until` is added when written).
fn chunk_doc(f: &Fields, page: &PageDoc<'_>, at: i64, chunk: &Chunk) -> TantivyDocument {
    let mut doc = TantivyDocument::new();
    doc.add_text(f.chunk_id, format!("{}:{}", page.page_id, chunk.index));
    doc.add_text(f.page_id, page.page_id);
    doc.add_text(f.url, page.url);
    doc.add_text(f.host, page.host.to_ascii_lowercase());
    if let Some(title) = page.title.filter(|t| !t.is_empty()) {
        doc.add_text(f.title, title);
    }
    for heading in &chunk.headings {
        doc.add_text(f.headings, heading);
    }
    doc.add_text(f.text, &chunk.text);
    doc.add_date(f.fetched_at, date(at));
    if let Some(lang) = page.lang.filter(|l| !l.is_empty()) {
        doc.add_text(f.lang, lang);
    }
    doc.add_text(f.content_hash, page.content_hash);
    doc.add_u64(f.chunk_index, u64::from(chunk.index));
    doc
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;

    /// A fresh directory under the system temp dir, removed on drop.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(name: &str) -> Self {
            static N: AtomicU32 = AtomicU32::new(0);
            let path = std::env::temp_dir().join(format!(
                "trawl-index-{name}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&path);
            TempDir(path)
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    fn chunk(index: u32, headings: &[&str], text: &str) -> Chunk {
        Chunk {
            index,
            headings: headings.iter().map(|h| h.to_string()).collect(),
            text: text.to_string(),
            words: text.split_whitespace().count() as u32,
        }
    }

    /// An owned page, for building `PageDoc`s.
    struct Page {
        page_id: String,
        url: String,
        host: String,
        title: Option<String>,
        fetched_at: jiff::Timestamp,
        hash: String,
        chunks: Vec<Chunk>,
    }

    impl Page {
        fn new(page_id: &str, url: &str, at: &str, hash: &str, texts: &[&str]) -> Self {
            Page {
                page_id: page_id.to_string(),
                url: url.to_string(),
                host: url::Url::parse(url)
                    .unwrap()
                    .host_str()
                    .unwrap()
                    .to_string(),
                title: None,
                fetched_at: ts(at),
                hash: hash.to_string(),
                chunks: texts
                    .iter()
                    .enumerate()
                    .map(|(i, t)| chunk(i as u32, &[], t))
                    .collect(),
            }
        }

        fn doc(&self) -> PageDoc<'_> {
            PageDoc {
                page_id: &self.page_id,
                url: &self.url,
                host: &self.host,
                title: self.title.as_deref(),
                fetched_at: self.fetched_at,
                lang: Some("en"),
                content_hash: &self.hash,
                chunks: &self.chunks,
            }
        }
    }

    fn open(dir: &TempDir) -> (ArchiveIndex, ArchiveWriter) {
        let index = ArchiveIndex::open_or_create(&dir.0).unwrap();
        let writer = index.writer(30_000_000).unwrap();
        (index, writer)
    }

    fn search(index: &ArchiveIndex, q: SearchQuery) -> Vec<Hit> {
        index.search(&q).unwrap()
    }

    fn page_ids(hits: &[Hit]) -> Vec<&str> {
        hits.iter().map(|h| h.page_id.as_str()).collect()
    }

    fn as_of(text: &str, at: &str) -> SearchQuery {
        SearchQuery {
            as_of: Some(ts(at)),
            ..SearchQuery::new(text)
        }
    }

    #[test]
    fn round_trip_fields_snippet_headings() {
        let dir = TempDir::new("round-trip");
        let (index, mut w) = open(&dir);
        let mut page = Page::new(
            "p1",
            "https://Example.com/trees",
            "2024-05-01T10:00:00.250Z",
            "h1",
            &[],
        );
        page.title = Some("Trees of the river".to_string());
        page.chunks = vec![
            chunk(0, &["Trees"], "Oaks grow slowly and live long."),
            chunk(
                1,
                &["Trees", "Along rivers"],
                "The Sycamore likes wet ground & <mud>. Sycamores line the river banks.",
            ),
        ];
        let added = w.add_page(&page.doc()).unwrap();
        assert_eq!(
            added,
            Added::Indexed {
                chunks: 2,
                replaced: 0
            }
        );
        assert_eq!(w.pending(), 1);
        assert!(
            search(&index, SearchQuery::new("sycamore")).is_empty(),
            "uncommitted is invisible"
        );
        w.commit().unwrap();
        assert_eq!(w.pending(), 0);
        assert_eq!(index.num_chunks(), 2);

        let hits = search(&index, SearchQuery::new("sycamore"));
        assert_eq!(hits.len(), 1);
        let hit = &hits[0];
        assert_eq!(hit.chunk_id, "p1:1");
        assert_eq!(hit.page_id, "p1");
        assert_eq!(hit.url, "https://Example.com/trees");
        assert_eq!(hit.title.as_deref(), Some("Trees of the river"));
        assert_eq!(hit.headings, vec!["Trees", "Along rivers"]);
        assert!(hit.text.starts_with("The Sycamore likes"));
        assert_eq!(hit.fetched_at, "2024-05-01T10:00:00.25Z");
        assert_eq!(hit.lang.as_deref(), Some("en"));
        assert!(hit.score > 0.0);
        assert!(hit.snippet.contains("<b>Sycamore</b>"), "{}", hit.snippet);
        assert!(
            hit.snippet.contains("&amp; &lt;mud&gt;"),
            "escaped: {}",
            hit.snippet
        );

        // A title-only match: both chunks, snippet = start of the text, no highlight.
        let hits = search(&index, SearchQuery::new("trees"));
        assert_eq!(hits.len(), 2);
        let oak = hits.iter().find(|h| h.chunk_id == "p1:0").unwrap();
        assert_eq!(oak.snippet, "Oaks grow slowly and live long.");
        // Headings are searchable; a phrase query works.
        let hits = search(&index, SearchQuery::new("\"along rivers\""));
        assert_eq!(page_ids(&hits), vec!["p1"]);
        assert_eq!(hits[0].chunk_id, "p1:1");
        // Field syntax over the exact fields.
        let hits = search(
            &index,
            SearchQuery::new("oaks OR sycamore -chunk_id:\"p1:1\""),
        );
        assert_eq!(hits.len(), 1);
        assert_eq!(hits[0].chunk_id, "p1:0");
        // Disjunction by default: one matching word is enough, both rank higher.
        let hits = search(&index, SearchQuery::new("sycamore zebra"));
        assert_eq!(hits.len(), 1);
    }

    #[test]
    fn host_and_date_filters() {
        let dir = TempDir::new("filters");
        let (index, mut w) = open(&dir);
        for p in [
            Page::new(
                "a",
                "https://a.example/1",
                "2024-01-01T00:00:00Z",
                "ha",
                &["kestrel a"],
            ),
            Page::new(
                "b",
                "https://b.example/1",
                "2024-02-01T00:00:00Z",
                "hb",
                &["kestrel b"],
            ),
            Page::new(
                "c",
                "https://b.example/2",
                "2024-03-01T00:00:00Z",
                "hc",
                &["kestrel c"],
            ),
        ] {
            w.add_page(&p.doc()).unwrap();
        }
        w.commit().unwrap();
        let sorted = |mut v: Vec<Hit>| {
            v.sort_by(|a, b| a.page_id.cmp(&b.page_id));
            v.into_iter().map(|h| h.page_id).collect::<Vec<_>>()
        };
        assert_eq!(
            sorted(search(&index, SearchQuery::new("kestrel"))),
            ["a", "b", "c"]
        );
        let q = |host: Option<&str>, after: Option<&str>, before: Option<&str>| SearchQuery {
            host: host.map(str::to_string),
            after: after.map(ts),
            before: before.map(ts),
            ..SearchQuery::new("kestrel")
        };
        assert_eq!(
            sorted(search(&index, q(Some("b.example"), None, None))),
            ["b", "c"]
        );
        assert_eq!(
            sorted(search(&index, q(Some("B.Example"), None, None))),
            ["b", "c"]
        );
        assert!(search(&index, q(Some("example"), None, None)).is_empty());
        // after is inclusive, before exclusive.
        assert_eq!(
            sorted(search(&index, q(None, Some("2024-02-01T00:00:00Z"), None))),
            ["b", "c"]
        );
        assert_eq!(
            sorted(search(&index, q(None, None, Some("2024-02-01T00:00:00Z")))),
            ["a"]
        );
        assert_eq!(
            sorted(search(
                &index,
                q(
                    Some("b.example"),
                    Some("2024-01-15T00:00:00Z"),
                    Some("2024-02-15T00:00:00Z")
                )
            )),
            ["b"]
        );
        // Sub-second precision on the date filters.
        assert_eq!(
            sorted(search(
                &index,
                q(None, Some("2024-03-01T00:00:00.000001Z"), None)
            )),
            Vec::<String>::new()
        );
    }

    #[test]
    fn rearchive_replaces_latest_and_keeps_history() {
        let dir = TempDir::new("rearchive");
        let (index, mut w) = open(&dir);
        let url = "https://example.com/news";
        let v1 = Page::new(
            "v1",
            url,
            "2024-01-01T00:00:00Z",
            "h1",
            &["alpha one", "alpha two"],
        );
        let v2 = Page::new("v2", url, "2024-02-01T00:00:00Z", "h2", &["beta one"]);
        assert_eq!(
            w.add_page(&v1.doc()).unwrap(),
            Added::Indexed {
                chunks: 2,
                replaced: 0
            }
        );
        w.commit().unwrap();
        assert_eq!(
            w.add_page(&v2.doc()).unwrap(),
            Added::Indexed {
                chunks: 1,
                replaced: 2
            }
        );
        w.commit().unwrap();
        assert_eq!(index.num_chunks(), 3, "history is kept");

        assert!(search(&index, SearchQuery::new("alpha")).is_empty());
        assert_eq!(page_ids(&search(&index, SearchQuery::new("beta"))), ["v2"]);
        assert_eq!(
            page_ids(&search(&index, as_of("alpha", "2024-01-15T00:00:00Z"))),
            ["v1", "v1"]
        );
        assert!(search(&index, as_of("beta", "2024-01-15T00:00:00Z")).is_empty());
        assert_eq!(
            page_ids(&search(&index, as_of("beta", "2024-02-01T00:00:00Z"))),
            ["v2"]
        );
        assert!(search(&index, as_of("alpha", "2024-02-01T00:00:00Z")).is_empty());
        assert!(search(&index, as_of("alpha", "2023-12-31T23:59:59Z")).is_empty());
        // The rewritten version kept its stored fields.
        let old = search(&index, as_of("two", "2024-01-15T00:00:00Z"));
        assert_eq!(old.len(), 1);
        assert_eq!(old[0].chunk_id, "v1:1");
        assert_eq!(old[0].fetched_at, "2024-01-01T00:00:00Z");
        assert_eq!(old[0].url, url);
    }

    #[test]
    fn same_content_hash_is_unchanged() {
        let dir = TempDir::new("same-hash");
        let (index, mut w) = open(&dir);
        let url = "https://example.com/same";
        let v1 = Page::new("v1", url, "2024-01-01T00:00:00Z", "same", &["gamma"]);
        let v2 = Page::new("v2", url, "2024-02-01T00:00:00Z", "same", &["gamma"]);
        w.add_page(&v1.doc()).unwrap();
        w.commit().unwrap();
        assert_eq!(w.add_page(&v2.doc()).unwrap(), Added::Unchanged);
        assert_eq!(w.pending(), 0);
        w.commit().unwrap();
        assert_eq!(index.num_chunks(), 1);
        assert_eq!(page_ids(&search(&index, SearchQuery::new("gamma"))), ["v1"]);
        // Also when the latest version is not committed yet.
        let v3 = Page::new("v3", url, "2024-03-01T00:00:00Z", "other", &["delta"]);
        let v4 = Page::new("v4", url, "2024-04-01T00:00:00Z", "other", &["delta"]);
        assert!(matches!(
            w.add_page(&v3.doc()).unwrap(),
            Added::Indexed { .. }
        ));
        assert_eq!(w.add_page(&v4.doc()).unwrap(), Added::Unchanged);
        w.commit().unwrap();
        assert_eq!(index.num_chunks(), 2);
        assert_eq!(page_ids(&search(&index, SearchQuery::new("delta"))), ["v3"]);
    }

    #[test]
    fn same_page_id_is_unchanged() {
        let dir = TempDir::new("same-page");
        let (index, mut w) = open(&dir);
        let p = Page::new(
            "p",
            "https://example.com/p",
            "2024-01-01T00:00:00Z",
            "h",
            &["epsilon"],
        );
        assert!(matches!(
            w.add_page(&p.doc()).unwrap(),
            Added::Indexed { .. }
        ));
        assert_eq!(w.add_page(&p.doc()).unwrap(), Added::Unchanged, "pending");
        // Even with other content: a page_id is one fetch.
        let other = Page::new(
            "p",
            "https://example.com/p",
            "2024-02-01T00:00:00Z",
            "y",
            &["eta"],
        );
        assert_eq!(
            w.add_page(&other.doc()).unwrap(),
            Added::Unchanged,
            "pending, other content"
        );
        w.commit().unwrap();
        assert_eq!(w.add_page(&p.doc()).unwrap(), Added::Unchanged, "committed");
        let mut q = Page::new(
            "p",
            "https://example.com/p",
            "2024-02-01T00:00:00Z",
            "x",
            &["zeta"],
        );
        q.title = Some("changed".to_string());
        assert_eq!(w.add_page(&q.doc()).unwrap(), Added::Unchanged);
        w.commit().unwrap();
        assert_eq!(index.num_chunks(), 1);
    }

    #[test]
    fn per_page_collapse() {
        let dir = TempDir::new("collapse");
        let (index, mut w) = open(&dir);
        let long: Vec<String> = (0..50)
            .map(|i| format!("needle needle needle {i}"))
            .collect();
        let long: Vec<&str> = long.iter().map(String::as_str).collect();
        let mut pages = vec![Page::new(
            "long",
            "https://example.com/long",
            "2024-01-01T00:00:00Z",
            "l",
            &long,
        )];
        for name in ["b", "c", "d"] {
            pages.push(Page::new(
                name,
                &format!("https://example.com/{name}"),
                "2024-01-01T00:00:00Z",
                name,
                &["a needle among many other words in this longer chunk of text"],
            ));
        }
        for p in &pages {
            w.add_page(&p.doc()).unwrap();
        }
        w.commit().unwrap();

        // Without the collapse the long page fills the top 5.
        let q = SearchQuery {
            k: 5,
            per_page: 0,
            ..SearchQuery::new("needle")
        };
        assert_eq!(page_ids(&search(&index, q)), ["long"; 5]);
        // With it: 2 from the long page, then the others.
        let hits = search(
            &index,
            SearchQuery {
                k: 5,
                ..SearchQuery::new("needle")
            },
        );
        assert_eq!(hits.len(), 5);
        assert_eq!(page_ids(&hits[..2]), ["long", "long"]);
        let mut rest = page_ids(&hits[2..]);
        rest.sort();
        assert_eq!(rest, ["b", "c", "d"]);
        assert!(hits.windows(2).all(|w| w[0].score >= w[1].score));
        // per_page 1, and more hits wanted than there are: everything that survives.
        let hits = search(
            &index,
            SearchQuery {
                k: 10,
                per_page: 1,
                ..SearchQuery::new("needle")
            },
        );
        assert_eq!(hits.len(), 4);
        // k is capped.
        let hits = search(
            &index,
            SearchQuery {
                k: 1000,
                per_page: 0,
                ..SearchQuery::new("needle")
            },
        );
        assert_eq!(hits.len(), 53);
    }

    #[test]
    fn bad_queries_are_query_errors() {
        let dir = TempDir::new("bad-query");
        let (index, _w) = open(&dir);
        for bad in ["", "   ", "nosuchfield:x", "fetched_at:notadate"] {
            match index.search(&SearchQuery::new(bad)) {
                Err(Error::Query(msg)) => assert!(!msg.is_empty()),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn second_writer_is_busy() {
        let dir = TempDir::new("busy");
        let (index, w) = open(&dir);
        assert!(matches!(index.writer(30_000_000), Err(Error::Busy)));
        let other = ArchiveIndex::open_or_create(&dir.0).unwrap();
        assert!(matches!(other.writer(30_000_000), Err(Error::Busy)));
        drop(w);
        assert!(index.writer(30_000_000).is_ok());
    }

    #[test]
    fn reopen_keeps_data_and_schema_mismatch_is_an_error() {
        let dir = TempDir::new("reopen");
        {
            let (_index, mut w) = open(&dir);
            let p = Page::new(
                "p",
                "https://example.com/p",
                "2024-01-01T00:00:00Z",
                "h",
                &["theta"],
            );
            w.add_page(&p.doc()).unwrap();
            w.commit().unwrap();
        }
        let (index, mut w) = open(&dir);
        assert_eq!(index.num_chunks(), 1);
        assert_eq!(page_ids(&search(&index, SearchQuery::new("theta"))), ["p"]);
        // The reopened writer still knows the latest version.
        let p2 = Page::new(
            "p2",
            "https://example.com/p",
            "2024-02-01T00:00:00Z",
            "h2",
            &["iota"],
        );
        assert_eq!(
            w.add_page(&p2.doc()).unwrap(),
            Added::Indexed {
                chunks: 1,
                replaced: 1
            }
        );
        w.commit().unwrap();
        assert!(search(&index, SearchQuery::new("theta")).is_empty());

        let other = TempDir::new("other-schema");
        {
            let mut b = Schema::builder();
            b.add_text_field("body", TEXT);
            std::fs::create_dir_all(&other.0).unwrap();
            Index::create_in_dir(&other.0, b.build()).unwrap();
        }
        match ArchiveIndex::open_or_create(&other.0) {
            Err(Error::Schema(msg)) => assert!(msg.contains("schema"), "{msg}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn versions_of_one_url_before_commit() {
        let dir = TempDir::new("pending");
        let (index, mut w) = open(&dir);
        let url = "https://example.com/pending";
        let v1 = Page::new(
            "v1",
            url,
            "2024-01-01T00:00:00Z",
            "h1",
            &["kappa first", "kappa more"],
        );
        let v2 = Page::new("v2", url, "2024-02-01T00:00:00Z", "h2", &["kappa second"]);
        let v3 = Page::new("v3", url, "2024-03-01T00:00:00Z", "h3", &["kappa third"]);
        assert_eq!(
            w.add_page(&v1.doc()).unwrap(),
            Added::Indexed {
                chunks: 2,
                replaced: 0
            }
        );
        assert_eq!(
            w.add_page(&v2.doc()).unwrap(),
            Added::Indexed {
                chunks: 1,
                replaced: 2
            }
        );
        assert_eq!(
            w.add_page(&v3.doc()).unwrap(),
            Added::Indexed {
                chunks: 1,
                replaced: 1
            }
        );
        assert_eq!(w.pending(), 3);
        w.commit().unwrap();
        assert_eq!(index.num_chunks(), 4);
        let latest = search(
            &index,
            SearchQuery {
                per_page: 0,
                ..SearchQuery::new("kappa")
            },
        );
        assert_eq!(page_ids(&latest), ["v3"]);
        let at = |t| {
            let mut ids: Vec<String> = search(
                &index,
                SearchQuery {
                    per_page: 0,
                    ..as_of("kappa", t)
                },
            )
            .into_iter()
            .map(|h| h.page_id)
            .collect();
            ids.dedup();
            ids
        };
        assert_eq!(at("2024-01-20T00:00:00Z"), ["v1"]);
        assert_eq!(at("2024-02-20T00:00:00Z"), ["v2"]);
        assert_eq!(at("2024-03-20T00:00:00Z"), ["v3"]);
        assert!(at("2023-12-20T00:00:00Z").is_empty());
    }

    #[test]
    fn older_versions_are_inserted_into_history() {
        let dir = TempDir::new("history");
        let (index, mut w) = open(&dir);
        let url = "https://example.com/history";
        let v1 = Page::new("v1", url, "2024-01-01T00:00:00Z", "h1", &["lambda first"]);
        let v3 = Page::new("v3", url, "2024-03-01T00:00:00Z", "h3", &["lambda third"]);
        let v2 = Page::new("v2", url, "2024-02-01T00:00:00Z", "h2", &["lambda second"]);
        let v0 = Page::new("v0", url, "2023-12-01T00:00:00Z", "h0", &["lambda zeroth"]);
        let v2b = Page::new("v2b", url, "2024-02-15T00:00:00Z", "h2", &["lambda second"]);
        w.add_page(&v1.doc()).unwrap();
        w.add_page(&v3.doc()).unwrap();
        w.commit().unwrap();
        // Between v1 and v3: closes v1 at v2's time, valid until v3.
        assert_eq!(
            w.add_page(&v2.doc()).unwrap(),
            Added::Indexed {
                chunks: 1,
                replaced: 1
            }
        );
        // Same content as the version valid then: nothing to do.
        assert_eq!(w.add_page(&v2b.doc()).unwrap(), Added::Unchanged);
        w.commit().unwrap();
        // Older than all: valid until v1, and nothing is closed.
        assert_eq!(
            w.add_page(&v0.doc()).unwrap(),
            Added::Indexed {
                chunks: 1,
                replaced: 0
            }
        );
        // Not committed yet, and still right: a newer version builds on the pending state.
        let v4 = Page::new("v4", url, "2024-04-01T00:00:00Z", "h4", &["lambda fourth"]);
        assert_eq!(
            w.add_page(&v4.doc()).unwrap(),
            Added::Indexed {
                chunks: 1,
                replaced: 1
            }
        );
        w.commit().unwrap();

        let at = |t| page_ids(&search(&index, as_of("lambda", t))).join(",");
        assert_eq!(at("2023-11-01T00:00:00Z"), "");
        assert_eq!(at("2023-12-15T00:00:00Z"), "v0");
        assert_eq!(at("2024-01-15T00:00:00Z"), "v1");
        assert_eq!(at("2024-02-15T00:00:00Z"), "v2");
        assert_eq!(at("2024-03-15T00:00:00Z"), "v3");
        assert_eq!(at("2024-04-15T00:00:00Z"), "v4");
        assert_eq!(
            page_ids(&search(&index, SearchQuery::new("lambda"))),
            ["v4"]
        );
        assert_eq!(index.num_chunks(), 5);
    }

    #[test]
    fn handles_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<ArchiveIndex>();
        send::<ArchiveWriter>();
    }

    #[test]
    fn commit_if_due() {
        let dir = TempDir::new("due");
        let (index, mut w) = open(&dir);
        assert!(
            !w.commit_if_due(1, Duration::ZERO).unwrap(),
            "nothing pending"
        );
        let a = Page::new(
            "a",
            "https://example.com/a",
            "2024-01-01T00:00:00Z",
            "a",
            &["mu"],
        );
        let b = Page::new(
            "b",
            "https://example.com/b",
            "2024-01-01T00:00:00Z",
            "b",
            &["mu"],
        );
        w.add_page(&a.doc()).unwrap();
        assert!(!w.commit_if_due(2, Duration::from_secs(3600)).unwrap());
        w.add_page(&b.doc()).unwrap();
        assert!(w.commit_if_due(2, Duration::from_secs(3600)).unwrap());
        assert_eq!(search(&index, SearchQuery::new("mu")).len(), 2);
        let c = Page::new(
            "c",
            "https://example.com/c",
            "2024-01-01T00:00:00Z",
            "c",
            &["mu"],
        );
        w.add_page(&c.doc()).unwrap();
        assert!(w.commit_if_due(100, Duration::ZERO).unwrap(), "old enough");
        assert_eq!(index.num_chunks(), 3);
    }

    /// A rough rate, not a benchmark: `cargo test -p trawl-workers --lib --release
    /// archive::index::tests::indexing_rate -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn indexing_rate() {
        let dir = TempDir::new("rate");
        let (index, mut w) = {
            let index = ArchiveIndex::open_or_create(&dir.0).unwrap();
            let writer = index.writer(150_000_000).unwrap();
            (index, writer)
        };
        // Zipf-ish words from a fixed vocabulary, deterministic.
        let vocab: Vec<String> = (0..20_000).map(|i| format!("w{i:x}q")).collect();
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut word = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let r = (seed % 1_000_000) as f64 / 1_000_000.0;
            &vocab[((r * r * r) * vocab.len() as f64) as usize]
        };
        let pages = 3_000;
        let per_page = 8;
        let mut all: Vec<Page> = Vec::with_capacity(pages);
        for p in 0..pages {
            let mut page = Page::new(
                &format!("p{p}"),
                &format!("https://h{}.example/{p}", p % 50),
                "2024-01-01T00:00:00Z",
                &format!("h{p}"),
                &[],
            );
            page.title = Some(
                (0..6)
                    .map(|_| word().as_str())
                    .collect::<Vec<_>>()
                    .join(" "),
            );
            page.chunks = (0..per_page)
                .map(|i| {
                    let text: Vec<&str> = (0..300).map(|_| word().as_str()).collect();
                    chunk(i, &["Section", "Sub"], &text.join(" "))
                })
                .collect();
            all.push(page);
        }
        let started = Instant::now();
        for page in &all {
            w.add_page(&page.doc()).unwrap();
            w.commit_if_due(1_000, Duration::from_secs(2)).unwrap();
        }
        w.commit().unwrap();
        let secs = started.elapsed().as_secs_f64();
        let chunks = (pages * per_page as usize) as f64;
        println!(
            "first versions: {chunks} chunks in {secs:.2}s = {:.0} chunks/s",
            chunks / secs
        );

        // Every page again, newer and changed: each add rewrites the previous version.
        let started = Instant::now();
        for (i, page) in all.iter_mut().enumerate() {
            page.page_id = format!("p{i}b");
            page.hash = format!("h{i}b");
            page.fetched_at = ts("2024-02-01T00:00:00Z");
            w.add_page(&page.doc()).unwrap();
            w.commit_if_due(1_000, Duration::from_secs(2)).unwrap();
        }
        w.commit().unwrap();
        let secs = started.elapsed().as_secs_f64();
        println!(
            "new versions: {chunks} chunks (+{chunks} rewritten) in {secs:.2}s = {:.0} chunks/s",
            chunks / secs
        );
        assert_eq!(index.num_chunks(), 2 * chunks as u64);

        let mut times = Vec::new();
        for i in 0..300 {
            let n = 1 + i % 3;
            let text: Vec<&str> = (0..n).map(|_| word().as_str()).collect();
            let started = Instant::now();
            let _ = index.search(&SearchQuery::new(text.join(" "))).unwrap();
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
        times.sort_by(f64::total_cmp);
        println!(
            "search over {} chunks: p50 {:.2} ms, p99 {:.2} ms",
            index.num_chunks(),
            times[times.len() / 2],
            times[times.len() * 99 / 100]
        );
    }
}
