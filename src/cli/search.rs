//! `trawl search`: BM25 over the archive's chunks, with filters, as text or RAG-ready JSON.

use std::process::ExitCode;

use anyhow::Context as _;
use trawl_workers::archive::index::{ArchiveIndex, SearchQuery};

use crate::config::Config;

/// Arguments of `trawl search`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The query, in tantivy's query language: words (more matches rank higher), "a phrase",
    /// +required, -excluded, title:word.
    pub query: String,
    /// Only pages of this host.
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Only pages fetched at or after this date or instant (2026-01-31 or RFC 3339).
    #[arg(long, value_name = "DATE")]
    pub after: Option<String>,
    /// Only pages fetched before this date or instant.
    #[arg(long, value_name = "DATE")]
    pub before: Option<String>,
    /// Search the archive as it was then (each URL's version of that time) instead of the
    /// latest versions.
    #[arg(long, value_name = "DATE")]
    pub as_of: Option<String>,
    /// Hits to return (at most 100).
    #[arg(short = 'k', long, alias = "k", value_name = "N", default_value_t = 10)]
    pub limit: usize,
    /// Most hits from one page [config: archive.per_page, default: 2; 0: no limit].
    #[arg(long, value_name = "N")]
    pub per_page: Option<usize>,
    /// Print the hits as JSON (url, title, headings, text, snippet, score, fetched_at, ...).
    #[arg(long)]
    pub json: bool,
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    let instant = |value: &Option<String>, flag: &str| -> anyhow::Result<Option<jiff::Timestamp>> {
        value
            .as_deref()
            .map(crate::archive::parse_instant)
            .transpose()
            .map_err(|error| anyhow::anyhow!("--{flag}: {error}"))
    };
    let query = SearchQuery {
        text: args.query.clone(),
        host: args.host.clone(),
        after: instant(&args.after, "after")?,
        before: instant(&args.before, "before")?,
        as_of: instant(&args.as_of, "as-of")?,
        k: args.limit,
        per_page: args.per_page.unwrap_or(config.archive.per_page),
        // The command line acts as the default tenant.
        tenant: crate::tenant::Scope::default().filter().map(str::to_owned),
    };
    let dir = crate::archive::index_dir(&config.data_dir);
    if !dir.join("meta.json").exists() {
        anyhow::bail!(
            "no archive in {} yet: archive pages first (trawl run --archive, trawl archive URL)",
            config.data_dir.display()
        );
    }
    let hits = tokio::task::spawn_blocking(move || {
        let index = ArchiveIndex::open_or_create(&dir)?;
        index.search(&query)
    })
    .await
    .context("the search task failed")??;
    // Like grep: 1 when nothing matched, so scripts can test for hits.
    let found = if hits.is_empty() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    };
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&hits)?)?;
        return Ok(found);
    }
    if hits.is_empty() {
        eprintln!("trawl: no hits");
        return Ok(found);
    }
    for (rank, hit) in hits.iter().enumerate() {
        outln!(
            "{}. {} ({:.2})\n   {}",
            rank + 1,
            hit.title.as_deref().unwrap_or("(untitled)"),
            hit.score,
            hit.url
        )?;
        if !hit.headings.is_empty() {
            outln!("   § {}", hit.headings.join(" > "))?;
        }
        let snippet = hit.snippet.replace("<b>", "**").replace("</b>", "**");
        outln!(
            "   {}\n",
            snippet.split_whitespace().collect::<Vec<_>>().join(" ")
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
