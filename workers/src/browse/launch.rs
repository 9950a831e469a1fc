//! Starting and stopping Chromium: a temporary profile directory per browser, the launcher
//! that ties the browser's life to the worker's, the command line (headless, behind the egress
//! proxy), and the sweep of profiles a killed worker left behind.
//!
//! Not here: when to start, recycle or replace a browser (`pool`), nor contexts and tabs
//! (`lease`, `tab`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use chromiumoxide::browser::{Browser, BrowserConfig};
use futures_util::StreamExt;

use super::{Config, Error};

/// A started browser.
pub(super) struct Running {
    browser: Option<Browser>,
    handler: tokio::task::JoinHandle<()>,
    alive: Arc<AtomicBool>,
    dir: PathBuf,
    pub(super) pid: Option<u32>,
    pub(super) contexts: AtomicU64,
    pub(super) late_pings: AtomicU32,
}

impl Running {
    pub(super) fn browser(&self) -> &Browser {
        self.browser
            .as_ref()
            .expect("a running browser has its handle until dropped")
    }

    pub(super) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Relaxed)
    }
}

impl Running {
    /// Takes the browser and its directory out, for [`close_browser`].
    pub(super) fn take(&mut self) -> (Option<Browser>, PathBuf) {
        self.handler.abort();
        (self.browser.take(), std::mem::take(&mut self.dir))
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        let (browser, dir) = self.take();
        // No runtime left: the child is killed on drop and the profile is swept later.
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(close_browser(browser, dir));
        }
    }
}

/// Closes a browser (killing it when it does not close within 5 s), reaps it, and removes
/// its directory.
pub(super) async fn close_browser(browser: Option<Browser>, dir: PathBuf) {
    if let Some(mut browser) = browser {
        let closed = tokio::time::timeout(Duration::from_secs(5), browser.close()).await;
        if !matches!(closed, Ok(Ok(_))) {
            let _ = browser.kill().await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(10), browser.wait()).await;
    }
    if !dir.as_os_str().is_empty() {
        let _ = tokio::fs::remove_dir_all(&dir).await;
    }
}

impl Running {
    /// Starts Chromium on `config`, its requests going to the egress proxy at `proxy_server`
    /// (a `--proxy-server` value), with a fresh profile directory.
    pub(super) async fn launch(config: &Config, proxy_server: &str) -> Result<Running, Error> {
        let path = config.executable.display().to_string();
        let launch_error = |message: String| Error::Launch {
            path: path.clone(),
            message,
        };
        if !config.executable.exists() {
            return Err(launch_error(
                "no such file; install Chromium (`apt-get install chromium`) or set browse.executable"
                    .to_owned(),
            ));
        }
        let dir = profile_root(config).join(format!(
            "trawl-chromium-{}-{}",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let profile = dir.join("profile");
        std::fs::create_dir_all(&profile).map_err(|error| {
            launch_error(format!("could not create {}: {error}", dir.display()))
        })?;
        let executable = death_tied_executable(&dir, &config.executable)
            .map_err(|error| launch_error(format!("could not write the launcher: {error}")))?;
        let mut builder = BrowserConfig::builder()
            .chrome_executable(executable)
            .new_headless_mode()
            .user_data_dir(&profile)
            .viewport(None)
            .window_size(1280, 800)
            .launch_timeout(Duration::from_secs(config.launch_timeout_secs))
            .request_timeout(Duration::from_secs(config.command_timeout_secs))
            .args([
                "disable-gpu",
                "no-first-run",
                "no-default-browser-check",
                "disable-background-networking",
                "disable-component-update",
                "disable-sync",
                "disable-quic",
                "disable-extensions",
                "disable-dev-shm-usage",
                "mute-audio",
                "disable-features=NetworkPrediction,MediaRouter,OptimizationHints,DialMediaRouteProvider",
                "force-webrtc-ip-handling-policy=disable_non_proxied_udp",
                "dns-prefetch-disable",
            ])
            .arg(format!("proxy-server={proxy_server}"))
            // Without this Chromium sends loopback traffic around the proxy.
            .arg("proxy-bypass-list=<-loopback>");
        if running_as_root() {
            builder = builder.no_sandbox();
        }
        let browser_config = builder.build().map_err(launch_error)?;
        let launched = Browser::launch(browser_config).await;
        let (mut browser, mut handler) = match launched {
            Ok(launched) => launched,
            Err(error) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(launch_error(error.to_string()));
            }
        };
        let child = browser.get_mut_child();
        let pid = child.as_ref().and_then(|child| child.inner.id());
        // Chromium logs to stderr; a pipe nobody reads fills up and stalls the browser.
        if let Some(stderr) = child.and_then(|child| child.stderr.take()) {
            let mut stderr = stderr.into_inner();
            tokio::spawn(async move {
                let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            });
        }
        let alive = Arc::new(AtomicBool::new(true));
        let handler_alive = alive.clone();
        // The handler drives the websocket: it must keep running, errors and all.
        let handler = tokio::spawn(async move {
            while let Some(event) = handler.next().await {
                if let Err(error) = event {
                    tracing::debug!(error = %error, "cdp");
                }
            }
            handler_alive.store(false, Ordering::Relaxed);
        });
        tracing::info!(pid = ?pid, "browser started");
        Ok(Running {
            browser: Some(browser),
            handler,
            alive,
            dir,
            pid,
            contexts: AtomicU64::new(0),
            late_pings: AtomicU32::new(0),
        })
    }
}

pub(super) fn profile_root(config: &Config) -> PathBuf {
    config
        .profile_root
        .clone()
        .unwrap_or_else(std::env::temp_dir)
}

/// Removes `trawl-chromium-*` directories under `root` older than `age` (left by a killed
/// worker).
pub(super) fn sweep_stale_profiles(root: &Path, age: Duration) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("trawl-chromium-") {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|elapsed| elapsed > age);
        if old {
            match std::fs::remove_dir_all(entry.path()) {
                Ok(()) => {
                    tracing::info!(path = %entry.path().display(), "swept a stale browser profile")
                }
                Err(error) => tracing::debug!(error = %error, "could not sweep a stale profile"),
            }
        }
    }
}

/// The browser must die with its worker, even on SIGKILL. `setpriv --pdeathsig KILL` (from
/// util-linux) asks the kernel for that; a two-line launcher in the profile's directory
/// `exec`s it, so the browser keeps the launcher's process id. Without setpriv the browser
/// is only killed when the pool is dropped.
fn death_tied_executable(dir: &Path, executable: &Path) -> std::io::Result<PathBuf> {
    let setpriv = Path::new("/usr/bin/setpriv");
    if !setpriv.exists() {
        return Ok(executable.to_path_buf());
    }
    let launcher = dir.join("chromium.sh");
    let quoted = executable.display().to_string().replace('\'', r"'\''");
    std::fs::write(
        &launcher,
        format!("#!/bin/sh\nexec /usr/bin/setpriv --pdeathsig KILL -- '{quoted}' \"$@\"\n"),
    )?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&launcher, std::fs::Permissions::from_mode(0o700))?;
    Ok(launcher)
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|line| line.starts_with("Uid:"))
                .and_then(|line| line.split_whitespace().nth(2).map(|uid| uid == "0"))
        })
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_profiles_are_swept_and_fresh_ones_kept() {
        let root = std::env::temp_dir().join(format!("trawl-sweep-{}", uuid::Uuid::new_v4()));
        let fresh = root.join("trawl-chromium-fresh");
        let other = root.join("unrelated");
        std::fs::create_dir_all(&fresh).expect("mkdir");
        std::fs::create_dir_all(&other).expect("mkdir");
        sweep_stale_profiles(&root, Duration::from_secs(3_600));
        assert!(fresh.exists());
        sweep_stale_profiles(&root, Duration::ZERO);
        assert!(!fresh.exists());
        assert!(other.exists());
        std::fs::remove_dir_all(&root).expect("cleanup");
    }
}
