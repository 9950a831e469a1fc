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
        let (executable, found_by) =
            config.find_executable().map_err(|searched| Error::Launch {
                path: "chromium".to_owned(),
                message: format!(
                    "no Chromium found (looked in {searched}); install Chromium (`apt-get install \
                 chromium`) or set browse.executable"
                ),
            })?;
        let path = executable.display().to_string();
        let launch_error = |message: String| Error::Launch {
            path: path.clone(),
            message,
        };
        if !executable.exists() {
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
        let launcher = death_tied_executable(&dir, &executable)
            .map_err(|error| launch_error(format!("could not write the launcher: {error}")))?;
        let builder = BrowserConfig::builder().chrome_executable(launcher);
        let builder = if config.headless {
            builder.new_headless_mode()
        } else {
            builder.with_head()
        };
        let mut builder = builder
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
        tracing::info!(pid = ?pid, executable = %path, found_by, headless = config.headless, "browser started");
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

/// The system's Chromium names, looked for on `PATH` and then in these directories.
const SYSTEM_NAMES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome-stable",
    "google-chrome",
];
const SYSTEM_DIRS: &[&str] = &[
    "/usr/bin",
    "/usr/local/bin",
    "/snap/bin",
    "/opt/google/chrome",
];

/// The system's Chromium, else the newest Playwright-installed one; `Err`: where it looked.
// `PATH`, `HOME` and `PLAYWRIGHT_BROWSERS_PATH` say where programs are installed, not how
// trawl is configured (that is read once, in config.rs).
#[allow(clippy::disallowed_methods)]
pub(super) fn find_system_or_playwright() -> Result<(PathBuf, &'static str), String> {
    let mut dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).collect())
        .unwrap_or_default();
    dirs.extend(SYSTEM_DIRS.iter().map(PathBuf::from));
    for name in SYSTEM_NAMES {
        for dir in &dirs {
            let candidate = dir.join(name);
            if is_executable(&candidate) {
                return Ok((candidate, "the system's Chromium"));
            }
        }
    }
    let cache = std::env::var_os("PLAYWRIGHT_BROWSERS_PATH")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache/ms-playwright"))
        });
    if let Some(cache) = &cache
        && let Some(found) = newest_playwright_chromium(cache)
    {
        return Ok((found, "a Playwright-installed Chromium"));
    }
    Err(format!(
        "{} on PATH and in {}, and {}",
        SYSTEM_NAMES.join(", "),
        SYSTEM_DIRS.join(", "),
        cache.map_or_else(
            || "no Playwright cache".to_owned(),
            |cache| cache.join("chromium-*").display().to_string()
        )
    ))
}

/// `chromium-<revision>/chrome-linux*/chrome` under Playwright's cache, the highest revision.
fn newest_playwright_chromium(cache: &Path) -> Option<PathBuf> {
    let mut found: Vec<(u64, PathBuf)> = std::fs::read_dir(cache)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let revision: u64 = name.strip_prefix("chromium-")?.parse().ok()?;
            ["chrome-linux64", "chrome-linux"]
                .iter()
                .map(|dir| entry.path().join(dir).join("chrome"))
                .find(|path| is_executable(path))
                .map(|path| (revision, path))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, path)| path)
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
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
    fn the_newest_playwright_chromium_is_found() {
        let cache = std::env::temp_dir().join(format!("trawl-pw-{}", uuid::Uuid::new_v4()));
        for revision in ["chromium-1100", "chromium-1208", "firefox-1400"] {
            let dir = cache.join(revision).join("chrome-linux");
            std::fs::create_dir_all(&dir).expect("mkdir");
            let chrome = dir.join("chrome");
            std::fs::write(&chrome, "#!/bin/sh\n").expect("write");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&chrome, std::fs::Permissions::from_mode(0o755))
                .expect("chmod");
        }
        let found = newest_playwright_chromium(&cache).expect("found");
        assert!(
            found.to_string_lossy().contains("chromium-1208"),
            "{found:?}"
        );
        std::fs::remove_dir_all(&cache).expect("cleanup");
    }

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
