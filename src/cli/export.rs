//! `trawl export --warc FILE`: the stored responses of a selection as one WARC file
//! (request, response and metadata records; a revisit for an unchanged re-fetch of a URL
//! already in the file), readable by warcio and replay tools.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use trawl_workers::archive::warc::RecordWriter;

use crate::archive::{software, write_warc};
use crate::config::Config;

/// Arguments of `trawl export`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The WARC file to write (gzip members, conventionally NAME.warc.gz); replaced if it
    /// exists. When no stored page matches, nothing is written and the exit status is 1.
    #[arg(long, value_name = "FILE")]
    pub warc: PathBuf,
    /// Only pages whose URL (requested or final) starts with this.
    #[arg(long, value_name = "PREFIX")]
    pub url_prefix: Option<String>,
    /// Only pages fetched by the jobs of this batch (a `trawl run` or an API batch).
    #[arg(long, value_name = "ID")]
    pub batch: Option<String>,
    /// Only pages of this crawl.
    #[arg(long, value_name = "ID")]
    pub crawl: Option<String>,
}

pub(super) async fn run(config: Config, args: &Args) -> anyhow::Result<ExitCode> {
    let store = crate::app::open_store(&config).await?;
    let client = trawl_workers::web::Client::new(config.http.clone(), config.ssrf.clone())?;
    let request_headers = client.request_headers();
    // Written next to the target and renamed at the end: a failed export leaves no half file.
    let partial = args.warc.with_extension("partial");
    let file = std::fs::File::create(&partial)
        .with_context(|| format!("creating {}", partial.display()))?;
    let name = args
        .warc
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| "export.warc.gz".to_owned());
    let mut writer = RecordWriter::new(std::io::BufWriter::new(file), &software(), &name)?;
    let mut seen: HashMap<(String, String), (String, i64)> = HashMap::new();
    let (mut responses, mut revisits, mut cursor) = (0_u64, 0_u64, 0_i64);
    loop {
        let pages = store
            .export_pages(
                args.url_prefix.as_deref(),
                args.batch.as_deref(),
                args.crawl.as_deref(),
                cursor,
                200,
            )
            .await?;
        let Some((_, last)) = pages.last() else {
            break;
        };
        cursor = *last;
        for (page, _) in pages {
            let raw = store.blob(&page.raw_hash).await?.unwrap_or_default();
            let key = (page.url.clone(), page.raw_hash.clone());
            let written = write_warc(&mut writer, &page, &raw, seen.get(&key), &request_headers)
                .with_context(|| format!("writing {}", partial.display()))?;
            if written.revisit {
                revisits += 1;
            } else {
                responses += 1;
                seen.insert(key, (written.response_record_id, page.fetched_at_ms));
            }
        }
    }
    if responses + revisits == 0 {
        // Nothing matched: no file at all (an existing one stays as it was), not a WARC
        // holding only its warcinfo record.
        drop(writer);
        std::fs::remove_file(&partial)
            .with_context(|| format!("removing {}", partial.display()))?;
        store.close().await;
        eprintln!(
            "trawl: no stored page matched; {} not written",
            args.warc.display()
        );
        return Ok(ExitCode::from(1));
    }
    let mut sink = writer.finish()?;
    std::io::Write::flush(&mut sink)?;
    sink.get_ref().sync_all()?;
    drop(sink);
    std::fs::rename(&partial, &args.warc)
        .with_context(|| format!("renaming {} to {}", partial.display(), args.warc.display()))?;
    outln!(
        "wrote {}: {responses} responses, {revisits} revisits",
        args.warc.display()
    )?;
    store.close().await;
    Ok(ExitCode::SUCCESS)
}
