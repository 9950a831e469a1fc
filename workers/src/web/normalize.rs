//! URL normalisation for dedupe and cache keys: the `url` crate already lower-cases scheme and
//! host, applies IDNA, drops default ports and resolves dot segments; this adds dropping the
//! fragment, removing tracking parameters and sorting the query.
//!
//! Not here: deciding whether two different URLs are the same page (`rel=canonical` handling
//! belongs to the crawler).

use url::Url;

/// Query parameters that only track the visitor and never change the page.
const TRACKING_EXACT: &[&str] = &[
    "fbclid",
    "gclid",
    "dclid",
    "gbraid",
    "wbraid",
    "msclkid",
    "yclid",
    "mc_cid",
    "mc_eid",
    "_ga",
    "_gl",
    "igshid",
    "twclid",
    "ttclid",
    "li_fat_id",
    "ref_src",
];

/// Returns `url` normalised: no fragment, no tracking parameters (`utm_*` and the click ids
/// above), the remaining query pairs sorted as raw text (their encoding is kept, so the server
/// sees the same bytes), and no empty `?`.
pub fn normalize_url(url: &Url) -> Url {
    let mut normalized = url.clone();
    normalized.set_fragment(None);
    if let Some(query) = url.query() {
        let mut pairs: Vec<&str> = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .filter(|pair| {
                let key = pair
                    .split('=')
                    .next()
                    .unwrap_or_default()
                    .to_ascii_lowercase();
                !(key.starts_with("utm_") || TRACKING_EXACT.contains(&key.as_str()))
            })
            .collect();
        pairs.sort_unstable();
        if pairs.is_empty() {
            normalized.set_query(None);
        } else {
            normalized.set_query(Some(&pairs.join("&")));
        }
    }
    normalized
}

#[cfg(test)]
mod tests {
    use super::*;

    fn norm(input: &str) -> String {
        normalize_url(&Url::parse(input).expect("url")).to_string()
    }

    #[test]
    fn normalises_case_ports_fragments_and_queries() {
        assert_eq!(
            norm("HTTP://Example.COM:80/a/./b/../c#top"),
            "http://example.com/a/c"
        );
        assert_eq!(
            norm("https://example.com:443/?b=2&a=1"),
            "https://example.com/?a=1&b=2"
        );
        assert_eq!(
            norm("https://example.com/p?utm_source=x&id=7&fbclid=y&UTM_medium=z"),
            "https://example.com/p?id=7"
        );
        assert_eq!(
            norm("https://example.com/p?utm_source=x"),
            "https://example.com/p"
        );
        assert_eq!(norm("https://example.com/p?"), "https://example.com/p");
    }

    #[test]
    fn keeps_the_encoding_of_values() {
        assert_eq!(
            norm("https://example.com/s?q=a%20b&x=%2F"),
            "https://example.com/s?q=a%20b&x=%2F"
        );
    }
}
