//! Crawls with real parts: the fixture site's pages linking to each other, robots.txt (also
//! unreachable, and on redirects), the page budget, globs, canonical and redirect duplicates,
//! cancel, the cache; each on the embedded engines and on the distributed ones (PostgreSQL,
//! Redis, the shared politeness gate). Also the politeness gate shared through Redis and the
//! real binary's `trawl crawl`.

use std::sync::Arc;
use std::time::Duration;

use testkit::FixtureServer;
use trawl::app::{App, Deps};
use trawl::config::{Config, Secret};
use trawl::queue::Queue;
use trawl::runner;
use trawl::store::{CrawlRecord, CrawlStatus};
use trawl_workers::crawl::politeness;
use trawl_workers::job::CrawlSpec;

use crate::engines::TestDb;
use crate::queue::RedisServer;
use crate::{spawn_app, test_config};

/// Where a crawl test runs: the embedded engines (SQLite store and queue, this process's
/// politeness gate) or the distributed ones (PostgreSQL in a fresh database, a test-owned
/// Redis for the queue and the shared politeness gate).
#[derive(Debug, Clone, Copy)]
enum Backend {
    Embedded,
    Distributed,
}

/// Runs each named `async fn(Backend)` on both: `NAME::embedded` and `NAME::distributed`.
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn embedded() {
                    super::$name(super::Backend::Embedded).await;
                }

                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn distributed() {
                    super::$name(super::Backend::Distributed).await;
                }
            }
        )*
    };
}

on_both_backends!(
    a_crawl_follows_links_within_its_budget_globs_and_robots_txt,
    canonical_and_redirect_duplicates_are_stored_once_and_depth_zero_fetches_the_seeds_only,
    a_redirect_into_a_disallowed_path_is_not_followed,
    an_unreachable_robots_txt_makes_pages_wait_not_pass,
    pages_whose_robots_txt_stays_unreachable_end_robots_unreachable,
    a_cancelled_crawl_queues_nothing_more,
    bad_crawl_specs_are_refused_before_anything_is_recorded,
    a_second_crawl_follows_links_from_cached_pages,
    a_page_delivered_again_queues_the_follow_ups_its_dead_delivery_recorded,
);

/// A test application whose crawl pages queue their links, with no politeness delay, and
/// its running pools.
struct Crawler {
    context: Arc<Deps>,
    queue: Queue,
    app: Option<App>,
    _redis: Option<RedisServer>,
    _db: Option<TestDb>,
}

impl Crawler {
    async fn start(backend: Backend, dir: &std::path::Path) -> Crawler {
        Crawler::with_politeness(
            backend,
            dir,
            politeness::Config {
                min_delay_ms: 0,
                max_concurrent_per_host: 4,
                ..politeness::Config::default()
            },
        )
        .await
    }

    async fn with_politeness(
        backend: Backend,
        dir: &std::path::Path,
        politeness: politeness::Config,
    ) -> Crawler {
        let mut config = Config {
            namespace: format!("crawl-test-{}", ulid::Ulid::generate()).to_lowercase(),
            runner: runner::Config {
                concurrency: 8,
                ..runner::Config::default()
            },
            politeness,
            ..test_config(dir)
        };
        let (redis, db) = match backend {
            Backend::Embedded => (None, None),
            Backend::Distributed => {
                let redis = RedisServer::start("noeviction");
                let db = TestDb::postgres().await;
                config.redis_url = Some(Secret::new(redis.url()));
                config.database_url = Some(Secret::new(db.url.clone()));
                (Some(redis), Some(db))
            }
        };
        let mut app = spawn_app(&config).await;
        app.start_pools();
        let context = app.deps().clone();
        Crawler {
            queue: context.queue.clone(),
            context,
            app: Some(app),
            _redis: redis,
            _db: db,
        }
    }

    async fn crawl(&self, spec: CrawlSpec) -> CrawlRecord {
        let id = trawl::crawl::start(&self.context, &self.queue, spec)
            .await
            .expect("starts");
        self.wait(&id).await
    }

    async fn wait(&self, id: &str) -> CrawlRecord {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
        loop {
            let record = self
                .context
                .store
                .crawl(id)
                .await
                .expect("reads")
                .expect("exists");
            if record.status != CrawlStatus::Running {
                return record;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "crawl still running: {record:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn stop(mut self) {
        if let Some(mut app) = self.app.take() {
            app.stop_pools(Duration::from_secs(30)).await;
        }
    }
}

/// A worker that dies after a page's links and their jobs are recorded, and before they are
/// queued: the page's next delivery queues them (once each), and the crawl goes on.
async fn a_page_delivered_again_queues_the_follow_ups_its_dead_delivery_recorded(backend: Backend) {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let crawler = Crawler::start(backend, dir.path()).await;
    let context = &crawler.context;
    let plan = trawl::crawl::create(
        context,
        CrawlSpec {
            max_pages: 30,
            max_depth: 6,
            ..CrawlSpec::new(vec![server.url("/site/1")])
        },
    )
    .await
    .expect("creates");
    let found = || vec![(url::Url::parse(&server.url("/site/1")).expect("url"), 0)];
    // The first delivery pushes into a queue that is gone, as if its worker died there.
    let gone = Queue::open(
        &dir.path().join("gone.sqlite"),
        "gone",
        runner::Config::default().queue_settings(),
    )
    .await
    .expect("opens");
    gone.close().await;
    let first = trawl::crawl::follow_from(context, &gone, &plan, &[], found(), false).await;
    assert!(first.is_err(), "the push failed: {first:?}");
    let recorded = context
        .store
        .crawl(&plan.id)
        .await
        .expect("reads")
        .expect("exists");
    assert_eq!(recorded.counters.queued, 1, "the seed's job is recorded");
    assert_eq!(recorded.status, CrawlStatus::Running);
    // Delivered again (twice, even): the recorded job is queued, once.
    for _ in 0..2 {
        trawl::crawl::follow_from(context, &crawler.queue, &plan, &[], found(), true)
            .await
            .expect("follows again");
    }
    let record = crawler.wait(&plan.id).await;
    let c = record.counters;
    assert_eq!(record.status, CrawlStatus::Completed, "{record:?}");
    assert_eq!(c.queued, 30, "{c:?}");
    assert_eq!(
        c.fetched + c.failed + c.skipped_duplicate,
        c.queued,
        "{c:?}"
    );
    let urls = crate::crawl_page_urls(&context.store, &record.id).await;
    let requests = server.requests();
    for url in &urls {
        let path = url.trim_start_matches(&server.url(""));
        let times = requests
            .iter()
            .filter(|request| request.path_and_query == path)
            .count();
        assert_eq!(times, 1, "{path} requested once: {urls:?}");
    }
    crawler.stop().await;
}

async fn a_crawl_follows_links_within_its_budget_globs_and_robots_txt(backend: Backend) {
    let server = FixtureServer::start().await.expect("fixture");
    server.set_robots(200, "User-agent: *\nDisallow: /site/*3\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let crawler = Crawler::start(backend, dir.path()).await;
    let mut completed = crawler.context.completed_crawls.subscribe();
    let record = crawler
        .crawl(CrawlSpec {
            max_pages: 25,
            max_depth: 6,
            exclude: vec!["/site/*5".to_owned()],
            ..CrawlSpec::new(vec![server.url("/site/1")])
        })
        .await;
    let c = record.counters;
    assert_eq!(record.status, CrawlStatus::Completed, "{record:?}");
    // The process that completed it said so to its listeners (what `trawl crawl` waits on).
    let announced = tokio::time::timeout(Duration::from_secs(10), completed.recv())
        .await
        .expect("the completion is announced")
        .expect("received");
    assert_eq!(announced, record.id);
    assert_eq!(c.queued, 25, "{c:?}");
    assert_eq!(
        c.fetched + c.failed + c.skipped_duplicate,
        c.queued,
        "{c:?}"
    );
    assert!(c.fetched >= 20, "{c:?}");
    assert!(
        c.skipped_limit > 0,
        "the site is larger than the budget: {c:?}"
    );
    assert!(c.skipped_robots > 0 && c.skipped_scope > 0, "{c:?}");
    assert!(
        c.discovered >= c.queued + c.skipped_robots + c.skipped_scope,
        "{c:?}"
    );

    let urls = crate::crawl_page_urls(&crawler.context.store, &record.id).await;
    assert_eq!(urls.len() as u64, c.fetched);
    let mut distinct = urls.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), urls.len(), "a page fetched twice: {urls:?}");
    for url in &urls {
        assert!(!url.ends_with('3'), "robots.txt disallowed {url}");
        assert!(!url.ends_with('5'), "excluded by the glob: {url}");
    }
    let robots_fetches = server.hits("/robots.txt");
    assert_eq!(robots_fetches, 1, "robots.txt is fetched once per origin");
    crawler.stop().await;
}

async fn canonical_and_redirect_duplicates_are_stored_once_and_depth_zero_fetches_the_seeds_only(
    backend: Backend,
) {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let crawler = Crawler::start(backend, dir.path()).await;
    // The second seed is the first page under another URL: its canonical link says so. The
    // third redirects to it: whichever runs first, the article's URL was seen when the seeds
    // were queued, so the redirect is not followed.
    let record = crawler
        .crawl(CrawlSpec {
            max_depth: 0,
            robots: false,
            ..CrawlSpec::new(vec![
                server.url("/article/1"),
                server.url("/article/1?ref=feed"),
                server.url("/redirect?to=/article/1&code=301"),
            ])
        })
        .await;
    let c = record.counters;
    assert_eq!(
        (c.queued, c.fetched, c.skipped_duplicate, c.failed),
        (3, 1, 2, 0),
        "{c:?}"
    );
    assert!(
        c.skipped_depth > 0,
        "the article's links are beyond depth 0: {c:?}"
    );
    let urls = crate::crawl_page_urls(&crawler.context.store, &record.id).await;
    assert_eq!(urls, vec![server.url("/article/1")]);
    let article_requests = server
        .requests()
        .iter()
        .filter(|request| request.path_and_query == "/article/1")
        .count();
    assert_eq!(
        article_requests, 1,
        "the redirect's target is requested by its own job only"
    );
    crawler.stop().await;
}

async fn a_redirect_into_a_disallowed_path_is_not_followed(backend: Backend) {
    let server = FixtureServer::start().await.expect("fixture");
    server.set_robots(200, "User-agent: *\nDisallow: /article/\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let crawler = Crawler::start(backend, dir.path()).await;
    let record = crawler
        .crawl(CrawlSpec {
            max_depth: 0,
            ..CrawlSpec::new(vec![server.url("/redirect?to=/article/1&code=302")])
        })
        .await;
    let c = record.counters;
    assert_eq!(
        (c.queued, c.fetched, c.failed, c.skipped_robots),
        (1, 0, 0, 1),
        "{c:?}"
    );
    assert_eq!(server.hits("/redirect"), 1);
    assert_eq!(
        server.hits("/article/"),
        0,
        "the disallowed target was requested"
    );
    crawler.stop().await;
}

async fn an_unreachable_robots_txt_makes_pages_wait_not_pass(backend: Backend) {
    let server = FixtureServer::start().await.expect("fixture");
    server.set_robots(503, "down for maintenance");
    let dir = tempfile::tempdir().expect("tempdir");
    let crawler = Crawler::start(backend, dir.path()).await;
    let id = trawl::crawl::start(
        &crawler.context,
        &crawler.queue,
        CrawlSpec {
            max_pages: 12,
            max_depth: 3,
            ..CrawlSpec::new(vec![server.url("/site/1")])
        },
    )
    .await
    .expect("starts");
    // While robots.txt answers 503 nothing but robots.txt is fetched, and it is asked for
    // again with a growing pause (once per origin, not once per waiting page).
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(
        server.hits("/site/"),
        0,
        "a page fetched without robots.txt"
    );
    let asked = server.hits("/robots.txt");
    assert!((2..=4).contains(&asked), "robots.txt asked {asked} times");
    server.set_robots(200, "User-agent: *\nDisallow: /site/*3\n");
    let record = crawler.wait(&id).await;
    let c = record.counters;
    assert_eq!(record.status, CrawlStatus::Completed, "{record:?}");
    assert!(c.fetched >= 10, "{c:?}");
    assert!(c.skipped_robots > 0, "{c:?}");
    for url in crate::crawl_page_urls(&crawler.context.store, &record.id).await {
        assert!(!url.ends_with('3'), "robots.txt disallowed {url}");
    }
    assert!(server.hits("/robots.txt") <= asked + 1);
    crawler.stop().await;
}

async fn pages_whose_robots_txt_stays_unreachable_end_robots_unreachable(backend: Backend) {
    let server = FixtureServer::start().await.expect("fixture");
    server.set_robots(500, "broken");
    let dir = tempfile::tempdir().expect("tempdir");
    let crawler = Crawler::with_politeness(
        backend,
        dir.path(),
        politeness::Config {
            min_delay_ms: 0,
            robots_wait_secs: 1,
            ..politeness::Config::default()
        },
    )
    .await;
    let record = crawler
        .crawl(CrawlSpec::new(vec![
            server.url("/site/1"),
            server.url("/site/2"),
        ]))
        .await;
    let c = record.counters;
    assert_eq!(record.status, CrawlStatus::Completed, "{record:?}");
    assert_eq!(
        (c.queued, c.fetched, c.failed, c.skipped_robots),
        (2, 0, 0, 2),
        "both pages ended robots_unreachable (counted as skipped by robots): {c:?}"
    );
    assert_eq!(server.hits("/site/"), 0);
    crawler.stop().await;
}

async fn a_cancelled_crawl_queues_nothing_more(backend: Backend) {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let crawler = Crawler::start(backend, dir.path()).await;
    let id = trawl::crawl::start(
        &crawler.context,
        &crawler.queue,
        CrawlSpec {
            max_pages: 100_000,
            max_depth: 100,
            robots: false,
            ..CrawlSpec::new(vec![server.url("/site/1")])
        },
    )
    .await
    .expect("starts");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        crawler
            .context
            .store
            .cancel_crawl(&id)
            .await
            .expect("cancels")
    );
    assert!(
        !crawler
            .context
            .store
            .cancel_crawl(&id)
            .await
            .expect("reads")
    );
    let queued = crawler
        .context
        .store
        .crawl(&id)
        .await
        .expect("reads")
        .expect("exists")
        .counters
        .queued;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let record = crawler
        .context
        .store
        .crawl(&id)
        .await
        .expect("reads")
        .expect("exists");
    assert_eq!(record.status, CrawlStatus::Cancelled);
    assert_eq!(
        record.counters.queued, queued,
        "nothing queued after the cancel"
    );
    assert!(record.counters.queued < 100_000);
    crawler.stop().await;
}

async fn bad_crawl_specs_are_refused_before_anything_is_recorded(backend: Backend) {
    let dir = tempfile::tempdir().expect("tempdir");
    let crawler = Crawler::start(backend, dir.path()).await;
    for spec in [
        CrawlSpec::new(vec![]),
        CrawlSpec::new(vec!["ftp://example.com/".to_owned()]),
        CrawlSpec {
            include: vec!["no-slash".to_owned()],
            ..CrawlSpec::new(vec!["https://example.com/".to_owned()])
        },
        CrawlSpec {
            max_pages: 0,
            ..CrawlSpec::new(vec!["https://example.com/".to_owned()])
        },
    ] {
        let error = trawl::crawl::start(&crawler.context, &crawler.queue, spec.clone())
            .await
            .expect_err("refused");
        assert!(
            matches!(error, trawl::crawl::StartError::Invalid(_)),
            "{spec:?}: {error}"
        );
    }
    crawler.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_crawls_with_robots_txt_and_reports_counters() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let seed = server.url("/site/2");
    let output = tokio::process::Command::from(crate::trawl_command(dir.path()))
        .args([
            "crawl",
            "--quiet",
            "--allow-private-network",
            "--max-pages",
            "3",
        ])
        .arg(&seed)
        .env("TRAWL_POLITENESS__MIN_DELAY_MS", "0")
        .kill_on_drop(true)
        .output()
        .await
        .expect("trawl runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("3 pages fetched, 0 from cache, 0 failed"),
        "{stdout}"
    );
    assert!(stdout.contains("3 queued"), "{stdout}");
    // The fixture's robots.txt has a group for trawl (Crawl-delay: 1): it was read and obeyed.
    assert_eq!(server.hits("/robots.txt"), 1);

    let bad = tokio::process::Command::from(crate::trawl_command(dir.path()))
        .args(["crawl", "--include", "no-slash", &seed])
        .output()
        .await
        .expect("trawl runs");
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("no-slash"));
}

async fn a_second_crawl_follows_links_from_cached_pages(backend: Backend) {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let crawler = Crawler::start(backend, dir.path()).await;
    let spec = CrawlSpec {
        max_pages: 6,
        max_depth: 4,
        robots: false,
        ..CrawlSpec::new(vec![server.url("/site/7")])
    };
    let first = crawler.crawl(spec.clone()).await;
    assert_eq!(first.counters.fetched, 6, "{first:?}");
    let fetches = server.hits("/site/");
    let second = crawler.crawl(spec).await;
    assert_eq!(second.status, CrawlStatus::Completed);
    assert_eq!(
        (second.counters.fetched, second.counters.cached),
        (0, 6),
        "links of cached pages are followed, and the pages are counted as from the cache: {second:?}"
    );
    assert_eq!(server.hits("/site/"), fetches, "served from the cache");
    assert_eq!(
        crate::crawl_page_urls(&crawler.context.store, &second.id)
            .await
            .len(),
        6,
        "the second crawl's export holds the pages it was served"
    );
    crawler.stop().await;
}

/// Two processes' gates on one Redis (as two workers would have) share each host's budget:
/// one request in flight at a time and the minimum delay between starts, across both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn politeness_through_redis_holds_across_workers() {
    let redis = crate::queue::RedisServer::start("noeviction");
    let config = politeness::Config {
        max_concurrent_per_host: 1,
        min_delay_ms: 200,
        ..politeness::Config::default()
    };
    let gates = [
        trawl::crawl::SharedGate::connect(&redis.url(), "polite-test", &config)
            .await
            .expect("connects"),
        trawl::crawl::SharedGate::connect(&redis.url(), "polite-test", &config)
            .await
            .expect("connects"),
    ];
    let origin = std::time::Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..6 {
        let gate = gates[n % 2].clone();
        tasks.spawn(async move {
            let turn = gate
                .acquire("site.test", Duration::from_millis(200))
                .await
                .expect("a turn");
            let start = origin.elapsed();
            tokio::time::sleep(Duration::from_millis(30)).await;
            let end = origin.elapsed();
            drop(turn);
            (start, end)
        });
    }
    let mut spans = Vec::new();
    while let Some(span) = tasks.join_next().await {
        spans.push(span.expect("task"));
    }
    spans.sort();
    for pair in spans.windows(2) {
        let ((start, end), (next_start, _)) = (pair[0], pair[1]);
        assert!(
            next_start >= end,
            "two requests in flight at once: {spans:?}"
        );
        assert!(
            next_start - start >= Duration::from_millis(180),
            "starts closer than the delay: {spans:?}"
        );
    }
    // Another host is not held up by this one.
    let other = tokio::time::timeout(
        Duration::from_millis(150),
        gates[0].acquire("other.test", Duration::from_millis(200)),
    )
    .await;
    assert!(other.is_ok(), "another host waited");
}
