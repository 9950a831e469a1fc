//! The web UI (`/ui`) on a real server on 127.0.0.1: plain HTTP tests (login, cookie flags,
//! CSRF, CSP, tenancy, hostile markdown), and one walk through every page in real headless
//! Chromium (`/usr/bin/chromium`, driven with chromiumoxide): no console error or CSP
//! violation on any page, login, search, job cancel and replay stepping by keyboard and by
//! mouse, the exported replay opened offline, and a screenshot of each page saved into
//! `TRAWL_UI_SCREENSHOTS` (or the test's temporary directory).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use testkit::FixtureServer;
use trawl::api::{self, AppState, TokenEntry};
use trawl::app::{App, Needs, Shutdown};
use trawl::config::{Config, Secret};
use trawl::store::{NewJob, Store};
use trawl::tenant::Tenant;

use crate::test_config;

/// Tenant `acme`'s token.
const TOKEN_A: &str = "ui-token-acme-0123456789";
/// Tenant `other`'s token.
const TOKEN_B: &str = "ui-token-other-0123456789";
/// The admin token.
const ADMIN: &str = "ui-token-admin-0123456789";

/// A `trawl serve` as the CLI builds it, with the web UI, in a temporary directory.
struct Server {
    base: String,
    store: Store,
    shutdown: Shutdown,
    _app: App,
    dir: tempfile::TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown.trigger();
    }
}

impl Server {
    /// With `tokens`: tenants `acme` and `other` and the admin; without, open (loopback).
    /// With `pools`: the fetch and archive pools; with `browser`: agent sessions too.
    async fn start(tokens: bool, pools: bool, browser: bool) -> Server {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = Config {
            namespace: "ui-test".to_owned(),
            ..test_config(dir.path())
        };
        if tokens {
            config.api.tokens = vec![
                TokenEntry::Named {
                    token: Secret::new(TOKEN_A),
                    tenant: "acme".to_owned(),
                },
                TokenEntry::Named {
                    token: Secret::new(TOKEN_B),
                    tenant: "other".to_owned(),
                },
            ];
            config.api.admin_token = Some(Secret::new(ADMIN));
        }
        config.archive.commit_ms = 200;
        config.runner.retry_base_ms = 10;
        config.runner.retry_max_ms = 50;
        let mut app = App::build(&config, Needs { browser })
            .await
            .expect("the application builds");
        let index = trawl_workers::archive::index::ArchiveIndex::open_or_create(
            &trawl::archive::index_dir(&config.data_dir),
        )
        .expect("index opens");
        if pools {
            app.start_pools();
            app.start_archive(trawl::archive::Stop::Now)
                .expect("archive pool starts");
        }
        let sessions = if browser { app.sessions() } else { None };
        let state = AppState {
            context: app.deps().clone(),
            queue: app.deps().queue.clone(),
            config: Arc::new(config.api.clone()),
            archive: Some(api::ArchiveSearch { index, per_page: 2 }),
            sessions,
            remote_sessions: None,
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let router =
            api::router(state).layer(axum::Extension(api::DataDir(config.data_dir.clone())));
        app.serve("server", listener, router);
        Server {
            base,
            store: app.deps().store.clone(),
            shutdown: app.shutdown_signal(),
            _app: app,
            dir,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// A JSON API call with a bearer token.
    async fn api(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> (StatusCode, serde_json::Value) {
        let mut request = client().request(method, self.url(path)).bearer_auth(token);
        if let Some(body) = body {
            request = request
                .header("content-type", "application/json")
                .body(body.to_string());
        }
        let response = request.send().await.expect("answers");
        let status = StatusCode::from_u16(response.status().as_u16()).expect("status");
        let text = response.text().await.expect("body");
        (
            status,
            serde_json::from_str(&text).unwrap_or(serde_json::Value::Null),
        )
    }

    /// A job of `tenant` recorded as queued and never pushed to the queue: it stays queued.
    async fn queued_job(&self, tenant: &str, url: &str) -> String {
        let id = ulid::Ulid::generate().to_string();
        self.store
            .create_jobs(&[NewJob {
                id: id.clone(),
                kind: "fetch",
                batch_id: None,
                url: url.to_owned(),
                params: serde_json::json!({"kind": "fetch", "url": url}),
                max_attempts: 3,
                webhook: None,
                crawl_id: None,
                tenant: Tenant::new(tenant).expect("tenant"),
            }])
            .await
            .expect("job recorded");
        id
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client")
}

fn form_body(fields: &[(&str, &str)]) -> String {
    url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

/// The value of cookie `name` set by a response, and the whole `Set-Cookie` line.
fn set_cookie(response: &reqwest::Response, name: &str) -> Option<(String, String)> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|line| line.starts_with(&format!("{name}=")))
        .map(|line| {
            let value = line
                .split(';')
                .next()
                .and_then(|pair| pair.split_once('='))
                .map(|(_, value)| value.to_owned())
                .unwrap_or_default();
            (value, line.to_owned())
        })
}

/// The CSRF token of the first form of a page.
fn csrf_of(html: &str) -> String {
    let marker = "name=\"csrf\" value=\"";
    let start = html.find(marker).expect("a form with a csrf token") + marker.len();
    html[start..].split('"').next().expect("a value").to_owned()
}

/// Logs in with `token` through the form; returns the `Cookie` header value.
async fn login(server: &Server, token: &str) -> String {
    let form = client()
        .get(server.url("/ui/login"))
        .send()
        .await
        .expect("login form");
    assert_eq!(form.status(), 200);
    let (pre, _) = set_cookie(&form, "trawl_ui_pre").expect("a pre-login cookie");
    let html = form.text().await.expect("body");
    assert_eq!(csrf_of(&html), pre);
    let response = client()
        .post(server.url("/ui/login"))
        .header("cookie", format!("trawl_ui_pre={pre}"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&[
            ("token", token),
            ("csrf", &pre),
            ("next", "/ui/"),
        ]))
        .send()
        .await
        .expect("login");
    assert_eq!(response.status(), 303);
    let (value, _) = set_cookie(&response, "trawl_ui").expect("a login cookie");
    format!("trawl_ui={value}")
}

async fn get_page(server: &Server, cookie: &str, path: &str) -> (u16, String) {
    let response = client()
        .get(server.url(path))
        .header("cookie", cookie)
        .send()
        .await
        .expect("answers");
    let status = response.status().as_u16();
    (status, response.text().await.expect("body"))
}

async fn post_form(server: &Server, cookie: &str, path: &str, csrf: Option<&str>) -> u16 {
    let fields: Vec<(&str, &str)> = csrf.map(|csrf| ("csrf", csrf)).into_iter().collect();
    client()
        .post(server.url(path))
        .header("cookie", cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form_body(&fields))
        .send()
        .await
        .expect("answers")
        .status()
        .as_u16()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_needs_a_login_whose_cookie_is_httponly_and_strict() {
    let server = Server::start(true, false, false).await;
    let anonymous = client()
        .get(server.url("/ui/jobs/x"))
        .send()
        .await
        .expect("answers");
    assert_eq!(anonymous.status(), 303);
    assert_eq!(
        anonymous.headers()["location"],
        "/ui/login?next=%2Fui%2Fjobs%2Fx"
    );
    // A changing request without a login is refused, not redirected.
    assert_eq!(post_form(&server, "", "/ui/logout", Some("x")).await, 401);
    // A bearer token is not a login: the UI takes its cookie only.
    let bearer = client()
        .get(server.url("/ui/"))
        .bearer_auth(TOKEN_A)
        .send()
        .await
        .expect("answers");
    assert_eq!(bearer.status(), 303);

    let form = client()
        .get(server.url("/ui/login"))
        .send()
        .await
        .expect("form");
    let csp = form.headers()["content-security-policy"]
        .to_str()
        .expect("ascii")
        .to_owned();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(csp.contains("style-src 'self'"), "{csp}");
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(form.headers()["x-frame-options"], "DENY");
    let (pre, _) = set_cookie(&form, "trawl_ui_pre").expect("pre cookie");

    let attempt = |token: &'static str, csrf: String, cookie: String| {
        let url = server.url("/ui/login");
        async move {
            client()
                .post(url)
                .header("cookie", cookie)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(form_body(&[("token", token), ("csrf", &csrf)]))
                .send()
                .await
                .expect("answers")
        }
    };
    let wrong = attempt(
        "not-a-token-0123456789",
        pre.clone(),
        format!("trawl_ui_pre={pre}"),
    )
    .await;
    assert_eq!(wrong.status(), 401);
    assert!(set_cookie(&wrong, "trawl_ui").is_none());
    // The right token from a form this browser was not given (login CSRF) is refused.
    let forged = attempt(TOKEN_A, "forged".to_owned(), format!("trawl_ui_pre={pre}")).await;
    assert_eq!(forged.status(), 403);
    let no_cookie = attempt(TOKEN_A, pre.clone(), String::new()).await;
    assert_eq!(no_cookie.status(), 403);
    assert!(set_cookie(&no_cookie, "trawl_ui").is_none());

    let ok = attempt(TOKEN_A, pre.clone(), format!("trawl_ui_pre={pre}")).await;
    assert_eq!(ok.status(), 303);
    assert_eq!(ok.headers()["location"], "/ui/");
    let (value, line) = set_cookie(&ok, "trawl_ui").expect("login cookie");
    assert_eq!(value.len(), 64, "{line}");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(line.contains(flag), "{line}");
    }
    assert!(!line.contains(TOKEN_A), "the token is not the cookie");
    let cookie = format!("trawl_ui={value}");
    let (status, html) = get_page(&server, &cookie, "/ui/").await;
    assert_eq!(status, 200);
    assert!(
        html.contains("Dashboard") && html.contains("acme"),
        "{html}"
    );
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "no inline script or style"
    );

    // Logging out forgets the login.
    let csrf = csrf_of(&html);
    assert_eq!(
        post_form(&server, &cookie, "/ui/logout", Some(&csrf)).await,
        303
    );
    let (status, _) = get_page(&server, &cookie, "/ui/").await;
    assert_eq!(status, 303);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ui_forms_refuse_a_missing_or_wrong_csrf_token_and_tenants_see_only_their_own() {
    let server = Server::start(true, false, false).await;
    let mine = server.queued_job("acme", "http://a.test/1").await;
    let theirs = server.queued_job("other", "http://b.test/1").await;
    let cookie = login(&server, TOKEN_A).await;
    let (status, html) = get_page(&server, &cookie, &format!("/ui/jobs/{mine}")).await;
    assert_eq!(status, 200);
    assert!(html.contains("Cancel job"), "{html}");
    let csrf = csrf_of(&html);

    let cancel = format!("/ui/jobs/{mine}/cancel");
    assert_eq!(post_form(&server, &cookie, &cancel, None).await, 403);
    assert_eq!(
        post_form(&server, &cookie, &cancel, Some("0000")).await,
        403
    );
    let job = server.store.job(&mine).await.expect("store").expect("job");
    assert_eq!(
        job.status.as_str(),
        "queued",
        "a refused form changes nothing"
    );
    // Another login's token is not this one's.
    let other_cookie = login(&server, TOKEN_A).await;
    assert_eq!(
        post_form(&server, &other_cookie, &cancel, Some(&csrf)).await,
        403
    );

    // Another tenant's job is not found, on every route.
    let (status, _) = get_page(&server, &cookie, &format!("/ui/jobs/{theirs}")).await;
    assert_eq!(status, 404);
    let other_cancel = format!("/ui/jobs/{theirs}/cancel");
    assert_eq!(
        post_form(&server, &cookie, &other_cancel, Some(&csrf)).await,
        404
    );
    let (_, dashboard) = get_page(&server, &cookie, "/ui/").await;
    assert!(dashboard.contains(&mine) && !dashboard.contains(&theirs));

    assert_eq!(post_form(&server, &cookie, &cancel, Some(&csrf)).await, 303);
    let job = server.store.job(&mine).await.expect("store").expect("job");
    assert_eq!(job.status.as_str(), "cancelled");
    assert_eq!(post_form(&server, &cookie, &cancel, Some(&csrf)).await, 409);

    // The admin sees every tenant's.
    let admin = login(&server, ADMIN).await;
    let (status, _) = get_page(&server, &admin, &format!("/ui/jobs/{theirs}")).await;
    assert_eq!(status, 200);
    let (_, dashboard) = get_page(&server, &admin, "/ui/").await;
    assert!(dashboard.contains(&mine) && dashboard.contains(&theirs));
    let (status, _) = get_page(&server, &admin, "/ui/sessions/nope").await;
    assert_eq!(status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_tokens_the_ui_is_open_and_still_checks_csrf() {
    let server = Server::start(false, false, false).await;
    let id = server.queued_job("default", "http://a.test/1").await;
    let first = client()
        .get(server.url("/ui/"))
        .send()
        .await
        .expect("answers");
    assert_eq!(first.status(), 200);
    let (value, line) = set_cookie(&first, "trawl_ui").expect("a cookie for the csrf token");
    assert!(
        line.contains("HttpOnly") && line.contains("SameSite=Strict"),
        "{line}"
    );
    let cookie = format!("trawl_ui={value}");
    let html = first.text().await.expect("body");
    assert!(html.contains(&id), "{html}");
    assert!(!html.contains("Log out"), "no logout without tokens");
    let (_, page) = get_page(&server, &cookie, &format!("/ui/jobs/{id}")).await;
    let cancel = format!("/ui/jobs/{id}/cancel");
    assert_eq!(post_form(&server, &cookie, &cancel, None).await, 403);
    assert_eq!(
        post_form(&server, &cookie, &cancel, Some(&csrf_of(&page))).await,
        303
    );
    // The login form is not needed.
    let login = client()
        .get(server.url("/ui/login"))
        .send()
        .await
        .expect("answers");
    assert_eq!(login.status(), 303);
}

/// A small site of hostile and changing pages: `/hostile.md` (markdown with raw HTML,
/// script, `javascript:` links and remote images), `/` (links to two pages), `/a`, `/b`, and
/// `/counter` (its title says how often it was served).
async fn hostile_site() -> String {
    use axum::routing::get;
    let served = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let router = axum::Router::new()
        .route(
            "/hostile.md",
            get(|| async {
                (
                    [("content-type", "text/markdown; charset=utf-8")],
                    HOSTILE_MARKDOWN,
                )
            }),
        )
        .route(
            "/",
            get(|| async {
                axum::response::Html(
                    "<html><head><title>Home</title></head><body><main><h1>Home</h1>\
                     <p>The home page of the small site, with enough words to be an article \
                     that the extractor keeps as the main content of the page.</p>\
                     <p><a href=\"/a\">Page A</a> and <a href=\"/b\">Page B</a>.</p></main></body></html>",
                )
            }),
        )
        .route("/a", get(|| async { axum::response::Html(site_page("A")) }))
        .route("/b", get(|| async { axum::response::Html(site_page("B")) }))
        .route(
            "/counter",
            get(move || {
                let served = served.clone();
                async move {
                    let n = served.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
                    axum::response::Html(format!(
                        "<html><head><title>Visit {n}</title></head><body><h1>Visit {n}</h1>\
                         <p><a id=\"next\" href=\"/a\">on to A</a></p></body></html>"
                    ))
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("binds");
    let base = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    base
}

fn site_page(name: &str) -> String {
    format!(
        "<html><head><title>Page {name}</title></head><body><main><h1>Page {name}</h1>\
         <p>Page {name} of the small site talks about harbour cranes and their counterweights \
         at some length, so that it is kept as an article.</p></main></body></html>"
    )
}

const HOSTILE_MARKDOWN: &str = "# Hostile page\n\n\
Some harmless text about lighthouse keepers.\n\n\
<script>window.__pwned = 1; alert('pwned')</script>\n\n\
<img src=\"http://127.0.0.1:9/tracker.png\" onerror=\"alert('img')\">\n\n\
[a javascript link](javascript:alert('link')) and [a fine link](https://example.com/fine)\n\n\
![remote image](http://127.0.0.1:9/remote.png)\n\n\
<a href=\"javascript:alert('raw')\" onclick=\"alert('click')\">raw anchor</a>\n\n\
<iframe src=\"http://127.0.0.1:9/frame\"></iframe>\n\n\
<style>body { display: none }</style>\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_pages_markdown_is_rendered_without_script_links_or_images() {
    let site = hostile_site().await;
    let server = Server::start(true, true, false).await;
    let (status, fetched) = server
        .api(
            TOKEN_A,
            reqwest::Method::POST,
            "/v1/fetch",
            Some(serde_json::json!({"url": format!("{site}/hostile.md")})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{fetched}");
    let page_id = fetched["page_id"].as_str().expect("a page").to_owned();
    let cookie = login(&server, TOKEN_A).await;
    let (status, html) = get_page(&server, &cookie, &format!("/ui/pages/{page_id}")).await;
    assert_eq!(status, 200, "{html}");
    let content = html
        .split("aria-label=\"Page content\"")
        .nth(1)
        .and_then(|rest| rest.split("</article>").next())
        .expect("the content");
    assert!(content.contains("<h1>Hostile page</h1>"), "{content}");
    assert!(content.contains("lighthouse keepers"), "{content}");
    // Text is escaped, so each `<` starts a real tag: none may run or load anything.
    for tag in content
        .split('<')
        .skip(1)
        .map(|rest| rest.split('>').next().unwrap_or(""))
    {
        let tag = tag.to_lowercase();
        let name = tag.split_whitespace().next().unwrap_or("");
        assert!(
            !["script", "img", "iframe", "style", "object", "embed"].contains(&name),
            "<{tag}>"
        );
        for attribute in tag.split_whitespace().skip(1) {
            assert!(
                !attribute.starts_with("on")
                    && !attribute.starts_with("src")
                    && !attribute.starts_with("style")
                    && !attribute.contains("javascript:"),
                "<{tag}>"
            );
        }
    }
    // The page's raw HTML is shown as text, never interpreted.
    assert!(content.contains("&lt;script&gt;"), "{content}");
    assert!(
        content.contains("href=\"https://example.com/fine\""),
        "{content}"
    );
    // The raw body downloads, never rendered inline.
    let raw = client()
        .get(server.url(&format!("/ui/pages/{page_id}/raw")))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("raw");
    assert_eq!(raw.status(), 200);
    assert_eq!(raw.headers()["content-type"], "application/octet-stream");
    assert!(
        raw.headers()["content-disposition"]
            .to_str()
            .expect("ascii")
            .starts_with("attachment")
    );
    assert!(
        raw.headers()["content-security-policy"]
            .to_str()
            .expect("ascii")
            .starts_with("sandbox")
    );
    assert_eq!(raw.text().await.expect("body"), HOSTILE_MARKDOWN);
    // Another tenant cannot see it.
    let other = login(&server, TOKEN_B).await;
    let (status, _) = get_page(&server, &other, &format!("/ui/pages/{page_id}")).await;
    assert_eq!(status, 404);
    let (status, _) = get_page(&server, &other, &format!("/ui/pages/{page_id}/raw")).await;
    assert_eq!(status, 404);
}

/// A headless Chromium driven by the test (not trawl's browser pool: no egress proxy, it
/// reaches the UI on 127.0.0.1 directly).
struct Driver {
    browser: chromiumoxide::Browser,
    handler: tokio::task::JoinHandle<()>,
    _profile: tempfile::TempDir,
}

impl Driver {
    async fn launch() -> Driver {
        use chromiumoxide::browser::BrowserConfig;
        use futures_util::StreamExt as _;
        let profile = tempfile::tempdir().expect("tempdir");
        let mut builder = BrowserConfig::builder()
            .chrome_executable("/usr/bin/chromium")
            .new_headless_mode()
            .user_data_dir(profile.path())
            .window_size(1100, 760)
            .viewport(chromiumoxide::handler::viewport::Viewport {
                width: 1100,
                height: 760,
                device_scale_factor: Some(1.0),
                ..Default::default()
            })
            .request_timeout(Duration::from_secs(30))
            .args([
                "disable-gpu",
                "no-first-run",
                "disable-background-networking",
                "disable-dev-shm-usage",
            ]);
        // Root (the test machine) cannot use the sandbox.
        if std::process::Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|out| out.stdout.starts_with(b"0"))
        {
            builder = builder.no_sandbox();
        }
        let (mut browser, mut handler) =
            chromiumoxide::Browser::launch(builder.build().expect("config"))
                .await
                .expect("chromium starts");
        // Chromium logs to stderr; a pipe nobody reads fills up and stalls it.
        if let Some(stderr) = browser
            .get_mut_child()
            .and_then(|child| child.stderr.take())
        {
            let mut stderr = stderr.into_inner();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            });
        }
        let handler = tokio::spawn(async move { while handler.next().await.is_some() {} });
        Driver {
            browser,
            handler,
            _profile: profile,
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.handler.abort();
    }
}

/// A tab that records console errors, uncaught exceptions, log errors and CSP violations.
struct Tab {
    page: chromiumoxide::Page,
    problems: Arc<Mutex<Vec<String>>>,
    shots: std::path::PathBuf,
}

impl Tab {
    async fn open(driver: &Driver, shots: std::path::PathBuf) -> Tab {
        use chromiumoxide::cdp::browser_protocol::log::EventEntryAdded;
        use chromiumoxide::cdp::js_protocol::runtime::{
            EventConsoleApiCalled, EventExceptionThrown,
        };
        use futures_util::StreamExt as _;
        let page = driver.browser.new_page("about:blank").await.expect("tab");
        page.enable_log().await.expect("log");
        page.enable_runtime().await.expect("runtime");
        // Runs before every document's own scripts; the CSP does not apply to it.
        page.evaluate_on_new_document(
            "window.__violations = []; document.addEventListener('securitypolicyviolation', \
             (e) => window.__violations.push(e.violatedDirective + ' ' + e.blockedURI));",
        )
        .await
        .expect("init script");
        let problems = Arc::new(Mutex::new(Vec::new()));
        let mut logs = page
            .event_listener::<EventEntryAdded>()
            .await
            .expect("listener");
        let sink = problems.clone();
        tokio::spawn(async move {
            while let Some(entry) = logs.next().await {
                let level = format!("{:?}", entry.entry.level).to_lowercase();
                if level.contains("error") || level.contains("warning") {
                    sink.lock()
                        .expect("lock")
                        .push(format!("log: {}", entry.entry.text));
                }
            }
        });
        let mut console = page
            .event_listener::<EventConsoleApiCalled>()
            .await
            .expect("listener");
        let sink = problems.clone();
        tokio::spawn(async move {
            while let Some(call) = console.next().await {
                let kind = format!("{:?}", call.r#type).to_lowercase();
                if kind.contains("error") || kind.contains("warning") || kind.contains("assert") {
                    sink.lock()
                        .expect("lock")
                        .push(format!("console: {:?}", call.args));
                }
            }
        });
        let mut thrown = page
            .event_listener::<EventExceptionThrown>()
            .await
            .expect("listener");
        let sink = problems.clone();
        tokio::spawn(async move {
            while let Some(error) = thrown.next().await {
                sink.lock()
                    .expect("lock")
                    .push(format!("exception: {}", error.exception_details.text));
            }
        });
        Tab {
            page,
            problems,
            shots,
        }
    }

    async fn goto(&self, url: &str) {
        self.page.goto(url).await.expect("navigates");
        self.settle().await;
    }

    /// Waits for the document to be complete and the script to have run.
    async fn settle(&self) {
        for _ in 0..100 {
            let ready = self
                .eval("document.readyState === 'complete'")
                .await
                .as_bool()
                .unwrap_or(false);
            if ready {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }

    async fn eval(&self, expression: &str) -> serde_json::Value {
        self.page
            .evaluate(expression)
            .await
            .ok()
            .and_then(|result| result.value().cloned())
            .unwrap_or(serde_json::Value::Null)
    }

    async fn url(&self) -> String {
        self.page.url().await.ok().flatten().unwrap_or_default()
    }

    /// Checks the page for problems (none allowed) and saves its screenshot as `name`.png.
    async fn check(&self, name: &str) {
        let violations = self
            .eval("JSON.stringify(window.__violations || ['no init script'])")
            .await;
        assert_eq!(
            violations.as_str(),
            Some("[]"),
            "CSP violations on {name} ({})",
            self.url().await
        );
        let problems = std::mem::take(&mut *self.problems.lock().expect("lock"));
        assert!(problems.is_empty(), "problems on {name}: {problems:#?}");
        // Readable on a phone too: checked at 390 px wide below; here, no sideways scroll.
        let overflow = self
            .eval("document.documentElement.scrollWidth <= window.innerWidth + 1")
            .await;
        assert_eq!(
            overflow,
            serde_json::Value::Bool(true),
            "{name} scrolls sideways"
        );
        let png = self
            .page
            .screenshot(chromiumoxide::page::ScreenshotParams::builder().build())
            .await
            .expect("screenshot");
        assert!(png.starts_with(b"\x89PNG"));
        std::fs::write(self.shots.join(format!("{name}.png")), png).expect("saves the screenshot");
    }

    async fn key(&self, key: &str) {
        self.page
            .find_element("body")
            .await
            .expect("body")
            .press_key(key)
            .await
            .expect("key");
        tokio::time::sleep(Duration::from_millis(150)).await;
    }

    async fn current_step(&self) -> String {
        self.eval("document.querySelector('ol.timeline li[aria-current=step]').dataset.seq")
            .await
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// Waits until `expression` is true in the page.
    async fn wait_js(&self, expression: &str) {
        for _ in 0..200 {
            if self.eval(expression).await == serde_json::Value::Bool(true) {
                self.settle().await;
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let text = self.eval("document.body.innerText.slice(0, 400)").await;
        panic!("never true: {expression} at {}: {text}", self.url().await);
    }

    /// Waits until the URL contains `part`.
    async fn wait_url(&self, part: &str) {
        for _ in 0..200 {
            if self.url().await.contains(part) {
                self.settle().await;
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("never reached {part}: at {}", self.url().await);
    }
}

/// Polls `check` until it is true (at most 20 s).
async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..400 {
        if check().await {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("{what} never happened");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ui_page_works_in_chromium_by_keyboard_and_mouse() {
    let site = hostile_site().await;
    let fixture = FixtureServer::start().await.expect("fixture starts");
    let server = Server::start(true, true, true).await;
    // Test set-up, not configuration: where the screenshots go.
    #[allow(clippy::disallowed_methods)]
    let shots = match std::env::var_os("TRAWL_UI_SCREENSHOTS") {
        Some(dir) => std::path::PathBuf::from(dir),
        None => server.dir.path().join("screenshots"),
    };
    std::fs::create_dir_all(&shots).expect("screenshot dir");

    // Fixture data, through the API as a client would make it.
    let post = reqwest::Method::POST;
    for path in ["/article/1", "/article/2"] {
        let (status, body) = server
            .api(
                TOKEN_A,
                post.clone(),
                "/v1/fetch",
                Some(serde_json::json!({"url": fixture.url(path), "archive": true})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    let (_, hostile) = server
        .api(
            TOKEN_A,
            post.clone(),
            "/v1/fetch",
            Some(serde_json::json!({"url": format!("{site}/hostile.md"), "archive": true})),
        )
        .await;
    let hostile_page = hostile["page_id"].as_str().expect("page").to_owned();
    let (_, again) = server
        .api(
            TOKEN_A,
            post.clone(),
            "/v1/fetch",
            Some(serde_json::json!({"url": fixture.url("/article/1"), "cache_ttl": 0})),
        )
        .await;
    let article_page = again["page_id"].as_str().expect("page").to_owned();
    let (status, failed) = server
        .api(
            TOKEN_A,
            post.clone(),
            "/v1/fetch",
            Some(serde_json::json!({"url": fixture.url("/status/404")})),
        )
        .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{failed}");
    let (status, crawl) = server
        .api(
            TOKEN_A,
            post.clone(),
            "/v1/crawls",
            Some(serde_json::json!({"seeds": [format!("{site}/")], "max_pages": 3})),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{crawl}");
    let crawl_id = crawl["id"].as_str().expect("crawl").to_owned();
    let queued = server.queued_job("acme", "http://queued.test/waits").await;
    let (status, session) = server
        .api(
            TOKEN_A,
            post.clone(),
            "/v1/sessions",
            Some(serde_json::json!({})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    let session_id = session["id"].as_str().expect("session").to_owned();
    let actions = serde_json::json!({"actions": [
        {"action": "goto", "url": format!("{site}/counter")},
        {"action": "click", "selector": "#next"},
        {"action": "type", "selector": "#missing", "text": "s3cret"},
    ]});
    let (status, steps) = server
        .api(
            TOKEN_A,
            post.clone(),
            &format!("/v1/sessions/{session_id}/actions"),
            Some(actions),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{steps}");
    // The failed type ends the batch; one more after it.
    let (status, _) = server
        .api(
            TOKEN_A,
            post.clone(),
            &format!("/v1/sessions/{session_id}/actions"),
            Some(serde_json::json!({"action": "snapshot"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // The archive commits within about 2 s.
    let search_ready = || async {
        let (_, hits) = server
            .api(
                TOKEN_A,
                reqwest::Method::GET,
                "/v1/search?q=lighthouse",
                None,
            )
            .await;
        hits["hits"].as_array().is_some_and(|hits| !hits.is_empty())
    };
    eventually("the archive commit", search_ready).await;
    let crawl_done = || async {
        let (_, crawl) = server
            .api(
                TOKEN_A,
                reqwest::Method::GET,
                &format!("/v1/crawls/{crawl_id}"),
                None,
            )
            .await;
        crawl["status"] == "completed"
    };
    eventually("the crawl's end", crawl_done).await;

    let driver = Driver::launch().await;
    let tab = Tab::open(&driver, shots.clone()).await;

    // The detector itself: an inline style the CSP refuses is seen.
    tab.goto(&server.url("/ui/login")).await;
    tab.eval("document.body.setAttribute('style', 'color: red'); 1")
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let seen = tab.eval("window.__violations.length").await;
    assert_eq!(seen, serde_json::json!(1), "the CSP check sees a violation");
    let logged = std::mem::take(&mut *tab.problems.lock().expect("lock"));
    assert!(
        logged
            .iter()
            .any(|line| line.contains("Content Security Policy")),
        "the log check sees it too: {logged:?}"
    );
    tab.goto(&server.url("/ui/login")).await;

    // Login by keyboard: the token field has the focus; Enter submits.
    assert_eq!(tab.eval("document.activeElement.id").await, "token");
    tab.check("login").await;
    let field = tab.page.find_element("#token").await.expect("field");
    field.type_str(TOKEN_A).await.expect("types");
    field.press_key("Enter").await.expect("submits");
    tab.wait_js("location.pathname === '/ui/'").await;
    let heading = tab.eval("document.querySelector('h1').textContent").await;
    assert_eq!(heading, "Dashboard");
    assert!(
        tab.eval("document.body.textContent")
            .await
            .as_str()
            .unwrap_or("")
            .contains("http_status"),
        "the error code at a glance"
    );
    tab.check("dashboard").await;
    // Live counters: cancelling the queued job elsewhere changes them without a reload.
    let queued_before = tab
        .eval("document.querySelector('[data-live=\"count.queued\"]').textContent")
        .await;
    assert_eq!(queued_before, "1");
    server.store.request_cancel(&queued).await.expect("cancels");
    eventually("the live counter", || async {
        tab.eval("document.querySelector('[data-live=\"count.queued\"]').textContent")
            .await
            == "0"
    })
    .await;

    // A job page and its cancel button, by mouse.
    let second = server.queued_job("acme", "http://queued.test/second").await;
    tab.goto(&server.url(&format!("/ui/jobs/{second}"))).await;
    tab.check("job").await;
    tab.page
        .find_element("button.danger")
        .await
        .expect("cancel")
        .click()
        .await
        .expect("clicks");
    tab.wait_url("done=cancelled").await;
    assert_eq!(
        server
            .store
            .job(&second)
            .await
            .expect("store")
            .expect("job")
            .status
            .as_str(),
        "cancelled"
    );
    assert_eq!(
        tab.eval("document.querySelector('.badge').textContent")
            .await,
        "cancelled"
    );

    // The crawl page.
    tab.goto(&server.url(&format!("/ui/crawls/{crawl_id}")))
        .await;
    assert!(
        tab.eval("document.querySelectorAll('tbody tr').length")
            .await
            .as_u64()
            >= Some(3)
    );
    tab.check("crawl").await;

    // The page viewer: rendered markdown, no script ran, no remote image.
    tab.goto(&server.url(&format!("/ui/pages/{hostile_page}")))
        .await;
    assert_eq!(tab.eval("typeof window.__pwned").await, "undefined");
    assert_eq!(
        tab.eval("document.querySelectorAll('article img, article script, article iframe').length")
            .await,
        0
    );
    tab.check("page-hostile").await;
    tab.goto(&server.url(&format!("/ui/pages/{article_page}")))
        .await;
    assert_eq!(
        tab.eval("document.querySelectorAll('aside ol li').length")
            .await,
        2,
        "two versions"
    );
    assert!(
        tab.eval("document.querySelector('aside').textContent")
            .await
            .as_str()
            .unwrap_or("")
            .contains("urn:uuid:")
            || tab
                .eval("document.querySelector('aside').textContent")
                .await
                .as_str()
                .unwrap_or("")
                .contains("Not archived")
    );
    tab.check("page").await;

    // Archive search by keyboard: type, Enter; the hit links to the page viewer.
    tab.goto(&server.url("/ui/search")).await;
    assert_eq!(tab.eval("document.activeElement.id").await, "q");
    let query = tab.page.find_element("#q").await.expect("query");
    query.type_str("lighthouse").await.expect("types");
    query.press_key("Enter").await.expect("submits");
    tab.wait_url("q=lighthouse").await;
    let hit = tab
        .eval(&format!(
            "Array.from(document.querySelectorAll('.hits h3 a')).some((a) => a.getAttribute('href') === '/ui/pages/{hostile_page}')"
        ))
        .await;
    assert_eq!(
        hit,
        serde_json::Value::Bool(true),
        "the hostile page is a hit"
    );
    assert_eq!(
        tab.eval("document.querySelector('.hits b').textContent.toLowerCase()")
            .await,
        "lighthouse"
    );
    tab.check("search").await;

    // Sessions and the replay, stepped by keyboard and mouse.
    tab.goto(&server.url("/ui/sessions")).await;
    tab.check("sessions").await;
    tab.goto(&server.url(&format!("/ui/sessions/{session_id}")))
        .await;
    assert_eq!(tab.current_step().await, "1");
    tab.key("ArrowRight").await;
    assert_eq!(tab.current_step().await, "2");
    let stage = tab
        .eval("document.getElementById('stage-img').getAttribute('src')")
        .await;
    assert_eq!(
        stage,
        format!("/ui/sessions/{session_id}/steps/2/image").as_str()
    );
    tab.page
        .find_element("#step-next")
        .await
        .expect("next")
        .click()
        .await
        .expect("clicks");
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(tab.current_step().await, "3");
    assert!(
        !tab.eval("document.body.textContent")
            .await
            .as_str()
            .unwrap_or("")
            .contains("s3cret"),
        "typed text is masked"
    );
    tab.key("k").await;
    assert_eq!(tab.current_step().await, "2");
    tab.page
        .find_element("li[data-seq='4']")
        .await
        .expect("step")
        .click()
        .await
        .expect("clicks");
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert_eq!(tab.current_step().await, "4");
    assert_eq!(tab.eval("document.activeElement.dataset.seq").await, "4");
    tab.key("Home").await;
    assert_eq!(tab.current_step().await, "1");
    tab.check("replay").await;

    // Re-run by keyboard: the button has the focus, Enter sends the form; the comparison
    // marks the one step whose outcome changed (the counter page's title).
    tab.eval("document.querySelector('form[action$=\"/rerun\"] button').focus(); 1")
        .await;
    tab.page
        .find_element("body")
        .await
        .expect("body")
        .press_key("Enter")
        .await
        .expect("submits");
    tab.wait_url("/compare/").await;
    let summary = tab
        .eval("document.querySelector('[role=status]').textContent")
        .await;
    assert!(
        summary
            .as_str()
            .unwrap_or("")
            .contains("1 of 4 steps differ"),
        "{summary}"
    );
    assert_eq!(
        tab.eval("document.querySelectorAll('tbody tr td.differs').length")
            .await,
        2
    );
    tab.check("compare").await;

    // On a phone: nothing scrolls sideways.
    use chromiumoxide::cdp::browser_protocol::emulation::SetDeviceMetricsOverrideParams;
    tab.page
        .execute(SetDeviceMetricsOverrideParams::new(390, 800, 1.0, true))
        .await
        .expect("phone size");
    tab.goto(&server.url("/ui/")).await;
    tab.check("dashboard-phone").await;
    tab.goto(&server.url(&format!("/ui/sessions/{session_id}")))
        .await;
    tab.check("replay-phone").await;
    tab.page
        .execute(SetDeviceMetricsOverrideParams::new(1100, 760, 1.0, false))
        .await
        .expect("desktop size");

    // The export opens offline: every image inline, nothing loaded from anywhere.
    let cookie = login(&server, TOKEN_A).await;
    let export = client()
        .get(server.url(&format!("/ui/sessions/{session_id}/export.html")))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("export");
    assert_eq!(export.status(), 200);
    assert!(
        export.headers()["content-disposition"]
            .to_str()
            .expect("ascii")
            .contains("attachment")
    );
    let html = export.text().await.expect("body");
    assert!(!html.contains("s3cret"));
    assert!(!html.contains("src=\"http") && !html.contains("<script"));
    let json = client()
        .get(server.url(&format!("/ui/sessions/{session_id}/export.json")))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("json export");
    assert_eq!(json.status(), 200);
    let replay: serde_json::Value =
        serde_json::from_str(&json.text().await.expect("body")).expect("json");
    assert_eq!(replay["steps"].as_array().map(Vec::len), Some(4));
    assert!(replay["steps"][0]["image"]["base64"].is_string());
    let file = server.dir.path().join("replay.html");
    std::fs::write(&file, &html).expect("writes");
    server.shutdown.trigger();
    tab.goto(&format!("file://{}", file.display())).await;
    assert_eq!(
        tab.eval("document.querySelectorAll('section img').length")
            .await,
        4
    );
    assert_eq!(
        tab.eval(
            "Array.from(document.images).every((image) => image.complete && image.naturalWidth > 0)"
        )
        .await,
        serde_json::Value::Bool(true),
        "every screenshot shows with the server gone"
    );
    tab.check("export").await;
}
