//! Crawl bookkeeping, for both engines from one source (see `dialect`): the crawl record and
//! its counters, the seen set of URL keys, following a page's links within the page budget,
//! counting pages as they end, and ending crawls.
//!
//! Not here: deciding what a page's links are and which to follow (`crate::crawl`), and the
//! statements that differ per engine (`sqlite`, `postgres`: inserting seen keys, listing
//! queued jobs, cancelling a crawl).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::dialect::{Db, Dialect, Tx};
use super::jobs::{JOBS_PER_INSERT, insert_jobs};
use super::rows::{self, Columns as _, now_rfc3339};
use super::{Error, NewJob};

/// The start of the query that counts crawl pages as they end, in the transaction that ends
/// them (so a crawl's counters and its jobs never disagree, and no write of its own per page,
/// and a page delivered twice counted once): per crawl, pages fetched and stored (`fetched`),
/// pages served from the cache (`cached`: the job's page is another job's), pages failed
/// or dead (`failed`), pages robots.txt turned away when their turn came (`skipped_robots`)
/// and duplicates (`skipped_duplicate`). Cancelled pages count nowhere. The condition on the
/// ended job ids follows.
const CRAWL_ENDS: &str = "SELECT crawl_id,
        SUM(CASE WHEN status = 'succeeded' AND (page_id IS NULL OR page_id = id)
            THEN 1 ELSE 0 END) AS n_fetched,
        SUM(CASE WHEN status = 'succeeded' AND page_id <> id THEN 1 ELSE 0 END) AS n_cached,
        SUM(CASE WHEN status IN ('failed', 'dead') AND COALESCE(error_code, '')
            NOT IN ('duplicate_content', 'robots_disallowed', 'robots_unreachable')
            THEN 1 ELSE 0 END) AS n_failed,
        SUM(CASE WHEN status IN ('failed', 'dead')
            AND error_code IN ('robots_disallowed', 'robots_unreachable')
            THEN 1 ELSE 0 END) AS n_robots,
        SUM(CASE WHEN status IN ('failed', 'dead') AND error_code = 'duplicate_content'
            THEN 1 ELSE 0 END) AS n_duplicates
    FROM jobs WHERE crawl_id IS NOT NULL AND id";

/// How a crawl stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CrawlStatus {
    /// Pages are being fetched (or wait in the queue).
    Running,
    /// Every page it queued has ended.
    Completed,
    /// Stopped on request.
    Cancelled,
}

impl CrawlStatus {
    /// The snake_case name, as stored and serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            CrawlStatus::Running => "running",
            CrawlStatus::Completed => "completed",
            CrawlStatus::Cancelled => "cancelled",
        }
    }

    /// Parses the stored name.
    pub fn parse(text: &str) -> Option<CrawlStatus> {
        match text {
            "running" => Some(CrawlStatus::Running),
            "completed" => Some(CrawlStatus::Completed),
            "cancelled" => Some(CrawlStatus::Cancelled),
            _ => None,
        }
    }
}

/// A crawl's progress. As a delta, what to add.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct CrawlCounters {
    /// Distinct URLs seen (seeds, links, sitemap entries).
    pub discovered: u64,
    /// Fetch jobs created.
    pub queued: u64,
    /// Pages fetched and stored (requests made).
    pub fetched: u64,
    /// Pages served from the page cache (stored by an earlier fetch, no request made).
    #[serde(default)]
    pub cached: u64,
    /// Fetch jobs that failed or died.
    pub failed: u64,
    /// Links out of scope or filtered out by the globs.
    pub skipped_scope: u64,
    /// URLs disallowed by robots.txt.
    pub skipped_robots: u64,
    /// Links beyond `max_depth`.
    pub skipped_depth: u64,
    /// URLs beyond `max_pages`.
    pub skipped_limit: u64,
    /// Pages whose `rel=canonical` names a page the crawl already has.
    pub skipped_duplicate: u64,
}

/// What becomes of a URL key a crawl page found, when the key is new to the crawl.
#[derive(Debug, Clone, Copy)]
pub enum Fate<'a> {
    /// One of the page's own keys (its final or canonical URL): recorded, not counted.
    Own,
    /// Out of scope or filtered out by the globs (`skipped_scope`).
    Scope,
    /// Disallowed by robots.txt (`skipped_robots`).
    Robots,
    /// To fetch: this job is created when the page budget allows (`queued`), else the key
    /// counts as `skipped_limit`.
    Queue(&'a NewJob),
}

/// A URL key a crawl page found, and what becomes of it when it is new.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    /// `trawl_workers::crawl::crawl_key` of the URL.
    pub key: &'a str,
    /// What becomes of it.
    pub fate: Fate<'a>,
}

/// What [`Store::follow_crawl`](super::Store::follow_crawl) recorded.
#[derive(Debug, Default)]
pub struct Followed {
    /// The keys that were new to the crawl.
    pub new: HashSet<String>,
    /// The ids of the jobs created, in the order found: the caller queues them.
    pub created: Vec<String>,
    /// What was added to the crawl's counters.
    pub counters: CrawlCounters,
}

impl Followed {
    /// The tally once the seen set answered (`new`): the counters of the new keys, and the
    /// jobs wanted (new keys to queue), in the order found.
    fn tally<'a>(
        found: &[Found<'a>],
        new: HashSet<String>,
        counted: &CrawlCounters,
    ) -> (Followed, Vec<&'a NewJob>) {
        let mut counters = *counted;
        let mut wanted = Vec::new();
        let mut tallied = HashSet::new();
        for found in found {
            if !new.contains(found.key) || !tallied.insert(found.key) {
                continue;
            }
            match found.fate {
                Fate::Own => continue,
                Fate::Scope => counters.skipped_scope += 1,
                Fate::Robots => counters.skipped_robots += 1,
                Fate::Queue(job) => wanted.push(job),
            }
            counters.discovered += 1;
        }
        let followed = Followed {
            new,
            created: Vec::new(),
            counters,
        };
        (followed, wanted)
    }

    /// Keeps the first `granted` wanted jobs: they are created and counted as queued, the
    /// rest as beyond the budget. Returns the jobs to create.
    fn grant<'a>(&mut self, mut wanted: Vec<&'a NewJob>, granted: u64) -> Vec<&'a NewJob> {
        let granted = usize::try_from(granted)
            .unwrap_or(usize::MAX)
            .min(wanted.len());
        self.counters.skipped_limit += (wanted.len() - granted) as u64;
        self.counters.queued += granted as u64;
        wanted.truncate(granted);
        self.created = wanted.iter().map(|job| job.id.clone()).collect();
        wanted
    }
}

/// A crawl as recorded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct CrawlRecord {
    /// The crawl id (ULID).
    pub id: String,
    /// What was asked.
    pub spec: trawl_workers::job::CrawlSpec,
    /// How it stands.
    pub status: CrawlStatus,
    /// Its progress.
    pub counters: CrawlCounters,
    /// When it started (RFC 3339).
    pub created_at: String,
    /// When it ended.
    pub finished_at: Option<String>,
    /// The tenant it belongs to (internal: not shown).
    #[serde(skip)]
    pub tenant: String,
}

/// The statement that adds `delta` to a crawl's counters.
fn add_counters<DB>(crawl_id: &str, delta: &CrawlCounters) -> sqlx::QueryBuilder<DB>
where
    DB: sqlx::Database,
    <DB as sqlx::Database>::Arguments: Default,
    for<'t> String: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
    for<'t> i64: sqlx::Encode<'t, DB> + sqlx::Type<DB>,
{
    let columns = [
        ("discovered", delta.discovered),
        ("queued", delta.queued),
        ("fetched", delta.fetched),
        ("cached", delta.cached),
        ("failed", delta.failed),
        ("skipped_scope", delta.skipped_scope),
        ("skipped_robots", delta.skipped_robots),
        ("skipped_depth", delta.skipped_depth),
        ("skipped_limit", delta.skipped_limit),
        ("skipped_duplicate", delta.skipped_duplicate),
    ];
    let mut update = sqlx::QueryBuilder::new("UPDATE crawls SET ");
    for (n, (column, value)) in columns.into_iter().enumerate() {
        if n > 0 {
            update.push(", ");
        }
        update.push(format_args!("{column} = {column} + "));
        update.push_bind(value as i64);
    }
    update.push(" WHERE id = ");
    update.push_bind(crawl_id.to_owned());
    update
}

macro_rules! crawl_queries {
    ($store:ty) => {
        impl $store {
            pub(super) async fn create_crawl(
                &self,
                id: &str,
                tenant: &crate::tenant::Tenant,
                spec: &serde_json::Value,
            ) -> Result<(), Error> {
                sqlx::query(
                    "INSERT INTO crawls (id, spec, status, created_at, tenant)
                     VALUES ($1, $2, 'running', $3, $4)",
                )
                .bind(id)
                .bind(spec.to_string())
                .bind(now_rfc3339())
                .bind(tenant.as_str())
                .execute(&self.pool)
                .await?;
                Ok(())
            }

            pub(super) async fn crawl(&self, id: &str) -> Result<Option<CrawlRecord>, Error> {
                let row = sqlx::query("SELECT * FROM crawls WHERE id = $1")
                    .bind(id)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(|row| rows::crawl(&row)).transpose()
            }

            pub(super) async fn crawl_url_seen(
                &self,
                crawl_id: &str,
                key: &str,
            ) -> Result<bool, Error> {
                let row =
                    sqlx::query("SELECT 1 FROM crawl_urls WHERE crawl_id = $1 AND url_key = $2")
                        .bind(crawl_id)
                        .bind(key)
                        .fetch_optional(&self.pool)
                        .await?;
                Ok(row.is_some())
            }

            pub(super) async fn follow_crawl(
                &self,
                crawl_id: &str,
                max_pages: u64,
                found: &[Found<'_>],
                counted: &CrawlCounters,
            ) -> Result<Followed, Error> {
                // Keys are inserted in one fixed order, so two workers adding overlapping sets
                // wait on each other instead of deadlocking; the crawl row is locked after them.
                let mut keys: Vec<&str> = found.iter().map(|found| found.key).collect();
                keys.sort_unstable();
                keys.dedup();
                let mut tx = self.write_transaction().await?;
                let mut new = HashSet::new();
                for chunk in keys.chunks(Self::CRAWL_KEYS_PER_INSERT) {
                    let mut insert = Self::add_crawl_keys(crawl_id, chunk);
                    for row in insert.build().fetch_all(&mut *tx).await? {
                        new.insert(row.text("url_key")?);
                    }
                }
                let (mut followed, wanted) = Followed::tally(found, new, counted);
                let granted = if wanted.is_empty() {
                    0
                } else {
                    let select = format!(
                        "SELECT queued FROM crawls WHERE id = $1 AND status = 'running'{}",
                        Self::FOR_UPDATE
                    );
                    let row = sqlx::query(sqlx::AssertSqlSafe(select))
                        .bind(crawl_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                    let queued = row.map(|row| row.int("queued")).transpose()?;
                    queued.map_or(0, |queued| max_pages.saturating_sub(queued.max(0) as u64))
                };
                let jobs = followed.grant(wanted, granted);
                let now = now_rfc3339();
                for chunk in jobs.chunks(JOBS_PER_INSERT) {
                    insert_jobs::<Db<Self>>(chunk.iter().copied(), &now)
                        .build()
                        .execute(&mut *tx)
                        .await?;
                }
                if followed.counters != CrawlCounters::default() {
                    add_counters::<Db<Self>>(crawl_id, &followed.counters)
                        .build()
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                Ok(followed)
            }

            /// Counts the crawl pages among the jobs `ids`, just ended in `tx`, in their
            /// crawls' counters (see [`CRAWL_ENDS`]).
            pub(super) async fn count_crawl_ends(
                tx: &mut Tx<Self>,
                ids: &[&str],
            ) -> Result<(), Error> {
                if ids.is_empty() {
                    return Ok(());
                }
                let mut update = sqlx::QueryBuilder::<Db<Self>>::new(
                    "UPDATE crawls SET fetched = crawls.fetched + c.n_fetched,
                         cached = crawls.cached + c.n_cached,
                         failed = crawls.failed + c.n_failed,
                         skipped_robots = crawls.skipped_robots + c.n_robots,
                         skipped_duplicate = crawls.skipped_duplicate + c.n_duplicates FROM (",
                );
                update.push(CRAWL_ENDS);
                Self::push_in(&mut update, ids);
                update.push(" GROUP BY crawl_id) AS c WHERE crawls.id = c.crawl_id");
                update.build().execute(&mut **tx).await?;
                Ok(())
            }

            pub(super) async fn complete_crawl_if_done(
                &self,
                crawl_id: &str,
            ) -> Result<bool, Error> {
                let done = sqlx::query(
                    "UPDATE crawls SET status = 'completed', finished_at = $1
                     WHERE id = $2 AND status = 'running'
                       AND NOT EXISTS (SELECT 1 FROM jobs
                                       WHERE crawl_id = $2 AND status IN ('queued', 'running'))",
                )
                .bind(now_rfc3339())
                .bind(crawl_id)
                .execute(&self.pool)
                .await?
                .rows_affected();
                Ok(done > 0)
            }

            pub(super) async fn complete_idle_crawls(&self) -> Result<Vec<String>, Error> {
                // A running crawl with no job yet is being seeded: left alone.
                let done = sqlx::query(
                    "UPDATE crawls SET status = 'completed', finished_at = $1
                     WHERE status = 'running'
                       AND EXISTS (SELECT 1 FROM jobs WHERE jobs.crawl_id = crawls.id)
                       AND NOT EXISTS (SELECT 1 FROM jobs WHERE jobs.crawl_id = crawls.id
                                       AND jobs.status IN ('queued', 'running'))
                     RETURNING id",
                )
                .bind(now_rfc3339())
                .fetch_all(&self.pool)
                .await?;
                done.iter().map(|row| row.text("id")).collect()
            }
        }
    };
}

crawl_queries!(super::sqlite::SqliteStore);
crawl_queries!(super::postgres::PgStore);
