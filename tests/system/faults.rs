//! Faults with real processes: two `trawl work` processes sharing a Redis queue (a
//! test-owned redis-server) and a PostgreSQL store (a fresh database), one of them SIGKILLed
//! mid-batch. Every job must end succeeded exactly once, with exactly one page. Also: a
//! paused worker, SIGTERM mid-batch, a job that kills its worker every time (poison), a
//! job whose work outlives its timeout, and crawls: a generated site crawled whole by two
//! workers, and a crawl stopped and resumed. And on one machine: a `trawl run` SIGKILLed and
//! run again, and PostgreSQL or Redis not there at start.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use testkit::FixtureServer;
use testkit::crawl_site::CrawlSite;
use trawl::queue::{Envelope, Queue};
use trawl::runner;
use trawl::store::{NewJob, Status, Store};
use trawl_workers::job::{ErrorCode, FetchJob, Job};

use crate::engines::TestDb;
use crate::queue::RedisServer;

const JOBS: u64 = 2_000;
const NAMESPACE: &str = "faults";

fn worker(data_dir: &std::path::Path, redis: &RedisServer, db: &TestDb) -> tokio::process::Child {
    worker_with(data_dir, redis, db, &[])
}

fn worker_with(
    data_dir: &std::path::Path,
    redis: &RedisServer,
    db: &TestDb,
    env: &[(&str, &str)],
) -> tokio::process::Child {
    tokio::process::Command::from(crate::trawl_command(data_dir))
        .envs(env.iter().copied())
        .args(["work", "--pools", "fetch=16", "--allow-private-network"])
        .env("REDIS_URL", redis.url())
        .env("DATABASE_URL", &db.url)
        .env("TRAWL_NAMESPACE", NAMESPACE)
        // A dead worker's jobs go to another after 2 missed heartbeats of 1 s.
        .env("TRAWL_RUNNER__HEARTBEAT_SECS", "1")
        .env("TRAWL_RUNNER__MISSED_HEARTBEATS", "2")
        .kill_on_drop(true)
        .spawn()
        .expect("trawl work starts")
}

/// The shared parts of a distributed set-up: a fixture site, a test-owned Redis, a fresh
/// PostgreSQL database, and the store and queue over them.
struct Cluster {
    server: FixtureServer,
    redis: RedisServer,
    db: TestDb,
    store: Store,
    queue: Queue,
}

impl Cluster {
    async fn start() -> Cluster {
        let server = FixtureServer::start().await.expect("fixture");
        let redis = RedisServer::start("noeviction");
        let db = TestDb::postgres().await;
        let store = db.open().await;
        let settings = runner::Config {
            heartbeat_secs: 1,
            missed_heartbeats: 2,
            ..runner::Config::default()
        }
        .queue_settings();
        let queue = Queue::connect_redis(&redis.url(), NAMESPACE, settings)
            .await
            .expect("queue connects");
        Cluster {
            server,
            redis,
            db,
            store,
            queue,
        }
    }
}

/// Records a fetch job per URL in a new batch and queues them (500 at a time). Returns the
/// batch id and the job ids.
async fn submit(
    store: &Store,
    queue: &Queue,
    urls: impl IntoIterator<Item = String>,
    max_attempts: u32,
) -> (String, Vec<String>) {
    let batch = ulid::Ulid::generate().to_string();
    let urls: Vec<String> = urls.into_iter().collect();
    let mut ids = Vec::with_capacity(urls.len());
    for chunk in urls.chunks(500) {
        let mut jobs = Vec::new();
        let mut envelopes = Vec::new();
        for url in chunk {
            let id = ulid::Ulid::generate().to_string();
            let job = Job::Fetch(FetchJob::new(url.clone()));
            jobs.push(NewJob {
                batch_id: Some(batch.clone()),
                ..NewJob::new(&id, &job, max_attempts)
            });
            envelopes.push(Envelope {
                batch_id: Some(batch.clone()),
                ..Envelope::new(id.clone(), job)
            });
            ids.push(id);
        }
        store.create_jobs(&jobs).await.expect("jobs recorded");
        queue.push(envelopes).await.expect("jobs queued");
    }
    (batch, ids)
}

async fn count(store: &Store, batch: &str, status: Status) -> u64 {
    store
        .count_by_status(Some(batch))
        .await
        .expect("counts")
        .into_iter()
        .find(|(s, _)| *s == status)
        .map_or(0, |(_, n)| n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_killed_mid_batch_loses_no_job_and_doubles_none() {
    let Cluster {
        server,
        redis,
        db,
        store,
        queue,
    } = Cluster::start().await;

    let urls = (0..JOBS).map(|n| server.url(&format!("/site/{n}")));
    let (batch, _) = submit(&store, &queue, urls, 3).await;

    let dirs = [
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    ];
    let mut first = worker(dirs[0].path(), &redis, &db);
    let mut second = worker(dirs[1].path(), &redis, &db);

    // Kill the first worker once the batch is well under way.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while count(&store, &batch, Status::Succeeded).await < JOBS / 4 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the workers made no progress"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    first.start_kill().expect("SIGKILL");
    let _ = first.wait().await;
    let at_kill = count(&store, &batch, Status::Succeeded).await;
    assert!(at_kill < JOBS, "the kill came too late to test anything");

    // The survivor takes over the dead worker's jobs and finishes the batch.
    loop {
        let ended = store
            .count_by_status(Some(&batch))
            .await
            .expect("counts")
            .into_iter()
            .filter(|(status, _)| status.is_terminal())
            .map(|(_, n)| n)
            .sum::<u64>();
        if ended == JOBS {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{ended}/{JOBS} ended: {:?}",
            store.count_by_status(Some(&batch)).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        store.count_by_status(Some(&batch)).await.expect("counts"),
        vec![(Status::Succeeded, JOBS)],
        "every job succeeded"
    );

    // Exactly one end and one page per job.
    let ended = store
        .ended_since(&batch, 0, JOBS as u32 + 10)
        .await
        .expect("reads");
    assert_eq!(ended.len() as u64, JOBS);
    let seqs: HashSet<i64> = ended.iter().map(|job| job.done_seq).collect();
    assert_eq!(seqs.len() as u64, JOBS, "one end per job");
    let mut pages = HashSet::new();
    let mut cursor = 0;
    loop {
        let batch_pages = store
            .export_pages(None, Some(&batch), None, cursor, 500)
            .await
            .expect("reads");
        let Some((_, last)) = batch_pages.last() else {
            break;
        };
        cursor = *last;
        for (page, _) in batch_pages {
            assert!(
                pages.insert(page.id.clone()),
                "page {} stored twice",
                page.id
            );
        }
    }
    assert_eq!(pages.len() as u64, JOBS, "one page per job");
    let urls: HashSet<String> = ended.iter().map(|job| job.url.clone()).collect();
    assert_eq!(urls.len() as u64, JOBS);

    second.start_kill().expect("SIGKILL");
    let _ = second.wait().await;
}

/// Sends `signal` (`STOP`, `CONT`) to a child process with kill(1).
fn signal(child: &tokio::process::Child, signal: &str) {
    let pid = child.id().expect("the worker runs");
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("kill runs");
    assert!(status.success(), "kill -{signal} {pid}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_worker_resumed_after_recovery_cannot_commit_late() {
    let Cluster {
        server,
        redis,
        db,
        store,
        queue,
    } = Cluster::start().await;
    // One job whose page takes 3 s to come: the first worker is paused while fetching it.
    let (batch, ids) = submit(&store, &queue, [server.url("/slow/article/1?ms=3000")], 5).await;
    let id = ids[0].clone();

    let dirs = [
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    ];
    let paused = worker(dirs[0].path(), &redis, &db);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while store
        .job(&id)
        .await
        .expect("reads")
        .expect("exists")
        .attempts
        < 1
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the job never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal(&paused, "STOP");
    // The other worker takes the job over once the paused one missed its heartbeats.
    let mut other = worker(dirs[1].path(), &redis, &db);
    loop {
        let job = store.job(&id).await.expect("reads").expect("exists");
        if job.attempts >= 2 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never taken over: {job:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The paused worker resumes while the other is still fetching (3 s): its page arrived
    // meanwhile, so it commits at once, and is refused: it no longer holds the job.
    signal(&paused, "CONT");
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let meanwhile = store.job(&id).await.expect("reads").expect("exists");
    assert_eq!(
        meanwhile.status,
        Status::Running,
        "the late commit of the paused worker was refused: {meanwhile:?}"
    );
    let ended = loop {
        let job = store.job(&id).await.expect("reads").expect("exists");
        if job.status.is_terminal() {
            break job;
        }
        assert!(tokio::time::Instant::now() < deadline, "{job:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(ended.status, Status::Succeeded, "{ended:?}");
    assert_eq!(ended.attempts, 2, "the second attempt ended it: {ended:?}");
    other.start_kill().expect("SIGKILL");
    let _ = other.wait().await;
    assert_eq!(
        store.count_by_status(Some(&batch)).await.expect("counts"),
        vec![(Status::Succeeded, 1)]
    );
    let mut paused = paused;
    paused.start_kill().expect("SIGKILL");
    let _ = paused.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_a_batch_exits_in_bounded_time_and_releases_the_rest() {
    let Cluster {
        server,
        redis,
        db,
        store,
        queue,
    } = Cluster::start().await;
    // 60 pages of 1 s each, 16 at a time: about 4 s of work when SIGTERM comes after 1.5 s.
    let urls = (0..60).map(|n| server.url(&format!("/slow/article/{n}?ms=1000")));
    let (batch, _) = submit(&store, &queue, urls, 3).await;

    let dirs = [
        tempfile::tempdir().expect("tempdir"),
        tempfile::tempdir().expect("tempdir"),
    ];
    let mut first = worker(dirs[0].path(), &redis, &db);
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    signal(&first, "TERM");
    let stopped = tokio::time::timeout(Duration::from_secs(40), first.wait())
        .await
        .expect("the worker exits within the shutdown grace (30 s) and a margin")
        .expect("waits");
    assert!(stopped.success(), "a graceful stop exits 0: {stopped:?}");
    let done_by_first = count(&store, &batch, Status::Succeeded).await;
    assert!(
        (1..60).contains(&done_by_first),
        "the worker was stopped mid-batch: {done_by_first} done"
    );

    // Nothing is lost: another worker finishes the rest, each job once.
    let mut second = worker(dirs[1].path(), &redis, &db);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    while count(&store, &batch, Status::Succeeded).await < 60 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "{:?}",
            store.count_by_status(Some(&batch)).await
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        store.count_by_status(Some(&batch)).await.expect("counts"),
        vec![(Status::Succeeded, 60)]
    );
    let ended = store.ended_since(&batch, 0, 100).await.expect("reads");
    let seqs: HashSet<i64> = ended.iter().map(|job| job.done_seq).collect();
    assert_eq!(seqs.len(), 60, "one end per job");
    second.start_kill().expect("SIGKILL");
    let _ = second.wait().await;
}

/// Asserts that the jobs besides the faulty one all succeeded: the pool went on.
fn assert_all_succeeded(records: &[trawl::store::JobRecord]) {
    assert!(
        records
            .iter()
            .all(|record| record.status == Status::Succeeded),
        "the other jobs completed: {:?}",
        records
            .iter()
            .map(|record| (record.status, record.attempts))
            .collect::<Vec<_>>()
    );
}

/// Stops a worker gracefully (SIGTERM) and waits for it, within its shutdown grace.
async fn stop(mut worker: tokio::process::Child) {
    signal(&worker, "TERM");
    let _ = tokio::time::timeout(Duration::from_secs(40), worker.wait()).await;
}

/// Waits until every job of the batch has ended; returns the job records.
async fn wait_ended(
    store: &Store,
    ids: &[String],
    within: Duration,
) -> Vec<trawl::store::JobRecord> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let mut records = Vec::with_capacity(ids.len());
        for id in ids {
            records.push(store.job(id).await.expect("reads").expect("recorded"));
        }
        if records
            .iter()
            .all(|record| !matches!(record.status, Status::Queued | Status::Running))
        {
            return records;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "jobs still open: {:?}",
            records
                .iter()
                .filter(|record| matches!(record.status, Status::Queued | Status::Running))
                .map(|record| (&record.url, record.status, record.attempts))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_whose_work_outlives_its_timeout_is_retried_then_dead_and_the_rest_complete() {
    let Cluster {
        server,
        redis,
        db,
        store,
        queue,
    } = Cluster::start().await;
    let urls = std::iter::once(server.url("/slow/article/1?ms=8000"))
        .chain((0..20).map(|n| server.url(&format!("/site/{n}"))));
    let (_, ids) = submit(&store, &queue, urls, 2).await;
    let dir = tempfile::tempdir().expect("tempdir");
    let worker = worker_with(
        dir.path(),
        &redis,
        &db,
        &[
            ("TRAWL_RUNNER__JOB_TIMEOUT_SECS", "1"),
            ("TRAWL_RUNNER__RETRY_BASE_MS", "100"),
        ],
    );
    let records = wait_ended(&store, &ids, Duration::from_secs(60)).await;
    let slow = &records[0];
    assert_eq!(slow.status, Status::Dead, "{slow:?}");
    assert_eq!(slow.attempts, 2);
    let error = slow.error.as_ref().expect("an error");
    assert_eq!(error.code, ErrorCode::Timeout);
    assert!(
        error.message.contains("job_timeout_secs"),
        "{}",
        error.message
    );
    assert_all_succeeded(&records[1..]);
    stop(worker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_kills_its_worker_every_time_ends_dead_and_the_rest_complete() {
    let Cluster {
        server,
        redis,
        db,
        store,
        queue,
    } = Cluster::start().await;
    // The poison job: whichever worker runs it is killed (as a crash in its handler would).
    // The other jobs may be in flight at a kill too: they have attempts to spare.
    let (_, poison_ids) = submit(&store, &queue, [server.url("/slow/article/2?ms=60000")], 2).await;
    let (_, other_ids) = submit(
        &store,
        &queue,
        (0..20).map(|n| server.url(&format!("/site/{n}"))),
        5,
    )
    .await;
    let poison = poison_ids[0].clone();
    let ids: Vec<String> = poison_ids.into_iter().chain(other_ids).collect();
    let mut kills = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut worker = worker(dir.path(), &redis, &db);
        // Run until the poison job is running on this worker, or has ended.
        let ended = loop {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the poison job never ended ({kills} kills)"
            );
            let record = store.job(&poison).await.expect("reads").expect("recorded");
            match record.status {
                // Attempt 3 of 2 is not run: the job ends dead at once.
                Status::Running if record.attempts > kills && record.attempts <= 2 => break false,
                Status::Queued | Status::Running => {}
                _ => break true,
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if ended {
            let records = wait_ended(&store, &ids, Duration::from_secs(60)).await;
            let record = &records[0];
            assert_eq!(record.status, Status::Dead, "{record:?}");
            assert_eq!(
                record.error.as_ref().map(|error| error.code),
                Some(ErrorCode::WorkerLost)
            );
            assert_eq!(kills, 2, "killed in each of its 2 attempts");
            assert_all_succeeded(&records[1..]);
            stop(worker).await;
            return;
        }
        signal(&worker, "KILL");
        let _ = worker.wait().await;
        kills += 1;
    }
}

/// `trawl crawl --no-pools --quiet --allow-private-network ARGS…` on the cluster: it queues
/// the crawl for the workers and follows it (its stdout is piped).
fn crawl_client(
    data_dir: &std::path::Path,
    redis: &RedisServer,
    db: &TestDb,
    env: &[(&str, &str)],
    args: &[String],
) -> tokio::process::Child {
    tokio::process::Command::from(crate::trawl_command(data_dir))
        .envs(env.iter().copied())
        .args(["crawl", "--no-pools", "--quiet", "--allow-private-network"])
        .args(args)
        .env("REDIS_URL", redis.url())
        .env("DATABASE_URL", &db.url)
        .env("TRAWL_NAMESPACE", NAMESPACE)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("trawl crawl starts")
}

/// A crawl queued by `trawl crawl --no-pools`, worked by a `trawl work` that is stopped
/// (SIGTERM) mid-crawl and then by another: the crawl completes, robots.txt disallows,
/// redirects and dead links included, and no page is requested twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crawl_interrupted_and_resumed_fetches_nothing_twice() {
    let Cluster {
        server, redis, db, ..
    } = Cluster::start().await;
    server.set_robots(200, "User-agent: *\nDisallow: /site/*3\n");
    let politeness = [
        ("TRAWL_POLITENESS__MIN_DELAY_MS", "15"),
        ("TRAWL_POLITENESS__MAX_CONCURRENT_PER_HOST", "4"),
    ];
    let dirs: [tempfile::TempDir; 3] =
        std::array::from_fn(|_| tempfile::tempdir().expect("tempdir"));
    let crawl = crawl_client(
        dirs[0].path(),
        &redis,
        &db,
        &politeness,
        &[
            "--max-depth".to_owned(),
            "8".to_owned(),
            "--max-pages".to_owned(),
            "150".to_owned(),
            server.url("/site/1"),
            server.url("/redirect?to=/article/2&code=301"),
            server.url("/status/404"),
        ],
    );

    let first = worker_with(dirs[1].path(), &redis, &db, &politeness);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while server.hits("/site/") < 40 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the crawl does not progress"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    signal(&first, "TERM");
    let mut first = first;
    let stopped = tokio::time::timeout(Duration::from_secs(40), first.wait())
        .await
        .expect("the worker stops in bounded time")
        .expect("waits");
    assert!(stopped.success(), "{stopped:?}");
    let by_first = server.hits("/site/");
    assert!(by_first < 120, "stopped mid-crawl: {by_first} pages");

    let second = worker_with(dirs[2].path(), &redis, &db, &politeness);
    let output = tokio::time::timeout(Duration::from_secs(120), crawl.wait_with_output())
        .await
        .expect("the crawl completes")
        .expect("trawl crawl runs");
    stop(second).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(stdout.contains("150 queued"), "{stdout}");
    assert!(stdout.contains("1 failed"), "the dead link: {stdout}");

    let mut requested = std::collections::HashMap::<String, usize>::new();
    for request in server.requests() {
        *requested.entry(request.path_and_query.clone()).or_default() += 1;
    }
    let twice: Vec<_> = requested
        .iter()
        .filter(|(path, n)| **n > 1 && path.as_str() != "/robots.txt")
        .collect();
    assert!(twice.is_empty(), "requested twice: {twice:?}");
    let disallowed: Vec<_> = requested
        .keys()
        .filter(|path| path.starts_with("/site/") && path.ends_with('3'))
        .collect();
    assert!(
        disallowed.is_empty(),
        "robots.txt disallowed {disallowed:?}"
    );
    assert_eq!(
        requested.get("/article/2"),
        Some(&1),
        "the redirect was followed"
    );
    assert_eq!(requested.get("/status/404"), Some(&1));
    // robots.txt: once by the crawl's seeding, once by each worker.
    assert!(requested.get("/robots.txt").copied().unwrap_or(0) <= 3);
}

/// A generated site ([`CrawlSite`]) served on a loopback port: its files, its `/old/{r}`
/// redirects (301 to `/p/{r}`), 404 for the rest; every request counted by path.
struct SiteServer {
    site: CrawlSite,
    requests: Arc<Mutex<HashMap<String, usize>>>,
    task: tokio::task::JoinHandle<()>,
}

impl SiteServer {
    async fn start(pages: u64) -> SiteServer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binds");
        let origin = format!("http://{}", listener.local_addr().expect("address"));
        let site = CrawlSite::new(pages, &origin);
        let requests = Arc::new(Mutex::new(HashMap::<String, usize>::new()));
        let served = site.clone();
        let counted = requests.clone();
        let redirects = site.expected().redirects;
        let app = axum::Router::new().fallback(move |uri: axum::http::Uri| {
            let site = served.clone();
            let counted = counted.clone();
            async move {
                use axum::http::{StatusCode, header};
                use axum::response::IntoResponse as _;
                let path = uri.path().to_owned();
                *counted
                    .lock()
                    .expect("lock")
                    .entry(path.clone())
                    .or_default() += 1;
                if let Some(r) = path
                    .strip_prefix("/old/")
                    .and_then(|r| r.parse::<u64>().ok())
                    .filter(|r| *r < redirects)
                {
                    return (
                        StatusCode::MOVED_PERMANENTLY,
                        [(header::LOCATION, format!("/p/{r}"))],
                    )
                        .into_response();
                }
                let content_type = if path == "/robots.txt" {
                    "text/plain"
                } else if path.ends_with(".gz") {
                    "application/gzip"
                } else if path.ends_with(".xml") {
                    "application/xml"
                } else {
                    "text/html"
                };
                match site.file(&path) {
                    Some(body) => ([(header::CONTENT_TYPE, content_type)], body).into_response(),
                    None => StatusCode::NOT_FOUND.into_response(),
                }
            }
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        SiteServer {
            site,
            requests,
            task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.site.origin())
    }

    fn requests(&self) -> HashMap<String, usize> {
        self.requests.lock().expect("lock").clone()
    }
}

impl Drop for SiteServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Two workers crawl a generated site (sitemap index with a gzipped part, canonical
/// duplicates, a robots.txt-disallowed subtree, redirects, dead links): the pages stored are
/// exactly its unique documents, the counters say why every other URL was left, and no page
/// is requested twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_distributed_crawl_stores_exactly_the_sites_unique_documents() {
    let Cluster {
        redis, db, store, ..
    } = Cluster::start().await;
    let server = SiteServer::start(300).await;
    let expected = server.site.expected();
    let politeness = [
        ("TRAWL_POLITENESS__MIN_DELAY_MS", "0"),
        ("TRAWL_POLITENESS__MAX_CONCURRENT_PER_HOST", "32"),
    ];
    let dirs: [tempfile::TempDir; 3] =
        std::array::from_fn(|_| tempfile::tempdir().expect("tempdir"));
    let crawl = crawl_client(
        dirs[0].path(),
        &redis,
        &db,
        &politeness,
        &[
            "--sitemap".to_owned(),
            "--max-pages".to_owned(),
            "100000".to_owned(),
            "--max-depth".to_owned(),
            expected.max_depth.to_string(),
            server.url("/p/0"),
        ],
    );
    let workers = [
        worker_with(dirs[1].path(), &redis, &db, &politeness),
        worker_with(dirs[2].path(), &redis, &db, &politeness),
    ];
    let output = tokio::time::timeout(Duration::from_secs(240), crawl.wait_with_output())
        .await
        .expect("the crawl completes")
        .expect("trawl crawl runs");
    for worker in workers {
        stop(worker).await;
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let id = stdout
        .lines()
        .find_map(|line| line.strip_prefix("done: crawl "))
        .and_then(|rest| rest.split(':').next())
        .expect("the summary names the crawl");
    let record = store.crawl(id).await.expect("reads").expect("exists");
    let c = record.counters;
    assert_eq!(
        (c.fetched, c.failed, c.skipped_duplicate, c.skipped_robots),
        (
            expected.unique_documents,
            expected.dead_links,
            expected.duplicates,
            expected.private_pages
        ),
        "{c:?}"
    );

    let mut stored = std::collections::BTreeSet::new();
    for url in crate::crawl_page_urls(&store, id).await {
        let path = url
            .strip_prefix(server.site.origin())
            .expect("a page of the site")
            .to_owned();
        assert!(stored.insert(path.clone()), "{path} stored twice");
    }
    assert_eq!(stored, server.site.unique_paths());

    let requests = server.requests();
    assert!(
        !requests.keys().any(|path| path.starts_with("/private/")),
        "robots.txt disallowed /private/"
    );
    let twice: Vec<_> = requests
        .iter()
        .filter(|(path, n)| **n > 1 && *path != "/robots.txt" && !path.starts_with("/sitemap"))
        .collect();
    assert!(twice.is_empty(), "requested twice: {twice:?}");
    for dead in 0..expected.dead_links {
        assert_eq!(
            requests.get(&format!("/gone/{dead}")),
            Some(&1),
            "dead link {dead}"
        );
    }
}

/// `trawl run` on `data_dir` with an orphan timeout of one missed heartbeat of 10 s (longer
/// than a run here takes, so only a recovery at start can take a dead run's jobs back), 4
/// fetches at once, writing `out`.
fn run_command(
    data_dir: &std::path::Path,
    out: &std::path::Path,
    urls: &[String],
) -> tokio::process::Command {
    let mut command = tokio::process::Command::from(crate::trawl_command(data_dir));
    command
        .args([
            "run",
            "--allow-private-network",
            "--quiet",
            "-c",
            "4",
            "--out",
        ])
        .arg(out)
        .args(urls)
        .env("TRAWL_RUNNER__HEARTBEAT_SECS", "10")
        .env("TRAWL_RUNNER__MISSED_HEARTBEATS", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    command
}

async fn count_all(store: &Store, status: Status) -> u64 {
    store
        .count_by_status(None)
        .await
        .expect("counts")
        .into_iter()
        .find(|(s, _)| *s == status)
        .map_or(0, |(_, n)| n)
}

/// A `trawl run` killed (SIGKILL) while it holds jobs, then run again on the same URLs once
/// its worker is past the orphan timeout: the new run takes the dead run's jobs back as it
/// starts (apalis would only at its first heartbeat, which this short run ends before), so no
/// job stays `running`; and the new run reports every URL exactly once, succeeded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_run_run_again_finishes_every_url_once_and_leaves_no_job_held() {
    let site = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let urls: Vec<String> = (1..=8)
        .map(|n| site.url(&format!("/slow/article/{n}?ms=1500")))
        .collect();
    let mut first = run_command(dir.path(), &dir.path().join("first"), &urls)
        .spawn()
        .expect("trawl run starts");
    // Kill it once it has finished some jobs and holds others.
    let store_path = dir.path().join("trawl.sqlite");
    let mut held = 0;
    for _ in 0..200 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if !store_path.exists() {
            continue;
        }
        let store = Store::open(&store_path).await.expect("store opens");
        let (done, running) = (
            count_all(&store, Status::Succeeded).await,
            count_all(&store, Status::Running).await,
        );
        store.close().await;
        if done >= 1 && running >= 1 {
            held = running;
            break;
        }
    }
    assert!(held >= 1, "the first run never held a running job");
    first.start_kill().expect("SIGKILL sent");
    first.wait().await.expect("killed");
    // Past the orphan timeout (10 s) of the dead run's worker.
    tokio::time::sleep(Duration::from_secs(11)).await;

    let out = dir.path().join("second");
    let second = tokio::time::timeout(
        Duration::from_secs(60),
        run_command(dir.path(), &out, &urls).output(),
    )
    .await
    .expect("the second run ends")
    .expect("trawl runs");
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(out.join("pages.jsonl"))
        .expect("pages.jsonl")
        .lines()
        .map(|line| serde_json::from_str(line).expect("json"))
        .collect();
    let mut reported: Vec<&str> = lines
        .iter()
        .map(|line| line["url"].as_str().expect("a url"))
        .collect();
    reported.sort_unstable();
    let mut expected: Vec<&str> = urls.iter().map(String::as_str).collect();
    expected.sort_unstable();
    assert_eq!(reported, expected, "each URL reported once");
    assert!(
        lines.iter().all(|line| line.get("error").is_none()),
        "{lines:?}"
    );

    let store = Store::open(&store_path).await.expect("store opens");
    assert_eq!(
        count_all(&store, Status::Running).await,
        0,
        "a job is still held"
    );
    assert_eq!(
        count_all(&store, Status::Queued).await,
        0,
        "a job is still queued"
    );
    assert_eq!(
        count_all(&store, Status::Succeeded).await,
        2 * urls.len() as u64,
        "every job of both runs succeeded"
    );
}

/// The first line of stderr, and how many lines there were.
fn one_message(output: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|line| !line.trim().is_empty())
        .collect();
    assert_eq!(lines.len(), 1, "one message expected:\n{stderr}");
    stderr
}

/// PostgreSQL not there (a closed port) or not answering (a port that accepts and says
/// nothing): the command fails within a few seconds, with one message naming the redacted
/// URL and what to check.
#[tokio::test]
async fn a_dead_postgresql_fails_fast_with_one_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        listener.local_addr().expect("address").port()
    };
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
    let silent_port = silent.local_addr().expect("address").port();
    for (port, timeout, limit) in [(closed, "5", 4), (silent_port, "2", 5)] {
        let url = format!("postgres://trawl:s3cret@127.0.0.1:{port}/trawl");
        let started = std::time::Instant::now();
        let output = tokio::process::Command::from(crate::trawl_command(dir.path()))
            .args(["run", "http://a.test/"])
            .env("TRAWL_DATABASE_URL", &url)
            .env("TRAWL_CONNECT_TIMEOUT_SECS", timeout)
            .kill_on_drop(true)
            .output()
            .await
            .expect("trawl runs");
        let elapsed = started.elapsed();
        let message = one_message(&output);
        assert_eq!(output.status.code(), Some(2), "{message}");
        assert!(
            elapsed < Duration::from_secs(limit),
            "failed after {elapsed:?}: {message}"
        );
        assert!(
            message.contains(&format!(
                "cannot reach PostgreSQL at database_url = postgres://trawl:***@127.0.0.1:{port}/trawl"
            )),
            "{message}"
        );
        assert!(
            message.contains("check that PostgreSQL is running"),
            "{message}"
        );
        assert!(!message.contains("s3cret"), "{message}");
    }
    drop(silent);
}

/// Redis not there: the command fails within a few seconds with one message, the refusal
/// said once.
#[tokio::test]
async fn a_dead_redis_fails_fast_with_one_message() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("port");
        listener.local_addr().expect("address").port()
    };
    let started = std::time::Instant::now();
    let output = tokio::process::Command::from(crate::trawl_command(dir.path()))
        .args(["run", "http://a.test/"])
        .env(
            "TRAWL_REDIS_URL",
            format!("redis://:s3cret@127.0.0.1:{port}/"),
        )
        .kill_on_drop(true)
        .output()
        .await
        .expect("trawl runs");
    let elapsed = started.elapsed();
    let message = one_message(&output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(
        elapsed < Duration::from_secs(4),
        "failed after {elapsed:?}: {message}"
    );
    assert!(
        message.contains(&format!(
            "cannot reach Redis at redis_url = redis://:***@127.0.0.1:{port}/"
        )),
        "{message}"
    );
    assert_eq!(message.matches("refused").count(), 1, "{message}");
    assert!(!message.contains("s3cret"), "{message}");
}
