-- A batch's jobs that have not ended, so that the check made after each of its jobs ends (is
-- this the last one? `Store::claim_batch_completion`) reads those few jobs, not every job of the
-- batch that ended before: through `jobs_batch_id` it walked them in id order, O(jobs ended) a
-- check and quadratic over a big batch. Crawl jobs (no batch) are left out.
CREATE INDEX jobs_batch_open ON jobs (batch_id)
    WHERE batch_id IS NOT NULL AND status IN ('queued', 'running');
