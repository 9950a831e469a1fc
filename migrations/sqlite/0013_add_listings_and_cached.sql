-- Listing a batch's or a crawl's jobs page by page (keyset on the job id), and following a
-- crawl's ended jobs in order (`trawl crawl --out`).
CREATE INDEX jobs_batch_id ON jobs (batch_id, id);
CREATE INDEX jobs_crawl_id ON jobs (crawl_id, id);
CREATE INDEX jobs_crawl_done ON jobs (crawl_id, done_seq);
-- Crawl pages served from the page cache, counted apart from the pages fetched.
ALTER TABLE crawls ADD COLUMN cached INTEGER NOT NULL DEFAULT 0;
