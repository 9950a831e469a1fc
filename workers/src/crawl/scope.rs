//! The key a crawl dedupes URLs by ([`crawl_key`]). The crawl's scope and include/exclude
//! filters are part of the job contract (`crate::job`) and re-exported here.
//!
//! Not here: robots.txt (`crawl::robots`), depth and page budgets, or remembering which keys a
//! crawl has seen (the frontier, in the queue backend).

use url::Url;

pub use crate::job::{FilterError, MAX_GLOB_LEN, MAX_GLOBS, Scope, UrlFilter};
use crate::web::normalize::normalize_url;

/// Returns the key under which a crawl dedupes `url`: [`normalize_url`] as a string.
///
/// So two URLs share a key when they differ only in: scheme or host case, IDNA form of the host
/// (the `url` crate stores punycode), an explicit default port, dot segments in the path, the
/// fragment, tracking parameters (every `utm_*`, and `fbclid`, `gclid`, `dclid`, `gbraid`,
/// `wbraid`, `msclkid`, `yclid`, `mc_cid`, `mc_eid`, `_ga`, `_gl`, `igshid`, `twclid`, `ttclid`,
/// `li_fat_id`, `ref_src`, case-insensitive), the order of the remaining query pairs, or an empty
/// `?`. Not merged: `http` and `https`, `www.` and the bare host, a trailing `/`, `index.html`,
/// percent-encoding case, and duplicates that only `rel=canonical` reveals.
pub fn crawl_key(url: &Url) -> String {
    normalize_url(url).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(input: &str) -> Url {
        Url::parse(input).expect("test url parses")
    }

    #[test]
    fn crawl_key_merges_what_normalisation_merges_and_nothing_more() {
        let key = |input: &str| crawl_key(&url(input));
        assert_eq!(
            key("HTTPS://Example.COM:443/a/./b/../c?b=2&utm_source=x&a=1&gclid=z#frag"),
            "https://example.com/a/c?a=1&b=2"
        );
        assert_eq!(
            key("https://example.com/p?fbclid=1"),
            "https://example.com/p"
        );
        assert_eq!(
            key("https://bücher.example/"),
            key("https://xn--bcher-kva.example/")
        );
        assert_ne!(key("http://example.com/"), key("https://example.com/"));
        assert_ne!(key("https://example.com/a"), key("https://example.com/a/"));
        assert_ne!(key("https://www.example.com/"), key("https://example.com/"));
    }
}
