//! A generated static site for crawl tests and benchmarks: articles linked densely enough to
//! be reached from `/p/0` within a few links, tag index pages, canonical duplicates, pages
//! disallowed by robots.txt, redirects, dead links and a sitemap index (one file gzipped).
//!
//! [`CrawlSite::write`] writes the files under a directory for a static server (nginx: serve
//! the directory with `default_type text/html;` and add [`CrawlSite::nginx_locations`] to the
//! `server` block for the redirects); [`CrawlSite::file`] returns one file's bytes without
//! writing anything. [`CrawlSite::expected`] gives the exact numbers a correct crawl from
//! `/p/0` (with its sitemap) arrives at, and [`CrawlSite::unique_paths`] the paths of the
//! documents it should store. Everything is deterministic in the page count and the origin.
//!
//! Layout for `N` pages (the counts in brackets are for `N` = 10,000; the others scale with
//! `N`, rounded, at least 1):
//!
//! - `/p/{i}`, `i < N`: articles (5.5–146 KB, as [`site_page`](crate::site_page)) with about 38 links
//!   each: home, two tags, a `#fragment` of the page itself, children `i*22+1 ..= i*22+22`,
//!   the parent, the neighbours, some special pages (below), and pseudo-random articles.
//!   Hrefs are absolute paths, relative (`../p/7`), absolute URLs, with `#fragments` and
//!   tracking parameters (`utm_*`, `fbclid`), all of which trawl's `crawl_key` merges.
//! - `/tag/{t}` (259): index pages linking to the articles `i ≡ t (mod T)` (at most 60).
//! - `/dup/{d}` (299): the article `/p/{d}` byte for byte, so with its
//!   `<link rel="canonical" href="/p/{d}">` (every article names itself).
//! - `/private/{k}` (200): real files, disallowed by `/robots.txt` (which allows everything
//!   else, names the sitemap, and has no Crawl-delay).
//! - `/old/{r}` (150): `301` to `/p/{r}` (nginx locations, no file).
//! - `/gone/{g}` (100): linked, no file (`404`).
//! - `/sitemap.xml`: a sitemap index naming `/sitemap-1.xml.gz` … (gzipped urlsets of the
//!   articles, at most 50,000 URLs each) and a last plain `/sitemap-{c+1}.xml` with the tags.
//!
//! Every special page is linked from two of the first 507 articles (depth ≤ 2 from `/p/0`),
//! so with 507 < N ≤ 11,638 everything is within 3 links of `/p/0`; [`Expected::max_depth`]
//! is computed by a breadth-first search over the links for any `N`.
//!
//! Not here: serving (no HTTP server), other hosts, `https`, `<meta robots>`, `nofollow`,
//! JavaScript-built pages, or duplicates that only content hashing would reveal. The
//! `/dup/` pages are duplicates only when the crawl already has `/p/{d}` when it reads them,
//! which a crawl started with the sitemap guarantees (it lists every article up front).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::Path;

use trawl_workers::crawl::sitemap::MAX_SITEMAP_ENTRIES;

use crate::prose::{Rng, paragraph, sentence, title};

/// Children per article: `/p/{i}` links `/p/{i*22+1}` … `/p/{i*22+22}`.
pub const FANOUT: u64 = 22;

/// Links (`<a href>`) on an article, when its fixed links leave room for random ones.
pub const LINKS_PER_PAGE: usize = 38;

/// Articles a tag page links at most.
const TAG_LINKS: u64 = 60;

/// Special pages are linked from the articles `0..SPECIAL_HUBS`, which are within 2 links of
/// `/p/0` (1 + 22 + 484 = 507).
const SPECIAL_HUBS: u64 = 1 + FANOUT + FANOUT * FANOUT;

/// A generated crawl site of `pages` articles, its absolute links naming `origin`.
#[derive(Debug, Clone)]
pub struct CrawlSite {
    pages: u64,
    tags: u64,
    dups: u64,
    private: u64,
    redirects: u64,
    gone: u64,
    origin: String,
    /// Special pages linked from each hub article (`< SPECIAL_HUBS`).
    specials: HashMap<u64, Vec<Target>>,
}

/// What a correct crawl from `/p/0` with `--sitemap` and `--max-depth max_depth` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    /// Articles (`/p/`).
    pub pages: u64,
    /// Tag index pages (`/tag/`).
    pub tags: u64,
    /// Distinct documents to store: articles and tag pages.
    pub unique_documents: u64,
    /// `/dup/` pages: fetched, then recognised by their canonical URL and not stored.
    pub duplicate_pages: u64,
    /// HTML pages answering 200 that a crawl fetches: unique documents and duplicates.
    pub fetchable_pages: u64,
    /// `/old/` redirects (each to an article).
    pub redirects: u64,
    /// Pages a crawl ends as duplicates without storing them: the `/dup/` pages and the
    /// redirects, whose targets it already has (the sitemap lists every article).
    pub duplicates: u64,
    /// `/gone/` links (404).
    pub dead_links: u64,
    /// `/private/` pages (disallowed by robots.txt: never requested).
    pub private_pages: u64,
    /// The most links from `/p/0` to any linked page (breadth-first over the generated links).
    pub max_depth: u32,
}

/// What [`CrawlSite::write`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WrittenSite {
    /// Files written.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
}

/// What a link points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Target {
    Page(u64),
    Tag(u64),
    Dup(u64),
    Private(u64),
    Old(u64),
    Gone(u64),
    /// `#main` on the page itself.
    SelfFragment,
}

impl Target {
    fn path(self) -> Option<String> {
        Some(match self {
            Target::Page(i) => format!("/p/{i}"),
            Target::Tag(t) => format!("/tag/{t}"),
            Target::Dup(d) => format!("/dup/{d}"),
            Target::Private(k) => format!("/private/{k}"),
            Target::Old(r) => format!("/old/{r}"),
            Target::Gone(g) => format!("/gone/{g}"),
            Target::SelfFragment => return None,
        })
    }

    fn label(self) -> String {
        match self {
            Target::Page(i) => format!("Article {i}"),
            Target::Tag(t) => format!("Topic {t}"),
            Target::Dup(d) => format!("Print version of article {d}"),
            Target::Private(k) => format!("Members area {k}"),
            Target::Old(r) => format!("Old address of article {r}"),
            Target::Gone(g) => format!("Retired page {g}"),
            Target::SelfFragment => "Skip to content".to_owned(),
        }
    }
}

/// Builds a special page's target from its number.
type MakeTarget = fn(u64) -> Target;

/// `n × per_10k / 10,000`, rounded, at least 1.
fn scaled(n: u64, per_10k: u64) -> u64 {
    ((n * per_10k + 5_000) / 10_000).max(1)
}

impl CrawlSite {
    /// A site of `pages` articles (at least 1) whose absolute links and sitemap entries name
    /// `origin` (scheme and authority, e.g. `http://127.0.0.1:8080`; a trailing `/` is dropped).
    pub fn new(pages: u64, origin: &str) -> CrawlSite {
        let pages = pages.max(1);
        let mut site = CrawlSite {
            pages,
            tags: scaled(pages, 259),
            dups: scaled(pages, 299).min(pages),
            private: scaled(pages, 200),
            redirects: scaled(pages, 150).min(pages),
            gone: scaled(pages, 100),
            origin: origin.trim_end_matches('/').to_owned(),
            specials: HashMap::new(),
        };
        let hubs = pages.min(SPECIAL_HUBS);
        let kinds: [(u64, MakeTarget); 4] = [
            (site.dups, Target::Dup),
            (site.private, Target::Private),
            (site.redirects, Target::Old),
            (site.gone, Target::Gone),
        ];
        for (kind, (count, make)) in kinds.into_iter().enumerate() {
            let kind = kind as u64;
            for s in 0..count {
                let first = (s * 7 + kind * 101) % hubs;
                let second = (s * 13 + kind * 53 + 1) % hubs;
                site.specials.entry(first).or_default().push(make(s));
                if second != first {
                    site.specials.entry(second).or_default().push(make(s));
                }
            }
        }
        site
    }

    /// The origin the absolute links name.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The exact figures a correct crawl arrives at.
    pub fn expected(&self) -> Expected {
        Expected {
            pages: self.pages,
            tags: self.tags,
            unique_documents: self.pages + self.tags,
            duplicate_pages: self.dups,
            fetchable_pages: self.pages + self.tags + self.dups,
            redirects: self.redirects,
            duplicates: self.dups + self.redirects,
            dead_links: self.gone,
            private_pages: self.private,
            max_depth: self.max_depth(),
        }
    }

    /// The paths of the documents a correct crawl stores: `/p/{i}` and `/tag/{t}`.
    pub fn unique_paths(&self) -> BTreeSet<String> {
        (0..self.pages)
            .map(|i| format!("/p/{i}"))
            .chain((0..self.tags).map(|t| format!("/tag/{t}")))
            .collect()
    }

    /// The nginx `location` blocks of the redirects (`/old/{r}` → `301 /p/{r}`), one a line,
    /// for a `server` block.
    pub fn nginx_locations(&self) -> String {
        let mut s = String::with_capacity(self.redirects as usize * 48);
        for r in 0..self.redirects {
            let _ = writeln!(s, "location = /old/{r} {{ return 301 /p/{r}; }}");
        }
        s
    }

    /// The paths of every file of the site, in writing order.
    pub fn file_paths(&self) -> Vec<String> {
        let mut paths = vec!["/robots.txt".to_owned(), "/sitemap.xml".to_owned()];
        paths.extend(self.sitemap_files().into_iter().map(|(path, _)| path));
        paths.extend((0..self.pages).map(|i| format!("/p/{i}")));
        paths.extend((0..self.tags).map(|t| format!("/tag/{t}")));
        paths.extend((0..self.dups).map(|d| format!("/dup/{d}")));
        paths.extend((0..self.private).map(|k| format!("/private/{k}")));
        paths
    }

    /// The bytes a static server serves at `path` (a path without query or fragment), or
    /// `None` when there is no such file (the redirects and dead links have none).
    pub fn file(&self, path: &str) -> Option<Vec<u8>> {
        let number = |prefix: &str, count: u64| -> Option<u64> {
            let rest = path.strip_prefix(prefix)?;
            // Only the canonical spelling of a number names a file.
            let n: u64 = rest.parse().ok()?;
            (n < count && n.to_string() == rest).then_some(n)
        };
        match path {
            "/robots.txt" => return Some(self.robots_txt().into_bytes()),
            "/sitemap.xml" => return Some(self.sitemap_index().into_bytes()),
            _ => {}
        }
        if path.starts_with("/sitemap-") {
            return self
                .sitemap_files()
                .into_iter()
                .find(|(name, _)| name == path)
                .map(|(_, body)| body);
        }
        if let Some(i) = number("/p/", self.pages) {
            return Some(self.article(i).into_bytes());
        }
        if let Some(t) = number("/tag/", self.tags) {
            return Some(self.tag_page(t).into_bytes());
        }
        if let Some(d) = number("/dup/", self.dups) {
            return Some(self.article(d).into_bytes());
        }
        if let Some(k) = number("/private/", self.private) {
            return Some(private_page(k).into_bytes());
        }
        None
    }

    /// Writes every file under `www_root` (`www_root/p/0`, `www_root/robots.txt`, …).
    pub fn write(&self, www_root: &Path) -> io::Result<WrittenSite> {
        for dir in ["p", "tag", "dup", "private"] {
            std::fs::create_dir_all(www_root.join(dir))?;
        }
        let mut written = WrittenSite { files: 0, bytes: 0 };
        for path in self.file_paths() {
            let body = self
                .file(&path)
                .ok_or_else(|| io::Error::other(format!("no content for {path}")))?;
            std::fs::write(www_root.join(&path[1..]), &body)?;
            written.files += 1;
            written.bytes += body.len() as u64;
        }
        Ok(written)
    }

    /// `/robots.txt`: everything allowed but `/private/`, the sitemap named, no Crawl-delay.
    pub fn robots_txt(&self) -> String {
        format!(
            "# robots.txt of the generated crawl site\nUser-agent: *\nDisallow: /private/\n\nSitemap: {}/sitemap.xml\n",
            self.origin
        )
    }

    fn max_depth(&self) -> u32 {
        let mut depth: HashMap<Target, u32> = HashMap::new();
        let mut queue = VecDeque::from([Target::Page(0)]);
        depth.insert(Target::Page(0), 0);
        let mut deepest = 0;
        while let Some(node) = queue.pop_front() {
            let d = depth[&node];
            deepest = deepest.max(d);
            let links = match node {
                Target::Page(i) => self.article_targets(i),
                Target::Tag(t) => self.tag_targets(t),
                // The other pages are leaves: duplicates are not followed, redirects lead
                // to articles, the rest are not fetched or have no page.
                _ => continue,
            };
            for link in links {
                if link != Target::SelfFragment && !depth.contains_key(&link) {
                    depth.insert(link, d + 1);
                    queue.push_back(link);
                }
            }
        }
        deepest
    }

    /// The links of `/p/{i}`, in page order: nav (home, two tags, `#main`), then the body.
    fn article_targets(&self, i: u64) -> Vec<Target> {
        let n = self.pages;
        let mut links = vec![
            Target::Page(0),
            Target::Tag(i % self.tags),
            Target::Tag((i * 7 + 3) % self.tags),
            Target::SelfFragment,
        ];
        let first_child = i.saturating_mul(FANOUT).saturating_add(1);
        links.extend(
            (first_child..first_child.saturating_add(FANOUT))
                .take_while(|&c| c < n)
                .map(Target::Page),
        );
        if i > 0 {
            links.push(Target::Page((i - 1) / FANOUT));
            links.push(Target::Page(i - 1));
        }
        if i + 1 < n {
            links.push(Target::Page(i + 1));
        }
        if let Some(specials) = self.specials.get(&i) {
            links.extend(specials.iter().copied());
        }
        let mut rng = Rng::new(i.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0xC4A3);
        while links.len() < LINKS_PER_PAGE {
            links.push(Target::Page(rng.next_u64() % n));
        }
        links
    }

    /// The links of `/tag/{t}`: home, the neighbouring tags, then its articles.
    fn tag_targets(&self, t: u64) -> Vec<Target> {
        let mut links = vec![
            Target::Page(0),
            Target::Tag((t + self.tags - 1) % self.tags),
            Target::Tag((t + 1) % self.tags),
        ];
        links.extend(
            (t..self.pages)
                .step_by(self.tags as usize)
                .take(TAG_LINKS as usize)
                .map(Target::Page),
        );
        links
    }

    /// An href for `target`, in one of the spellings a crawler must merge.
    fn href(&self, target: Target, rng: &mut Rng) -> String {
        let Some(path) = target.path() else {
            return "#main".to_owned();
        };
        let relative = format!("..{path}");
        let origin = &self.origin;
        let spelling = if matches!(target, Target::Page(_)) {
            rng.range(0, 9)
        } else {
            rng.range(0, 2)
        };
        match spelling {
            0 | 3 => path,
            1 | 4 => relative,
            2 | 5 => format!("{origin}{path}"),
            6 => format!("{path}#section-{}", rng.range(1, 4)),
            7 => format!("{path}?utm_source=newsletter&amp;utm_medium=email"),
            8 => format!("{origin}{path}?utm_campaign=spring#comments"),
            _ => format!("{relative}?fbclid=IwAR{}", rng.range(1_000, 9_999)),
        }
    }

    /// `/p/{i}`, also served as `/dup/{i}` (whose canonical link then names another page).
    fn article(&self, i: u64) -> String {
        let mut rng = Rng::new(i.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ 0xC2A1);
        let target = if rng.range(0, 3) == 0 {
            rng.range(60_000, 145_000)
        } else {
            rng.range(5_500, 60_000)
        } as usize;
        let h1 = title(&mut rng);
        let description = sentence(&mut rng);
        let mut links = self.article_targets(i).into_iter();
        let mut nav = String::new();
        for link in links.by_ref().take(4) {
            let _ = write!(
                nav,
                "<a href=\"{}\">{}</a>",
                self.href(link, &mut rng),
                link.label()
            );
        }
        let body: Vec<(String, String)> = links
            .map(|link| (self.href(link, &mut rng), link.label()))
            .collect();
        let inline = body.len() / 2;
        // `/p/{i}` names itself, and its `/dup/{i}` copy (the same bytes) names it too.
        let canonical = format!("<link rel=\"canonical\" href=\"/p/{i}\">");
        let mut s = String::with_capacity(target + 4096);
        let _ = write!(
            s,
            r##"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{h1} - Article {i}</title>
<meta name="description" content="{description}">
{canonical}
<style>body{{font-family:Georgia,serif;max-width:48rem;margin:auto}}.nav a{{margin-right:1rem}}.footer{{color:#666}}</style>
</head>
<body>
<header class="header"><div class="brand">Crawl Bench Site</div>
<nav class="nav">{nav}</nav>
</header>
<main id="main">
<article>
<h1>{h1}</h1>
<p class="meta">Article {i} of the crawl benchmark site.</p>
"##
        );
        let mut see_also = String::from("<section id=\"see-also\"><h2>See also</h2>\n<ul>\n");
        for (href, label) in &body[inline..] {
            let _ = writeln!(see_also, "<li><a href=\"{href}\">{label}</a></li>");
        }
        see_also.push_str("</ul>\n</section>\n");
        let footer = "</article>\n</main>\n<footer class=\"footer\" id=\"footer\"><p>Crawl Bench Site is generated \
                      for crawler benchmarks. Nothing here is real.</p></footer>\n</body>\n</html>\n";
        let mut paragraphs = 0;
        let mut pending = body[..inline].iter();
        let mut unplaced = Vec::new();
        while s.len() + see_also.len() + footer.len() < target {
            if paragraphs % 4 == 0 {
                let _ = writeln!(
                    s,
                    "<h2 id=\"section-{}\">{}</h2>",
                    paragraphs / 4 + 1,
                    title(&mut rng)
                );
            }
            let text = paragraph(&mut rng);
            match pending.next() {
                Some((href, label)) => {
                    let _ = writeln!(s, "<p>{text} Read <a href=\"{href}\">{label}</a>.</p>");
                }
                None => {
                    let _ = writeln!(s, "<p>{text}</p>");
                }
            }
            paragraphs += 1;
        }
        unplaced.extend(pending);
        if !unplaced.is_empty() {
            s.push_str("<p class=\"more\">More:");
            for (href, label) in unplaced {
                let _ = write!(s, " <a href=\"{href}\">{label}</a>");
            }
            s.push_str("</p>\n");
        }
        s.push_str(&see_also);
        s.push_str(footer);
        s
    }

    /// `/tag/{t}`: an index of articles.
    fn tag_page(&self, t: u64) -> String {
        let mut rng = Rng::new(t.wrapping_mul(0x9FB2_1C65_1E98_DF25) ^ 0x7A6);
        let name = title(&mut rng);
        let mut s = format!(
            "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Topic {t}: {name}</title>\n\
             <link rel=\"canonical\" href=\"/tag/{t}\">\n</head>\n<body>\n<header><div class=\"brand\">Crawl Bench Site</div><nav>"
        );
        let mut links = self.tag_targets(t).into_iter();
        for link in links.by_ref().take(3) {
            let _ = write!(
                s,
                "<a href=\"{}\">{}</a> ",
                self.href(link, &mut rng),
                link.label()
            );
        }
        let _ = write!(
            s,
            "</nav></header>\n<main>\n<h1>Topic {t}: {name}</h1>\n<p>{}</p>\n<ul>\n",
            paragraph(&mut rng)
        );
        for link in links {
            let _ = writeln!(
                s,
                "<li><a href=\"{}\">{}</a>: {}</li>",
                self.href(link, &mut rng),
                link.label(),
                sentence(&mut rng)
            );
        }
        s.push_str("</ul>\n</main>\n<footer><p>Crawl Bench Site.</p></footer>\n</body>\n</html>\n");
        s
    }

    /// `/sitemap.xml`: the index of the other sitemap files.
    fn sitemap_index(&self) -> String {
        let mut s = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
        );
        for (path, _) in self.sitemap_files() {
            let _ = writeln!(s, "<sitemap><loc>{}{path}</loc></sitemap>", self.origin);
        }
        s.push_str("</sitemapindex>\n");
        s
    }

    /// The urlset files: the articles gzipped, at most [`MAX_SITEMAP_ENTRIES`] a file, then the
    /// tags in a plain file.
    fn sitemap_files(&self) -> Vec<(String, Vec<u8>)> {
        let chunk = MAX_SITEMAP_ENTRIES as u64;
        let mut files = Vec::new();
        let mut start = 0;
        while start < self.pages {
            let end = (start + chunk).min(self.pages);
            let xml = self.urlset((start..end).map(|i| format!("/p/{i}")));
            let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            gz.write_all(xml.as_bytes())
                .expect("writing to a Vec cannot fail");
            let body = gz.finish().expect("writing to a Vec cannot fail");
            files.push((format!("/sitemap-{}.xml.gz", files.len() + 1), body));
            start = end;
        }
        let tags = self.urlset((0..self.tags).map(|t| format!("/tag/{t}")));
        files.push((
            format!("/sitemap-{}.xml", files.len() + 1),
            tags.into_bytes(),
        ));
        files
    }

    fn urlset(&self, paths: impl Iterator<Item = String>) -> String {
        let mut s = String::from(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<urlset xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">\n",
        );
        for path in paths {
            let _ = writeln!(
                s,
                "<url><loc>{}{path}</loc><lastmod>2024-06-01</lastmod></url>",
                self.origin
            );
        }
        s.push_str("</urlset>\n");
        s
    }
}

fn private_page(k: u64) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head><meta charset=\"utf-8\"><title>Members area {k}</title></head>\n\
         <body><main><h1>Members area {k}</h1><p>Disallowed by robots.txt: a crawler that obeys it never asks for this page.</p></main></body>\n</html>\n"
    )
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use trawl_workers::crawl::sitemap::SitemapLimits;
    use trawl_workers::crawl::{Robots, crawl_key, parse_sitemap};
    use url::Url;

    use super::*;

    const ORIGIN: &str = "http://127.0.0.1:8080";

    /// The hrefs of an HTML page (what a crawler would follow), entities `&amp;` decoded.
    fn hrefs(html: &str) -> Vec<String> {
        html.split("<a href=\"")
            .skip(1)
            .filter_map(|rest| rest.split_once('"'))
            .map(|(href, _)| href.replace("&amp;", "&"))
            .collect()
    }

    fn path_of(url: &Url) -> String {
        Url::parse(&crawl_key(url))
            .expect("keys are URLs")
            .path()
            .to_owned()
    }

    #[test]
    fn counts_scale_and_match_the_defaults() {
        let site = CrawlSite::new(10_000, ORIGIN);
        let expected = site.expected();
        assert_eq!(expected.unique_documents, 10_259);
        assert_eq!(expected.duplicate_pages, 299);
        assert_eq!(expected.fetchable_pages, 10_558);
        assert_eq!(expected.redirects, 150);
        assert_eq!(expected.duplicates, 449);
        assert_eq!(expected.dead_links, 100);
        assert_eq!(expected.private_pages, 200);
        assert_eq!(expected.max_depth, 3);
        assert_eq!(site.unique_paths().len(), 10_259);
        assert_eq!(site.nginx_locations().lines().count(), 150);

        let tiny = CrawlSite::new(1, ORIGIN).expected();
        assert_eq!((tiny.pages, tiny.tags, tiny.duplicate_pages), (1, 1, 1));
        assert_eq!(
            (tiny.redirects, tiny.dead_links, tiny.private_pages),
            (1, 1, 1)
        );
        assert_eq!(tiny.max_depth, 1);
    }

    #[test]
    fn files_are_deterministic_and_articles_are_realistic() {
        let (a, b) = (CrawlSite::new(500, ORIGIN), CrawlSite::new(500, ORIGIN));
        for path in [
            "/p/0",
            "/p/499",
            "/tag/3",
            "/dup/2",
            "/sitemap-1.xml.gz",
            "/robots.txt",
        ] {
            assert_eq!(a.file(path), b.file(path), "{path}");
        }
        assert_eq!(a.file("/p/500"), None);
        assert_eq!(a.file("/p/01"), None);
        assert_eq!(a.file("/old/1"), None);
        assert_eq!(a.file("/gone/0"), None);
        let mut total_links = 0;
        for i in 0..500 {
            let html =
                String::from_utf8(a.file(&format!("/p/{i}")).expect("article")).expect("utf-8");
            assert!(
                (5_000..150_000).contains(&html.len()),
                "/p/{i}: {} bytes",
                html.len()
            );
            assert!(
                html.contains("<article>") && html.contains("<nav") && html.contains("<footer")
            );
            let links = hrefs(&html).len();
            assert!(links >= LINKS_PER_PAGE, "/p/{i}: {links} links");
            total_links += links;
        }
        assert!(
            total_links / 500 <= LINKS_PER_PAGE + 3,
            "mean {}",
            total_links / 500
        );
        let dup = String::from_utf8(a.file("/dup/7").expect("dup")).expect("utf-8");
        assert!(dup.contains("<link rel=\"canonical\" href=\"/p/7\">"));
        assert_eq!(
            hrefs(&dup),
            hrefs(&String::from_utf8(a.file("/p/7").expect("p")).expect("utf-8"))
        );
    }

    /// Follows the links of the generated HTML breadth-first from `/p/0`, as a crawler does
    /// (duplicates and redirects not expanded), keyed by `crawl_key`.
    fn crawl_depths(site: &CrawlSite) -> HashMap<String, u32> {
        let base = Url::parse(ORIGIN).expect("origin");
        let mut depth: HashMap<String, u32> = HashMap::from([("/p/0".to_owned(), 0)]);
        let mut queue = VecDeque::from(["/p/0".to_owned()]);
        while let Some(path) = queue.pop_front() {
            if !(path.starts_with("/p/") || path.starts_with("/tag/")) {
                continue;
            }
            let page = base.join(&path).expect("path");
            let html =
                String::from_utf8(site.file(&path).expect("linked page exists")).expect("utf-8");
            for href in hrefs(&html) {
                let url = page.join(&href).expect("href resolves");
                assert_eq!(url.origin(), base.origin(), "{href} on {path}");
                let target = path_of(&url);
                if !depth.contains_key(&target) {
                    depth.insert(target.clone(), depth[&path] + 1);
                    queue.push_back(target);
                }
            }
        }
        depth
    }

    #[test]
    fn every_page_is_reached_from_p0_within_the_stated_depth() {
        for pages in [1, 30, 1_200] {
            let site = CrawlSite::new(pages, ORIGIN);
            let expected = site.expected();
            let depth = crawl_depths(&site);
            let deepest = depth.values().copied().max().unwrap_or(0);
            assert_eq!(deepest, expected.max_depth, "{pages} pages");
            let reached: HashSet<&str> = depth.keys().map(String::as_str).collect();
            for path in site.unique_paths() {
                assert!(
                    reached.contains(path.as_str()),
                    "{path} not reached ({pages} pages)"
                );
            }
            let count =
                |prefix: &str| reached.iter().filter(|p| p.starts_with(prefix)).count() as u64;
            assert_eq!(count("/dup/"), expected.duplicate_pages);
            assert_eq!(count("/old/"), expected.redirects);
            assert_eq!(count("/gone/"), expected.dead_links);
            assert_eq!(count("/private/"), expected.private_pages);
            assert_eq!(count("/p/") + count("/tag/"), expected.unique_documents);
            assert_eq!(
                depth.len() as u64,
                expected.fetchable_pages
                    + expected.redirects
                    + expected.dead_links
                    + expected.private_pages
            );
        }
    }

    #[test]
    fn robots_txt_disallows_private_only_and_names_the_sitemap() {
        let site = CrawlSite::new(100, ORIGIN);
        let robots = Robots::parse(&site.file("/robots.txt").expect("robots.txt"));
        let url = |path: &str| Url::parse(&format!("{ORIGIN}{path}")).expect("url");
        for path in [
            "/p/1",
            "/tag/0",
            "/dup/0",
            "/old/0",
            "/gone/0",
            "/sitemap.xml",
            "/",
        ] {
            assert!(robots.allowed(&url(path)), "{path}");
        }
        assert!(!robots.allowed(&url("/private/0")));
        assert!(!robots.allowed(&url("/private/1?utm_source=x")));
        assert_eq!(robots.crawl_delay(), None);
        assert_eq!(robots.sitemaps(), &[url("/sitemap.xml")]);
    }

    #[test]
    fn the_sitemaps_list_every_article_and_tag() {
        let site = CrawlSite::new(1_000, ORIGIN);
        let limits = SitemapLimits::default();
        let index = parse_sitemap(&site.file("/sitemap.xml").expect("index"), &limits)
            .expect("index parses");
        let names: Vec<&str> = index.sitemaps.iter().map(Url::path).collect();
        assert_eq!(names, ["/sitemap-1.xml.gz", "/sitemap-2.xml"]);
        let mut listed = BTreeSet::new();
        for (n, sitemap) in index.sitemaps.iter().enumerate() {
            let body = site.file(sitemap.path()).expect("listed sitemap exists");
            let parsed = parse_sitemap(&body, &limits).expect("sitemap parses");
            assert_eq!(parsed.gzipped, n == 0);
            assert_eq!(
                (parsed.skipped, parsed.errors, parsed.over_limit),
                (0, 0, 0)
            );
            listed.extend(parsed.urls.iter().map(|entry| entry.loc.path().to_owned()));
        }
        assert_eq!(listed, site.unique_paths());
        // More articles than one file may list: several gzipped files.
        let big = CrawlSite::new(120_000, ORIGIN);
        let names: Vec<String> = big
            .sitemap_files()
            .into_iter()
            .map(|(path, _)| path)
            .collect();
        assert_eq!(
            names,
            [
                "/sitemap-1.xml.gz",
                "/sitemap-2.xml.gz",
                "/sitemap-3.xml.gz",
                "/sitemap-4.xml"
            ]
        );
    }

    #[test]
    fn write_puts_every_file_on_disk() {
        let dir = std::env::temp_dir().join(format!("trawl-crawl-site-{}", std::process::id()));
        let site = CrawlSite::new(40, ORIGIN);
        let written = site.write(&dir).expect("site written");
        assert_eq!(written.files, site.file_paths().len() as u64);
        let on_disk = std::fs::read(dir.join("p").join("39")).expect("p/39");
        assert_eq!(Some(on_disk), site.file("/p/39"));
        assert!(dir.join("sitemap-1.xml.gz").is_file() && dir.join("private").join("0").is_file());
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }
}
