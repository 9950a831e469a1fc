//! The browse pool against real Chromium (`/usr/bin/chromium`) and the fixture's browser
//! pages, loopback only. Pages are addressed as `site.test:PORT`: a scripted resolver calls
//! that name public and dials the fixture on 127.0.0.1, so the egress proxy's policy is the
//! default one (loopback and private addresses refused) and the private-address pages prove
//! the guard. One browser serves every test here (one runtime holds it); the crash, memory
//! and busy tests start their own.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use testkit::FixtureServer;
use testkit::browser::{CrashTab, JS_BUILT_TEXT, MEMBERS_TEXT, site_dns};
use trawl::app::{Deps, Shutdown};
use trawl::deps::Parts;
use trawl_workers::browse::pool::{CookieSpec, Credentials, OriginHeaders};
use trawl_workers::browse::{self, Action, Pool, Profile, render};
use trawl_workers::job::{BrowseJob, BrowseResult, ErrorCode, Extractor, FetchJob, Job, Render};
use trawl_workers::web::{self, Dns};

struct Shared {
    fixture: FixtureServer,
    dns: Dns,
    pool: Pool,
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// Runs a test body on the runtime that holds the shared browser, one test at a time: the
/// rest of the suite keeps both cores busy, and a browser shared by several tests at once on
/// them made navigations miss their 30 s command timeout (render concurrency itself is
/// measured by `cargo bench --bench browse`).
fn run<F: Future>(body: F) -> F::Output {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    shared();
    runtime().block_on(body)
}

fn shared() -> &'static Shared {
    static SHARED: OnceLock<Shared> = OnceLock::new();
    SHARED.get_or_init(|| {
        runtime().block_on(async {
            let fixture = FixtureServer::start().await.expect("fixture starts");
            let dns = site_dns();
            let pool = new_pool(browse::Config::default(), &dns).await;
            Shared { fixture, dns, pool }
        })
    })
}

async fn new_pool(config: browse::Config, dns: &Dns) -> Pool {
    Pool::new(config, Arc::new(web::Policy::default()), dns.clone())
        .await
        .expect("pool starts")
}

fn site(path: &str) -> String {
    format!("http://site.test:{}{path}", shared().fixture.addr().port())
}

fn fetch_deps() -> trawl_workers::fetch::Deps {
    let client = web::Client::with_dns(
        web::Config::default(),
        web::Policy::default(),
        shared().dns.clone(),
    )
    .expect("client");
    trawl_workers::fetch::Deps::new(client, trawl_workers::fetch::Config::default())
        .expect("no providers")
}

fn actions(json: &str) -> Vec<Action> {
    serde_json::from_str(json).expect("valid actions")
}

async fn script(url: &str, actions: Vec<Action>) -> BrowseResult {
    let job = BrowseJob {
        url: url.to_owned(),
        actions,
        profile: Profile::Desktop,
        credentials: Credentials::default(),
        store: false,
        archive: false,
    };
    browse::script::run_script(&shared().pool, &job)
        .await
        .expect("the script runs")
}

fn output(result: &BrowseResult, step: usize) -> &str {
    result.steps[step].output.as_deref().unwrap_or_default()
}

/// The number the snapshot gave the line containing `needle`.
fn index_of(snapshot: &str, needle: &str) -> u32 {
    let line = snapshot
        .lines()
        .find(|line| line.contains(needle))
        .unwrap_or_else(|| panic!("{needle:?} not in snapshot:\n{snapshot}"));
    line.trim_start_matches('[')
        .split(']')
        .next()
        .and_then(|number| number.parse().ok())
        .unwrap_or_else(|| panic!("no index on {line:?}"))
}

#[test]
fn render_reads_a_page_built_by_javascript_that_plain_http_cannot() {
    run(async {
        let deps = fetch_deps();
        let url = site("/browser/js-built");
        let plain = FetchJob::new(&url);
        let fetched = trawl_workers::fetch::run(&plain, &deps)
            .await
            .map_err(|error| error.to_job_error());
        assert!(
            render::looks_js_built(&fetched),
            "plain http should see an app shell: {fetched:?}"
        );

        let job = FetchJob {
            render: Render::Flag(true),
            ..FetchJob::new(&url)
        };
        let rendered = render::render(&shared().pool, &job, &deps)
            .await
            .expect("renders");
        assert_eq!(rendered.info.extractor, Extractor::Browser);
        assert_eq!(rendered.info.title.as_deref(), Some("Pilots of Valmora"));
        assert!(rendered.text.contains(JS_BUILT_TEXT), "{}", rendered.text);
        assert_eq!(rendered.info.status, 200);
    });
}

#[test]
fn a_script_fills_a_form_selects_checks_submits_and_reads() {
    run(async {
        let result = script(
            &site("/browser/form"),
            actions(
                r##"[
                {"action": "snapshot"},
                {"action": "type", "selector": "#email", "text": "ada@example.com"},
                {"action": "type", "selector": "input[name=password]", "text": "hunter2-secret"},
                {"action": "select", "selector": "#country", "label": "Portugal"},
                {"action": "click", "selector": "input[name=remember]"},
                {"action": "snapshot"},
                {"action": "press", "key": "Escape"},
                {"action": "click", "selector": "button[type=submit]"},
                {"action": "wait", "text": "Welcome", "ms": 5000},
                {"action": "find", "text": "welcome"},
                {"action": "read"}
            ]"##,
            ),
        )
        .await;
        assert!(result.completed, "{:#?}", result.steps);
        let first = output(&result, 0);
        assert!(first.contains("textbox \"Email\""), "{first}");
        assert!(first.contains("select \"Country\""), "{first}");
        assert!(first.contains("Sign in"), "{first}");
        assert!(!first.contains("Hidden"), "hidden button listed: {first}");
        assert!(!first.contains("csrf"), "hidden input listed: {first}");
        let second = output(&result, 5);
        assert!(second.contains("ada@example.com"), "{second}");
        assert!(second.contains("Portugal"), "{second}");
        assert!(
            !second.contains("hunter2"),
            "a password value was shown: {second}"
        );
        assert!(output(&result, 9).contains("Welcome, ada@example.com"));
        let read = output(&result, 10);
        assert!(
            read.contains("Welcome, ada@example.com from pt (remembered)"),
            "{read}"
        );
        assert_eq!(result.title.as_deref(), Some("Signed in"));
        for step in &result.steps {
            assert!(
                !serde_json::to_string(step)
                    .expect("json")
                    .contains("hunter2"),
                "{step:?}"
            );
        }
    });
}

#[test]
fn snapshot_indexes_drive_clicks_and_history_moves_back_and_forward() {
    run(async {
        let pool = &shared().pool;
        let mut lease = pool
            .lease(Profile::Desktop, &Credentials::default(), false)
            .await
            .expect("lease");
        let goto = Action::Goto {
            url: site("/browser/form"),
            wait_until: None,
        };
        assert!(
            browse::actions::run(&mut lease, &goto)
                .await
                .expect("runs")
                .ok
        );
        let snapshot = browse::actions::run(&mut lease, &Action::Snapshot)
            .await
            .expect("runs");
        let text = snapshot
            .output
            .clone()
            .unwrap_or_else(|| panic!("{snapshot:?}"));
        let link = index_of(&text, "Second page");
        assert_eq!(
            text.matches("Second page").count(),
            1,
            "the link and its span are one element: {text}"
        );
        let click = Action::Click {
            index: Some(link),
            selector: None,
            role: None,
            name: None,
            x: None,
            y: None,
        };
        let clicked = browse::actions::run(&mut lease, &click)
            .await
            .expect("runs");
        assert!(clicked.ok, "{clicked:?}");
        assert!(clicked.url.ends_with("/browser/second"), "{clicked:?}");
        // The old indexes belong to the old document.
        let stale = browse::actions::run(&mut lease, &click)
            .await
            .expect("runs");
        assert!(!stale.ok);
        assert!(
            stale
                .error
                .as_ref()
                .expect("error")
                .message
                .contains("snapshot"),
            "{stale:?}"
        );
        let back = browse::actions::run(&mut lease, &Action::Back)
            .await
            .expect("runs");
        assert!(back.url.ends_with("/browser/form"), "{back:?}");
        let forward = browse::actions::run(&mut lease, &Action::Forward)
            .await
            .expect("runs");
        assert!(forward.url.ends_with("/browser/second"), "{forward:?}");
        let past_end = browse::actions::run(&mut lease, &Action::Forward)
            .await
            .expect("runs");
        assert!(!past_end.ok);
        lease.close().await;
    });
}

#[test]
fn shadow_dom_buttons_are_listed_and_clicked() {
    run(async {
        let result = script(
            &site("/browser/shadow"),
            actions(
                r#"[{"action": "snapshot"}, {"action": "click", "index": 1},
                    {"action": "wait", "text": "shadow clicked", "ms": 3000}]"#,
            ),
        )
        .await;
        assert!(result.completed, "{:#?}", result.steps);
        assert!(output(&result, 0).contains("Shadow button"));
    });
}

#[test]
fn scrolling_loads_more_items_and_reports_what_is_left() {
    run(async {
        let result = script(
            &site("/browser/scroll"),
            actions(
                r#"[{"action": "wait", "text": "Item 20", "ms": 5000},
                    {"action": "scroll", "direction": "bottom"},
                    {"action": "wait", "text": "Item 40", "ms": 5000},
                    {"action": "scroll", "direction": "bottom"},
                    {"action": "wait", "text": "Item 60", "ms": 5000},
                    {"action": "scroll", "direction": "top"},
                    {"action": "find", "text": "Item 55"}]"#,
            ),
        )
        .await;
        assert!(result.completed, "{:#?}", result.steps);
        let hints = output(&result, 1);
        assert!(hints.contains("px above"), "{hints}");
        assert!(output(&result, 5).contains("at the top"));
        assert!(output(&result, 6).contains("1 matches"));
    });
}

#[test]
fn screenshots_are_png_and_overlays_leave_no_trace() {
    run(async {
        let result = script(
            &site("/browser/form"),
            actions(
                r##"[{"action": "screenshot", "grid": true}, {"action": "highlight"},
                    {"action": "read_html"}, {"action": "a11y"},
                    {"action": "get_attribute", "selector": "#email", "name": "type"}]"##,
            ),
        )
        .await;
        assert!(result.completed, "{:#?}", result.steps);
        for step in [0, 1] {
            let image = result.steps[step].image.as_ref().expect("an image");
            let bytes = image.bytes().expect("base64");
            assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
        }
        assert!(output(&result, 1).contains("Email"));
        assert!(!output(&result, 2).contains("__trawl_overlay"));
        assert!(output(&result, 3).contains("Sign in"));
        assert_eq!(output(&result, 4), "email");
    });
}

#[test]
fn popups_become_tabs_and_the_last_tab_cannot_be_closed() {
    run(async {
        let result = script(
            &site("/browser/popup"),
            actions(
                r#"[{"action": "click", "selector": "button"},
                    {"action": "wait", "ms": 500},
                    {"action": "tab_switch", "tab": 1},
                    {"action": "wait", "text": "You followed", "ms": 5000},
                    {"action": "tab_close"},
                    {"action": "tab_new", "url": "http://site.test:PORT/browser/shadow"},
                    {"action": "tab_close", "tab": 1},
                    {"action": "tab_close"}]"#
                    .replace("PORT", &shared().fixture.addr().port().to_string())
                    .as_str(),
            ),
        )
        .await;
        assert!(!result.completed);
        let steps = &result.steps;
        assert_eq!(steps.len(), 8, "{steps:#?}");
        assert!(
            steps[2].ok && steps[2].url.ends_with("/browser/second"),
            "{steps:#?}"
        );
        assert!(steps[4].ok && steps[4].url.ends_with("/browser/popup"));
        assert!(steps[5].ok && steps[5].url.ends_with("/browser/shadow"));
        assert!(steps[6].ok);
        let refused = steps[7].error.as_ref().expect("refused");
        assert!(refused.message.contains("last tab"), "{refused:?}");
    });
}

#[test]
fn navigations_to_blocked_or_broken_destinations_fail_with_their_codes() {
    run(async {
        let pool = &shared().pool;
        let fixture = &shared().fixture;
        let loopback = fixture.url("/article/1");
        let redirect = site(&format!(
            "/redirect?to={}",
            url_escape(&format!(
                "http://127.0.0.1:{}/article/2",
                fixture.addr().port()
            ))
        ));
        let cases = [
            (loopback, ErrorCode::BlockedDestination),
            ("http://10.0.0.5/".to_owned(), ErrorCode::BlockedDestination),
            (
                "http://169.254.169.254/latest/".to_owned(),
                ErrorCode::BlockedDestination,
            ),
            (redirect, ErrorCode::BlockedDestination),
            ("http://nowhere.test/".to_owned(), ErrorCode::DnsError),
            (
                "file:///etc/passwd".to_owned(),
                ErrorCode::UnsupportedScheme,
            ),
        ];
        for (url, code) in cases {
            let job = BrowseJob {
                url: url.clone(),
                actions: Vec::new(),
                profile: Profile::Desktop,
                credentials: Credentials::default(),
                store: false,
                archive: false,
            };
            let error = browse::script::run_script(pool, &job)
                .await
                .expect_err("refused");
            assert_eq!(error.code, code, "{url}: {error:?}");
        }
        assert_eq!(
            fixture.hits("/article/1"),
            0,
            "the browser reached loopback"
        );
        assert_eq!(fixture.hits("/article/2"), 0, "a redirect reached loopback");
    });
}

#[test]
fn subresources_workers_and_script_navigations_to_private_addresses_are_refused() {
    run(async {
        let pool = &shared().pool;
        let fixture = &shared().fixture;
        let mark = pool.egress().last_seq();
        let result = script(
            &site("/browser/private-sub"),
            actions(r#"[{"action": "wait", "ms": 1000}]"#),
        )
        .await;
        assert!(result.completed, "{:#?}", result.steps);
        let result = script(
            &site("/browser/private-nav"),
            actions(r#"[{"action": "wait", "ms": 1500}]"#),
        )
        .await;
        assert!(
            !result.final_url.contains("10.0.0.5") || result.title.as_deref() != Some("admin"),
            "{result:?}"
        );
        // The page's requests run on after its script ended; give a loaded machine time.
        let expected = ["127.0.0.1", "169.254.169.254", "10.0.0.7", "10.0.0.5"];
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        let blocked = loop {
            let blocked: Vec<String> = pool
                .egress()
                .blocked_after(mark)
                .into_iter()
                .map(|block| block.host)
                .collect();
            let all = expected
                .iter()
                .all(|host| blocked.iter().any(|blocked| blocked == host));
            if all || std::time::Instant::now() > deadline {
                break blocked;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        for host in expected {
            assert!(
                blocked.iter().any(|blocked| blocked == host),
                "{host} not refused: {blocked:?}"
            );
        }
        assert_eq!(
            fixture.hits("/image.png"),
            0,
            "the browser reached loopback"
        );
        assert_eq!(fixture.hits("/data.json"), 0, "a fetch reached loopback");
    });
}

#[test]
fn credentials_send_cookies_and_headers_and_seed_local_storage() {
    run(async {
        let fixture = &shared().fixture;
        let port = fixture.addr().port();
        let origin = format!("http://site.test:{port}");
        let credentials = Credentials {
            cookies: vec![CookieSpec {
                name: "session".to_owned(),
                value: "cookie-secret".to_owned(),
                url: Some(format!("{origin}/")),
                domain: None,
                path: None,
                secure: false,
                http_only: true,
            }],
            headers: vec![OriginHeaders {
                origin: origin.clone(),
                headers: [("x-agent-token".to_owned(), "header-secret".to_owned())].into(),
            }],
            local_storage: [(
                origin.clone(),
                [("token".to_owned(), "storage-secret".to_owned())].into(),
            )]
            .into(),
        };
        let job = BrowseJob {
            url: format!("{origin}/browser/second?credentials"),
            actions: actions(&format!(
                r#"[{{"action": "read"}},
                    {{"action": "goto", "url": "{origin}/browser/third-party?credentials"}},
                    {{"action": "goto", "url": "http://third.test:{port}/browser/second?third-party-page"}}]"#
            )),
            profile: Profile::Mobile,
            credentials,
            store: false,
            archive: false,
        };
        let stored = Job::Browse(job.clone()).redacted_json().to_string();
        assert!(!stored.contains("secret"), "{stored}");
        let result = browse::script::run_script(&shared().pool, &job)
            .await
            .expect("runs");
        assert!(result.completed, "{:#?}", result.steps);
        assert!(
            output(&result, 0).contains("token=storage-secret"),
            "{result:?}"
        );
        let requests = fixture.requests();
        let request = requests
            .iter()
            .find(|request| request.path_and_query == "/browser/second?credentials")
            .expect("the page was requested");
        assert_eq!(request.header("x-agent-token"), Some("header-secret"));
        assert!(
            request
                .header("cookie")
                .is_some_and(|cookie| cookie.contains("session=cookie-secret")),
            "{request:?}"
        );
        assert!(
            request
                .header("user-agent")
                .is_some_and(|agent| agent.contains("iPad")),
            "the mobile profile's agent: {request:?}"
        );
        let embedding = requests
            .iter()
            .find(|request| request.path_and_query == "/browser/third-party?credentials")
            .expect("the embedding page was requested");
        assert_eq!(embedding.header("x-agent-token"), Some("header-secret"));
        // The third-party origin's script, image and page never see the header.
        let third: Vec<_> = requests
            .iter()
            .filter(|request| request.path_and_query.contains("third-party-"))
            .collect();
        assert_eq!(third.len(), 3, "script, image and page: {third:#?}");
        for request in third {
            assert!(
                request
                    .header("host")
                    .is_some_and(|host| host.starts_with("third.test")),
                "{request:?}"
            );
            assert_eq!(request.header("x-agent-token"), None, "{request:?}");
        }
    });
}

#[test]
fn a_crashed_browser_is_replaced_busy_is_refused_and_old_browsers_are_recycled() {
    run(async {
        let config = browse::Config {
            max_contexts: 1,
            slot_wait_secs: 1,
            recycle_after: 2,
            ..browse::Config::default()
        };
        let pool = new_pool(config, &shared().dns).await;
        let credentials = Credentials::default();
        let lease = pool
            .lease(Profile::Desktop, &credentials, false)
            .await
            .expect("lease");
        let busy = pool
            .lease(Profile::Desktop, &credentials, false)
            .await
            .expect_err("busy");
        assert_eq!(busy.code(), ErrorCode::BrowserBusy);
        let waited = pool
            .lease(Profile::Desktop, &credentials, true)
            .await
            .expect_err("busy after waiting");
        assert_eq!(waited.code(), ErrorCode::BrowserBusy);
        lease.close().await;

        // Kill the browser: the next lease gets a new one.
        let pid = pool.pid().await.expect("a browser runs");
        let killed = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill runs");
        assert!(killed.success());
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut lease = pool
            .lease(Profile::Desktop, &credentials, false)
            .await
            .expect("a fresh browser");
        assert_ne!(pool.pid().await, Some(pid));
        let goto = Action::Goto {
            url: site("/browser/form"),
            wait_until: None,
        };
        assert!(
            browse::actions::run(&mut lease, &goto)
                .await
                .expect("runs")
                .ok
        );
        lease.close().await;
        assert!(pool.stats().crashes >= 1, "{:?}", pool.stats());

        // recycle_after = 2: the second context on this browser retires it.
        let before = pool.stats().recycles;
        let lease = pool
            .lease(Profile::Desktop, &credentials, false)
            .await
            .expect("lease");
        lease.close().await;
        assert!(pool.stats().recycles > before, "{:?}", pool.stats());
        assert!(pool.memory().await == 0 || pool.stats().launches >= 2);
        pool.shutdown().await;
    });
}

#[test]
fn a_crashed_tab_fails_its_action_at_once_and_a_navigation_brings_it_back() {
    run(async {
        let pool = &shared().pool;
        let mut lease = pool
            .lease(Profile::Desktop, &Credentials::default(), false)
            .await
            .expect("lease");
        let pid = pool.pid().await;
        let goto = Action::Goto {
            url: site("/browser/form"),
            wait_until: None,
        };
        let outcome = browse::actions::run(&mut lease, &goto).await.expect("runs");
        assert!(outcome.ok, "{outcome:?}");
        lease.crash_tab().await;
        let started = std::time::Instant::now();
        let outcome = browse::actions::run(&mut lease, &Action::Snapshot)
            .await
            .expect("an action error, not a browser failure");
        assert!(!outcome.ok);
        assert_eq!(
            outcome.error.as_ref().map(|error| error.code.as_str()),
            Some("page_crashed"),
            "{outcome:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "reported at once, not after the command timeout: {:?}",
            started.elapsed()
        );
        // A navigation gives the tab a new renderer; the browser itself was not replaced.
        let outcome = browse::actions::run(&mut lease, &goto).await.expect("runs");
        assert!(outcome.ok, "{outcome:?}");
        let outcome = browse::actions::run(&mut lease, &Action::Snapshot)
            .await
            .expect("runs");
        assert!(outcome.ok, "{outcome:?}");
        assert!(
            outcome
                .output
                .as_deref()
                .unwrap_or_default()
                .contains("textbox"),
            "{outcome:?}"
        );
        assert_eq!(pool.pid().await, pid);
        lease.close().await;
    });
}

#[test]
fn a_browser_above_its_memory_bound_is_recycled_after_its_lease() {
    run(async {
        let config = browse::Config {
            max_memory_mb: 128,
            ..browse::Config::default()
        };
        let pool = new_pool(config, &shared().dns).await;
        let credentials = Credentials::default();
        let mut lease = pool
            .lease(Profile::Desktop, &credentials, false)
            .await
            .expect("lease");
        let goto = Action::Goto {
            url: site("/browser/form"),
            wait_until: None,
        };
        assert!(
            browse::actions::run(&mut lease, &goto)
                .await
                .expect("runs")
                .ok
        );
        let memory = pool.memory().await;
        assert!(
            memory > 128 << 20,
            "a browser with a page uses more than the 128 MB bound: {memory}"
        );
        let pid = pool.pid().await;
        assert_eq!(pool.stats().recycles, 0);
        lease.close().await;
        assert_eq!(pool.stats().recycles, 1, "{:?}", pool.stats());
        let lease = pool
            .lease(Profile::Desktop, &credentials, false)
            .await
            .expect("a new browser");
        assert_ne!(pool.pid().await, pid);
        lease.close().await;
        pool.shutdown().await;
    });
}

fn url_escape(text: &str) -> String {
    text.bytes()
        .map(|byte| match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (byte as char).to_string()
            }
            _ => format!("%{byte:02X}"),
        })
        .collect()
}

#[test]
fn queued_render_and_browse_jobs_run_through_the_runner() {
    run(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let context = deps_over(&store, &temp_queue(dir.path()).await, true);
        let render_job = Job::Fetch(FetchJob {
            render: Render::Flag(true),
            ..FetchJob::new(site("/browser/js-built"))
        });
        // The page a script reaches (here: after filling and sending a form) is stored and
        // queued for the archive.
        let browse_job = Job::Browse(BrowseJob {
            url: site("/browser/form"),
            actions: actions(
                r##"[{"action": "snapshot"},
                    {"action": "type", "selector": "#email", "text": "ada@example.com"},
                    {"action": "select", "selector": "#country", "label": "Portugal"},
                    {"action": "archive"},
                    {"action": "click", "selector": "button[type=submit]"}]"##,
            ),
            profile: Profile::Desktop,
            credentials: Credentials::default(),
            store: true,
            archive: true,
        });
        for job in [render_job, browse_job] {
            let record = run_job(&context, &job).await;
            assert_eq!(record.status, trawl::store::Status::Succeeded, "{record:?}");
            let id = record.id.clone();
            let result = record.result.expect("a result");
            match job {
                Job::Fetch(_) => {
                    assert_eq!(result["extractor"], "browser");
                    assert!(
                        result["content"]["text"]
                            .as_str()
                            .is_some_and(|text| text.contains(JS_BUILT_TEXT)),
                        "{result}"
                    );
                }
                Job::Browse(_) => {
                    assert_eq!(result["completed"], true, "{result}");
                    assert!(
                        result["steps"][0]["output"]
                            .as_str()
                            .is_some_and(|text| text.contains("Sign in")),
                        "{result}"
                    );
                    assert_eq!(result["page_id"], id.as_str(), "{result}");
                    let page = context
                        .store
                        .page(&id)
                        .await
                        .expect("store answers")
                        .expect("the final page is stored");
                    assert_eq!(page.info.extractor, Extractor::Browser);
                    assert_eq!(page.info.title.as_deref(), Some("Signed in"));
                    let text = context.store.page_text(&page).await.expect("its text");
                    assert!(
                        text.contains("Welcome, ada@example.com from pt"),
                        "the page as the script left it: {text}"
                    );
                    // The archive action's page: the form before it was sent.
                    let taken = result["steps"][3]["page_id"].as_str().expect("archived");
                    let taken = context
                        .store
                        .page(taken)
                        .await
                        .expect("store answers")
                        .expect("stored");
                    let taken = context.store.page_text(&taken).await.expect("its text");
                    assert!(
                        taken.contains("Email") && !taken.contains("Welcome"),
                        "{taken}"
                    );
                    assert!(
                        context.store.archive_pending().await.expect("counted") >= 2,
                        "both queued for the archive"
                    );
                }
                Job::Search(_) => panic!("this test submits no search job"),
            }
        }
    });
}

/// Runs `job` through the runner on `context` and returns its result, which must succeed.
async fn run_to_success(context: &Deps, job: &Job) -> serde_json::Value {
    let record = run_job(context, job).await;
    assert_eq!(record.status, trawl::store::Status::Succeeded, "{record:?}");
    record.result.expect("a result")
}

/// Runs `job` through the runner on `context` and returns its ended record.
async fn run_job(context: &Deps, job: &Job) -> trawl::store::JobRecord {
    let id = ulid::Ulid::generate().to_string();
    context
        .store
        .create_jobs(&[trawl::store::NewJob::new(&id, job, 3)])
        .await
        .expect("job recorded");
    trawl::runner::process(
        context,
        &trawl::queue::Envelope::new(id.clone(), job.clone()),
    )
    .await
    .expect("processed");
    context
        .store
        .job(&id)
        .await
        .expect("store answers")
        .expect("job exists")
}

#[test]
fn signed_in_renders_and_the_archive_action_reach_the_archive_index() {
    run(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let context = deps_over(&store, &temp_queue(dir.path()).await, true);
        let origin = format!("http://site.test:{}", shared().fixture.addr().port());
        let members = site("/browser/members");
        let credentials = Credentials {
            cookies: vec![CookieSpec {
                name: "member".to_owned(),
                value: "gold-secret".to_owned(),
                url: Some(format!("{origin}/")),
                domain: None,
                path: None,
                secure: false,
                http_only: false,
            }],
            headers: Vec::new(),
            local_storage: [(
                origin.clone(),
                [("token".to_owned(), "storage-secret".to_owned())].into(),
            )]
            .into(),
        };
        let signed_in = Job::Fetch(FetchJob {
            render: Render::Flag(true),
            archive: true,
            credentials,
            ..FetchJob::new(members.clone())
        });
        let stored = signed_in.redacted_json().to_string();
        assert!(!stored.contains("secret"), "{stored}");
        let result = run_to_success(&context, &signed_in).await;
        assert_eq!(result["extractor"], "browser", "{result}");
        let text = result["content"]["text"].as_str().unwrap_or_default();
        assert!(text.contains(MEMBERS_TEXT), "signed in: {text}");
        let request = shared()
            .fixture
            .requests()
            .into_iter()
            .rfind(|request| request.path_and_query == "/browser/members")
            .expect("the page was requested");
        assert!(
            request
                .header("cookie")
                .is_some_and(|cookie| cookie.contains("member=gold-secret")),
            "{request:?}"
        );
        // The same URL without the credentials is another page: not served from the
        // signed-in one's cache entry.
        let signed_out = Job::Fetch(FetchJob {
            render: Render::Flag(true),
            ..FetchJob::new(members.clone())
        });
        // (A short sign-in page may also fail as a login wall: either way, not the notes.)
        let record = run_job(&context, &signed_out).await;
        if let Some(result) = &record.result {
            assert_eq!(result["cached"], false, "{result}");
            let text = result["content"]["text"].as_str().unwrap_or_default();
            assert!(!text.contains(MEMBERS_TEXT), "signed out: {text}");
        }
        assert!(
            record.error.is_some() || record.result.is_some(),
            "{record:?}"
        );

        // A browse job that stores nothing itself: only its `archive` action's page goes on.
        let browse = Job::Browse(BrowseJob {
            url: site("/browser/form"),
            actions: actions(r#"[{"action": "archive"}]"#),
            profile: Profile::Desktop,
            credentials: Credentials::default(),
            store: false,
            archive: false,
        });
        let result = run_to_success(&context, &browse).await;
        assert!(result["steps"][0]["page_id"].is_string(), "{result}");
        assert_eq!(store.archive_pending().await.expect("counted"), 2);

        let archiver = trawl::archive::Archiver::open(
            store.clone(),
            dir.path(),
            trawl::archive::Config {
                commit_ms: 3_600_000,
                writer_heap_mb: 20,
                ..trawl::archive::Config::default()
            },
            context.fetch.client.request_headers(),
        )
        .expect("archive opens");
        let index = archiver.index().clone();
        let stats = archiver
            .run(trawl::archive::Stop::Drain, crate::stopped())
            .await
            .expect("drains");
        assert_eq!((stats.pages, stats.failed), (2, 0), "{stats:?}");
        index.reload().expect("reloads");
        // The pages each search finds (a page may give several chunks).
        let search = |text: &str| {
            index
                .search(&trawl_workers::archive::index::SearchQuery::new(text))
                .expect("searches")
                .into_iter()
                .map(|hit| hit.url)
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect::<Vec<_>>()
        };
        assert_eq!(search("lighthouse keepers Orsay schooner"), vec![members]);
        assert_eq!(
            search("\"Sign in\" email password country"),
            vec![site("/browser/form")]
        );
    });
}

#[test]
fn trawl_screenshot_writes_a_png() {
    let fixture = &shared().fixture;
    let dir = tempfile::tempdir().expect("tempdir");
    let png = dir.path().join("shot.png");
    let output = crate::trawl_command(dir.path())
        .args(["screenshot", "--grid", "--allow-private-network", "-o"])
        .arg(&png)
        .arg(fixture.url("/browser/form"))
        .output()
        .expect("trawl runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bytes = std::fs::read(&png).expect("the png was written");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"));

    // The default policy refuses loopback, in the browser as in the fetch client.
    let refused = crate::trawl_command(dir.path())
        .args(["browse", &fixture.url("/browser/form")])
        .output()
        .expect("trawl runs");
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("blocked_destination"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

async fn temp_store(dir: &std::path::Path) -> trawl::store::Store {
    trawl::store::Store::open(&dir.join("trawl.sqlite"))
        .await
        .expect("store opens")
}

async fn temp_queue(dir: &std::path::Path) -> trawl::queue::Queue {
    trawl::queue::Queue::open(
        &dir.join("queue.sqlite"),
        "browser-test",
        trawl::runner::Config::default().queue_settings(),
    )
    .await
    .expect("queue opens")
}

/// The shared parts over `store` and `queue`, with this module's client (its resolver names
/// the fixture `site.test`) and, when `browser`, the shared browser. Built from parts rather
/// than with `App::build`, so every test uses the one browser this binary starts.
fn deps_over(store: &trawl::store::Store, queue: &trawl::queue::Queue, browser: bool) -> Arc<Deps> {
    Arc::new(Deps::new(Parts {
        store: store.clone(),
        queue: queue.clone(),
        fetch: fetch_deps(),
        config: trawl::runner::Config::default(),
        webhooks: None,
        crawls: trawl::crawl::Crawls::new(&Default::default()),
        browser: browser.then(|| shared().pool.clone()),
    }))
}

#[test]
fn a_session_keeps_previews_after_page_changes_only_and_a_replay_log_of_every_step() {
    run(async {
        use trawl::sessions::{Config, Sessions};
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let config = Config {
            previews: 3,
            ..Config::default()
        };
        let sessions = Sessions::new(shared().pool.clone(), store.clone(), config);
        let info = sessions
            .open("owner-a", None, Profile::Desktop, &Credentials::default())
            .await
            .expect("opens");
        let steps = sessions
            .act(
                "owner-a",
                &info.id,
                &actions(&format!(
                    r##"[{{"action": "goto", "url": "{}"}}, {{"action": "snapshot"}},
                        {{"action": "type", "selector": "input[name=password]", "text": "s3cret-pw"}},
                        {{"action": "click", "selector": "a"}}, {{"action": "back"}},
                        {{"action": "click", "selector": "#missing"}},
                        {{"action": "reload"}}]"##,
                    site("/browser/form")
                )),
            )
            .await
            .expect("acts");
        // The failed click ends the batch: reload never ran.
        assert_eq!(steps.len(), 6, "{steps:#?}");
        assert!(!steps[5].outcome.ok);
        let previews: Vec<Option<u64>> = steps.iter().map(|step| step.preview).collect();
        assert_eq!(
            previews,
            vec![Some(1), None, Some(2), Some(3), Some(4), None],
            "previews after page-changing actions that succeeded, never after an error"
        );
        // The ring keeps the last 3.
        assert!(sessions.preview("owner-a", &info.id, 1).is_err());
        let jpeg = sessions.preview("owner-a", &info.id, 4).expect("kept");
        assert!(jpeg.starts_with(&[0xFF, 0xD8]), "a JPEG");
        assert!(
            sessions.preview("owner-b", &info.id, 4).is_err(),
            "another owner"
        );

        sessions.close("owner-a", &info.id).await.expect("closes");
        assert!(
            sessions
                .act("owner-a", &info.id, &[Action::Snapshot])
                .await
                .is_err()
        );
        let replay = trawl::sessions::replay(&store, "owner-a", &info.id)
            .await
            .expect("replay");
        assert_eq!(replay.steps.len(), 6);
        assert_eq!(replay.session.close_reason.as_deref(), Some("closed"));
        assert!(replay.steps.iter().all(|step| step.image.is_some()));
        assert_eq!(replay.steps[0].action["action"], "goto");
        // Text typed into a password field is masked in the log (its length kept), and no
        // outcome (snapshot, read) shows it.
        assert_eq!(replay.steps[2].action["text"], "\u{2022}".repeat(9));
        assert_eq!(replay.steps[2].action["secret"], true);
        for step in &replay.steps {
            assert!(
                !step.outcome.to_string().contains("s3cret-pw")
                    && !step.action.to_string().contains("s3cret-pw"),
                "{step:?}"
            );
        }
        // Nor does the store hold it anywhere (database, journal).
        for entry in std::fs::read_dir(dir.path()).expect("dir").flatten() {
            let bytes = std::fs::read(entry.path()).unwrap_or_default();
            assert!(
                !bytes.windows(9).any(|window| window == b"s3cret-pw"),
                "{:?} holds the password",
                entry.path()
            );
        }
        assert!(
            trawl::sessions::replay(&store, "owner-b", &info.id)
                .await
                .is_err()
        );
    });
}

#[test]
fn the_archive_action_stores_what_a_session_reached_for_the_archive() {
    run(async {
        use trawl::sessions::{Config, Sessions};
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let script = actions(&format!(
            r##"[{{"action": "goto", "url": "{}"}},
                {{"action": "type", "selector": "#email", "text": "ada@example.com"}},
                {{"action": "click", "selector": "button[type=submit]"}},
                {{"action": "archive"}}]"##,
            site("/browser/form")
        ));
        // A process that stores no pages says so.
        let bare = Sessions::new(shared().pool.clone(), store.clone(), Config::default());
        let info = bare
            .open("owner-a", None, Profile::Desktop, &Credentials::default())
            .await
            .expect("opens");
        let steps = bare.act("owner-a", &info.id, &script).await.expect("acts");
        let archive = &steps[3].outcome;
        assert!(!archive.ok, "{archive:?}");
        assert!(
            archive
                .error
                .as_ref()
                .is_some_and(|error| error.message.contains("stores no pages")),
            "{archive:?}"
        );
        bare.close("owner-a", &info.id).await.expect("closes");

        let sessions = Sessions::new(shared().pool.clone(), store.clone(), Config::default());
        sessions.store_pages_with(fetch_deps());
        let info = sessions
            .open("owner-a", None, Profile::Desktop, &Credentials::default())
            .await
            .expect("opens");
        let steps = sessions
            .act("owner-a", &info.id, &script)
            .await
            .expect("acts");
        let archive = &steps[3].outcome;
        assert!(archive.ok, "{archive:?}");
        let page_id = archive.page_id.clone().expect("the stored page's id");
        let page = store
            .page(&page_id)
            .await
            .expect("store answers")
            .expect("stored");
        assert_eq!(page.tenant, "owner-a", "the session owner's page");
        assert_eq!(page.info.extractor, Extractor::Browser);
        let text = store.page_text(&page).await.expect("its text");
        assert!(
            text.contains("Welcome, ada@example.com"),
            "the page as the session left it: {text}"
        );
        assert!(store.archive_pending().await.expect("counted") >= 1);
        // Its job says where it was taken.
        let job = store
            .job(&page_id)
            .await
            .expect("store answers")
            .expect("the page's job");
        assert_eq!(job.status, trawl::store::Status::Succeeded);
        assert_eq!(
            job.result.expect("a result")["taken_from"]["session"],
            info.id.as_str()
        );
        sessions.close("owner-a", &info.id).await.expect("closes");
    });
}

#[test]
fn sessions_are_bounded_and_idle_ones_expire() {
    run(async {
        use trawl::sessions::{Config, Error, Sessions};
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let config = Config {
            max_sessions: 1,
            idle_timeout_secs: 1,
            ..Config::default()
        };
        let sessions = Sessions::new(shared().pool.clone(), store.clone(), config);
        let first = sessions
            .open("owner", None, Profile::Mobile, &Credentials::default())
            .await
            .expect("opens");
        let second = sessions
            .open("owner", None, Profile::Desktop, &Credentials::default())
            .await;
        assert!(matches!(second, Err(Error::Busy(_))), "{second:?}");
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        assert_eq!(sessions.expire_idle().await, 1);
        assert_eq!(sessions.count(), 0);
        let record = store
            .session(&first.id)
            .await
            .expect("store")
            .expect("kept");
        assert_eq!(record.close_reason.as_deref(), Some("expired"));
        assert_eq!(record.profile, "mobile");
    });
}

/// Two bearer tokens an API test serves, for ownership checks.
const TOKEN_A: &str = "token-a-0123456789abcdef";
const TOKEN_B: &str = "token-b-0123456789abcdef";
/// Another token of [`TOKEN_A`]'s tenant (the first bare token's: `default`).
const TOKEN_A2: &str = "token-a2-0123456789abcdef";
/// The admin token: every tenant's sessions.
const ADMIN: &str = "token-admin-0123456789abcdef";

/// The shared parts and the queue on a temporary store in `dir`, as `trawl serve` has them.
async fn api_parts(
    dir: &std::path::Path,
    store: &trawl::store::Store,
) -> (Arc<Deps>, trawl::queue::Queue) {
    let queue = temp_queue(dir).await;
    (deps_over(store, &queue, false), queue)
}

/// The API over `context` and `queue`, accepting [`TOKEN_A`] and [`TOKEN_B`], with sessions
/// in this process or routed to session hosts.
fn api_router(
    context: Arc<Deps>,
    queue: trawl::queue::Queue,
    sessions: Option<Arc<trawl::sessions::Sessions>>,
    remote_sessions: Option<Arc<trawl::session_hosts::Remote>>,
) -> axum::Router {
    trawl::api::router(trawl::api::AppState {
        context,
        queue,
        config: Arc::new(trawl::api::Config {
            tokens: vec![
                trawl::config::Secret::new(TOKEN_A).into(),
                trawl::config::Secret::new(TOKEN_B).into(),
                trawl::api::TokenEntry::Named {
                    token: trawl::config::Secret::new(TOKEN_A2),
                    tenant: trawl::tenant::DEFAULT.to_owned(),
                },
            ],
            admin_token: Some(trawl::config::Secret::new(ADMIN)),
            ..trawl::api::Config::default()
        }),
        archive: None,
        sessions,
        remote_sessions,
    })
}

/// Sends one JSON request through `router` as `token`; the future answers the status and body.
fn api_call(
    router: &axum::Router,
    method: &str,
    uri: String,
    token: &str,
    body: Option<String>,
) -> impl Future<Output = (u16, Vec<u8>)> + use<> {
    use tower::ServiceExt as _;
    let router = router.clone();
    let request = axum::http::Request::builder()
        .method(method)
        .uri(uri)
        .header("authorization", format!("Bearer {token}"))
        .header("content-type", "application/json")
        .extension(axum::extract::ConnectInfo(std::net::SocketAddr::from((
            [127, 0, 0, 1],
            9,
        ))))
        .body(axum::body::Body::from(body.unwrap_or_default()))
        .expect("request");
    async move {
        let response = router.oneshot(request).await.expect("responds");
        let status = response.status().as_u16();
        let bytes = axum::body::to_bytes(response.into_body(), 64 << 20)
            .await
            .expect("body");
        (status, bytes.to_vec())
    }
}

fn json(bytes: &[u8]) -> serde_json::Value {
    serde_json::from_slice(bytes).expect("json body")
}

/// Sends `goto` to the fixture page at `path` in session `id` through the API; returns the
/// action's JSON and the number of the preview it left.
async fn api_goto(router: &axum::Router, token: &str, id: &str, path: &str) -> (String, u64) {
    let goto = format!(r#"{{"action": "goto", "url": "{}"}}"#, site(path));
    let (status, body) = api_call(
        router,
        "POST",
        format!("/v1/sessions/{id}/actions"),
        token,
        Some(goto.clone()),
    )
    .await;
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let steps = json(&body);
    assert_eq!(steps["steps"][0]["ok"], true, "{steps}");
    let preview = steps["steps"][0]["preview"].as_u64().expect("a preview");
    (goto, preview)
}

#[test]
fn the_session_api_belongs_to_the_token_that_opened_it() {
    run(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let (context, queue) = api_parts(dir.path(), &store).await;
        let sessions = trawl::sessions::Sessions::new(
            shared().pool.clone(),
            store,
            trawl::sessions::Config::default(),
        );
        let router = api_router(context, queue, Some(sessions), None);
        let call = |method: &str, uri: String, token: &str, body: Option<String>| {
            api_call(&router, method, uri, token, body)
        };
        let (token_a, token_b) = (TOKEN_A, TOKEN_B);
        let (status, body) = call(
            "POST",
            "/v1/sessions".to_owned(),
            token_a,
            Some(r#"{"profile": "desktop"}"#.to_owned()),
        )
        .await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
        let id = json(&body)["id"].as_str().expect("id").to_owned();
        let (goto, preview) = api_goto(&router, token_a, &id, "/browser/shadow").await;
        let (status, body) = call(
            "POST",
            format!("/v1/sessions/{id}/actions"),
            token_a,
            Some(
                r#"{"actions": [{"action": "snapshot"}, {"action": "click", "index": 1}]}"#
                    .to_owned(),
            ),
        )
        .await;
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
        assert_eq!(json(&body)["steps"].as_array().map(Vec::len), Some(2));
        let (status, jpeg) = call(
            "GET",
            format!("/v1/sessions/{id}/previews/{preview}"),
            token_a,
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert!(jpeg.starts_with(&[0xFF, 0xD8]));
        // Another token sees nothing.
        for (method, uri, body) in [
            (
                "POST",
                format!("/v1/sessions/{id}/actions"),
                Some(goto.clone()),
            ),
            ("GET", format!("/v1/sessions/{id}/previews/{preview}"), None),
            ("GET", format!("/v1/sessions/{id}/replay"), None),
            ("DELETE", format!("/v1/sessions/{id}"), None),
        ] {
            let (status, _) = call(method, uri.clone(), token_b, body).await;
            assert_eq!(status, 404, "{method} {uri}");
        }
        // Another token of the same tenant, and the admin, see it.
        for token in [TOKEN_A2, ADMIN] {
            let (status, _) = call("GET", format!("/v1/sessions/{id}/replay"), token, None).await;
            assert_eq!(status, 200, "{token}");
            let (status, _) = call(
                "GET",
                format!("/v1/sessions/{id}/previews/{preview}"),
                token,
                None,
            )
            .await;
            assert_eq!(status, 200, "{token}");
        }
        let (status, body) = call(
            "POST",
            format!("/v1/sessions/{id}/actions"),
            token_a,
            Some(r#"{"action": "teleport"}"#.to_owned()),
        )
        .await;
        assert_eq!(status, 422, "{}", String::from_utf8_lossy(&body));
        let (status, _) = call("DELETE", format!("/v1/sessions/{id}"), token_a, None).await;
        assert_eq!(status, 204);
        let (status, body) = call("GET", format!("/v1/sessions/{id}/replay"), token_a, None).await;
        assert_eq!(status, 200);
        let replay = json(&body);
        assert_eq!(
            replay["steps"].as_array().map(Vec::len),
            Some(3),
            "{replay}"
        );
        assert_eq!(replay["session"]["close_reason"], "closed");
        let (status, _) = call("DELETE", format!("/v1/sessions/{id}"), token_a, None).await;
        assert_eq!(status, 404);
    });
}

#[test]
fn trawl_run_renders_through_the_browse_lane_and_auto_escalates_only_shells() {
    let fixture = &shared().fixture;
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let run = |render: &str, out: &std::path::Path| {
        crate::trawl_command(&dir.path().join("data"))
            .args([
                "run",
                "--quiet",
                "--allow-private-network",
                "--render",
                render,
            ])
            .arg("--cache-ttl")
            .arg("0")
            .arg("--out")
            .arg(out)
            .arg(fixture.url("/browser/js-built"))
            .arg(fixture.url("/article/7"))
            .output()
            .expect("trawl runs")
    };
    let read = |out: &std::path::Path| -> Vec<serde_json::Value> {
        std::fs::read_to_string(out.join("pages.jsonl"))
            .expect("pages.jsonl")
            .lines()
            .map(|line| serde_json::from_str(line).expect("json line"))
            .collect()
    };
    let extractor_of = |lines: &[serde_json::Value], path: &str| {
        lines
            .iter()
            .find(|line| line["url"].as_str().is_some_and(|url| url.ends_with(path)))
            .map(|line| line["extractor"].as_str().unwrap_or("(failed)").to_owned())
            .expect("a line")
    };

    let always = run("always", &out);
    assert!(
        always.status.success(),
        "{}",
        String::from_utf8_lossy(&always.stderr)
    );
    let lines = read(&out);
    assert_eq!(extractor_of(&lines, "/browser/js-built"), "browser");
    assert_eq!(extractor_of(&lines, "/article/7"), "browser");
    assert!(
        lines[0]["content"]["text"].as_str().is_some()
            || lines[1]["content"]["text"].as_str().is_some()
    );

    let auto_out = dir.path().join("auto");
    let auto = run("auto", &auto_out);
    assert!(
        auto.status.success(),
        "{}",
        String::from_utf8_lossy(&auto.stderr)
    );
    let lines = read(&auto_out);
    assert_eq!(extractor_of(&lines, "/browser/js-built"), "browser");
    assert_eq!(extractor_of(&lines, "/article/7"), "readability");

    // Plain HTTP only: the app shell is an empty page.
    let never_out = dir.path().join("never");
    let never = run("never", &never_out);
    assert!(never.status.success());
    let lines = read(&never_out);
    assert_eq!(extractor_of(&lines, "/browser/js-built"), "(failed)");
    let shell = lines
        .iter()
        .find(|line| {
            line["url"]
                .as_str()
                .is_some_and(|url| url.ends_with("/browser/js-built"))
        })
        .expect("a line");
    assert_eq!(shell["error"]["code"], "empty_content", "{shell}");
}

#[test]
fn a_worker_without_a_browser_leaves_render_jobs_queued_for_one_that_has_it() {
    run(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let queue = temp_queue(dir.path()).await;
        let plain = deps_over(&store, &queue, false);
        let id = ulid::Ulid::generate().to_string();
        let job = Job::Fetch(FetchJob {
            render: Render::Flag(true),
            ..FetchJob::new(site("/browser/js-built"))
        });
        store
            .create_jobs(&[trawl::store::NewJob::new(&id, &job, 3)])
            .await
            .expect("recorded");
        queue
            .push(vec![trawl::queue::Envelope::new(id.clone(), job)])
            .await
            .expect("queued");
        let status = || async {
            store
                .job(&id)
                .await
                .expect("store answers")
                .expect("job exists")
                .status
        };
        let pool = |deps: Arc<Deps>, stop: Shutdown| async move {
            trawl::runner::run_pool(deps, stop)
                .await
                .expect("pool runs");
        };
        let stop = Shutdown::new();
        let plain_pool = tokio::spawn(pool(plain, stop.clone()));
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert_eq!(status().await, trawl::store::Status::Queued);
        stop.trigger();
        plain_pool.await.expect("pool ends");

        let with_browser = deps_over(&store, &queue, true);
        let stop = Shutdown::new();
        let waiting = tokio::spawn(pool(with_browser, stop.clone()));
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while status().await != trawl::store::Status::Succeeded
            && std::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        stop.trigger();
        assert_eq!(status().await, trawl::store::Status::Succeeded);
        waiting.await.expect("pool ends");
    });
}

#[test]
fn an_api_without_a_browser_routes_sessions_to_the_worker_that_hosts_them() {
    run(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let (context, queue) = api_parts(dir.path(), &store).await;
        let worker_token = trawl::config::Secret::new("worker-token-0123456789");
        // The session host: what `trawl work --pools fetch=1,browse=N` with sessions.listen
        // runs, on a real loopback port.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let host_url = format!("http://{}", listener.local_addr().expect("addr"));
        let hosted = trawl::sessions::Sessions::hosted(
            shared().pool.clone(),
            store.clone(),
            trawl::sessions::Config::default(),
            host_url.clone(),
        );
        let host_router = trawl::api::session_host_router(
            trawl::api::AppState {
                context: context.clone(),
                queue: queue.clone(),
                config: Arc::new(trawl::api::Config::default()),
                archive: None,
                sessions: Some(hosted.clone()),
                remote_sessions: None,
            },
            worker_token.clone(),
        );
        let host_server = tokio::spawn(async move { axum::serve(listener, host_router).await });
        let registration = trawl::session_hosts::Registration::start(
            store.clone(),
            host_url.clone(),
            hosted.clone(),
        )
        .await
        .expect("registers");
        // The API: no browser, sessions routed through the store's registry.
        let remote =
            trawl::session_hosts::Remote::new(store.clone(), worker_token.clone()).expect("remote");
        let router = api_router(context, queue, None, Some(Arc::new(remote)));
        let call = |method: &str, uri: String, token: &str, body: Option<String>| {
            api_call(&router, method, uri, token, body)
        };
        let (token_a, token_b) = (TOKEN_A, TOKEN_B);
        let open = format!(
            r#"{{"profile": "desktop", "credentials": {{"headers": [{{"origin": "{}", "headers": {{"X-Secret": "s3cret"}}}}]}}}}"#,
            site("").trim_end_matches('/')
        );
        let (status, body) = call(
            "POST",
            "/v1/sessions".to_owned(),
            token_a,
            Some(open.to_owned()),
        )
        .await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
        let id = json(&body)["id"].as_str().expect("id").to_owned();
        assert_eq!(hosted.count(), 1, "the session lives on the host");
        let record = store.session(&id).await.expect("reads").expect("recorded");
        assert_eq!(record.host.as_deref(), Some(host_url.as_str()));

        let (goto, preview) = api_goto(&router, token_a, &id, "/browser/form").await;
        let (status, jpeg) = call(
            "GET",
            format!("/v1/sessions/{id}/previews/{preview}"),
            token_a,
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert!(jpeg.starts_with(&[0xFF, 0xD8]), "a JPEG through the API");
        // Another token sees nothing, on the host either.
        let (status, _) = call(
            "POST",
            format!("/v1/sessions/{id}/actions"),
            token_b,
            Some(goto.clone()),
        )
        .await;
        assert_eq!(status, 404);
        // The host refuses a caller without the worker token, or without an owner.
        let client = reqwest::Client::new();
        let direct = client
            .post(format!("{host_url}/v1/sessions/{id}/actions"))
            .bearer_auth(token_a)
            .header("x-trawl-owner", trawl::sessions::owner_of(Some(token_a)))
            .header("content-type", "application/json")
            .body(goto.clone())
            .send()
            .await
            .expect("answers");
        assert_eq!(direct.status().as_u16(), 401);
        let direct = client
            .post(format!("{host_url}/v1/sessions/{id}/actions"))
            .bearer_auth(worker_token.expose())
            .header("content-type", "application/json")
            .body(goto.clone())
            .send()
            .await
            .expect("answers");
        assert_eq!(direct.status().as_u16(), 422);
        // The replay comes from the store, and shows no credentials.
        let (status, body) = call("GET", format!("/v1/sessions/{id}/replay"), token_a, None).await;
        assert_eq!(status, 200);
        assert!(!String::from_utf8_lossy(&body).contains("s3cret"));
        assert_eq!(json(&body)["steps"].as_array().map(Vec::len), Some(1));
        let (status, _) = call("DELETE", format!("/v1/sessions/{id}"), token_a, None).await;
        assert_eq!(status, 204);
        assert_eq!(hosted.count(), 0);
        let (status, _) = call(
            "POST",
            format!("/v1/sessions/{id}/actions"),
            token_a,
            Some(goto.clone()),
        )
        .await;
        assert_eq!(status, 404);

        // The host goes away with a session open: the API says so once, then 404; a new
        // session finds no host.
        let (status, body) = call(
            "POST",
            "/v1/sessions".to_owned(),
            token_a,
            Some("{}".to_owned()),
        )
        .await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
        let orphan = json(&body)["id"].as_str().expect("id").to_owned();
        registration.stop().await;
        host_server.abort();
        let _ = host_server.await;
        hosted.close_all().await;
        store
            .create_session(
                "left-open",
                // token_a is the first bare token: the default tenant.
                trawl::tenant::DEFAULT,
                "desktop",
                Some(&host_url),
            )
            .await
            .expect("creates");
        let (status, body) = call(
            "POST",
            "/v1/sessions/left-open/actions".to_owned(),
            token_a,
            Some(goto.clone()),
        )
        .await;
        assert_eq!(status, 502, "{}", String::from_utf8_lossy(&body));
        assert_eq!(json(&body)["error"]["code"], "browser_failed");
        let (status, _) = call(
            "POST",
            "/v1/sessions/left-open/actions".to_owned(),
            token_a,
            Some(goto.clone()),
        )
        .await;
        assert_eq!(status, 404);
        let (status, _) = call(
            "POST",
            format!("/v1/sessions/{orphan}/actions"),
            token_a,
            Some(goto),
        )
        .await;
        assert_eq!(status, 404, "closed when its host shut down");
        let (status, body) = call(
            "POST",
            "/v1/sessions".to_owned(),
            token_a,
            Some("{}".to_owned()),
        )
        .await;
        assert_eq!(status, 503, "{}", String::from_utf8_lossy(&body));
        assert_eq!(json(&body)["error"]["code"], "sessions_unavailable");
    });
}

#[test]
fn trawl_serve_without_pools_routes_sessions_to_a_trawl_work_session_host() {
    let fixture = &shared().fixture;
    run(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let free_port = || {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
            listener.local_addr().expect("address").port()
        };
        let (api_port, host_port) = (free_port(), free_port());
        let worker_token = "worker-token-0123456789";
        let mut work = tokio::process::Command::from(crate::trawl_command(dir.path()))
            .args([
                "work",
                "--pools",
                "fetch=1,browse=1",
                "--allow-private-network",
            ])
            .env("TRAWL_SESSIONS__LISTEN", format!("127.0.0.1:{host_port}"))
            .env("TRAWL_SESSIONS__WORKER_TOKEN", worker_token)
            .kill_on_drop(true)
            .spawn()
            .expect("trawl work starts");
        let mut serve = tokio::process::Command::from(crate::trawl_command(dir.path()))
            .args(["serve", "--no-pools", "--bind"])
            .arg(format!("127.0.0.1:{api_port}"))
            .env("TRAWL_SESSIONS__WORKER_TOKEN", worker_token)
            .kill_on_drop(true)
            .spawn()
            .expect("trawl serve starts");
        let api = format!("http://127.0.0.1:{api_port}");
        let client = reqwest::Client::new();
        // Open a session once both listen and the worker has registered.
        let mut opened = None;
        for _ in 0..200 {
            if let Ok(response) = client
                .post(format!("{api}/v1/sessions"))
                .header("content-type", "application/json")
                .body(r#"{"profile": "mobile"}"#)
                .send()
                .await
                && response.status().as_u16() == 201
            {
                let body = response.bytes().await.expect("body");
                opened = Some(serde_json::from_slice::<serde_json::Value>(&body).expect("json"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let opened = opened.expect("a session opened through the API on the worker");
        let id = opened["id"].as_str().expect("id").to_owned();
        assert_eq!(opened["profile"], "mobile");
        let act = |body: serde_json::Value| {
            let client = client.clone();
            let url = format!("{api}/v1/sessions/{id}/actions");
            async move {
                let response = client
                    .post(url)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await
                    .expect("answers");
                let status = response.status().as_u16();
                let body = response.bytes().await.expect("body");
                (
                    status,
                    serde_json::from_slice::<serde_json::Value>(&body).ok(),
                )
            }
        };
        let (status, steps) = act(serde_json::json!({"actions": [
            {"action": "goto", "url": fixture.url("/browser/form")},
            {"action": "snapshot"}
        ]}))
        .await;
        let steps = steps.expect("json");
        assert_eq!(status, 200, "{steps}");
        assert_eq!(steps["steps"][1]["ok"], true, "{steps}");
        let snapshot = steps["steps"][1]["output"].as_str().unwrap_or_default();
        assert!(snapshot.contains("textbox \"Email\""), "{snapshot}");

        // The worker stops: its sessions close with it, and the API answers 404 for them.
        let pid = work.id().expect("pid").to_string();
        let stopped = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill runs");
        assert!(stopped.success());
        let status = tokio::time::timeout(Duration::from_secs(60), work.wait())
            .await
            .expect("the worker stops in time")
            .expect("waits");
        assert!(status.success(), "{status:?}");
        let (status, _) = act(serde_json::json!({"action": "snapshot"})).await;
        assert_eq!(status, 404);
        let replay = client
            .get(format!("{api}/v1/sessions/{id}/replay"))
            .send()
            .await
            .expect("answers")
            .bytes()
            .await
            .expect("body");
        let replay: serde_json::Value = serde_json::from_slice(&replay).expect("json");
        assert_eq!(
            replay["steps"].as_array().map(Vec::len),
            Some(2),
            "{replay}"
        );
        assert_eq!(replay["session"]["close_reason"], "shutdown");
        let _ = serve.kill().await;
    });
}

/// Opens `count` sessions on `sessions` for `owner`, each on one of the fixture's pages.
async fn open_sessions_on_pages(
    sessions: &trawl::sessions::Sessions,
    owner: &str,
    count: usize,
) -> Vec<String> {
    let pages = [
        "/browser/form",
        "/browser/second",
        "/browser/shadow",
        "/browser/scroll",
        "/browser/js-built",
    ];
    let mut ids = Vec::new();
    for n in 0..count {
        let info = sessions
            .open(owner, None, Profile::Desktop, &Credentials::default())
            .await
            .unwrap_or_else(|error| panic!("session {n} opens: {error}"));
        let goto = Action::Goto {
            url: site(pages[n % pages.len()]),
            wait_until: None,
        };
        let steps = sessions.act(owner, &info.id, &[goto]).await.expect("acts");
        assert!(steps[0].outcome.ok, "{:?}", steps[0].outcome);
        ids.push(info.id);
    }
    ids
}

#[test]
fn twenty_sessions_stay_open_beside_the_job_contexts_and_memory_bounds_new_ones() {
    run(async {
        use trawl::sessions::{Config, Error, Sessions};
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let pool = new_pool(browse::Config::default(), &shared().dns).await;
        let sessions = Sessions::new(pool.clone(), store.clone(), Config::default());
        let before = pool.memory().await;
        let ids = open_sessions_on_pages(&sessions, "owner", 20).await;
        assert_eq!(sessions.count(), 20);
        let memory = pool.memory().await;
        println!(
            "20 open sessions on the fixture's pages: browser tree {} MB (PSS; {} MB before)",
            memory >> 20,
            before >> 20
        );
        // The jobs' contexts are all still free.
        assert_eq!(pool.free_contexts(), pool.config().max_contexts);
        let job = pool
            .lease(Profile::Desktop, &Credentials::default(), false)
            .await
            .expect("a job still gets a context");
        job.close().await;
        let more = sessions
            .open("owner", None, Profile::Desktop, &Credentials::default())
            .await;
        assert!(matches!(more, Err(Error::Busy(_))), "{more:?}");
        let listed = sessions.list("owner");
        assert_eq!(listed.len(), 20);
        assert!(
            listed
                .iter()
                .all(|info| info.url.is_some() && info.last_action.as_deref() == Some("goto"))
        );
        for id in &ids {
            sessions.close("owner", id).await.expect("closes");
        }
        pool.shutdown().await;

        // A browser at its memory bound takes no new session: a clear busy answer.
        let small = new_pool(
            browse::Config {
                max_memory_mb: 128,
                ..browse::Config::default()
            },
            &shared().dns,
        )
        .await;
        let sessions = Sessions::new(small.clone(), store, Config::default());
        let first = open_sessions_on_pages(&sessions, "owner", 1).await;
        let refused = sessions
            .open("owner", None, Profile::Desktop, &Credentials::default())
            .await;
        match refused {
            Err(Error::Busy(message)) => {
                assert!(message.contains("browse.max_memory_mb"), "{message}")
            }
            other => panic!("refused for memory: {other:?}"),
        }
        sessions.close("owner", &first[0]).await.expect("closes");
        small.shutdown().await;
    });
}

#[test]
fn a_session_whose_browser_is_killed_goes_on_in_a_new_one_with_its_state() {
    run(async {
        use trawl::sessions::{Config, Sessions};
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let pool = new_pool(browse::Config::default(), &shared().dns).await;
        let sessions = Sessions::new(pool.clone(), store.clone(), Config::default());
        let info = sessions
            .open(
                "owner",
                Some("chat-7"),
                Profile::Desktop,
                &Credentials::default(),
            )
            .await
            .expect("opens");
        let steps = sessions
            .act(
                "owner",
                "chat-7",
                &actions(&format!(
                    r#"[{{"action": "goto", "url": "{}"}}, {{"action": "goto", "url": "{}"}}, {{"action": "read", "scope": "page"}}]"#,
                    site("/browser/state?set"),
                    site("/browser/state")
                )),
            )
            .await
            .expect("acts");
        let shown = steps[2].outcome.output.clone().unwrap_or_default();
        assert!(
            shown.contains("cookie: visited=yes; storage: yes"),
            "{shown}"
        );
        let pid = pool.pid().await.expect("a browser runs");
        std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .expect("kill runs");
        tokio::time::sleep(Duration::from_millis(500)).await;
        let steps = sessions
            .act(
                "owner",
                &info.id,
                &actions(r#"[{"action": "read", "scope": "page"}, {"action": "snapshot"}]"#),
            )
            .await
            .expect("the session goes on");
        assert!(steps[0].outcome.recovered, "{:?}", steps[0].outcome);
        assert!(
            !steps[1].outcome.recovered,
            "only the first step after the failure"
        );
        assert_eq!(steps[0].outcome.url, site("/browser/state"));
        let shown = steps[0].outcome.output.clone().unwrap_or_default();
        assert!(
            shown.contains("cookie: visited=yes; storage: yes"),
            "its cookie and localStorage restored: {shown}"
        );
        assert_ne!(pool.pid().await, Some(pid));
        let replay = trawl::sessions::replay(&store, "owner", "chat-7")
            .await
            .expect("replay");
        assert_eq!(replay.session.id, "chat-7");
        assert_eq!(replay.steps[3].outcome["recovered"], true);
        sessions.close("owner", "chat-7").await.expect("closes");
        pool.shutdown().await;
    });
}

#[test]
fn read_pages_by_line_and_read_html_returns_a_large_page_whole() {
    run(async {
        use base64::Engine as _;
        let result = script(
            &site("/browser/large"),
            actions(
                r#"[{"action": "read"},
                    {"action": "read", "from": 10, "to": 12},
                    {"action": "read", "scope": "page", "max_chars": 500},
                    {"action": "read_html"},
                    {"action": "highlight"},
                    {"action": "screenshot", "grid": true, "grid_step": 50}]"#,
            ),
        )
        .await;
        assert!(result.completed, "{:#?}", result.steps);
        let first = &result.steps[0];
        let text = first.output.as_deref().unwrap_or_default();
        assert!(text.chars().count() <= 30_000, "{}", text.len());
        assert!(
            text.chars().count() > 20_000,
            "the default is 30,000: {}",
            text.len()
        );
        assert!(first.truncated);
        let total = first.total_lines.expect("total_lines");
        let next = first.next_from.expect("next_from");
        assert!(next > 1 && next <= total, "{next} of {total}");
        let range = &result.steps[1];
        let lines: Vec<&str> = range
            .output
            .as_deref()
            .unwrap_or_default()
            .lines()
            .collect();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert_eq!(range.next_from, Some(13));
        let page = &result.steps[2];
        assert!(page.output.as_deref().unwrap_or_default().chars().count() <= 500);
        assert!(
            page.output
                .as_deref()
                .unwrap_or_default()
                .contains(testkit::browser::LARGE_LINE)
        );
        let html = result.steps[3].html_base64.as_deref().expect("html_base64");
        let html = base64::engine::general_purpose::STANDARD
            .decode(html)
            .expect("base64");
        let html = String::from_utf8(html).expect("utf-8");
        assert!(html.len() > 300_000, "{}", html.len());
        assert!(html.contains("The end of the large page."));
        assert!(html.contains(&format!("{} 4000:", testkit::browser::LARGE_LINE)));
        assert_eq!(
            result.steps[4].count,
            Some(0),
            "no actionable element: {:?}",
            result.steps[4]
        );
        assert!(result.steps[5].image.is_some());

        // Beyond browse.max_html_bytes: too_large, not a cut page.
        let pool = new_pool(
            browse::Config {
                max_html_bytes: 100_000,
                ..browse::Config::default()
            },
            &shared().dns,
        )
        .await;
        let job = BrowseJob {
            url: site("/browser/large"),
            actions: actions(r#"[{"action": "read_html"}]"#),
            profile: Profile::Desktop,
            credentials: Credentials::default(),
            store: false,
            archive: false,
        };
        let result = browse::script::run_script(&pool, &job).await.expect("runs");
        let error = result.steps[0].error.as_ref().expect("refused");
        assert_eq!(error.code, "too_large", "{error:?}");
        pool.shutdown().await;
    });
}

#[test]
fn clients_choose_session_ids_unique_per_tenant_and_list_their_sessions() {
    run(async {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = temp_store(dir.path()).await;
        let (context, queue) = api_parts(dir.path(), &store).await;
        let sessions = trawl::sessions::Sessions::new(
            shared().pool.clone(),
            store,
            trawl::sessions::Config::default(),
        );
        let router = api_router(context, queue, Some(sessions), None);
        let open = |token: &'static str, body: &'static str| {
            api_call(
                &router,
                "POST",
                "/v1/sessions".to_owned(),
                token,
                Some(body.to_owned()),
            )
        };
        let (status, body) = open(TOKEN_A, r#"{"id": "chat-1"}"#).await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
        assert_eq!(json(&body)["id"], "chat-1");
        let (status, body) = open(TOKEN_A, r#"{"id": "chat-1"}"#).await;
        assert_eq!(status, 409, "{}", String::from_utf8_lossy(&body));
        assert_eq!(json(&body)["error"]["code"], "conflict");
        for bad in [
            r#"{"id": "a/b"}"#,
            r#"{"id": ""}"#,
            r#"{"id": "with space"}"#,
        ] {
            let (status, body) = open(TOKEN_A, bad).await;
            assert_eq!(status, 422, "{bad}: {}", String::from_utf8_lossy(&body));
        }
        // Another tenant may use the same id.
        let (status, body) = open(TOKEN_B, r#"{"id": "chat-1"}"#).await;
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&body));
        let (status, body) = open(TOKEN_A, r#"{}"#).await;
        assert_eq!(status, 201);
        let generated = json(&body)["id"].as_str().expect("id").to_owned();
        api_goto(&router, TOKEN_A, "chat-1", "/browser/form").await;

        let (status, body) =
            api_call(&router, "GET", "/v1/sessions".to_owned(), TOKEN_A, None).await;
        assert_eq!(status, 200);
        let listed = json(&body);
        let ids: Vec<&str> = listed["sessions"]
            .as_array()
            .expect("sessions")
            .iter()
            .filter_map(|session| session["id"].as_str())
            .collect();
        assert_eq!(ids, vec!["chat-1", generated.as_str()]);
        let first = &listed["sessions"][0];
        assert_eq!(first["url"], site("/browser/form"));
        assert_eq!(first["title"], "Sign in");
        assert_eq!(first["last_action"], "goto");
        assert!(first["idle_secs"].is_u64());
        assert_eq!(first["profile"], "desktop");
        let (status, body) = api_call(
            &router,
            "GET",
            "/v1/sessions/chat-1".to_owned(),
            TOKEN_A,
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(json(&body)["url"], site("/browser/form"));
        // B's chat-1 is its own: blank, and B lists only it.
        let (status, body) = api_call(
            &router,
            "GET",
            "/v1/sessions/chat-1".to_owned(),
            TOKEN_B,
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert!(json(&body).get("url").is_none(), "{}", json(&body));
        let (_, body) = api_call(&router, "GET", "/v1/sessions".to_owned(), TOKEN_B, None).await;
        assert_eq!(json(&body)["sessions"].as_array().map(Vec::len), Some(1));
        let (status, _) = api_call(
            &router,
            "GET",
            format!("/v1/sessions/{generated}"),
            TOKEN_B,
            None,
        )
        .await;
        assert_eq!(status, 404);
        let (status, body) = api_call(
            &router,
            "GET",
            "/v1/sessions/chat-1/replay".to_owned(),
            TOKEN_A,
            None,
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(json(&body)["session"]["id"], "chat-1");
        assert_eq!(json(&body)["steps"].as_array().map(Vec::len), Some(1));
        for (token, id) in [
            (TOKEN_A, "chat-1"),
            (TOKEN_B, "chat-1"),
            (TOKEN_A, generated.as_str()),
        ] {
            let (status, _) =
                api_call(&router, "DELETE", format!("/v1/sessions/{id}"), token, None).await;
            assert_eq!(status, 204);
        }
        // The id names its session and replay log for good.
        let (status, _) = open(TOKEN_A, r#"{"id": "chat-1"}"#).await;
        assert_eq!(status, 409);
    });
}

#[test]
fn role_and_name_target_clicks_typing_hovers_and_selects() {
    run(async {
        let result = script(
            &site("/browser/form"),
            actions(
                r#"[
                {"action": "type", "role": "textbox", "name": "Email", "text": "grace@example.com"},
                {"action": "select", "role": "combobox", "name": "country", "value": "fr"},
                {"action": "click", "role": "checkbox", "name": "Remember"},
                {"action": "hover", "role": "button", "name": "Sign in"},
                {"action": "click", "role": "button", "name": "Sign in"},
                {"action": "wait", "text": "Welcome", "ms": 5000},
                {"action": "read", "scope": "page"},
                {"action": "snapshot"},
                {"action": "snapshot"},
                {"action": "click", "role": "button", "name": "Nowhere to be found"}
            ]"#,
            ),
        )
        .await;
        let steps = &result.steps;
        assert_eq!(steps.len(), 10, "{steps:#?}");
        assert!(steps[..9].iter().all(|step| step.ok), "{steps:#?}");
        let read = output(&result, 6);
        assert!(
            read.contains("Welcome, grace@example.com from fr (remembered)"),
            "{read}"
        );
        // The same elements twice: the second snapshot says so, without the list.
        assert!(!steps[7].unchanged);
        assert!(
            steps[7].count.is_some_and(|count| count > 3),
            "{:?}",
            steps[7]
        );
        assert!(steps[8].unchanged, "{:?}", steps[8]);
        assert!(!output(&result, 8).contains("Sign in"));
        let missing = steps[9].error.as_ref().expect("no such element");
        assert_eq!(missing.code, "action_failed");
        assert!(
            missing.message.contains("Nowhere to be found"),
            "{missing:?}"
        );
    });
}
