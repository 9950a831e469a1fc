//! The correctness checks of a crawl run: its counters and stored pages against the generated
//! site, what `--archive` archived, and nginx's access log (nothing disallowed requested, every
//! page requested once). A peer's run is held to robots.txt alone (nothing disallowed
//! requested); the rest of its access log is noted, not checked. A broken check is recorded
//! on the run, not returned as an error; this module does not start or measure anything.

use std::collections::{BTreeMap, BTreeSet};

use crate::run::{Archived, Run};
use crate::{Bench, Result};

/// `(request URI, status)` lines of an access log by path (query dropped): requests, statuses.
type ByPath = BTreeMap<String, (u64, BTreeSet<u16>)>;

/// The access log by path, and how many request URIs had a query.
fn by_path(log: &[(String, u16)]) -> (ByPath, u64) {
    let mut by_path = ByPath::new();
    let mut with_query = 0;
    for (uri, status) in log {
        let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
        if !query.is_empty() {
            with_query += 1;
        }
        let entry = by_path.entry(path.to_owned()).or_default();
        entry.0 += 1;
        entry.1.insert(*status);
    }
    (by_path, with_query)
}

/// Paths under `prefix` and the requests to them.
fn count(by_path: &ByPath, prefix: &str) -> (u64, u64) {
    by_path
        .iter()
        .filter(|(path, _)| path.starts_with(prefix))
        .fold((0, 0), |(paths, requests), (_, (n, _))| {
            (paths + 1, requests + n)
        })
}

impl Bench<'_> {
    /// Checks the crawl's counters and the stored pages against the site.
    pub(crate) fn check_store(&self, run: &mut Run, rows: &[(String, String)]) {
        let e = &self.expected;
        let s = run.summary.clone();
        let mut failures = Vec::new();
        let mut check = |ok: bool, what: String| {
            if !ok {
                failures.push(what);
            }
        };
        check(
            s.fetched == e.unique_documents,
            format!(
                "pages fetched {} != unique documents {}",
                s.fetched, e.unique_documents
            ),
        );
        check(
            s.failed == e.dead_links,
            format!("failed {} != dead links {}", s.failed, e.dead_links),
        );
        check(
            s.duplicates == e.duplicates,
            format!(
                "duplicates {} != /dup/ pages {} + redirects to known pages {}",
                s.duplicates, e.duplicate_pages, e.redirects
            ),
        );
        check(
            s.skipped_robots == e.private_pages,
            format!(
                "skipped by robots.txt {} != /private/ pages {}",
                s.skipped_robots, e.private_pages
            ),
        );
        check(
            s.skipped_depth == 0 && s.skipped_limit == 0,
            format!(
                "{} too deep and {} over max_pages (the bench sets both to cover the site)",
                s.skipped_depth, s.skipped_limit
            ),
        );
        let path = |url: &str| {
            url::Url::parse(url)
                .map(|u| u.path().to_owned())
                .unwrap_or_else(|_| url.to_owned())
        };
        let mut by_final: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (url, final_url) in rows {
            by_final.entry(path(final_url)).or_default().push(path(url));
        }
        let stored: BTreeSet<String> = by_final.keys().cloned().collect();
        let unique = self.site.unique_paths();
        let missing: Vec<&String> = unique.difference(&stored).collect();
        let extra: Vec<&String> = stored.difference(&unique).collect();
        check(
            missing.is_empty() && extra.is_empty(),
            format!(
                "stored final URLs differ from the unique documents: {} missing (e.g. {:?}), {} unexpected (e.g. {:?})",
                missing.len(),
                missing.iter().take(5).collect::<Vec<_>>(),
                extra.len(),
                extra.iter().take(5).collect::<Vec<_>>()
            ),
        );
        let repeated: Vec<String> = by_final
            .iter()
            .filter(|(_, urls)| urls.len() > 1)
            .map(|(final_path, urls)| format!("{final_path} ← {}", urls.join(", ")))
            .collect();
        check(
            repeated.is_empty(),
            format!(
                "{} documents stored more than once ({} rows for {} documents), e.g. {:?}",
                repeated.len(),
                rows.len(),
                stored.len(),
                repeated.iter().take(4).collect::<Vec<_>>()
            ),
        );
        run.stored_rows = rows.len() as u64;
        run.failures.extend(failures);
    }

    /// Checks nginx's access log of the run.
    pub(crate) fn check_access_log(&self, run: &mut Run) -> Result<()> {
        let e = &self.expected;
        let log = self.nginx.access_log()?;
        let (by_path, with_query) = by_path(&log);
        let count = |prefix: &str| count(&by_path, prefix);
        let mut failures = Vec::new();
        let (private_paths, private_requests) = count("/private/");
        if private_requests > 0 {
            failures.push(format!(
                "{private_requests} requests to {private_paths} /private/ pages (disallowed by robots.txt)"
            ));
        }
        let mut fetchable: Vec<String> = self.site.unique_paths().into_iter().collect();
        fetchable.extend((0..e.duplicate_pages).map(|d| format!("/dup/{d}")));
        let never: Vec<&String> = fetchable
            .iter()
            .filter(|path| !by_path.contains_key(*path))
            .collect();
        if !never.is_empty() {
            failures.push(format!(
                "{} pages never requested, e.g. {:?}",
                never.len(),
                never.iter().take(5).collect::<Vec<_>>()
            ));
        }
        let (old_paths, old_requests) = count("/old/");
        if old_paths != e.redirects || old_requests != e.redirects {
            failures.push(format!(
                "redirects: {old_requests} requests to {old_paths} /old/ paths, expected each of {} once",
                e.redirects
            ));
        }
        let (gone_paths, gone_requests) = count("/gone/");
        if gone_paths != e.dead_links {
            failures.push(format!(
                "dead links: {gone_paths} of {} requested",
                e.dead_links
            ));
        }
        // Every page once: a redirect whose target the crawl already has (the sitemap names
        // every article) is refused before the target is requested.
        let mut twice = Vec::new();
        for (path, (n, _)) in &by_path {
            let special = path == "/robots.txt" || path.starts_with("/sitemap");
            if !special && *n > 1 {
                twice.push(format!("{path} ×{n}"));
            }
        }
        if !twice.is_empty() {
            failures.push(format!(
                "{} paths requested more than once, e.g. {:?}",
                twice.len(),
                twice.iter().take(8).collect::<Vec<_>>()
            ));
        }
        let specials: Vec<String> = by_path
            .iter()
            .filter(|(path, _)| *path == "/robots.txt" || path.starts_with("/sitemap"))
            .map(|(path, (n, statuses))| format!("{path} ×{n} {statuses:?}"))
            .collect();
        run.log_notes.push(format!(
            "access log: {} requests, {} paths; /gone/ {gone_requests} requests to {gone_paths} paths; {with_query} request URIs with a query",
            log.len(),
            by_path.len()
        ));
        run.log_notes
            .push(format!("robots.txt and sitemaps: {}", specials.join(", ")));
        run.failures.extend(failures);
        Ok(())
    }

    /// Checks the `archived: …` line of an archive run: every fetched page archived (or
    /// unchanged), none failed, WARC records written.
    pub(crate) fn check_archived(&self, run: &mut Run, archived: Archived) {
        let a = &archived;
        let fetched = run.summary.fetched;
        if a.pages + a.unchanged != fetched {
            run.failures.push(format!(
                "archived {} pages + {} unchanged != {fetched} pages fetched",
                a.pages, a.unchanged
            ));
        }
        if a.failed != 0 {
            run.failures
                .push(format!("{} pages could not be archived", a.failed));
        }
        if a.warc_responses == 0 {
            run.failures
                .push("no WARC response record written".to_owned());
        }
        run.archived = Some(archived);
    }

    /// The peer's access log: a request to `/private/` (disallowed by robots.txt) is a broken
    /// check; the rest is noted (it does not read canonical links, may keep queries apart and
    /// may ask for a page twice: its behaviour, not trawl's).
    pub(crate) fn check_peer_access_log(&self, run: &mut Run) -> Result<()> {
        let log = self.nginx.access_log()?;
        let (by_path, with_query) = by_path(&log);
        let (private_paths, private_requests) = count(&by_path, "/private/");
        if private_requests > 0 {
            run.failures.push(format!(
                "the peer made {private_requests} requests to {private_paths} /private/ pages (disallowed by robots.txt)"
            ));
        }
        let never = self
            .site
            .unique_paths()
            .into_iter()
            .filter(|path| !by_path.contains_key(path))
            .count();
        let twice = by_path
            .iter()
            .filter(|(path, (n, _))| *n > 1 && path.as_str() != "/robots.txt")
            .count();
        let mut by_uri: BTreeMap<&str, u64> = BTreeMap::new();
        for (uri, _) in &log {
            *by_uri.entry(uri.as_str()).or_default() += 1;
        }
        let uri_twice = by_uri
            .iter()
            .filter(|(uri, n)| **n > 1 && **uri != "/robots.txt")
            .count();
        let (dup_paths, _) = count(&by_path, "/dup/");
        let (old_paths, old_requests) = count(&by_path, "/old/");
        let (gone_paths, _) = count(&by_path, "/gone/");
        let (sitemap_paths, _) = count(&by_path, "/sitemap");
        let robots = by_path.get("/robots.txt").map_or(0, |(n, _)| *n);
        run.log_notes.push(format!(
            "access log: {} requests, {} paths; {never} unique documents never requested; {twice} paths requested more than once (query variants counted), {uri_twice} request URIs more than once; {with_query} request URIs with a query",
            log.len(),
            by_path.len()
        ));
        run.log_notes.push(format!(
            "access log: /robots.txt ×{robots}, {sitemap_paths} sitemap paths, {dup_paths} /dup/ paths, /old/ {old_requests} requests to {old_paths} paths, {gone_paths} /gone/ paths, {private_requests} /private/ requests"
        ));
        Ok(())
    }
}
