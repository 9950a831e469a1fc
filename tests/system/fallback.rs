//! Fallback extraction providers against loopback servers that answer like the real services
//! (the fixture server's Firecrawl scrape API and Crawl4AI server): a page trawl cannot read
//! rescued (`extractor: "firecrawl"`, trawl's failure kept as a warning), a job's headers
//! never reaching the provider, every provider failure failing closed with the original code,
//! failover under `auto`, `fetch.readability = false`, and the start-time checks (a key's
//! `env:` reference, a locked base URL).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, header};
use testkit::FixtureServer;
use tower::ServiceExt as _;
use trawl::api::{self, AppState};
use trawl::app::App;
use trawl::config::Config;
use trawl::runner;
use trawl_workers::fallback::{ApiKey, crawl4ai};

use crate::{spawn_app, test_config};

/// An application with its pools running and its API router (no socket), beside the fixture
/// server.
struct Rescuing {
    _app: App,
    state: AppState,
    server: FixtureServer,
    _dir: tempfile::TempDir,
}

impl Rescuing {
    async fn start(adjust: impl FnOnce(&mut Config, &FixtureServer)) -> Rescuing {
        let server = FixtureServer::start().await.expect("fixture");
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config {
            namespace: "fallback-test".to_owned(),
            runner: runner::Config {
                retry_base_ms: 10,
                retry_max_ms: 50,
                max_attempts: 1,
                concurrency: 4,
                ..runner::Config::default()
            },
            ..test_config(dir.path())
        };
        adjust(&mut config, &server);
        let mut app = spawn_app(&config).await;
        app.start_pools();
        let state = AppState {
            archive: None,
            sessions: None,
            remote_sessions: None,
            context: app.deps().clone(),
            queue: app.deps().queue.clone(),
            config: Arc::new(config.api.clone()),
        };
        Rescuing {
            _app: app,
            state,
            server,
            _dir: dir,
        }
    }

    /// `POST /v1/fetch` with `body`, waiting for the page.
    async fn fetch(&self, body: serde_json::Value) -> (u16, serde_json::Value) {
        let request = Request::post("/v1/fetch")
            .header(header::CONTENT_TYPE, "application/json")
            .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from((
                [127, 0, 0, 1],
                9,
            ))))
            .body(Body::from(body.to_string()))
            .expect("request");
        let response = api::router(self.state.clone())
            .oneshot(request)
            .await
            .expect("router answers");
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
            .await
            .expect("body");
        let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        (status, json)
    }

    /// Requests the fixture server saw on paths starting with `prefix`.
    fn seen(&self, prefix: &str) -> Vec<testkit::RecordedRequest> {
        self.server
            .requests()
            .into_iter()
            .filter(|request| request.path_and_query.starts_with(prefix))
            .collect()
    }
}

fn firecrawl(config: &mut Config, server: &FixtureServer) {
    config.fetch.firecrawl.url = Some(server.url("/firecrawl/"));
    config.fetch.firecrawl.key = Some(ApiKey::new(testkit::FIRECRAWL_KEY));
}

fn crawl4ai_at(config: &mut Config, server: &FixtureServer, endpoint: crawl4ai::Endpoint) {
    config.fetch.crawl4ai.url = Some(server.url("/crawl4ai"));
    config.fetch.crawl4ai.endpoint = endpoint;
}

fn text(value: &serde_json::Value) -> &str {
    value.as_str().unwrap_or_default()
}

#[tokio::test]
async fn firecrawl_rescues_a_page_trawl_cannot_read_and_never_sees_its_headers() {
    let rescuing = Rescuing::start(firecrawl).await;
    let page = rescuing.server.url("/blocked/shell?case=ok");
    let (status, result) = rescuing
        .fetch(serde_json::json!({"url": page, "headers": {"X-Service-Token": "tok-secret-1"}}))
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["extractor"], "firecrawl", "{result}");
    assert_eq!(result["title"], "Rescued page");
    assert!(
        text(&result["content"]["text"]).starts_with("# Rescued page"),
        "{result}"
    );
    assert!(
        text(&result["warning"]).starts_with("trawl's extraction: empty_content"),
        "{result}"
    );
    let base = rescuing.server.url("");
    assert_eq!(
        result["links"],
        serde_json::json!([format!("{base}/article/1"), format!("{base}/article/2")])
    );
    assert_eq!(result["meta"]["lang"], "en");

    // The page itself was asked with the job's header; the provider with its key alone.
    let asked = rescuing.seen("/blocked/shell");
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].header("x-service-token"), Some("tok-secret-1"));
    let sent = rescuing.seen("/firecrawl/v1/scrape");
    assert_eq!(sent.len(), 1);
    let request = &sent[0];
    assert_eq!(request.method, "POST");
    assert_eq!(
        request.header("authorization"),
        Some(format!("Bearer {}", testkit::FIRECRAWL_KEY).as_str())
    );
    assert!(request.header("x-service-token").is_none(), "{request:?}");
    let body: serde_json::Value = serde_json::from_slice(&request.body).expect("a JSON body");
    assert_eq!(body["url"], page);
    assert_eq!(body["onlyMainContent"], true);
    assert!(
        !String::from_utf8_lossy(&request.body).contains("tok-secret-1"),
        "the job's header reached the provider"
    );

    // A page trawl reads itself never goes to the provider; a job may also say "none".
    let (status, article) = rescuing
        .fetch(serde_json::json!({"url": rescuing.server.url("/article/1")}))
        .await;
    assert_eq!(status, 200, "{article}");
    assert_eq!(article["extractor"], "readability");
    let (status, refused) = rescuing
        .fetch(serde_json::json!({
            "url": rescuing.server.url("/blocked/shell?case=none-asked"), "fallback": "none"
        }))
        .await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["error"]["code"], "empty_content");
    assert_eq!(rescuing.seen("/firecrawl/").len(), 1);
}

#[tokio::test]
async fn firecrawl_v2_rescues_a_challenge_page_in_text() {
    let rescuing = Rescuing::start(|config, server| {
        firecrawl(config, server);
        config.fetch.firecrawl.api = trawl_workers::fallback::firecrawl::Api::V2;
    })
    .await;
    let (status, result) = rescuing
        .fetch(serde_json::json!({
            "url": rescuing.server.url("/blocked/captcha?case=ok"), "format": "text"
        }))
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["extractor"], "firecrawl");
    let content = text(&result["content"]["text"]);
    assert!(
        content.starts_with("Rescued page") && !content.contains('#'),
        "text converted from the provider's HTML: {content:?}"
    );
    assert!(
        text(&result["warning"]).contains("blocked_by_site"),
        "{result}"
    );
    assert_eq!(rescuing.seen("/firecrawl/v2/scrape").len(), 1);
}

#[tokio::test]
async fn crawl4ai_answers_in_each_shape_rescue_the_page() {
    for endpoint in [crawl4ai::Endpoint::Crawl, crawl4ai::Endpoint::Md] {
        let rescuing = Rescuing::start(|config, server| {
            crawl4ai_at(config, server, endpoint);
            config.fetch.crawl4ai.key = Some(ApiKey::new(testkit::CRAWL4AI_TOKEN));
        })
        .await;
        for case in ["ok", "single"] {
            let (status, result) = rescuing
                .fetch(serde_json::json!({
                    "url": rescuing.server.url(&format!("/blocked/empty?case={case}"))
                }))
                .await;
            assert_eq!(status, 200, "{endpoint:?} {case}: {result}");
            assert_eq!(result["extractor"], "crawl4ai");
            let content = text(&result["content"]["text"]);
            // The fit markdown: the main content without the page's menu.
            assert!(
                content.starts_with("# Rescued page") && !content.contains("Menu"),
                "{content:?}"
            );
            if endpoint == crawl4ai::Endpoint::Crawl {
                assert_eq!(result["title"], "Rescued page");
                assert_eq!(result["links"].as_array().map(Vec::len), Some(2));
            }
        }
        let path = match endpoint {
            crawl4ai::Endpoint::Crawl => "/crawl4ai/crawl",
            crawl4ai::Endpoint::Md => "/crawl4ai/md",
        };
        let sent = rescuing.seen(path);
        assert_eq!(sent.len(), 2, "{endpoint:?}");
        assert_eq!(
            sent[0].header("authorization"),
            Some(format!("Bearer {}", testkit::CRAWL4AI_TOKEN).as_str())
        );
    }
}

#[tokio::test]
async fn provider_failures_fail_closed_with_the_original_code() {
    let rescuing = Rescuing::start(firecrawl).await;
    for (case, expected) in [
        ("outage", "answered status 503 (Service Unavailable)"),
        ("ratelimit", "answered status 429 (Rate limit exceeded"),
        ("payment", "answered status 402 (Payment required"),
        ("badjson", "unreadable answer: bad JSON"),
        (
            "wrongtypes",
            "unreadable answer: data.markdown is a number, not a string",
        ),
        ("nulls", "unreadable answer: no data"),
        ("failed", "could not read the page (Failed to scrape URL"),
        (
            "metadata",
            "http://169.254.169.254 is a blocked destination (metadata)",
        ),
        (
            "notfound",
            "could not read the page (the page answered status 404)",
        ),
    ] {
        let (status, failed) = rescuing
            .fetch(serde_json::json!({
                "url": rescuing.server.url(&format!("/blocked/shell?case={case}"))
            }))
            .await;
        assert_eq!(status, 422, "{case}: {failed}");
        assert_eq!(failed["error"]["code"], "empty_content", "{case}: {failed}");
        let message = text(&failed["error"]["message"]);
        assert!(
            message.contains(&format!("fallback: firecrawl: {expected}")),
            "{case}: {message}"
        );
    }
    assert_eq!(rescuing.seen("/firecrawl/v1/scrape").len(), 9);
}

#[tokio::test]
async fn auto_falls_over_from_firecrawl_to_crawl4ai() {
    let rescuing = Rescuing::start(|config, server| {
        firecrawl(config, server);
        // A key Firecrawl refuses: 401, then Crawl4AI reads the page.
        config.fetch.firecrawl.key = Some(ApiKey::new("fc-revoked"));
        crawl4ai_at(config, server, crawl4ai::Endpoint::Crawl);
    })
    .await;
    let (status, result) = rescuing
        .fetch(serde_json::json!({"url": rescuing.server.url("/blocked/shell?case=ok")}))
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["extractor"], "crawl4ai");
    let warning = text(&result["warning"]);
    assert!(
        warning.contains("firecrawl: answered status 401 (Unauthorized: Invalid token)"),
        "{warning}"
    );
    assert_eq!(rescuing.seen("/firecrawl/").len(), 1);
    assert_eq!(rescuing.seen("/crawl4ai/crawl").len(), 1);
    // A job may name one provider.
    let (status, failed) = rescuing
        .fetch(serde_json::json!({
            "url": rescuing.server.url("/blocked/shell?case=firecrawl-only"),
            "fallback": "firecrawl"
        }))
        .await;
    assert_eq!(status, 422, "{failed}");
    assert!(
        text(&failed["error"]["message"]).contains("fallback: firecrawl: answered status 401"),
        "{failed}"
    );
    assert_eq!(rescuing.seen("/crawl4ai/crawl").len(), 1);
}

#[tokio::test]
async fn readability_off_sends_every_page_straight_to_the_provider() {
    let rescuing = Rescuing::start(|config, server| {
        crawl4ai_at(config, server, crawl4ai::Endpoint::Crawl);
        config.fetch.readability = false;
    })
    .await;
    let (status, result) = rescuing
        .fetch(serde_json::json!({"url": rescuing.server.url("/article/2?case=ok")}))
        .await;
    assert_eq!(status, 200, "{result}");
    assert_eq!(result["extractor"], "crawl4ai");
    assert!(result.get("warning").is_none(), "{result}");
    assert!(
        rescuing.seen("/article/2").is_empty(),
        "trawl fetched the page itself"
    );
    let (status, failed) = rescuing
        .fetch(serde_json::json!({"url": rescuing.server.url("/article/3?case=outage")}))
        .await;
    assert_eq!(status, 502, "{failed}");
    assert_eq!(failed["error"]["code"], "provider_failed");
    assert!(
        text(&failed["error"]["message"]).contains("crawl4ai: answered status 500 (Crawl failed"),
        "{failed}"
    );
    // `fallback: "none"` reads the page with trawl's own extraction.
    let (status, own) = rescuing
        .fetch(serde_json::json!({"url": rescuing.server.url("/article/3"), "fallback": "none"}))
        .await;
    assert_eq!(status, 200, "{own}");
    assert_eq!(own["extractor"], "readability");
}

#[tokio::test]
async fn a_provider_that_cannot_be_used_stops_trawl_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let build = |adjust: &dyn Fn(&mut Config)| {
        let mut config = test_config(dir.path());
        adjust(&mut config);
        async move {
            match App::build(&config, trawl::app::Needs::default()).await {
                Ok(_) => String::new(),
                Err(error) => error.to_string(),
            }
        }
    };
    // A key's `env:` reference is read as the configuration loads: unset, trawl stops.
    let file = dir.path().join("trawl.toml");
    std::fs::write(
        &file,
        "[fetch.firecrawl]\nurl = \"http://127.0.0.1:9/\"\nkey = \"env:TRAWL_TEST_NO_SUCH_VARIABLE\"\n",
    )
    .expect("write");
    let unresolved = Config::load(Some(&file))
        .expect_err("an unset variable")
        .to_string();
    assert!(
        unresolved.contains("fetch.firecrawl.key")
            && unresolved.contains("TRAWL_TEST_NO_SUCH_VARIABLE is not set"),
        "{unresolved}"
    );
    let public = build(&|config| {
        config.fetch.crawl4ai.url = Some("http://93.184.216.34:11235/".into());
    })
    .await;
    assert!(
        public.contains("fetch.crawl4ai.url") && public.contains("private or loopback"),
        "{public}"
    );
    let lookalike = build(&|config| {
        config.fetch.firecrawl.url = Some("https://api.firecrawl.dev.example.com/".into());
        config.fetch.firecrawl.key = Some(ApiKey::new("fc-1"));
    })
    .await;
    assert_eq!(
        lookalike, "",
        "a self-hosted name is checked when connecting"
    );
    let straight = build(&|config| config.fetch.readability = false).await;
    assert!(straight.contains("fetch.readability = false"), "{straight}");
}
