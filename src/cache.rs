//! The page cache: the store's pages within their TTL, fronted by an in-process LRU bounded in
//! bytes, so that repeated reads of a hot page cost neither a query nor a decompression.
//!
//! Not here: deciding the TTL (the job's `cache_ttl` or `fetch.cache_ttl_secs`), or writing
//! pages (the runner stores them, then offers them here).

use std::sync::{Arc, Mutex};

use lru::LruCache;

use crate::store::{self, PageRecord, Store};

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
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug)]
struct Inner {
    lru: LruCache<(String, String), Arc<CachedPage>>,
    bytes: usize,
    max_bytes: usize,
}

impl PageCache {
    /// A cache over `store` keeping at most `max_bytes` of text in memory (0 disables memory).
    pub fn new(store: Store, max_bytes: usize) -> PageCache {
        PageCache {
            store,
            inner: Arc::new(Mutex::new(Inner {
                lru: LruCache::unbounded(),
                bytes: 0,
                max_bytes,
            })),
        }
    }

    /// Returns the newest page of `url` with `options_hash` fetched at or after `since_ms`.
    pub async fn fresh(
        &self,
        url: &str,
        options_hash: &str,
        since_ms: i64,
    ) -> Result<Option<Arc<CachedPage>>, store::Error> {
        let key = (url.to_owned(), options_hash.to_owned());
        if let Ok(mut inner) = self.inner.lock()
            && let Some(hit) = inner.lru.get(&key)
            && hit.page.fetched_at_ms >= since_ms
        {
            return Ok(Some(hit.clone()));
        }
        let Some(page) = self.store.cached_page(url, options_hash, since_ms).await? else {
            return Ok(None);
        };
        let text = self.store.page_text(&page).await?;
        let cached = Arc::new(CachedPage { page, text });
        self.remember(key, cached.clone());
        Ok(Some(cached))
    }

    /// Offers a freshly stored page to the in-memory part.
    pub fn insert(&self, url: &str, options_hash: &str, page: CachedPage) {
        self.remember((url.to_owned(), options_hash.to_owned()), Arc::new(page));
    }

    fn remember(&self, key: (String, String), page: Arc<CachedPage>) {
        let Ok(mut inner) = self.inner.lock() else {
            return;
        };
        let size = page.text.len();
        if size > inner.max_bytes / 4 {
            // One page must not flush the whole cache.
            return;
        }
        if let Some(old) = inner.lru.put(key, page) {
            inner.bytes -= old.text.len();
        }
        inner.bytes += size;
        while inner.bytes > inner.max_bytes {
            match inner.lru.pop_lru() {
                Some((_, evicted)) => inner.bytes -= evicted.text.len(),
                None => break,
            }
        }
    }
}
