//! One host's robots.txt, read the RFC 9309 way: from the fetched body, or from why there is
//! none (a 4xx allows everything, a 5xx or a network failure disallows everything until the
//! file is fetched again). trawl obeys the group for its product token [`USER_AGENT_TOKEN`]
//! and, when the file has no such group, the `*` group. Parsing and matching are the `robotxt`
//! crate's (longest match wins, `Allow` wins a tie, `*` and a final `$` in patterns,
//! percent-encoding normalised, `/robots.txt` itself always allowed).
//!
//! Not here: fetching the file (the caller GETs [`robots_url`] with the guarded `web::Client`
//! and hands the result to [`Robots::from_fetch`]), caching it per host for [`Robots::max_age`],
//! or spacing requests ([`crate::crawl::politeness`]).

use std::time::Duration;

use url::{Position, Url};

use crate::web::client::{self, Response};

/// The product token trawl looks for in `User-agent` lines (matched case-insensitively and
/// exactly, as RFC 9309 asks: a `trawlbot` group does not apply).
pub const USER_AGENT_TOKEN: &str = "trawl";

/// The largest `Crawl-delay` honoured; a larger value is cut to this.
pub const MAX_CRAWL_DELAY: Duration = Duration::from_secs(60);

/// The body limit to fetch robots.txt with (512 KiB). Of that, the first
/// [`PARSED_BYTES`] are parsed.
pub const FETCH_MAX_BYTES: u64 = 512 * 1024;

/// How much of a body is parsed: 500 KiB (RFC 9309 asks parsers to read at least that much),
/// cut back to the last line ending inside it so that a rule cut in half never applies.
pub const PARSED_BYTES: usize = robotxt::BYTE_LIMIT;

/// How long a fetched (or absent, 4xx) robots.txt may be used before fetching it again.
/// RFC 9309 says a cached copy should not be used for more than 24 hours.
pub const MAX_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// How long an unreachable robots.txt (5xx, 429, network failure) keeps the host closed
/// before the caller should try to fetch it again, after `failures` fetches in a row that
/// found it unreachable (0 for the first): 1 s, doubling, at most 60 s. Pages wait for it
/// rather than pass (RFC 9309 allows treating it as a full disallow).
pub fn unreachable_retry(failures: u32) -> Duration {
    crate::backoff::Backoff::new(Duration::from_secs(1), Duration::from_secs(60)).delay(failures)
}

/// How the robots.txt behind a [`Robots`] was obtained (RFC 9309, section 2.3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Access {
    /// A 2xx body was parsed; its rules apply.
    Parsed,
    /// The server said there is none (4xx other than 429, a redirect the client did not
    /// follow, or too many redirects): every URL may be crawled.
    Unavailable,
    /// The file could not be fetched (5xx, 429, DNS, connection, timeout, a body over
    /// [`FETCH_MAX_BYTES`], an address the SSRF guard refuses): no URL may be crawled until
    /// it is fetched again, after [`unreachable_retry`].
    Unreachable,
}

/// The rules of one host's robots.txt that apply to trawl.
#[derive(Debug, Clone)]
pub struct Robots {
    rules: robotxt::Robots,
    access: Access,
    sitemaps: Vec<Url>,
}

impl Robots {
    /// Parses a robots.txt body fetched with a 2xx status. Input beyond [`FETCH_MAX_BYTES`] is
    /// ignored, and of the rest the first [`PARSED_BYTES`] are parsed. A body that is not
    /// robots.txt at all (an HTML page, binary noise) has no rules and so allows everything.
    pub fn parse(body: &[u8]) -> Robots {
        let capped = &body[..body.len().min(FETCH_MAX_BYTES as usize)];
        let rules = robotxt::Robots::parse(capped, robotxt::Agent::Exact(USER_AGENT_TOKEN));
        let sitemaps = rules
            .sitemaps()
            .iter()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
            .cloned()
            .collect();
        Robots {
            rules,
            access: Access::Parsed,
            sitemaps,
        }
    }

    /// Reads a robots.txt response by its status: 2xx is parsed, 3xx (a redirect the client
    /// did not follow) and 4xx are [`Access::Unavailable`], 429, 5xx and anything else are
    /// [`Access::Unreachable`]. 429 counts as unreachable, as Google treats it: the server asks
    /// for less traffic, not for a free pass.
    pub fn from_status(status: u16, body: &[u8]) -> Robots {
        match status {
            200..=299 => Robots::parse(body),
            429 => Robots::unreachable(),
            300..=499 => Robots::unavailable(),
            _ => Robots::unreachable(),
        }
    }

    /// Reads the result of GETting [`robots_url`] with the guarded client: a response goes
    /// through [`Robots::from_status`]; redirect failures (too many, a loop, no `Location`) are
    /// [`Access::Unavailable`], as RFC 9309 allows after five redirects (the client follows at
    /// most its configured number, 3 by default); every other error is
    /// [`Access::Unreachable`]. Fetch with [`FETCH_MAX_BYTES`] as the body limit: a larger file
    /// comes back as `TooLarge` without a body, and so closes the host.
    pub fn from_fetch(result: &Result<Response, client::Error>) -> Robots {
        match result {
            Ok(response) => Robots::from_status(response.status, &response.body),
            Err(
                client::Error::TooManyRedirects { .. }
                | client::Error::RedirectLoop { .. }
                | client::Error::MissingLocation { .. },
            ) => Robots::unavailable(),
            Err(_) => Robots::unreachable(),
        }
    }

    /// The robots.txt of a host that has none: every URL allowed.
    pub fn unavailable() -> Robots {
        Robots {
            rules: robotxt::Robots::allow_all(),
            access: Access::Unavailable,
            sitemaps: Vec::new(),
        }
    }

    /// The robots.txt of a host that could not be asked: every URL but `/robots.txt`
    /// disallowed.
    pub fn unreachable() -> Robots {
        Robots {
            rules: robotxt::Robots::disallow_all(),
            access: Access::Unreachable,
            sitemaps: Vec::new(),
        }
    }

    /// How this robots.txt was obtained.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Returns true when trawl may fetch `url`. Only the path and query are matched; the caller
    /// makes sure `url` belongs to the host this robots.txt came from.
    pub fn allowed(&self, url: &Url) -> bool {
        self.rules
            .is_allowed(&url[Position::BeforePath..Position::AfterQuery])
    }

    /// The `Crawl-delay` of the group that applies (the smallest, if it has several), at most
    /// [`MAX_CRAWL_DELAY`]; `None` when there is none or it is not a non-negative number.
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.rules
            .crawl_delay()
            .map(|delay| delay.min(MAX_CRAWL_DELAY))
    }

    /// The absolute `http(s)` URLs of the file's `Sitemap` lines, in file order (they belong to
    /// no group). Relative or other-scheme values are dropped; other hosts are kept.
    pub fn sitemaps(&self) -> &[Url] {
        &self.sitemaps
    }

    /// How long this may be used before the file is fetched again: [`MAX_AGE`], or, when it
    /// was unreachable, [`unreachable_retry`] after `failures` fetches in a row that found it
    /// so before this one.
    pub fn max_age(&self, failures: u32) -> Duration {
        match self.access {
            Access::Parsed | Access::Unavailable => MAX_AGE,
            Access::Unreachable => unreachable_retry(failures),
        }
    }
}

/// Returns the robots.txt URL that governs `url`: same scheme, host and port, path
/// `/robots.txt`, no credentials, query or fragment. Meant for `http(s)` URLs; any other URL
/// comes back with only its query and fragment removed (no robots.txt governs it).
pub fn robots_url(url: &Url) -> Url {
    let mut robots = url.clone();
    if url.has_host() && !url.cannot_be_a_base() {
        // Both only fail for URLs without a host, excluded above.
        let _ = robots.set_username("");
        let _ = robots.set_password(None);
        robots.set_path("/robots.txt");
    }
    robots.set_query(None);
    robots.set_fragment(None);
    robots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(path: &str) -> Url {
        Url::parse(&format!("https://example.com{path}")).expect("test url parses")
    }

    fn allows(robots: &Robots, path: &str) -> bool {
        robots.allowed(&url(path))
    }

    #[test]
    fn trawl_group_wins_over_star_and_groups_merge() {
        let robots = Robots::parse(
            b"User-agent: *\nDisallow: /\n\n\
              User-agent: googlebot\nUser-agent: TRAWL\nDisallow: /private/\n\n\
              User-agent: other\nDisallow: /public/\n\n\
              User-agent: trawl\nDisallow: /tmp/\n",
        );
        assert_eq!(robots.access(), Access::Parsed);
        assert!(allows(&robots, "/"));
        assert!(allows(&robots, "/public/page"));
        assert!(!allows(&robots, "/private/page"));
        assert!(!allows(&robots, "/tmp/x"));
    }

    #[test]
    fn star_group_applies_when_trawl_has_none() {
        let robots = Robots::parse(
            b"User-agent: googlebot\nDisallow: /\n\nUser-agent: *\nDisallow: /search\n",
        );
        assert!(allows(&robots, "/docs"));
        assert!(!allows(&robots, "/search?q=x"));
        assert!(!allows(&robots, "/searching"));
    }

    #[test]
    fn product_token_matches_exactly() {
        let robots = Robots::parse(b"User-agent: trawlbot\nDisallow: /\n");
        assert!(allows(&robots, "/anything"));
        let robots = Robots::parse(b"User-agent: traw\nDisallow: /\n");
        assert!(allows(&robots, "/anything"));
    }

    #[test]
    fn longest_match_wins_and_allow_wins_a_tie() {
        let robots = Robots::parse(
            b"User-agent: trawl\n\
              Disallow: /shop/\n\
              Allow: /shop/public/\n\
              Disallow: /shop/public/secret\n\
              Allow: /tie\n\
              Disallow: /tie\n",
        );
        assert!(!allows(&robots, "/shop/cart"));
        assert!(allows(&robots, "/shop/public/item"));
        assert!(!allows(&robots, "/shop/public/secret-plans"));
        assert!(allows(&robots, "/tie"));
        assert!(allows(&robots, "/other"));
    }

    #[test]
    fn wildcards_and_end_anchors() {
        let robots = Robots::parse(
            b"User-agent: *\n\
              Disallow: /*.pdf$\n\
              Disallow: /*?sessionid=\n\
              Disallow: /exact$\n\
              Allow: /files/*.pdf$\n",
        );
        assert!(!allows(&robots, "/docs/report.pdf"));
        assert!(allows(&robots, "/docs/report.pdf?download=1"));
        assert!(allows(&robots, "/docs/report.pdfx"));
        assert!(allows(&robots, "/files/report.pdf"));
        assert!(!allows(&robots, "/page?sessionid=42"));
        assert!(allows(&robots, "/page?id=42"));
        assert!(!allows(&robots, "/exact"));
        assert!(allows(&robots, "/exact/more"));
    }

    #[test]
    fn percent_encoding_and_case() {
        let robots =
            Robots::parse("User-agent: *\nDisallow: /caf%C3%A9\nDisallow: /Mixed\n".as_bytes());
        assert!(!allows(&robots, "/café"));
        assert!(!allows(&robots, "/caf%c3%a9/menu"));
        assert!(allows(&robots, "/mixed"));
        assert!(!allows(&robots, "/Mixed"));
    }

    #[test]
    fn robots_txt_itself_is_always_allowed() {
        let robots = Robots::parse(b"User-agent: *\nDisallow: /\n");
        assert!(!allows(&robots, "/"));
        assert!(allows(&robots, "/robots.txt"));
        assert!(allows(&Robots::unreachable(), "/robots.txt"));
    }

    #[test]
    fn crawl_delay_comes_from_the_applying_group_and_is_capped() {
        let robots = Robots::parse(
            b"User-agent: *\nCrawl-delay: 30\n\nUser-agent: trawl\nCrawl-delay: 2.5\n",
        );
        assert_eq!(robots.crawl_delay(), Some(Duration::from_millis(2500)));
        let star = Robots::parse(b"User-agent: *\nCrawl-delay: 7\n");
        assert_eq!(star.crawl_delay(), Some(Duration::from_secs(7)));
        let huge = Robots::parse(b"User-agent: trawl\nCrawl-delay: 86400\n");
        assert_eq!(huge.crawl_delay(), Some(MAX_CRAWL_DELAY));
        for bad in ["-1", "soon", "NaN", "inf", ""] {
            let robots =
                Robots::parse(format!("User-agent: trawl\nCrawl-delay: {bad}\n").as_bytes());
            assert_eq!(robots.crawl_delay(), None, "{bad}");
        }
        assert_eq!(
            Robots::parse(b"User-agent: trawl\nDisallow:\n").crawl_delay(),
            None
        );
    }

    #[test]
    fn sitemaps_are_global_absolute_and_http() {
        let robots = Robots::parse(
            b"Sitemap: https://example.com/sitemap.xml\n\
              User-agent: googlebot\n\
              Sitemap: https://cdn.example.net/maps/index.xml.gz\n\
              Disallow: /\n\
              Sitemap: /relative.xml\n\
              Sitemap: ftp://example.com/sitemap.xml\n\
              Sitemap: not a url\n",
        );
        let sitemaps: Vec<&str> = robots.sitemaps().iter().map(Url::as_str).collect();
        assert_eq!(
            sitemaps,
            [
                "https://example.com/sitemap.xml",
                "https://cdn.example.net/maps/index.xml.gz"
            ]
        );
    }

    #[test]
    fn lenient_syntax_comments_bom_and_line_endings() {
        let robots = Robots::parse(
            b"\xef\xbb\xbf# comment\r\nuser-AGENT : trawl # us\r\n  disallow:/a # inline\r\nDissallow: /b\rUser-agent: x\nDisallow: /c\n",
        );
        assert!(!allows(&robots, "/a"));
        assert!(!allows(&robots, "/b"));
        assert!(allows(&robots, "/c"));
    }

    #[test]
    fn empty_and_non_robots_bodies_allow_everything() {
        assert!(allows(&Robots::parse(b""), "/x"));
        assert!(allows(
            &Robots::parse(b"<!DOCTYPE html><html><body>Not found</body></html>"),
            "/x"
        ));
        assert!(allows(
            &Robots::parse(&[0xff, 0xfe, 0x00, 0x01, 0x80]),
            "/x"
        ));
        assert!(allows(
            &Robots::parse(b"User-agent: trawl\nDisallow:\n"),
            "/x"
        ));
    }

    #[test]
    fn statuses_map_to_rfc_9309_access() {
        let body = b"User-agent: *\nDisallow: /private\n";
        let ok = Robots::from_status(200, body);
        assert_eq!(ok.access(), Access::Parsed);
        assert!(!allows(&ok, "/private"));
        assert!(allows(&ok, "/public"));

        for status in [400, 401, 403, 404, 410, 451, 301, 304] {
            let robots = Robots::from_status(status, body);
            assert_eq!(robots.access(), Access::Unavailable, "{status}");
            assert!(allows(&robots, "/private"), "{status}");
            assert_eq!(robots.max_age(0), MAX_AGE);
        }
        for status in [429, 500, 502, 503, 504, 599, 100, 0] {
            let robots = Robots::from_status(status, body);
            assert_eq!(robots.access(), Access::Unreachable, "{status}");
            assert!(!allows(&robots, "/public"), "{status}");
            assert!(!allows(&robots, "/"), "{status}");
            assert_eq!(robots.max_age(0), unreachable_retry(0));
            assert!(robots.sitemaps().is_empty());
            assert_eq!(robots.crawl_delay(), None);
        }
    }

    #[test]
    fn an_unreachable_robots_txt_is_asked_for_again_sooner_than_a_fetched_one() {
        let pauses: Vec<u64> = (0..9).map(|n| unreachable_retry(n).as_secs()).collect();
        assert_eq!(pauses, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(unreachable_retry(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn fetch_errors_map_to_access() {
        let unavailable: Result<Response, client::Error> =
            Err(client::Error::TooManyRedirects { limit: 3 });
        assert_eq!(
            Robots::from_fetch(&unavailable).access(),
            Access::Unavailable
        );
        let looped: Result<Response, client::Error> = Err(client::Error::RedirectLoop {
            url: "https://example.com".to_owned(),
        });
        assert_eq!(Robots::from_fetch(&looped).access(), Access::Unavailable);
        for error in [
            client::Error::Timeout {
                phase: "total",
                seconds: 30,
            },
            client::Error::TooLarge {
                limit: FETCH_MAX_BYTES,
            },
            client::Error::Connect("refused".to_owned()),
            client::Error::Dns {
                host: "example.com".to_owned(),
                message: "nxdomain".to_owned(),
            },
        ] {
            let robots = Robots::from_fetch(&Err(error));
            assert_eq!(robots.access(), Access::Unreachable);
            assert!(!allows(&robots, "/"));
        }
    }

    #[test]
    fn oversize_input_is_parsed_up_to_the_limit_only() {
        let mut body = b"User-agent: trawl\nDisallow: /early\n".to_vec();
        while body.len() < PARSED_BYTES - 20 {
            body.extend_from_slice(b"# filler filler filler filler filler filler filler\n");
        }
        // This line straddles the 500 KiB mark: a cut rule must not apply.
        body.extend_from_slice(b"Disallow: /straddling/rule/that/is/cut/in/half\n");
        assert!(body.len() > PARSED_BYTES);
        body.extend_from_slice(b"Disallow: /late\n");
        let robots = Robots::parse(&body);
        assert!(!allows(&robots, "/early"));
        assert!(allows(&robots, "/straddling/rule/that/is/cut/in/half"));
        assert!(allows(&robots, "/late"));

        // Megabytes of input cost no more than the cap.
        let mut huge = b"User-agent: *\nDisallow: /a\n".to_vec();
        huge.resize(8 * 1024 * 1024, b'x');
        let robots = Robots::parse(&huge);
        assert!(!allows(&robots, "/a"));
        assert!(allows(&robots, "/b"));
    }

    #[test]
    fn robots_url_keeps_scheme_host_and_port_only() {
        let robots = |input: &str| robots_url(&Url::parse(input).expect("parses")).to_string();
        assert_eq!(
            robots("https://user:pw@Example.com:8443/a/b.html?q=1#f"),
            "https://example.com:8443/robots.txt"
        );
        assert_eq!(
            robots("http://example.com"),
            "http://example.com/robots.txt"
        );
        assert_eq!(
            robots("https://bücher.example/x"),
            "https://xn--bcher-kva.example/robots.txt"
        );
        assert_eq!(
            robots("http://[::1]:8080/x"),
            "http://[::1]:8080/robots.txt"
        );
        assert_eq!(robots("mailto:a@b.c?subject=x"), "mailto:a@b.c");
    }
}
