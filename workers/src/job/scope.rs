//! Which URLs a crawl may visit: the scope measured from a seed ([`Scope`]) and include and
//! exclude globs over the URL's path and query ([`UrlFilter`]). A crawl spec carries both, so
//! they are checked when the crawl is submitted.
//!
//! Not here: the key a crawl dedupes URLs by (`crate::crawl::crawl_key`), robots.txt
//! (`crate::crawl::robots`), depth and page budgets, or remembering which keys a crawl has seen
//! (the frontier, in the queue backend).

use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use url::{Host, Position, Url};
use utoipa::ToSchema;

/// Most globs accepted in one include or exclude list.
pub const MAX_GLOBS: usize = 64;

/// Longest glob accepted, in bytes.
pub const MAX_GLOB_LEN: usize = 512;

/// How far from its seed a crawl may go. Every scope admits `http` and `https` URLs only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The seed's host and port (the default). `http` and `https` both count, so a site that
    /// redirects to `https` stays in scope; "port" is the explicit port, and a scheme's default
    /// port counts as none (`http://a/` and `https://a/` match, `http://a:8080/` does not).
    #[default]
    Host,
    /// Any host under the seed's registrable domain, by the public suffix list:
    /// `a.example.co.uk` and `b.example.co.uk` match, `example.co.uk` and `other.co.uk` do not,
    /// and neither do `a.github.io` and `b.github.io` (the list's private section counts, so
    /// separately owned sites stay apart). Any port, `http` or `https`. A host without a
    /// registrable domain (an IP address, `localhost`, a bare public suffix) matches itself
    /// only.
    Domain,
    /// The seed's origin (scheme, host and port, exactly) and its directory: the candidate's
    /// path must start with the seed's path up to and including its last `/`. A seed of
    /// `https://a/docs/guide/intro.html` admits `https://a/docs/guide/…`; a seed of
    /// `https://a/docs` admits all of `https://a/`.
    Prefix,
}

impl Scope {
    /// Returns the snake_case name of the scope.
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Host => "host",
            Scope::Domain => "domain",
            Scope::Prefix => "prefix",
        }
    }

    /// Returns true when `candidate` lies within this scope of `seed`. A URL whose scheme is
    /// not `http` or `https`, or that has no host, is never in scope.
    pub fn contains(&self, seed: &Url, candidate: &Url) -> bool {
        let (Some(seed_host), Some(candidate_host)) = (web_host(seed), web_host(candidate)) else {
            return false;
        };
        match self {
            Scope::Host => seed_host == candidate_host && seed.port() == candidate.port(),
            Scope::Domain => match (
                registrable_domain(&seed_host),
                registrable_domain(&candidate_host),
            ) {
                (Some(seed_domain), Some(candidate_domain)) => seed_domain == candidate_domain,
                _ => seed_host == candidate_host,
            },
            Scope::Prefix => {
                seed.origin() == candidate.origin()
                    && candidate.path().starts_with(directory_of(seed.path()))
            }
        }
    }
}

/// Include and exclude globs matched against a URL's path and query.
///
/// What is matched is the URL's path, followed by `?` and the query when there is one, exactly
/// as the URL holds them (percent-encoded, case kept, no fragment): for
/// `https://a/docs/x%20y.html?lang=en#top` that is `/docs/x%20y.html?lang=en`. Glob syntax is
/// globset's: `*` matches within one path segment (never across `/`), `**` as a whole segment
/// matches across segments (`/docs/**` is everything under `/docs/`), `?` matches one character
/// other than `/` (so `[?]` is a literal question mark), `[abc]` a class and `{a,b}` either
/// alternative. Matching is case-sensitive, like paths. Every glob must start with `/` or `*`,
/// since the text matched always starts with `/`.
///
/// A URL passes when no exclude glob matches it and, if there are include globs, at least one
/// matches it: exclude wins.
#[derive(Debug, Clone, Default)]
pub struct UrlFilter {
    include: Option<GlobSet>,
    exclude: Option<GlobSet>,
}

/// A glob list that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    /// The glob does not start with `/` or `*`, so it could never match a path.
    #[error("glob {glob:?} must start with '/' or '*': it is matched against the url path")]
    NotRooted {
        /// The glob as given.
        glob: String,
    },
    /// The glob does not parse.
    #[error("glob {glob:?} is invalid: {reason}")]
    Invalid {
        /// The glob as given.
        glob: String,
        /// What is wrong with it, in globset's words.
        reason: String,
    },
    /// The glob is longer than [`MAX_GLOB_LEN`].
    #[error("glob of {len} bytes is longer than {MAX_GLOB_LEN}")]
    TooLong {
        /// Its length in bytes.
        len: usize,
    },
    /// More globs than [`MAX_GLOBS`] in one list.
    #[error("{count} globs in one list, at most {MAX_GLOBS} allowed")]
    TooMany {
        /// How many were given.
        count: usize,
    },
}

impl UrlFilter {
    /// Compiles the include and exclude globs. An empty include list admits every URL that no
    /// exclude glob matches.
    pub fn new<S: AsRef<str>>(include: &[S], exclude: &[S]) -> Result<Self, FilterError> {
        Ok(UrlFilter {
            include: compile(include)?,
            exclude: compile(exclude)?,
        })
    }

    /// Returns true when the URL's path and query pass the globs.
    pub fn allows(&self, url: &Url) -> bool {
        let target = &url[Position::BeforePath..Position::AfterQuery];
        if self
            .exclude
            .as_ref()
            .is_some_and(|exclude| exclude.is_match(target))
        {
            return false;
        }
        self.include
            .as_ref()
            .is_none_or(|include| include.is_match(target))
    }
}

/// The host of an `http(s)` URL, without a trailing dot (`example.com.` is `example.com`).
fn web_host(url: &Url) -> Option<Host<&str>> {
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    match url.host()? {
        Host::Domain(domain) => Some(Host::Domain(domain.strip_suffix('.').unwrap_or(domain))),
        other => Some(other),
    }
}

/// The registrable domain ("eTLD+1") of a host name; `None` for addresses and for names that
/// are a public suffix themselves or have no suffix the list knows.
fn registrable_domain<'a>(host: &Host<&'a str>) -> Option<&'a str> {
    match host {
        // The `url` crate has already lower-cased the name and turned IDNs into punycode, which
        // is the form the list is matched in.
        // `psl` applies the list's implicit `*` rule to unknown suffixes, so `localhost` has no
        // domain while `example.test` is one.
        Host::Domain(name) => psl::domain_str(name),
        Host::Ipv4(_) | Host::Ipv6(_) => None,
    }
}

/// The path up to and including its last `/`.
fn directory_of(path: &str) -> &str {
    match path.rfind('/') {
        Some(index) => &path[..=index],
        None => "/",
    }
}

fn compile<S: AsRef<str>>(globs: &[S]) -> Result<Option<GlobSet>, FilterError> {
    if globs.is_empty() {
        return Ok(None);
    }
    if globs.len() > MAX_GLOBS {
        return Err(FilterError::TooMany { count: globs.len() });
    }
    let mut set = GlobSetBuilder::new();
    for glob in globs {
        let glob = glob.as_ref();
        if glob.len() > MAX_GLOB_LEN {
            return Err(FilterError::TooLong { len: glob.len() });
        }
        if !(glob.starts_with('/') || glob.starts_with('*')) {
            return Err(FilterError::NotRooted {
                glob: glob.to_owned(),
            });
        }
        let compiled = GlobBuilder::new(glob)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|error| FilterError::Invalid {
                glob: glob.to_owned(),
                reason: error.kind().to_string(),
            })?;
        set.add(compiled);
    }
    set.build().map(Some).map_err(|error| FilterError::Invalid {
        glob: error.glob().unwrap_or_default().to_owned(),
        reason: error.kind().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(input: &str) -> Url {
        Url::parse(input).expect("test url parses")
    }

    fn within(scope: Scope, seed: &str, candidate: &str) -> bool {
        scope.contains(&url(seed), &url(candidate))
    }

    #[test]
    fn host_scope_compares_host_and_explicit_port_across_http_and_https() {
        let seed = "https://docs.example.com/guide/";
        assert!(within(Scope::Host, seed, "https://docs.example.com/other"));
        assert!(within(Scope::Host, seed, "http://docs.example.com/"));
        assert!(within(Scope::Host, seed, "https://DOCS.Example.COM:443/x"));
        assert!(within(Scope::Host, seed, "https://docs.example.com./x"));
        assert!(!within(
            Scope::Host,
            seed,
            "https://docs.example.com:8443/x"
        ));
        assert!(!within(Scope::Host, seed, "https://www.example.com/"));
        assert!(!within(Scope::Host, seed, "https://example.com/"));
        assert!(!within(Scope::Host, seed, "ftp://docs.example.com/"));
        assert!(!within(Scope::Host, seed, "mailto:me@docs.example.com"));
        assert!(within(
            Scope::Host,
            "http://127.0.0.1:8080/",
            "http://127.0.0.1:8080/a"
        ));
        assert!(!within(
            Scope::Host,
            "http://127.0.0.1:8080/",
            "http://127.0.0.1:8081/a"
        ));
        assert!(!within(
            Scope::Host,
            "http://127.0.0.1:8080/",
            "http://127.0.0.2:8080/a"
        ));
        assert!(within(Scope::Host, "http://[::1]:80/", "https://[::1]/a"));
    }

    #[test]
    fn host_scope_matches_idn_hosts_in_either_form() {
        let seed = "https://bücher.example/";
        assert!(within(Scope::Host, seed, "https://xn--bcher-kva.example/a"));
        assert!(within(Scope::Host, seed, "https://BÜCHER.example/a"));
        assert!(!within(Scope::Host, seed, "https://bucher.example/a"));
    }

    #[test]
    fn domain_scope_uses_the_registrable_domain() {
        let seed = "https://a.example.co.uk/";
        assert!(within(Scope::Domain, seed, "https://b.example.co.uk/"));
        assert!(within(Scope::Domain, seed, "http://example.co.uk:8080/"));
        assert!(within(Scope::Domain, seed, "https://x.y.a.example.co.uk/"));
        assert!(!within(Scope::Domain, seed, "https://other.co.uk/"));
        assert!(!within(
            Scope::Domain,
            "https://example.co.uk/",
            "https://other.co.uk/"
        ));
        assert!(within(
            Scope::Domain,
            "https://www.example.com/",
            "https://blog.example.com/"
        ));
        assert!(!within(
            Scope::Domain,
            "https://www.example.com/",
            "https://example.org/"
        ));
        // The private section: separately owned sites under one platform.
        assert!(!within(
            Scope::Domain,
            "https://alice.github.io/",
            "https://bob.github.io/"
        ));
        assert!(within(
            Scope::Domain,
            "https://alice.github.io/",
            "https://www.alice.github.io/"
        ));
    }

    #[test]
    fn domain_scope_handles_idn_suffixes_and_hosts_without_a_domain() {
        // пример.рф: an IDN under an IDN public suffix.
        assert!(within(
            Scope::Domain,
            "https://а.пример.рф/",
            "https://б.пример.рф/"
        ));
        assert!(within(
            Scope::Domain,
            "https://а.пример.рф/",
            "https://xn--e1afmkfd.xn--p1ai/"
        ));
        assert!(!within(
            Scope::Domain,
            "https://пример.рф/",
            "https://другой.рф/"
        ));
        // Unknown TLDs use the implicit `*` rule: `site.test` is registrable.
        assert!(within(
            Scope::Domain,
            "http://site.test:1/",
            "http://a.site.test:2/"
        ));
        // No registrable domain: only the same host.
        assert!(within(
            Scope::Domain,
            "http://localhost:1/",
            "http://localhost:2/"
        ));
        assert!(!within(
            Scope::Domain,
            "http://localhost/",
            "http://a.localhost/"
        ));
        assert!(!within(Scope::Domain, "https://co.uk/", "https://a.co.uk/"));
        assert!(within(
            Scope::Domain,
            "http://10.0.0.1/",
            "https://10.0.0.1:8080/"
        ));
        assert!(!within(
            Scope::Domain,
            "http://10.0.0.1/",
            "http://10.0.0.2/"
        ));
    }

    #[test]
    fn prefix_scope_uses_the_origin_and_the_seed_directory() {
        let seed = "https://example.com/docs/guide/intro.html";
        assert!(within(
            Scope::Prefix,
            seed,
            "https://example.com/docs/guide/intro.html"
        ));
        assert!(within(
            Scope::Prefix,
            seed,
            "https://example.com/docs/guide/setup/a?b=c"
        ));
        assert!(within(
            Scope::Prefix,
            seed,
            "https://example.com/docs/guide/"
        ));
        assert!(!within(
            Scope::Prefix,
            seed,
            "https://example.com/docs/guide"
        ));
        assert!(!within(
            Scope::Prefix,
            seed,
            "https://example.com/docs/other"
        ));
        assert!(!within(
            Scope::Prefix,
            seed,
            "http://example.com/docs/guide/a"
        ));
        assert!(!within(
            Scope::Prefix,
            seed,
            "https://example.com:8443/docs/guide/a"
        ));
        assert!(!within(
            Scope::Prefix,
            seed,
            "https://www.example.com/docs/guide/a"
        ));
        // A seed without a trailing slash scopes to its parent directory.
        assert!(within(
            Scope::Prefix,
            "https://example.com/docs",
            "https://example.com/blog"
        ));
        assert!(within(
            Scope::Prefix,
            "https://example.com/docs/",
            "https://example.com/docs/a"
        ));
        assert!(!within(
            Scope::Prefix,
            "https://example.com/docs/",
            "https://example.com/docsx"
        ));
    }

    #[test]
    fn scope_serialises_as_snake_case() {
        assert_eq!(
            serde_json::to_string(&Scope::Domain).expect("serialises"),
            "\"domain\""
        );
        let parsed: Scope = serde_json::from_str("\"prefix\"").expect("parses");
        assert_eq!(parsed, Scope::Prefix);
        assert!(serde_json::from_str::<Scope>("\"Host\"").is_err());
        assert_eq!(Scope::default(), Scope::Host);
        assert_eq!(Scope::Host.as_str(), "host");
    }

    fn filter(include: &[&str], exclude: &[&str]) -> UrlFilter {
        UrlFilter::new(include, exclude).expect("globs compile")
    }

    fn passes(filter: &UrlFilter, input: &str) -> bool {
        filter.allows(&url(input))
    }

    #[test]
    fn empty_filter_allows_everything() {
        let open = filter(&[], &[]);
        assert!(passes(&open, "https://a/"));
        assert!(passes(&open, "https://a/x/y?z=1"));
    }

    #[test]
    fn star_stays_in_a_segment_and_double_star_crosses() {
        let one_level = filter(&["/blog/*"], &[]);
        assert!(passes(&one_level, "https://a/blog/post"));
        assert!(passes(&one_level, "https://a/blog/post?page=2"));
        assert!(!passes(&one_level, "https://a/blog/2024/post"));
        assert!(!passes(&one_level, "https://a/news/post"));

        let any_depth = filter(&["/blog/**"], &[]);
        assert!(passes(&any_depth, "https://a/blog/2024/05/post"));
        assert!(passes(&any_depth, "https://a/blog/post"));
        assert!(!passes(&any_depth, "https://a/blogs/post"));

        let anywhere = filter(&["**/*.html"], &[]);
        assert!(passes(&anywhere, "https://a/x/y/z.html"));
        assert!(passes(&anywhere, "https://a/z.html"));
        assert!(!passes(&anywhere, "https://a/z.html?q=1"));
        assert!(!passes(&anywhere, "https://a/z.htm"));
    }

    #[test]
    fn exclude_wins_over_include() {
        let docs = filter(&["/docs/**"], &["/docs/internal/**", "**/*.pdf"]);
        assert!(passes(&docs, "https://a/docs/guide"));
        assert!(!passes(&docs, "https://a/docs/internal/secret"));
        assert!(!passes(&docs, "https://a/docs/manual.pdf"));
        assert!(!passes(&docs, "https://a/blog/post"));

        let exclude_only = filter(&[], &["/search*"]);
        assert!(passes(&exclude_only, "https://a/docs"));
        assert!(!passes(&exclude_only, "https://a/search?q=x"));
        assert!(!passes(&exclude_only, "https://a/search"));
    }

    #[test]
    fn the_matched_text_is_the_encoded_path_and_query_without_fragment() {
        let query = filter(&["/search[?]q=*"], &[]);
        assert!(passes(&query, "https://a/search?q=rust#results"));
        assert!(!passes(&query, "https://a/search"));

        let encoded = filter(&["/a%20b/*"], &[]);
        assert!(passes(&encoded, "https://a/a b/c"));
        assert!(passes(&encoded, "https://a/a%20b/c"));

        let fragment = filter(&[], &["*#*"]);
        assert!(passes(&fragment, "https://a/page#section"));

        let case = filter(&["/Docs/**"], &[]);
        assert!(!passes(&case, "https://a/docs/x"));

        let alternatives = filter(&["/{blog,news}/**"], &[]);
        assert!(passes(&alternatives, "https://a/news/x"));
        assert!(!passes(&alternatives, "https://a/shop/x"));
    }

    #[test]
    fn bad_globs_are_clear_errors() {
        let unclosed = UrlFilter::new(&["/docs/[a"], &[]).expect_err("unclosed class");
        assert!(
            matches!(&unclosed, FilterError::Invalid { glob, .. } if glob == "/docs/[a"),
            "{unclosed:?}"
        );
        assert!(unclosed.to_string().contains("/docs/[a"), "{unclosed}");

        let alternates = UrlFilter::new(&[], &["/{a,b"]).expect_err("unclosed alternates");
        assert!(matches!(alternates, FilterError::Invalid { .. }));

        let relative = UrlFilter::new(&["docs/**"], &[]).expect_err("not rooted");
        assert_eq!(
            relative,
            FilterError::NotRooted {
                glob: "docs/**".to_owned()
            }
        );
        assert!(matches!(
            UrlFilter::new(&[""], &[]),
            Err(FilterError::NotRooted { .. })
        ));

        let long = format!("/{}", "a".repeat(MAX_GLOB_LEN));
        assert!(matches!(
            UrlFilter::new(&[long.as_str()], &[]),
            Err(FilterError::TooLong { .. })
        ));

        let many: Vec<String> = (0..=MAX_GLOBS).map(|n| format!("/{n}")).collect();
        assert_eq!(
            UrlFilter::new(&many, &[]).expect_err("too many"),
            FilterError::TooMany {
                count: MAX_GLOBS + 1
            }
        );
    }
}
