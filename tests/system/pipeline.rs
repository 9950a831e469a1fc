//! The runner with real parts: jobs fetched from the fixture server, stored, served from the
//! cache, retried, failed, dead, and delivered twice without doubling. The whole pool through
//! a queue is in `queue::` (on SQLite and Redis).

use testkit::FixtureServer;
use trawl::app::Deps;
use trawl::runner;
use trawl::store::{Attempt, Status};
use trawl_workers::job::{ErrorCode, FetchJob, FetchResult};

use crate::{context_in, enqueue};

async fn result_of(context: &Deps, id: &str) -> FetchResult {
    let job = context.store.job(id).await.expect("reads").expect("exists");
    assert_eq!(job.status, Status::Succeeded, "{job:?}");
    serde_json::from_value(job.result.expect("result")).expect("a closed fetch result")
}

fn fast_retries() -> runner::Config {
    runner::Config {
        retry_base_ms: 10,
        retry_max_ms: 50,
        ..runner::Config::default()
    }
}

#[tokio::test]
async fn a_job_ends_with_its_page_stored_whole_and_its_result_truncated() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context_in(dir.path(), fast_retries()).await;
    let envelope = enqueue(
        &context,
        FetchJob {
            max_chars: Some(100),
            ..FetchJob::new(server.url("/article/1"))
        },
    )
    .await;
    runner::process(&context, &envelope)
        .await
        .expect("processed");

    let result = result_of(&context, &envelope.id).await;
    assert!(!result.cached);
    assert_eq!(result.page_id, envelope.id);
    assert_eq!(result.content.length, 100);
    assert!(result.content.truncated);
    assert!(result.content.raw_length > 1_000);
    let page = context
        .store
        .page(&result.page_id)
        .await
        .expect("reads")
        .expect("page stored");
    let text = context.store.page_text(&page).await.expect("text");
    assert_eq!(text.chars().count(), result.content.raw_length);
    assert!(text.starts_with(&result.content.text));
    assert_eq!(page.content_hash, result.content_hash);

    let lines = trawl::pages::read(
        &context.store,
        &Default::default(),
        &server.url("/article/1"),
        2,
        Some(3),
        0,
    )
    .await
    .expect("reads")
    .expect("found");
    assert_eq!(lines.lines.len(), 2);
    assert_eq!(lines.total_lines, page.lines);
    let past_end = trawl::pages::read(
        &context.store,
        &Default::default(),
        &server.url("/article/1"),
        10_000,
        None,
        0,
    )
    .await
    .expect("reads")
    .expect("found");
    assert!(past_end.lines.is_empty());
}

#[tokio::test]
async fn a_job_delivered_twice_records_one_result() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context_in(dir.path(), fast_retries()).await;
    let envelope = enqueue(
        &context,
        FetchJob {
            cache_ttl: Some(0),
            ..FetchJob::new(server.url("/article/2"))
        },
    )
    .await;
    let (first, second) = tokio::join!(
        runner::process(&context, &envelope),
        runner::process(&context, &envelope)
    );
    first.expect("first delivery");
    second.expect("second delivery");
    runner::process(&context, &envelope)
        .await
        .expect("a late third delivery");
    let job = context
        .store
        .job(&envelope.id)
        .await
        .expect("reads")
        .expect("exists");
    assert_eq!(job.status, Status::Succeeded);
    assert_eq!(job.done_seq, Some(1));
    assert_eq!(
        context
            .store
            .count_by_status(Some("test"))
            .await
            .expect("counts"),
        vec![(Status::Succeeded, 1)]
    );
}

#[tokio::test]
async fn the_cache_serves_fresh_pages_and_a_zero_ttl_bypasses_it() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context_in(dir.path(), fast_retries()).await;
    let url = server.url("/article/3");

    let first = enqueue(&context, FetchJob::new(&url)).await;
    runner::process(&context, &first).await.expect("first");
    let second = enqueue(&context, FetchJob::new(&url)).await;
    runner::process(&context, &second).await.expect("second");
    let cached = result_of(&context, &second.id).await;
    assert!(cached.cached);
    assert_eq!(cached.page_id, first.id);
    assert_eq!(cached.content.took_ms, 0);
    assert_eq!(server.hits("/article/3"), 1);

    let bypass = enqueue(
        &context,
        FetchJob {
            cache_ttl: Some(0),
            ..FetchJob::new(&url)
        },
    )
    .await;
    runner::process(&context, &bypass).await.expect("bypass");
    assert!(!result_of(&context, &bypass.id).await.cached);
    assert_eq!(server.hits("/article/3"), 2);

    // Another format is another cache entry.
    let text = enqueue(
        &context,
        FetchJob {
            format: trawl_workers::job::Format::Text,
            ..FetchJob::new(&url)
        },
    )
    .await;
    runner::process(&context, &text).await.expect("text");
    assert!(!result_of(&context, &text.id).await.cached);
    assert_eq!(server.hits("/article/3"), 3);

    // The zero-TTL fetch was not written to the cache: a default job is served from the first.
    let again = enqueue(&context, FetchJob::new(&url)).await;
    runner::process(&context, &again).await.expect("again");
    assert_eq!(result_of(&context, &again.id).await.page_id, first.id);
    assert_eq!(server.hits("/article/3"), 3);
}

#[tokio::test]
async fn transient_errors_are_retried_with_backoff_then_dead() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context_in(dir.path(), fast_retries()).await;
    let envelope = enqueue(&context, FetchJob::new(server.url("/status/503"))).await;
    runner::process(&context, &envelope)
        .await
        .expect("processed");
    let job = context
        .store
        .job(&envelope.id)
        .await
        .expect("reads")
        .expect("exists");
    assert_eq!(job.status, Status::Dead);
    assert_eq!(job.attempts, 3);
    let error = job.error.expect("error");
    assert_eq!(error.code, ErrorCode::HttpStatus);
    assert!(error.transient);
    assert_eq!(server.hits("/status/503"), 3);
}

#[tokio::test]
async fn permanent_errors_fail_at_once() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context_in(dir.path(), fast_retries()).await;
    for (path, code) in [
        ("/status/404", ErrorCode::HttpStatus),
        ("/image.png", ErrorCode::UnsupportedContentType),
        ("/blocked/login", ErrorCode::LoginRequired),
    ] {
        let envelope = enqueue(&context, FetchJob::new(server.url(path))).await;
        runner::process(&context, &envelope)
            .await
            .expect("processed");
        let job = context
            .store
            .job(&envelope.id)
            .await
            .expect("reads")
            .expect("exists");
        assert_eq!(job.status, Status::Failed, "{path}");
        assert_eq!(job.attempts, 1, "{path}");
        assert_eq!(job.error.expect("error").code, code, "{path}");
    }
    assert_eq!(server.hits("/status/404"), 1);
}

#[tokio::test]
async fn a_job_whose_worker_keeps_dying_ends_dead() {
    let server = FixtureServer::start().await.expect("fixture");
    let dir = tempfile::tempdir().expect("tempdir");
    let context = context_in(dir.path(), fast_retries()).await;
    let envelope = enqueue(&context, FetchJob::new(server.url("/article/1"))).await;
    // Three deliveries whose worker died before recording anything.
    for expected in 1..=3 {
        let attempt = context
            .store
            .begin_attempt(&envelope.id)
            .await
            .expect("begins");
        assert_eq!(
            attempt,
            Attempt::Run {
                number: expected,
                max: 3
            }
        );
    }
    runner::process(&context, &envelope)
        .await
        .expect("processed");
    let job = context
        .store
        .job(&envelope.id)
        .await
        .expect("reads")
        .expect("exists");
    assert_eq!(job.status, Status::Dead);
    assert_eq!(job.error.expect("error").code, ErrorCode::WorkerLost);
    assert_eq!(server.hits("/article/1"), 0);
}
