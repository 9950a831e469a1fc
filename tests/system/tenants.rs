//! Tenants over HTTP: the real router served on 127.0.0.1 by an `App` built as `trawl serve`
//! builds it (fetch and archive pools beside it), with two bare tokens (two tenants) and an
//! admin token, on both store engines. Another tenant's job, crawl, page, search hit or cached
//! private page is not found; a plain public fetch is shared through the cache.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::{FixtureServer, ForwardProxy};
use trawl::api::{self, AppState, TokenEntry};
use trawl::app::Shutdown;
use trawl::config::{Config, Secret};

use crate::engines::{TestDb, on_both_engines};
use crate::{spawn_app, test_config};

const TOKEN_A: &str = "tenant-a-token-0123456789";
const TOKEN_B: &str = "tenant-b-token-0123456789";
const ADMIN: &str = "admin-token-0123456789abc";

/// A server with two tenants' tokens and the admin token.
struct Server {
    base: String,
    http: reqwest::Client,
    shutdown: Shutdown,
    _dir: tempfile::TempDir,
}

impl Server {
    /// A server with its pools, on `db` and the embedded queue.
    async fn start(db: &TestDb) -> Server {
        Server::start_on(db, None, true).await.0
    }

    /// A server on `db` and, when given, the Redis queue at `redis_url`; with `pools`, the
    /// fetch and archive pools run beside it. Returns its configuration too.
    async fn start_on(db: &TestDb, redis_url: Option<String>, pools: bool) -> (Server, Config) {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config {
            namespace: "tenants-test".to_owned(),
            database_url: Some(Secret::new(db.url.clone())),
            redis_url: redis_url.map(Secret::new),
            ..test_config(dir.path())
        };
        config.api = api::Config {
            tokens: vec![
                TokenEntry::Bare(Secret::new(TOKEN_A)),
                TokenEntry::Bare(Secret::new(TOKEN_B)),
            ],
            admin_token: Some(Secret::new(ADMIN)),
            sync_timeout_secs: 10,
            ..api::Config::default()
        };
        config.archive.commit_ms = 50;
        config.validate().expect("valid");
        let mut app = spawn_app(&config).await;
        let index = trawl_workers::archive::index::ArchiveIndex::open_or_create(
            &trawl::archive::index_dir(&config.data_dir),
        )
        .expect("index opens");
        if pools {
            app.start_pools();
            app.start_archive(trawl::archive::Stop::Now)
                .expect("archive pool starts");
        }
        let state = AppState {
            context: app.deps().clone(),
            queue: app.deps().queue.clone(),
            config: Arc::new(config.api.clone()),
            archive: Some(api::ArchiveSearch { index, per_page: 2 }),
            sessions: None,
            remote_sessions: None,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        app.serve("server", listener, api::router(state));
        let server = Server {
            base,
            http: reqwest::Client::new(),
            shutdown: app.shutdown_signal(),
            _dir: dir,
        };
        (server, config)
    }

    /// Calls the API with `token`; returns the status and the JSON body (null when not JSON).
    async fn call(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(token);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.expect("the server answers");
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        (status, serde_json::from_str(&text).unwrap_or(Value::Null))
    }

    async fn get(&self, token: &str, path: &str) -> (StatusCode, Value) {
        self.call(token, reqwest::Method::GET, path, None).await
    }

    async fn post(&self, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(token, reqwest::Method::POST, path, Some(body))
            .await
    }

    async fn delete(&self, token: &str, path: &str) -> (StatusCode, Value) {
        self.call(token, reqwest::Method::DELETE, path, None).await
    }

    /// Waits for a job of `token`'s tenant to end; returns its record.
    async fn ended(&self, token: &str, id: &str) -> Value {
        for _ in 0..400 {
            let (status, job) = self.get(token, &format!("/v1/jobs/{id}")).await;
            assert_eq!(status, StatusCode::OK, "{job}");
            if job["status"] != "queued" && job["status"] != "running" {
                return job;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("job {id} did not end");
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

/// Records `what` as a leak unless the answer is a 404 with the `not_found` code (every case
/// is checked, then the leaks are reported together).
fn not_found(leaks: &mut Vec<String>, (status, body): (StatusCode, Value), what: &str) {
    if status != StatusCode::NOT_FOUND || body["error"]["code"] != "not_found" {
        leaks.push(format!("{what}: {status}"));
    }
}

async fn another_tenants_objects_are_not_found(db: TestDb) {
    let site = FixtureServer::start().await.expect("fixture");
    let server = Server::start(&db).await;
    let url = site.url("/article/1");

    // A's job, with its page archived.
    let (status, submitted) = server
        .post(
            TOKEN_A,
            "/v1/jobs",
            json!({"kind": "fetch", "url": url, "archive": true}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{submitted}");
    let id = submitted["jobs"][0]["id"].as_str().expect("id").to_owned();
    let job = server.ended(TOKEN_A, &id).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    let title = job["result"]["title"].as_str().expect("a title").to_owned();

    // B: no job, no events, no cancel.
    let mut leaks = Vec::new();
    let leaks = &mut leaks;
    not_found(
        leaks,
        server.get(TOKEN_B, &format!("/v1/jobs/{id}")).await,
        "job",
    );
    not_found(
        leaks,
        server.get(TOKEN_B, &format!("/v1/jobs/{id}/events")).await,
        "events",
    );
    not_found(
        leaks,
        server.delete(TOKEN_B, &format!("/v1/jobs/{id}")).await,
        "cancel",
    );
    // ... no page to read or grep.
    let query = format!("/v1/pages?url={}", urlencode(&url));
    assert_eq!(server.get(TOKEN_A, &query).await.0, StatusCode::OK);
    not_found(leaks, server.get(TOKEN_B, &query).await, "page read");
    let grep = json!({"url": url, "pattern": "."});
    assert_eq!(
        server.post(TOKEN_A, "/v1/pages/grep", grep.clone()).await.0,
        StatusCode::OK
    );
    not_found(
        leaks,
        server.post(TOKEN_B, "/v1/pages/grep", grep).await,
        "grep",
    );
    // The admin sees A's job.
    assert_eq!(
        server.get(ADMIN, &format!("/v1/jobs/{id}")).await.0,
        StatusCode::OK
    );

    // A's crawl: B can neither read nor cancel it.
    let (status, crawl) = server
        .post(
            TOKEN_A,
            "/v1/crawls",
            json!({"seeds": [site.url("/site/1")], "max_depth": 0, "robots": false}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{crawl}");
    let crawl_id = crawl["id"].as_str().expect("id").to_owned();
    assert_eq!(
        server
            .get(TOKEN_A, &format!("/v1/crawls/{crawl_id}"))
            .await
            .0,
        StatusCode::OK
    );
    not_found(
        leaks,
        server.get(TOKEN_B, &format!("/v1/crawls/{crawl_id}")).await,
        "crawl",
    );
    not_found(
        leaks,
        server
            .delete(TOKEN_B, &format!("/v1/crawls/{crawl_id}"))
            .await,
        "crawl cancel",
    );
    assert_eq!(
        server.get(ADMIN, &format!("/v1/crawls/{crawl_id}")).await.0,
        StatusCode::OK
    );

    // Search: A finds its archived page; B finds nothing; the admin finds A's page.
    let words: String = title
        .split(|c: char| !c.is_alphanumeric())
        .filter(|word| word.len() > 3)
        .collect::<Vec<_>>()
        .join(" ");
    let search = format!("/v1/archive/search?q={}", urlencode(&words));
    let mut found = Value::Null;
    for _ in 0..200 {
        let (status, body) = server.get(TOKEN_A, &search).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if body["hits"].as_array().is_some_and(|hits| !hits.is_empty()) {
            found = body;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(found["hits"][0]["url"], url.as_str(), "{found}");
    let (status, theirs) = server.get(TOKEN_B, &search).await;
    assert_eq!(status, StatusCode::OK);
    if theirs["hits"] != json!([]) {
        leaks.push("search: A's page in B's hits".to_owned());
    }
    let (_, all) = server.get(ADMIN, &search).await;
    assert_eq!(all["hits"][0]["url"], url.as_str(), "{all}");
    assert!(leaks.is_empty(), "B reached A's objects: {leaks:?}");
}

async fn the_cache_is_shared_only_for_plain_public_fetches(db: TestDb) {
    let site = FixtureServer::start().await.expect("fixture");
    let proxy = ForwardProxy::start(site.addr()).await;
    let server = Server::start(&db).await;

    // A plain public fetch by A is served to B from the cache, as B's own page.
    let public = json!({"url": site.url("/article/2")});
    let (status, first) = server.post(TOKEN_A, "/v1/fetch", public.clone()).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["cached"], false);
    let (status, second) = server.post(TOKEN_B, "/v1/fetch", public).await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["cached"], true, "{second}");
    assert_ne!(second["page_id"], first["page_id"]);
    assert_eq!(site.hits("/article/2"), 1);
    let read = format!("/v1/pages?url={}", urlencode(&site.url("/article/2")));
    let (status, page) = server.get(TOKEN_B, &read).await;
    assert_eq!(status, StatusCode::OK, "{page}");
    assert_eq!(page["page_id"], second["page_id"]);

    // A fetch through A's own proxy is A's: cached for A, fetched again for B.
    let private = |token_proxy: &str| json!({"url": site.url("/article/3"), "proxy": token_proxy});
    let (status, mine) = server
        .post(TOKEN_A, "/v1/fetch", private(&proxy.url("a")))
        .await;
    assert_eq!(status, StatusCode::OK, "{mine}");
    assert_eq!(mine["cached"], false);
    let (status, again) = server
        .post(TOKEN_A, "/v1/fetch", private(&proxy.url("a")))
        .await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(
        again["cached"], true,
        "A's own private page is cached for A"
    );
    let (status, theirs) = server
        .post(TOKEN_B, "/v1/fetch", private(&proxy.url("b")))
        .await;
    assert_eq!(status, StatusCode::OK, "{theirs}");
    assert_eq!(
        theirs["cached"], false,
        "A's private page served to B: {theirs}"
    );
    assert_ne!(theirs["page_id"], mine["page_id"]);
    assert_eq!(site.hits("/article/3"), 2);
    // B's plain public fetch of that URL does not find A's private page either.
    let (status, plain) = server
        .post(TOKEN_B, "/v1/fetch", json!({"url": site.url("/article/3")}))
        .await;
    assert_eq!(status, StatusCode::OK, "{plain}");
    assert_eq!(plain["cached"], false, "{plain}");
}

/// Distributed mode: an API without pools queues on Redis, a worker elsewhere (another `App`
/// on the same PostgreSQL store and Redis queue) runs the job, and the page it stores is the
/// tenant's who asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_worker_elsewhere_stores_the_page_for_its_tenant() {
    let site = FixtureServer::start().await.expect("fixture");
    let db = TestDb::postgres().await;
    let redis = crate::queue::RedisServer::start("noeviction");
    let (server, api_config) = Server::start_on(&db, Some(redis.url()), false).await;
    let worker_dir = tempfile::tempdir().expect("tempdir");
    let mut worker = spawn_app(&Config {
        data_dir: worker_dir.path().to_owned(),
        ..api_config
    })
    .await;
    worker.start_pools();
    let stop_worker = worker.shutdown_signal();

    let url = site.url("/article/4");
    let (status, submitted) = server
        .post(TOKEN_B, "/v1/jobs", json!({"kind": "fetch", "url": url}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{submitted}");
    let id = submitted["jobs"][0]["id"].as_str().expect("id").to_owned();
    let job = server.ended(TOKEN_B, &id).await;
    assert_eq!(job["status"], "succeeded", "{job}");
    let query = format!("/v1/pages?url={}", urlencode(&url));
    let (status, page) = server.get(TOKEN_B, &query).await;
    assert_eq!(status, StatusCode::OK, "B's own page: {page}");
    assert_eq!(page["page_id"], id.as_str());
    let mut leaks = Vec::new();
    not_found(&mut leaks, server.get(TOKEN_A, &query).await, "page read");
    not_found(
        &mut leaks,
        server.get(TOKEN_A, &format!("/v1/jobs/{id}")).await,
        "job",
    );
    assert!(leaks.is_empty(), "A reached B's objects: {leaks:?}");
    stop_worker.trigger();
}

on_both_engines!(
    another_tenants_objects_are_not_found,
    the_cache_is_shared_only_for_plain_public_fetches
);

/// Percent-encodes a query value.
fn urlencode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}
