//! One tab of a lease: its CDP page, the requests in flight on it (for "wait for network
//! idle"), the last response of its main document (with the egress proxy's verdict), and
//! whether its renderer crashed.
//!
//! Not here: opening and closing tabs (`lease`), nor what is done in them (`actions`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chromiumoxide::page::Page;
use futures_util::StreamExt;

use super::Error;

/// A tab and what is in flight on it (for "wait for network idle"), and the last response
/// of its main document (status, and the egress proxy's verdict when the proxy answered).
#[derive(Debug, Clone)]
pub struct Tab {
    /// The CDP page.
    pub page: Page,
    idle: Arc<std::sync::Mutex<Traffic>>,
    /// Whether the tab's renderer crashed since its last navigation.
    crashed: Arc<tokio::sync::watch::Sender<bool>>,
    /// The fingerprint of the tab's last snapshot (its URL and element list).
    last_snapshot: Arc<std::sync::Mutex<Option<[u8; 32]>>>,
}

#[derive(Debug)]
struct Traffic {
    /// Request id → URL.
    in_flight: HashMap<String, String>,
    last_change: Instant,
    document: Option<DocumentResponse>,
}

/// The response a tab's main document came with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DocumentResponse {
    /// Its URL.
    pub url: String,
    /// Its HTTP status.
    pub status: u16,
    /// `X-Trawl-Blocked`: the egress proxy refused the destination (the reason).
    pub blocked: Option<String>,
    /// `X-Trawl-Error`: the egress proxy could not reach it (`dns_error`, `connect_error`,
    /// `timeout`, …).
    pub proxy_error: Option<String>,
}

enum TabEvent {
    Started(String, String),
    Ended(String),
    Document(DocumentResponse),
    Crashed,
}

impl Tab {
    /// Watches the tab's requests (started, finished, failed), its main document's responses
    /// and its renderer's crashes from now on. Bounded by `timeout`, like every other call into
    /// chromiumoxide here: it hands each listener to its handler over a one-slot channel that a
    /// target stuck in its set-up would never drain.
    pub(super) async fn watch(page: Page, timeout: Duration) -> Result<Tab, Error> {
        match tokio::time::timeout(timeout, Tab::listen(page)).await {
            Ok(tab) => tab,
            Err(_) => Err(Error::Timeout(timeout.as_secs())),
        }
    }

    async fn listen(page: Page) -> Result<Tab, Error> {
        use chromiumoxide::cdp::browser_protocol::network::{
            EventLoadingFailed, EventLoadingFinished, EventRequestWillBeSent,
            EventResponseReceived, ResourceType,
        };
        let idle = Arc::new(std::sync::Mutex::new(Traffic {
            in_flight: HashMap::new(),
            last_change: Instant::now(),
            document: None,
        }));
        let listen_error =
            |error: chromiumoxide::error::CdpError| Error::Crashed(error.to_string());
        let started = page
            .event_listener::<EventRequestWillBeSent>()
            .await
            .map_err(listen_error)?;
        let finished = page
            .event_listener::<EventLoadingFinished>()
            .await
            .map_err(listen_error)?;
        let failed = page
            .event_listener::<EventLoadingFailed>()
            .await
            .map_err(listen_error)?;
        let responses = page
            .event_listener::<EventResponseReceived>()
            .await
            .map_err(listen_error)?;
        // A renderer that dies (out of memory, a Chromium bug) is reported by the Inspector
        // domain, which chromiumoxide does not enable.
        let crashes = page
            .event_listener::<chromiumoxide::cdp::browser_protocol::inspector::EventTargetCrashed>()
            .await
            .map_err(listen_error)?;
        page.execute(chromiumoxide::cdp::browser_protocol::inspector::EnableParams::default())
            .await
            .map_err(listen_error)?;
        let crashes = crashes.map(|_| TabEvent::Crashed);
        let main_frame = page.target_id().inner().clone();
        // Only the page's network requests count: blob: and data: URLs never report an end
        // here, nor does the favicon the browser fetches for itself.
        let started = started.filter_map(|event| {
            let url = &event.request.url;
            let network = (url.starts_with("http:") || url.starts_with("https:"))
                && !url
                    .split(['?', '#'])
                    .next()
                    .is_some_and(|path| path.ends_with("/favicon.ico"));
            std::future::ready(
                network.then(|| TabEvent::Started(event.request_id.inner().clone(), url.clone())),
            )
        });
        let finished = finished.map(|event| TabEvent::Ended(event.request_id.inner().clone()));
        let failed = failed.map(|event| TabEvent::Ended(event.request_id.inner().clone()));
        let responses = responses.filter_map(move |event| {
            let main = event.r#type == ResourceType::Document
                && event
                    .frame_id
                    .as_ref()
                    .is_some_and(|frame| frame.inner() == &main_frame);
            let document = main.then(|| {
                let header = |name: &str| {
                    event
                        .response
                        .headers
                        .inner()
                        .as_object()
                        .and_then(|headers| {
                            headers
                                .iter()
                                .find(|(key, _)| key.eq_ignore_ascii_case(name))
                                .and_then(|(_, value)| value.as_str().map(str::to_owned))
                        })
                };
                TabEvent::Document(DocumentResponse {
                    url: event.response.url.clone(),
                    status: u16::try_from(event.response.status).unwrap_or(0),
                    blocked: header("x-trawl-blocked"),
                    proxy_error: header("x-trawl-error"),
                })
            });
            std::future::ready(document)
        });
        let mut events = futures_util::stream::select(
            futures_util::stream::select(
                futures_util::stream::select(started, responses),
                futures_util::stream::select(finished, failed),
            ),
            crashes,
        );
        let traffic = idle.clone();
        let crashed = Arc::new(tokio::sync::watch::Sender::new(false));
        let crash = crashed.clone();
        // Ends with the tab: its event streams end when the page goes.
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let Ok(mut traffic) = traffic.lock() else {
                    break;
                };
                match event {
                    TabEvent::Started(id, url) => {
                        traffic.in_flight.insert(id, url);
                    }
                    TabEvent::Ended(id) => {
                        traffic.in_flight.remove(&id);
                    }
                    TabEvent::Document(document) => traffic.document = Some(document),
                    TabEvent::Crashed => {
                        // Its requests will never report an end.
                        traffic.in_flight.clear();
                        crash.send_replace(true);
                    }
                }
                traffic.last_change = Instant::now();
            }
        });
        Ok(Tab {
            page,
            idle,
            crashed,
            last_snapshot: Arc::default(),
        })
    }

    /// Records a snapshot of the tab (its URL and element list); true when it is the same as
    /// the previous one.
    pub fn same_snapshot(&self, url: &str, elements: &str) -> bool {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        hasher.update(url.as_bytes());
        hasher.update([0]);
        hasher.update(elements.as_bytes());
        let print: [u8; 32] = hasher.finalize().into();
        let Ok(mut last) = self.last_snapshot.lock() else {
            return false;
        };
        last.replace(print) == Some(print)
    }

    /// Whether the tab's renderer crashed (since it last navigated).
    pub fn crashed(&self) -> bool {
        *self.crashed.borrow()
    }

    /// Resolves when the tab's renderer crashes (at once if it has).
    pub async fn crash(&self) {
        let mut crashed = self.crashed.subscribe();
        // The sender lives as long as the tab: an error cannot happen while `self` exists.
        let _ = crashed.wait_for(|crashed| *crashed).await;
    }

    /// Clears the crash mark (a navigation starts a new renderer).
    pub fn recovered(&self) {
        self.crashed.send_replace(false);
    }

    /// The last response of the tab's main document.
    pub fn document(&self) -> Option<DocumentResponse> {
        self.idle
            .lock()
            .ok()
            .and_then(|traffic| traffic.document.clone())
    }

    /// Forgets the last document response (before a navigation).
    pub fn forget_document(&self) {
        if let Ok(mut traffic) = self.idle.lock() {
            traffic.document = None;
        }
    }

    /// Waits until no request has been in flight for `quiet`, at most `max`. Returns whether
    /// the network went idle (false: still busy at `max`, which is not an error: some pages
    /// poll forever).
    pub async fn wait_idle(&self, quiet: Duration, max: Duration) -> bool {
        let deadline = Instant::now() + max;
        loop {
            let settled = self.idle.lock().map(|traffic| {
                traffic.in_flight.is_empty() && traffic.last_change.elapsed() >= quiet
            });
            if settled.unwrap_or(true) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
    }

    /// Marks the traffic as changed now (before a navigation or a click, so a wait that
    /// follows gives the page its quiet period to start loading).
    pub fn touch(&self) {
        if let Ok(mut traffic) = self.idle.lock() {
            traffic.last_change = Instant::now();
        }
    }
}
