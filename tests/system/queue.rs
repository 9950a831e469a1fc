//! The queue on both engines, through the real pool: SQLite (apalis-sqlite in a temporary
//! file) and Redis (apalis-redis against a `redis-server` this test starts on its own loopback
//! port and kills at the end). The same bodies run on each engine; Redis-only cases cover the
//! eviction-policy refusal, more than 8,000 due tasks at once, and a Redis restart mid-run.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use redis::AsyncCommands as _;
use testkit::FixtureServer;
use trawl::app::{App, Deps};
use trawl::config::{Config, Secret};
use trawl::queue::{Envelope, Error, Queue};
use trawl::runner;
use trawl::store::Status;
use trawl_workers::job::{FetchJob, Job};

use crate::{enqueue, spawn_app, test_config};

/// A `redis-server` child on a free loopback port, killed when dropped.
pub(crate) struct RedisServer {
    port: u16,
    args: Vec<String>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server keeping no data, with the given eviction policy.
    pub(crate) fn start(policy: &str) -> RedisServer {
        RedisServer::start_with(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxmemory-policy",
            policy,
        ])
    }

    /// Starts a server whose data survives a restart: an append-only file in `dir`, fsynced
    /// on every write.
    fn start_durable(dir: &Path) -> RedisServer {
        RedisServer::start_with(&[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
            "--dir",
            &dir.display().to_string(),
            "--maxmemory-policy",
            "noeviction",
        ])
    }

    fn start_with(args: &[&str]) -> RedisServer {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|listener| listener.local_addr())
            .expect("a free port")
            .port();
        let mut server = RedisServer {
            port,
            args: args.iter().map(|arg| (*arg).to_owned()).collect(),
            child: None,
        };
        server.spawn();
        server
    }

    fn spawn(&mut self) {
        let binary = ["/usr/bin/redis-server", "redis-server"]
            .into_iter()
            .find(|candidate| !candidate.starts_with('/') || Path::new(candidate).exists())
            .map(PathBuf::from)
            .expect("a redis-server binary");
        let child = Command::new(binary)
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--bind")
            .arg("127.0.0.1")
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server starts (apt-get install redis-server)");
        self.child = Some(child);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "redis-server did not listen on {}",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// Kills the server (SIGKILL: no shutdown save) and starts it again on the same port.
    fn restart(&mut self) {
        self.kill();
        std::thread::sleep(Duration::from_millis(300));
        self.spawn();
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}

#[derive(Debug, Clone, Copy)]
enum Engine {
    Sqlite,
    Redis,
}

/// A test application whose queue is on `engine`, under a random namespace, and the Redis
/// server it needs (the store is SQLite in `dir` either way).
async fn open_app(
    engine: Engine,
    dir: &Path,
    runner: runner::Config,
) -> (App, Option<RedisServer>) {
    let namespace = format!("test-{}", ulid::Ulid::generate().to_string().to_lowercase());
    let redis = match engine {
        Engine::Sqlite => None,
        Engine::Redis => Some(RedisServer::start("noeviction")),
    };
    app_on_redis(redis, dir, &namespace, runner).await
}

/// A test application with its queue on `redis` (when given) under `namespace`, else on
/// SQLite in `dir`.
async fn app_on_redis(
    redis: Option<RedisServer>,
    dir: &Path,
    namespace: &str,
    runner: runner::Config,
) -> (App, Option<RedisServer>) {
    let config = Config {
        namespace: namespace.to_owned(),
        runner,
        redis_url: redis.as_ref().map(|server| Secret::new(server.url())),
        ..test_config(dir)
    };
    (spawn_app(&config).await, redis)
}

fn pool_config() -> runner::Config {
    runner::Config {
        concurrency: 8,
        retry_base_ms: 10,
        retry_max_ms: 50,
        heartbeat_secs: 1,
        missed_heartbeats: 2,
        ..runner::Config::default()
    }
}

/// An application running its pools.
struct Pool {
    app: App,
}

impl Pool {
    fn start(mut app: App) -> Pool {
        app.start_pools();
        Pool { app }
    }

    async fn stop(mut self) {
        let teardown = self.app.stop_pools(Duration::from_secs(30)).await;
        assert!(
            teardown.problems.is_empty(),
            "the pool stops cleanly and in time: {:?}",
            teardown.problems
        );
    }
}

/// Waits until `n` jobs of the test batch succeeded (and nothing else is recorded).
async fn wait_for_succeeded(context: &Deps, n: u64, within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let counts = context
            .store
            .count_by_status(Some("test"))
            .await
            .expect("counts");
        if counts == vec![(Status::Succeeded, n)] {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not {n} succeeded: {counts:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn succeeded(context: &Deps) -> u64 {
    context
        .store
        .count_by_status(Some("test"))
        .await
        .expect("counts")
        .into_iter()
        .find(|(status, _)| *status == Status::Succeeded)
        .map_or(0, |(_, n)| n)
}

async fn the_pool_drains_the_queue(engine: Engine) {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = pool_config();
    let (app, _redis) = open_app(engine, dir.path(), config).await;
    let context = app.deps().clone();
    let queue = context.queue.clone();
    let mut envelopes = Vec::new();
    for n in 0..40 {
        envelopes.push(enqueue(&context, FetchJob::new(server.url(&format!("/site/{n}")))).await);
    }
    queue.push(envelopes).await.expect("pushed");

    let pool = Pool::start(app);
    wait_for_succeeded(&context, 40, Duration::from_secs(60)).await;
    pool.stop().await;
    let requests = server.requests();
    for n in 0..40 {
        let path = format!("/site/{n}");
        let hits = requests
            .iter()
            .filter(|request| request.path_and_query == path)
            .count();
        assert_eq!(hits, 1, "{path} fetched once on {engine:?}");
    }
    queue.close().await;
}

async fn a_job_queued_twice_records_one_result(engine: Engine) {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let config = pool_config();
    let (app, _redis) = open_app(engine, dir.path(), config).await;
    let context = app.deps().clone();
    let queue = context.queue.clone();
    let envelope = enqueue(
        &context,
        FetchJob {
            cache_ttl: Some(0),
            ..FetchJob::new(server.url("/article/2"))
        },
    )
    .await;
    // Two deliveries of one job (two queue tasks with the same job id), as after a worker
    // presumed dead comes back.
    queue
        .push(vec![envelope.clone(), envelope.clone(), envelope.clone()])
        .await
        .expect("pushed");
    let pool = Pool::start(app);
    wait_for_succeeded(&context, 1, Duration::from_secs(60)).await;
    // Let every delivery run before looking at the record.
    tokio::time::sleep(Duration::from_secs(1)).await;
    pool.stop().await;
    let job = context
        .store
        .job(&envelope.id)
        .await
        .expect("reads")
        .expect("exists");
    assert_eq!(job.status, Status::Succeeded, "{engine:?}");
    assert_eq!(job.done_seq, Some(1), "{engine:?}: one result recorded");
    queue.close().await;
}

/// apalis-sqlite acknowledges a batch of tasks with one UPDATE joining the task ids of a JSON
/// array on `Jobs.id` and `Jobs.lock_by`. Planned from an index on `lock_by`, SQLite walks every
/// row the worker holds and reads the whole array again for each (the queue spent half its CPU
/// there); the queue file trawl opens must have it planned from the array, each task found by
/// its id. The statement's shape is apalis' `queries/task/ack.sql`.
#[tokio::test]
async fn sqlite_acknowledgements_find_tasks_by_id() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("queue.sqlite");
    let url = format!("sqlite://{}", path.display());
    let open = || async {
        let queue = Queue::open(&path, "plan", runner::Config::default().queue_settings())
            .await
            .expect("queue opens");
        queue.close().await;
    };
    open().await;
    let pool = sqlx::SqlitePool::connect(&url)
        .await
        .expect("queue file opens");
    // The index back, as a later apalis migration could create it: the next open drops it again.
    sqlx::query("CREATE INDEX LIdx ON Jobs (lock_by)")
        .execute(&pool)
        .await
        .expect("index created");
    pool.close().await;
    open().await;
    // A new connection: EXPLAIN is answered from the connection's schema as it last read it.
    let pool = sqlx::SqlitePool::connect(&url)
        .await
        .expect("queue file opens");
    let rows: Vec<(i64, i64, i64, String)> = sqlx::query_as(
        "EXPLAIN QUERY PLAN
         WITH j AS (
             SELECT value ->> 'task_id' AS task_id, value ->> 'attempt' AS attempt,
                    value ->> 'result' AS result, value ->> 'status' AS status
             FROM json_each(?1))
         UPDATE Jobs SET status = j.status, attempts = j.attempt, last_result = j.result,
                         done_at = strftime('%s', 'now')
         FROM j WHERE Jobs.id = j.task_id AND Jobs.lock_by = ?2",
    )
    .bind("[]")
    .bind("worker")
    .fetch_all(&pool)
    .await
    .expect("the statement plans");
    let plan: Vec<String> = rows.into_iter().map(|(_, _, _, detail)| detail).collect();
    pool.close().await;
    assert!(!plan.is_empty(), "a plan");
    let jobs_step = plan
        .iter()
        .find(|step| step.contains("Jobs"))
        .unwrap_or_else(|| panic!("a step on Jobs in {plan:?}"));
    assert!(
        jobs_step.contains("(id=?)") && !jobs_step.contains("lock_by"),
        "each task looked up by its id, not by the worker's rows: {plan:?}"
    );
}

/// trawl pushes tasks into apalis' SQLite table itself, many rows per statement (apalis
/// inserts one row per statement while holding the file's write lock): the rows must be the
/// ones apalis writes, each job once across statements and across pushes.
#[tokio::test]
async fn sqlite_pushes_write_the_rows_apalis_writes() {
    use apalis::prelude::{TaskBuilder, TaskSink as _};

    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("queue.sqlite");
    let queue = Queue::open(&path, "rows", runner::Config::default().queue_settings())
        .await
        .expect("queue opens");
    let envelope = |n: usize| {
        Envelope::new(
            format!("job-{n:04}"),
            Job::Fetch(FetchJob::new(format!("http://127.0.0.1:9/page/{n}"))),
        )
    };
    // More than one statement's worth, one job twice within the push.
    let mut first: Vec<Envelope> = (0..250).map(envelope).collect();
    first.push(envelope(7));
    queue.push(first).await.expect("pushed");
    // Again, with one new job: only that one is added.
    queue
        .push((0..251).map(envelope).collect())
        .await
        .expect("pushed again");
    queue.close().await;

    let pool = sqlx::SqlitePool::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("queue file opens");
    let (rows, keys): (i64, i64) =
        sqlx::query_as("SELECT COUNT(*), COUNT(DISTINCT idempotency_key) FROM Jobs")
            .fetch_one(&pool)
            .await
            .expect("counted");
    assert_eq!((rows, keys), (251, 251), "each job once");
    // The same job pushed by apalis itself, into a queue of its own.
    let mut storage = apalis_sqlite::SqliteStorage::<Envelope>::new(&pool)
        .with_config(apalis_sqlite::Config::default().queue("by-apalis"));
    let job = envelope(3);
    storage
        .push_all(futures_util::stream::iter([TaskBuilder::new(job.clone())
            .idempotency_key(job.id.clone())
            .build()]))
        .await
        .expect("apalis pushes");
    type Row = (
        Vec<u8>,
        String,
        i64,
        i64,
        i64,
        Option<String>,
        Option<String>,
        Option<i64>,
        Option<String>,
        Option<i64>,
        i64,
    );
    let read = |by_apalis: bool| {
        let pool = pool.clone();
        async move {
            sqlx::query_as::<_, Row>(
                "SELECT job, status, attempts, max_attempts, priority, metadata, last_result,
                        lock_at, lock_by, done_at, run_at
                 FROM Jobs WHERE idempotency_key = 'job-0003' AND (job_type = 'by-apalis') = ?",
            )
            .bind(by_apalis)
            .fetch_one(&pool)
            .await
            .expect("the row")
        }
    };
    let (mut ours, mut theirs) = (read(false).await, read(true).await);
    let ran = (ours.10, theirs.10);
    assert!(
        (ran.0 - ran.1).abs() <= 60,
        "both due now (run_at {} and {})",
        ran.0,
        ran.1
    );
    (ours.10, theirs.10) = (0, 0);
    assert_eq!(ours, theirs, "trawl's row is apalis' row");
    assert_eq!(ours.1, "Pending");
    pool.close().await;
}

#[tokio::test]
async fn the_pool_drains_the_queue_on_sqlite() {
    the_pool_drains_the_queue(Engine::Sqlite).await;
}

#[tokio::test]
async fn the_pool_drains_the_queue_on_redis() {
    the_pool_drains_the_queue(Engine::Redis).await;
}

#[tokio::test]
async fn a_job_queued_twice_records_one_result_on_sqlite() {
    a_job_queued_twice_records_one_result(Engine::Sqlite).await;
}

#[tokio::test]
async fn a_job_queued_twice_records_one_result_on_redis() {
    a_job_queued_twice_records_one_result(Engine::Redis).await;
}

#[tokio::test]
async fn redis_that_may_evict_keys_is_refused() {
    let server = RedisServer::start("allkeys-lru");
    let error = Queue::connect_redis(&server.url(), "test", pool_config().queue_settings())
        .await
        .expect_err("an evicting redis is refused");
    assert!(
        matches!(&error, Error::EvictionPolicy { policy } if policy == "allkeys-lru"),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("allkeys-lru") && message.contains("noeviction"),
        "{message}"
    );
}

/// apalis-redis moves every due task in one Lua `unpack`, which fails from about 8,000 on and
/// wedges the queue: the queue moves them 1,000 at a time. The tasks here have no job record,
/// so each delivery ends at once; the queue must end empty, its ended tasks' data deleted
/// (apalis-redis sets no expiry on them).
#[tokio::test]
async fn more_than_8000_due_tasks_drain_on_redis_and_leave_no_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = runner::Config {
        concurrency: 32,
        ..pool_config()
    };
    let namespace = "many";
    let (app, server) = app_on_redis(
        Some(RedisServer::start("noeviction")),
        dir.path(),
        namespace,
        config,
    )
    .await;
    let server = server.expect("the server");
    let context = app.deps().clone();
    let queue = context.queue.clone();
    let envelopes: Vec<Envelope> = (0..8_500)
        .map(|n| {
            Envelope::new(
                ulid::Ulid::generate().to_string(),
                Job::Fetch(FetchJob::new(format!("http://127.0.0.1:9/{n}"))),
            )
        })
        .collect();
    queue.push(envelopes).await.expect("pushed");
    let client = redis::Client::open(server.url()).expect("client");
    let mut connection = client
        .get_multiplexed_async_connection()
        .await
        .expect("connects");
    let prefix = trawl::queue::fetch_queue_name(namespace);
    let scheduled: u64 = connection
        .zcard(format!("{prefix}:scheduled"))
        .await
        .expect("zcard");
    assert_eq!(scheduled, 8_500, "every push lands in the scheduled set");

    let pool = Pool::start(app);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    loop {
        let scheduled: u64 = connection
            .zcard(format!("{prefix}:scheduled"))
            .await
            .expect("zcard");
        let active: u64 = connection
            .llen(format!("{prefix}:active"))
            .await
            .expect("llen");
        let data: u64 = connection
            .hlen(format!("{prefix}:data"))
            .await
            .expect("hlen");
        if scheduled == 0 && active == 0 && data == 0 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "queue not drained: {scheduled} scheduled, {active} active, {data} task data"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    pool.stop().await;
    let meta_keys: Vec<String> = connection
        .keys(format!("{prefix}:meta:*"))
        .await
        .expect("keys");
    assert!(
        meta_keys.is_empty(),
        "{} task metadata keys left",
        meta_keys.len()
    );
}

/// Redis killed and restarted on the same port mid-run: the workers reconnect (a worker that
/// stopped on the error is started again) and every job completes once. The server keeps an
/// append-only file fsynced on every write, so the jobs queued before the restart survive it
/// (a server with `--save "" --appendonly no` would come back empty and lose them).
#[tokio::test]
async fn redis_restarted_mid_run_every_job_completes() {
    let site = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let redis_dir = tempfile::tempdir().expect("tempdir");
    let config = runner::Config {
        concurrency: 2,
        ..pool_config()
    };
    let (app, server) = app_on_redis(
        Some(RedisServer::start_durable(redis_dir.path())),
        dir.path(),
        "restart",
        config,
    )
    .await;
    let mut server = server.expect("the server");
    let context = app.deps().clone();
    let queue = context.queue.clone();
    let mut first = Vec::new();
    for n in 0..100 {
        first.push(enqueue(&context, FetchJob::new(site.url(&format!("/site/{n}")))).await);
    }
    queue.push(first).await.expect("pushed");
    let pool = Pool::start(app);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while succeeded(&context).await < 10 {
        assert!(tokio::time::Instant::now() < deadline, "pool did not start");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    server.restart();

    let mut second = Vec::new();
    for n in 100..150 {
        second.push(enqueue(&context, FetchJob::new(site.url(&format!("/site/{n}")))).await);
    }
    // The connection manager reconnects in the background; the first pushes may still see
    // the old connection fail.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while let Err(error) = queue.push(second.clone()).await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "push after restart: {error}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_for_succeeded(&context, 150, Duration::from_secs(120)).await;
    pool.stop().await;
    let requests = site.requests();
    for n in 100..150 {
        let path = format!("/site/{n}");
        let hits = requests
            .iter()
            .filter(|request| request.path_and_query == path)
            .count();
        assert_eq!(hits, 1, "{path} fetched once");
    }
}
