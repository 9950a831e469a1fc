//! `redis-server` for the benchmarks: a child process of the benchmark (never a system
//! service) on a free loopback port, without persistence (`--save '' --appendonly no`),
//! refusing writes rather than evicting keys when full (`--maxmemory-policy noeviction`), and
//! stopped by its PID (SIGTERM, SIGKILL after 5 s) when the [`RedisServer`] value is dropped.
//! It stays in the benchmark's process group, so a Ctrl-C stops it too.
//!
//! Needs `common/server.rs` included beside it as `mod server`.
//!
//! Not here: configuration beyond that, or a client; the benchmark prints what it started.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::server;

/// A `redis-server` child process; stopped when dropped.
pub(crate) struct RedisServer {
    child: Child,
    /// The loopback port it listens on.
    pub(crate) port: u16,
    log: PathBuf,
}

impl RedisServer {
    /// Starts `binary` with its working files under `dir` (created if missing) and its output
    /// in the file `log`, and waits (up to 10 s) until it answers PING.
    pub(crate) fn start(binary: &Path, dir: &Path, log: &Path) -> Result<RedisServer, String> {
        let port = server::free_port()?;
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let log_file =
            std::fs::File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
        let child = Command::new(binary)
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args(["--save", "", "--appendonly", "no"])
            .args(["--maxmemory-policy", "noeviction"])
            .args(["--daemonize", "no"])
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::null())
            .stdout(
                log_file
                    .try_clone()
                    .map_err(|e| format!("redis log: {e}"))?,
            )
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", binary.display()))?;
        let mut server = RedisServer {
            child,
            port,
            log: log.to_owned(),
        };
        server.wait_ready(Duration::from_secs(10))?;
        Ok(server)
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `redis://127.0.0.1:{port}/`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Waits until the server answers PING; fails, with its log, if it exits or `limit` passes.
    fn wait_ready(&mut self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "redis-server exited ({status}): {}",
                    self.log_text()
                ));
            }
            if self.answers_ping() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "redis-server did not answer PING within {} s: {}",
                    limit.as_secs(),
                    self.log_text()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Whether a PING on a new connection gets `+PONG`.
    fn answers_ping(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut answer = [0_u8; 16];
        stream.write_all(b"PING\r\n").is_ok()
            && stream
                .read(&mut answer)
                .is_ok_and(|n| answer[..n].starts_with(b"+PONG"))
    }

    /// Its log, for error messages.
    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .trim()
            .to_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if !server::terminate(&mut self.child, Duration::from_secs(5)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
