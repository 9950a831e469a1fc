//! The chunk document's schema: one document per chunk, its fields and how each is indexed.
//!
//! `chunk_id` ("{page_id}:{index}"), `page_id` (also a fast field, for the per-page collapse),
//! `url`, `host` (lowercased, also fast), `lang`, `content_hash`: untokenized strings, stored.
//! `title`, `headings` (one value per heading of the chunk's path, outermost first), `text`:
//! tokenized with tantivy's `default` tokenizer (split on non-alphanumerics, lowercase; no
//! stemming, so every language is treated alike), with positions (phrase queries), stored.
//! `fetched_at` (indexed, stored, fast) and `valid_until` (indexed, fast, not stored): dates,
//! microsecond precision in the fast fields, second precision in the inverted index.
//! `page_text`: tokenized like `text`, stored: only on a version's page document (its
//! `chunk_id` is "{page_id}:page", no `chunk_index`), which holds the page's visible text
//! outside its extracted content (`archive::page_text`). An index made before it existed
//! opens without it, and its pages get no page document. `chunk_index`: stored u64. `tenant`: the tenant the page belongs to, untokenized, stored
//! (searches are filtered by it). `series`: `{tenant} {url}`, untokenized, stored: the versions
//! of a URL are a tenant's own (one tenant's newer fetch never closes another's version).
//!
//! Not here: filling a document from a chunk (`writer`) or reading hits (`search`).

use tantivy::TantivyDocument;
use tantivy::schema::{
    DateOptions, DateTimePrecision, FAST, Field, STORED, STRING, Schema, TEXT, Value,
};

/// The schema's fields.
#[derive(Debug, Clone, Copy)]
pub(super) struct Fields {
    pub(super) chunk_id: Field,
    pub(super) page_id: Field,
    pub(super) url: Field,
    pub(super) host: Field,
    pub(super) title: Field,
    pub(super) headings: Field,
    pub(super) text: Field,
    /// `None` in an index made before page documents.
    pub(super) page_text: Option<Field>,
    pub(super) fetched_at: Field,
    pub(super) valid_until: Field,
    pub(super) lang: Field,
    pub(super) content_hash: Field,
    pub(super) chunk_index: Field,
    pub(super) tenant: Field,
    pub(super) series: Field,
}

pub(super) const PAGE_ID: &str = "page_id";
/// The `chunk_id` suffix of a version's page document ("{page_id}:page").
pub(super) const PAGE_DOC: &str = "page";
pub(super) const HOST: &str = "host";
pub(super) const FETCHED_AT: &str = "fetched_at";
pub(super) const VALID_UNTIL: &str = "valid_until";

/// The schema, with the `page_text` field or (for an index made before it) without.
pub(super) fn schema(with_page_text: bool) -> (Schema, Fields) {
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
        tenant: b.add_text_field("tenant", STRING | STORED),
        series: b.add_text_field("series", STRING | STORED),
        page_text: with_page_text.then(|| b.add_text_field("page_text", TEXT | STORED)),
    };
    (b.build(), fields)
}

/// The first value of `field` in a stored document, as text.
pub(super) fn first_str(doc: &TantivyDocument, field: Field) -> Option<String> {
    doc.get_first(field)
        .and_then(|v| v.as_str().map(str::to_string))
}
