//! The page cache: the store's pages within their TTL, fronted by an in-process LRU of page
//! records, so that repeated reads of a hot page cost no query. Texts come from the store,
//! whose own cache keeps recently read texts by content hash: one copy of each text in memory.
//!
//! Not here: deciding the TTL (the job's `cache_ttl` or `fetch.cache_ttl_secs`), or writing
//! pages (the runner stores them, then offers their records here).

use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex};

use lru::LruCache;

use crate::store::{self, PageRecord, Store};

/// Page records kept in memory (records are small; texts are not kept here).
const RECORDS: NonZeroUsize = NonZeroUsize::new(4_096).expect("a positive capacity");

/// A page with its whole text.
#[derive(Debug, Clone)]
pub struct CachedPage {
    /// The stored page.
    pub page: PageRecord,
    /// Its whole text.
    pub text: String,
}

/// The cache, cheap to clone.
#[derive(Debug, Clone)]
pub struct PageCache {
    store: Store,
    records: Arc<Mutex<LruCache<(String, String), PageRecord>>>,
}

impl PageCache {
    /// A cache over `store`.
    pub fn new(store: Store) -> PageCache {
        PageCache {
            store,
            records: Arc::new(Mutex::new(LruCache::new(RECORDS))),
        }
    }

    /// Returns the newest page of `url` with `options_hash` fetched at or after `since_ms`.
    pub async fn fresh(
        &self,
        url: &str,
        options_hash: &str,
        since_ms: i64,
    ) -> Result<Option<CachedPage>, store::Error> {
        let key = (url.to_owned(), options_hash.to_owned());
        let remembered = self
            .records
            .lock()
            .ok()
            .and_then(|mut records| records.get(&key).cloned())
            .filter(|page| page.fetched_at_ms >= since_ms);
        let page = match remembered {
            Some(page) => page,
            None => {
                let Some(page) = self.store.cached_page(url, options_hash, since_ms).await? else {
                    return Ok(None);
                };
                self.insert(url, options_hash, page.clone());
                page
            }
        };
        let text = self.store.page_text(&page).await?;
        Ok(Some(CachedPage { page, text }))
    }

    /// Offers a freshly stored page's record.
    pub fn insert(&self, url: &str, options_hash: &str, page: PageRecord) {
        if let Ok(mut records) = self.records.lock() {
            records.put((url.to_owned(), options_hash.to_owned()), page);
        }
    }
}
