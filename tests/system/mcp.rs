//! The MCP server with a real MCP host: the Python `mcp` SDK (pinned in `scripts/test.sh`,
//! from the test virtualenv) runs `tests/mcp_client.py` against the real `trawl` binary, over
//! stdio (`trawl mcp`) and over streamable HTTP (`/mcp` on `trawl serve`, behind two tenants'
//! tokens), with the fixture site on 127.0.0.1 and real Chromium for the browser tools. The
//! script checks every tool, resources, progress, cancellation, images and tool errors; this
//! module asserts it got to the end and prints its latency figures.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use testkit::FixtureServer;

/// The pinned SDK version (`scripts/test.sh` installs it).
const MCP_SDK: &str = "2.3.0";

/// The test virtualenv's python, with the pinned `mcp` SDK; a clear failure (never a silent
/// pass) when it is missing.
#[allow(clippy::disallowed_methods)]
fn python() -> PathBuf {
    let venv = match std::env::var_os("TRAWL_VENV") {
        Some(venv) => PathBuf::from(venv),
        None => {
            let home = std::env::var_os("HOME").expect("HOME is set");
            Path::new(&home).join(".cache/trawl-venv")
        }
    };
    let python = venv.join("bin/python");
    let version = std::process::Command::new(&python)
        .args([
            "-c",
            "import importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output();
    let found = version
        .as_ref()
        .ok()
        .filter(|output| output.status.success())
        .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_owned());
    assert_eq!(
        found.as_deref(),
        Some(MCP_SDK),
        "the Python MCP SDK {MCP_SDK} is not in {}: install it with `python3 -m venv {0} && {0}/bin/pip install mcp=={MCP_SDK}` (scripts/test.sh does)",
        venv.display()
    );
    python
}

/// The search providers' section of the config: the fixture's SearxNG and DuckDuckGo
/// look-alikes, DuckDuckGo unpaced.
fn search_config(site: &FixtureServer) -> String {
    format!(
        "[search.searxng]\nurl = \"{}\"\n[search.duckduckgo]\nhtml_url = \"{}\"\ninstant_url = \"{}\"\nimages_url = \"{}\"\nmin_interval_ms = 0\n",
        site.url("/searxng/"),
        site.url("/ddg/html/"),
        site.url("/ddg/instant/"),
        site.url("/ddg/images/"),
    )
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py")
}

/// Runs the client script with `args`, and asserts it passed every check.
async fn run_client(args: &[String]) -> String {
    let mut command = tokio::process::Command::new(python());
    command
        .arg(script())
        .args(args)
        .kill_on_drop(true)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let output = tokio::time::timeout(Duration::from_secs(600), command.output())
        .await
        .expect("the MCP client finishes within 10 minutes")
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.lines().last() == Some("ALL OK"),
        "the MCP client failed\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for line in stdout.lines().filter(|line| line.starts_with("latency")) {
        println!("{line}");
    }
    stdout
}

fn assert_checked(stdout: &str, checks: &[&str]) {
    for check in checks {
        assert!(
            stdout
                .lines()
                .any(|line| line == format!("ok {check}")
                    || line.starts_with(&format!("ok {check} "))),
            "no `ok {check}` in\n{stdout}"
        );
    }
}

const CHECKS: &[&str] = &[
    "list_tools",
    "web_search",
    "web_fetch",
    "progress",
    "job_status",
    "web_read_grep",
    "tool_errors",
    "resources",
    "page_list",
    "archive_search",
    "crawl_start_status",
    "crawl_cancelled_with_its_call",
    "browser",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_host_uses_every_tool_over_stdio() {
    let site = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("trawl.toml");
    std::fs::write(&config, search_config(&site)).expect("config written");
    let stdout = run_client(&[
        "stdio".to_owned(),
        site.url(""),
        env!("CARGO_BIN_EXE_trawl").to_owned(),
        dir.path().join("data").display().to_string(),
        config.display().to_string(),
    ])
    .await;
    assert_checked(&stdout, CHECKS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_host_uses_every_tool_over_streamable_http_behind_tokens() {
    let site = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("free port");
        listener.local_addr().expect("address").port()
    };
    let (mine, theirs) = ("a-token-of-tenant-acme", "a-token-of-tenant-other");
    let config = dir.path().join("trawl.toml");
    std::fs::write(
        &config,
        format!(
            "[api]\ntokens = [{{ token = \"{mine}\", tenant = \"acme\" }}, {{ token = \"{theirs}\", tenant = \"other\" }}]\n{}",
            search_config(&site)
        ),
    )
    .expect("config written");
    let mut serve = crate::cli::trawl(&dir.path().join("data"))
        .arg("--config")
        .arg(&config)
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
    let stdout = run_client(&[
        "http".to_owned(),
        site.url(""),
        format!("http://127.0.0.1:{port}/mcp"),
        mine.to_owned(),
        theirs.to_owned(),
    ])
    .await;
    assert_checked(&stdout, CHECKS);
    assert_checked(&stdout, &["bearer_required", "tenants"]);
    serve.start_kill().expect("serve stops");
    let _ = serve.wait().await;
}
