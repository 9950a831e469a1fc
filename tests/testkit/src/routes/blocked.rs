//! The block-page routes: what a crawler meets instead of content. A Cloudflare challenge
//! (403 with Cloudflare's headers), a CAPTCHA, a login wall, an empty JavaScript app shell
//! and a page with an empty body, all served as if they were the page asked for.
//!
//! The pages carry the markers block-page detectors look for (the challenge's markup and
//! headers, a CAPTCHA widget, a password field, an empty app root); nothing they load or
//! post to exists on the fixture.

use std::io;

use crate::request::Request;
use crate::response::{Conn, HTML};

/// Answers the block-page routes; `None` for any other path.
pub(super) async fn route(conn: &mut Conn, req: &Request) -> Option<io::Result<()>> {
    let done = match req.path.as_str() {
        "/blocked/cloudflare" => {
            conn.send(
                403,
                &[
                    ("Content-Type", HTML),
                    ("Server", "cloudflare"),
                    ("cf-mitigated", "challenge"),
                    ("Cache-Control", "private, max-age=0, no-store, no-cache"),
                ],
                CLOUDFLARE_PAGE.as_bytes(),
            )
            .await
        }
        "/blocked/captcha" => conn.html(200, CAPTCHA_PAGE).await,
        "/blocked/login" => conn.html(200, LOGIN_PAGE).await,
        "/blocked/shell" => conn.html(200, SHELL_PAGE).await,
        "/blocked/empty" => conn.html(200, EMPTY_PAGE).await,
        _ => return None,
    };
    Some(done)
}

const CLOUDFLARE_PAGE: &str = r#"<!DOCTYPE html>
<html lang="en-US">
<head>
<title>Just a moment...</title>
<meta http-equiv="Content-Type" content="text/html; charset=UTF-8">
<meta name="robots" content="noindex,nofollow">
<meta name="viewport" content="width=device-width,initial-scale=1">
<style>body{font-family:sans-serif;margin:0}.main-wrapper{padding:8rem 1.5rem}</style>
</head>
<body class="no-js">
<div class="main-wrapper" role="main">
<div class="main-content">
<h1 class="zone-name-title">fixture.test</h1>
<h2 id="challenge-running" class="h2">Verifying you are human. This may take a few seconds.</h2>
<div id="challenge-stage"><div class="cf-turnstile" id="cf-chl-widget-fx01" data-sitekey="0xFIXTURE000000000"></div></div>
<noscript><div class="h2">Enable JavaScript and cookies to continue</div></noscript>
<form id="challenge-form" action="/blocked/cloudflare?__cf_chl_f_tk=fixture" method="POST"></form>
</div>
</div>
<script>(function(){window._cf_chl_opt={cvId:'3',cZone:'fixture.test',cType:'managed',cRay:'0000fixture'};var s=document.createElement('script');s.id='cf-chl-script';s.src='/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1?ray=0000fixture';document.getElementsByTagName('head')[0].appendChild(s);}());</script>
</body>
</html>
"#;

const CAPTCHA_PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Security check</title>
<script src="https://www.google.com/recaptcha/api.js" async defer></script></head>
<body>
<main>
<h1>Please verify you are a human</h1>
<p>Complete the check below to continue to the page you asked for.</p>
<form action="/blocked/captcha" method="POST">
<div class="g-recaptcha" data-sitekey="fixture-site-key"></div>
<button type="submit">Continue</button>
</form>
</main>
</body>
</html>
"#;

const LOGIN_PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Sign in</title></head>
<body>
<main class="login">
<h1>Sign in to continue</h1>
<form action="/session" method="POST">
<label for="email">Email</label> <input id="email" type="email" name="email" autocomplete="username">
<label for="password">Password</label> <input id="password" type="password" name="password" autocomplete="current-password">
<button type="submit">Sign in</button>
</form>
<p><a href="/password-reset">Forgot your password?</a></p>
</main>
</body>
</html>
"#;

const SHELL_PAGE: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width,initial-scale=1">
<title>App</title>
<link rel="stylesheet" href="/static/css/main.css">
<script defer src="/static/js/runtime.js"></script>
<script defer src="/static/js/vendor.js"></script>
<script defer src="/static/js/main.js"></script>
</head>
<body>
<noscript>You need to enable JavaScript to run this app.</noscript>
<div id="root"></div>
<script src="/static/js/analytics.js"></script>
</body>
</html>
"#;

const EMPTY_PAGE: &str = "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Empty</title></head><body></body></html>\n";
