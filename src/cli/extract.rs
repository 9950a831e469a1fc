//! `trawl extract`: one local HTML document to stdout, the same extraction `trawl run` uses.

use std::io::Read as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use trawl_workers::job::Format;
use trawl_workers::web::{charset, extract, lang};

/// Arguments of `trawl extract`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The HTML file, or - for standard input.
    #[arg(default_value = "-", value_name = "FILE|-")]
    pub input: String,
    /// The page's URL, to make links absolute [default: http://localhost/].
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: FormatArg,
    /// Print the extraction as JSON (title, metadata, links, outline, text) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// The `--format` values.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum FormatArg {
    /// Markdown.
    Markdown,
    /// Plain text.
    Text,
    /// Cleaned article HTML.
    Html,
}

impl From<FormatArg> for Format {
    fn from(value: FormatArg) -> Self {
        match value {
            FormatArg::Markdown => Format::Markdown,
            FormatArg::Text => Format::Text,
            FormatArg::Html => Format::Html,
        }
    }
}

pub(super) fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let mut bytes = Vec::new();
    if args.input == "-" {
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("reading standard input")?;
    } else {
        let path = PathBuf::from(&args.input);
        let is_url = ["http://", "https://"]
            .iter()
            .any(|scheme| args.input.to_ascii_lowercase().starts_with(scheme));
        if is_url && !path.exists() {
            anyhow::bail!(
                "{} is a URL; extract reads local files: fetch it with `trawl fetch {}`",
                args.input,
                args.input
            );
        }
        bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    }
    let page_url = url::Url::parse(args.url.as_deref().unwrap_or("http://localhost/"))
        .context("--url must be an absolute URL")?;
    let decoded = charset::decode(&bytes, None, true);
    // A document over the parsing budget fails here, before any tree is built, with the code
    // a fetch of it would end with.
    let extracted =
        extract::extract_html(&decoded.text, &page_url, args.format.into()).map_err(|error| {
            match error {
                extract::Error::Limit(exceeded) => anyhow::anyhow!("extraction_limit: {exceeded}"),
                other => anyhow::anyhow!("extraction_failed: {other}"),
            }
        })?;
    if args.json {
        // The language as a fetch reports it: declared by the page, else guessed from the
        // text (HTML output is markup: no guess from tag names).
        let mut meta = extracted.meta;
        if !matches!(args.format, FormatArg::Html) {
            meta.lang = lang::or_detect(meta.lang, &extracted.text);
        }
        let json = serde_json::json!({
            "title": extracted.title,
            "extractor": extracted.extractor,
            "warning": extracted.warning,
            "meta": meta,
            "outline": extracted.outline,
            "links": extracted.links,
            "text": extracted.text,
        });
        outln!("{}", serde_json::to_string_pretty(&json)?)?;
    } else {
        outln!("{}", extracted.text)?;
    }
    Ok(ExitCode::SUCCESS)
}
