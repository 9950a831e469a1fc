//! What the local servers the benchmarks start as child processes (nginx, redis-server) share:
//! a free loopback port to listen on, and stopping by PID. A benchmark that includes
//! `common/nginx.rs` or `common/redis.rs` includes this file beside them as `mod server`.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A loopback TCP port that was free a moment ago.
pub(crate) fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("finding a free port: {e}"))?;
    listener
        .local_addr()
        .map(|addr| addr.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// Sends SIGTERM to `child` (by its PID, not its group) and waits up to `grace` for it to end.
/// Returns whether it has ended (also when it had before); if not, the caller kills it.
pub(crate) fn terminate(child: &mut Child, grace: Duration) -> bool {
    if let Ok(Some(_)) = child.try_wait() {
        return true;
    }
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    let deadline = Instant::now() + grace;
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}
