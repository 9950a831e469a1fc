//! The real `trawl` binary as a first-day user meets it: closed pipes, Ctrl-C, an idle
//! server's CPU, logs, `--json`, `--fail-on-error`, URL input, data directory and config
//! files, crawl globs and seeds, SSRF hints, completions and the manual page.

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use testkit::FixtureServer;

use crate::cli::{output, stderr, stdout, trawl};
use tokio::io::AsyncWriteExt as _;

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout)
        .unwrap_or_else(|error| panic!("stdout is JSON ({error}): {}", stdout(output)))
}

/// Sends `signal` (`INT`, `TERM`) to a child process.
async fn signal(child: &tokio::process::Child, signal: &str) {
    let pid = child.id().expect("the child runs").to_string();
    let sent = tokio::process::Command::new("kill")
        .args([&format!("-{signal}"), &pid])
        .status()
        .await
        .expect("kill runs");
    assert!(sent.success());
}

/// Runs `command` with its standard output a pipe whose reader is already gone (`| head`
/// once it has read its line).
async fn into_closed_pipe(command: &mut tokio::process::Command) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    command
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .await
        .expect("trawl runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_end_quietly_on_a_closed_pipe() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let url = server.url("/article/1");
    let run = output(
        trawl(&data)
            .args(["run", "--quiet", "--allow-private-network", "--archive"])
            .arg(&url),
    )
    .await;
    assert!(run.status.success(), "{}", stderr(&run));
    let page = dir.path().join("big.html");
    let paragraph = "<p>The river ran past the mill and the miller counted the sacks.</p>\n";
    std::fs::write(
        &page,
        format!(
            "<html><body><article>{}</article></body></html>",
            paragraph.repeat(3_000)
        ),
    )
    .expect("writes");

    // The longest word of the page's title: it is in the archive.
    let title = testkit::article_title(1);
    let word = title
        .split(|c: char| !c.is_alphanumeric())
        .max_by_key(|word| word.len())
        .expect("a title word")
        .to_owned();
    let commands: Vec<Vec<String>> = vec![
        vec!["extract".into(), page.display().to_string()],
        vec!["read".into(), url.clone()],
        vec!["status".into()],
        vec!["search".into(), word.clone()],
        vec!["config".into()],
        vec!["man".into()],
    ];
    for args in commands {
        let ended = into_closed_pipe(trawl(&data).args(&args)).await;
        assert_eq!(
            ended.status.code(),
            Some(0),
            "trawl {args:?} on a closed pipe: {}",
            stderr(&ended)
        );
        assert!(
            !stderr(&ended).contains("panicked") && !stderr(&ended).contains("Broken pipe"),
            "trawl {args:?}: {}",
            stderr(&ended)
        );
    }

    // Like grep: no hits is status 1, with --json too (which prints []).
    let none = output(trawl(&data).args(["search", "--json", "-k", "3", "zzqqxxnomatch"])).await;
    assert_eq!(none.status.code(), Some(1), "{}", stderr(&none));
    assert_eq!(json(&none), serde_json::json!([]));
    let limited = output(
        trawl(&data)
            .args(["search", "--json", "--limit", "1"])
            .arg(&word),
    )
    .await;
    assert_eq!(limited.status.code(), Some(0), "{}", stderr(&limited));
    assert_eq!(json(&limited).as_array().map(Vec::len), Some(1));
}

/// Ctrl-C on a polite crawl (robots.txt Crawl-delay: 1 s, so workers hold pages waiting
/// for their turn): the crawl stops at once instead of waiting the turns out, says so, and
/// its summary counts what the store has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_a_polite_crawl_at_once_and_counts_from_the_store() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut crawl = trawl(&data)
        .args([
            "crawl",
            "--quiet",
            "--allow-private-network",
            "--max-pages",
            "200",
        ])
        .arg(server.url("/site/3"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("crawl starts");
    // Pages come one a second (the fixture's Crawl-delay): wait for the third.
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.hits("/site/") < 3 {
        assert!(Instant::now() < deadline, "the crawl fetches pages");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    signal(&crawl, "INT").await;
    let asked = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(20), crawl.wait())
        .await
        .expect("the crawl stops")
        .expect("waits");
    let took = asked.elapsed();
    let mut out = String::new();
    let mut err = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut crawl.stdout.take().expect("stdout"), &mut out)
        .await
        .expect("reads");
    tokio::io::AsyncReadExt::read_to_string(&mut crawl.stderr.take().expect("stderr"), &mut err)
        .await
        .expect("reads");
    assert_eq!(ended.code(), Some(130), "{out}{err}");
    assert!(
        took < Duration::from_secs(4),
        "stopped {took:?} after Ctrl-C (the waits for politeness turns are cancelled): {out}{err}"
    );
    assert!(
        err.contains("stopping… (Ctrl-C again to quit now)"),
        "{err}"
    );
    assert!(out.contains("interrupted: crawl"), "{out}");
    // Every page request the fixture answered was stored and counted.
    let served = server.hits("/site/");
    assert!(
        out.contains(&format!(": {served} pages fetched")),
        "{served} pages were served: {out}"
    );
    // The pages it did not get to stay queued (in the store and in the queue).
    let status = output(trawl(&data).arg("status")).await;
    assert!(stdout(&status).contains("queued"), "{}", stdout(&status));
}

/// A second Ctrl-C quits at once, even while a fetch is still running (the first one waits
/// for running jobs, up to shutdown_timeout_secs).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ctrl_c_quits_at_once() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut run = trawl(dir.path())
        .args(["run", "--quiet", "--allow-private-network"])
        .arg(server.url("/slow/article/1?ms=20000"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.hits("/slow/") < 1 {
        assert!(Instant::now() < deadline, "the run fetches");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    signal(&run, "INT").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    signal(&run, "INT").await;
    let asked = Instant::now();
    let ended = tokio::time::timeout(Duration::from_secs(10), run.wait())
        .await
        .expect("the run quits")
        .expect("waits");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "{:?}",
        asked.elapsed()
    );
    let mut err = String::new();
    tokio::io::AsyncReadExt::read_to_string(&mut run.stderr.take().expect("stderr"), &mut err)
        .await
        .expect("reads");
    assert_eq!(ended.code(), Some(130), "{err}");
    assert!(err.contains("quitting now"), "{err}");
}

/// CPU time (user + system) of a process so far, in clock ticks, from /proc/PID/stat.
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    // Fields after the command name (which may hold spaces) start after its ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("a command name")
        .1
        .split_whitespace()
        .collect();
    // utime and stime are fields 14 and 15 of stat, so 11 and 12 after the name.
    fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime")
}

/// An idle `trawl serve` with its pools waits for work instead of polling: well under 5 % of
/// a core (it used a third to half of one), and a job pushed to it still runs at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_server_is_idle() {
    let site = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        listener.local_addr().expect("address").port()
    };
    let serve = trawl(dir.path())
        .args([
            "serve",
            "--allow-private-network",
            "--bind",
            &format!("127.0.0.1:{port}"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let pid = serve.id().expect("pid");
    let deadline = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(Instant::now() < deadline, "trawl serve listens");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Let the pools settle into their longest pause.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let ticks_per_second = 100.0; // USER_HZ on Linux
    let before = cpu_ticks(pid);
    let measured = Duration::from_secs(10);
    tokio::time::sleep(measured).await;
    let used = (cpu_ticks(pid) - before) as f64 / ticks_per_second;
    let share = used / measured.as_secs_f64();
    assert!(
        share < 0.05,
        "an idle trawl serve used {:.1} % of a core",
        share * 100.0
    );

    // Woken by the push, not by its next look at the queue.
    let client = reqwest::Client::new();
    let started = Instant::now();
    let answer = client
        .post(format!("http://127.0.0.1:{port}/v1/fetch"))
        .header("content-type", "application/json")
        .body(serde_json::json!({ "url": site.url("/article/1") }).to_string())
        .send()
        .await
        .expect("the API answers");
    assert!(answer.status().is_success(), "{answer:?}");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "an idle pool took {:?} to run a pushed job",
        started.elapsed()
    );
    signal(&serve, "TERM").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_are_plain_text_off_a_terminal_and_retries_are_counted_not_logged() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let url = server.url("/status/503");
    // Default logging (no TRAWL_LOG): a retried fetch logs no warning; the summary counts it.
    let quiet = output(
        trawl(dir.path())
            .env_remove("TRAWL_LOG")
            .env_remove("RUST_LOG")
            .env("TRAWL_RUNNER__RETRY_BASE_MS", "10")
            .env("TRAWL_RUNNER__RETRY_MAX_MS", "20")
            .args(["run", "--quiet", "--allow-private-network"])
            .arg(&url),
    )
    .await;
    assert!(quiet.status.success(), "{}", stderr(&quiet));
    assert!(
        !stderr(&quiet).contains("WARN"),
        "retries are detail: {}",
        stderr(&quiet)
    );
    assert!(stdout(&quiet).contains("retries: 2"), "{}", stdout(&quiet));

    // Logs asked for, on a pipe: no colour codes.
    let verbose = output(
        trawl(dir.path())
            .env("TRAWL_LOG", "trawl=debug")
            .env("TRAWL_RUNNER__RETRY_BASE_MS", "10")
            .env("TRAWL_RUNNER__RETRY_MAX_MS", "20")
            .args(["run", "--quiet", "--allow-private-network"])
            .arg(&url),
    )
    .await;
    assert!(
        stderr(&verbose).contains("will retry"),
        "{}",
        stderr(&verbose)
    );
    assert!(
        !stderr(&verbose).contains('\u{1b}'),
        "no ANSI codes off a terminal: {:?}",
        stderr(&verbose)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_and_fail_on_error() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let urls = [server.url("/article/1"), server.url("/status/404")];
    let run = output(
        trawl(dir.path())
            .args(["run", "--quiet", "--allow-private-network", "--json"])
            .args(&urls),
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    let summary = json(&run);
    assert_eq!(summary["total"], 2, "{summary}");
    assert_eq!(summary["succeeded"], 1, "{summary}");
    assert_eq!(summary["failed"], 1, "{summary}");
    assert_eq!(summary["errors"][0]["code"], "http_status", "{summary}");
    assert!(summary["batch_id"].is_string(), "{summary}");

    let failing = output(
        trawl(dir.path())
            .args([
                "run",
                "--quiet",
                "--allow-private-network",
                "--fail-on-error",
            ])
            .args(&urls),
    )
    .await;
    assert_eq!(failing.status.code(), Some(1), "{}", stderr(&failing));
    let passing = output(
        trawl(dir.path())
            .args([
                "run",
                "--quiet",
                "--allow-private-network",
                "--fail-on-error",
            ])
            .arg(&urls[0]),
    )
    .await;
    assert_eq!(passing.status.code(), Some(0), "{}", stderr(&passing));

    let read = output(
        trawl(dir.path())
            .args(["read", "--json", "--to", "2"])
            .arg(&urls[0]),
    )
    .await;
    assert!(read.status.success(), "{}", stderr(&read));
    let range = json(&read);
    assert_eq!(range["from"], 1);
    assert_eq!(range["lines"].as_array().map(Vec::len), Some(2), "{range}");

    let config = output(trawl(dir.path()).args(["config", "--json"])).await;
    assert!(config.status.success(), "{}", stderr(&config));
    assert_eq!(json(&config)["runner"]["concurrency"], 32);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawl_json_fetches_the_seed_whatever_the_globs() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let crawl = output(
        trawl(dir.path())
            .env("TRAWL_POLITENESS__MIN_DELAY_MS", "0")
            .args([
                "crawl",
                "--quiet",
                "--allow-private-network",
                "--ignore-robots",
                "--max-pages",
                "5",
                "--include",
                "*.html",
                "--json",
            ])
            .arg(server.url("/site/4")),
    )
    .await;
    assert!(crawl.status.success(), "{}", stderr(&crawl));
    let summary = json(&crawl);
    let counters = &summary["crawl"]["counters"];
    assert_eq!(counters["fetched"], 1, "the seed is fetched: {summary}");
    assert!(
        counters["skipped_scope"].as_u64() >= Some(1),
        "its links are not: {summary}"
    );
    assert_eq!(summary["interrupted"], false);

    let text = output(
        trawl(dir.path())
            .env("TRAWL_POLITENESS__MIN_DELAY_MS", "0")
            .args([
                "crawl",
                "--quiet",
                "--allow-private-network",
                "--ignore-robots",
                "--max-pages",
                "5",
                "--include",
                "*.html",
            ])
            .arg(server.url("/site/5")),
    )
    .await;
    assert!(
        stdout(&text).contains("skipped by --include"),
        "{}",
        stdout(&text)
    );
    let help = output(trawl(dir.path()).args(["crawl", "--help"])).await;
    assert!(stdout(&help).contains("stops at `/`"), "{}", stdout(&help));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn urls_are_trimmed_and_read_from_dash_or_a_pipe() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let padded = format!("  {}\t", server.url("/article/1"));
    let trimmed = output(
        trawl(dir.path())
            .args(["run", "--quiet", "--allow-private-network", "--json"])
            .arg(&padded),
    )
    .await;
    assert_eq!(json(&trimmed)["succeeded"], 1, "{}", stdout(&trimmed));

    for args in [vec!["run", "-"], vec!["run"]] {
        let mut child = trawl(dir.path())
            .args(&args)
            .args(["--quiet", "--allow-private-network", "--json"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawns");
        let mut stdin = child.stdin.take().expect("stdin");
        let list = format!(
            "  {}  \n\n{}\n",
            server.url("/article/2"),
            server.url("/article/3")
        );
        stdin.write_all(list.as_bytes()).await.expect("writes");
        drop(stdin);
        let run = child.wait_with_output().await.expect("waits");
        assert!(run.status.success(), "{args:?}: {}", stderr(&run));
        assert_eq!(json(&run)["succeeded"], 2, "{args:?}: {}", stdout(&run));
    }
}

#[tokio::test]
async fn data_directory_and_configuration_files() {
    let dir = tempfile::tempdir().expect("tempdir");
    // A command that reads the store says what is missing.
    let status = output(trawl(&dir.path().join("nothing-here")).arg("status")).await;
    assert_eq!(status.status.code(), Some(2));
    assert!(
        stderr(&status).contains("no data directory"),
        "{}",
        stderr(&status)
    );

    // The user's file, under ./trawl.toml.
    let user = dir.path().join("xdg");
    std::fs::create_dir_all(user.join("trawl")).expect("mkdir");
    std::fs::write(
        user.join("trawl/trawl.toml"),
        "namespace = \"from-user\"\n[runner]\nconcurrency = 7\n",
    )
    .expect("writes");
    let work = dir.path().join("work");
    std::fs::create_dir_all(&work).expect("mkdir");
    let config = output(
        trawl(dir.path())
            .current_dir(&work)
            .env("XDG_CONFIG_HOME", &user)
            .args(["config", "--json"]),
    )
    .await;
    assert!(config.status.success(), "{}", stderr(&config));
    assert_eq!(json(&config)["namespace"], "from-user");
    std::fs::write(work.join("trawl.toml"), "namespace = \"from-here\"\n").expect("writes");
    let config = output(
        trawl(dir.path())
            .current_dir(&work)
            .env("XDG_CONFIG_HOME", &user)
            .args(["config", "--json"]),
    )
    .await;
    let config = json(&config);
    assert_eq!(config["namespace"], "from-here");
    assert_eq!(config["runner"]["concurrency"], 7);

    // A bad key is named once.
    std::fs::write(work.join("trawl.toml"), "[http]\nmax_bytez = 5\n").expect("writes");
    let bad = output(trawl(dir.path()).current_dir(&work).arg("config")).await;
    assert_eq!(bad.status.code(), Some(2));
    let message = stderr(&bad);
    assert!(message.contains("max_bytez"), "{message}");
    assert_eq!(
        message.matches("TOML file").count(),
        1,
        "said once: {message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocked_destinations_name_the_flag_that_allows_them() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let url = server.url("/article/1");
    let run = output(trawl(dir.path()).args(["run", "--quiet"]).arg(&url)).await;
    assert!(
        stdout(&run).contains("--allow-private-network"),
        "{}",
        stdout(&run)
    );

    let refused = output(trawl(dir.path()).arg("enqueue").arg(&url)).await;
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        stderr(&refused).contains("--allow-private-network"),
        "{}",
        stderr(&refused)
    );
    let queued = output(
        trawl(dir.path())
            .args(["enqueue", "--allow-private-network"])
            .arg(&url),
    )
    .await;
    assert!(queued.status.success(), "{}", stderr(&queued));
    let remote = output(
        trawl(dir.path())
            .args([
                "enqueue",
                "--server",
                "http://127.0.0.1:9/",
                "--allow-private-network",
            ])
            .arg(&url),
    )
    .await;
    assert_eq!(remote.status.code(), Some(2));
    assert!(
        stderr(&remote).contains("the server's policy decides"),
        "{}",
        stderr(&remote)
    );
}

#[tokio::test]
async fn completions_man_page_and_search_limit() {
    let dir = tempfile::tempdir().expect("tempdir");
    for shell in ["bash", "zsh", "fish"] {
        let script = output(trawl(dir.path()).args(["completions", shell])).await;
        assert!(script.status.success(), "{}", stderr(&script));
        assert!(
            stdout(&script).contains("crawl") && stdout(&script).contains("fail-on-error"),
            "{shell}: {}",
            stdout(&script)
        );
    }
    let man = output(trawl(dir.path()).arg("man")).await;
    assert!(man.status.success(), "{}", stderr(&man));
    assert!(
        stdout(&man).starts_with(".ie") || stdout(&man).contains(".TH"),
        "{}",
        stdout(&man)
    );

    let help = output(trawl(dir.path()).args(["search", "--help"])).await;
    let help = stdout(&help);
    assert!(help.contains("-k, --limit <N>"), "{help}");
    assert!(help.contains("1 when there are none"), "{help}");
}
