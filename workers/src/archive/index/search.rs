//! Searching the archive index: a [`SearchQuery`] in, ranked [`Hit`]s out.
//!
//! BM25 over `title`, `headings` and `text`, pruned with block-max WAND, plus, for a query of
//! plain words, a proximity clause (the words as a sloppy phrase over `text`). The filters (host,
//! dates, latest / as-of) are checked on fast fields while collecting (`collector`) rather than
//! added as query clauses, which would turn off the pruning; per-page collapse ranks more
//! candidates than asked and keeps at most `per_page` per `page_id`. Stored documents are read
//! and snippets made for the final hits only.
//!
//! Not here: the collector itself (`collector`), or writing (`writer`).

use std::collections::HashMap;

use tantivy::columnar::StrColumn;
use tantivy::query::{
    BooleanQuery, BoostQuery, ConstScoreQuery, Occur, PhraseQuery, Query, QueryParser, TermQuery,
};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::snippet::SnippetGenerator;
use tantivy::{DocAddress, Index, Searcher, TantivyDocument, Term};

use super::collector::{Filter, FilteredTop};
use super::schema::{Fields, PAGE_ID, first_str};
use super::{ArchiveIndex, Error, micros};

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

/// The slop of the proximity boost's sloppy phrase: how far apart, in all, a query's words
/// may be in a chunk's text for the chunk to be scored as holding them together. tantivy
/// (0.27) spends this budget faster than the words apart on phrases of three words or more
/// (on some matches it adds the slop spent so far twice): at 12, a 6-word query whose words
/// stood 8 words apart in all (`model … within … real world gaming tests`) did not match,
/// at 14 it did. Measured on the known-item check (WCXB dev split, 600 queries): recall@5
/// 0.968 at 12, 0.975 at 16, 0.977 at 20, 0.975 at 24, 0.978 at 32 (forum 0.889 -> 0.956 from
/// 16 on); the archive bench's 50 questions and its query latency are the same at 12 and 20.
/// One phrase per pair of neighbouring words instead (slop 4) found as much (0.980) but made
/// 8-word questions' p99 five times slower (9 -> 50 ms at 200,000 chunks).
const PROXIMITY_SLOP: u32 = 20;

/// Weight of the proximity clause beside the words' own BM25 score.
const PROXIMITY_BOOST: f32 = 2.0;

/// Query-time boost of `page_text` (a page's text outside its extracted content) over `text`:
/// a passage holding the words outranks the page's rest holding them, and the rest still
/// finds a page whose passages lack them.
const PAGE_TEXT_BOOST: f32 = 0.5;

/// The parser of search text over `title`, `headings`, `text` and `page_text`, with their
/// boosts.
pub(super) fn query_parser(index: &Index, fields: &Fields) -> QueryParser {
    // Disjunction by default (any term may match, BM25 ranks chunks with more of them
    // higher): agents ask in natural language, and the best passage rarely holds every
    // word of the question. `+term` makes a term required.
    let mut searched = vec![fields.title, fields.headings, fields.text];
    searched.extend(fields.page_text);
    let mut parser = QueryParser::for_index(index, searched);
    parser.set_field_boost(fields.title, TITLE_BOOST);
    parser.set_field_boost(fields.headings, HEADINGS_BOOST);
    if let Some(page_text) = fields.page_text {
        parser.set_field_boost(page_text, PAGE_TEXT_BOOST);
    }
    parser
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
    /// Only chunks of this tenant's pages; `None`: every tenant's.
    pub tenant: Option<String>,
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
            tenant: None,
        }
    }
}

/// What a hit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HitKind {
    /// A passage (chunk) of the page's extracted content.
    Passage,
    /// The page's visible text outside its extracted content (navigation, sidebars, what
    /// extraction left out): the page matched there and in none of its passages ranked
    /// above it.
    Page,
}

/// One matching chunk.
#[derive(Debug, Clone, serde::Serialize, utoipa::ToSchema)]
pub struct Hit {
    /// "{page_id}:{chunk index}", or "{page_id}:page" for the page's rest.
    pub chunk_id: String,
    /// The version (fetch) the chunk belongs to.
    pub page_id: String,
    /// `passage`, or `page` when the words were found in the page's text outside its
    /// extracted content (`text` is then that text, at most 30,000 characters).
    pub kind: HitKind,
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

impl ArchiveIndex {
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
        // Plain words (no operator, phrase or field): chunks that hold them close together,
        // in order, rank above chunks that hold them scattered.
        let parsed: Box<dyn Query> = match proximity(text, f.text) {
            Some(near) => {
                let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![
                    (Occur::Should, parsed),
                    (
                        Occur::Should,
                        Box::new(BoostQuery::new(near, PROXIMITY_BOOST)),
                    ),
                ];
                if let Some(near) = f.page_text.and_then(|field| proximity(text, field)) {
                    clauses.push((
                        Occur::Should,
                        Box::new(BoostQuery::new(near, PROXIMITY_BOOST * PAGE_TEXT_BOOST)),
                    ));
                }
                Box::new(BooleanQuery::new(clauses))
            }
            None => parsed,
        };

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
        // The tenant likewise (its pages are all a tenant may see).
        let required: Vec<Term> = [
            filter
                .host
                .as_deref()
                .map(|host| Term::from_field_text(f.host, host)),
            q.tenant
                .as_deref()
                .map(|tenant| Term::from_field_text(f.tenant, tenant)),
        ]
        .into_iter()
        .flatten()
        .collect();
        let query: Box<dyn Query> = if required.is_empty() {
            parsed.box_clone()
        } else {
            let mut clauses: Vec<(Occur, Box<dyn Query>)> = vec![(Occur::Must, parsed.box_clone())];
            for term in required {
                clauses.push((
                    Occur::Must,
                    Box::new(ConstScoreQuery::new(
                        Box::new(TermQuery::new(term, IndexRecordOption::Basic)),
                        0.0,
                    )),
                ));
            }
            Box::new(BooleanQuery::new(clauses))
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
        let mut page_snippets = None;
        let mut hits: Vec<Hit> = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let doc: TantivyDocument = searcher.doc(addr)?;
            let page_id = first_str(&doc, f.page_id).unwrap_or_default();
            let page_text = f
                .page_text
                .and_then(|field| first_str(&doc, field).map(|text| (field, text)));
            let (kind, text, snippet) = match page_text {
                Some((field, text)) => {
                    // A page's rest only stands for a page none of whose passages ranked
                    // above it.
                    if hits.iter().any(|hit| hit.page_id == page_id) {
                        continue;
                    }
                    let generator = match &mut page_snippets {
                        Some(generator) => generator,
                        None => {
                            let mut generator =
                                SnippetGenerator::create(&searcher, &*parsed, field)?;
                            generator.set_max_num_chars(SNIPPET_CHARS);
                            page_snippets.insert(generator)
                        }
                    };
                    let snippet = generator.snippet_from_doc(&doc);
                    (HitKind::Page, text, snippet)
                }
                None => {
                    let text = first_str(&doc, f.text).unwrap_or_default();
                    (HitKind::Passage, text, snippets.snippet_from_doc(&doc))
                }
            };
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
                page_id,
                kind,
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

/// The query's words as a sloppy phrase over `text`, when the query is two or more plain
/// words (letters and digits, with the punctuation the tokenizer splits on inside a word,
/// like `don't` or `e-mail`); `None` when it uses the query language (quotes, `+`/`-`,
/// `field:`, parentheses, `AND`/`OR`/`NOT`) or is one word.
fn proximity(text: &str, field: tantivy::schema::Field) -> Option<Box<dyn Query>> {
    let operators = text.contains(['"', ':', '(', ')', '[', ']', '{', '}', '^', '~', '*', '\\'])
        || text
            .split_whitespace()
            .any(|word| word.starts_with(['+', '-']) || matches!(word, "AND" | "OR" | "NOT"));
    if operators {
        return None;
    }
    // tantivy's default tokenizer: runs of alphanumerics, lowercased.
    let terms: Vec<Term> = text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(|word| Term::from_field_text(field, &word.to_lowercase()))
        .collect();
    if terms.len() < 2 || terms.len() > 16 {
        return None;
    }
    let mut phrase = PhraseQuery::new(terms);
    phrase.set_slop(PROXIMITY_SLOP);
    Some(Box::new(phrase))
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
