//! The store on its own, on both engines (SQLite and PostgreSQL, see `engines`):
//! all-or-nothing batches, first end wins, group commit, status counts, crawls, archiving.

use trawl::store::{CrawlCounters, Fate, Found, IdempotencyClaim, NewJob, Outcome, Status};
use trawl_workers::job::{ErrorCode, FetchJob, Job, JobError};

use crate::engines::{TestDb, on_both_engines};

on_both_engines!(
    a_bad_batch_changes_nothing,
    the_first_end_of_a_job_wins,
    a_cancelled_job_ends_with_the_cancelled_error_not_its_last_retry,
    pages_finished_together_are_committed_in_groups_without_mixing_jobs,
    a_fetch_result_keeps_its_text_once_and_reads_whole,
    two_stores_on_one_database_end_each_job_once_in_done_seq_order,
    crawls_keep_their_seen_set_counters_and_budget,
    pages_wait_for_the_archive_and_export_in_order,
    a_worker_that_lost_its_job_cannot_commit_late,
    session_replay_logs_keep_steps_and_screenshots_in_order,
    session_hosts_register_renew_and_take_their_sessions_with_them,
    jobs_crawls_and_pages_belong_to_their_tenant,
    jobs_and_pages_are_listed_by_batch_crawl_status_and_host_with_a_cursor,
    data_from_before_tenants_is_the_default_tenants,
    idempotency_keys_replay_their_answer_refuse_other_requests_and_expire,
);

fn new_job(id: &str, batch: &str) -> NewJob {
    let job = Job::Fetch(FetchJob::new("https://example.com/"));
    NewJob {
        batch_id: Some(batch.to_owned()),
        ..NewJob::new(id, &job, 3)
    }
}

async fn a_bad_batch_changes_nothing(db: TestDb) {
    let store = db.open().await;
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

async fn the_first_end_of_a_job_wins(db: TestDb) {
    let store = db.open().await;
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

/// Issue "wrong answers": a job cancelled after a failed attempt kept `error.code:
/// connect_error`.
async fn a_cancelled_job_ends_with_the_cancelled_error_not_its_last_retry(db: TestDb) {
    let store = db.open().await;
    let ids: Vec<String> = (0..2).map(|_| ulid::Ulid::generate().to_string()).collect();
    let jobs: Vec<NewJob> = ids.iter().map(|id| new_job(id, "c")).collect();
    store.create_jobs(&jobs).await.expect("creates");
    let refused = JobError::new(ErrorCode::ConnectError, "connect failed: refused");
    for id in &ids {
        store.begin_attempt(id).await.expect("starts");
        store.record_retry(id, &refused).await.expect("records");
        assert_eq!(
            store.request_cancel(id).await.expect("cancels"),
            trawl::store::Cancel::Requested
        );
    }
    // One attempt ends failing again, the other with a page: the cancel request wins both.
    let failed = Outcome::Failed(refused.clone());
    assert_eq!(
        store.finish(&ids[0], &failed).await.expect("ends"),
        Some(Status::Cancelled)
    );
    let url = "https://example.com/c";
    let info = page_info(url);
    let page = trawl::store::NewPage {
        archive: true,
        ..new_page(&info, "text", b"<p>text</p>")
    };
    // As with an archive pool in the process: a page not stored is not held for it either.
    store.hold_for_archive(trawl::store::RawBodies::All, false);
    let (_, ended) = store
        .finish_with_page(&ids[1], page, |_| "{}".to_owned())
        .await
        .expect("stores");
    assert_eq!(ended, Some(Status::Cancelled));
    assert_eq!(store.held_for_archive(), (0, 0));
    for id in &ids {
        let job = store.job(id).await.expect("reads").expect("exists");
        assert_eq!(job.status, Status::Cancelled);
        let error = job.error.expect("a cancelled job says so");
        assert_eq!(error.code, ErrorCode::Cancelled, "{error:?}");
        assert!(!error.transient);
    }
    let failed_codes = store.count_by_status(Some("c")).await.expect("counts");
    assert!(
        failed_codes
            .iter()
            .all(|(status, _)| *status == Status::Cancelled),
        "{failed_codes:?}"
    );
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
        truncated: false,
        reduced: false,
    }
}

/// A page of `info.url` to store with `text` and `raw`: not to archive, no headers, no IP,
/// no attempt, the default tenant (a test changes what it needs with `..`).
fn new_page<'a>(
    info: &'a trawl_workers::fetch::PageInfo,
    text: &'a str,
    raw: &'a [u8],
) -> trawl::store::NewPage<'a> {
    trawl::store::NewPage {
        url: &info.url,
        final_url: &info.url,
        options_hash: "o",
        info,
        text,
        raw,
        headers: &[],
        ip: None,
        archive: false,
        lines: None,
        attempt: None,
        tenant: trawl::tenant::DEFAULT,
    }
}

/// A fetch result's text is kept once, as its page's (compressed, in `blobs`), not again in
/// the job's row; reading the job, or the batch's ended jobs, puts it back as the job ended
/// (cut at `max_chars`). A result stored with its text is read as it is.
async fn a_fetch_result_keeps_its_text_once_and_reads_whole(db: TestDb) {
    let store = db.open().await;
    store
        .create_jobs(&[new_job("t1", "t"), new_job("t2", "t")])
        .await
        .expect("creates");
    let url = "https://example.com/t";
    let info = page_info(url);
    let text = "Ünïcode \"quoted\" text of the page, longer than max_chars";
    let page = new_page(&info, text, b"<p>text</p>");
    let result_for =
        |hash: &str| trawl_workers::fetch::build_result(&info, text, "t1", hash, false, 16);
    let (hash, ended) = store
        .finish_with_page("t1", page, |hash| {
            trawl::store::stored_fetch_result(&result_for(hash)).to_string()
        })
        .await
        .expect("stores");
    assert_eq!(ended, Some(Status::Succeeded));
    let row: String = if db.url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(&db.url).await.expect("opens");
        sqlx::query_scalar("SELECT result FROM jobs WHERE id = $1")
            .bind("t1")
            .fetch_one(&pool)
            .await
            .expect("reads")
    } else {
        let pool = sqlx::PgPool::connect(&db.url).await.expect("opens");
        sqlx::query_scalar("SELECT result FROM jobs WHERE id = $1")
            .bind("t1")
            .fetch_one(&pool)
            .await
            .expect("reads")
    };
    assert!(!row.contains("Ünïcode") && row.contains(&hash), "{row}");
    let whole = serde_json::to_value(result_for(&hash)).expect("serialises");
    assert_eq!(whole["content"]["text"], "Ünïcode \"quoted\"");
    let job = store.job("t1").await.expect("reads").expect("exists");
    assert_eq!(job.result.as_ref(), Some(&whole));
    let kept = serde_json::json!({"content": {"text": "kept", "length": 4}, "n": 2});
    let outcome = Outcome::Succeeded {
        result: kept.clone(),
        page_id: None,
    };
    store.finish("t2", &outcome).await.expect("ends");
    assert_eq!(
        store
            .job("t2")
            .await
            .expect("reads")
            .expect("exists")
            .result,
        Some(kept.clone())
    );
    let ended = store.ended_since("t", 0, 10).await.expect("reads");
    let results: Vec<serde_json::Value> = ended
        .iter()
        .map(|job| serde_json::from_str(job.result.as_deref().expect("result")).expect("JSON"))
        .collect();
    assert_eq!(results, [whole, kept]);
}

/// Pages finished at once are committed in groups: every job ends once with its own result
/// and page, a second delivery of a job gets `None` and stores nothing, a cancel request wins,
/// and `done_seq` stays unique and increasing.
async fn pages_finished_together_are_committed_in_groups_without_mixing_jobs(db: TestDb) {
    let store = db.open().await;
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
                archive: n % 2 == 0,
                ..new_page(&info, &text, raw.as_bytes())
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

/// Two stores on one database, as two worker processes: each job ends once whichever store
/// ends it, and a reader paging by `done_seq` while jobs end sees every job exactly once (on
/// PostgreSQL, numbers grow in commit order, so none is skipped behind the cursor).
async fn two_stores_on_one_database_end_each_job_once_in_done_seq_order(db: TestDb) {
    let first = db.open().await;
    let second = db.open().await;
    let ids: Vec<String> = (0..200)
        .map(|_| ulid::Ulid::generate().to_string())
        .collect();
    let jobs: Vec<NewJob> = ids.iter().map(|id| new_job(id, "two")).collect();
    first.create_jobs(&jobs).await.expect("creates");
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let store = second.clone();
        let finished = finished.clone();
        tokio::spawn(async move {
            let mut seen = std::collections::HashSet::new();
            let mut last_seq = 0;
            loop {
                // Read the flag before the page: after the last end is visible, one more page.
                let done = finished.load(std::sync::atomic::Ordering::SeqCst);
                let page = store.ended_since("two", last_seq, 50).await.expect("pages");
                for ended in &page {
                    assert!(ended.done_seq > last_seq, "done_seq goes back");
                    last_seq = ended.done_seq;
                    assert!(seen.insert(ended.id.clone()), "{} seen twice", ended.id);
                }
                if done && page.is_empty() {
                    return seen;
                }
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
            }
        })
    };
    let mut tasks = tokio::task::JoinSet::new();
    for (n, id) in ids.iter().enumerate() {
        for (name, store) in [("first", first.clone()), ("second", second.clone())] {
            let id = id.clone();
            tasks.spawn(async move {
                store.begin_attempt(&id).await.expect("starts");
                let outcome = if n % 5 == 0 {
                    Outcome::Failed(JobError::new(ErrorCode::HttpStatus, "http status 500"))
                } else {
                    Outcome::Succeeded {
                        result: serde_json::json!({ "by": name }),
                        page_id: None,
                    }
                };
                let ended = store.finish(&id, &outcome).await.expect("ends");
                (id, ended)
            });
        }
    }
    let mut ends = std::collections::HashMap::new();
    while let Some(joined) = tasks.join_next().await {
        let (id, ended) = joined.expect("task");
        *ends.entry(id).or_insert(0) += usize::from(ended.is_some());
    }
    finished.store(true, std::sync::atomic::Ordering::SeqCst);
    assert!(
        ends.values().all(|count| *count == 1),
        "every job ends once"
    );
    let seen = reader.await.expect("reader");
    assert_eq!(seen.len(), ids.len(), "the reader saw every job");
    let counts = first.count_by_status(Some("two")).await.expect("counts");
    assert_eq!(counts, vec![(Status::Failed, 40), (Status::Succeeded, 160)]);
    assert_eq!(
        first.count_errors("two").await.expect("counts"),
        vec![("http_status".to_owned(), 40)]
    );
}

async fn crawls_keep_their_seen_set_counters_and_budget(db: TestDb) {
    let store = db.open().await;
    let crawl_id = ulid::Ulid::generate().to_string();
    let spec = trawl_workers::job::CrawlSpec::new(vec!["https://example.com/".to_owned()]);
    store
        .create_crawl(
            &crawl_id,
            &trawl::tenant::Tenant::default(),
            &serde_json::to_value(&spec).expect("json"),
        )
        .await
        .expect("creates");
    let key = |name: &str| format!("https://example.com/{name}");
    let crawl_job = |name: &str| NewJob {
        crawl_id: Some(crawl_id.clone()),
        ..new_job(&format!("{crawl_id}-{name}"), "crawl")
    };
    let follow = async |found: &[(&str, Fate<'_>)], counted: CrawlCounters| {
        let keys: Vec<String> = found.iter().map(|(name, _)| key(name)).collect();
        let found: Vec<Found<'_>> = keys
            .iter()
            .zip(found)
            .map(|(key, (_, fate))| Found { key, fate: *fate })
            .collect();
        store
            .follow_crawl(&crawl_id, 3, &found, &counted)
            .await
            .expect("follows")
    };
    let (b, d, e, f) = (
        crawl_job("b"),
        crawl_job("d"),
        crawl_job("e"),
        crawl_job("f"),
    );
    let first = follow(
        &[
            ("b", Fate::Queue(&b)),
            ("a", Fate::Scope),
            ("b", Fate::Queue(&b)),
            ("c", Fate::Robots),
        ],
        CrawlCounters {
            skipped_depth: 1,
            ..CrawlCounters::default()
        },
    )
    .await;
    let mut new: Vec<&String> = first.new.iter().collect();
    new.sort();
    assert_eq!(
        new,
        [&key("a"), &key("b"), &key("c")],
        "new keys, once each"
    );
    assert_eq!(
        first.created,
        std::slice::from_ref(&b.id),
        "one job for b, found twice"
    );
    assert_eq!(
        first.counters,
        CrawlCounters {
            discovered: 3,
            queued: 1,
            skipped_scope: 1,
            skipped_robots: 1,
            skipped_depth: 1,
            ..CrawlCounters::default()
        }
    );
    // c is not new any more (no job, whatever its fate now); g is the page's own key; of d, e
    // and f, the budget of 3 pages leaves room for two.
    let second = follow(
        &[
            ("g", Fate::Own),
            ("c", Fate::Queue(&b)),
            ("d", Fate::Queue(&d)),
            ("e", Fate::Queue(&e)),
            ("f", Fate::Queue(&f)),
        ],
        CrawlCounters::default(),
    )
    .await;
    assert_eq!(second.new.len(), 4);
    assert!(second.new.contains(&key("g")) && !second.new.contains(&key("c")));
    assert_eq!(second.created, [d.id.clone(), e.id.clone()]);
    assert_eq!(
        second.counters.discovered, 3,
        "the page's own key is not counted"
    );
    assert_eq!(second.counters.skipped_limit, 1);
    let mut queued = store
        .queued_jobs(&[b.id.clone(), d.id.clone(), e.id.clone(), f.id.clone()])
        .await
        .expect("reads");
    queued.sort();
    assert_eq!(
        queued,
        [b.id.clone(), d.id.clone(), e.id.clone()],
        "f was not created"
    );
    assert_eq!(
        store.job(&f.id).await.expect("reads").map(|job| job.id),
        None
    );
    let record = store
        .crawl(&crawl_id)
        .await
        .expect("reads")
        .expect("exists");
    assert_eq!(record.spec, spec);
    assert_eq!(record.status, trawl::store::CrawlStatus::Running);
    assert_eq!(
        record.counters,
        CrawlCounters {
            discovered: 6,
            queued: 3,
            skipped_scope: 1,
            skipped_robots: 1,
            skipped_depth: 1,
            skipped_limit: 1,
            ..CrawlCounters::default()
        }
    );
    store.begin_attempt(&b.id).await.expect("starts");
    assert_eq!(
        store
            .queued_jobs(std::slice::from_ref(&b.id))
            .await
            .expect("reads"),
        Vec::<String>::new(),
        "a running job is not queued"
    );

    let job_id = ulid::Ulid::generate().to_string();
    let job = NewJob {
        crawl_id: Some(crawl_id.clone()),
        ..new_job(&job_id, "crawl")
    };
    store.create_jobs(&[job]).await.expect("creates");
    assert!(
        !store
            .complete_crawl_if_done(&crawl_id)
            .await
            .expect("checks")
    );
    assert!(store.cancel_crawl(&crawl_id).await.expect("cancels"));
    assert!(!store.cancel_crawl(&crawl_id).await.expect("cancels once"));
    assert_eq!(
        store.begin_attempt(&job_id).await.expect("starts"),
        trawl::store::Attempt::Cancelled,
        "a queued job of a cancelled crawl ends cancelled"
    );
    let record = store
        .crawl(&crawl_id)
        .await
        .expect("reads")
        .expect("exists");
    assert_eq!(record.status, trawl::store::CrawlStatus::Cancelled);
    assert!(record.finished_at.is_some());
    let h = crawl_job("h");
    let after = follow(&[("h", Fate::Queue(&h))], CrawlCounters::default()).await;
    assert!(
        after.created.is_empty() && after.counters.skipped_limit == 1,
        "a cancelled crawl queues nothing more"
    );
    assert!(store.crawl("nope").await.expect("reads").is_none());
}

async fn pages_wait_for_the_archive_and_export_in_order(db: TestDb) {
    let store = db.open().await;
    let batch = trawl::store::NewBatch {
        id: ulid::Ulid::generate().to_string(),
        webhook: Some("https://hooks.example/".to_owned()),
        total: 4,
        tenant: trawl::tenant::Tenant::default(),
    };
    let ids: Vec<String> = (0..4).map(|_| ulid::Ulid::generate().to_string()).collect();
    let jobs: Vec<NewJob> = ids.iter().map(|id| new_job(id, &batch.id)).collect();
    store.submit(Some(&batch), &jobs).await.expect("submits");
    let mut hashes = Vec::new();
    for (n, id) in ids.iter().take(3).enumerate() {
        if n == 1 {
            // As an archive pool opening in this process does: the texts and raw bodies of
            // pages to archive stored from now on are held for it (page 0's are not).
            store.hold_for_archive(trawl::store::RawBodies::All, false);
        }
        assert_eq!(
            store.begin_attempt(id).await.expect("starts"),
            trawl::store::Attempt::Run { number: 1, max: 3 }
        );
        let url = format!("https://example.com/{}", ["a", "b", "c"][n]);
        let info = page_info(&url);
        let text = format!("# page {n}\n\nline two\n");
        let page = trawl::store::NewPage {
            headers: &[("content-type".to_owned(), "text/html".to_owned())],
            ip: Some(std::net::Ipv4Addr::LOCALHOST.into()),
            archive: n != 1,
            attempt: Some(1),
            ..new_page(&info, &text, b"<html>same raw body</html>")
        };
        let (hash, ended) = store
            .finish_with_page(id, page, |hash| {
                serde_json::json!({ "hash": hash }).to_string()
            })
            .await
            .expect("stores");
        assert_eq!(ended, Some(Status::Succeeded));
        hashes.push(hash);
    }
    assert!(
        store
            .claim_batch_completion(&batch.id)
            .await
            .expect("claims")
            .is_none()
    );

    assert_eq!(store.archive_pending().await.expect("counts"), 2);
    let first = store.archive_backlog(0, 1).await.expect("backlog");
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].0.id, ids[0]);
    assert_eq!(
        first[0].0.headers,
        vec![("content-type".to_owned(), "text/html".to_owned())]
    );
    assert_eq!(first[0].0.ip.as_deref(), Some("127.0.0.1"));
    let rest = store
        .archive_backlog(first[0].1, 10)
        .await
        .expect("backlog");
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0].0.id, ids[2]);
    assert!(rest[0].1 > first[0].1);
    // Page 2's text and raw body are held (page 1 is not to be archived, page 0 was stored
    // before the hold); handed out once, then read back from the blobs: the same bytes.
    assert_eq!(store.held_for_archive(), (1, 1));
    for (page, text) in [
        (&first[0].0, "# page 0\n\nline two\n"),
        (&rest[0].0, "# page 2\n\nline two\n"),
    ] {
        for _ in 0..2 {
            assert_eq!(
                store
                    .text_to_archive(&page.content_hash)
                    .await
                    .expect("reads"),
                text
            );
            assert_eq!(
                store
                    .raw_to_archive(&page.raw_hash)
                    .await
                    .expect("reads")
                    .as_deref(),
                Some(&b"<html>same raw body</html>"[..])
            );
        }
    }
    assert_eq!(store.held_for_archive(), (0, 0), "each was handed out once");

    // Two pages' references in one call, each to its own page.
    let warcs: Vec<trawl::store::WarcRef> = [(0, 7), (2, 900)]
        .into_iter()
        .map(|(n, offset)| trawl::store::WarcRef {
            page_id: ids[n].clone(),
            record_id: format!("<urn:uuid:{n}>"),
            file: "a.warc.gz".to_owned(),
            offset,
        })
        .collect();
    store.record_warc(&warcs).await.expect("records");
    // Several ids in one call, one of them no page's: the page's is marked all the same.
    store
        .mark_archived(&[ids[0].clone(), "no-such-page".to_owned()], "archived")
        .await
        .expect("marks");
    assert_eq!(store.archive_pending().await.expect("counts"), 1);
    store.request_archive_page(&ids[0]).await.expect("asks");
    assert_eq!(
        store.archive_pending().await.expect("counts"),
        1,
        "archived stays archived"
    );
    // The originals of captures of a, c, b (same body, no record) and a fetched before page
    // 0 was: only a and c have one, each its own URL's.
    let raw_hash = first[0].0.raw_hash.clone();
    let (page_a, page_c) = (&first[0].0, &rest[0].0);
    let page_b = trawl::store::ArchivePage {
        url: "https://example.com/b".to_owned(),
        ..page_a.clone()
    };
    let page_a_before = trawl::store::ArchivePage {
        fetched_at_ms: page_a.fetched_at_ms - 1,
        ..page_a.clone()
    };
    let originals = store
        .warc_originals(&[page_a, page_c, &page_b, &page_a_before])
        .await
        .expect("reads");
    assert_eq!(
        originals,
        vec![
            Some(("<urn:uuid:0>".to_owned(), page_a.fetched_at_ms)),
            Some(("<urn:uuid:2>".to_owned(), page_c.fetched_at_ms)),
            None,
            None,
        ]
    );
    let missing = store
        .request_archive(&[
            "https://example.com/a".to_owned(),
            "https://nope.example/".to_owned(),
        ])
        .await
        .expect("asks");
    assert_eq!(missing, vec!["https://nope.example/".to_owned()]);
    assert_eq!(
        store.archive_pending().await.expect("counts"),
        1,
        "nothing changed"
    );
    assert!(
        store
            .request_archive(&["https://example.com/a".to_owned()])
            .await
            .expect("asks")
            .is_empty()
    );
    assert_eq!(store.archive_pending().await.expect("counts"), 2);

    let all = store
        .export_pages(Some("https://example.com/"), Some(&batch.id), None, 0, 10)
        .await
        .expect("exports");
    let exported: Vec<&str> = all.iter().map(|(page, _)| page.id.as_str()).collect();
    assert_eq!(
        exported,
        vec![ids[0].as_str(), ids[1].as_str(), ids[2].as_str()]
    );
    let records: Vec<Option<&str>> = all
        .iter()
        .map(|(page, _)| page.warc_record_id.as_deref())
        .collect();
    assert_eq!(
        records,
        vec![Some("<urn:uuid:0>"), None, Some("<urn:uuid:2>")]
    );
    let after = store
        .export_pages(None, None, None, all[0].1, 1)
        .await
        .expect("exports");
    assert_eq!(after[0].0.id, ids[1]);
    let prefixed = store
        .export_pages(Some("https://example.com/c"), None, None, 0, 10)
        .await
        .expect("exports");
    assert_eq!(prefixed.len(), 1);
    assert!(
        store
            .export_pages(None, None, Some("no-crawl"), 0, 10)
            .await
            .expect("exports")
            .is_empty()
    );

    // Lookups asked together (the store answers those waiting at once with one statement):
    // each gets its own URL's page with its own options, fetched since its own time.
    let (b, b_other, c, a_later) = tokio::join!(
        store.cached_page("https://example.com/b", "o", 0),
        store.cached_page("https://example.com/b", "other", 0),
        store.cached_page("https://example.com/c", "o", 0),
        store.cached_page("https://example.com/a", "o", i64::MAX),
    );
    let cached = b.expect("reads").expect("cached");
    assert_eq!(cached.id, ids[1]);
    assert_eq!(cached.lines, 3);
    assert!(b_other.expect("reads").is_none());
    assert_eq!(c.expect("reads").expect("cached").id, ids[2]);
    assert!(
        a_later.expect("reads").is_none(),
        "fetched before the time asked"
    );
    let latest = store
        .latest_page(&trawl::tenant::Scope::default(), "https://example.com/c")
        .await
        .expect("reads")
        .expect("page");
    assert_eq!(latest.content_hash, hashes[2]);
    // A store with a cold text cache reads the text back from its blob.
    let cold = db.open().await;
    assert_eq!(
        cold.page_text(&latest).await.expect("text"),
        "# page 2\n\nline two\n"
    );
    assert_eq!(
        cold.blob(&raw_hash).await.expect("blob").expect("stored"),
        b"<html>same raw body</html>"
    );

    let failed = Outcome::Failed(JobError::new(ErrorCode::HttpStatus, "http status 404"));
    store.begin_attempt(&ids[3]).await.expect("starts");
    store
        .record_retry(&ids[3], &JobError::new(ErrorCode::Timeout, "timed out"))
        .await
        .expect("records");
    assert_eq!(
        store
            .job(&ids[3])
            .await
            .expect("reads")
            .expect("job")
            .error
            .expect("error")
            .code,
        ErrorCode::Timeout
    );
    store.finish(&ids[3], &failed).await.expect("ends");
    let summary = store
        .claim_batch_completion(&batch.id)
        .await
        .expect("claims")
        .expect("the batch is complete");
    assert_eq!(summary.webhook.as_deref(), Some("https://hooks.example/"));
    assert_eq!(
        summary.counts,
        vec![(Status::Failed, 1), (Status::Succeeded, 3)]
    );
    assert!(
        store
            .claim_batch_completion(&batch.id)
            .await
            .expect("claims")
            .is_none(),
        "once"
    );
    let ended = store.ended_since(&batch.id, 0, 10).await.expect("reads");
    assert_eq!(ended.len(), 4);
    assert!(
        ended
            .windows(2)
            .all(|pair| pair[0].done_seq < pair[1].done_seq)
    );
    assert_eq!(
        ended[3].error.as_ref().expect("error").code,
        ErrorCode::HttpStatus
    );
    store.ping().await.expect("answers");
    store.close().await;
}

/// `DATABASE_URL` (the name other tools use) selects the PostgreSQL store for the commands,
/// and `trawl config` shows it redacted (it may hold a password).
#[tokio::test]
async fn database_url_selects_the_postgres_store() {
    let db = TestDb::postgres().await;
    let store = db.open().await;
    let id = ulid::Ulid::generate().to_string();
    store
        .create_jobs(&[new_job(&id, "cli")])
        .await
        .expect("creates");
    let dir = tempfile::tempdir().expect("tempdir");
    let trawl = |args: &[&str]| {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_trawl"));
        command
            .current_dir(dir.path())
            .arg("--data-dir")
            .arg(dir.path())
            .args(args)
            .env("DATABASE_URL", &db.url)
            .env_remove("TRAWL_DATABASE_URL")
            .env_remove("TRAWL_CONFIG")
            .env("TRAWL_LOG", "error")
            .kill_on_drop(true);
        command
    };
    let status = trawl(&["status", &id]).output().await.expect("runs");
    let stdout = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.status.success(),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    assert!(stdout.contains(&id), "{stdout}");
    assert!(
        !dir.path().join("trawl.sqlite").exists(),
        "no SQLite store was opened"
    );
    let config = trawl(&["config"]).output().await.expect("runs");
    let printed = String::from_utf8_lossy(&config.stdout);
    assert!(
        printed.contains("database_url = \"[redacted]\""),
        "{printed}"
    );
    assert!(!printed.contains(&db.url), "{printed}");
}

#[tokio::test]
async fn an_unknown_store_url_is_refused_without_echoing_it() {
    let error = trawl::store::Store::connect("mysql://user:secret@db/trawl")
        .await
        .expect_err("refused");
    let message = error.to_string();
    assert!(message.contains("\"mysql\""), "{message}");
    assert!(!message.contains("secret"), "{message}");
}

/// A worker paused past the recovery time lost its job to another worker's attempt: its late
/// commit (a page, or a failure) is refused even before the other attempt ends, and the
/// result stays the other attempt's.
async fn a_worker_that_lost_its_job_cannot_commit_late(db: TestDb) {
    let store = db.open().await;
    let id = ulid::Ulid::generate().to_string();
    store
        .create_jobs(&[new_job(&id, "b")])
        .await
        .expect("creates");
    let first = store.begin_attempt(&id).await.expect("starts");
    assert_eq!(first, trawl::store::Attempt::Run { number: 1, max: 3 });
    // Recovery hands the job to another worker: attempt 2.
    let second = store.begin_attempt(&id).await.expect("starts again");
    assert_eq!(second, trawl::store::Attempt::Run { number: 2, max: 3 });

    let url = "https://example.com/late".to_owned();
    let info = page_info(&url);
    let page = |attempt| trawl::store::NewPage {
        attempt: Some(attempt),
        ..new_page(&info, "late text", b"<p>late</p>")
    };
    let (_, late) = store
        .finish_with_page(&id, page(1), |_| "{\"late\": true}".to_owned())
        .await
        .expect("answers");
    assert_eq!(late, None, "the first attempt's page is refused");
    assert!(store.page(&id).await.expect("reads").is_none());
    let failed = Outcome::Failed(JobError::new(ErrorCode::HttpStatus, "http status 500"));
    assert_eq!(
        store
            .finish_attempt(&id, 1, &failed)
            .await
            .expect("answers"),
        None,
        "the first attempt's failure is refused"
    );
    let (_, ended) = store
        .finish_with_page(&id, page(2), |_| "{\"late\": false}".to_owned())
        .await
        .expect("stores");
    assert_eq!(ended, Some(Status::Succeeded));
    let job = store.job(&id).await.expect("reads").expect("exists");
    assert_eq!(job.result.expect("result")["late"], false);
}

async fn session_replay_logs_keep_steps_and_screenshots_in_order(db: TestDb) {
    let store = db.open().await;
    store
        .create_session("s1", "owner", "mobile", None)
        .await
        .expect("creates");
    let image = vec![0xFF, 0xD8, 0xFF, 0xE0, 1, 2, 3];
    for seq in [2_u64, 1] {
        let action = serde_json::json!({"action": "snapshot", "n": seq});
        let outcome = serde_json::json!({"ok": true});
        store
            .add_session_step(&trawl::store::NewSessionStep {
                session_id: "s1",
                seq,
                action: &action,
                outcome: &outcome,
                image: (seq == 1).then_some((image.as_slice(), "image/jpeg")),
            })
            .await
            .expect("records");
    }
    // A step recorded twice (a retried request) stays one step.
    let action = serde_json::json!({"action": "other"});
    store
        .add_session_step(&trawl::store::NewSessionStep {
            session_id: "s1",
            seq: 1,
            action: &action,
            outcome: &action,
            image: None,
        })
        .await
        .expect("ignored");
    let steps = store.session_steps("s1").await.expect("reads");
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0].seq, 1);
    assert_eq!(steps[0].action["n"], 1);
    let sha = steps[0].image_sha256.clone().expect("an image");
    assert_eq!(steps[0].image_type.as_deref(), Some("image/jpeg"));
    assert_eq!(store.blob(&sha).await.expect("reads"), Some(image));
    assert_eq!(steps[1].image_sha256, None);

    store.close_session("s1", "expired").await.expect("closes");
    store.close_session("s1", "closed").await.expect("no-op");
    let record = store.session("s1").await.expect("reads").expect("exists");
    assert_eq!(record.close_reason.as_deref(), Some("expired"));
    assert_eq!(record.owner, "owner");
    assert!(store.session("nope").await.expect("reads").is_none());
}

async fn session_hosts_register_renew_and_take_their_sessions_with_them(db: TestDb) {
    use trawl::store::SessionHost;
    let store = db.open().await;
    let host = |url: &str, capacity: u64, open: u64, seen_ms: i64| SessionHost {
        url: url.to_owned(),
        capacity,
        open,
        seen_ms,
    };
    store
        .renew_session_host(&host("http://a:1", 20, 19, 1_000))
        .await
        .expect("registers");
    store
        .renew_session_host(&host("http://b:1", 20, 5, 1_000))
        .await
        .expect("registers");
    store
        .renew_session_host(&host("http://old:1", 20, 0, 10))
        .await
        .expect("registers");
    // Renewal replaces the row; stale hosts are left out; most free places first.
    store
        .renew_session_host(&host("http://a:1", 20, 2, 2_000))
        .await
        .expect("renews");
    let live = store.session_hosts(500).await.expect("reads");
    assert_eq!(
        live,
        vec![
            host("http://a:1", 20, 2, 2_000),
            host("http://b:1", 20, 5, 1_000)
        ]
    );
    store
        .remove_session_host("http://b:1")
        .await
        .expect("removes");
    assert_eq!(store.session_hosts(0).await.expect("reads").len(), 2);

    store
        .create_session("on-a", "owner", "desktop", Some("http://a:1"))
        .await
        .expect("creates");
    store
        .create_session("on-b", "owner", "desktop", Some("http://b:1"))
        .await
        .expect("creates");
    let record = store.session("on-a").await.expect("reads").expect("exists");
    assert_eq!(record.host.as_deref(), Some("http://a:1"));
    // The replay shows no host.
    assert!(
        serde_json::to_value(&record)
            .expect("json")
            .get("host")
            .is_none()
    );
    assert_eq!(
        store
            .close_host_sessions("http://a:1", "host_lost")
            .await
            .expect("closes"),
        1
    );
    let record = store.session("on-a").await.expect("reads").expect("exists");
    assert_eq!(record.close_reason.as_deref(), Some("host_lost"));
    let other = store.session("on-b").await.expect("reads").expect("exists");
    assert_eq!(other.closed_at, None);
}

#[tokio::test]
async fn stores_and_queues_opened_at_once_on_new_files_all_open() {
    // `trawl serve --no-pools` and `trawl work` started together on a new data directory:
    // one runs the migrations, the others wait for it.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("trawl.sqlite");
    let queue_path = dir.path().join("queue.sqlite");
    let opened = futures_util::future::join_all((0..4).map(|_| {
        let path = path.clone();
        let queue_path = queue_path.clone();
        async move {
            let store = trawl::store::Store::open(&path).await?;
            let queue = trawl::queue::Queue::open(
                &queue_path,
                "at-once",
                trawl::runner::Config::default().queue_settings(),
            )
            .await
            .map_err(|error| anyhow::anyhow!("{error}"))?;
            store.ping().await?;
            queue.close().await;
            anyhow::Ok(())
        }
    }))
    .await;
    for result in opened {
        result.expect("every open succeeds");
    }
}

async fn jobs_crawls_and_pages_belong_to_their_tenant(db: TestDb) {
    use trawl::tenant::{Scope, Tenant};
    let store = db.open().await;
    let acme = Tenant::new("acme").expect("valid");
    let (of_acme, of_default, admin) = (Scope::of(acme.clone()), Scope::default(), Scope::admin());
    let id = ulid::Ulid::generate().to_string();
    let job = NewJob {
        tenant: acme.clone(),
        ..new_job(&id, "t")
    };
    store.create_jobs(&[job]).await.expect("records");
    assert!(store.job_in(&of_acme, &id).await.expect("reads").is_some());
    assert!(
        store
            .job_in(&of_default, &id)
            .await
            .expect("reads")
            .is_none()
    );
    assert!(store.job_in(&admin, &id).await.expect("reads").is_some());

    let url = "https://example.com/tenant";
    let info = page_info(url);
    store.begin_attempt(&id).await.expect("starts");
    let page = trawl::store::NewPage {
        tenant: acme.as_str(),
        ..new_page(&info, "acme's text", b"<p>acme's text</p>")
    };
    store
        .finish_with_page(&id, page, |_| "{}".to_owned())
        .await
        .expect("stores");
    let read = |scope: Scope| {
        let store = store.clone();
        async move { store.latest_page(&scope, url).await.expect("reads") }
    };
    let mine = read(of_acme.clone()).await.expect("acme's page");
    assert_eq!(
        (mine.id.as_str(), mine.tenant.as_str()),
        (id.as_str(), "acme")
    );
    assert!(read(of_default.clone()).await.is_none());
    assert_eq!(read(admin.clone()).await.expect("all").id, id);

    // A copy for the default tenant: same blobs, its own id, found by the default tenant.
    let copy_id = ulid::Ulid::generate().to_string();
    let copy = store
        .adopt_page(&id, &copy_id, &Tenant::default())
        .await
        .expect("adopts")
        .expect("copied");
    assert_eq!(
        (copy.id.as_str(), copy.tenant.as_str()),
        (copy_id.as_str(), "default")
    );
    assert_eq!(copy.content_hash, mine.content_hash);
    assert_eq!(copy.fetched_at_ms, mine.fetched_at_ms);
    assert_eq!(read(of_default).await.expect("the copy").id, copy_id);
    assert_eq!(read(of_acme.clone()).await.expect("still acme's").id, id);
    // Adopting again returns the same copy.
    let again = store
        .adopt_page(&id, &copy_id, &Tenant::default())
        .await
        .expect("adopts")
        .expect("copied");
    assert_eq!(again, copy);

    let crawl_id = ulid::Ulid::generate().to_string();
    let spec = trawl_workers::job::CrawlSpec::new(vec![url.to_owned()]);
    store
        .create_crawl(
            &crawl_id,
            &acme,
            &serde_json::to_value(&spec).expect("json"),
        )
        .await
        .expect("creates");
    assert!(
        store
            .crawl_in(&of_acme, &crawl_id)
            .await
            .expect("reads")
            .is_some()
    );
    assert!(
        store
            .crawl_in(&Scope::default(), &crawl_id)
            .await
            .expect("reads")
            .is_none()
    );
    assert!(
        store
            .crawl_in(&admin, &crawl_id)
            .await
            .expect("reads")
            .is_some()
    );
}

/// Listings page by job id (a keyset cursor) with filters; a job served from the cache names
/// the page it was served and is marked cached; a crawl's and a batch's pages include the
/// pages served to their jobs from the cache, each once.
async fn jobs_and_pages_are_listed_by_batch_crawl_status_and_host_with_a_cursor(db: TestDb) {
    let store = db.open().await;
    let batch = format!("L{}", ulid::Ulid::generate());
    let crawl = format!("C{}", ulid::Ulid::generate());
    let mut ids: Vec<String> = (0..3).map(|_| ulid::Ulid::generate().to_string()).collect();
    ids.sort();
    let jobs: Vec<NewJob> = ids
        .iter()
        .map(|id| NewJob {
            crawl_id: Some(crawl.clone()),
            ..new_job(id, &batch)
        })
        .collect();
    store.create_jobs(&jobs).await.expect("creates");
    let url = format!(
        "https://h{}.test/a",
        ulid::Ulid::generate().to_string().to_lowercase()
    );
    let info = page_info(&url);
    let page = new_page(&info, "a page", b"<p>a page</p>");
    store
        .finish_with_page(&ids[0], page, |hash| {
            serde_json::json!({ "hash": hash }).to_string()
        })
        .await
        .expect("stores");
    store
        .finish(
            &ids[1],
            &Outcome::Failed(JobError::new(ErrorCode::HttpStatus, "http status 404")),
        )
        .await
        .expect("ends");
    store
        .finish(
            &ids[2],
            &Outcome::Succeeded {
                result: serde_json::json!({"cached": true}),
                page_id: Some(ids[0].clone()),
            },
        )
        .await
        .expect("ends");

    let by_batch = trawl::store::JobFilter {
        batch_id: Some(batch.clone()),
        ..Default::default()
    };
    let first = store.list_jobs(&by_batch, None, 2).await.expect("lists");
    let ids_of = |entries: &[trawl::store::JobEntry]| -> Vec<String> {
        entries.iter().map(|entry| entry.job_id.clone()).collect()
    };
    assert_eq!(ids_of(&first), ids[..2]);
    let rest = store
        .list_jobs(&by_batch, Some(first[1].job_id.as_str()), 2)
        .await
        .expect("lists");
    assert_eq!(ids_of(&rest), ids[2..]);
    let served = &rest[0];
    assert!(served.cached, "{served:?}");
    assert_eq!(served.page_id.as_deref(), Some(ids[0].as_str()));
    assert_eq!(served.final_url.as_deref(), Some(url.as_str()));
    assert_eq!(served.title.as_deref(), Some("t"));
    assert!(!first[0].cached);
    let failed = store
        .list_jobs(
            &trawl::store::JobFilter {
                crawl_id: Some(crawl.clone()),
                status: Some(Status::Failed),
                ..Default::default()
            },
            None,
            10,
        )
        .await
        .expect("lists");
    assert_eq!(ids_of(&failed), [ids[1].clone()]);
    assert_eq!(failed[0].error_code.as_deref(), Some("http_status"));
    assert_eq!(
        store
            .crawl_ended_since(&crawl, 0, 10)
            .await
            .expect("reads")
            .len(),
        3
    );

    let host = url::Url::parse(&url)
        .expect("url")
        .host_str()
        .expect("host")
        .to_owned();
    let pages = |host: Option<&str>, crawl_id: Option<&str>| trawl::store::PageFilter {
        host: host.map(str::to_owned),
        crawl_id: crawl_id.map(str::to_owned),
        tenant: None,
    };
    let listed = store
        .list_pages(&pages(Some(host.as_str()), None), None, 10)
        .await
        .expect("lists");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].page_id, ids[0]);
    assert_eq!(listed[0].status, 200);
    assert!(
        store
            .list_pages(&pages(Some("other.test"), None), None, 10)
            .await
            .expect("lists")
            .is_empty()
    );
    assert_eq!(
        store
            .list_pages(&pages(None, Some(crawl.as_str())), None, 10)
            .await
            .expect("lists")
            .len(),
        1
    );
    let exported = store
        .export_pages(None, None, Some(crawl.as_str()), 0, 10)
        .await
        .expect("exports");
    assert_eq!(exported.len(), 1, "the page once, though two jobs have it");
    assert_eq!(
        store
            .request_archive_all(Some(crawl.as_str()))
            .await
            .expect("asks"),
        1
    );
    assert_eq!(
        store
            .request_archive_all(Some(crawl.as_str()))
            .await
            .expect("asks"),
        0,
        "already pending"
    );
}

/// Migration 0012: a store migrated up to 0011 with a job, its page and a crawl, then opened
/// by this version: they are the default tenant's, and archived pages go back to the archive
/// pool (its index is rebuilt with tenants).
async fn data_from_before_tenants_is_the_default_tenants(db: TestDb) {
    let dialect = if db.url.starts_with("sqlite") {
        "sqlite"
    } else {
        "postgres"
    };
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("migrations")
        .join(dialect);
    let before = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(&source).expect("migrations") {
        let path = entry.expect("entry").path();
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        if name.as_str() < "0012" {
            std::fs::copy(&path, before.path().join(&name)).expect("copies");
        }
    }
    let migrator = sqlx::migrate::Migrator::new(before.path())
        .await
        .expect("migrations up to 0011");
    let info = serde_json::to_string(&page_info("https://example.com/old"))
        .expect("json")
        .replace('\'', "''");
    let statements = [
        "INSERT INTO jobs (id, kind, url, params, status, max_attempts, created_at, page_id)
         VALUES ('old-job', 'fetch', 'https://example.com/old', '{}', 'succeeded', 3, 'now', 'old-job')",
        "INSERT INTO blobs (sha256, codec, size, bytes) VALUES ('h', 'none', 0, '')",
        "INSERT INTO pages (id, url, final_url, options_hash, status, content_type, fetched_at,
             fetched_at_ms, content_hash, raw_hash, lines, info, archive_state)
         VALUES ('old-job', 'https://example.com/old', 'https://example.com/old', 'o', 200,
             'text/html', 'now', 1, 'h', 'h', 0, 'INFO', 'archived')",
        "INSERT INTO crawls (id, spec, status, created_at)
         VALUES ('old-crawl', '{\"seeds\": [\"https://example.com/\"]}', 'running', 'now')",
    ];
    if dialect == "sqlite" {
        let pool = sqlx::SqlitePool::connect(&format!("{}?mode=rwc", db.url))
            .await
            .expect("connects");
        migrator.run(&pool).await.expect("migrates to 0011");
        for statement in statements {
            let statement = statement.replace("INFO", &info);
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&pool)
                .await
                .expect("inserts");
        }
        pool.close().await;
    } else {
        let pool = sqlx::PgPool::connect(&db.url).await.expect("connects");
        migrator.run(&pool).await.expect("migrates to 0011");
        for statement in statements {
            let statement = statement
                .replace("0, '')", "0, '\\x')")
                .replace("INFO", &info);
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&pool)
                .await
                .expect("inserts");
        }
        pool.close().await;
    }

    let store = db.open().await;
    let default = trawl::tenant::Scope::default();
    let job = store.job_in(&default, "old-job").await.expect("reads");
    assert_eq!(job.expect("the default tenant's").tenant, "default");
    let acme = trawl::tenant::Scope::of(trawl::tenant::Tenant::new("acme").expect("valid"));
    assert!(
        store
            .job_in(&acme, "old-job")
            .await
            .expect("reads")
            .is_none()
    );
    let page = store
        .latest_page(&default, "https://example.com/old")
        .await
        .expect("reads")
        .expect("the default tenant's");
    assert_eq!(page.tenant, "default");
    assert!(
        store
            .crawl_in(&default, "old-crawl")
            .await
            .expect("reads")
            .is_some()
    );
    assert_eq!(store.archive_pending().await.expect("counts"), 1);
}

async fn idempotency_keys_replay_their_answer_refuse_other_requests_and_expire(db: TestDb) {
    let store = db.open().await;
    let (now, expired_before) = (1_000_000, 0);
    let claim =
        |owner: &'static str, key: &'static str, request: &'static str, now: i64, before: i64| {
            let store = store.clone();
            async move {
                store
                    .claim_idempotency_key(owner, key, request, now, before)
                    .await
                    .expect("claims")
            }
        };
    assert_eq!(
        claim("a", "k", "h1", now, expired_before).await,
        IdempotencyClaim::Claimed
    );
    assert_eq!(
        claim("a", "k", "h1", now, expired_before).await,
        IdempotencyClaim::InProgress
    );
    store
        .complete_idempotency_key("a", "k", 202, r#"{"batch_id": "b1"}"#)
        .await
        .expect("completes");
    assert_eq!(
        claim("a", "k", "h1", now, expired_before).await,
        IdempotencyClaim::Replay {
            status: 202,
            body: r#"{"batch_id": "b1"}"#.to_owned()
        }
    );
    assert_eq!(
        claim("a", "k", "h2", now, expired_before).await,
        IdempotencyClaim::Conflict
    );
    // Keys belong to their owner.
    assert_eq!(
        claim("b", "k", "h2", now, expired_before).await,
        IdempotencyClaim::Claimed
    );
    // A released key (its request failed) can be claimed again; a completed one is kept.
    store
        .release_idempotency_key("b", "k")
        .await
        .expect("releases");
    store
        .release_idempotency_key("a", "k")
        .await
        .expect("releases");
    assert_eq!(
        claim("b", "k", "h3", now, expired_before).await,
        IdempotencyClaim::Claimed
    );
    assert_eq!(
        claim("a", "k", "h2", now, expired_before).await,
        IdempotencyClaim::Conflict
    );
    // Once expired, the key is new again.
    assert_eq!(
        claim("a", "k", "h2", now + 10, now + 1).await,
        IdempotencyClaim::Claimed
    );
}
