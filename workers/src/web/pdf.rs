//! PDF to text with page markers (pdf-extract, pure Rust). Malformed PDFs make the crate panic
//! at times, so the call is wrapped and a panic becomes an error, never a dead worker.
//!
//! Not here: OCR of scanned pages (they come out empty and are reported as such).

use std::panic::{AssertUnwindSafe, catch_unwind};

/// Why a PDF gave no text.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The bytes are not a readable PDF (or are encrypted).
    #[error("unreadable pdf: {0}")]
    Unreadable(String),
}

/// Extracts the text of each page, as `--- page N ---` followed by the page's text.
pub fn pdf_to_text(bytes: &[u8]) -> Result<String, Error> {
    let pages = catch_unwind(AssertUnwindSafe(|| {
        pdf_extract::extract_text_from_mem_by_pages(bytes)
    }))
    .map_err(|_| Error::Unreadable("the pdf parser gave up on this file".to_owned()))?
    .map_err(|error| Error::Unreadable(error.to_string()))?;
    let mut text = String::new();
    for (index, page) in pages.iter().enumerate() {
        if index > 0 {
            text.push_str("\n\n");
        }
        text.push_str(&format!("--- page {} ---\n\n", index + 1));
        text.push_str(page.trim());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(pdf_to_text(b"%PDF-1.4 this is not really a pdf").is_err());
        assert!(pdf_to_text(b"").is_err());
    }
}
