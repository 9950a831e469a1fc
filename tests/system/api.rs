//! The HTTP API: router-level tests without a socket (`oneshot`), and the real server on
//! 127.0.0.1:0 with the fetch pool running beside it, against the fixture server.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use testkit::FixtureServer;
use tower::ServiceExt as _;
use trawl::api::{self, AppState};
use trawl::app::Shutdown;
use trawl::config::Config;
use trawl::config::Secret;
use trawl::runner;

use crate::{spawn_app, test_config};

/// An API with its store, queue and (optionally) fetch pool in a temporary directory.
pub(crate) struct Api {
    pub(crate) state: AppState,
    base: String,
    shutdown: Shutdown,
    _dir: tempfile::TempDir,
}

impl Api {
    async fn start(tokens: &[&str], pools: bool) -> Api {
        Api::start_with(tokens, pools, |_| {}).await
    }

    /// An API with pools and webhooks signed with `secret` (retried after 10 ms).
    async fn start_with_webhooks(secret: &str) -> Api {
        Api::start_with(&[], true, |config| {
            config.webhooks = trawl::webhooks::Config {
                secret: Some(Secret::new(secret)),
                retry_base_ms: 10,
                ..trawl::webhooks::Config::default()
            };
        })
        .await
    }

    pub(crate) async fn start_with(
        tokens: &[&str],
        pools: bool,
        adjust: impl FnOnce(&mut Config),
    ) -> Api {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config {
            namespace: "api-test".to_owned(),
            runner: runner::Config {
                retry_base_ms: 10,
                retry_max_ms: 50,
                concurrency: 4,
                ..runner::Config::default()
            },
            api: api::Config {
                tokens: tokens
                    .iter()
                    .map(|token| Secret::new(*token).into())
                    .collect(),
                max_body_bytes: 4_096,
                max_batch: 10,
                sync_timeout_secs: 10,
                ..api::Config::default()
            },
            ..test_config(dir.path())
        };
        adjust(&mut config);
        let mut app = spawn_app(&config).await;
        let state = AppState {
            archive: None,
            sessions: None,
            remote_sessions: None,
            context: app.deps().clone(),
            queue: app.deps().queue.clone(),
            config: Arc::new(config.api.clone()),
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        if pools {
            app.start_pools();
        }
        app.serve("server", listener, api::router(state.clone()));
        Api {
            state,
            base,
            shutdown: app.shutdown_signal(),
            _dir: dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (StatusCode, serde_json::Value) {
        let mut request = Request::builder().method(method).uri(path);
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
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
            .await
            .expect("body");
        let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (status, json)
    }

    async fn wait_ended(&self, id: &str) -> serde_json::Value {
        for _ in 0..200 {
            let (status, job) = self.call("GET", &format!("/v1/jobs/{id}"), None).await;
            assert_eq!(status, StatusCode::OK, "{job}");
            if ["succeeded", "failed", "dead", "cancelled"]
                .contains(&job["status"].as_str().unwrap_or_default())
            {
                return job;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("job {id} did not end");
    }
}

impl Drop for Api {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

#[tokio::test]
async fn errors_are_json_with_codes_never_500_for_bad_input() {
    let api = Api::start(&[], false).await;
    let (status, body) = api.call("GET", "/nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(body["error"]["code"], "not_found");

    let (status, body) = api
        .call("PUT", "/v1/jobs", Some(serde_json::json!({})))
        .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(body["error"]["code"], "method_not_allowed");

    let request = Request::post("/v1/jobs")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from("{\"kind\": \"fetch\", "))
        .expect("request");
    let response = api::router(api.state.clone())
        .oneshot(request)
        .await
        .expect("answers");
    assert_eq!(response.status(), StatusCode::BAD_REQUEST);

    let (status, body) = api
        .call(
            "POST",
            "/v1/fetch",
            Some(serde_json::json!({"url": "http://a.test/", "colour": "red"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(body["error"]["code"], "invalid_request");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("colour"),
        "{body}"
    );

    let big = "x".repeat(10_000);
    let (status, body) = api
        .call("POST", "/v1/fetch", Some(serde_json::json!({"url": big})))
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["error"]["code"], "payload_too_large");

    let (status, body) = api
        .call("POST", "/v1/jobs", Some(serde_json::json!({"jobs": []})))
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");

    let too_many: Vec<_> = (0..11)
        .map(|n| serde_json::json!({"kind": "fetch", "url": format!("http://a.test/{n}")}))
        .collect();
    let (status, _) = api
        .call(
            "POST",
            "/v1/jobs",
            Some(serde_json::json!({"jobs": too_many})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);

    // Found by schemathesis: an absurd TTL once overflowed the cache's time arithmetic.
    let (status, body) = api
        .call(
            "POST",
            "/v1/fetch",
            Some(serde_json::json!({"url": "http://0.com/", "cache_ttl": u64::MAX})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("cache_ttl"),
        "{body}"
    );

    // Found by schemathesis: serde's derive read an array as a struct's fields in order, so
    // `"credentials": []` opened a session; every body and nested object takes an object only.
    let arrays = [
        ("/v1/sessions", serde_json::json!({"credentials": []})),
        ("/v1/sessions", serde_json::json!([])),
        (
            "/v1/sessions",
            serde_json::json!({"credentials": {"cookies": [["a", "b"]]}}),
        ),
        (
            "/v1/fetch",
            serde_json::json!({"url": "http://a.test/", "credentials": []}),
        ),
        ("/v1/fetch", serde_json::json!(["http://a.test/"])),
        (
            "/v1/jobs",
            serde_json::json!({"jobs": [["fetch", "http://a.test/"]]}),
        ),
        (
            "/v1/jobs",
            serde_json::json!({"kind": "browse", "url": "http://a.test/",
                "actions": [["goto", "http://a.test/"]]}),
        ),
        ("/v1/crawls", serde_json::json!([["http://a.test/"]])),
    ];
    for (path, request) in arrays {
        let (status, body) = api.call("POST", path, Some(request.clone())).await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{path} {request}: {body}"
        );
        assert_eq!(body["error"]["code"], "invalid_request", "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("JSON object"),
            "{path} {request}: {body}"
        );
    }

    // A batch's faulty job is named by its place.
    let (status, body) = api
        .call(
            "POST",
            "/v1/jobs",
            Some(serde_json::json!({"jobs": [
                {"kind": "fetch", "url": "http://a.test/"},
                {"kind": "fetch", "url": "http://a.test/", "format": "pdf"},
            ]})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("jobs[1]"), "{body}");

    // A session's action is told by its own error, a batch's by its place, never "did not
    // match any variant" (the body is read before the session is looked for).
    for (request, told) in [
        (
            serde_json::json!({"action": "clik", "selector": "a"}),
            "unknown variant `clik`",
        ),
        (
            serde_json::json!({"actions": [{"action": "back"}, {"action": "clik"}]}),
            "actions[1].action: unknown variant `clik`",
        ),
        (
            serde_json::json!({"actions": [["goto", "http://a.test/"]]}),
            "JSON object",
        ),
    ] {
        let (status, body) = api
            .call("POST", "/v1/sessions/any/actions", Some(request.clone()))
            .await;
        assert_eq!(
            status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{request}: {body}"
        );
        let message = body["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(told), "{request}: {body}");
        assert!(
            !message.contains("variant of untagged"),
            "{request}: {body}"
        );
    }

    let (status, body) = api.call("GET", "/v1/jobs/does-not-exist", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let (status, _) = api.call("GET", "/v1/pages?from=1", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_batch_is_all_or_nothing_on_validation() {
    let api = Api::start(&[], false).await;
    let jobs = serde_json::json!({"jobs": [
        {"kind": "fetch", "url": "http://a.test/"},
        {"kind": "fetch", "url": "ftp://a.test/"},
    ]});
    let (status, body) = api.call("POST", "/v1/jobs", Some(jobs)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("jobs[1]"),
        "{body}"
    );
    let counts = api
        .state
        .context
        .store
        .count_by_status(None)
        .await
        .expect("counts");
    assert!(counts.is_empty(), "nothing recorded: {counts:?}");
}

#[tokio::test]
async fn tokens_are_required_when_configured() {
    let token = "a-long-enough-test-token";
    let api = Api::start(&[token], false).await;
    let (status, body) = api.call("GET", "/v1/jobs/x", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert_eq!(body["error"]["code"], "unauthorized");
    let (status, _) = api.call("GET", "/healthz", None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = api.call("GET", "/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    for (value, expected) in [
        (
            "Bearer wrong-token-of-some-length",
            StatusCode::UNAUTHORIZED,
        ),
        ("Basic abc", StatusCode::UNAUTHORIZED),
        (&format!("Bearer {token}") as &str, StatusCode::NOT_FOUND),
    ] {
        let request = Request::get("/v1/jobs/x")
            .header(header::AUTHORIZATION, value)
            .body(Body::empty())
            .expect("request");
        let response = api::router(api.state.clone())
            .oneshot(request)
            .await
            .expect("answers");
        assert_eq!(response.status(), expected, "{value}");
    }
}

#[tokio::test]
async fn the_openapi_document_lists_every_route() {
    let api = Api::start(&[], false).await;
    let (status, document) = api.call("GET", "/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    for path in [
        "/v1/jobs",
        "/v1/jobs/{id}",
        "/v1/jobs/{id}/events",
        "/v1/fetch",
        "/v1/pages",
        "/v1/pages/grep",
        "/healthz",
        "/metrics",
    ] {
        assert!(document["paths"][path].is_object(), "{path} missing");
    }
    assert!(document["components"]["schemas"]["FetchResult"].is_object());
    assert!(document["components"]["securitySchemes"]["bearer"].is_object());
}

#[tokio::test]
async fn a_batch_runs_to_completion_and_is_polled() {
    let site = FixtureServer::start().await.expect("fixture");
    let api = Api::start(&[], true).await;
    let jobs = serde_json::json!({"jobs": [
        {"kind": "fetch", "url": site.url("/article/1")},
        {"url": site.url("/site/7"), "format": "text"},
        {"kind": "fetch", "url": site.url("/status/404")},
    ]});
    let (status, submitted) = api.call("POST", "/v1/jobs", Some(jobs)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{submitted}");
    assert!(submitted["batch_id"].is_string());
    let ids: Vec<String> = submitted["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| job["id"].as_str().expect("id").to_owned())
        .collect();
    let first = api.wait_ended(&ids[0]).await;
    assert_eq!(first["status"], "succeeded");
    assert!(first["result"]["content"]["text"].is_string());
    // Issue "wrong answers": `kind` defaults to `fetch`, and `format` is the one name of the
    // output format (as in /v1/fetch and the CLI).
    let second = api.wait_ended(&ids[1]).await;
    assert_eq!(second["status"], "succeeded", "{second}");
    let failed = api.wait_ended(&ids[2]).await;
    assert_eq!(failed["status"], "failed");
    assert_eq!(failed["error"]["code"], "http_status");

    let (status, metrics) = api.call("GET", "/metrics", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(metrics.is_null(), "metrics are text, not json");
}

#[tokio::test]
async fn sync_fetch_is_served_from_the_cache_the_second_time() {
    let site = FixtureServer::start().await.expect("fixture");
    let api = Api::start(&[], true).await;
    let request = serde_json::json!({"url": site.url("/article/2"), "max_chars": 50});
    let (status, first) = api.call("POST", "/v1/fetch", Some(request.clone())).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["cached"], false);
    assert_eq!(first["content"]["length"], 50);
    assert_eq!(first["content"]["truncated"], true);
    let (status, second) = api.call("POST", "/v1/fetch", Some(request)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(second["cached"], true);
    assert_eq!(second["page_id"], first["page_id"]);
    assert_eq!(site.hits("/article/2"), 1);

    let (status, body) = api
        .call(
            "POST",
            "/v1/fetch",
            Some(serde_json::json!({"url": "gopher://a.test/"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(body["error"]["code"], "unsupported_scheme");
    let (status, body) = api
        .call(
            "POST",
            "/v1/fetch",
            Some(serde_json::json!({"url": site.url("/status/404")})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "http_status");
    assert!(body["error"]["job_id"].is_string());

    let (_, metrics) = api.call("GET", "/metrics", None).await;
    assert!(metrics.is_null());
    let rendered = api.state.context.metrics.render();
    assert!(rendered.contains("trawl_cache_hits_total 1"), "{rendered}");
}

#[tokio::test]
async fn the_default_policy_refuses_loopback_over_the_api() {
    let site = FixtureServer::start().await.expect("fixture");
    let api = Api::start_with(&[], true, |config| {
        config.ssrf = trawl_workers::web::Policy::default();
        config.http = trawl_workers::web::Config::default();
    })
    .await;
    let (status, body) = api
        .call(
            "POST",
            "/v1/fetch",
            Some(serde_json::json!({"url": site.url("/")})),
        )
        .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "blocked_destination");
    assert!(site.requests().is_empty());
    let rendered = api.state.context.metrics.render();
    assert!(
        rendered.contains("trawl_ssrf_blocked_total{reason=\"loopback\"} 1"),
        "{rendered}"
    );
}

#[tokio::test]
async fn pages_are_read_by_range_and_grepped_with_merged_context() {
    let site = FixtureServer::start().await.expect("fixture");
    let api = Api::start(&[], true).await;
    let url = site.url("/article/3");
    let (status, _) = api
        .call("POST", "/v1/fetch", Some(serde_json::json!({"url": url})))
        .await;
    assert_eq!(status, StatusCode::OK);

    let encoded: String = url::form_urlencoded::byte_serialize(url.as_bytes()).collect();
    let (status, range) = api
        .call("GET", &format!("/v1/pages?url={encoded}&from=2&to=4"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{range}");
    assert_eq!(range["lines"].as_array().expect("lines").len(), 3);
    let total = range["total_lines"].as_u64().expect("total");
    let (status, past) = api
        .call(
            "GET",
            &format!("/v1/pages?url={encoded}&from={}", total + 10),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(past["lines"].as_array().expect("lines").is_empty());
    let (status, _) = api
        .call("GET", &format!("/v1/pages?url={encoded}&from=5&to=2"), None)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = api
        .call("GET", "/v1/pages?url=http://never.test/", None)
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    let grep = serde_json::json!({"url": url, "pattern": "^#", "context": 1, "ignore_case": true});
    let (status, found) = api.call("POST", "/v1/pages/grep", Some(grep)).await;
    assert_eq!(status, StatusCode::OK, "{found}");
    assert!(found["matches"].as_u64().expect("matches") >= 1);
    let blocks = found["blocks"].as_array().expect("blocks");
    for pair in blocks.windows(2) {
        assert!(
            pair[1]["from"].as_u64() > pair[0]["to"].as_u64().map(|to| to + 1),
            "blocks merged: {pair:?}"
        );
    }
    for (pattern, fault) in [
        ("(unclosed", "invalid"),
        ("a{100000}", "too large"),
        ("(a+)+$", "nested repetition"),
    ] {
        let grep = serde_json::json!({"url": url, "pattern": pattern});
        let (status, body) = api.call("POST", "/v1/pages/grep", Some(grep)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{pattern}: {body}");
        assert_eq!(body["error"]["code"], "invalid_pattern");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains(fault),
            "{pattern}: {body}"
        );
    }
}

#[tokio::test]
async fn queued_jobs_cancel_at_once_and_ended_ones_conflict() {
    let site = FixtureServer::start().await.expect("fixture");
    let api = Api::start(&[], false).await;
    let (_, submitted) = api
        .call(
            "POST",
            "/v1/jobs",
            Some(serde_json::json!({"kind": "fetch", "url": site.url("/article/1")})),
        )
        .await;
    let id = submitted["jobs"][0]["id"].as_str().expect("id").to_owned();
    let (status, body) = api.call("DELETE", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "cancelled");
    assert_eq!(api.wait_ended(&id).await["status"], "cancelled");
    let (status, body) = api.call("DELETE", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, _) = api.call("DELETE", "/v1/jobs/unknown", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_running_job_stops_at_its_next_safe_point() {
    let site = FixtureServer::start().await.expect("fixture");
    let api = Api::start(&[], true).await;
    let (_, submitted) = api
        .call(
            "POST",
            "/v1/jobs",
            Some(serde_json::json!({"kind": "fetch", "url": site.url("/drip")})),
        )
        .await;
    let id = submitted["jobs"][0]["id"].as_str().expect("id").to_owned();
    for _ in 0..100 {
        let (_, job) = api.call("GET", &format!("/v1/jobs/{id}"), None).await;
        if job["status"] == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (status, body) = api.call("DELETE", &format!("/v1/jobs/{id}"), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "cancelling");
    let job = api.wait_ended(&id).await;
    assert_eq!(job["status"], "cancelled", "{job}");
}

#[tokio::test]
async fn events_stream_status_changes_then_the_end() {
    let site = FixtureServer::start().await.expect("fixture");
    let api = Api::start(&[], true).await;
    let (_, submitted) = api
        .call(
            "POST",
            "/v1/jobs",
            Some(serde_json::json!({"kind": "fetch", "url": site.url("/article/1")})),
        )
        .await;
    let id = submitted["jobs"][0]["id"].as_str().expect("id").to_owned();
    let response = reqwest::get(api.url(&format!("/v1/jobs/{id}/events")))
        .await
        .expect("stream opens");
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers()["content-type"].to_str().expect("type"),
        "text/event-stream"
    );
    let text = tokio::time::timeout(Duration::from_secs(20), response.text())
        .await
        .expect("the stream closes after the end")
        .expect("body");
    let events: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("event: "))
        .map(str::trim)
        .collect();
    assert_eq!(events.last(), Some(&"end"), "{text}");
    assert!(
        events[..events.len() - 1]
            .iter()
            .all(|event| *event == "status"),
        "{text}"
    );
    assert!(text.contains("\"succeeded\""), "{text}");
}

#[tokio::test]
async fn a_batch_webhook_receives_signed_job_events_and_one_completion() {
    let site = FixtureServer::start().await.expect("fixture");
    let secret = "webhook-test-secret";
    let api = Api::start_with_webhooks(secret).await;
    let batch = serde_json::json!({
        "jobs": [
            {"kind": "fetch", "url": site.url("/article/1")},
            {"kind": "fetch", "url": site.url("/status/404")},
        ],
        "webhook": site.url("/webhook"),
    });
    let (status, submitted) = api.call("POST", "/v1/jobs", Some(batch)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{submitted}");
    let mut events = Vec::new();
    for _ in 0..200 {
        events = site
            .requests()
            .into_iter()
            .filter(|request| request.path_and_query == "/webhook")
            .collect();
        if events.len() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(events.len(), 5, "2 started, 1 page, 1 failed, 1 completed");
    let now = jiff::Timestamp::now().as_second();
    let mut kinds = Vec::new();
    for event in &events {
        let signature = event.header("trawl-signature").expect("signed");
        assert!(
            trawl::webhooks::verify(secret, signature, &event.body, now, 300),
            "signature verifies"
        );
        let body: serde_json::Value = serde_json::from_slice(&event.body).expect("json");
        assert_eq!(body["batch_id"], submitted["batch_id"]);
        assert_eq!(event.header("trawl-event"), body["type"].as_str());
        kinds.push(body["type"].as_str().expect("type").to_owned());
        if body["type"] == "completed" {
            assert_eq!(body["data"]["counts"]["succeeded"], 1, "{body}");
            assert_eq!(body["data"]["counts"]["failed"], 1, "{body}");
        }
    }
    kinds.sort();
    assert_eq!(kinds, ["completed", "failed", "page", "started", "started"]);
    let (status, body) = api
        .call("POST", "/v1/jobs", Some(serde_json::json!({"jobs": [{"kind": "fetch", "url": site.url("/")}], "webhook": "gopher://x/"})))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

#[tokio::test]
async fn webhooks_are_refused_without_a_signing_secret() {
    let api = Api::start(&[], false).await;
    let batch = serde_json::json!({"jobs": [{"kind": "fetch", "url": "http://a.test/"}], "webhook": "http://b.test/hook"});
    let (status, body) = api.call("POST", "/v1/jobs", Some(batch)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "webhooks_disabled");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawls_start_report_and_cancel_over_the_api() {
    let server = FixtureServer::start().await.expect("fixture");
    let api = Api::start(&[], true).await;
    let (status, body) = api
        .call(
            "POST",
            "/v1/crawls",
            Some(serde_json::json!({"seeds": [server.url("/site/1")], "include": ["bad"]})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], "bad_request");
    let (status, body) = api
        .call(
            "POST",
            "/v1/crawls",
            Some(serde_json::json!({"seeds": [server.url("/site/1")], "max_depth": 0, "robots": false})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    let id = body["id"].as_str().expect("id").to_owned();
    let mut record = serde_json::Value::Null;
    for _ in 0..200 {
        let (status, body) = api.call("GET", &format!("/v1/crawls/{id}"), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        record = body;
        if record["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(record["status"], "completed", "{record}");
    assert_eq!(record["counters"]["fetched"], 1, "{record}");
    let (status, body) = api.call("DELETE", &format!("/v1/crawls/{id}"), None).await;
    assert_eq!(status, StatusCode::CONFLICT);
    // Issue "wrong answers": the message lowercased the (upper-case ULID) id.
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains(&id), "{message}");
    assert!(message.contains("(completed)"), "{message}");
    let (status, _) = api.call("GET", "/v1/crawls/nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_and_crawls_list_their_jobs_and_pages_with_a_cursor() {
    let site = FixtureServer::start().await.expect("fixture");
    let api = Api::start(&[], true).await;
    let batch = serde_json::json!({
        "jobs": [
            {"kind": "fetch", "url": site.url("/article/1")},
            {"kind": "fetch", "url": site.url("/article/2")},
            {"kind": "fetch", "url": site.url("/status/404")},
        ],
    });
    let (status, submitted) = api.call("POST", "/v1/jobs", Some(batch)).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{submitted}");
    let batch_id = submitted["batch_id"].as_str().expect("batch id").to_owned();
    for job in submitted["jobs"].as_array().expect("jobs") {
        api.wait_ended(job["id"].as_str().expect("id")).await;
    }
    let (status, record) = api
        .call("GET", &format!("/v1/batches/{batch_id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{record}");
    assert_eq!(record["total"], 3, "{record}");
    assert_eq!(record["ended"], true, "{record}");
    assert_eq!(record["counts"]["succeeded"], 2, "{record}");
    assert_eq!(record["errors"]["http_status"], 1, "{record}");
    let (status, _) = api.call("GET", "/v1/batches/nope", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // Two answers of two and one, in id order, through the cursor.
    let (status, first) = api
        .call(
            "GET",
            &format!("/v1/jobs?batch_id={batch_id}&limit=2"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    assert_eq!(first["jobs"].as_array().expect("jobs").len(), 2, "{first}");
    let cursor = first["next_cursor"].as_str().expect("a next cursor");
    let (status, rest) = api
        .call(
            "GET",
            &format!("/v1/jobs?batch_id={batch_id}&limit=2&cursor={cursor}"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{rest}");
    assert_eq!(rest["jobs"].as_array().expect("jobs").len(), 1, "{rest}");
    assert!(rest["next_cursor"].is_null(), "{rest}");
    let mut listed: Vec<String> = first["jobs"]
        .as_array()
        .into_iter()
        .chain(rest["jobs"].as_array())
        .flatten()
        .map(|job| job["job_id"].as_str().expect("job id").to_owned())
        .collect();
    let mut submitted_ids: Vec<String> = submitted["jobs"]
        .as_array()
        .expect("jobs")
        .iter()
        .map(|job| job["id"].as_str().expect("id").to_owned())
        .collect();
    submitted_ids.sort();
    assert_eq!(listed, submitted_ids, "every job once, in id order");
    listed.clear();
    let (status, failed) = api
        .call(
            "GET",
            &format!("/v1/jobs?batch_id={batch_id}&status=failed"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{failed}");
    let failed = failed["jobs"].as_array().expect("jobs").clone();
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0]["error_code"], "http_status");
    assert!(failed[0]["page_id"].is_null());
    let (status, body) = api.call("GET", "/v1/jobs?status=nonsense", None).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    let (status, started) = api
        .call(
            "POST",
            "/v1/crawls",
            Some(serde_json::json!({"seeds": [site.url("/site/1")], "max_depth": 1, "max_pages": 3, "robots": false})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let crawl_id = started["id"].as_str().expect("id").to_owned();
    for _ in 0..400 {
        let (_, record) = api
            .call("GET", &format!("/v1/crawls/{crawl_id}"), None)
            .await;
        if record["status"] != "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, pages) = api
        .call(
            "GET",
            &format!("/v1/crawls/{crawl_id}/pages?status=succeeded"),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{pages}");
    let pages = pages["jobs"].as_array().expect("jobs").clone();
    assert_eq!(pages.len(), 3, "{pages:?}");
    for page in &pages {
        assert_eq!(page["status"], "succeeded", "{page}");
        assert!(page["title"].is_string(), "{page}");
        assert!(page["final_url"].is_string(), "{page}");
        assert_eq!(page["page_id"], page["job_id"], "{page}");
        let url = page["url"].as_str().expect("url");
        let (status, read) = api
            .call("GET", &format!("/v1/pages?url={url}&to=1"), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{read}");
        assert_eq!(read["page_id"], page["page_id"], "{read}");
    }
    let (status, _) = api.call("GET", "/v1/crawls/nope/pages", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, by_crawl) = api
        .call("GET", &format!("/v1/jobs?crawl_id={crawl_id}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{by_crawl}");
    assert_eq!(by_crawl["jobs"].as_array().expect("jobs").len(), 3);

    // The document declares the new routes and their query parameters.
    let (_, document) = api.call("GET", "/openapi.json", None).await;
    let list = &document["paths"]["/v1/jobs"]["get"];
    assert_eq!(list["operationId"], "list_jobs", "{list}");
    let parameters = list["parameters"].as_array().expect("parameters");
    for name in ["batch_id", "crawl_id", "status", "cursor", "limit"] {
        assert!(
            parameters
                .iter()
                .any(|parameter| parameter["name"] == name && parameter["in"] == "query"),
            "{name} in {list}"
        );
    }
    assert!(document["paths"]["/v1/batches/{id}"]["get"].is_object());
    assert!(document["paths"]["/v1/crawls/{id}/pages"]["get"].is_object());
}

#[tokio::test]
async fn page_reads_are_capped_and_name_the_next_range() {
    let site = FixtureServer::start().await.expect("fixture");
    let api = Api::start_with(&[], true, |config| config.api.read_max_chars = 300).await;
    let url = site.url("/article/3");
    let (status, page) = api
        .call("POST", "/v1/fetch", Some(serde_json::json!({"url": url})))
        .await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let (status, first) = api.call("GET", &format!("/v1/pages?url={url}"), None).await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let lines: Vec<&str> = first["lines"]
        .as_array()
        .expect("lines")
        .iter()
        .map(|line| line.as_str().expect("text"))
        .collect();
    let chars: usize = lines.iter().map(|line| line.chars().count() + 1).sum();
    assert!(chars <= 300, "{chars} characters: {first}");
    assert_eq!(first["truncated"], true, "{first}");
    let total = first["total_lines"].as_u64().expect("total");
    let next = first["next_from"].as_u64().expect("a next range");
    assert_eq!(next, first["to"].as_u64().expect("to") + 1);
    assert!(next <= total);
    let (status, second) = api
        .call("GET", &format!("/v1/pages?url={url}&from={next}"), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{second}");
    assert_eq!(second["from"], next, "{second}");
    // The last line: nothing comes next.
    let (_, last) = api
        .call("GET", &format!("/v1/pages?url={url}&from={total}"), None)
        .await;
    assert!(last["next_from"].is_null(), "{last}");
    assert_eq!(last["truncated"], false, "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_webhook_receives_its_pages_events_and_one_completion() {
    let site = FixtureServer::start().await.expect("fixture");
    let secret = "webhook-test-secret";
    let api = Api::start_with_webhooks(secret).await;
    let (status, started) = api
        .call(
            "POST",
            "/v1/crawls",
            Some(serde_json::json!({
                "seeds": [site.url("/site/1")], "max_depth": 1, "max_pages": 2, "robots": false,
                "webhook": site.url("/webhook"),
            })),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{started}");
    let id = started["id"].as_str().expect("id");
    let mut kinds = Vec::new();
    for _ in 0..400 {
        kinds = site
            .requests()
            .into_iter()
            .filter(|request| request.path_and_query == "/webhook")
            .map(|event| {
                let body: serde_json::Value = serde_json::from_slice(&event.body).expect("json");
                assert_eq!(body["crawl_id"], id, "{body}");
                if body["type"] == "completed" {
                    assert_eq!(body["data"]["counters"]["fetched"], 2, "{body}");
                    assert!(body["job_id"].is_null(), "{body}");
                }
                body["type"].as_str().expect("type").to_owned()
            })
            .collect();
        if kinds.iter().any(|kind| kind == "completed") && kinds.len() >= 5 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    kinds.sort();
    assert_eq!(kinds, ["completed", "page", "page", "started", "started"]);
    let (status, body) = api
        .call(
            "POST",
            "/v1/crawls",
            Some(serde_json::json!({"seeds": [site.url("/site/1")], "webhook": "gopher://x/"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
}

/// Issue "wrong answers": one status per code. A bad query string is `bad_request` (400), a
/// body that does not fit is `invalid_request` (422); lines are numbered from 1, as the
/// OpenAPI document says (`minimum: 1`).
#[tokio::test]
async fn query_and_body_faults_each_have_their_one_code_and_status() {
    let api = Api::start(&[], false).await;
    for query in ["url=x&from=abc", "url=x&from=0", "url=x&to=0", "from=1"] {
        let (status, body) = api.call("GET", &format!("/v1/pages?{query}"), None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {body}");
        assert_eq!(body["error"]["code"], "bad_request", "{query}: {body}");
    }
    let (status, body) = api
        .call(
            "POST",
            "/v1/jobs",
            Some(serde_json::json!({"kind": "fetch"})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "invalid_request", "{body}");
}
