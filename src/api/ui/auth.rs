//! Logins of the web UI: the login form takes an API token (the same tokens as the API,
//! compared in constant time) and sets the `trawl_ui` cookie (HttpOnly, SameSite=Strict,
//! Path=/ui), a random id of a login kept in this process's memory for 12 hours, with the
//! token's scope and a CSRF token that every form changing something must send back
//! ([`check_csrf`]). The token itself is never kept. A server without tokens needs no login:
//! each browser gets a login of the `default` tenant on its first request, for its CSRF token.
//!
//! The login form itself is protected by a double-submit token (`trawl_ui_pre` cookie and
//! form field), so another site cannot log a browser in with its own token.
//!
//! Not here: the API's bearer tokens (`api::auth`), which routes need a login (the router).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::Form;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use maud::html;
use serde::Deserialize;
use subtle::{ConditionallySelectable as _, ConstantTimeEq as _};

use super::Ui;
use super::layout::{self, UiError};
use crate::tenant::Scope;

/// The login cookie.
pub(super) const COOKIE: &str = "trawl_ui";
/// The login form's double-submit cookie.
const PRE_COOKIE: &str = "trawl_ui_pre";
/// How long a login lasts.
const LOGIN_TTL: Duration = Duration::from_secs(12 * 3600);
/// Most logins kept at once; the oldest go first beyond it.
const MAX_LOGINS: usize = 10_000;

/// Who is looking: the scope of the token they logged in with (what the API would show that
/// token), the session owner it acts as, and the CSRF token of the login.
#[derive(Debug, Clone)]
pub(super) struct Viewer {
    /// What they may see.
    pub(super) scope: Scope,
    /// The owner of their sessions (`sessions::ANY_OWNER` for the admin).
    pub(super) owner: String,
    /// The token every changing form sends back.
    pub(super) csrf: String,
    /// True when the server has no tokens (no login, no logout).
    pub(super) open: bool,
}

impl Viewer {
    /// The owner filter of session listings: `None` for the admin.
    pub(super) fn owner_filter(&self) -> Option<&str> {
        (self.owner != crate::sessions::ANY_OWNER).then_some(self.owner.as_str())
    }

    /// Who this is, for the header: the tenant, or "admin".
    pub(super) fn label(&self) -> String {
        if self.scope.all {
            "admin".to_owned()
        } else {
            self.scope.tenant.as_str().to_owned()
        }
    }
}

#[derive(Debug, Clone)]
struct Login {
    viewer: Viewer,
    expires: Instant,
}

/// The logins of this process (a restart logs everyone out).
#[derive(Debug, Default)]
pub(crate) struct Logins {
    by_id: Mutex<HashMap<String, Login>>,
}

impl Logins {
    pub(super) fn new() -> Logins {
        Logins::default()
    }

    fn get(&self, id: &str) -> Option<Viewer> {
        let by_id = self.by_id.lock().ok()?;
        by_id
            .get(id)
            .filter(|login| login.expires > Instant::now())
            .map(|login| login.viewer.clone())
    }

    /// Records a login; returns its cookie value.
    fn add(&self, scope: Scope, owner: String, open: bool) -> (String, Viewer) {
        let id = random_token();
        let viewer = Viewer {
            scope,
            owner,
            csrf: random_token(),
            open,
        };
        if let Ok(mut by_id) = self.by_id.lock() {
            let now = Instant::now();
            by_id.retain(|_, login| login.expires > now);
            if by_id.len() >= MAX_LOGINS
                && let Some(oldest) = by_id
                    .iter()
                    .min_by_key(|(_, login)| login.expires)
                    .map(|(id, _)| id.clone())
            {
                by_id.remove(&oldest);
            }
            by_id.insert(
                id.clone(),
                Login {
                    viewer: viewer.clone(),
                    expires: now + LOGIN_TTL,
                },
            );
        }
        (id, viewer)
    }

    fn remove(&self, id: &str) {
        if let Ok(mut by_id) = self.by_id.lock() {
            by_id.remove(id);
        }
    }
}

/// 32 random bytes, hex.
fn random_token() -> String {
    let mut bytes = [0u8; 32];
    // The operating system's generator; without it no login could be made safely.
    getrandom::fill(&mut bytes).expect("the system random number generator works");
    hex::encode(bytes)
}

/// A cookie's value in a request.
fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value)
}

fn set_cookie(response: &mut Response, name: &str, value: &str, max_age: u64) {
    let text = format!("{name}={value}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={max_age}");
    if let Ok(value) = HeaderValue::from_str(&text) {
        response.headers_mut().append(header::SET_COOKIE, value);
    }
}

fn no_tokens(ui: &Ui) -> bool {
    ui.app.config.tokens.is_empty() && ui.app.config.admin_token.is_none()
}

/// Lets a request through with its [`Viewer`] when its cookie names a live login, or on a
/// server without tokens (making a login for its CSRF token); otherwise a page asks to log
/// in (GET: a redirect to the login form).
pub(super) async fn require_login(
    State(ui): State<Ui>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(viewer) = cookie(request.headers(), COOKIE).and_then(|id| ui.logins.get(id)) {
        request.extensions_mut().insert(viewer);
        return next.run(request).await;
    }
    if no_tokens(&ui) {
        let scope = Scope::default();
        let owner = scope.tenant.as_str().to_owned();
        let (id, viewer) = ui.logins.add(scope, owner, true);
        request.extensions_mut().insert(viewer);
        let mut response = next.run(request).await;
        set_cookie(&mut response, COOKIE, &id, LOGIN_TTL.as_secs());
        return response;
    }
    if request.method() == Method::GET {
        let next_path = request
            .uri()
            .path_and_query()
            .map(|path| path.as_str().to_owned())
            .unwrap_or_default();
        let target = format!(
            "/ui/login?next={}",
            encode_query(&format!("/ui{next_path}"))
        );
        return super::see_other(&target);
    }
    UiError::new(
        StatusCode::UNAUTHORIZED,
        "Log in first",
        "This needs a login: open the login page and give an API token.",
    )
    .into_response()
}

/// Percent-encodes a query value.
pub(super) fn encode_query(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// Refuses a changing form whose CSRF token is not the login's (403).
pub(super) fn check_csrf(viewer: &Viewer, sent: &str) -> Result<(), UiError> {
    if bool::from(sent.as_bytes().ct_eq(viewer.csrf.as_bytes())) && !sent.is_empty() {
        Ok(())
    } else {
        Err(UiError::new(
            StatusCode::FORBIDDEN,
            "Form refused",
            "The form's CSRF token is missing or stale: reload the page and try again.",
        ))
    }
}

/// A form that only carries its CSRF token (cancel, logout, re-run).
#[derive(Debug, Deserialize)]
pub(super) struct CsrfForm {
    /// The login's CSRF token.
    #[serde(default)]
    pub(super) csrf: String,
}

/// Where the login form sends the browser afterwards.
#[derive(Debug, Deserialize)]
pub(super) struct NextQuery {
    #[serde(default)]
    next: Option<String>,
}

/// Only a path of this UI: never another site.
fn safe_next(next: Option<&str>) -> &str {
    match next {
        Some(path)
            if path.starts_with("/ui")
                && !path.starts_with("//")
                && !path.contains('\\')
                && !path.chars().any(char::is_control) =>
        {
            path
        }
        _ => "/ui/",
    }
}

/// The login form.
pub(super) async fn login_form(State(ui): State<Ui>, Query(query): Query<NextQuery>) -> Response {
    if no_tokens(&ui) {
        return super::see_other("/ui/");
    }
    login_page(StatusCode::OK, safe_next(query.next.as_deref()), None)
}

fn login_page(status: StatusCode, next: &str, error: Option<&str>) -> Response {
    let pre = random_token();
    let body = html! {
        section.card.narrow {
            h1 { "Log in" }
            p { "Give an API token (one of " code { "api.tokens" } " or " code { "api.admin_token" } "). The UI then shows what that token sees through the API." }
            @if let Some(error) = error {
                p.error role="alert" id="login-error" { (error) }
            }
            form method="post" action="/ui/login" {
                input type="hidden" name="csrf" value=(pre);
                input type="hidden" name="next" value=(next);
                label for="token" { "API token" }
                input #token type="password" name="token" autocomplete="current-password" required autofocus aria-describedby=[error.map(|_| "login-error")];
                button type="submit" { "Log in" }
            }
        }
    };
    let mut response = (
        status,
        layout::page(None, "Log in", layout::Nav::None, body),
    )
        .into_response();
    set_cookie(&mut response, PRE_COOKIE, &pre, 3600);
    response
}

/// What the login form sends.
#[derive(Debug, Deserialize)]
pub(super) struct LoginForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    next: Option<String>,
}

/// Logs in with an API token: a cookie for its scope, then on to `next`.
pub(super) async fn login(
    State(ui): State<Ui>,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    let next = safe_next(form.next.as_deref()).to_owned();
    if no_tokens(&ui) {
        return super::see_other("/ui/");
    }
    let pre = cookie(&headers, PRE_COOKIE).unwrap_or("");
    if pre.is_empty() || !bool::from(pre.as_bytes().ct_eq(form.csrf.as_bytes())) {
        return login_page(
            StatusCode::FORBIDDEN,
            &next,
            Some("The form was stale or came from another page: try again."),
        );
    }
    let scopes = ui.app.config.token_scopes();
    // Every token is compared, and the match is selected without a branch on it.
    let mut matched = subtle::Choice::from(0);
    let mut which = 0u32;
    for (index, (token, _)) in scopes.iter().enumerate() {
        let equal = form.token.as_bytes().ct_eq(token.expose().as_bytes());
        matched |= equal;
        which.conditional_assign(&(index as u32), equal);
    }
    if !bool::from(matched) || form.token.is_empty() {
        return login_page(
            StatusCode::UNAUTHORIZED,
            &next,
            Some("That token matches none of this server's tokens."),
        );
    }
    let scope = scopes[which as usize].1.clone();
    let owner = if scope.all {
        crate::sessions::ANY_OWNER.to_owned()
    } else {
        scope.tenant.as_str().to_owned()
    };
    let (id, _) = ui.logins.add(scope, owner, false);
    let mut response = super::see_other(&next);
    set_cookie(&mut response, COOKIE, &id, LOGIN_TTL.as_secs());
    set_cookie(&mut response, PRE_COOKIE, "", 0);
    response
}

/// Logs out: the login is forgotten and the cookie cleared.
pub(super) async fn logout(
    State(ui): State<Ui>,
    axum::Extension(viewer): axum::Extension<Viewer>,
    headers: HeaderMap,
    Form(form): Form<CsrfForm>,
) -> Result<Response, UiError> {
    check_csrf(&viewer, &form.csrf)?;
    if let Some(id) = cookie(&headers, COOKIE) {
        ui.logins.remove(id);
    }
    let mut response = super::see_other(if viewer.open { "/ui/" } else { "/ui/login" });
    set_cookie(&mut response, COOKIE, "", 0);
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_stays_on_the_ui() {
        assert_eq!(safe_next(Some("/ui/jobs/1")), "/ui/jobs/1");
        assert_eq!(safe_next(Some("https://evil.test/")), "/ui/");
        assert_eq!(safe_next(Some("//evil.test/ui")), "/ui/");
        assert_eq!(safe_next(Some("/ui\\..")), "/ui/");
        assert_eq!(safe_next(None), "/ui/");
    }

    #[test]
    fn cookies_are_found_by_name() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; trawl_ui=abc; trawl_ui_pre=x"),
        );
        assert_eq!(cookie(&headers, COOKIE), Some("abc"));
        assert_eq!(cookie(&headers, PRE_COOKIE), Some("x"));
        assert_eq!(cookie(&headers, "b"), None);
    }
}
