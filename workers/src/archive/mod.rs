//! The archive pool's work: stored page → chunks → full-text index, and responses → WARC.
//!
//! - `chunk`: markdown → passages along headings (heading path kept, blocks never split).
//! - `index`: the tantivy chunk index (one writer, batched commits, versions, search).
//! - `warc`: WARC/1.1 records, one gzip member each, in rolling `.warc.gz` files.
//!
//! What is not here: which pages to archive and when (the runner decides, from the store),
//! and fetching (pages arrive already stored).

pub mod chunk;
pub mod index;
pub mod warc;
