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

fn page_info(url: &str) -> trawl_workers::fetch::PageInfo {
    trawl_workers::fetch::PageInfo {
        url: url.to_owned(),
        final_url: url.to_owned(),
        status: 200,
        content_type: "text/html".into(),
        title: Some("t".into()),
        extractor: trawl_workers::job::Extractor::Readability,
        warning: None,
        links: vec![],
        meta: trawl_workers::job::Meta::default(),
        outline: vec![],
        format: trawl_workers::job::Format::Markdown,
        fetched_at: "2026-01-01T00:00:00Z".into(),
        took_ms: 1,
    }
}

/// Pages finished at once are committed in groups: every job ends once with its own result
/// and page, a second delivery of a job gets `None` and stores nothing, a cancel request wins,
/// and `done_seq` stays unique and increasing.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pages_finished_together_are_committed_in_groups_without_mixing_jobs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(&dir.path().join("s.sqlite"))
        .await
        .expect("opens");
    let ids: Vec<String> = (0..300)
        .map(|_| ulid::Ulid::generate().to_string())
        .collect();
    let jobs: Vec<NewJob> = ids.iter().map(|id| new_job(id, "g")).collect();
    store.create_jobs(&jobs).await.expect("creates");
    for id in &ids {
        store.begin_attempt(id).await.expect("starts");
    }
    // Job 7 is asked to stop while it runs.
    assert_eq!(
        store.request_cancel(&ids[7]).await.expect("cancels"),
        trawl::store::Cancel::Requested
    );
    let mut tasks = tokio::task::JoinSet::new();
    // Job 0 is delivered three times at once; every third page has the same text.
    let deliveries = ids
        .iter()
        .cloned()
        .enumerate()
        .chain([(0, ids[0].clone()), (0, ids[0].clone())]);
    for (n, id) in deliveries {
        let store = store.clone();
        tasks.spawn(async move {
            let url = format!("https://example.com/{n}");
            let info = page_info(&url);
            let text = if n % 3 == 0 {
                "shared text".to_owned()
            } else {
                format!("text of page {n}")
            };
            let raw = format!("<p>{text}</p>");
            let page = trawl::store::NewPage {
                url: &url,
                final_url: &url,
                options_hash: "o",
                info: &info,
                text: &text,
                raw: raw.as_bytes(),
                headers: &[],
                ip: None,
                archive: n % 2 == 0,
            };
            let (_, ended) = store
                .finish_with_page(&id, page, |hash| {
                    serde_json::json!({ "n": n, "hash": hash }).to_string()
                })
                .await
                .expect("stores");
            (n, id, ended)
        });
    }
    let mut ended_job0 = 0;
    while let Some(joined) = tasks.join_next().await {
        let (n, id, ended) = joined.expect("task");
        match n {
            0 => ended_job0 += usize::from(ended.is_some()),
            7 => assert_eq!(ended, Some(Status::Cancelled)),
            _ => assert_eq!(ended, Some(Status::Succeeded), "job {n}"),
        }
        let job = store.job(&id).await.expect("reads").expect("exists");
        if n == 7 {
            assert!(job.result.is_none());
            assert!(store.page(&id).await.expect("reads").is_none());
            continue;
        }
        assert_eq!(job.result.expect("result")["n"], n);
        let page = store.page(&id).await.expect("reads").expect("page stored");
        assert_eq!(page.info.url, format!("https://example.com/{n}"));
        let text = store.page_text(&page).await.expect("text");
        assert_eq!(text.contains("shared"), n % 3 == 0, "page {n}: {text}");
    }
    assert_eq!(ended_job0, 1, "one of three deliveries of job 0 ends it");
    let mut seqs = Vec::new();
    for id in &ids {
        let job = store.job(id).await.expect("reads").expect("exists");
        seqs.push(job.done_seq.expect("ended"));
    }
    seqs.sort_unstable();
    seqs.dedup();
    assert_eq!(seqs.len(), ids.len(), "done_seq is unique");
}
