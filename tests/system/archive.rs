//! The archive with real parts: pages fetched from the fixture server with `archive: true`,
//! chunked into the index and written as WARC records; an archive pool dropped before its
//! commit (as if killed) resumed without duplicate or missing chunks; the real binary's
//! `run --archive`, `search`, `archive` and `export --warc`, with the WARC files checked by
//! warcio; and `/v1/archive/search` (and `/v1/search`, its deprecated former path).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use testkit::FixtureServer;
use trawl::app::Deps;
use trawl::archive::{self, Archiver, Stop};
use trawl::runner;
use trawl::store::NewJob;
use trawl_workers::archive::index::{ArchiveIndex, SearchQuery};
use trawl_workers::job::{FetchJob, Job};

use crate::{context_in, trawl_command as trawl};

/// Fetches `paths` from the fixture server as jobs with `archive: true`.
async fn fetch_for_archive(context: &Deps, server: &FixtureServer, paths: &[String]) {
    for path in paths {
        let id = ulid::Ulid::generate().to_string();
        let job = Job::Fetch(FetchJob {
            archive: true,
            cache_ttl: Some(0),
            ..FetchJob::new(server.url(path))
        });
        context
            .store
            .create_jobs(&[NewJob::new(&id, &job, 3)])
            .await
            .expect("job recorded");
        runner::process(context, &trawl::queue::Envelope::new(id, job))
            .await
            .expect("processed");
    }
}

fn config(commit_pages: usize) -> archive::Config {
    archive::Config {
        commit_pages,
        commit_ms: 3_600_000,
        writer_heap_mb: 20,
        ..archive::Config::default()
    }
}

/// Every WARC record of the `.warc.gz` files (closed and open) under `dir`, as
/// (WARC-Type, WARC-Target-URI) pairs, read with flate2 member by member.
fn warc_records(dir: &Path) -> Vec<(String, String)> {
    let mut records = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("warc dir")
        .map(|entry| entry.expect("entry").path())
        .collect();
    files.sort();
    for file in files {
        let mut text = String::new();
        let bytes = std::fs::read(&file).expect("reads");
        std::io::Read::read_to_string(
            &mut flate2::read::MultiGzDecoder::new(bytes.as_slice()),
            &mut text,
        )
        .ok();
        let text = String::from_utf8_lossy(text.as_bytes()).into_owned();
        for record in text.split("WARC/1.1\r\n").skip(1) {
            let field = |name: &str| {
                record
                    .lines()
                    .take_while(|line| !line.is_empty())
                    .find_map(|line| line.strip_prefix(name))
                    .unwrap_or_default()
                    .trim()
                    .to_owned()
            };
            records.push((field("WARC-Type:"), field("WARC-Target-URI:")));
        }
    }
    records
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn archived_pages_are_searchable_and_written_as_warc_records() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context_in(dir.path(), runner::Config::default()).await;
    let paths: Vec<String> = (1..=4).map(|n| format!("/article/{n}")).collect();
    fetch_for_archive(&context, &server, &paths).await;
    assert_eq!(context.store.archive_pending().await.expect("counts"), 4);

    let archiver = Archiver::open(
        context.store.clone(),
        dir.path(),
        config(1_000),
        context.fetch.client.request_headers(),
    )
    .expect("archive opens");
    let index = archiver.index().clone();
    let stats = archiver
        .run(Stop::Drain, crate::stopped())
        .await
        .expect("drains");
    assert_eq!((stats.pages, stats.failed), (4, 0));
    assert!(stats.chunks >= 4, "{stats:?}");
    // Every article has a menu, a cookie banner and a footer outside its content.
    assert!(stats.page_docs >= 4, "{stats:?}");
    assert_eq!(stats.warc_responses, 4);
    assert_eq!(context.store.archive_pending().await.expect("counts"), 0);
    index.reload().expect("reloads");
    assert_eq!(index.num_docs(), stats.chunks + stats.page_docs);

    // The title of article 3 finds article 3 first, with its heading path and a snippet.
    let page = context
        .store
        .latest_page(&trawl::tenant::Scope::default(), &server.url("/article/3"))
        .await
        .expect("reads")
        .expect("stored");
    let title = page.info.title.clone().expect("title");
    let words: String = title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.len() > 3)
        .collect::<Vec<_>>()
        .join(" ");
    let hits = index.search(&SearchQuery::new(words)).expect("searches");
    assert!(!hits.is_empty());
    assert!(hits[0].url.ends_with("/article/3"), "{:?}", hits[0]);
    assert!(hits[0].snippet.contains("<b>"), "{}", hits[0].snippet);

    // Host filter: nothing from another host.
    let elsewhere = index
        .search(&SearchQuery {
            host: Some("elsewhere.test".to_owned()),
            ..SearchQuery::new("article")
        })
        .expect("searches");
    assert!(elsewhere.is_empty());

    // An unchanged re-fetch: the index keeps one version's chunks, the WARC gets a revisit.
    fetch_for_archive(&context, &server, &paths[..1]).await;
    let archiver = Archiver::open(
        context.store.clone(),
        dir.path(),
        config(1_000),
        context.fetch.client.request_headers(),
    )
    .expect("archive reopens after the first pool ended");
    let again = archiver
        .run(Stop::Drain, crate::stopped())
        .await
        .expect("drains");
    assert_eq!((again.pages, again.unchanged), (0, 1), "{again:?}");
    assert_eq!((again.warc_responses, again.warc_revisits), (0, 1));
    index.reload().expect("reloads");
    assert_eq!(index.num_docs(), stats.chunks + stats.page_docs);

    let records = warc_records(&dir.path().join("warc"));
    let count = |kind: &str| records.iter().filter(|(t, _)| t == kind).count();
    assert_eq!(count("response"), 4, "{records:?}");
    assert_eq!(count("revisit"), 1);
    assert_eq!(count("request"), 5);
    assert_eq!(count("metadata"), 5);
    assert_eq!(count("warcinfo"), 2, "one per file");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_archive_pool_stopped_before_its_commit_resumes_without_duplicates() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context_in(dir.path(), runner::Config::default()).await;
    let paths: Vec<String> = (1..=6).map(|n| format!("/site/{n}")).collect();
    fetch_for_archive(&context, &server, &paths).await;

    // A pool that indexes and writes WARC records but never commits, then is dropped: the
    // pages stay pending in the store, the uncommitted index work is gone.
    let mut crashed = Archiver::open(
        context.store.clone(),
        dir.path(),
        config(1_000),
        context.fetch.client.request_headers(),
    )
    .expect("archive opens");
    assert_eq!(crashed.step().await.expect("steps"), 6);
    assert!(crashed.stats().chunks > 0);
    drop(crashed);
    assert_eq!(context.store.archive_pending().await.expect("counts"), 6);

    let archiver = Archiver::open(
        context.store.clone(),
        dir.path(),
        config(4),
        context.fetch.client.request_headers(),
    )
    .expect("archive reopens");
    let index = archiver.index().clone();
    let stats = archiver
        .run(Stop::Drain, crate::stopped())
        .await
        .expect("drains");
    assert_eq!(stats.pages, 6);
    // The WARC records written before the crash were recorded and are not written again.
    assert_eq!(stats.warc_responses, 0, "{stats:?}");
    assert_eq!(context.store.archive_pending().await.expect("counts"), 0);
    index.reload().expect("reloads");
    assert_eq!(
        index.num_docs(),
        stats.chunks + stats.page_docs,
        "no duplicate documents"
    );
    let records = warc_records(&dir.path().join("warc"));
    let responses = records.iter().filter(|(t, _)| t == "response").count();
    assert_eq!(responses, 6, "{records:?}");

    // A second pool on the same index is refused while one holds the writer.
    let holder = Archiver::open(
        context.store.clone(),
        dir.path(),
        config(4),
        context.fetch.client.request_headers(),
    )
    .expect("opens");
    let second = Archiver::open(
        context.store.clone(),
        dir.path(),
        config(4),
        context.fetch.client.request_headers(),
    );
    assert!(
        matches!(
            second,
            Err(archive::Error::Index(
                trawl_workers::archive::index::Error::Busy
            ))
        ),
        "{second:?}"
    );
    // The open pool holds what its process stores for it, and lets go of it as it ends (no
    // page to archive would wait for a pool that is gone).
    // Its text; its raw body (for its WARC records) and its visible lines (for its page
    // document, read as it was extracted).
    fetch_for_archive(&context, &server, &["/site/7".to_owned()]).await;
    assert_eq!(context.store.held_for_archive(), (1, 2));
    drop(holder);
    assert_eq!(context.store.held_for_archive(), (0, 0));
    fetch_for_archive(&context, &server, &["/site/8".to_owned()]).await;
    assert_eq!(context.store.held_for_archive(), (0, 0), "nor kept after");
}

/// The words of `/article/{n}`'s title longer than three letters, as a query.
fn title_words(n: u64) -> String {
    testkit::article_title(n)
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.len() > 3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// warcio, from the test venv (`scripts/test.sh` installs it) or `WARCIO_BIN`.
#[allow(clippy::disallowed_methods)]
fn warcio() -> PathBuf {
    if let Some(path) = std::env::var_os("WARCIO_BIN") {
        return PathBuf::from(path);
    }
    let home = std::env::var_os("HOME").expect("HOME is set");
    let path = Path::new(&home).join(".cache/trawl-venv/bin/warcio");
    assert!(
        path.exists(),
        "warcio not found at {}: install it with `python3 -m venv ~/.cache/trawl-venv && ~/.cache/trawl-venv/bin/pip install warcio` (scripts/test.sh does)",
        path.display()
    );
    path
}

fn succeeds(command: &mut std::process::Command) -> String {
    let output = command.output().expect("runs");
    assert!(
        output.status.success(),
        "{command:?}\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_archives_searches_and_exports_warc_that_warcio_accepts() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let urls: Vec<String> = (1..=3)
        .map(|n| server.url(&format!("/article/{n}")))
        .collect();
    let data_for_run = data.clone();
    let urls_for_run = urls.clone();
    let summary = tokio::task::spawn_blocking(move || {
        succeeds(
            trawl(&data_for_run)
                .args(["run", "--quiet", "--allow-private-network", "--archive"])
                .args(&urls_for_run),
        )
    })
    .await
    .expect("runs");
    assert!(summary.contains("archived: 3 pages"), "{summary}");

    let data_for_search = data.clone();
    let found = tokio::task::spawn_blocking(move || {
        succeeds(trawl(&data_for_search).args(["search", "--json", "-k", "3", &title_words(2)]))
    })
    .await
    .expect("searches");
    let hits: Vec<serde_json::Value> = serde_json::from_str(&found).expect("json hits");
    assert!(!hits.is_empty(), "{found}");
    assert!(
        hits[0]["url"]
            .as_str()
            .is_some_and(|url| url.ends_with("/article/2")),
        "{found}"
    );
    for hit in &hits {
        for field in [
            "url",
            "title",
            "headings",
            "text",
            "snippet",
            "score",
            "fetched_at",
        ] {
            assert!(hit.get(field).is_some(), "{field} missing in {hit}");
        }
    }

    // A URL never fetched: a clear refusal that changes nothing.
    let refused = trawl(&data)
        .args(["archive", "https://never-fetched.test/"])
        .output()
        .expect("runs");
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("no stored page"));
    // Archiving a stored page again: unchanged in the index, no second WARC record.
    let again = succeeds(trawl(&data).args(["archive", &urls[0]]));
    assert!(again.contains("1 unchanged"), "{again}");
    assert!(again.contains("WARC: 0 responses, 0 revisits"), "{again}");

    let export = dir.path().join("export.warc.gz");
    let exported = succeeds(trawl(&data).args(["export", "--warc"]).arg(&export));
    assert!(exported.contains("3 responses"), "{exported}");
    let mut warc_files = vec![export.clone()];
    for entry in std::fs::read_dir(data.join("warc")).expect("warc dir") {
        warc_files.push(entry.expect("entry").path());
    }
    assert_eq!(warc_files.len(), 2, "{warc_files:?}");
    for file in &warc_files {
        assert!(
            file.to_string_lossy().ends_with(".warc.gz"),
            "closed files only after the pools end: {file:?}"
        );
        let check = std::process::Command::new(warcio())
            .args(["check", "-v"])
            .arg(file)
            .output()
            .expect("warcio runs");
        assert!(
            check.status.success(),
            "warcio check {file:?}: {}{}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
    }
    let index = std::process::Command::new(warcio())
        .arg("index")
        .arg(&export)
        .output()
        .expect("warcio runs");
    let listed = String::from_utf8_lossy(&index.stdout);
    assert_eq!(listed.matches("\"response\"").count(), 3, "{listed}");
    assert!(listed.contains(&urls[1]), "{listed}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_endpoint_answers_from_the_archive() {
    use tower::ServiceExt as _;

    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let context: Arc<Deps> = context_in(dir.path(), runner::Config::default()).await;
    let paths: Vec<String> = (1..=3).map(|n| format!("/article/{n}")).collect();
    fetch_for_archive(&context, &server, &paths).await;
    let archiver = Archiver::open(
        context.store.clone(),
        dir.path(),
        config(1_000),
        context.fetch.client.request_headers(),
    )
    .expect("opens");
    archiver
        .run(Stop::Drain, crate::stopped())
        .await
        .expect("drains");
    let index = ArchiveIndex::open_or_create(&archive::index_dir(dir.path())).expect("index opens");
    let router = trawl::api::router(trawl::api::AppState {
        context: context.clone(),
        queue: context.queue.clone(),
        config: Arc::new(trawl::api::Config::default()),
        archive: Some(trawl::api::ArchiveSearch { index, per_page: 2 }),
        sessions: None,
        remote_sessions: None,
    });
    let get = |uri: String| {
        let router = router.clone();
        async move {
            let response = router
                .oneshot(
                    axum::http::Request::get(uri)
                        .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                            [127, 0, 0, 1],
                            9,
                        ))))
                        .body(axum::body::Body::empty())
                        .expect("request"),
                )
                .await
                .expect("responds");
            let status = response.status().as_u16();
            let body = axum::body::to_bytes(response.into_body(), 1 << 20)
                .await
                .expect("body");
            (
                status,
                serde_json::from_slice::<serde_json::Value>(&body).expect("json"),
            )
        }
    };
    let word = title_words(1)
        .split(' ')
        .max_by_key(|word| word.len())
        .expect("a word")
        .to_owned();
    let (status, body) = get(format!("/v1/archive/search?q={word}&k=2")).await;
    assert_eq!(status, 200, "{body}");
    // The former path (deprecated) answers the same for one release.
    let (former_status, former) = get(format!("/v1/search?q={word}&k=2")).await;
    assert_eq!((former_status, &former), (200, &body));
    let hits = body["hits"].as_array().expect("hits");
    assert!(!hits.is_empty() && hits.len() <= 2, "{body}");
    assert!(
        hits[0]["snippet"]
            .as_str()
            .is_some_and(|s| s.contains("<b>")),
        "{body}"
    );
    let (status, body) = get("/v1/archive/search?q=%22unclosed&k=2".to_owned()).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_query")),
        "{body}"
    );
    let (status, _) = get("/v1/archive/search?q=article&k=0".to_owned()).await;
    assert_eq!(status, 400);
    let (status, body) = get("/v1/archive/search?q=article&after=yesterday".to_owned()).await;
    assert_eq!(status, 400, "{body}");
    let (status, body) = get(format!("/v1/archive/search?q={word}&after=2999-01-01")).await;
    assert_eq!(
        (status, body["hits"].as_array().map(Vec::len)),
        (200, Some(0))
    );
}
