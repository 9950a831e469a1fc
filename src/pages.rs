//! Reading stored pages: the most recent page of a URL (whatever options produced it), by
//! line range within a character cap, so an agent can page through a text longer than a
//! result's `max_chars`; grep over its lines.
//!
//! Not here: fetching (a missing page is reported, never fetched).

use serde::Serialize;
use trawl_workers::web::normalize::normalize_url;
use utoipa::ToSchema;

use crate::store::{self, Store};
use crate::tenant::Scope;

/// The key pages are stored under for a URL a user typed: its normalised form when it parses.
pub fn lookup_key(url: &str) -> String {
    url::Url::parse(url.trim())
        .map(|parsed| normalize_url(&parsed).to_string())
        .unwrap_or_else(|_| url.trim().to_owned())
}

/// Lines of a stored page.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
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
    /// True when the answer stopped before the line asked for (or cut its one line) to stay
    /// within the character cap.
    pub truncated: bool,
    /// The first line of the next range, when the page goes on after `to`; `None` at its end.
    pub next_from: Option<u64>,
    /// The lines.
    pub lines: Vec<String>,
}

/// Returns lines `from..=to` (1-based; `to` defaults to the last) of the newest page of
/// `url` visible in `scope`, or `None` when no such page is stored. A range past the end is
/// empty.
///
/// At most `max_chars` characters of lines (newlines counted; 0: no cap) are returned: the
/// range stops before the line that would go over (`truncated`), and a first line longer than
/// the cap is cut to it. `next_from` names where the next range starts.
pub async fn read(
    store: &Store,
    scope: &Scope,
    url: &str,
    from: u64,
    to: Option<u64>,
    max_chars: usize,
) -> Result<Option<LineRange>, store::Error> {
    let Some(page) = store.latest_page(scope, &lookup_key(url)).await? else {
        return Ok(None);
    };
    let text = store.page_text(&page).await?;
    let total_lines = text.lines().count() as u64;
    let from = from.max(1);
    let to = to.unwrap_or(total_lines).min(total_lines);
    let budget = if max_chars == 0 {
        usize::MAX
    } else {
        max_chars
    };
    let mut lines: Vec<String> = Vec::new();
    let mut truncated = false;
    if from <= to {
        let mut used = 0_usize;
        for line in text
            .lines()
            .skip((from - 1) as usize)
            .take((to - from + 1) as usize)
        {
            let cost = line.chars().count() + 1;
            if used.saturating_add(cost) > budget {
                truncated = true;
                if lines.is_empty() {
                    lines.push(line.chars().take(budget).collect());
                }
                break;
            }
            used += cost;
            lines.push(line.to_owned());
        }
    }
    let last = if lines.is_empty() {
        from - 1
    } else {
        from + lines.len() as u64 - 1
    };
    Ok(Some(LineRange {
        url: page.info.url.clone(),
        page_id: page.id.clone(),
        fetched_at: page.info.fetched_at.clone(),
        from,
        to: last,
        total_lines,
        truncated,
        next_from: (!lines.is_empty() && last < total_lines).then_some(last + 1),
        lines,
    }))
}

/// Why a grep of a stored page gave no result.
#[derive(Debug, thiserror::Error)]
pub enum GrepError {
    /// The pattern cannot be used.
    #[error(transparent)]
    Pattern(#[from] PatternError),
    /// No page of the URL is stored.
    #[error("no stored page for {0}")]
    NoPage(String),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] store::Error),
    /// The grep's task failed.
    #[error("grep failed: {0}")]
    Internal(String),
}

/// A grep of the newest stored page of a URL (`POST /v1/pages/grep`, `trawl grep`).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct PageGrep {
    /// The page's URL.
    pub url: String,
    /// The page id.
    pub page_id: String,
    /// What matched.
    #[serde(flatten)]
    pub result: GrepResult,
}

/// Greps the newest stored page of `url` visible in `scope` for `pattern` (compiled safely, see
/// [`compile_pattern`]), off the async threads.
pub async fn grep_page(
    store: &Store,
    scope: &Scope,
    url: &str,
    pattern: &str,
    ignore_case: bool,
    query: GrepQuery,
    limits: GrepLimits,
) -> Result<PageGrep, GrepError> {
    let regex = compile_pattern(pattern, ignore_case, &limits)?;
    let page = store
        .latest_page(scope, &lookup_key(url))
        .await?
        .ok_or_else(|| GrepError::NoPage(url.to_owned()))?;
    let text = store.page_text(&page).await?;
    let result = tokio::task::spawn_blocking(move || grep(&text, &regex, &query, &limits))
        .await
        .map_err(|error| GrepError::Internal(error.to_string()))?;
    Ok(PageGrep {
        url: page.info.url,
        page_id: page.id,
        result,
    })
}

/// Limits of a grep over a page.
#[derive(Debug, Clone, Copy)]
pub struct GrepLimits {
    /// Longest pattern accepted, in bytes.
    pub max_pattern_len: usize,
    /// Most context lines on each side of a match.
    pub max_context: usize,
    /// Most matches reported.
    pub max_matches: usize,
    /// Most characters of output (lines of all blocks together).
    pub max_output_chars: usize,
}

impl Default for GrepLimits {
    fn default() -> Self {
        GrepLimits {
            max_pattern_len: 1_000,
            max_context: 20,
            max_matches: 200,
            max_output_chars: 8_000,
        }
    }
}

/// How much a grep reports, as asked (bounded by [`GrepLimits`]).
#[derive(Debug, Clone, Copy)]
pub struct GrepQuery {
    /// Lines of context before and after each match.
    pub context: usize,
    /// Most matches to report.
    pub max_matches: usize,
}

/// A pattern that cannot be used, with the fault named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    /// Longer than allowed.
    #[error("pattern is {len} bytes, the limit is {limit}")]
    TooLong {
        /// The pattern's length.
        len: usize,
        /// The limit.
        limit: usize,
    },
    /// A repetition inside a repetition, such as `(a+)+`.
    #[error("nested repetition is not allowed: {0}")]
    NestedRepetition(String),
    /// A repetition count that makes the compiled pattern too large, such as `a{100000}`.
    #[error("pattern too large once compiled (a repetition count is too high)")]
    TooLarge,
    /// Not a valid regular expression.
    #[error("invalid pattern: {0}")]
    Invalid(String),
}

/// One merged block of context around one or more matches.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct GrepBlock {
    /// First line of the block (from 1).
    pub from: u64,
    /// Last line of the block (inclusive).
    pub to: u64,
    /// The lines, each with its number and whether it matched.
    pub lines: Vec<GrepLine>,
}

/// A line of a grep block.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct GrepLine {
    /// Its number, from 1.
    pub number: u64,
    /// Its text.
    pub text: String,
    /// True when the pattern matched it.
    pub matched: bool,
}

/// What a grep found.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct GrepResult {
    /// Lines that matched (at most `max_matches`).
    pub matches: u64,
    /// Context blocks, overlapping ones merged, in order.
    pub blocks: Vec<GrepBlock>,
    /// True when matches or output were cut at a limit.
    pub truncated: bool,
    /// Lines in the page.
    pub total_lines: u64,
}

/// Compiles a user's pattern safely: length cap, no nested repetition, compiled-size cap.
/// The regex crate runs in linear time, so no pattern can run away on a page.
pub fn compile_pattern(
    pattern: &str,
    ignore_case: bool,
    limits: &GrepLimits,
) -> Result<regex::Regex, PatternError> {
    if pattern.len() > limits.max_pattern_len {
        return Err(PatternError::TooLong {
            len: pattern.len(),
            limit: limits.max_pattern_len,
        });
    }
    let ast = regex_syntax::ast::parse::Parser::new()
        .parse(pattern)
        .map_err(|error| PatternError::Invalid(error.kind().to_string()))?;
    if let Some(nested) = find_nested_repetition(&ast, false) {
        return Err(PatternError::NestedRepetition(nested));
    }
    regex::RegexBuilder::new(pattern)
        .case_insensitive(ignore_case)
        .size_limit(1 << 20)
        .dfa_size_limit(2 << 20)
        .build()
        .map_err(|error| match error {
            regex::Error::CompiledTooBig(_) => PatternError::TooLarge,
            other => PatternError::Invalid(other.to_string()),
        })
}

/// Returns the first repetition found inside another repetition, as written.
fn find_nested_repetition(ast: &regex_syntax::ast::Ast, inside_repetition: bool) -> Option<String> {
    use regex_syntax::ast::Ast;
    match ast {
        Ast::Repetition(repetition) => {
            if inside_repetition {
                return Some(format!("{ast}"));
            }
            find_nested_repetition(&repetition.ast, true)
        }
        Ast::Group(group) => find_nested_repetition(&group.ast, inside_repetition),
        Ast::Alternation(alternation) => alternation
            .asts
            .iter()
            .find_map(|ast| find_nested_repetition(ast, inside_repetition)),
        Ast::Concat(concat) => concat
            .asts
            .iter()
            .find_map(|ast| find_nested_repetition(ast, inside_repetition)),
        _ => None,
    }
}

/// Greps `text` line by line: matching lines with `context` lines around them, overlapping
/// or touching blocks merged, output capped by `limits`.
pub fn grep(
    text: &str,
    regex: &regex::Regex,
    query: &GrepQuery,
    limits: &GrepLimits,
) -> GrepResult {
    let lines: Vec<&str> = text.lines().collect();
    let context = query.context.min(limits.max_context);
    let max_matches = query.max_matches.clamp(1, limits.max_matches);
    let mut matched: Vec<usize> = Vec::new();
    let mut truncated = false;
    for (index, line) in lines.iter().enumerate() {
        if regex.is_match(line) {
            if matched.len() == max_matches {
                truncated = true;
                break;
            }
            matched.push(index);
        }
    }
    // Merge [match - context, match + context] ranges that overlap or touch.
    let mut ranges: Vec<(usize, usize)> = Vec::new();
    for &index in &matched {
        let start = index.saturating_sub(context);
        let end = (index + context).min(lines.len().saturating_sub(1));
        match ranges.last_mut() {
            Some(last) if start <= last.1 + 1 => last.1 = last.1.max(end),
            _ => ranges.push((start, end)),
        }
    }
    let mut budget = limits.max_output_chars;
    let mut blocks = Vec::new();
    'blocks: for (start, end) in ranges {
        let mut block = GrepBlock {
            from: start as u64 + 1,
            to: start as u64,
            lines: Vec::new(),
        };
        for (index, line) in lines.iter().enumerate().take(end + 1).skip(start) {
            let cost = line.chars().count() + 1;
            if cost > budget {
                truncated = true;
                if !block.lines.is_empty() {
                    blocks.push(block);
                }
                break 'blocks;
            }
            budget -= cost;
            block.to = index as u64 + 1;
            block.lines.push(GrepLine {
                number: index as u64 + 1,
                text: (*line).to_owned(),
                matched: matched.binary_search(&index).is_ok(),
            });
        }
        blocks.push(block);
    }
    GrepResult {
        matches: matched.len() as u64,
        blocks,
        truncated,
        total_lines: lines.len() as u64,
    }
}
