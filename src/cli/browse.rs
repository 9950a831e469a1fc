//! `trawl browse URL --actions FILE` and `trawl screenshot URL`: a browser script or a
//! screenshot run at once in this process's browser (Chromium starts, runs, and closes; no
//! queue, no store). The script's steps print as JSON; screenshots are written as PNG files.
//!
//! Not here: queued browse jobs (`trawl enqueue`, `POST /v1/jobs` with `kind: "browse"`).

use std::io::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use trawl_workers::browse::{self, Action, Profile};
use trawl_workers::job::BrowseJob;

use crate::config::Config;

/// Arguments of `trawl browse`.
#[derive(Debug, clap::Args)]
pub struct BrowseArgs {
    /// The page to open first (http or https).
    #[arg(value_name = "URL")]
    pub url: String,
    /// A JSON file with the actions: a list like `[{"action": "snapshot"}, {"action":
    /// "click", "index": 3}]`, or `-` for standard input. Without it the page is opened and
    /// snapshotted.
    #[arg(long, value_name = "FILE|-")]
    pub actions: Option<String>,
    /// The device: desktop (1280×800) or mobile (iPad 820×1180, touch).
    #[arg(long, value_enum, default_value = "desktop")]
    pub profile: ProfileArg,
    /// Write the images of screenshot and highlight steps as PNG files into this directory
    /// (step-N.png), and leave them out of the printed JSON.
    #[arg(long, value_name = "DIR")]
    pub images: Option<PathBuf>,
    /// Allow private, loopback and link-local destinations (cloud metadata stays blocked)
    /// [config: ssrf.allow_private_network].
    #[arg(long)]
    pub allow_private_network: bool,
    /// Trust this internal host (repeatable): an exact host name or IP literal that may be
    /// or resolve to a private address; every other private destination stays blocked,
    /// redirects from it to other private hosts too, and cloud metadata always. (Unlike
    /// --allow-host, which restricts fetching to the hosts it names.)
    /// [config: ssrf.trusted_hosts]
    #[arg(long, value_name = "HOST")]
    pub trust_host: Vec<String>,
}

/// Arguments of `trawl screenshot`.
#[derive(Debug, clap::Args)]
pub struct ScreenshotArgs {
    /// The page (http or https).
    #[arg(value_name = "URL")]
    pub url: String,
    /// Where the PNG goes.
    #[arg(
        long,
        short = 'o',
        value_name = "FILE",
        default_value = "screenshot.png"
    )]
    pub output: PathBuf,
    /// Draw a 100 px coordinate grid over the page.
    #[arg(long)]
    pub grid: bool,
    /// The whole page, not just the viewport.
    #[arg(long)]
    pub full_page: bool,
    /// The device: desktop (1280×800) or mobile (iPad 820×1180, touch).
    #[arg(long, value_enum, default_value = "desktop")]
    pub profile: ProfileArg,
    /// Allow private, loopback and link-local destinations (cloud metadata stays blocked)
    /// [config: ssrf.allow_private_network].
    #[arg(long)]
    pub allow_private_network: bool,
    /// Trust this internal host (repeatable): an exact host name or IP literal that may be
    /// or resolve to a private address; every other private destination stays blocked,
    /// redirects from it to other private hosts too, and cloud metadata always. (Unlike
    /// --allow-host, which restricts fetching to the hosts it names.)
    /// [config: ssrf.trusted_hosts]
    #[arg(long, value_name = "HOST")]
    pub trust_host: Vec<String>,
}

/// `--render`: when pages are rendered in headless Chromium.
#[derive(Debug, Clone, Copy, Default, clap::ValueEnum)]
pub enum RenderArg {
    /// Plain HTTP only.
    #[default]
    Never,
    /// Every page in the browser.
    Always,
    /// Plain HTTP first; in the browser when a page looks built by JavaScript.
    Auto,
}

impl From<RenderArg> for trawl_workers::job::Render {
    fn from(render: RenderArg) -> Self {
        use trawl_workers::job::{Render, RenderMode};
        match render {
            RenderArg::Never => Render::Flag(false),
            RenderArg::Always => Render::Flag(true),
            RenderArg::Auto => Render::Mode(RenderMode::Auto),
        }
    }
}

/// The profiles, for clap.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum ProfileArg {
    /// 1280×800, Chrome user agent.
    Desktop,
    /// iPad 820×1180, touch, Safari user agent.
    Mobile,
}

impl From<ProfileArg> for Profile {
    fn from(profile: ProfileArg) -> Profile {
        match profile {
            ProfileArg::Desktop => Profile::Desktop,
            ProfileArg::Mobile => Profile::Mobile,
        }
    }
}

pub(super) async fn browse(mut config: Config, args: &BrowseArgs) -> anyhow::Result<ExitCode> {
    if args.allow_private_network {
        config.ssrf.allow_private_network = true;
    }
    config
        .ssrf
        .trusted_hosts
        .extend(args.trust_host.iter().cloned());
    config.validate()?;
    let actions: Vec<Action> = match &args.actions {
        None => vec![Action::Snapshot],
        Some(path) => {
            let text = if path == "-" {
                std::io::read_to_string(std::io::stdin()).context("reading actions from stdin")?
            } else {
                std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?
            };
            serde_json::from_str(&text).with_context(|| {
                format!("{path}: not a JSON list of actions (e.g. [{{\"action\": \"snapshot\"}}])")
            })?
        }
    };
    let job = BrowseJob {
        url: args.url.clone(),
        actions,
        profile: args.profile.into(),
        credentials: Default::default(),
        store: false,
        archive: false,
    };
    job.validate().map_err(anyhow::Error::msg)?;
    if job
        .actions
        .iter()
        .any(|action| matches!(action, Action::Archive))
    {
        anyhow::bail!(
            "trawl browse runs the browser alone, without the store: the archive action needs \
             a queued browse job (trawl serve, POST /v1/jobs with \"kind\": \"browse\") or a \
             session"
        );
    }
    let pool = pool(&config).await?;
    let outcome = browse::script::run_script(&pool, &job).await;
    pool.shutdown().await;
    let mut result = match outcome {
        Ok(result) => result,
        Err(error) => {
            eprintln!("trawl browse: {}: {}", error.code, error.message);
            return Ok(ExitCode::from(1));
        }
    };
    if let Some(dir) = &args.images {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (number, step) in result.steps.iter_mut().enumerate() {
            if let Some(image) = step.image.take() {
                let path = dir.join(format!("step-{}.png", number + 1));
                let bytes = image.bytes().map_err(anyhow::Error::msg)?;
                std::fs::write(&path, bytes)
                    .with_context(|| format!("writing {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    let mut stdout = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut stdout, &result)?;
    writeln!(stdout)?;
    Ok(if result.completed {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub(super) async fn screenshot(
    mut config: Config,
    args: &ScreenshotArgs,
) -> anyhow::Result<ExitCode> {
    if args.allow_private_network {
        config.ssrf.allow_private_network = true;
    }
    config
        .ssrf
        .trusted_hosts
        .extend(args.trust_host.iter().cloned());
    config.validate()?;
    let job = BrowseJob {
        url: args.url.clone(),
        actions: vec![Action::Screenshot {
            grid: args.grid,
            grid_step: None,
            full_page: args.full_page,
        }],
        profile: args.profile.into(),
        credentials: Default::default(),
        store: false,
        archive: false,
    };
    let pool = pool(&config).await?;
    let outcome = browse::script::run_script(&pool, &job).await;
    pool.shutdown().await;
    let result = match outcome {
        Ok(result) => result,
        Err(error) => {
            eprintln!("trawl screenshot: {}: {}", error.code, error.message);
            return Ok(ExitCode::from(1));
        }
    };
    let step = result
        .steps
        .first()
        .context("the browser returned no step")?;
    let Some(image) = &step.image else {
        let message = step
            .error
            .as_ref()
            .map(|error| format!("{}: {}", error.code, error.message))
            .unwrap_or_else(|| "no image".to_owned());
        eprintln!("trawl screenshot: {message}");
        return Ok(ExitCode::from(1));
    };
    let bytes = image.bytes().map_err(anyhow::Error::msg)?;
    std::fs::write(&args.output, &bytes)
        .with_context(|| format!("writing {}", args.output.display()))?;
    outln!(
        "{} ({} bytes) from {}",
        args.output.display(),
        bytes.len(),
        result.final_url
    )?;
    Ok(ExitCode::SUCCESS)
}

async fn pool(config: &Config) -> anyhow::Result<browse::Pool> {
    let client = trawl_workers::web::Client::new(config.http.clone(), config.ssrf.clone())?;
    browse::Pool::new(
        config.browse.clone(),
        client.policy_arc(),
        client.dns().clone(),
    )
    .await
    .map_err(anyhow::Error::from)
}
