//! The store on its own: all-or-nothing batches, first end wins, status counts.

use trawl::store::{NewJob, Outcome, Status, Store};
use trawl_workers::job::{ErrorCode, FetchJob, Job, JobError};

fn new_job(id: &str, batch: &str) -> NewJob {
    let job = Job::Fetch(FetchJob::new("https://example.com/"));
    NewJob {
        batch_id: Some(batch.to_owned()),
        ..NewJob::new(id, &job, 3)
    }
}

#[tokio::test]
async fn a_bad_batch_changes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("s.sqlite"))
        .await
        .expect("opens");
    let id = ulid::Ulid::generate().to_string();
    let other = ulid::Ulid::generate().to_string();
    // The same id twice: the whole batch is refused, the first row included.
    let result = store
        .create_jobs(&[new_job(&other, "b"), new_job(&id, "b"), new_job(&id, "b")])
        .await;
    assert!(result.is_err());
    assert!(store.job(&other).await.expect("reads").is_none());
    assert!(
        store
            .count_by_status(Some("b"))
            .await
            .expect("counts")
            .is_empty()
    );
}

#[tokio::test]
async fn the_first_end_of_a_job_wins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("s.sqlite"))
        .await
        .expect("opens");
    let id = ulid::Ulid::generate().to_string();
    store
        .create_jobs(&[new_job(&id, "b")])
        .await
        .expect("creates");
    let failed = Outcome::Failed(JobError::new(ErrorCode::HttpStatus, "http status 404"));
    assert_eq!(
        store.finish(&id, &failed).await.expect("ends"),
        Some(Status::Failed)
    );
    let succeeded = Outcome::Succeeded {
        result: serde_json::json!({"late": true}),
        page_id: None,
    };
    assert_eq!(store.finish(&id, &succeeded).await.expect("refused"), None);
    let job = store.job(&id).await.expect("reads").expect("exists");
    assert_eq!(job.status, Status::Failed);
    assert!(job.result.is_none());
    assert_eq!(job.error.expect("error").code, ErrorCode::HttpStatus);
    assert_eq!(job.done_seq, Some(1));
}
