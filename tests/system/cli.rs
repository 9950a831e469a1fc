//! The real `trawl` binary end to end: run (arguments, files, stdin, --out), fetch, read,
//! grep, status, pages, crawl --out, archive --crawl, extract, configuration errors, the
//! environment's proxy (`proxy.trust_env`), and the default policy refusing loopback.

use std::path::Path;
use std::process::Output;

use testkit::FixtureServer;
use tokio::io::AsyncWriteExt as _;

pub(crate) fn trawl(data_dir: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::from(crate::trawl_command(data_dir));
    command.kill_on_drop(true);
    command
}

pub(crate) async fn output(command: &mut tokio::process::Command) -> Output {
    command.output().await.expect("trawl runs")
}

pub(crate) fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub(crate) fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn jsonl(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .expect("pages.jsonl exists")
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is json"))
        .collect()
}

#[tokio::test]
async fn run_accounts_for_every_url_and_writes_pages() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let run = output(
        trawl(&dir.path().join("data"))
            .args(["run", "--quiet", "--allow-private-network", "--out"])
            .arg(&out)
            .arg(server.url("/article/1"))
            .arg(server.url("/article/2"))
            .arg("not a url")
            .arg(server.url("/status/404"))
            .arg(server.url("/text.txt")),
    )
    .await;
    assert!(run.status.success(), "stderr: {}", stderr(&run));
    let summary = stdout(&run);
    assert!(summary.contains("5/5 urls"), "{summary}");
    assert!(summary.contains("3 succeeded, 2 failed"), "{summary}");
    assert!(
        summary.contains("invalid_url 1") && summary.contains("http_status 1"),
        "{summary}"
    );

    let lines = jsonl(&out.join("pages.jsonl"));
    assert_eq!(lines.len(), 5);
    let succeeded: Vec<_> = lines
        .iter()
        .filter(|line| line.get("content").is_some())
        .collect();
    assert_eq!(succeeded.len(), 3);
    for line in &succeeded {
        assert!(
            line["content"]["text"]
                .as_str()
                .is_some_and(|text| !text.is_empty())
        );
        assert!(line["page_id"].as_str().is_some());
    }
    let codes: Vec<&str> = lines
        .iter()
        .filter_map(|line| line["error"]["code"].as_str())
        .collect();
    assert!(
        codes.contains(&"invalid_url") && codes.contains(&"http_status"),
        "{codes:?}"
    );
    assert!(
        lines
            .iter()
            .filter(|line| line.get("error").is_some())
            .all(|line| line["url"].is_string())
    );
    let files = std::fs::read_dir(out.join("pages"))
        .expect("pages dir")
        .count();
    assert_eq!(files, 3);

    // read pages through the store the run left behind
    let read = output(
        trawl(&dir.path().join("data"))
            .args(["read", "--from", "1", "--to", "2"])
            .arg(server.url("/article/1")),
    )
    .await;
    assert!(read.status.success(), "{}", stderr(&read));
    assert_eq!(stdout(&read).lines().count(), 2);
    let missing =
        output(trawl(&dir.path().join("data")).args(["read", "http://nowhere.test/"])).await;
    assert_eq!(missing.status.code(), Some(1));

    let status = output(trawl(&dir.path().join("data")).arg("status")).await;
    let counts = stdout(&status);
    assert!(
        counts.contains("succeeded  3") && counts.contains("failed     2"),
        "{counts}"
    );
}

#[tokio::test]
async fn the_default_policy_refuses_loopback() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let run = output(
        trawl(&dir.path().join("data"))
            .args(["run", "--quiet", "--out"])
            .arg(&out)
            .arg(server.url("/article/1")),
    )
    .await;
    assert!(run.status.success(), "{}", stderr(&run));
    let lines = jsonl(&out.join("pages.jsonl"));
    assert_eq!(lines[0]["error"]["code"], "blocked_destination");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn urls_stream_from_stdin_skipping_comments_and_blanks() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let mut child = trawl(&dir.path().join("data"))
        .args([
            "run",
            "--quiet",
            "--allow-private-network",
            "--file",
            "-",
            "--format",
            "text",
            "--out",
        ])
        .arg(&out)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawns");
    let input = format!(
        "# a comment\n\n{}\r\n{}\n   \n",
        server.url("/site/1"),
        server.url("/site/2")
    );
    let mut stdin = child.stdin.take().expect("stdin");
    stdin.write_all(input.as_bytes()).await.expect("writes");
    drop(stdin);
    let run = child.wait_with_output().await.expect("waits");
    assert!(run.status.success(), "{}", stderr(&run));
    let lines = jsonl(&out.join("pages.jsonl"));
    assert_eq!(lines.len(), 2);
    assert!(
        lines.iter().all(|line| line.get("content").is_some()),
        "{lines:?}"
    );
    let names: Vec<String> = std::fs::read_dir(out.join("pages"))
        .expect("pages")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert!(names.iter().all(|name| name.ends_with(".txt")), "{names:?}");
}

#[tokio::test]
async fn extract_reads_a_local_file_without_network() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("page.html");
    let paragraph =
        "The river ran quietly past the old mill, and the miller counted sacks of grain. ";
    let html = format!(
        "<html><head><title>The mill</title></head><body><nav><a href='/'>Home</a></nav>\
         <article><h1>The mill</h1><p>{}</p><p>{}</p></article></body></html>",
        paragraph.repeat(5),
        paragraph.repeat(4)
    );
    std::fs::write(&path, html).expect("writes");
    let run = output(
        trawl(dir.path())
            .args(["extract", "--format", "text"])
            .arg(&path),
    )
    .await;
    assert!(run.status.success(), "{}", stderr(&run));
    let text = stdout(&run);
    assert!(text.contains("The river ran quietly"), "{text}");
    assert!(!text.contains("Home"), "{text}");
    // The page declares no language: `--json` reports the guess a fetch of it would.
    let json = output(trawl(dir.path()).args(["extract", "--json"]).arg(&path)).await;
    assert!(json.status.success(), "{}", stderr(&json));
    let json: serde_json::Value = serde_json::from_str(&stdout(&json)).expect("json");
    assert_eq!(json["meta"]["lang"], "en", "{json}");
    let url = output(trawl(dir.path()).args(["extract", "http://a.test/page"])).await;
    assert!(!url.status.success());
    assert!(
        stderr(&url).contains("trawl fetch http://a.test/page"),
        "{}",
        stderr(&url)
    );
}

#[tokio::test]
async fn bad_configuration_is_a_clear_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = output(trawl(dir.path()).args([
        "--config",
        "/nonexistent/trawl.toml",
        "run",
        "http://a.test/",
    ]))
    .await;
    assert_eq!(missing.status.code(), Some(2));
    assert!(
        stderr(&missing).contains("not found"),
        "{}",
        stderr(&missing)
    );

    let tiny = output(
        trawl(dir.path())
            .env("TRAWL_HTTP__MAX_BYTES", "5")
            .args(["run", "http://a.test/"]),
    )
    .await;
    assert_eq!(tiny.status.code(), Some(2));
    assert!(stderr(&tiny).contains("max_bytes"), "{}", stderr(&tiny));

    let none = output(trawl(dir.path()).arg("run")).await;
    assert_eq!(none.status.code(), Some(2));
    assert!(stderr(&none).contains("--file"), "{}", stderr(&none));
}

#[tokio::test]
async fn the_readme_documents_every_configuration_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = output(trawl(dir.path()).arg("config")).await;
    assert!(config.status.success(), "{}", stderr(&config));
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).expect("README");
    let mut section = String::new();
    let mut keys = 0;
    for line in stdout(&config).lines() {
        if let Some(name) = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            section = format!("{name}.");
        } else if let Some((key, _)) = line.split_once(" = ") {
            let key = format!("`{section}{}`", key.trim());
            assert!(readme.contains(&key), "README.md does not document {key}");
            keys += 1;
        }
    }
    assert!(keys > 20, "trawl config printed {keys} keys");
}

#[tokio::test]
async fn serve_refuses_a_public_bind_without_tokens() {
    let dir = tempfile::tempdir().expect("tempdir");
    let serve = output(trawl(dir.path()).args(["serve", "--bind", "0.0.0.0:0"])).await;
    assert_eq!(serve.status.code(), Some(2));
    assert!(
        stderr(&serve).contains("without api.tokens"),
        "{}",
        stderr(&serve)
    );
}

#[tokio::test]
async fn enqueue_and_status_talk_to_a_running_server_which_stops_on_sigterm() {
    let site = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        listener.local_addr().expect("address").port()
    };
    let server_url = format!("http://127.0.0.1:{port}");
    let token = "a-token-for-the-cli-test";
    let mut serve = trawl(dir.path())
        .args([
            "serve",
            "--allow-private-network",
            "--bind",
            &format!("127.0.0.1:{port}"),
        ])
        .env("TRAWL_API__TOKENS", format!("[\"{token}\"]"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("serve starts");
    let mut up = false;
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(up, "trawl serve listens");

    let refused = output(
        trawl(dir.path())
            .args(["enqueue", "--server", &server_url])
            .arg(site.url("/article/1")),
    )
    .await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("unauthorized"),
        "{}",
        stderr(&refused)
    );

    let enqueued = output(
        trawl(dir.path())
            .args(["enqueue", "--server", &server_url, "--token", token])
            .arg(site.url("/article/1")),
    )
    .await;
    assert!(enqueued.status.success(), "{}", stderr(&enqueued));
    let line = stdout(&enqueued);
    let id = line.split('\t').next().expect("an id").trim().to_owned();
    let mut last = String::new();
    for _ in 0..100 {
        let status = output(
            trawl(dir.path())
                .args(["status", "--server", &server_url, &id])
                .env("TRAWL_TOKEN", token),
        )
        .await;
        assert!(status.status.success(), "{}", stderr(&status));
        last = stdout(&status);
        if last.contains("\"succeeded\"") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(last.contains("\"succeeded\""), "{last}");

    let pid = serve.id().expect("pid").to_string();
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .await
        .expect("kill runs");
    assert!(killed.success());
    let exit = tokio::time::timeout(std::time::Duration::from_secs(30), serve.wait())
        .await
        .expect("serve stops within its grace period")
        .expect("waits");
    assert!(exit.success(), "{exit:?}");
}

#[tokio::test]
async fn fetch_prints_one_page_then_serves_it_from_the_cache() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let url = server.url("/article/1");
    let fetched = output(
        trawl(dir.path())
            .args(["fetch", "--allow-private-network"])
            .arg(&url),
    )
    .await;
    assert!(fetched.status.success(), "{}", stderr(&fetched));
    let text = stdout(&fetched);
    assert!(text.lines().count() > 3, "{text}");
    assert_eq!(server.hits("/article/1"), 1);
    let again = output(
        trawl(dir.path())
            .args(["fetch", "--json", "--allow-private-network"])
            .arg(&url),
    )
    .await;
    assert!(again.status.success(), "{}", stderr(&again));
    let result: serde_json::Value = serde_json::from_str(&stdout(&again)).expect("json");
    assert_eq!(result["cached"], true, "{result}");
    assert_eq!(result["content"]["text"].as_str(), Some(text.trim_end()));
    assert_eq!(server.hits("/article/1"), 1, "served from the cache");

    let missing = output(
        trawl(dir.path())
            .args(["fetch", "--allow-private-network"])
            .arg(server.url("/status/404")),
    )
    .await;
    assert_eq!(missing.status.code(), Some(1));
    assert!(
        stderr(&missing).contains("http_status"),
        "{}",
        stderr(&missing)
    );
    let refused = output(
        trawl(dir.path())
            .args(["fetch"])
            .arg(server.url("/article/2")),
    )
    .await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("blocked_destination"),
        "{}",
        stderr(&refused)
    );
}

/// `trawl` with the proxy environment given here only (none from the test's own).
fn with_proxy_environment(data_dir: &Path, pairs: &[(&str, &str)]) -> tokio::process::Command {
    let mut command = trawl(data_dir);
    for name in ["HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY"] {
        command.env_remove(name).env_remove(name.to_lowercase());
    }
    for (name, value) in pairs {
        command.env(name, value);
    }
    command
}

#[tokio::test]
async fn fetch_goes_through_the_environments_proxy_only_when_trusted() {
    let server = FixtureServer::start().await.expect("fixture");
    let proxy = testkit::ForwardProxy::start(server.addr()).await;
    let dir = tempfile::tempdir().expect("tempdir");
    // A name only the proxy can resolve: the tests' network has no DNS at all.
    let page = |path: &str| format!("http://news.example:{}{path}", server.addr().port());
    let proxy_url = proxy.url("ada");
    let trusting = [
        ("TRAWL_PROXY__TRUST_ENV", "true"),
        ("http_proxy", proxy_url.as_str()),
    ];
    let fetched = output(
        with_proxy_environment(dir.path(), &trusting)
            .args(["fetch", "--json"])
            .arg(page("/article/1")),
    )
    .await;
    assert!(fetched.status.success(), "{}", stderr(&fetched));
    let result: serde_json::Value = serde_json::from_str(&stdout(&fetched)).expect("json");
    assert_eq!(result["status"], 200, "{result}");
    assert_eq!(proxy.asked(), vec![page("/article/1")]);
    assert_eq!(server.hits("/article/1"), 1);

    // NO_PROXY names the host: fetched directly, where the name does not resolve.
    let direct = output(
        with_proxy_environment(
            dir.path(),
            &[trusting[0], trusting[1], ("NO_PROXY", "news.example")],
        )
        .args(["fetch"])
        .arg(page("/article/2")),
    )
    .await;
    assert!(!direct.status.success(), "{}", stdout(&direct));
    // Not trusted: the environment is ignored.
    let ignored = output(
        with_proxy_environment(dir.path(), &[trusting[1]])
            .args(["fetch"])
            .arg(page("/article/3")),
    )
    .await;
    assert!(!ignored.status.success(), "{}", stdout(&ignored));
    assert_eq!(proxy.asked().len(), 1, "{:?}", proxy.asked());
    assert_eq!(server.hits("/article/"), 1);

    // A malformed proxy variable stops trawl at start, named; the password never shows.
    let bad = output(
        with_proxy_environment(
            dir.path(),
            &[trusting[0], ("HTTPS_PROXY", "gopher://ada:s3cret@proxy:70")],
        )
        .args(["fetch"])
        .arg(page("/article/4")),
    )
    .await;
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    let message = stderr(&bad);
    assert!(
        message.contains("proxy.trust_env: HTTPS_PROXY"),
        "{message}"
    );
    assert!(!message.contains("s3cret"), "{message}");
}

#[tokio::test]
async fn fetch_says_so_when_a_page_is_still_pending_after_five_seconds() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let fetched = output(
        trawl(dir.path())
            .args(["fetch", "--allow-private-network"])
            .arg(server.url("/slow/article/4?ms=6500")),
    )
    .await;
    assert!(fetched.status.success(), "{}", stderr(&fetched));
    assert!(
        stderr(&fetched).contains("is still running"),
        "{}",
        stderr(&fetched)
    );
    assert!(!stdout(&fetched).is_empty());
}

#[tokio::test]
async fn read_is_capped_and_grep_finds_lines_of_a_stored_page() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let url = server.url("/article/3");
    let fetched = output(
        trawl(dir.path())
            .args(["fetch", "--allow-private-network"])
            .arg(&url),
    )
    .await;
    assert!(fetched.status.success(), "{}", stderr(&fetched));
    let page = stdout(&fetched);

    let read = output(
        trawl(dir.path())
            .arg("read")
            .arg(&url)
            .env("TRAWL_API__READ_MAX_CHARS", "300"),
    )
    .await;
    assert!(read.status.success(), "{}", stderr(&read));
    assert!(stdout(&read).chars().count() <= 300, "{}", stdout(&read));
    let next = stderr(&read)
        .lines()
        .find_map(|line| {
            line.split_once(" --from ")
                .map(|(_, n)| n.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("the next range is named: {}", stderr(&read)));
    let rest = output(
        trawl(dir.path())
            .args(["read", "--max-chars", "0", "--from", &next])
            .arg(&url),
    )
    .await;
    assert!(rest.status.success(), "{}", stderr(&rest));
    assert_eq!(
        format!("{}{}", stdout(&read), stdout(&rest)),
        page,
        "the two ranges are the page"
    );

    // A word of the page's first line, in another case.
    let word = page
        .split(|c: char| !c.is_alphabetic())
        .find(|word| word.len() > 4)
        .expect("a word")
        .to_uppercase();
    let grep = output(
        trawl(dir.path())
            .args(["grep", "-i", "-C", "0"])
            .arg(&url)
            .arg(&word),
    )
    .await;
    assert!(grep.status.success(), "{}", stderr(&grep));
    let found = stdout(&grep);
    let first = found.lines().next().expect("a match");
    let (number, text) = first.split_once(':').expect("N:line");
    assert!(number.parse::<u64>().is_ok(), "{first}");
    assert!(text.to_uppercase().contains(&word), "{first}");
    let none = output(trawl(dir.path()).arg("grep").arg(&url).arg("zq{3}xv")).await;
    assert_eq!(none.status.code(), Some(1));
    let bad = output(trawl(dir.path()).arg("grep").arg(&url).arg("(a+)+")).await;
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        stderr(&bad).contains("nested repetition"),
        "{}",
        stderr(&bad)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_and_crawls_have_status_pages_out_files_and_archives() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let out = dir.path().join("out");
    let run = output(
        trawl(&data)
            .args(["run", "--quiet", "--allow-private-network", "--out"])
            .arg(&out)
            .arg(server.url("/article/1"))
            .arg(server.url("/status/404")),
    )
    .await;
    assert!(run.status.success(), "{}", stderr(&run));
    let batch = stdout(&run)
        .lines()
        .find_map(|line| line.strip_prefix("batch "))
        .and_then(|rest| rest.split(';').next())
        .expect("the run names its batch")
        .to_owned();
    for line in jsonl(&out.join("pages.jsonl")) {
        assert!(line["job_id"].is_string(), "{line}");
        if line.get("error").is_some() {
            continue;
        }
        let file = line["file"].as_str().expect("a file name");
        let written = std::fs::read_to_string(out.join(file)).expect("the file exists");
        let title = line["title"].as_str().expect("a title");
        assert!(
            written.starts_with(&format!("---\ntitle: {}\n", serde_json::json!(title))),
            "{written}"
        );
        assert!(written.contains(&format!(
            "\njob_id: \"{}\"\n",
            line["job_id"].as_str().unwrap_or_default()
        )));
    }
    let status = output(trawl(&data).args(["status", &batch])).await;
    assert!(status.status.success(), "{}", stderr(&status));
    let text = stdout(&status);
    assert!(text.contains("2 jobs, ended"), "{text}");
    assert!(text.contains("http_status 1"), "{text}");
    let counts = output(trawl(&data).args(["status", "--json"])).await;
    let counts: serde_json::Value = serde_json::from_str(&stdout(&counts)).expect("json");
    assert_eq!(counts["succeeded"], 1, "{counts}");

    let crawl_out = dir.path().join("crawl-out");
    let crawl = output(
        trawl(&data)
            .args([
                "crawl",
                "--quiet",
                "--allow-private-network",
                "--ignore-robots",
                "--max-pages",
                "3",
                "--max-depth",
                "1",
                "--out",
            ])
            .arg(&crawl_out)
            .arg(server.url("/site/5"))
            .env("TRAWL_POLITENESS__MIN_DELAY_MS", "0"),
    )
    .await;
    assert!(crawl.status.success(), "{}", stderr(&crawl));
    let crawl_id = stdout(&crawl)
        .lines()
        .find_map(|line| line.strip_prefix("done: crawl "))
        .and_then(|rest| rest.split(':').next())
        .expect("the summary names the crawl")
        .to_owned();
    let lines = jsonl(&crawl_out.join("pages.jsonl"));
    assert_eq!(lines.len(), 3, "{lines:?}");
    for line in &lines {
        let file = line["file"].as_str().expect("a file name");
        assert!(crawl_out.join(file).is_file(), "{file}");
    }
    let status = output(trawl(&data).args(["status", &crawl_id])).await;
    assert!(status.status.success(), "{}", stderr(&status));
    assert!(
        stdout(&status).contains("3 fetched, 0 from cache"),
        "{}",
        stdout(&status)
    );
    let listed = output(trawl(&data).args(["pages", "--json", "--crawl", &crawl_id])).await;
    assert!(listed.status.success(), "{}", stderr(&listed));
    let pages: Vec<serde_json::Value> = stdout(&listed)
        .lines()
        .map(|line| serde_json::from_str(line).expect("json"))
        .collect();
    assert_eq!(pages.len(), 3, "{pages:?}");
    assert!(pages.iter().all(|page| {
        page["url"]
            .as_str()
            .is_some_and(|url| url.contains("/site/"))
    }));
    let host = server.addr().to_string();
    let all = output(trawl(&data).args(["pages", "--host", &host])).await;
    assert_eq!(stdout(&all).lines().count(), 4, "{}", stdout(&all));
    let nothing = output(trawl(&data).args(["pages", "--host", "nowhere.test"])).await;
    assert_eq!(nothing.status.code(), Some(1));
    let archived = output(trawl(&data).args(["archive", "--crawl", &crawl_id])).await;
    assert!(archived.status.success(), "{}", stderr(&archived));
    assert!(
        stderr(&archived).contains("archiving 3 pages"),
        "{}",
        stderr(&archived)
    );
    let unknown = output(trawl(&data).args(["status", "01NOSUCHID"])).await;
    assert_eq!(unknown.status.code(), Some(1));
}

/// Issue "fetch hazards": `trawl extract` on a 200,000-deep local file ran 88 s with no
/// limit. The parsing budget refuses it before any tree is built.
#[tokio::test]
async fn extract_refuses_a_document_over_the_parsing_budget_at_once() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("deep.html");
    let depth = 200_000;
    let html = format!(
        "<html><body>{}deep text{}</body></html>",
        "<div>".repeat(depth),
        "</div>".repeat(depth)
    );
    std::fs::write(&path, html).expect("writes");
    let started = std::time::Instant::now();
    let run = output(trawl(dir.path()).arg("extract").arg(&path)).await;
    let took = started.elapsed();
    assert!(!run.status.success());
    assert!(
        stderr(&run).contains("extraction_limit"),
        "{}",
        stderr(&run)
    );
    assert!(took < std::time::Duration::from_secs(5), "took {took:?}");
}

/// Issue "wrong answers": `trawl read --from 5 --to 2` printed "lines 5-4" with exit 0.
#[tokio::test]
async fn read_refuses_a_range_that_ends_before_it_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let backwards =
        output(trawl(dir.path()).args(["read", "http://a.test/", "--from", "5", "--to", "2"]))
            .await;
    assert_eq!(backwards.status.code(), Some(2), "{}", stderr(&backwards));
    assert!(
        stderr(&backwards).contains("--to 2"),
        "{}",
        stderr(&backwards)
    );
    assert!(stdout(&backwards).is_empty());
    let zero = output(trawl(dir.path()).args(["read", "http://a.test/", "--from", "0"])).await;
    assert_eq!(zero.status.code(), Some(2), "{}", stderr(&zero));
}

/// Issue "wrong answers": `export --crawl NOPE` wrote a 326-byte file before saying nothing
/// matched.
#[tokio::test]
async fn export_with_nothing_matching_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let warc = dir.path().join("out.warc.gz");
    let run = output(
        trawl(dir.path())
            .args(["export", "--crawl", "NOPE", "--warc"])
            .arg(&warc),
    )
    .await;
    assert_eq!(run.status.code(), Some(1), "{}", stderr(&run));
    assert!(
        stderr(&run).contains("no stored page matched"),
        "{}",
        stderr(&run)
    );
    assert!(!warc.exists(), "no file is written");
    assert!(!warc.with_extension("partial").exists());
    // An existing file is left as it was.
    std::fs::write(&warc, b"earlier export").expect("writes");
    let again = output(
        trawl(dir.path())
            .args(["export", "--crawl", "NOPE", "--warc"])
            .arg(&warc),
    )
    .await;
    assert_eq!(again.status.code(), Some(1));
    assert_eq!(std::fs::read(&warc).expect("reads"), b"earlier export");
}

/// Issue "wrong answers": `trawl config` omitted unset keys though the README says it prints
/// every key. Every key of the README's configuration table is printed (the unset ones as
/// comments), and every key printed is in the table.
#[tokio::test]
async fn config_prints_every_key_the_readme_lists() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = output(trawl(dir.path()).arg("config")).await;
    assert!(run.status.success(), "{}", stderr(&run));
    let printed = stdout(&run);
    let table: toml::Table = printed.parse().expect("the output is TOML");
    // Sections nest (`[search.searxng]`): every leaf key, dotted.
    fn leaves(prefix: &str, table: &toml::Table, keys: &mut std::collections::BTreeSet<String>) {
        for (key, value) in table {
            let name = if prefix.is_empty() {
                key.clone()
            } else {
                format!("{prefix}.{key}")
            };
            match value {
                // An empty table is a map-valued key (`http.headers`), not a section.
                toml::Value::Table(section) if !section.is_empty() => leaves(&name, section, keys),
                _ => {
                    keys.insert(name);
                }
            }
        }
    }
    let mut keys = std::collections::BTreeSet::new();
    leaves("", &table, &mut keys);
    for line in printed.lines() {
        if let Some(key) = line
            .strip_prefix("# ")
            .and_then(|rest| rest.strip_suffix(" ="))
        {
            assert!(keys.insert(key.to_owned()), "{key} both set and unset");
        }
    }
    let readme = include_str!("../../README.md");
    let section = readme
        .split("\n## Configuration\n")
        .nth(1)
        .and_then(|rest| rest.split("\n### ").next())
        .expect("the README has a configuration section");
    let documented: std::collections::BTreeSet<String> = section
        .lines()
        .filter_map(|line| line.strip_prefix("| `"))
        .filter_map(|rest| rest.split_once('`'))
        .map(|(key, _)| key.to_owned())
        .collect();
    assert_eq!(
        keys, documented,
        "`trawl config` and the README's configuration table name different keys"
    );
}

/// Issue "wrong answers": `trawl help --help` failed.
#[tokio::test]
async fn help_has_help() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = output(trawl(dir.path()).args(["help", "--help"])).await;
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(stdout(&run).contains("help"), "{}", stdout(&run));
    let run = output(trawl(dir.path()).args(["help", "read"])).await;
    assert!(run.status.success(), "{}", stderr(&run));
    assert!(stdout(&run).contains("--from"), "{}", stdout(&run));
}

/// Issue "wrong answers": `--out` reused kept an earlier run's files in `pages/` silently.
#[tokio::test]
async fn run_says_when_out_holds_an_earlier_runs_files() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("out");
    let first = output(
        trawl(&dir.path().join("data"))
            .args(["run", "--quiet", "--allow-private-network", "--out"])
            .arg(&out)
            .arg(server.url("/article/1")),
    )
    .await;
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(
        !stderr(&first).contains("earlier run"),
        "{}",
        stderr(&first)
    );
    let second = output(
        trawl(&dir.path().join("data"))
            .args(["run", "--quiet", "--allow-private-network", "--out"])
            .arg(&out)
            .arg(server.url("/article/2")),
    )
    .await;
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(
        stderr(&second).contains("1 file(s) from an earlier run"),
        "{}",
        stderr(&second)
    );
    assert_eq!(jsonl(&out.join("pages.jsonl")).len(), 1);
}
