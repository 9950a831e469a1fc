-- Crawls: the spec, the state and the progress counters; the fetch jobs of a crawl carry its
-- id (jobs.crawl_id), and every URL it has seen is in crawl_urls (the dedupe set).
CREATE TABLE crawls (
    id                TEXT PRIMARY KEY,   -- ULID
    spec              TEXT NOT NULL,      -- the crawl's JSON form (job::CrawlSpec)
    status            TEXT NOT NULL CHECK (status IN ('running', 'completed', 'cancelled')),
    discovered        BIGINT NOT NULL DEFAULT 0,  -- distinct URLs seen (seeds, links, sitemaps)
    queued            BIGINT NOT NULL DEFAULT 0,  -- fetch jobs created
    fetched           BIGINT NOT NULL DEFAULT 0,  -- pages stored
    failed            BIGINT NOT NULL DEFAULT 0,  -- fetch jobs failed or dead
    skipped_scope     BIGINT NOT NULL DEFAULT 0,  -- links out of scope or filtered by globs
    skipped_robots    BIGINT NOT NULL DEFAULT 0,  -- disallowed by robots.txt
    skipped_depth     BIGINT NOT NULL DEFAULT 0,  -- beyond max_depth
    skipped_limit     BIGINT NOT NULL DEFAULT 0,  -- beyond max_pages
    skipped_duplicate BIGINT NOT NULL DEFAULT 0,  -- pages whose canonical URL was already fetched
    created_at        TEXT NOT NULL,
    finished_at       TEXT
);
CREATE TABLE crawl_urls (
    crawl_id TEXT NOT NULL,
    url_key  TEXT NOT NULL,               -- crawl_key(url): normalised, tracking parameters removed
    PRIMARY KEY (crawl_id, url_key)
);
CREATE INDEX jobs_crawl_status ON jobs (crawl_id, status);
