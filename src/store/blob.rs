//! Blobs as every store engine keeps them: zstd-compressed (or plain when that is not smaller),
//! content-addressed by the sha256 of the uncompressed bytes; and the bounded in-memory cache
//! of page texts read from them.
//!
//! Not here: where the bytes are stored (a table in each engine).

use std::sync::{Arc, Mutex};

use lru::LruCache;
use sha2::{Digest, Sha256};

use super::Error;

/// Largest blob decompressed on read: a guard against a corrupt or hostile database.
const MAX_BLOB_BYTES: usize = 256 << 20;

/// Bytes of decompressed page text kept by [`Texts`].
const TEXT_CACHE_BYTES: usize = 32 << 20;

/// A blob ready to insert.
#[derive(Debug)]
pub(super) struct Blob {
    /// sha256 of the uncompressed bytes, hex.
    pub(super) sha256: String,
    /// `zstd` or `none`.
    pub(super) codec: &'static str,
    /// Uncompressed length.
    pub(super) size: usize,
    /// The bytes as stored.
    pub(super) bytes: Vec<u8>,
}

thread_local! {
    /// One zstd context per blocking thread: creating and zeroing a context per blob showed up
    /// in the pipeline profile.
    static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
        const { std::cell::RefCell::new(None) };
}

impl Blob {
    /// Hashes and compresses `bytes` (kept plain when compression does not make them smaller).
    pub(super) fn pack(bytes: &[u8], level: i32) -> Blob {
        let sha256 = hex::encode(Sha256::digest(bytes));
        let packed = COMPRESSOR.with(|cell| {
            let mut slot = cell.borrow_mut();
            if slot.is_none() {
                *slot = zstd::bulk::Compressor::new(level).ok();
            }
            let compressor = slot.as_mut()?;
            compressor.set_compression_level(level).ok()?;
            compressor.compress(bytes).ok()
        });
        match packed.ok_or(()) {
            Ok(packed) if packed.len() < bytes.len() => Blob {
                sha256,
                codec: "zstd",
                size: bytes.len(),
                bytes: packed,
            },
            _ => Blob {
                sha256,
                codec: "none",
                size: bytes.len(),
                bytes: bytes.to_vec(),
            },
        }
    }

    /// Returns the uncompressed bytes of a stored blob.
    pub(super) fn unpack(codec: &str, bytes: Vec<u8>) -> Result<Vec<u8>, Error> {
        match codec {
            "zstd" => {
                zstd::bulk::decompress(&bytes, MAX_BLOB_BYTES).map_err(|error| Error::Corrupt {
                    what: "blob",
                    detail: error.to_string(),
                })
            }
            _ => Ok(bytes),
        }
    }
}

/// Recently read or written page texts by content hash. Blobs never change, so entries never
/// go stale; bounded in bytes.
#[derive(Debug)]
pub(super) struct Texts {
    cache: Mutex<TextCache>,
}

#[derive(Debug)]
struct TextCache {
    lru: LruCache<String, Arc<str>>,
    bytes: usize,
}

impl Texts {
    /// An empty cache.
    pub(super) fn new() -> Texts {
        Texts {
            cache: Mutex::new(TextCache {
                lru: LruCache::unbounded(),
                bytes: 0,
            }),
        }
    }

    /// The text under `content_hash`, when it is in memory.
    pub(super) fn get(&self, content_hash: &str) -> Option<Arc<str>> {
        let mut cache = self.cache.lock().ok()?;
        cache.lru.get(content_hash).cloned()
    }

    /// Reads a text blob's bytes (`None`: the blob is missing) and keeps the text.
    pub(super) fn load(
        &self,
        content_hash: &str,
        bytes: Option<Vec<u8>>,
    ) -> Result<Arc<str>, Error> {
        let bytes = bytes.ok_or_else(|| Error::Corrupt {
            what: "page",
            detail: format!("text blob {content_hash} missing"),
        })?;
        let text = String::from_utf8(bytes).map_err(|error| Error::Corrupt {
            what: "page text",
            detail: error.to_string(),
        })?;
        self.remember(content_hash, &text);
        Ok(Arc::from(text))
    }

    /// Keeps a text in memory, evicting the least recently used ones past the byte bound.
    pub(super) fn remember(&self, content_hash: &str, text: &str) {
        if text.len() > TEXT_CACHE_BYTES / 16 {
            return;
        }
        let Ok(mut cache) = self.cache.lock() else {
            return;
        };
        cache.bytes += text.len();
        if let Some(old) = cache.lru.put(content_hash.to_owned(), Arc::from(text)) {
            cache.bytes -= old.len();
        }
        while cache.bytes > TEXT_CACHE_BYTES {
            match cache.lru.pop_lru() {
                Some((_, evicted)) => cache.bytes -= evicted.len(),
                None => break,
            }
        }
    }
}
