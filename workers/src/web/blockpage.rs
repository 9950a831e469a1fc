//! Recognises pages that are not content: anti-bot challenges and captchas, access-denied
//! pages, login walls, and empty or JavaScript-only shells. Such a page must end as a typed
//! outcome with its evidence, never be stored as if it were the page's text.
//!
//! Not here: getting past them (a browser render may, later; trawl never solves captchas).

use crate::job::ErrorCode;
use crate::web::extract::Extracted;

/// Visible text below which a page counts as short enough to be a wall or a shell.
const SHORT_PAGE_CHARS: usize = 2_000;

/// Extracted text below which a page has no readable content.
const EMPTY_CHARS: usize = 40;

/// A page that is a wall, not content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockPage {
    /// `blocked_by_site`, `login_required` or `empty_content`.
    pub code: ErrorCode,
    /// What gave it away, for the caller to judge.
    pub evidence: String,
}

/// Markers only anti-bot challenge pages carry: one is enough. Not the scripts protected
/// sites load on every page (Cloudflare's `/cdn-cgi/challenge-platform/scripts/`, Imperva's
/// `_Incapsula_Resource`, AWS WAF's `awswaf` loader), which are no evidence even on a short
/// page: 113 of the 1,497 pages of the WCXB dev split, all of them content, load Cloudflare's,
/// and a short post among them was failed as a challenge.
const CHALLENGE_MARKERS: &[(&str, &str)] = &[
    ("_cf_chl_opt", "cloudflare challenge script"),
    ("/orchestrate/chl_page/", "cloudflare challenge page"),
    ("/orchestrate/managed/", "cloudflare managed challenge"),
    ("/orchestrate/jsch/", "cloudflare javascript challenge"),
    ("/orchestrate/captcha/", "cloudflare captcha"),
    ("cf-browser-verification", "cloudflare browser verification"),
    ("captcha-delivery.com", "datadome captcha"),
    ("incapsula incident id", "imperva incapsula incident"),
    ("window.gokuprops", "aws waf challenge"),
    ("ddos-guard", "ddos-guard challenge"),
    ("sucuri website firewall", "sucuri firewall"),
];

/// Markers that mean a challenge only on a short page (legitimate pages embed captchas in
/// comment and login forms, load bot-detection scripts, and say "access denied" in articles).
const SHORT_PAGE_MARKERS: &[(&str, &str)] = &[
    ("g-recaptcha", "recaptcha widget"),
    ("h-captcha", "hcaptcha widget"),
    ("hcaptcha.com", "hcaptcha widget"),
    ("cf-turnstile", "cloudflare turnstile widget"),
    ("px-captcha", "perimeterx captcha"),
    ("verify you are human", "\"verify you are human\""),
    ("verify you are a human", "\"verify you are a human\""),
    ("are you a robot", "\"are you a robot\""),
    ("unusual traffic", "\"unusual traffic\""),
    ("just a moment...", "\"just a moment...\" interstitial"),
    ("access denied", "\"access denied\""),
    ("request blocked", "\"request blocked\""),
    ("enable cookies", "\"enable cookies\""),
];

const LOGIN_PHRASES: &[&str] = &[
    "sign in",
    "log in",
    "login",
    "signin",
    "subscribe to continue",
    "create an account",
];

const SHELL_MARKERS: &[(&str, &str)] = &[
    ("id=\"root\"", "app root <div id=\"root\">"),
    ("id=\"app\"", "app root <div id=\"app\">"),
    ("id=\"__next\"", "next.js root"),
    ("id=\"__nuxt\"", "nuxt root"),
    ("ng-app", "angular app"),
    ("ng-version", "angular app"),
];

/// Judges a fetched HTML page from its status, its HTML and what extraction found.
pub fn detect(status: u16, html: &str, extracted: &Extracted) -> Option<BlockPage> {
    let suspicious_status = matches!(status, 401 | 403 | 429 | 503);
    let short = extracted.body_chars < SHORT_PAGE_CHARS;
    if !short && !suspicious_status {
        return None;
    }
    // Lowercasing is only paid on short or refused pages.
    let lower = html.to_ascii_lowercase();
    if let Some((_, what)) = CHALLENGE_MARKERS
        .iter()
        .find(|(marker, _)| lower.contains(marker))
    {
        return Some(BlockPage {
            code: ErrorCode::BlockedBySite,
            evidence: format!("{what} (status {status})"),
        });
    }
    if short
        && let Some((_, what)) = SHORT_PAGE_MARKERS
            .iter()
            .find(|(marker, _)| lower.contains(marker))
    {
        return Some(BlockPage {
            code: ErrorCode::BlockedBySite,
            evidence: format!("{what} on a short page (status {status})"),
        });
    }
    let has_password = lower.contains("type=\"password\"")
        || lower.contains("type='password'")
        || lower.contains("type=password");
    let text_lower = extracted.text.to_lowercase();
    let title_lower = extracted
        .title
        .as_deref()
        .unwrap_or_default()
        .to_lowercase();
    if status == 401
        || (short
            && has_password
            && LOGIN_PHRASES
                .iter()
                .any(|phrase| text_lower.contains(phrase) || title_lower.contains(phrase)))
    {
        return Some(BlockPage {
            code: ErrorCode::LoginRequired,
            evidence: if status == 401 {
                "status 401".to_owned()
            } else {
                "password form on a short page asking to sign in".to_owned()
            },
        });
    }
    let text_chars = extracted
        .text
        .chars()
        .filter(|c| !c.is_whitespace())
        .count();
    if text_chars < EMPTY_CHARS {
        let scripts = lower.matches("<script").count();
        let shell = SHELL_MARKERS
            .iter()
            .find(|(marker, _)| lower.contains(marker));
        let noscript = lower.contains("<noscript") && lower.contains("javascript");
        // A short page with real words and no app machinery is a short page, not a shell.
        let evidence = match (shell, noscript) {
            (Some((_, what)), _) => format!("{what} with {scripts} scripts and almost no text"),
            (None, true) => format!("a noscript wall asking for javascript, {scripts} scripts"),
            (None, false) if text_chars == 0 && scripts > 0 => {
                format!("no text, {scripts} scripts")
            }
            (None, false) if text_chars == 0 => "no text in the page".to_owned(),
            (None, false) => return None,
        };
        return Some(BlockPage {
            code: ErrorCode::EmptyContent,
            evidence,
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{Extractor, Meta};

    fn extracted(text: &str, body_chars: usize) -> Extracted {
        Extracted {
            title: None,
            text: text.to_owned(),
            extractor: Extractor::Readability,
            warning: None,
            links: Vec::new(),
            meta: Meta::default(),
            outline: Vec::new(),
            body_chars,
            lines: None,
        }
    }

    #[test]
    fn challenge_markers_block_even_with_some_text() {
        let html = "<html><script>window._cf_chl_opt={}</script>Checking your browser</html>";
        let verdict = detect(
            403,
            html,
            &extracted("Checking your browser before access", 40),
        );
        assert_eq!(verdict.expect("blocked").code, ErrorCode::BlockedBySite);
    }

    #[test]
    fn challenge_pages_are_told_from_pages_that_load_the_vendors_scripts() {
        // A short post on a Cloudflare site: its bot-detection script is on every page.
        let post = "<html><head><script>var a=document.createElement('script');\
                    a.src='/cdn-cgi/challenge-platform/scripts/jsd/main.js';</script></head>\
                    <body><p>A short post.</p></body></html>";
        assert!(detect(200, post, &extracted("A short post about our week.", 30)).is_none());
        // The challenge page itself loads the challenge orchestrator.
        let challenge = "<html><body><noscript>Enable JavaScript and cookies to continue\
                         </noscript><script src=\"/cdn-cgi/challenge-platform/h/b/orchestrate\
                         /chl_page/v1?ray=8f\"></script></body></html>";
        let verdict = detect(403, challenge, &extracted("Enable JavaScript", 20)).expect("block");
        assert_eq!(verdict.code, ErrorCode::BlockedBySite);
        assert!(verdict.evidence.contains("cloudflare challenge page"));
        // Imperva's resource script on a short page is no block; its incident page is.
        let script = "<script src=\"/_Incapsula_Resource?SWJIYLWA=719d34\"></script>";
        assert!(detect(200, script, &extracted("A short post about our week.", 30)).is_none());
        let incident = "<iframe src=\"/_Incapsula_Resource?CWUDNSAI=9\">Request unsuccessful. \
                        Incapsula incident ID: 1234</iframe>";
        let verdict = detect(200, incident, &extracted("Request unsuccessful.", 30));
        assert!(
            verdict
                .expect("block")
                .evidence
                .contains("incapsula incident")
        );
    }

    #[test]
    fn captcha_widgets_on_long_articles_are_not_blocks() {
        let html = "<div class=\"g-recaptcha\"></div>";
        let article = "word ".repeat(1_000);
        assert!(detect(200, html, &extracted(&article, 5_000)).is_none());
        let verdict = detect(200, html, &extracted("Please verify you are a human", 30));
        assert_eq!(verdict.expect("blocked").code, ErrorCode::BlockedBySite);
    }

    #[test]
    fn login_walls_and_shells_are_named() {
        let html = "<form><input type=\"password\"></form>";
        let verdict = detect(
            200,
            html,
            &extracted("Sign in to continue reading this story", 60),
        );
        assert_eq!(verdict.expect("wall").code, ErrorCode::LoginRequired);

        let html = "<div id=\"root\"></div><script src=a.js></script><script src=b.js></script>";
        let verdict = detect(200, html, &extracted("", 0)).expect("shell");
        assert_eq!(verdict.code, ErrorCode::EmptyContent);
        assert!(verdict.evidence.contains("2 scripts"));
    }

    #[test]
    fn short_real_pages_pass() {
        let text = "A short note about the weather today, with enough words to read.";
        assert!(detect(200, "<p>note</p>", &extracted(text, 70)).is_none());
        let tiny = "<html><body><p>café résumé</p></body></html>";
        assert!(detect(200, tiny, &extracted("café résumé", 12)).is_none());
    }
}
