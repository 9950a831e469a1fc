//! The archive's building blocks: a stored page's markdown → chunks → the full-text index, and
//! fetched responses → WARC records.
//!
//! - `chunk`: markdown → passages along headings, each with its heading path. Code blocks,
//!   tables, list items and other blocks are never split; a paragraph longer than a chunk is
//!   cut at a sentence end. Link destinations are stripped before chunking.
//! - `index`: the tantivy chunk index: its schema, search (BM25, filters, as-of versions,
//!   per-page collapse, snippets) and its one writer (versions, batched commits).
//! - `page_text`: a page's visible text outside its extracted content, indexed beside its
//!   passages at a lower weight so that searches find what extraction left out.
//! - `warc`: WARC/1.1 records, one gzip member each, in rolling `.warc.gz` files.
//!
//! What is not here: the archive pool that drives these (`trawl::archive` in the `trawl`
//! crate, taking the pages that fetch jobs with `archive: true` marked in the store), and
//! fetching (pages arrive already stored).

pub mod chunk;
pub mod index;
pub mod page_text;
pub mod warc;
