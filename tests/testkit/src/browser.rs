//! The fixture's pages for browser tests (`/browser/{name}`): forms, a native select, an
//! open shadow root, JavaScript-built content, infinite scroll, a popup, and pages that try
//! to reach private addresses (a navigation, subresources). The article data the scripts
//! fetch is served at `/browser/api/article` and `/browser/api/items?page=N`. Also the
//! helpers browser tests need around them: name resolution that reaches the fixture as a
//! public host ([`site_dns`]) and a way to crash a tab ([`CrashTab`]).
//!
//! No browser is started here; the tests drive trawl's own browser pool.

use std::time::Duration;

use chromiumoxide::cdp::browser_protocol::page::CrashParams;
use trawl_workers::browse::Lease;
use trawl_workers::web::{Dns, StaticDns};

/// Name resolution for browser tests and benchmarks: `site.test` is a public address that is
/// dialled on loopback, so the egress proxy runs the default policy (loopback refused) and
/// still reaches the fixture as `http://site.test:PORT`.
pub fn site_dns() -> Dns {
    let public = std::net::IpAddr::from([93, 184, 216, 34]);
    // Another public name on the same fixture: a third-party origin.
    let third_party = std::net::IpAddr::from([93, 184, 216, 35]);
    let loopback = std::net::IpAddr::from([127, 0, 0, 1]);
    Dns::Static(std::sync::Arc::new(
        StaticDns::new()
            .answer("site.test", &[public])
            .answer("third.test", &[third_party])
            .dial(public, loopback)
            .dial(third_party, loopback),
    ))
}

/// What a test may do to a browser lease that trawl itself never does.
pub trait CrashTab {
    /// Crashes the current tab's renderer (CDP `Page.crash`), as an out-of-memory page would.
    fn crash_tab(&self) -> impl Future<Output = ()> + Send;
}

impl CrashTab for Lease {
    async fn crash_tab(&self) {
        let crash = self.page().execute(CrashParams::default());
        // The renderer dies before it can answer.
        let _ = tokio::time::timeout(Duration::from_secs(2), crash).await;
    }
}

/// The paragraph the JavaScript-built page renders (absent from its HTML).
pub const JS_BUILT_TEXT: &str =
    "The harbour pilots of Valmora rowed out before dawn to meet every ship";

/// What the members' page shows signed in (its cookie and localStorage token set), and never
/// signed out.
pub const MEMBERS_TEXT: &str =
    "The lighthouse keepers of Orsay logged every passing schooner by lantern light";

/// Pages by name; `origin` is the fixture's own origin (for absolute links), `loopback` the
/// `127.0.0.1:PORT` address (what the private-address pages try to reach).
pub fn page(name: &str, loopback: &str) -> Option<String> {
    Some(match name {
        "form" => FORM.to_owned(),
        "second" => SECOND.to_owned(),
        "shadow" => SHADOW.to_owned(),
        "js-built" => JS_BUILT.to_owned(),
        "scroll" => SCROLL.to_owned(),
        "popup" => POPUP.to_owned(),
        "private-nav" => PRIVATE_NAV.to_owned(),
        "private-sub" => PRIVATE_SUB.replace("{loopback}", loopback),
        "third-party" => {
            THIRD_PARTY.replace("{port}", loopback.rsplit(':').next().unwrap_or_default())
        }
        "large" => large_page(),
        "state" => STATE.to_owned(),
        "members" => MEMBERS.replace("{text}", MEMBERS_TEXT),
        _ => return None,
    })
}

/// JSON for `/browser/api/{name}` (`page` for items).
pub fn api(name: &str, page: u32) -> Option<String> {
    match name {
        "article" => {
            let paragraphs: Vec<String> = (0..8)
                .map(|n| {
                    format!(
                        "\"{JS_BUILT_TEXT}, paragraph {n}: they read the swell, the wind and \
                         the lights on the mole, and brought each hull through the narrows \
                         without a scratch for forty years.\""
                    )
                })
                .collect();
            Some(format!(
                "{{\"title\":\"Pilots of Valmora\",\"paragraphs\":[{}]}}",
                paragraphs.join(",")
            ))
        }
        "items" => {
            let items: Vec<String> = (0..20)
                .map(|n| format!("\"Item {}\"", page * 20 + n + 1))
                .collect();
            let more = page < 4;
            Some(format!(
                "{{\"items\":[{}],\"more\":{more}}}",
                items.join(",")
            ))
        }
        _ => None,
    }
}

const FORM: &str = r#"<!DOCTYPE html><html lang="en"><head><title>Sign in</title></head>
<body><main><h1>Sign in</h1>
<form id="login">
  <label for="email">Email</label><input id="email" name="email" type="email">
  <label>Password <input name="password" type="password"></label>
  <label for="country">Country</label>
  <select id="country" name="country"><option value="">Choose</option>
    <option value="fr">France</option><option value="pt">Portugal</option></select>
  <label><input type="checkbox" name="remember"> Remember me</label>
  <input type="hidden" name="csrf" value="x">
  <button type="button" style="display:none">Hidden</button>
  <button type="submit">Sign in</button>
</form>
<p id="result"></p>
<p><a href="/browser/second"><span>Second page</span></a></p>
<script>
document.getElementById('login').addEventListener('submit', function (event) {
  event.preventDefault();
  var data = new FormData(event.target);
  document.getElementById('result').textContent = 'Welcome, ' + data.get('email') +
    ' from ' + data.get('country') + (data.get('remember') ? ' (remembered)' : '');
  document.title = 'Signed in';
});
document.addEventListener('keydown', function (event) {
  if (event.key === 'Escape') document.getElementById('result').textContent = 'Escape pressed';
});
</script></main></body></html>"#;

/// A page of `site.test` that loads an image and a script from `third.test` (another
/// origin on the same fixture).
const THIRD_PARTY: &str = r#"<!DOCTYPE html><html lang="en"><head><title>Third party</title>
<script src="http://third.test:{port}/browser/api/items?third-party-script"></script></head>
<body><main><h1>Embeds</h1><img src="http://third.test:{port}/browser/api/article?third-party-image" alt="x">
</main></body></html>"#;

/// The first words of each line of the large page (`/browser/large`): 4,000 numbered
/// paragraphs, about 600 KB of HTML.
pub const LARGE_LINE: &str = "Line of the large page, number";

fn large_page() -> String {
    let mut html = String::from(
        "<!DOCTYPE html><html lang=\"en\"><head><title>Large</title></head><body><main><h1>Large</h1>",
    );
    for n in 1..=4_000 {
        html.push_str(&format!(
            "<p>{LARGE_LINE} {n}: the tide tables of the harbour, the pilots' rota and the lights.</p>\n"
        ));
    }
    html.push_str("<p id=\"end\">The end of the large page.</p></main></body></html>");
    html
}

/// A page signed in by its visitor's state: with a `member` cookie and a `token` in
/// localStorage its script writes the members' notes; otherwise it asks to sign in.
const MEMBERS: &str = r#"<!DOCTYPE html><html lang="en"><head><title>Members</title></head>
<body><main id="main"><h1>Members only</h1><p>Sign in to read the members' notes.</p></main>
<script>
if (localStorage.getItem('token') && document.cookie.includes('member=')) {
  let notes = '<h1>Members notes</h1>';
  for (let n = 1; n <= 6; n++) {
    notes += '<p>{text}, note ' + n + ': the tide tables, the names of the crews and the ' +
      'weather of each crossing, in a careful hand that the archive keeps to this day.</p>';
  }
  document.getElementById('main').innerHTML = notes;
}
</script></body></html>"#;

/// A page that keeps state of its own: with `?set` in its URL it sets a cookie and a
/// localStorage entry; it always shows both (`cookie: …; storage: …`).
const STATE: &str = r#"<!DOCTYPE html><html lang="en"><head><title>State</title></head>
<body><main><h1>State</h1><p id="state"></p>
<script>
if (location.search.indexOf('set') >= 0) {
  document.cookie = 'visited=yes; path=/';
  localStorage.setItem('seen', 'yes');
}
document.getElementById('state').textContent = 'cookie: ' + (document.cookie || 'none') +
  '; storage: ' + (localStorage.getItem('seen') || 'none');
</script></main></body></html>"#;

const SECOND: &str = r#"<!DOCTYPE html><html lang="en"><head><title>Second page</title></head>
<body><main><h1>Second page</h1><p>You followed the link.</p>
<p id="storage"></p>
<script>document.getElementById('storage').textContent = 'token=' + (localStorage.getItem('token') || 'none');</script>
</main></body></html>"#;

const SHADOW: &str = r#"<!DOCTYPE html><html lang="en"><head><title>Shadow</title></head>
<body><h1>Shadow DOM</h1><fancy-panel></fancy-panel><p id="out">not clicked</p>
<script>
customElements.define('fancy-panel', class extends HTMLElement {
  connectedCallback() {
    const root = this.attachShadow({mode: 'open'});
    root.innerHTML = '<button id="inner">Shadow button</button>';
    root.getElementById('inner').addEventListener('click', () => {
      document.getElementById('out').textContent = 'shadow clicked';
    });
  }
});
</script></body></html>"#;

const JS_BUILT: &str = r#"<!DOCTYPE html><html lang="en"><head><title>Loading…</title></head>
<body><div id="app"></div>
<noscript>You need to enable JavaScript to run this app.</noscript>
<script>
setTimeout(function () {
  fetch('/browser/api/article').then(function (r) { return r.json(); }).then(function (data) {
    document.title = data.title;
    var article = document.createElement('article');
    var h1 = document.createElement('h1'); h1.textContent = data.title; article.appendChild(h1);
    data.paragraphs.forEach(function (text) {
      var p = document.createElement('p'); p.textContent = text; article.appendChild(p);
    });
    document.getElementById('app').appendChild(article);
  });
}, 200);
</script></body></html>"#;

const SCROLL: &str = r#"<!DOCTYPE html><html lang="en"><head><title>Feed</title>
<style>li { height: 60px; }</style></head>
<body><h1>Feed</h1><ul id="feed"></ul><p id="end"></p>
<script>
var page = 0, loading = false, more = true;
function load() {
  if (loading || !more) return;
  loading = true;
  fetch('/browser/api/items?page=' + page).then(function (r) { return r.json(); }).then(function (data) {
    data.items.forEach(function (text) {
      var li = document.createElement('li'); li.textContent = text;
      document.getElementById('feed').appendChild(li);
    });
    page += 1; more = data.more; loading = false;
    if (!more) document.getElementById('end').textContent = 'No more items';
  });
}
window.addEventListener('scroll', function () {
  if (window.innerHeight + window.scrollY >= document.body.scrollHeight - 200) load();
});
load();
</script></body></html>"#;

const POPUP: &str = r#"<!DOCTYPE html><html lang="en"><head><title>Popup opener</title></head>
<body><button onclick="window.open('/browser/second')">Open popup</button></body></html>"#;

const PRIVATE_NAV: &str = r#"<!DOCTYPE html><html lang="en"><head><title>Leaving</title></head>
<body><p>Redirecting…</p>
<script>setTimeout(function () { location.href = 'http://10.0.0.5/admin'; }, 50);</script>
</body></html>"#;

const PRIVATE_SUB: &str = r#"<!DOCTYPE html><html lang="en"><head><title>Subresources</title></head>
<body><h1>Subresources</h1><p>This page pulls from private addresses.</p>
<img src="http://{loopback}/image.png" alt="loopback image">
<img src="http://169.254.169.254/latest/meta-data/" alt="metadata">
<script>
fetch('http://{loopback}/data.json').catch(function () {});
new Worker(URL.createObjectURL(new Blob(["fetch('http://10.0.0.7/worker').catch(function(){})"])));
</script></body></html>"#;
