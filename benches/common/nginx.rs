//! nginx for the benchmarks: a static site served from `{root}/www` on a free loopback port,
//! as a child process of the benchmark (never a system service), stopped by its PID when the
//! [`Nginx`] value is dropped. Optional: extra `server` directives (redirect `location`s, say)
//! and an access log of `$request_uri $status` lines the benchmark can read.
//!
//! [`with_site_root`] gives a benchmark the temporary directory to use as `root`. Needs
//! `common/server.rs` included beside it as `mod server`.
//!
//! Not here: TLS, other hosts, or tuning beyond what a local benchmark needs.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server::{self, free_port};

/// How to start nginx beyond serving `{root}/www`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Options {
    /// Directives added to the `server` block, e.g. `location = /old { return 301 /new; }`.
    pub(crate) server_extra: String,
    /// Write an access log (`$request_uri $status` per request) to `logs/access.log` under
    /// the prefix; off by default, since it costs nginx a write per request.
    pub(crate) access_log: bool,
    /// A path that must answer 200 before nginx counts as started; `None`: any HTTP answer
    /// (the site may be written after nginx starts).
    pub(crate) ready_path: Option<String>,
}

/// nginx as a child process; stopped (by its PID) when dropped.
pub(crate) struct Nginx {
    child: Child,
    /// The loopback port it listens on.
    pub(crate) port: u16,
    prefix: PathBuf,
}

impl Nginx {
    /// Starts nginx serving `{root}/www` on `127.0.0.1` (its files under `{root}/nginx`) and
    /// waits until it answers; retries on another port if the chosen one is taken.
    pub(crate) fn start(root: &Path, options: &Options) -> Result<Nginx, String> {
        let nginx = find_in_path("nginx").ok_or("nginx not found (apt-get install nginx)")?;
        let prefix = root.join("nginx");
        std::fs::create_dir_all(prefix.join("logs"))
            .map_err(|e| format!("creating {}: {e}", prefix.display()))?;
        let mut last_error = String::new();
        // The free port is found by binding :0 and releasing it; retry if another process
        // takes it first.
        for _ in 0..3 {
            let port = free_port()?;
            let conf = prefix.join("nginx.conf");
            std::fs::write(&conf, nginx_conf(root, &prefix, port, options))
                .map_err(|e| format!("writing {}: {e}", conf.display()))?;
            let error_log = prefix.join("logs").join("error.log");
            let child = Command::new(&nginx)
                .arg("-p")
                .arg(&prefix)
                .arg("-c")
                .arg(&conf)
                .arg("-e")
                .arg(&error_log)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(
                    std::fs::File::create(prefix.join("logs").join("stderr.log"))
                        .map(Stdio::from)
                        .unwrap_or_else(|_| Stdio::null()),
                )
                .spawn()
                .map_err(|e| format!("starting {}: {e}", nginx.display()))?;
            let mut server = Nginx {
                child,
                port,
                prefix: prefix.clone(),
            };
            match server.wait_ready(options.ready_path.as_deref(), Duration::from_secs(10)) {
                Ok(()) => {
                    eprintln!(
                        "nginx (pid {}) serving on 127.0.0.1:{port}",
                        server.child.id()
                    );
                    return Ok(server);
                }
                Err(error) => last_error = error, // dropping `server` stops it
            }
        }
        Err(format!("nginx did not start: {last_error}"))
    }

    /// `http://127.0.0.1:{port}`.
    pub(crate) fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn wait_ready(&mut self, path: Option<&str>, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        let probe = path.unwrap_or("/");
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!("nginx exited with {status}: {}", self.logs()));
            }
            if let Ok(status) = http_status(self.port, probe) {
                if status == 200 || path.is_none() {
                    return Ok(());
                }
                return Err(format!("nginx answered GET {probe} with status {status}"));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "nginx did not answer within {limit:?}: {}",
                    self.logs()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// nginx's stderr and error log, for error messages.
    pub(crate) fn logs(&self) -> String {
        let mut text = String::new();
        for name in ["stderr.log", "error.log"] {
            if let Ok(log) = std::fs::read_to_string(self.prefix.join("logs").join(name)) {
                text.push_str(log.trim());
                text.push(' ');
            }
        }
        text
    }

    /// The access log file (written only with [`Options::access_log`]).
    pub(crate) fn access_log_path(&self) -> PathBuf {
        self.prefix.join("logs").join("access.log")
    }

    /// The requests logged so far: `(request URI, status)`, in order.
    pub(crate) fn access_log(&self) -> Result<Vec<(String, u16)>, String> {
        let path = self.access_log_path();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        text.lines()
            .filter(|line| !line.trim().is_empty())
            .map(|line| {
                line.rsplit_once(' ')
                    .and_then(|(uri, status)| Some((uri.to_owned(), status.parse().ok()?)))
                    .ok_or_else(|| format!("{}: unexpected line {line:?}", path.display()))
            })
            .collect()
    }

    /// Empties the access log (nginx appends, so it goes on writing at the new end).
    pub(crate) fn clear_access_log(&self) -> Result<(), String> {
        let path = self.access_log_path();
        std::fs::File::create(&path)
            .map(drop)
            .map_err(|e| format!("truncating {}: {e}", path.display()))
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        let pid = self.child.id();
        // SIGTERM: the master stops its worker, then exits. SIGKILL if it takes too long.
        if !server::terminate(&mut self.child, Duration::from_secs(5)) {
            eprintln!("nginx (pid {pid}) did not stop on SIGTERM; killing it");
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs `bench` in a fresh temporary directory (named `{prefix}…`) that nginx's worker can
/// read (mode 755: it may run as another user), then removes the directory, or keeps it and
/// prints its path when `keep` is set. Returns what `bench` returned.
pub(crate) fn with_site_root<T>(
    prefix: &str,
    keep: bool,
    bench: impl FnOnce(&Path) -> Result<T, String>,
) -> Result<T, String> {
    let tmp = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| format!("creating a temporary directory: {e}"))?;
    let root = tmp.path().to_owned();
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("chmod {}: {e}", root.display()))?;
    let result = bench(&root);
    if keep {
        let kept = tmp.keep();
        eprintln!("kept {}", kept.display());
    } else if let Err(error) = tmp.close() {
        eprintln!("warning: could not remove {}: {error}", root.display());
    }
    result
}

/// The configuration: one worker, no daemon, files under `prefix`, `{root}/www` served as
/// `text/html` unless a `types` block in [`Options::server_extra`] says otherwise.
fn nginx_conf(root: &Path, prefix: &Path, port: u16, options: &Options) -> String {
    let p = prefix.display();
    let user = if is_root() { "user root;\n" } else { "" };
    let access_log = if options.access_log {
        format!(
            "log_format requests '$request_uri $status';\n    access_log {p}/logs/access.log requests;"
        )
    } else {
        "access_log off;".to_owned()
    };
    let extra: String = options
        .server_extra
        .lines()
        .map(|line| format!("        {line}\n"))
        .collect();
    format!(
        "{user}worker_processes 1;
daemon off;
pid {p}/nginx.pid;
error_log {p}/logs/error.log warn;
events {{ worker_connections 1024; }}
http {{
    default_type text/html;
    {access_log}
    sendfile on;
    tcp_nopush on;
    keepalive_requests 10000;
    keepalive_timeout 65;
    client_body_temp_path {p}/client_body;
    proxy_temp_path {p}/proxy;
    fastcgi_temp_path {p}/fastcgi;
    uwsgi_temp_path {p}/uwsgi;
    scgi_temp_path {p}/scgi;
    server {{
        listen 127.0.0.1:{port};
        root {www};
        location / {{ }}
{extra}    }}
}}
",
        www = root.join("www").display()
    )
}

/// Whether this process runs as root (nginx then needs `user root;` to read the site).
pub(crate) fn is_root() -> bool {
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// One HTTP/1.0 GET to `127.0.0.1:{port}`; returns the status code.
pub(crate) fn http_status(port: u16, path: &str) -> std::io::Result<u16> {
    let addr = ([127, 0, 0, 1], port).into();
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(1))?;
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut head = [0_u8; 64];
    let mut len = 0;
    while len < 12 {
        let read = stream.read(&mut head[len..])?;
        if read == 0 {
            break;
        }
        len += read;
    }
    let line = String::from_utf8_lossy(&head[..len]);
    line.split_whitespace()
        .nth(1)
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {line:?}")))
}

/// An executable named `name` on `PATH` or in the sbin directories (where nginx lives, often
/// not on a user's `PATH`).
pub(crate) fn find_in_path(name: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect())
        .unwrap_or_default();
    dirs.extend(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from));
    dirs.into_iter()
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}
