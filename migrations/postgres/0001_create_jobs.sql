-- Jobs as trawl sees them: the queue (apalis) only delivers; this table is the record of what
-- each job is, how it ended, and the order in which jobs ended (done_seq).
-- done_seq is drawn from jobs_done_seq by the transaction that ends a job, under a
-- transaction-scoped advisory lock taken last, so values grow in commit order (gaps allowed).
CREATE SEQUENCE jobs_done_seq AS BIGINT;
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,      -- ULID, chosen by the producer
    kind         TEXT NOT NULL,
    batch_id     TEXT,                  -- the `trawl run` or API batch it belongs to
    crawl_id     TEXT,
    url          TEXT NOT NULL,
    params       TEXT NOT NULL,         -- the job's JSON form
    status       TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'dead', 'cancelled')),
    attempts     BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL,
    result       TEXT,                  -- the job result JSON, once succeeded
    error        TEXT,                  -- the last error JSON ({code, message, ...})
    error_code   TEXT,
    page_id      TEXT,
    created_at   TEXT NOT NULL,
    started_at   TEXT,
    finished_at  TEXT,
    done_seq     BIGINT UNIQUE          -- increasing in the order jobs ended
);
CREATE INDEX jobs_batch_done ON jobs (batch_id, done_seq);
CREATE INDEX jobs_status ON jobs (status);
