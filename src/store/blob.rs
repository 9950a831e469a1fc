//! Blobs as every store engine keeps them: zstd-compressed (or plain when that is not smaller),
//! content-addressed by the sha256 of the uncompressed bytes; the bounded in-memory cache of
//! page texts read from them, and the raw bodies and texts handed to this process's archive
//! pool.
//!
//! Not here: where the bytes are stored (a table in each engine).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use lru::LruCache;
use sha2::{Digest, Sha256};

use super::Error;

/// Largest blob decompressed on read: a guard against a corrupt or hostile database.
const MAX_BLOB_BYTES: usize = 256 << 20;

/// Bytes of decompressed page text kept by [`Texts`].
const TEXT_CACHE_BYTES: usize = 32 << 20;

/// Bytes kept for the archive pool by each [`Held`] (raw bodies, texts).
const HELD_BYTES: usize = 32 << 20;

/// Bytes held (three quarters of [`HELD_BYTES`]) past which the pages to archive wait for the
/// pool ([`ForArchive::room`]): what the fetches in flight add then stays within the bound, so
/// nothing held is evicted before the pool takes it.
const CROWDED_BYTES: usize = HELD_BYTES / 4 * 3;

/// Longest wait for room: a pool that stops taking pages without letting go (stuck, not
/// ended: an ended pool lets go) slows the fetches of pages to archive down, never stops them.
const ROOM_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

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

/// Entries by blob hash, least recently used evicted past a bound in bytes; an entry larger
/// than a sixteenth of the bound is not kept.
#[derive(Debug)]
struct Bounded<V> {
    lru: LruCache<String, (V, usize)>,
    bytes: usize,
    max_bytes: usize,
}

impl<V> Bounded<V> {
    fn new(max_bytes: usize) -> Mutex<Bounded<V>> {
        Mutex::new(Bounded {
            lru: LruCache::unbounded(),
            bytes: 0,
            max_bytes,
        })
    }

    /// Keeps the value `make` builds (only when an entry of `len` bytes may be kept).
    fn put(&mut self, hash: &str, len: usize, make: impl FnOnce() -> V) {
        if len > self.max_bytes / 16 {
            return;
        }
        self.bytes += len;
        if let Some((_, (_, old))) = self.lru.push(hash.to_owned(), (make(), len)) {
            self.bytes -= old;
        }
        while self.bytes > self.max_bytes {
            match self.lru.pop_lru() {
                Some((_, (_, evicted))) => self.bytes -= evicted,
                None => break,
            }
        }
    }

    fn take(&mut self, hash: &str) -> Option<V> {
        let (value, len) = self.lru.pop(hash)?;
        self.bytes -= len;
        Some(value)
    }

    /// Drops every entry.
    fn clear(&mut self) {
        self.lru.clear();
        self.bytes = 0;
    }

    /// Drops the entries whose value `stale` picks.
    fn drop_where(&mut self, stale: impl Fn(&V) -> bool) {
        let hashes: Vec<String> = self
            .lru
            .iter()
            .filter(|(_, (value, _))| stale(value))
            .map(|(hash, _)| hash.clone())
            .collect();
        for hash in hashes {
            self.take(&hash);
        }
    }
}

/// Recently read page texts by content hash (and written ones, when asked). Blobs never
/// change, so entries never go stale; bounded in bytes.
#[derive(Debug)]
pub(super) struct Texts {
    cache: Mutex<Bounded<Arc<str>>>,
    /// Texts of stored pages are kept too ([`Texts::keep_written`]).
    keep_written: AtomicBool,
}

impl Texts {
    /// An empty cache, kept by reads only.
    pub(super) fn new() -> Texts {
        Texts {
            cache: Bounded::new(TEXT_CACHE_BYTES),
            keep_written: AtomicBool::new(false),
        }
    }

    /// From now on, the texts of pages stored are kept too.
    pub(super) fn keep_written(&self) {
        self.keep_written.store(true, Ordering::Relaxed);
    }

    /// Keeps the text of a page just stored, when [`Texts::keep_written`] asked for it.
    pub(super) fn written(&self, content_hash: &str, text: &str) {
        if self.keep_written.load(Ordering::Relaxed)
            && let Ok(mut cache) = self.cache.lock()
        {
            cache.put(content_hash, text.len(), || Arc::from(text));
        }
    }

    /// The text under `content_hash`, when it is in memory.
    pub(super) fn get(&self, content_hash: &str) -> Option<Arc<str>> {
        let mut cache = self.cache.lock().ok()?;
        cache.lru.get(content_hash).map(|(text, _)| text.clone())
    }

    /// Reads a text blob's bytes (`None`: the blob is missing) and keeps the text.
    pub(super) fn load(
        &self,
        content_hash: &str,
        bytes: Option<Vec<u8>>,
    ) -> Result<Arc<str>, Error> {
        let text: Arc<str> = Arc::from(Texts::decode(content_hash, bytes)?);
        if let Ok(mut cache) = self.cache.lock() {
            cache.put(content_hash, text.len(), || text.clone());
        }
        Ok(text)
    }

    /// Reads a text blob's bytes (`None`: the blob is missing), keeping nothing.
    pub(super) fn decode(content_hash: &str, bytes: Option<Vec<u8>>) -> Result<String, Error> {
        let bytes = bytes.ok_or_else(|| Error::Corrupt {
            what: "page",
            detail: format!("text blob {content_hash} missing"),
        })?;
        String::from_utf8(bytes).map_err(|error| Error::Corrupt {
            what: "page text",
            detail: error.to_string(),
        })
    }
}

/// Blobs of pages just stored, held for the archive pool of this process by sha256 (their
/// raw bodies, their texts): the pool archives a page from these instead of reading back and
/// decompressing the blobs it was just given. Each is taken once; bounded in bytes (past the
/// bound the oldest go, and the pool reads them from the store). Holds nothing until
/// [`Held::hold`] says a pool runs here, so a process without one keeps nothing.
struct Held<V> {
    held: AtomicBool,
    /// Each value with the [`Held::round`] it was kept in.
    cache: Mutex<Bounded<(V, u64)>>,
    /// Counts the pool's idle looks ([`Held::drop_unclaimed`]).
    round: AtomicU64,
}

impl<V> Held<V> {
    /// An empty store of blobs that holds nothing yet.
    fn new() -> Held<V> {
        Held {
            held: AtomicBool::new(false),
            cache: Bounded::new(HELD_BYTES),
            round: AtomicU64::new(0),
        }
    }

    /// From now on, the blobs of pages to archive are kept for the pool.
    fn hold(&self) {
        self.held.store(true, Ordering::Relaxed);
    }

    /// Blobs are kept ([`Held::hold`]).
    fn is_held(&self) -> bool {
        self.held.load(Ordering::Relaxed)
    }

    /// Keeps nothing from now on, and drops what is held.
    fn release(&self) {
        self.held.store(false, Ordering::Relaxed);
        if let Ok(mut cache) = self.cache.lock() {
            cache.clear();
        }
    }

    /// What is held reaches [`CROWDED_BYTES`].
    fn crowded(&self) -> bool {
        self.held.load(Ordering::Relaxed)
            && self
                .cache
                .lock()
                .is_ok_and(|cache| cache.bytes >= CROWDED_BYTES)
    }

    /// Keeps the value `make` builds (`len` bytes) for the archive pool, when one runs in this
    /// process.
    fn remember(&self, hash: &str, len: usize, make: impl FnOnce() -> V) {
        if self.held.load(Ordering::Relaxed)
            && let Ok(mut cache) = self.cache.lock()
        {
            let round = self.round.load(Ordering::Relaxed);
            cache.put(hash, len, || (make(), round));
        }
    }

    /// Takes the value under `hash`, when it is in memory.
    fn take(&self, hash: &str) -> Option<V> {
        self.cache.lock().ok()?.take(hash).map(|(value, _)| value)
    }

    /// Drops the values kept before the previous call: the pool found nothing to archive
    /// twice since, so they are of pages it will not take. Those kept since are spared: their
    /// pages may still be on their way into the store (held before their commit).
    fn drop_unclaimed(&self) {
        let previous = self.round.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut cache) = self.cache.lock() {
            cache.drop_where(|(_, round)| *round < previous);
        }
    }

    /// How many values are held.
    fn len(&self) -> usize {
        self.cache.lock().map(|cache| cache.lru.len()).unwrap_or(0)
    }
}

impl<V> std::fmt::Debug for Held<V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (entries, bytes) = self
            .cache
            .lock()
            .map(|cache| (cache.lru.len(), cache.bytes))
            .unwrap_or_default();
        f.debug_struct("Held")
            .field("held", &self.held)
            .field("entries", &entries)
            .field("bytes", &bytes)
            .finish()
    }
}

/// What this process holds for its archive pool: the texts and raw bodies of pages to archive
/// just stored (see [`Held`]). Raw bodies only when the pool reads them. When the pool lags
/// so far behind that they fill most of their bound, the pages to archive wait for room
/// ([`ForArchive::room`]) instead of pushing out pages the pool would then read back from the
/// store: a crawl goes at the pool's pace, with its memory bounded.
#[derive(Debug)]
pub(super) struct ForArchive {
    texts: Held<String>,
    raws: Held<Vec<u8>>,
    /// HTML pages' visible lines read as they were extracted (`web::lines`), by raw hash:
    /// what the pool's page documents are made of, without parsing the raw body again.
    lines: Held<String>,
    /// Only HTML pages' raw bodies are held ([`RawBodies::Html`]), and only when their
    /// lines are not.
    raws_of_html_only: AtomicBool,
    /// Woken when the pool's takes made room, and when it lets go.
    taken: tokio::sync::Notify,
}

/// Which raw bodies an archive pool reads, so that nothing is held that it would not take
/// (what is held and never taken would only crowd out what it will).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawBodies {
    /// None: no WARC records, no page documents.
    None,
    /// HTML pages' only: no WARC records, page documents (made from HTML).
    Html,
    /// Every page's: WARC records.
    All,
}

impl ForArchive {
    /// Holds nothing until [`ForArchive::hold`].
    pub(super) fn new() -> ForArchive {
        ForArchive {
            texts: Held::new(),
            raws: Held::new(),
            lines: Held::new(),
            raws_of_html_only: AtomicBool::new(false),
            taken: tokio::sync::Notify::new(),
        }
    }

    /// The pool is gone: nothing is held from now on, and no page waits for room.
    pub(super) fn release(&self) {
        self.texts.release();
        self.raws.release();
        self.lines.release();
        self.taken.notify_waiters();
    }

    /// Returns when there is room for another page to archive: at once unless what is held
    /// fills most of its bound ([`CROWDED_BYTES`]), else when the pool has taken enough, or
    /// after [`ROOM_WAIT`] at most.
    pub(super) async fn room(&self) {
        let waited = tokio::time::timeout(ROOM_WAIT, async {
            loop {
                let taken = self.taken.notified();
                tokio::pin!(taken);
                // Registered before the check, so a take between the two is not missed.
                taken.as_mut().enable();
                if !self.crowded() {
                    return;
                }
                taken.await;
            }
        });
        let _ = waited.await;
    }

    /// From now on, the texts and the `raws` of pages to archive are kept, and with
    /// `lines`, HTML pages' visible lines.
    pub(super) fn hold(&self, raws: RawBodies, lines: bool) {
        self.texts.hold();
        if lines {
            self.lines.hold();
        }
        if raws != RawBodies::None {
            self.raws_of_html_only
                .store(raws == RawBodies::Html, Ordering::Relaxed);
            self.raws.hold();
        }
    }

    /// Keeps a page being stored: its text under `content_hash`, its raw body and its
    /// visible lines (when it has them) under `raw_hash`, each when the pool reads it (`html`
    /// says whether the page is HTML). The raw body of an HTML page whose lines are held is
    /// not, unless the pool writes WARC records. Each is copied only when kept: a process
    /// without a pool that reads them copies nothing.
    pub(super) fn remember(
        &self,
        content_hash: &str,
        text: &str,
        raw_hash: &str,
        raw: &[u8],
        html: bool,
        lines: Option<&str>,
    ) {
        self.texts
            .remember(content_hash, text.len(), || text.to_owned());
        let lines_held = match lines {
            Some(lines) if html && self.lines.is_held() => {
                self.lines
                    .remember(raw_hash, lines.len(), || lines.to_owned());
                true
            }
            _ => false,
        };
        let raw_read = if self.raws_of_html_only.load(Ordering::Relaxed) {
            html && !lines_held
        } else {
            true
        };
        if raw_read {
            self.raws.remember(raw_hash, raw.len(), || raw.to_vec());
        }
    }

    /// Drops what [`ForArchive::remember`] kept of a page that was not stored after all.
    pub(super) fn forget(&self, content_hash: &str, raw_hash: &str) {
        self.texts.take(content_hash);
        self.raws.take(raw_hash);
        self.lines.take(raw_hash);
        self.made_room();
    }

    /// The pool found nothing to archive: drops what was held before its previous such look
    /// (of pages it will not take: not to archive after all, or read from the store before
    /// they were held), which would only crowd out the next ones ([`Held::drop_unclaimed`]).
    pub(super) fn drop_unclaimed(&self) {
        self.texts.drop_unclaimed();
        self.raws.drop_unclaimed();
        self.lines.drop_unclaimed();
        self.made_room();
    }

    /// Takes the text under `content_hash`, when it is held.
    pub(super) fn take_text(&self, content_hash: &str) -> Option<String> {
        let text = self.texts.take(content_hash);
        self.made_room();
        text
    }

    /// Takes the raw body under `raw_hash`, when it is held.
    pub(super) fn take_raw(&self, raw_hash: &str) -> Option<Vec<u8>> {
        let raw = self.raws.take(raw_hash);
        self.made_room();
        raw
    }

    /// Takes the visible lines of the page whose raw body is `raw_hash`, when they are held.
    pub(super) fn take_lines(&self, raw_hash: &str) -> Option<String> {
        let lines = self.lines.take(raw_hash);
        self.made_room();
        lines
    }

    /// Some of what is held fills most of its bound.
    fn crowded(&self) -> bool {
        self.texts.crowded() || self.raws.crowded() || self.lines.crowded()
    }

    /// Wakes the pages waiting for room once there is room (not at every take: a lagging pool
    /// takes a page at a time, and each wake-up would have every waiting page look again).
    fn made_room(&self) {
        if !self.crowded() {
            self.taken.notify_waiters();
        }
    }

    /// How many texts, and raw bodies or visible lines, are held.
    pub(super) fn counts(&self) -> (usize, usize) {
        (self.texts.len(), self.raws.len() + self.lines.len())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn held_blobs_are_kept_only_for_a_pool_and_taken_once() {
        let held: Held<String> = Held::new();
        held.remember("a", 3, || "one".to_owned());
        assert_eq!(held.take("a"), None, "nothing is kept before a pool holds");

        held.hold();
        held.remember("a", 3, || "one".to_owned());
        held.remember("b", 3, || "two".to_owned());
        assert_eq!(held.take("a").as_deref(), Some("one"));
        assert_eq!(held.take("a"), None, "each is handed out once");
        assert_eq!(held.take("b").as_deref(), Some("two"));
    }

    // A paused clock: the waits below are virtual, so a loaded machine cannot fail the test.
    #[tokio::test(start_paused = true)]
    async fn pages_to_archive_wait_for_room_while_the_pool_lags() {
        use futures_util::FutureExt as _;
        let held = Arc::new(ForArchive::new());
        let piece = HELD_BYTES / 16;
        let fill = |from: usize| {
            for index in from..from + 12 {
                held.remember(
                    &format!("t{index}"),
                    "text",
                    &format!("r{index}"),
                    &vec![0; piece],
                    true,
                    None,
                );
            }
        };
        fill(0);
        assert!(held.room().now_or_never().is_some(), "no pool: no wait");

        held.hold(RawBodies::All, false);
        fill(0);
        assert_eq!(held.counts(), (12, 12));
        assert!(
            tokio::time::timeout(Duration::from_millis(50), held.room())
                .await
                .is_err(),
            "three quarters of the bound held: a page waits"
        );
        let waiter = tokio::spawn({
            let held = Arc::clone(&held);
            async move { held.room().await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        assert!(held.take_raw("r0").is_some());
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("the pool's take makes room")
            .unwrap();

        fill(12);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), held.room())
                .await
                .is_err()
        );
        let before = held.counts();
        held.drop_unclaimed();
        assert_eq!(
            held.counts(),
            before,
            "the pool found nothing to take: what was held since its previous look is spared"
        );
        held.drop_unclaimed();
        assert_eq!(held.counts(), (0, 0), "found nothing again: dropped");
        assert!(held.room().now_or_never().is_some());
        fill(0);
        assert_eq!(held.counts(), (12, 12), "held again from then on");
        held.forget("t0", "r0");
        assert_eq!(held.counts(), (11, 11), "a page not stored after all");
        held.release();
        assert!(held.room().now_or_never().is_some(), "a pool gone: no wait");
        assert_eq!(held.counts(), (0, 0), "and nothing held");
        fill(0);
        assert_eq!(held.counts(), (0, 0), "nor kept from then on");
    }

    #[tokio::test(start_paused = true)]
    async fn a_stuck_pool_slows_pages_down_but_never_stops_them() {
        let held = ForArchive::new();
        held.hold(RawBodies::All, false);
        for index in 0..12 {
            held.remember(
                &format!("t{index}"),
                "",
                &format!("r{index}"),
                &vec![0; HELD_BYTES / 16],
                true,
                None,
            );
        }
        let started = tokio::time::Instant::now();
        held.room().await;
        assert_eq!(started.elapsed(), ROOM_WAIT);
    }

    #[test]
    fn raw_bodies_are_held_only_when_the_pool_reads_them() {
        for (raws, html, other) in [
            (RawBodies::None, 0, 0),
            (RawBodies::Html, 1, 0),
            (RawBodies::All, 1, 1),
        ] {
            let held = ForArchive::new();
            held.hold(raws, false);
            held.remember("t1", "a", "r1", &[1], true, None);
            assert_eq!(held.counts(), (1, html), "{raws:?}, an HTML page");
            held.remember("t2", "b", "r2", &[2], false, None);
            assert_eq!(held.counts(), (2, html + other), "{raws:?}, another page");
            held.remember("t3", "c", "r3", &[3], true, Some("c"));
            assert_eq!(
                held.take_lines("r3"),
                None,
                "lines only when the pool reads them"
            );
        }
    }

    #[test]
    fn an_html_pages_lines_take_the_place_of_its_raw_body_unless_warc_needs_it() {
        for (raws, raw_held) in [(RawBodies::Html, false), (RawBodies::All, true)] {
            let held = ForArchive::new();
            held.hold(raws, true);
            held.remember("t1", "a", "r1", &[1], true, Some("a\nb"));
            assert_eq!(held.take_lines("r1").as_deref(), Some("a\nb"), "{raws:?}");
            assert_eq!(held.take_lines("r1"), None, "taken once");
            assert_eq!(held.take_raw("r1").is_some(), raw_held, "{raws:?}");
            // A page without lines (rendered by the browser, read back): its raw body, as
            // before; and lines of a page that is not HTML are not kept.
            held.remember("t2", "b", "r2", &[2], true, None);
            assert_eq!(held.take_raw("r2"), Some(vec![2]), "{raws:?}");
            held.remember("t3", "c", "r3", &[3], false, Some("c"));
            assert_eq!(held.take_lines("r3"), None, "{raws:?}");
            held.remember("t4", "d", "r4", &[4], true, Some("d"));
            held.forget("t4", "r4");
            // Left: the three texts (never taken here), and under WARC page 3's raw body.
            assert_eq!(held.counts(), (3, usize::from(raw_held)), "{raws:?}");
        }
    }

    #[test]
    fn written_texts_are_kept_only_when_asked() {
        let texts = Texts::new();
        texts.written("a", "one");
        assert!(
            texts.get("a").is_none(),
            "reads fill the cache, writes do not"
        );
        texts.keep_written();
        texts.written("a", "one");
        assert_eq!(texts.get("a").as_deref(), Some("one"));
        assert_eq!(
            texts.get("a").as_deref(),
            Some("one"),
            "kept, not handed out once"
        );
    }

    #[test]
    fn held_blobs_stay_within_their_bound() {
        let held: Held<Vec<u8>> = Held::new();
        held.hold();
        let piece = HELD_BYTES / 16;
        for index in 0..20 {
            held.remember(&index.to_string(), piece, || vec![0; 1]);
        }
        let bytes = held.cache.lock().unwrap().bytes;
        assert!(bytes <= HELD_BYTES, "{bytes} bytes held");
        assert_eq!(held.take("0"), None, "the oldest were dropped");
        assert!(held.take("19").is_some(), "the newest are kept");
        held.remember("big", HELD_BYTES / 16 + 1, || vec![0; 1]);
        assert_eq!(
            held.take("big"),
            None,
            "an entry over a sixteenth is not kept"
        );
    }
}
