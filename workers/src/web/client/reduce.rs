//! An oversize HTML body made small while it streams: once a page passes `http.max_bytes`,
//! the rest of it (and what was read so far) goes through lol_html, which drops the bodies of
//! `<script>` (JSON-LD kept: it carries the page's metadata), `<style>` and `<svg>` and every
//! comment, so the limit counts what a reader can see. Real pages that big are mostly inline
//! scripts, styles and icons; their text is still there.
//!
//! Not here: the hard cap on decoded bytes read and the cut when the kept bytes still pass the
//! limit (`client::response`), or what the page means (`web::extract`).

use std::sync::{Arc, Mutex, PoisonError};

use lol_html::html_content::Comment;
use lol_html::send::{Element, HtmlRewriter};
use lol_html::{MemorySettings, Settings, doc_comments, element};

/// Most memory lol_html may hold for one page (a start tag or comment split over chunks is
/// buffered whole). Past it the rest of the page is kept as it comes, not dropped.
const REWRITER_MEMORY: usize = 4 << 20;

/// A streaming reducer over one HTML body.
pub(super) struct Reducer {
    /// `None` once the rewriter gave up (its memory limit): bytes are then kept as they come.
    rewriter: Option<HtmlRewriter<'static, Sink>>,
    kept: Arc<Mutex<Vec<u8>>>,
    written: u64,
}

/// Where the rewriter's output goes.
struct Sink(Arc<Mutex<Vec<u8>>>);

impl lol_html::OutputSink for Sink {
    fn handle_chunk(&mut self, chunk: &[u8]) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(chunk);
    }
}

impl Reducer {
    /// A reducer for a body in an ASCII-compatible encoding (the caller keeps UTF-16 out).
    pub(super) fn new() -> Reducer {
        let kept = Arc::new(Mutex::new(Vec::new()));
        let settings = Settings::new_send()
            .append_element_content_handler(element!("script, style, svg", |el: &mut Element| {
                let json_ld = el.tag_name() == "script"
                    && el.get_attribute("type").is_some_and(|kind| {
                        kind.trim().eq_ignore_ascii_case("application/ld+json")
                    });
                if !json_ld {
                    el.remove();
                }
                Ok(())
            }))
            .append_document_content_handler(doc_comments!(|comment: &mut Comment| {
                comment.remove();
                Ok(())
            }))
            .with_memory_settings(
                MemorySettings::new()
                    .with_max_allowed_memory_usage(REWRITER_MEMORY)
                    .with_graceful_bail_out_on_memory_limit_exceeded(true),
            );
        Reducer {
            rewriter: Some(HtmlRewriter::new(settings, Sink(Arc::clone(&kept)))),
            kept,
            written: 0,
        }
    }

    /// Feeds the next bytes of the body.
    pub(super) fn write(&mut self, bytes: &[u8]) {
        self.written += bytes.len() as u64;
        match self.rewriter.as_mut() {
            Some(rewriter) => {
                if rewriter.write(bytes).is_err() {
                    // The rewriter has flushed what it held, as it came; the rest follows it.
                    self.rewriter = None;
                }
            }
            None => self.lock().extend_from_slice(bytes),
        }
    }

    /// Bytes fed so far.
    pub(super) fn written(&self) -> u64 {
        self.written
    }

    /// Bytes kept so far (the rewriter may still hold a few of the last ones).
    pub(super) fn kept_len(&self) -> u64 {
        self.lock().len() as u64
    }

    /// Ends the body: the kept bytes, and how many bytes were fed.
    pub(super) fn finish(mut self) -> (Vec<u8>, u64) {
        if let Some(rewriter) = self.rewriter.take() {
            // An error here is the memory limit again: what it held has been flushed.
            let _ = rewriter.end();
        }
        let kept = std::mem::take(&mut *self.lock());
        (kept, self.written)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        self.kept.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reduce(chunks: &[&str]) -> String {
        let mut reducer = Reducer::new();
        for chunk in chunks {
            reducer.write(chunk.as_bytes());
        }
        let (kept, written) = reducer.finish();
        assert_eq!(
            written,
            chunks.iter().map(|chunk| chunk.len() as u64).sum::<u64>()
        );
        String::from_utf8(kept).expect("utf-8 in, utf-8 out")
    }

    #[test]
    fn scripts_styles_svg_and_comments_go_text_and_json_ld_stay() {
        let page = "<html><head><style>p{color:red}</style><script type=\"application/ld+json\">\
                    {\"@type\":\"Product\"}</script><script>var a = '</div>';</script></head>\
                    <body><!-- a comment --><p>Price: 12 €</p><svg><path d=\"M0\"/></svg>\
                    <noscript><p>Kept for readers without JavaScript.</p></noscript></body></html>";
        let kept = reduce(&[page]);
        assert_eq!(
            kept,
            "<html><head><script type=\"application/ld+json\">{\"@type\":\"Product\"}</script>\
             </head><body><p>Price: 12 €</p><noscript><p>Kept for readers without \
             JavaScript.</p></noscript></body></html>"
        );
    }

    #[test]
    fn chunk_boundaries_inside_tags_and_scripts_do_not_matter() {
        let page = "<p>one</p><script>let s = '<p>not text</p>';</script><p>two</p>";
        let whole = reduce(&[page]);
        for split in 1..page.len() {
            assert_eq!(
                reduce(&[&page[..split], &page[split..]]),
                whole,
                "split at {split}"
            );
        }
        assert_eq!(whole, "<p>one</p><p>two</p>");
    }

    #[test]
    fn bytes_that_are_not_utf8_pass_through() {
        // windows-1252 "café" and a stray byte: not UTF-8, kept as sent.
        let mut reducer = Reducer::new();
        reducer.write(b"<p>caf\xe9 \x81</p><script>x()</script>");
        let (kept, _) = reducer.finish();
        assert_eq!(kept, b"<p>caf\xe9 \x81</p>");
    }
}
