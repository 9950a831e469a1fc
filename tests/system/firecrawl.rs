//! The Firecrawl-compatible API with Firecrawl's own clients: firecrawl-py (v2 and v1 clients)
//! and LangChain's `FireCrawlLoader`, unchanged but for `api_url`, against the real `trawl
//! serve` and the fixture site: scrape (markdown, links, html; rawHtml over v1), a crawl to
//! completion with `limit`, map with a search filter, a batch scrape, and errors (an option
//! trawl cannot honour, a failing page, a wrong token). The clients come from the test
//! virtualenv (`scripts/test.sh` installs them, pinned); without it the test fails and says so.
//! In process, through the router: errors in Firecrawl's shape (the token layer's too), refused
//! options and destinations, tenants kept apart, and Firecrawl's idempotency header.

use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use testkit::FixtureServer;
use tower::ServiceExt as _;

use crate::api::Api;
use crate::cli::trawl;

/// The test virtualenv's python, with firecrawl-py and langchain-community installed.
#[allow(clippy::disallowed_methods)]
fn venv_python() -> PathBuf {
    let venv = match std::env::var_os("TRAWL_VENV") {
        Some(venv) => PathBuf::from(venv),
        None => {
            Path::new(&std::env::var_os("HOME").expect("HOME is set")).join(".cache/trawl-venv")
        }
    };
    let python = venv.join("bin/python");
    let found = std::process::Command::new(&python)
        .args(["-c", "import firecrawl, langchain_community"])
        .output();
    assert!(
        found.as_ref().is_ok_and(|output| output.status.success()),
        "firecrawl-py and langchain-community are not installed in the test virtualenv {}: \
         run scripts/test.sh (its check-and-install block installs them, pinned), or \
         `{}/bin/pip install firecrawl-py==4.55.0 langchain-community==0.4.2`: {:?}",
        venv.display(),
        venv.display(),
        found.map(|output| String::from_utf8_lossy(&output.stderr).into_owned())
    );
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn firecrawl_py_and_langchain_work_against_trawl_serve() {
    let python = venv_python();
    let site = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        listener.local_addr().expect("address").port()
    };
    let token = "a-token-for-the-firecrawl-test";
    let mut serve = trawl(dir.path())
        .args([
            "serve",
            "--allow-private-network",
            "--bind",
            &format!("127.0.0.1:{port}"),
        ])
        .env("TRAWL_API__TOKENS", format!("[\"{token}\"]"))
        // The search routes use the fixture's SearxNG and DuckDuckGo image search.
        .env("TRAWL_SEARCH__SEARXNG__URL", site.url("/searxng/"))
        .env(
            "TRAWL_SEARCH__DUCKDUCKGO__IMAGES_URL",
            site.url("/ddg/images/"),
        )
        .env("TRAWL_SEARCH__DUCKDUCKGO__MIN_INTERVAL_MS", "0")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("serve starts");
    let mut up = false;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(up, "trawl serve listens");

    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/firecrawl/client.py");
    let base = site.url("");
    let base = base.trim_end_matches('/');
    let run = tokio::process::Command::new(&python)
        .arg(&script)
        .arg(format!("http://127.0.0.1:{port}"))
        .arg(token)
        .arg(base)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(300), run)
        .await
        .expect("the client script ends")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the client script failed\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let out: serde_json::Value = serde_json::from_str(stdout.trim()).expect("one JSON object");

    let article = |n: u64| format!("{base}/article/{n}");
    let scrape = &out["scrape"];
    let title = testkit::article_title(1);
    let prose = |text: &serde_json::Value| {
        text.as_str()
            .is_some_and(|text| text.len() > 200 && !text.contains("<p"))
    };
    assert!(
        prose(&scrape["markdown"]),
        "the main content as markdown: {scrape}"
    );
    assert!(
        scrape["html"]
            .as_str()
            .is_some_and(|html| html.contains('<') && !html.contains("<head")),
        "the main content as html: {scrape}"
    );
    let links: Vec<&str> = scrape["links"]
        .as_array()
        .expect("links")
        .iter()
        .filter_map(|link| link.as_str())
        .collect();
    assert!(links.contains(&article(2).as_str()), "{links:?}");
    assert_eq!(scrape["source_url"], article(1));
    assert_eq!(scrape["status_code"], 200);
    assert_eq!(scrape["credits_used"], 0);
    assert!(
        scrape["title"]
            .as_str()
            .is_some_and(|page_title| page_title.contains(&title)),
        "{scrape}"
    );

    // onlyMainContent: false keeps what the main content leaves out (the sidebar).
    let main = scrape["markdown"].as_str().unwrap_or_default();
    let whole = out["whole_page"].as_str().unwrap_or_default();
    assert!(
        !main.contains("Advertisement") && whole.contains("Advertisement"),
        "the whole page has the sidebar's ad, the main content not: {whole}"
    );
    assert!(
        whole.contains("collect()") && whole.len() > main.len(),
        "{whole}"
    );
    let v1 = &out["v1_scrape"];
    assert!(prose(&v1["markdown"]), "{v1}");
    assert!(
        v1["raw_html"]
            .as_str()
            .is_some_and(|raw| raw.starts_with("<!DOCTYPE html>") && raw.contains("<head>")),
        "the body as received: {v1}"
    );

    let tags = &out["tags"];
    let text = |key: &str| tags[key].as_str().unwrap_or_default();
    assert!(
        text("aside").contains("Related")
            && text("aside").contains(&testkit::article_title(2))
            && !text("aside").contains("Advertisement")
            && !text("aside").contains(&title),
        "includeTags keeps the aside alone, excludeTags drops its ad: {tags}"
    );
    assert!(
        prose(&tags["no_code"])
            && !text("no_code").contains("collect()")
            && !text("no_code_html").contains("<pre")
            && !text("no_code_html").contains("<table"),
        "excludeTags drops the code block and the table: {tags}"
    );
    assert!(
        scrape["markdown"]
            .as_str()
            .is_some_and(|markdown| markdown.contains("collect()")),
        "the page does have a code block: {scrape}"
    );
    assert!(
        text("nothing").is_empty()
            && tags["nothing_warning"]
                .as_str()
                .is_some_and(|warning| warning.contains("no element matched")),
        "{tags}"
    );

    let crawl = &out["crawl"];
    assert_eq!(crawl["status"], "completed", "{crawl}");
    assert_eq!(crawl["total"], 3, "limit bounds the crawl: {crawl}");
    assert_eq!(crawl["completed"], 3, "{crawl}");
    assert_eq!(crawl["credits_used"], 0);
    assert_eq!(
        crawl["urls"],
        serde_json::json!([article(1), article(2), article(3)]),
        "{crawl}"
    );
    assert_eq!(crawl["all_markdown"], true, "{crawl}");

    let mapped: Vec<&str> = out["map"]
        .as_array()
        .expect("map")
        .iter()
        .filter_map(|url| url.as_str())
        .collect();
    for n in 1..=3 {
        assert!(mapped.contains(&article(n).as_str()), "{mapped:?}");
    }
    assert!(
        mapped.iter().all(|url| url.contains("article")),
        "the search filter holds: {mapped:?}"
    );

    let batch = &out["batch"];
    assert_eq!(batch["status"], "completed", "{batch}");
    assert_eq!(
        (&batch["total"], &batch["completed"]),
        (&2.into(), &2.into())
    );
    assert_eq!(
        batch["urls"],
        serde_json::json!([article(2), article(3)]),
        "{batch}"
    );
    assert_eq!(batch["all_links"], true, "{batch}");

    let search = out["search"].as_array().expect("web results");
    let urls: Vec<&str> = search.iter().filter_map(|r| r["url"].as_str()).collect();
    assert_eq!(
        search.len(),
        3,
        "limit holds, duplicates dropped: {search:?}"
    );
    assert_eq!(urls[0], article(1), "{search:?}");
    assert_eq!(search[0]["title"], "Article one");
    assert_eq!(search[0]["description"], "The first article.");
    assert_eq!(
        search
            .iter()
            .map(|r| r["position"].clone())
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    let scraped = out["search_scraped"].as_array().expect("scraped results");
    assert_eq!(scraped.len(), 2, "{scraped:?}");
    assert_eq!(scraped[0]["source_url"], article(1), "{scraped:?}");
    assert!(
        scraped.iter().all(|document| prose(&document["markdown"])
            && !document["source_url"]
                .as_str()
                .unwrap_or("")
                .contains("only-google")),
        "every result scraped, the excluded domain left out: {scraped:?}"
    );
    let images = out["search_images"].as_array().expect("image results");
    assert_eq!(images.len(), 2, "{images:?}");
    assert!(
        images[0]["image_url"]
            .as_str()
            .is_some_and(|url| url.starts_with("http")),
        "{images:?}"
    );
    assert_eq!(images[1]["position"], 2);
    let v1_search = out["search_v1"].as_array().expect("v1 results");
    assert_eq!(v1_search.len(), 2, "{v1_search:?}");
    assert_eq!(v1_search[0]["url"], article(1));
    assert_eq!(v1_search[0]["title"], "Article one");

    let errors = &out["errors"];
    assert_eq!(errors["search_tbs"]["status"], 400, "{errors}");
    assert!(
        errors["search_tbs"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("tbs")),
        "{errors}"
    );
    assert_eq!(errors["bad_selector"]["status"], 400, "{errors}");
    assert!(
        errors["bad_selector"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("includeTags") && message.contains("div[")),
        "{errors}"
    );
    assert_eq!(errors["javascript_action"]["status"], 400, "{errors}");
    assert!(
        errors["javascript_action"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("executeJavascript")),
        "{errors}"
    );
    assert_eq!(errors["failing_action"]["status"], 422, "{errors}");
    assert!(
        errors["failing_action"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("#no-such-button")
                || message.contains("browser step 1 (click)")),
        "{errors}"
    );
    assert!(
        out["headers"]
            .as_str()
            .is_some_and(|text| text.to_lowercase().contains("x-trawl-test: fc-header-1")),
        "the scrape's headers reach the page: {}",
        out["headers"]
    );
    let acted = &out["actions"];
    assert!(
        acted["markdown"]
            .as_str()
            .is_some_and(|markdown| markdown.contains("Welcome, ada@example.com")),
        "the page the actions ended on: {acted}"
    );
    assert_eq!(acted["title"], "Signed in", "{acted}");
    assert_eq!(
        acted["screenshot"], "data:image/png;base64,iVBORw0KGgo",
        "{acted}"
    );
    assert_eq!(
        acted["screenshots"],
        serde_json::json!(["data:image/png;base64,iVBORw0KGgo"]),
        "{acted}"
    );
    assert!(
        acted["scrapes"][0]
            .as_str()
            .is_some_and(|html| html.contains("Welcome, ada@example.com") && html.contains("<form")),
        "{acted}"
    );
    assert_eq!(errors["json_format"]["status"], 400, "{errors}");
    assert!(
        errors["json_format"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("language model")),
        "{errors}"
    );
    assert_eq!(errors["missing_page"]["status"], 422, "{errors}");
    assert!(
        errors["missing_page"]["message"]
            .as_str()
            .is_some_and(|message| message.contains("404")),
        "{errors}"
    );
    assert_eq!(errors["wrong_token"]["status"], 401, "{errors}");

    let langchain = out["langchain"].as_array().expect("documents");
    assert_eq!(langchain.len(), 1, "{langchain:?}");
    assert!(prose(&langchain[0]["page_content"]), "{langchain:?}");
    assert_eq!(langchain[0]["source_url"], article(3), "{langchain:?}");

    let pid = serve.id().expect("pid").to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("kill runs");
    assert!(killed.success());
    let exit = tokio::time::timeout(Duration::from_secs(30), serve.wait())
        .await
        .expect("serve stops within its grace period")
        .expect("waits");
    assert!(exit.success(), "{exit:?}");
}

/// Calls the router in process with a bearer token and extra headers.
async fn call(
    api: &Api,
    method: &str,
    path: &str,
    token: Option<&str>,
    headers: &[(&str, &str)],
    body: Option<serde_json::Value>,
) -> (StatusCode, HeaderMap, serde_json::Value) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let body = match body {
        Some(json) => {
            request = request.header(header::CONTENT_TYPE, "application/json");
            Body::from(json.to_string())
        }
        None => Body::empty(),
    };
    let response = trawl::api::router(api.state.clone())
        .oneshot(request.body(body).expect("request"))
        .await
        .expect("router answers");
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
        .await
        .expect("body");
    let json = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
    (status, headers, json)
}

const TOKEN_A: &str = "firecrawl-tenant-a-token";
const TOKEN_B: &str = "firecrawl-tenant-b-token";

#[tokio::test]
async fn errors_are_firecrawl_shaped_and_the_layers_hold() {
    let site = FixtureServer::start().await.expect("fixture");
    let api = Api::start_with(&[TOKEN_A, TOKEN_B], true, |_| {}).await;
    let scrape = |url: String| Some(serde_json::json!({"url": url}));

    // The token layer's refusal, in Firecrawl's shape.
    let (status, _, body) = call(
        &api,
        "POST",
        "/v2/scrape",
        None,
        &[],
        scrape(site.url("/article/1")),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["success"], false, "{body}");
    assert_eq!(body["code"], "unauthorized", "{body}");
    assert!(body["error"].is_string(), "{body}");
    // `/v1/search`: Firecrawl's shape for its POST, trawl's for the archive search's GET.
    let (status, _, body) = call(&api, "POST", "/v1/search", None, &[], None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["success"], false, "{body}");
    let (status, _, body) = call(&api, "GET", "/v1/search?q=x", None, &[], None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    // No provider configured beyond DuckDuckGo's default, unreachable here; sources that are
    // not Firecrawl's, and its own categories, are refused before any search.
    for (request, code) in [
        (
            serde_json::json!({"query": "rust", "sources": ["maps"]}),
            "unsupported_option",
        ),
        (
            serde_json::json!({"query": "rust", "categories": ["github"]}),
            "unsupported_option",
        ),
        (
            serde_json::json!({"query": "rust", "limit": 80}),
            "bad_request",
        ),
        (serde_json::json!({"query": " "}), "bad_request"),
    ] {
        let (status, _, body) = call(
            &api,
            "POST",
            "/v2/search",
            Some(TOKEN_A),
            &[],
            Some(request),
        )
        .await;
        assert_eq!(
            (status, body["code"].as_str()),
            (StatusCode::BAD_REQUEST, Some(code)),
            "{body}"
        );
    }

    // A body, or a nested options object, that is an array: refused (serde's derive would
    // read an array as the fields in order).
    for (path, request) in [
        ("/v2/scrape", serde_json::json!([site.url("/article/1")])),
        (
            "/v2/crawl",
            serde_json::json!({"url": site.url("/"), "scrapeOptions": []}),
        ),
        (
            "/v2/search",
            serde_json::json!({"query": "rust", "scrapeOptions": [["markdown"]]}),
        ),
    ] {
        let (status, _, body) = call(&api, "POST", path, Some(TOKEN_A), &[], Some(request)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}: {body}");
        assert!(
            body["error"]
                .as_str()
                .is_some_and(|message| message.contains("JSON object")),
            "{path}: {body}"
        );
    }

    // A field Firecrawl does not have, an option trawl cannot honour, a refused destination.
    let (status, _, body) = call(
        &api,
        "POST",
        "/v1/scrape",
        Some(TOKEN_A),
        &[],
        Some(serde_json::json!({"url": site.url("/article/1"), "teleport": true})),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("bad_request")),
        "{body}"
    );
    let (status, _, body) = call(
        &api,
        "POST",
        "/v2/scrape",
        Some(TOKEN_A),
        &[],
        Some(serde_json::json!({"url": site.url("/article/1"), "location": {"country": "DE"}})),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::BAD_REQUEST, Some("unsupported_option")),
        "{body}"
    );
    assert!(
        body["error"]
            .as_str()
            .is_some_and(|error| error.contains("location")),
        "{body}"
    );
    let (status, _, body) = call(
        &api,
        "POST",
        "/v2/scrape",
        Some(TOKEN_A),
        &[],
        scrape("http://169.254.169.254/latest/meta-data/".to_owned()),
    )
    .await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::FORBIDDEN, Some("blocked_destination")),
        "{body}"
    );
    let (status, _, body) = call(
        &api,
        "POST",
        "/v2/crawl",
        Some(TOKEN_A),
        &[],
        Some(serde_json::json!({"url": "http://169.254.169.254/"})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");

    // Only the parts asked for.
    let (status, _, body) = call(
        &api,
        "POST",
        "/v2/scrape",
        Some(TOKEN_A),
        &[],
        Some(serde_json::json!({"url": site.url("/article/2"), "formats": ["rawHtml"]})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["data"]["rawHtml"].is_string(), "{body}");
    assert!(body["data"].get("markdown").is_none(), "{body}");
    assert_eq!(body["data"]["metadata"]["creditsUsed"], 0, "{body}");

    // A crawl is its tenant's: another token's GET and DELETE are 404.
    let (status, _, started) = call(
        &api,
        "POST",
        "/v2/crawl",
        Some(TOKEN_A),
        &[],
        Some(serde_json::json!({"url": site.url("/article/1"), "limit": 1, "sitemap": "skip"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{started}");
    let id = started["id"].as_str().expect("an id").to_owned();
    assert!(
        started["url"]
            .as_str()
            .is_some_and(|url| url.ends_with(&format!("/v2/crawl/{id}"))),
        "{started}"
    );
    let path = format!("/v2/crawl/{id}");
    let (status, _, body) = call(&api, "GET", &path, Some(TOKEN_B), &[], None).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("not_found")),
        "{body}"
    );
    let (status, _, _) = call(&api, "DELETE", &path, Some(TOKEN_B), &[], None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let mut crawl = serde_json::Value::Null;
    for _ in 0..200 {
        let (status, _, body) = call(&api, "GET", &path, Some(TOKEN_A), &[], None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        crawl = body;
        if crawl["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(crawl["status"], "completed", "{crawl}");
    assert_eq!(crawl["data"].as_array().map(Vec::len), Some(1), "{crawl}");
    assert!(crawl["next"].is_null(), "{crawl}");
    // trawl's own route reads the same crawl.
    let (status, _, record) = call(
        &api,
        "GET",
        &format!("/v1/crawls/{id}"),
        Some(TOKEN_A),
        &[],
        None,
    )
    .await;
    assert_eq!(
        (status, &record["spec"]["max_pages"]),
        (StatusCode::OK, &1.into()),
        "{record}"
    );
    let (status, _, body) = call(&api, "DELETE", &path, Some(TOKEN_A), &[], None).await;
    assert_eq!(status, StatusCode::CONFLICT, "an ended crawl: {body}");

    // Firecrawl's idempotency header on a batch scrape: the same answer, nothing twice.
    let batch = serde_json::json!({"urls": [site.url("/article/3")]});
    let key = [("x-idempotency-key", "firecrawl-batch-1")];
    let (status, _, first) = call(
        &api,
        "POST",
        "/v2/batch/scrape",
        Some(TOKEN_A),
        &key,
        Some(batch.clone()),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{first}");
    let (status, headers, again) = call(
        &api,
        "POST",
        "/v2/batch/scrape",
        Some(TOKEN_A),
        &key,
        Some(batch),
    )
    .await;
    assert_eq!(
        (status, &again["id"]),
        (StatusCode::OK, &first["id"]),
        "{again}"
    );
    assert_eq!(
        headers
            .get("idempotent-replayed")
            .map(|value| value.as_bytes()),
        Some(&b"true"[..])
    );
    let batch_path = format!("/v2/batch/scrape/{}", first["id"].as_str().expect("an id"));
    let (status, _, body) = call(&api, "GET", &batch_path, Some(TOKEN_B), &[], None).await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "another tenant's batch: {body}"
    );
    let mut done = serde_json::Value::Null;
    for _ in 0..200 {
        let (status, _, body) = call(&api, "GET", &batch_path, Some(TOKEN_A), &[], None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        done = body;
        if done["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        (&done["total"], &done["completed"]),
        (&1.into(), &1.into()),
        "{done}"
    );
    assert!(done["data"][0]["markdown"].is_string(), "{done}");
}
