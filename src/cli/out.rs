//! The `--out DIR` of `trawl run` and `trawl crawl`: `DIR/pages.jsonl`, one line per ended
//! job (its result, or `{"url", "job_id", "error"}`), each result line led by the job's id and
//! its page file's name; and one file per page under `DIR/pages/`, a markdown or text file
//! starting with a front matter block (title, URLs, fetch time, ids).
//!
//! Not here: following the jobs (each command pages through its batch's or crawl's ends).

use std::borrow::Cow;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use trawl_workers::job::Format;

use crate::store::{EndedJob, Status, Store};

/// The parts of a stored fetch result that name and head a page file (borrowed where the
/// JSON allows; the rest, the text included, is skipped without being copied).
#[derive(serde::Deserialize)]
struct PageFile<'a> {
    #[serde(borrow)]
    url: Cow<'a, str>,
    #[serde(borrow)]
    final_url: Cow<'a, str>,
    #[serde(borrow)]
    content_type: Cow<'a, str>,
    #[serde(borrow)]
    content_hash: Cow<'a, str>,
    #[serde(borrow, default)]
    title: Option<Cow<'a, str>>,
    #[serde(borrow)]
    page_id: Cow<'a, str>,
    #[serde(borrow)]
    content: PageContent<'a>,
}

#[derive(serde::Deserialize)]
struct PageContent<'a> {
    #[serde(borrow)]
    fetched_at: Cow<'a, str>,
}

/// The `--out` directory: pages.jsonl and one file per page.
pub(super) struct Output {
    dir: PathBuf,
    format: Format,
    jsonl: std::io::BufWriter<std::fs::File>,
    files: u64,
}

impl Output {
    /// Creates `dir`, `dir/pages/` and `dir/pages.jsonl` (replaced if it exists).
    pub(super) fn create(dir: &Path, format: Format) -> anyhow::Result<Output> {
        let pages = dir.join("pages");
        // pages.jsonl is replaced; page files of an earlier run are not deleted (they may be
        // someone's), so say they are there.
        let earlier = std::fs::read_dir(&pages)
            .map(|entries| entries.filter_map(Result::ok).count())
            .unwrap_or(0);
        if earlier > 0 {
            eprintln!(
                "trawl: {} already holds {earlier} file(s) from an earlier run; they are kept, \
                 and pages.jsonl lists this run's pages only",
                pages.display()
            );
        }
        std::fs::create_dir_all(&pages).with_context(|| format!("creating {}", dir.display()))?;
        let path = dir.join("pages.jsonl");
        let file =
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Output {
            dir: dir.to_owned(),
            format,
            jsonl: std::io::BufWriter::new(file),
            files: 0,
        })
    }

    /// Writes the lines (and page files) of the crawl's jobs that ended after `after_seq`, in
    /// the order they ended; returns the last `done_seq` written (`after_seq` when none).
    pub(super) async fn write_crawl_ended(
        &mut self,
        store: &Store,
        crawl_id: &str,
        mut after_seq: i64,
    ) -> anyhow::Result<i64> {
        const PART: u32 = 1_000;
        loop {
            let ended = store.crawl_ended_since(crawl_id, after_seq, PART).await?;
            for job in &ended {
                after_seq = job.done_seq;
                self.write(store, job).await?;
            }
            if ended.len() < PART as usize {
                return Ok(after_seq);
            }
        }
    }

    /// Writes an ended job's line, and its page file when it succeeded.
    pub(super) async fn write(&mut self, store: &Store, job: &EndedJob) -> anyhow::Result<()> {
        match (&job.result, &job.error) {
            (Some(result), _) if job.status == Status::Succeeded => {
                let file = self.write_page_file(store, &job.id, result).await?;
                // The stored result is compact JSON on one line: written as it is, after the
                // job id and the file name.
                let rest = result.trim_start().strip_prefix('{').unwrap_or(result);
                let head = serde_json::json!({ "job_id": job.id, "file": file }).to_string();
                let head = head.strip_suffix('}').unwrap_or(&head);
                if rest.trim_start().starts_with('}') {
                    writeln!(self.jsonl, "{head}}}")?;
                } else {
                    writeln!(self.jsonl, "{head},{rest}")?;
                }
            }
            (_, error) => {
                let error = error.clone().unwrap_or_else(|| {
                    trawl_workers::job::JobError::new(
                        trawl_workers::job::ErrorCode::Cancelled,
                        "the job was cancelled",
                    )
                });
                let line = serde_json::json!({ "url": job.url, "job_id": job.id, "error": error });
                writeln!(self.jsonl, "{line}")?;
            }
        }
        Ok(())
    }

    /// Writes a page's file and returns its path relative to the directory (`pages/NAME`).
    async fn write_page_file(
        &mut self,
        store: &Store,
        job_id: &str,
        result: &str,
    ) -> anyhow::Result<String> {
        let page: PageFile<'_> =
            serde_json::from_str(result).context("reading a stored job result")?;
        // The whole text, from the store (in memory: it was just written, and the store keeps
        // written texts for `--out`), rather than from the result, where it may be truncated
        // and would have to be unescaped.
        let text = store.shared_text(&page.content_hash).await?;
        let extension = match (self.format, page.content_type.as_ref()) {
            (_, "application/json") => "json",
            (_, "text/plain") => "txt",
            (Format::Markdown, _) => "md",
            (Format::Text, _) => "txt",
            (Format::Html, _) => "html",
        };
        let content_hash = &page.content_hash;
        let name = format!(
            "pages/{}-{}.{extension}",
            slug(&page.final_url),
            &content_hash[..10.min(content_hash.len())]
        );
        let path = self.dir.join(&name);
        let mut file = std::io::BufWriter::new(
            std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?,
        );
        // JSON and HTML files stay what they are; markdown and text get a front matter.
        if matches!(extension, "md" | "txt") {
            file.write_all(front_matter(&page, job_id).as_bytes())?;
        }
        file.write_all(text.as_bytes())?;
        file.flush()
            .with_context(|| format!("writing {}", path.display()))?;
        self.files += 1;
        Ok(name)
    }

    /// Flushes pages.jsonl.
    pub(super) fn flush(&mut self) -> anyhow::Result<()> {
        self.jsonl.flush()?;
        Ok(())
    }

    /// Prints where the files went.
    pub(super) fn print_summary(&self) -> anyhow::Result<()> {
        outln!(
            "wrote {} and {} page files in {}",
            self.dir.join("pages.jsonl").display(),
            self.files,
            self.dir.join("pages").display()
        )?;
        Ok(())
    }

    /// The directory written to.
    pub(super) fn dir(&self) -> &Path {
        &self.dir
    }

    /// Page files written so far.
    pub(super) fn files(&self) -> u64 {
        self.files
    }
}

/// The block at the top of a markdown or text page file: YAML front matter, each value a
/// double-quoted string (JSON's string syntax, which YAML reads the same).
fn front_matter(page: &PageFile<'_>, job_id: &str) -> String {
    let quoted = |value: &str| serde_json::Value::from(value).to_string();
    let mut block = String::from("---\n");
    if let Some(title) = &page.title {
        block.push_str(&format!("title: {}\n", quoted(title)));
    }
    for (key, value) in [
        ("url", page.url.as_ref()),
        ("final_url", page.final_url.as_ref()),
        ("fetched_at", page.content.fetched_at.as_ref()),
        ("job_id", job_id),
        ("page_id", page.page_id.as_ref()),
    ] {
        block.push_str(&format!("{key}: {}\n", quoted(value)));
    }
    block.push_str("---\n\n");
    block
}

/// A file-name-safe, readable form of a URL: host and path, at most 80 characters.
fn slug(url: &str) -> String {
    let without_scheme = url.split_once("://").map_or(url, |(_, rest)| rest);
    let mut slug = String::with_capacity(80);
    let mut dash = false;
    for c in without_scheme.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            slug.push(c.to_ascii_lowercase());
            dash = false;
        } else if !dash && !slug.is_empty() {
            slug.push('-');
            dash = true;
        }
        if slug.len() >= 80 {
            break;
        }
    }
    let slug = slug.trim_matches(['-', '.']).to_owned();
    if slug.is_empty() {
        "page".to_owned()
    } else {
        slug
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_are_safe_and_short() {
        assert_eq!(
            slug("https://Example.com/a/b?c=d#e"),
            "example.com-a-b-c-d-e"
        );
        assert_eq!(slug("https://x.test/"), "x.test");
        assert!(slug(&format!("https://x.test/{}", "a".repeat(500))).len() <= 80);
        assert_eq!(slug("https:///"), "page");
    }

    #[test]
    fn the_front_matter_quotes_every_value() {
        let result = r#"{"url":"http://a.test/x","final_url":"http://a.test/y","content_type":"text/html","content_hash":"abc","title":"A \"quoted\"\ntitle","page_id":"P1","content":{"fetched_at":"2026-01-01T00:00:00Z","text":"t"}}"#;
        let page: PageFile<'_> = serde_json::from_str(result).expect("parses");
        assert_eq!(
            front_matter(&page, "J1"),
            "---\ntitle: \"A \\\"quoted\\\"\\ntitle\"\nurl: \"http://a.test/x\"\nfinal_url: \"http://a.test/y\"\nfetched_at: \"2026-01-01T00:00:00Z\"\njob_id: \"J1\"\npage_id: \"P1\"\n---\n\n"
        );
    }
}
