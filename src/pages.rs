//! Reading stored pages: the most recent page of a URL (whatever options produced it), by
//! line range, so an agent can page through a text longer than a result's `max_chars`.
//!
//! Not here: fetching (a missing page is reported, never fetched).

use serde::Serialize;
use trawl_workers::web::normalize::normalize_url;

use crate::store::{self, Store};

/// Lines of a stored page.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LineRange {
    /// The page's requested URL.
    pub url: String,
    /// The page id.
    pub page_id: String,
    /// When it was fetched.
    pub fetched_at: String,
    /// First line returned (from 1).
    pub from: u64,
    /// Last line returned (inclusive; `from - 1` when the range is past the end).
    pub to: u64,
    /// Lines in the whole text.
    pub total_lines: u64,
    /// The lines.
    pub lines: Vec<String>,
}

/// Returns lines `from..=to` (1-based; `to` defaults to the last) of the newest page of
/// `url`, or `None` when no page of that URL is stored. A range past the end is empty.
pub async fn read(
    store: &Store,
    url: &str,
    from: u64,
    to: Option<u64>,
) -> Result<Option<LineRange>, store::Error> {
    let key = url::Url::parse(url.trim())
        .map(|parsed| normalize_url(&parsed).to_string())
        .unwrap_or_else(|_| url.trim().to_owned());
    let Some(page) = store.latest_page(&key).await? else {
        return Ok(None);
    };
    let text = store.page_text(&page).await?;
    let total_lines = text.lines().count() as u64;
    let from = from.max(1);
    let to = to.unwrap_or(total_lines).min(total_lines);
    let lines: Vec<String> = if from > to {
        Vec::new()
    } else {
        text.lines()
            .skip((from - 1) as usize)
            .take((to - from + 1) as usize)
            .map(str::to_owned)
            .collect()
    };
    Ok(Some(LineRange {
        url: page.info.url.clone(),
        page_id: page.id.clone(),
        fetched_at: page.info.fetched_at.clone(),
        from,
        to: if lines.is_empty() { from - 1 } else { to },
        total_lines,
        lines,
    }))
}
