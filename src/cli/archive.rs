//! `trawl archive`: archive stored pages (the newest version of each URL given, every page of
//! a crawl with `--crawl`, every stored page with `--all`), then every page still waiting,
//! into the search index and the WARC files.

use std::process::ExitCode;

use anyhow::Context as _;
use trawl_workers::web::normalize::normalize_url;

use crate::archive::{Archiver, Stop};
use crate::config::Config;

/// Arguments of `trawl archive`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// URLs of stored pages (as requested or as finally fetched). With none, the pages
    /// already waiting (fetched with archive: true) are archived.
    #[arg(value_name = "URL")]
    pub urls: Vec<String>,
    /// Also every stored page of this crawl not archived yet (fetched by its jobs or served to
    /// them from the cache).
    #[arg(long, value_name = "ID", conflicts_with = "all")]
    pub crawl: Option<String>,
    /// Also every stored page not archived yet.
    #[arg(long)]
    pub all: bool,
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    let mut urls = Vec::with_capacity(args.urls.len());
    for url in &args.urls {
        let parsed = url::Url::parse(url).with_context(|| format!("{url:?} is not a URL"))?;
        urls.push(normalize_url(&parsed).to_string());
    }
    std::fs::create_dir_all(&config.data_dir)
        .with_context(|| format!("creating {}", config.data_dir.display()))?;
    let store = crate::app::open_store(&config).await?;
    let missing = store.request_archive(&urls).await?;
    if !missing.is_empty() {
        eprintln!(
            "trawl: no stored page for {} (fetch first: trawl run URL); nothing archived",
            missing.join(", ")
        );
        return Ok(ExitCode::from(2));
    }
    if let Some(crawl_id) = &args.crawl
        && store.crawl(crawl_id).await?.is_none()
    {
        eprintln!("trawl: no crawl {crawl_id}; nothing archived");
        return Ok(ExitCode::from(2));
    }
    if args.all || args.crawl.is_some() {
        store.request_archive_all(args.crawl.as_deref()).await?;
    }
    let pending = store.archive_pending().await?;
    let client = trawl_workers::web::Client::new(config.http.clone(), config.ssrf.clone())?;
    let archiver = Archiver::open(
        store.clone(),
        &config.data_dir,
        config.archive.clone(),
        client.request_headers(),
    )
    .context("opening the archive (is another trawl archiving into this data directory?)")?;
    eprintln!("trawl: archiving {pending} pages");
    // Nothing else stores pages here: archive what is pending and stop.
    let now = crate::shutdown::Shutdown::new();
    now.trigger();
    let stats = archiver.run(Stop::Drain, now).await?;
    outln!("archived: {stats}")?;
    store.close().await;
    Ok(if stats.failed > 0 {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
