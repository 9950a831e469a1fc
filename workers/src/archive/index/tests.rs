//! Tests of the archive index: versions, filters, collapse, snippets, the writer's lock and the
//! directory's file handles, each on a fresh directory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tantivy::Directory as _;
use tantivy::directory::error::OpenReadError;
use tantivy::schema::{Schema, TEXT};

use super::*;
use crate::archive::chunk::Chunk;

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
    tenant: String,
    rest: Option<String>,
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
            tenant: "default".to_string(),
            rest: None,
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
            tenant: &self.tenant,
            rest: self.rest.as_deref(),
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
            page_docs: 0,
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
    assert_eq!(index.num_docs(), 2);

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
            page_docs: 0,
            replaced: 0
        }
    );
    w.commit().unwrap();
    assert_eq!(
        w.add_page(&v2.doc()).unwrap(),
        Added::Indexed {
            chunks: 1,
            page_docs: 0,
            replaced: 2
        }
    );
    w.commit().unwrap();
    assert_eq!(index.num_docs(), 3, "history is kept");

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
fn tenants_see_only_their_pages_and_keep_their_own_versions() {
    let dir = TempDir::new("tenants");
    let (index, mut w) = open(&dir);
    let url = "https://shared.test/a";
    let mut mine = Page::new(
        "p-a",
        url,
        "2026-01-01T00:00:00Z",
        "ha",
        &["falcon secret of acme"],
    );
    mine.tenant = "acme".to_string();
    let mut theirs = Page::new(
        "p-b",
        url,
        "2026-01-02T00:00:00Z",
        "hb",
        &["falcon notes of beta"],
    );
    theirs.tenant = "beta".to_string();
    w.add_page(&mine.doc()).unwrap();
    w.add_page(&theirs.doc()).unwrap();
    w.commit().unwrap();
    let of = |tenant: &str| SearchQuery {
        tenant: Some(tenant.to_string()),
        ..SearchQuery::new("falcon")
    };
    // beta's newer fetch of the same URL is not a version of acme's page: acme still finds
    // its latest version, and neither sees the other's.
    assert_eq!(page_ids(&search(&index, of("acme"))), ["p-a"]);
    assert_eq!(page_ids(&search(&index, of("beta"))), ["p-b"]);
    assert!(search(&index, of("gamma")).is_empty());
    assert!(
        search(
            &index,
            SearchQuery {
                tenant: Some("beta".into()),
                ..SearchQuery::new("secret")
            }
        )
        .is_empty()
    );
    // Without a tenant (the admin), both.
    let mut all = page_ids(&search(&index, SearchQuery::new("falcon")))
        .into_iter()
        .map(str::to_string)
        .collect::<Vec<_>>();
    all.sort();
    assert_eq!(all, ["p-a", "p-b"]);
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
    assert_eq!(index.num_docs(), 1);
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
    assert_eq!(index.num_docs(), 2);
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
    assert_eq!(index.num_docs(), 1);
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
    assert_eq!(index.num_docs(), 1);
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
            page_docs: 0,
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
            page_docs: 0,
            replaced: 0
        }
    );
    assert_eq!(
        w.add_page(&v2.doc()).unwrap(),
        Added::Indexed {
            chunks: 1,
            page_docs: 0,
            replaced: 2
        }
    );
    assert_eq!(
        w.add_page(&v3.doc()).unwrap(),
        Added::Indexed {
            chunks: 1,
            page_docs: 0,
            replaced: 1
        }
    );
    // v1's and v2's documents are not kept in memory: closing each committed it first, so
    // only v3 is pending.
    assert_eq!(w.pending(), 1);
    w.commit().unwrap();
    assert_eq!(index.num_docs(), 4);
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
            page_docs: 0,
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
            page_docs: 0,
            replaced: 0
        }
    );
    // Not committed yet, and still right: a newer version builds on the pending state.
    let v4 = Page::new("v4", url, "2024-04-01T00:00:00Z", "h4", &["lambda fourth"]);
    assert_eq!(
        w.add_page(&v4.doc()).unwrap(),
        Added::Indexed {
            chunks: 1,
            page_docs: 0,
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
    assert_eq!(index.num_docs(), 5);
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
    assert_eq!(index.num_docs(), 3);
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
    assert_eq!(index.num_docs(), 2 * chunks as u64);

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
        index.num_docs(),
        times[times.len() / 2],
        times[times.len() * 99 / 100]
    );
}

#[test]
fn words_close_together_rank_above_the_same_words_scattered() {
    let dir = TempDir::new("proximity");
    let (index, mut w) = open(&dir);
    // Both chunks hold every query word once; the shorter one, which BM25 alone ranks
    // first, holds them far apart and out of order.
    let scattered = Page::new(
        "scattered",
        "https://example.com/scattered",
        "2024-01-01T00:00:00Z",
        "s",
        &[
            "daily tides reach the old pier, and maps of the whole bay are printed twice a \
           year when the office of the harbour board publishes",
        ],
    );
    let together = Page::new(
        "together",
        "https://example.com/together",
        "2024-01-01T00:00:00Z",
        "t",
        &[
            "the harbour office publishes maps twice daily, and the ferry schedule changes \
           each spring while the lighthouse keeper answers questions from visitors about \
           the weather, the moorings, the fishing fleet and the long walk along the cliffs",
        ],
    );
    for p in [&scattered, &together] {
        w.add_page(&p.doc()).unwrap();
    }
    w.commit().unwrap();
    let hits = search(
        &index,
        SearchQuery::new("harbour office publishes maps twice daily"),
    );
    assert_eq!(page_ids(&hits), ["together", "scattered"]);
    // The query language is left alone: a quoted phrase matches the passage only.
    let hits = search(&index, SearchQuery::new("\"publishes maps twice\""));
    assert_eq!(page_ids(&hits), ["together"]);
}

#[test]
fn page_text_finds_what_passages_lack_and_yields_to_them() {
    let dir = TempDir::new("page-text");
    let (index, mut w) = open(&dir);
    assert!(index.indexes_page_text());
    let at = "2024-01-01T00:00:00Z";
    let mut kettle = Page::new(
        "a",
        "https://shop.test/kettle",
        at,
        "ha",
        &["A sturdy blue kettle for the stove."],
    );
    kettle.rest = Some("Reviews: boils fast and the handle stays cool\nHome Cart".into());
    let mut teapot = Page::new(
        "b",
        "https://shop.test/teapot",
        at,
        "hb",
        &["A teapot whose handle stays cool, though it boils nothing."],
    );
    teapot.rest = Some("Home Cart".into());
    for page in [&kettle, &teapot] {
        assert_eq!(
            w.add_page(&page.doc()).unwrap(),
            Added::Indexed {
                chunks: 1,
                page_docs: 1,
                replaced: 0
            }
        );
    }
    w.commit().unwrap();

    // Words only in the page's rest: the page is found, as a page hit.
    let hits = search(&index, SearchQuery::new("reviews boils fast"));
    assert_eq!(hits[0].page_id, "a");
    assert_eq!(hits[0].kind, HitKind::Page);
    assert_eq!(hits[0].chunk_id, "a:page:0");
    assert!(hits[0].text.starts_with("Reviews:"));
    assert!(
        hits[0].snippet.contains("<b>boils</b>"),
        "{}",
        hits[0].snippet
    );
    // A passage holding the words outranks a rest holding them.
    let hits = search(&index, SearchQuery::new("handle stays cool"));
    assert_eq!(page_ids(&hits), vec!["b", "a"]);
    assert_eq!(hits[0].kind, HitKind::Passage);
    // A page's rest never follows one of its own passages.
    let hits = search(&index, SearchQuery::new("home kettle"));
    let kinds: Vec<(&str, HitKind)> = hits.iter().map(|h| (h.page_id.as_str(), h.kind)).collect();
    assert_eq!(kinds, vec![("a", HitKind::Passage), ("b", HitKind::Page)]);
    // A new version replaces the rest with the passages.
    let mut newer = Page::new(
        "a2",
        "https://shop.test/kettle",
        "2024-02-01T00:00:00Z",
        "ha2",
        &["A sturdy blue kettle."],
    );
    newer.rest = Some("Sold out".into());
    assert!(matches!(
        w.add_page(&newer.doc()).unwrap(),
        Added::Indexed {
            chunks: 1,
            page_docs: 1,
            ..
        }
    ));
    w.commit().unwrap();
    assert!(search(&index, SearchQuery::new("reviews")).is_empty());
    assert_eq!(
        page_ids(&search(&index, SearchQuery::new("sold"))),
        vec!["a2"]
    );
    let old = search(&index, as_of("reviews", "2024-01-15T00:00:00Z"));
    assert_eq!(page_ids(&old), vec!["a"]);
}

#[test]
fn an_index_from_before_page_documents_opens_without_them() {
    let dir = TempDir::new("legacy");
    std::fs::create_dir_all(&dir.0).unwrap();
    Index::create_in_dir(&dir.0, super::schema::schema(false).0).unwrap();
    let (index, mut w) = open(&dir);
    assert!(!index.indexes_page_text());
    let mut page = Page::new(
        "p",
        "https://a.test/",
        "2024-01-01T00:00:00Z",
        "h",
        &["passage words"],
    );
    page.rest = Some("words of the rest".into());
    assert_eq!(
        w.add_page(&page.doc()).unwrap(),
        Added::Indexed {
            chunks: 1,
            page_docs: 0,
            replaced: 0
        }
    );
    w.commit().unwrap();
    assert_eq!(index.num_docs(), 1);
    assert!(search(&index, SearchQuery::new("rest")).is_empty());
    assert_eq!(
        page_ids(&search(&index, SearchQuery::new("passage"))),
        vec!["p"]
    );
}

#[test]
fn a_long_rest_is_cut_between_lines_into_passage_sized_pieces() {
    let line = |i: usize| format!("line {i} {}\n", "word ".repeat(48));
    let rest: String = (0..13).map(line).collect();
    let pieces = super::writer::rest_pieces(&rest);
    // 50 words a line: six lines make a piece of 300.
    assert_eq!(pieces.len(), 3, "{pieces:?}");
    assert!(pieces[0].starts_with("line 0 ") && pieces[1].starts_with("line 6 "));
    assert!(pieces[2].starts_with("line 12 ") && !pieces[2].contains('\n'));
    assert!(super::writer::rest_pieces(" \n ").is_empty());
}

#[test]
fn new_indexes_store_with_zstd_and_an_lz4_index_keeps_lz4() {
    let compression = |dir: &TempDir| {
        let index = ArchiveIndex::open_or_create(&dir.0).unwrap();
        index.index.settings().docstore_compression
    };
    // Writes a page, then reads its stored text back through a freshly opened index.
    let round_trip = |dir: &TempDir| {
        let (_, mut w) = open(dir);
        let page = Page::new(
            "z",
            "https://a.test/z",
            "2024-01-01T00:00:00Z",
            "h",
            &["compressed passage words"],
        );
        w.add_page(&page.doc()).unwrap();
        w.commit().unwrap();
        drop(w);
        let index = ArchiveIndex::open_or_create(&dir.0).unwrap();
        let hits = search(&index, SearchQuery::new("compressed"));
        assert_eq!(page_ids(&hits), vec!["z"]);
        assert!(hits[0].text.contains("compressed passage words"));
    };

    let fresh = TempDir::new("zstd");
    round_trip(&fresh);
    assert!(matches!(
        compression(&fresh),
        tantivy::store::Compressor::Zstd(tantivy::store::ZstdCompressor {
            compression_level: Some(DOCSTORE_ZSTD_LEVEL)
        })
    ));

    // An index made by an earlier version, with tantivy's default lz4, stays lz4 and readable.
    let old = TempDir::new("lz4");
    std::fs::create_dir_all(&old.0).unwrap();
    Index::create_in_dir(&old.0, super::schema::schema(true).0).unwrap();
    round_trip(&old);
    assert!(matches!(compression(&old), tantivy::store::Compressor::Lz4));
}

#[test]
fn stores_and_positions_are_read_by_position_and_other_files_mapped() {
    let dir = TempDir::new("directory");
    std::fs::create_dir_all(&dir.0).expect("mkdir");
    let content: Vec<u8> = (0..=255u8).cycle().take(10_000).collect();
    for name in ["a.store", "a.pos", "a.idx"] {
        std::fs::write(dir.0.join(name), &content).expect("write");
    }
    std::fs::write(dir.0.join("empty.store"), b"").expect("write");
    let directory = directory::IndexDirectory::open(&dir.0).expect("open");

    // Both handles read the same bytes; only their type (seen through Debug) tells a buffered
    // read from a mapping.
    let store = directory
        .get_file_handle(Path::new("a.store"))
        .expect("store");
    assert!(format!("{store:?}").starts_with("ReadFile"), "{store:?}");
    assert_eq!(store.len(), 10_000);
    assert_eq!(
        store.read_bytes(300..310).expect("read").as_slice(),
        &content[300..310]
    );
    assert_eq!(
        directory
            .open_read(Path::new("a.store"))
            .expect("slice")
            .read_bytes()
            .expect("read")
            .as_slice(),
        &content[..]
    );
    assert!(store.read_bytes(9_990..10_001).is_err());
    assert!(store.read_bytes(5..5).expect("empty").is_empty());
    let empty = directory
        .get_file_handle(Path::new("empty.store"))
        .expect("empty store");
    assert_eq!(empty.len(), 0);

    let positions = directory.get_file_handle(Path::new("a.pos")).expect("pos");
    assert!(
        format!("{positions:?}").starts_with("ReadFile"),
        "{positions:?}"
    );
    let other = directory.get_file_handle(Path::new("a.idx")).expect("idx");
    assert!(!format!("{other:?}").starts_with("ReadFile"), "{other:?}");
    assert_eq!(
        other.read_bytes(0..10).expect("read").as_slice(),
        &content[..10]
    );
    assert!(matches!(
        directory.get_file_handle(Path::new("missing.store")),
        Err(OpenReadError::FileDoesNotExist(_))
    ));
}
