//! Element selection by CSS selector, before extraction: a page reduced to the elements a
//! caller names (`include`, e.g. `article`, `.post`, `#main`) without the ones it does not
//! want (`exclude`, e.g. `nav`, `.comments`). This is what Firecrawl's `includeTags` and
//! `excludeTags` mean; the result is a whole HTML document again (the original `<head>` kept,
//! so title and metadata survive), which `web::extract` then reads as usual.
//!
//! Not here: extraction itself (`web::extract`), decoding bytes (`web::charset`). Parsing is
//! guarded by the same budget as extraction (`web::budget`).

use std::collections::HashSet;

use dom_query::{Document, Matcher, NodeId};

use super::budget;
use super::noscript;

/// Most selectors in one list: each is a walk over the whole tree.
pub const MAX_SELECTORS: usize = 64;

/// Longest selector accepted, in bytes.
pub const MAX_SELECTOR_LEN: usize = 512;

/// Why a selection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A selector that does not parse, is too long, or too many of them.
    #[error("invalid selector {selector:?}: {reason}")]
    Selector {
        /// The selector as given.
        selector: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The document is over the parsing budget; no tree was built.
    #[error(transparent)]
    Limit(#[from] budget::Exceeded),
}

/// Parses every selector of `selectors`, or says which one is wrong (and why).
pub fn check(selectors: &[String]) -> Result<(), Error> {
    matchers(selectors).map(drop)
}

fn matchers(selectors: &[String]) -> Result<Vec<Matcher>, Error> {
    if selectors.len() > MAX_SELECTORS {
        return Err(Error::Selector {
            selector: selectors[MAX_SELECTORS].clone(),
            reason: format!("at most {MAX_SELECTORS} selectors are accepted"),
        });
    }
    selectors
        .iter()
        .map(|selector| {
            let invalid = |reason: String| Error::Selector {
                selector: selector.clone(),
                reason,
            };
            if selector.len() > MAX_SELECTOR_LEN {
                return Err(invalid(format!("longer than {MAX_SELECTOR_LEN} bytes")));
            }
            if selector.trim().is_empty() {
                return Err(invalid("empty".to_owned()));
            }
            Matcher::new(selector).map_err(|error| invalid(format!("{error:?}")))
        })
        .collect()
}

/// A page after selection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    /// The page as a whole HTML document again.
    pub html: String,
    /// Elements kept by `include` (0 when `include` was empty, or matched nothing).
    pub kept: usize,
    /// Elements removed by `exclude`.
    pub removed: usize,
}

/// `html` with the elements matching `exclude` removed and, when `include` is not empty, its
/// body reduced to the elements matching `include` (in document order; an element inside
/// another kept one is not repeated). A page where `include` matches nothing has an empty
/// body (`kept: 0`): the caller reports it, the selection does not guess.
pub fn apply(html: &str, include: &[String], exclude: &[String]) -> Result<Selected, Error> {
    let include = matchers(include)?;
    let exclude = matchers(exclude)?;
    budget::admit(html)?;
    let document = Document::from(&*noscript::close_raw_text(html));
    let mut removed = 0;
    for matcher in &exclude {
        let matched = document.select_matcher(matcher);
        removed += matched.length();
        matched.remove();
    }
    if include.is_empty() {
        return Ok(Selected {
            html: document.html().to_string(),
            kept: 0,
            removed,
        });
    }
    let mut kept: Vec<NodeId> = Vec::new();
    for matcher in &include {
        kept.extend(
            document
                .select_matcher(matcher)
                .nodes()
                .iter()
                .map(|node| node.id),
        );
    }
    let kept_set: HashSet<NodeId> = kept.iter().copied().collect();
    // Document order: node ids are assigned as the parser creates nodes, in source order.
    kept.sort_unstable();
    kept.dedup();
    let mut body = String::new();
    let mut count = 0;
    for id in kept {
        let Some(node) = document.tree.get(&id) else {
            continue;
        };
        if node
            .ancestors_it(None)
            .any(|ancestor| kept_set.contains(&ancestor.id))
        {
            continue;
        }
        body.push_str(&node.html());
        body.push('\n');
        count += 1;
    }
    let lang = document
        .select("html")
        .attr("lang")
        .map(|lang| format!(" lang=\"{}\"", escape_attribute(&lang)))
        .unwrap_or_default();
    let head = document.select("head").inner_html();
    Ok(Selected {
        html: format!(
            "<!DOCTYPE html>\n<html{lang}><head>{head}</head><body>\n{body}</body></html>"
        ),
        kept: count,
        removed,
    })
}

fn escape_attribute(value: &str) -> String {
    value
        .replace('&', "&amp;")
        .replace('"', "&quot;")
        .replace('<', "&lt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<!DOCTYPE html><html lang="en"><head><title>T</title>
        <meta name="description" content="D"></head><body>
        <nav>menu</nav>
        <article id="a"><h1>Head</h1><p>First <span class="ad">AD</span> para.</p>
          <section class="more"><p>Nested</p></section></article>
        <aside class="more">Side</aside>
        <footer>foot</footer></body></html>"#;

    fn selectors(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn include_keeps_only_the_matching_elements_in_order_once() {
        let selected = apply(PAGE, &selectors(&["aside", "article", ".more"]), &[]).unwrap();
        assert_eq!(selected.kept, 2);
        let out = selected.html;
        assert!(out.contains("<title>T</title>"), "{out}");
        assert!(out.contains(r#"lang="en""#), "{out}");
        assert!(!out.contains("menu") && !out.contains("foot"), "{out}");
        let article = out.find("<article").unwrap();
        let aside = out.find("<aside").unwrap();
        assert!(article < aside, "document order: {out}");
        assert_eq!(
            out.matches("Nested").count(),
            1,
            "nested match kept once: {out}"
        );
    }

    #[test]
    fn exclude_removes_elements_everywhere() {
        let selected = apply(PAGE, &[], &selectors(&["nav", ".ad", "footer"])).unwrap();
        assert_eq!(selected.removed, 3);
        let out = selected.html;
        assert!(!out.contains("menu") && !out.contains("AD") && !out.contains("foot"));
        assert!(out.contains("First") && out.contains("Side"));
    }

    #[test]
    fn exclude_applies_inside_included_elements() {
        let out = apply(PAGE, &selectors(&["#a"]), &selectors(&[".ad"]))
            .unwrap()
            .html;
        assert!(out.contains("First") && !out.contains("AD") && !out.contains("Side"));
    }

    #[test]
    fn no_match_gives_an_empty_body() {
        let selected = apply(PAGE, &selectors(&["table"]), &[]).unwrap();
        assert_eq!(selected.kept, 0);
        assert!(
            selected.html.contains("<body>\n</body>"),
            "{}",
            selected.html
        );
    }

    #[test]
    fn bad_selectors_are_named() {
        for bad in ["div[", "", "a".repeat(MAX_SELECTOR_LEN + 1).as_str()] {
            let error = check(&selectors(&[bad])).unwrap_err();
            assert!(matches!(error, Error::Selector { .. }), "{bad}: {error}");
        }
        let many = vec!["p".to_owned(); MAX_SELECTORS + 1];
        assert!(check(&many).is_err());
        assert!(check(&selectors(&["p", ".x > a", "#id"])).is_ok());
    }
}
