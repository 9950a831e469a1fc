//! Web search against loopback servers that answer like the real services (the fixture
//! server's SearxNG, DuckDuckGo HTML, instant answers and image search): results, typed
//! errors for every failure, forbidden engines, failover, the cache, the provider's origin
//! allowed while other private URLs stay refused, and search jobs whose top results become
//! fetch jobs of their batch (and archive entries), through the API and the binary.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Request, header};
use testkit::FixtureServer;
use tower::ServiceExt as _;
use trawl::api::{self, AppState};
use trawl::app::App;
use trawl::archive::{Archiver, Stop};
use trawl::config::Config;
use trawl::runner;

use crate::{spawn_app, test_config};

/// The `[search]` section pointing every provider at the fixture server, without pacing.
fn search_config(server: &FixtureServer) -> trawl::web_search::Config {
    let mut config = trawl::web_search::Config::default();
    config.searxng.url = Some(server.url("/searxng/"));
    config.duckduckgo.html_url = server.url("/ddg/html/");
    config.duckduckgo.instant_url = server.url("/ddg/instant/");
    config.duckduckgo.images_url = server.url("/ddg/images/");
    config.duckduckgo.min_interval_ms = 0;
    config
}

/// An application with its API router (no socket), the fixture server and, when asked, the
/// pools.
struct Searching {
    app: App,
    state: AppState,
    server: FixtureServer,
    dir: tempfile::TempDir,
}

impl Searching {
    async fn start(adjust: impl FnOnce(&mut Config, &FixtureServer)) -> Searching {
        let server = FixtureServer::start().await.expect("fixture");
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config {
            namespace: "web-search-test".to_owned(),
            runner: runner::Config {
                retry_base_ms: 10,
                retry_max_ms: 50,
                max_attempts: 2,
                concurrency: 4,
                ..runner::Config::default()
            },
            search: search_config(&server),
            ..test_config(dir.path())
        };
        adjust(&mut config, &server);
        let app = spawn_app(&config).await;
        let state = AppState {
            archive: None,
            sessions: None,
            remote_sessions: None,
            context: app.deps().clone(),
            queue: app.deps().queue.clone(),
            config: Arc::new(config.api.clone()),
        };
        Searching {
            app,
            state,
            server,
            dir,
        }
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (u16, serde_json::Value) {
        let mut request =
            Request::builder()
                .method(method)
                .uri(path)
                .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                    [127, 0, 0, 1],
                    9,
                ))));
        let body = match body {
            Some(json) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(json.to_string())
            }
            None => Body::empty(),
        };
        let response = api::router(self.state.clone())
            .oneshot(request.body(body).expect("request"))
            .await
            .expect("router answers");
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
            .await
            .expect("body");
        let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (status, json)
    }

    async fn search(&self, body: serde_json::Value) -> (u16, serde_json::Value) {
        self.call("POST", "/v1/web/search", Some(body)).await
    }

    /// Requests the fixture server saw on paths starting with `prefix`.
    fn seen(&self, prefix: &str) -> Vec<testkit::RecordedRequest> {
        self.server
            .requests()
            .into_iter()
            .filter(|request| request.path_and_query.starts_with(prefix))
            .collect()
    }

    async fn wait_ended(&self, id: &str) -> serde_json::Value {
        for _ in 0..400 {
            let (status, job) = self.call("GET", &format!("/v1/jobs/{id}"), None).await;
            assert_eq!(status, 200, "{job}");
            if ["succeeded", "failed", "dead", "cancelled"]
                .contains(&job["status"].as_str().unwrap_or_default())
            {
                return job;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("job {id} did not end");
    }
}

fn urls(result: &serde_json::Value) -> Vec<String> {
    result["hits"]
        .as_array()
        .expect("hits")
        .iter()
        .map(|hit| hit["url"].as_str().expect("a url").to_owned())
        .collect()
}

#[tokio::test]
async fn searxng_results_are_deduplicated_ranked_and_cached() {
    let searching = Searching::start(|_, _| {}).await;
    let base = searching.server.url("");
    let (status, result) = searching
        .search(serde_json::json!({"query": "rust async", "provider": "searxng", "limit": 10}))
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["provider"], "searxng");
    assert_eq!(result["cached"], false);
    assert_eq!(
        urls(&result),
        [
            format!("{base}/article/1"),
            format!("{base}/article/2"),
            "https://only-google.example/".to_owned(),
            format!("{base}/article/3"),
        ]
    );
    let first = &result["hits"][0];
    assert_eq!(first["rank"], 1);
    assert_eq!(first["title"], "Article one");
    assert_eq!(first["snippet"], "The first article.");
    assert_eq!(
        first["engines"],
        serde_json::json!(["wikipedia", "bing", "google"])
    );
    assert_eq!(first["published"], "2024-05-01T10:00:00");
    assert_eq!(result["hits"][1]["published"], serde_json::Value::Null);
    assert_eq!(result["answers"], serde_json::json!(["an answer"]));
    assert_eq!(result["infoboxes"][0]["title"], "Fixture");
    assert_eq!(
        result["suggestions"],
        serde_json::json!(["a suggestion", "a correction"])
    );
    assert_eq!(
        result["unresponsive_engines"],
        serde_json::json!([
            {"engine": "qwant", "reason": "timeout"},
            {"engine": "brave", "reason": "CAPTCHA"}
        ])
    );
    let sent = searching.seen("/searxng/search");
    assert_eq!(sent.len(), 1);
    assert!(
        sent[0]
            .path_and_query
            .contains("q=rust+async&format=json&pageno=1"),
        "{}",
        sent[0].path_and_query
    );

    // The same search again: from the cache, nothing asked.
    let (status, again) = searching
        .search(serde_json::json!({"query": "rust async", "provider": "searxng", "limit": 10}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(again["cached"], true);
    assert_eq!(again["hits"], result["hits"]);
    assert_eq!(searching.seen("/searxng/search").len(), 1);
    // Another limit is another answer; a limit of 2 keeps the first two.
    let (_, two) = searching
        .search(serde_json::json!({"query": "rust async", "provider": "searxng", "limit": 2}))
        .await;
    assert_eq!(two["cached"], false);
    assert_eq!(two["hits"].as_array().map(Vec::len), Some(2));

    let metrics = searching.app.deps().metrics.render();
    assert!(
        metrics.contains("trawl_web_search_total{outcome=\"cached\",provider=\"searxng\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("trawl_web_search_total{outcome=\"ok\",provider=\"searxng\"} 2"),
        "{metrics}"
    );
}

#[tokio::test]
async fn every_searxng_failure_is_a_typed_error() {
    let searching = Searching::start(|_, _| {}).await;
    let ask =
        |query: &str| serde_json::json!({"query": query, "provider": "searxng", "cache_ttl": 0});
    let (status, empty) = searching.search(ask("empty")).await;
    assert_eq!(
        (status, empty["hits"].clone()),
        (200, serde_json::json!([]))
    );

    let (status, nulls) = searching.search(ask("nulls")).await;
    assert_eq!(status, 200, "{nulls}");
    assert_eq!(urls(&nulls), ["https://nulls.example/page"]);
    assert_eq!(nulls["hits"][0]["title"], "");
    assert_eq!(nulls["hits"][0]["engines"], serde_json::json!([]));

    for (query, status, code) in [
        ("outage", 422, "http_status"),
        ("ratelimit", 429, "search_rate_limited"),
        ("badjson", 422, "search_invalid_response"),
        ("wrongtypes", 422, "search_invalid_response"),
    ] {
        let (got, body) = searching.search(ask(query)).await;
        assert_eq!(got, status, "{query}: {body}");
        assert_eq!(body["error"]["code"], code, "{query}: {body}");
    }
    let (_, limited) = searching.search(ask("ratelimit")).await;
    assert_eq!(limited["error"]["job_error"]["retry_after"], 7);
    assert_eq!(limited["error"]["job_error"]["transient"], true);
    let (_, outage) = searching.search(ask("outage")).await;
    assert_eq!(outage["error"]["job_error"]["status"], 503);
    let (_, wrong) = searching.search(ask("wrongtypes")).await;
    let message = wrong["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("results[0].url is a number"), "{message}");

    // Bad input is refused before anything is asked.
    let before = searching.seen("/searxng/").len();
    for body in [
        serde_json::json!({"query": "  "}),
        serde_json::json!({"query": "q", "limit": 51}),
        serde_json::json!({"query": "q", "provider": "bing"}),
        serde_json::json!({"query": "q", "nope": 1}),
    ] {
        let (status, answer) = searching.search(body.clone()).await;
        assert_eq!(status, 422, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "invalid_request", "{answer}");
    }
    assert_eq!(searching.seen("/searxng/").len(), before);
}

#[tokio::test]
async fn forbidden_engines_are_never_requested() {
    let searching = Searching::start(|config, _| {
        config.search.searxng.forbid_engines = vec!["google".into(), "Bing".into()];
    })
    .await;
    let (status, refused) = searching
        .search(serde_json::json!({"query": "q", "engines": ["wikipedia", "google"]}))
        .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], "search_engine_forbidden");
    assert!(searching.seen("/searxng/").is_empty());

    let (status, result) = searching
        .search(serde_json::json!({"query": "rust", "provider": "searxng"}))
        .await;
    assert_eq!(status, 200, "{result}");
    // The instance's enabled engines, less the forbidden ones, named explicitly.
    assert_eq!(searching.seen("/searxng/config").len(), 1);
    let sent = searching.seen("/searxng/search");
    assert!(
        sent[0].path_and_query.ends_with("&engines=wikipedia"),
        "{}",
        sent[0].path_and_query
    );
    // Results credited to forbidden engines alone are dropped, and their credits too.
    assert!(!urls(&result).contains(&"https://only-google.example/".to_owned()));
    assert_eq!(
        result["hits"][0]["engines"],
        serde_json::json!(["wikipedia"])
    );

    // A search job naming one is refused at submission.
    let (status, job) = searching
        .call(
            "POST",
            "/v1/jobs",
            Some(serde_json::json!({"kind": "search", "query": "q", "engines": ["bing"]})),
        )
        .await;
    assert_eq!(status, 400, "{job}");
    assert_eq!(job["error"]["code"], "search_engine_forbidden");
}

#[tokio::test]
async fn duckduckgo_results_are_decoded_and_cleaned() {
    let searching = Searching::start(|config, _| {
        config.search.duckduckgo.min_interval_ms = 200;
    })
    .await;
    let base = searching.server.url("");
    let started = Instant::now();
    let (status, result) = searching
        .search(serde_json::json!({"query": "tom and jerry", "provider": "duckduckgo"}))
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["provider"], "duckduckgo");
    // The ad, DuckDuckGo's own link and the duplicate are gone; links encoded once and
    // twice are decoded; nested blocks keep their own snippets.
    assert_eq!(
        urls(&result),
        [
            format!("{base}/article/1"),
            format!("{base}/article/2"),
            format!("{base}/article/3"),
            format!("{base}/article/2?ref=ddg"),
        ]
    );
    let hits = &result["hits"];
    assert_eq!(hits[0]["title"], "Tom & Jerry's article one");
    assert_eq!(hits[0]["snippet"], "The first \"article\" … with entities.");
    assert_eq!(hits[2]["title"], "Article three — the outer");
    assert_eq!(hits[2]["snippet"], "The outer block's snippet.");
    assert_eq!(hits[3]["snippet"], "The inner block's snippet.");
    assert_eq!(hits[0]["engines"], serde_json::json!(["duckduckgo"]));
    let sent = searching.seen("/ddg/html/");
    assert_eq!(sent[0].path_and_query, "/ddg/html/?q=tom+and+jerry");

    // The pace: a second request waits for its turn (one per 200 ms here).
    let (status, _) = searching
        .search(serde_json::json!({"query": "empty", "provider": "duckduckgo"}))
        .await;
    assert_eq!(status, 200);
    assert!(started.elapsed() >= Duration::from_millis(200));

    // The anti-bot page is never an empty result.
    for (query, status) in [("blocked", 202), ("forbidden", 403), ("challenge", 200)] {
        let (got, body) = searching
            .search(serde_json::json!({"query": query, "provider": "duckduckgo"}))
            .await;
        assert_eq!(got, 422, "{query}: {body}");
        assert_eq!(body["error"]["code"], "search_blocked", "{body}");
        assert_eq!(body["error"]["job_error"]["status"], status, "{body}");
        assert!(
            body["error"]["job_error"]["evidence"].is_string(),
            "{query}: {body}"
        );
    }
    let (status, limited) = searching
        .search(serde_json::json!({"query": "ratelimit", "provider": "duckduckgo"}))
        .await;
    assert_eq!(status, 429, "{limited}");
}

#[tokio::test]
async fn instant_answers_are_a_mode_of_their_own() {
    let searching = Searching::start(|_, _| {}).await;
    let (status, result) = searching
        .search(serde_json::json!({"query": "fixture", "provider": "instant"}))
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["provider"], "instant");
    let instant = &result["instant"];
    assert_eq!(instant["heading"], "Fixture");
    assert_eq!(instant["abstract"], "Fixtures are test data.");
    assert_eq!(instant["abstract_source"], "Wikipedia");
    assert_eq!(instant["answer"], "42");
    assert_eq!(instant["definition"], "a fixed thing");
    assert_eq!(
        instant["image"],
        searching.server.url("/i/fixture.png").as_str()
    );
    assert_eq!(result["hits"][1]["title"], "Article two");
    assert_eq!(result["hits"].as_array().map(Vec::len), Some(2));
    let (status, wrong) = searching
        .search(serde_json::json!({"query": "wrongtypes", "provider": "instant"}))
        .await;
    assert_eq!(status, 422);
    assert_eq!(wrong["error"]["code"], "search_invalid_response");
}

#[tokio::test]
async fn image_search_reads_the_token_and_keeps_the_cookies() {
    let searching = Searching::start(|_, _| {}).await;
    let (status, result) = searching
        .call(
            "POST",
            "/v1/web/images",
            Some(serde_json::json!({"query": "lanterns"})),
        )
        .await;
    assert_eq!(status, 200, "{result}");
    let hits = result["hits"].as_array().expect("hits");
    assert_eq!(hits.len(), 2, "{result}");
    assert_eq!(
        hits[0]["image"],
        searching.server.url("/image.png").as_str()
    );
    assert_eq!(hits[0]["width"], 800);
    assert_eq!(hits[0]["height"], 600);
    assert_eq!(
        hits[0]["source_page"],
        searching.server.url("/article/1").as_str()
    );
    assert_eq!(hits[1]["thumbnail"], serde_json::Value::Null);
    let asked = searching.seen("/ddg/images/i.js");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].header("cookie"), Some(testkit::SEARCH_COOKIE));
    assert!(
        asked[0]
            .header("referer")
            .is_some_and(|referer| referer.contains("/ddg/images/?q=lanterns")),
        "{:?}",
        asked[0].headers
    );
    let (_, again) = searching
        .call(
            "POST",
            "/v1/web/images",
            Some(serde_json::json!({"query": "lanterns"})),
        )
        .await;
    assert_eq!(again["cached"], true);

    for (query, code) in [
        ("notoken", "search_invalid_response"),
        ("badjson", "search_invalid_response"),
        ("wrongtypes", "search_invalid_response"),
        ("blocked", "search_blocked"),
    ] {
        let (status, body) = searching
            .call(
                "POST",
                "/v1/web/images",
                Some(serde_json::json!({"query": query})),
            )
            .await;
        assert_eq!(status, 422, "{query}: {body}");
        assert_eq!(body["error"]["code"], code, "{query}: {body}");
    }
}

#[tokio::test]
async fn auto_falls_over_to_duckduckgo_and_says_who_answered() {
    let searching = Searching::start(|config, _| {
        // Nothing listens there: SearxNG's connection is refused.
        config.search.searxng.url = Some("http://127.0.0.1:1/".to_owned());
    })
    .await;
    let (status, result) = searching
        .search(serde_json::json!({"query": "anything"}))
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["provider"], "duckduckgo");
    assert_eq!(result["failed_over"][0]["provider"], "searxng");
    assert_eq!(result["failed_over"][0]["code"], "connect_error");
    assert_eq!(result["hits"].as_array().map(Vec::len), Some(4));

    // Both failing: the last error, naming each.
    let searching = Searching::start(|_, _| {}).await;
    let (status, body) = searching
        .search(serde_json::json!({"query": "outage"}))
        .await;
    assert_eq!(status, 422, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("every provider failed"), "{message}");
    assert!(
        message.contains("searxng") && message.contains("duckduckgo"),
        "{message}"
    );
    assert_eq!(searching.seen("/searxng/search").len(), 1);
    assert_eq!(searching.seen("/ddg/html/").len(), 1);

    // Without SearxNG, auto is DuckDuckGo; asking for SearxNG is refused.
    let searching = Searching::start(|config, _| config.search.searxng.url = None).await;
    let (_, result) = searching
        .search(serde_json::json!({"query": "anything"}))
        .await;
    assert_eq!(result["provider"], "duckduckgo");
    let (status, body) = searching
        .search(serde_json::json!({"query": "anything", "provider": "searxng"}))
        .await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "search_unconfigured");
}

#[tokio::test]
async fn cached_answers_expire() {
    let searching = Searching::start(|config, _| config.search.cache_ttl_secs = 1).await;
    let ask = serde_json::json!({"query": "expiring", "provider": "searxng"});
    let (_, first) = searching.search(ask.clone()).await;
    let (_, second) = searching.search(ask.clone()).await;
    assert_eq!(
        (first["cached"].clone(), second["cached"].clone()),
        (false.into(), true.into())
    );
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    let (_, third) = searching.search(ask.clone()).await;
    assert_eq!(third["cached"], false);
    assert_eq!(searching.seen("/searxng/search").len(), 2);
    // cache_ttl 0 always asks.
    let (_, fourth) = searching
        .search(serde_json::json!({"query": "expiring", "provider": "searxng", "cache_ttl": 0}))
        .await;
    assert_eq!(fourth["cached"], false);
    assert_eq!(searching.seen("/searxng/search").len(), 3);
}

#[tokio::test]
async fn the_provider_origin_is_reachable_and_nothing_else_private() {
    let mut searching = Searching::start(|config, _| {
        config.ssrf.allow_private_network = false;
    })
    .await;
    // The provider on loopback answers although loopback is refused everywhere else.
    let (status, result) = searching
        .search(serde_json::json!({"query": "rust", "provider": "searxng"}))
        .await;
    assert_eq!(status, 200, "{result}");
    let (status, _) = searching
        .search(serde_json::json!({"query": "rust", "provider": "duckduckgo"}))
        .await;
    assert_eq!(status, 200);

    // Its redirect to another loopback origin is refused, and that origin never asked.
    let (status, body) = searching
        .search(serde_json::json!({"query": "redirect", "provider": "searxng"}))
        .await;
    assert_eq!(status, 403, "{body}");
    assert_eq!(body["error"]["code"], "blocked_destination");
    assert!(searching.seen("/searxng/search?q=elsewhere").is_empty());

    // Its results, fetched, go through the guard: loopback is refused.
    searching.app.start_pools();
    let (status, submitted) = searching
        .call(
            "POST",
            "/v1/jobs",
            Some(serde_json::json!({"kind": "search", "query": "rust", "provider": "searxng", "fetch_top": 1})),
        )
        .await;
    assert_eq!(status, 202, "{submitted}");
    let search = searching
        .wait_ended(submitted["jobs"][0]["id"].as_str().expect("id"))
        .await;
    assert_eq!(search["status"], "succeeded", "{search}");
    let fetch_id = search["result"]["fetch_jobs"][0]["job_id"]
        .as_str()
        .expect("a fetch job")
        .to_owned();
    let fetch = searching.wait_ended(&fetch_id).await;
    assert_eq!(fetch["status"], "failed", "{fetch}");
    assert_eq!(fetch["error"]["code"], "blocked_destination", "{fetch}");
    assert_eq!(searching.seen("/article/").len(), 0);
}

#[tokio::test]
async fn a_search_job_fetches_and_archives_its_top_results() {
    let mut searching = Searching::start(|_, _| {}).await;
    searching.app.start_pools();
    let (status, submitted) = searching
        .call(
            "POST",
            "/v1/jobs",
            Some(serde_json::json!({
                "kind": "search", "query": "harbor lanterns", "provider": "searxng",
                "limit": 3, "fetch_top": 2, "archive": true
            })),
        )
        .await;
    assert_eq!(status, 202, "{submitted}");
    let batch_id = submitted["batch_id"].as_str().expect("a batch").to_owned();
    assert_eq!(submitted["jobs"][0]["url"], "");
    let search = searching
        .wait_ended(submitted["jobs"][0]["id"].as_str().expect("id"))
        .await;
    assert_eq!(search["status"], "succeeded", "{search}");
    let fetch_jobs = search["result"]["fetch_jobs"]
        .as_array()
        .expect("fetch jobs")
        .clone();
    assert_eq!(fetch_jobs.len(), 2, "{search}");
    assert_eq!(
        fetch_jobs[0]["url"],
        searching.server.url("/article/1").as_str()
    );
    assert_eq!(fetch_jobs[1]["rank"], 2);
    for fetched in &fetch_jobs {
        let job = searching
            .wait_ended(fetched["job_id"].as_str().expect("id"))
            .await;
        assert_eq!(job["status"], "succeeded", "{job}");
    }
    let (status, batch) = searching
        .call("GET", &format!("/v1/batches/{batch_id}"), None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(batch["total"], 3, "{batch}");
    assert_eq!(batch["counts"]["succeeded"], 3, "{batch}");

    // The fetched pages wait for the archive; the archive pool takes them into the index.
    let deps = searching.app.deps().clone();
    assert_eq!(deps.store.archive_pending().await.expect("counts"), 2);
    let archiver = Archiver::open(
        deps.store.clone(),
        searching.dir.path(),
        trawl::archive::Config::default(),
        deps.fetch.client.request_headers(),
    )
    .expect("archive opens");
    let index = archiver.index().clone();
    let stats = archiver
        .run(Stop::Drain, crate::stopped())
        .await
        .expect("drains");
    assert_eq!((stats.pages, stats.failed), (2, 0));
    index.reload().expect("reloads");
    assert!(index.num_docs() >= 2);
    assert_eq!(deps.store.archive_pending().await.expect("counts"), 0);

    // A search job delivered again makes the same fetch jobs, once.
    let envelope = trawl::queue::Envelope {
        batch_id: Some(batch_id.clone()),
        ..trawl::queue::Envelope::new(
            "01J0000000000000000000TEST".to_owned(),
            trawl_workers::job::Job::Search(trawl_workers::job::SearchJob::new("harbor lanterns")),
        )
    };
    let hits: Vec<trawl_workers::job::SearchHit> =
        serde_json::from_value(search["result"]["hits"].clone()).expect("hits");
    let once = trawl::web_search::fetch_top(&deps, &envelope, &hits, 2, false)
        .await
        .expect("queued");
    let twice = trawl::web_search::fetch_top(&deps, &envelope, &hits, 2, false)
        .await
        .expect("queued again");
    assert_eq!(once, twice);
    let (_, batch) = searching
        .call("GET", &format!("/v1/batches/{batch_id}"), None)
        .await;
    assert_eq!(batch["total"], 5, "{batch}");
}

#[tokio::test]
async fn the_binary_searches_and_prints_results() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let search = search_config(&server);
    let output = crate::trawl_command(dir.path())
        .args([
            "web-search",
            "rust",
            "--provider",
            "searxng",
            "--limit",
            "2",
            "--json",
        ])
        .env(
            "TRAWL_SEARCH__SEARXNG__URL",
            search.searxng.url.as_deref().expect("url"),
        )
        .output_async()
        .await;
    assert!(output.status.success(), "{output:?}");
    let result: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("one JSON document");
    assert_eq!(result["hits"].as_array().map(Vec::len), Some(2));

    let output = crate::trawl_command(dir.path())
        .args(["web-search", "rust", "--provider", "duckduckgo"])
        .env(
            "TRAWL_SEARCH__DUCKDUCKGO__HTML_URL",
            &search.duckduckgo.html_url,
        )
        .output_async()
        .await;
    assert!(output.status.success(), "{output:?}");
    let text = String::from_utf8_lossy(&output.stdout);
    assert!(text.starts_with("1. Tom & Jerry's article one\n"), "{text}");

    let output = crate::trawl_command(dir.path())
        .args(["web-search", "blocked", "--provider", "duckduckgo"])
        .env(
            "TRAWL_SEARCH__DUCKDUCKGO__HTML_URL",
            &search.duckduckgo.html_url,
        )
        .output_async()
        .await;
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(String::from_utf8_lossy(&output.stderr).contains("search_blocked"));

    let output = crate::trawl_command(dir.path())
        .args(["web-images", "lanterns", "--json"])
        .env(
            "TRAWL_SEARCH__DUCKDUCKGO__IMAGES_URL",
            &search.duckduckgo.images_url,
        )
        .output_async()
        .await;
    assert!(output.status.success(), "{output:?}");
    let images: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(images["hits"].as_array().map(Vec::len), Some(2));

    // --fetch-top runs a search job and its fetches in this process.
    let output = crate::trawl_command(dir.path())
        .args([
            "web-search",
            "rust",
            "--provider",
            "searxng",
            "--fetch-top",
            "2",
            "--json",
        ])
        .env(
            "TRAWL_SEARCH__SEARXNG__URL",
            search.searxng.url.as_deref().expect("url"),
        )
        .env("TRAWL_SSRF__ALLOW_PRIVATE_NETWORK", "true")
        .output_async()
        .await;
    assert!(output.status.success(), "{output:?}");
    let result: serde_json::Value = serde_json::from_slice(&output.stdout).expect("json");
    assert_eq!(
        result["fetch_jobs"].as_array().map(Vec::len),
        Some(2),
        "{result}"
    );
    assert_eq!(server.hits("/article/1"), 1);
    assert_eq!(server.hits("/article/2"), 1);
}

/// Runs a command without blocking the runtime the fixture server answers on.
trait OutputAsync {
    async fn output_async(&mut self) -> std::process::Output;
}

impl OutputAsync for std::process::Command {
    async fn output_async(&mut self) -> std::process::Output {
        let command = std::mem::replace(self, std::process::Command::new("true"));
        tokio::process::Command::from(command)
            .output()
            .await
            .expect("runs")
    }
}

/// Search latency through the cache, on the loopback fixtures: the median of uncached
/// searches (each query new) against cached ones (the same query again). A measurement, not
/// a check: `cargo test --test system web_search::search_latency -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement; run it by name"]
async fn search_latency_through_the_cache() {
    let searching = Searching::start(|_, _| {}).await;
    let deps = searching.app.deps().clone();
    let scope = trawl::tenant::Scope::default();
    for provider in [
        trawl_workers::job::Provider::Searxng,
        trawl_workers::job::Provider::Duckduckgo,
    ] {
        let mut uncached = Vec::new();
        let mut cached = Vec::new();
        for n in 0..200 {
            let request = trawl_workers::job::SearchJob {
                provider,
                ..trawl_workers::job::SearchJob::new(&format!("latency {n}"))
            };
            let started = Instant::now();
            let result = trawl::web_search::search(&deps, &scope, request.clone())
                .await
                .expect("answers");
            uncached.push(started.elapsed());
            assert!(!result.cached);
            let started = Instant::now();
            let result = trawl::web_search::search(&deps, &scope, request)
                .await
                .expect("answers");
            cached.push(started.elapsed());
            assert!(result.cached);
        }
        uncached.sort();
        cached.sort();
        let median = |times: &[Duration]| times[times.len() / 2];
        let p99 = |times: &[Duration]| times[times.len() * 99 / 100];
        println!(
            "{}: uncached median {:?} p99 {:?}; cached median {:?} p99 {:?}; {:.0}x",
            provider.as_str(),
            median(&uncached),
            p99(&uncached),
            median(&cached),
            p99(&cached),
            median(&uncached).as_secs_f64() / median(&cached).as_secs_f64()
        );
    }
}
