//! `trawl pages`: the stored pages (each fetch of a URL is one), by host or crawl, oldest
//! first: page id, title and URL, or one JSON object a line with `--json`.

use std::process::ExitCode;

use crate::config::Config;
use crate::store::PageFilter;

/// Pages read from the store per query.
const PAGE: u32 = 500;

/// Arguments of `trawl pages`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Only pages whose URL is on this host (`example.com`, or `127.0.0.1:8080` with a port).
    #[arg(long, value_name = "HOST")]
    pub host: Option<String>,
    /// Only pages of this crawl (fetched by its jobs or served to them from the cache).
    #[arg(long, value_name = "ID")]
    pub crawl: Option<String>,
    /// One JSON object a line: page_id, url, final_url, title, status, content_type,
    /// fetched_at, lines.
    #[arg(long)]
    pub json: bool,
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    use std::io::Write as _;
    let store = crate::app::open_store(&config).await?;
    let filter = PageFilter {
        host: args.host.clone(),
        crawl_id: args.crawl.clone(),
        // The command line reads the store directly: every tenant's pages.
        tenant: None,
    };
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut cursor: Option<String> = None;
    let mut listed = 0_u64;
    loop {
        let pages = store.list_pages(&filter, cursor.as_deref(), PAGE).await?;
        let Some(last) = pages.last() else { break };
        cursor = Some(last.page_id.clone());
        for page in &pages {
            if args.json {
                writeln!(out, "{}", serde_json::to_string(page)?)?;
            } else {
                writeln!(
                    out,
                    "{}\t{}\t{}\t{}",
                    page.page_id,
                    page.fetched_at,
                    page.final_url,
                    page.title.as_deref().unwrap_or("")
                )?;
            }
        }
        listed += pages.len() as u64;
        if pages.len() < PAGE as usize {
            break;
        }
    }
    out.flush()?;
    drop(out);
    store.close().await;
    if listed == 0 {
        eprintln!("trawl: no stored page matched");
        return Ok(ExitCode::from(1));
    }
    Ok(ExitCode::SUCCESS)
}
