-- One row per fetch that produced a page (each fetch of a URL is a version).
CREATE TABLE pages (
    id              TEXT PRIMARY KEY,   -- the id of the job that fetched it
    rowid           BIGINT GENERATED ALWAYS AS IDENTITY UNIQUE, -- insertion order (SQLite's rowid), for cursors
    url             TEXT NOT NULL,      -- normalised requested URL (the cache key's first half)
    final_url       TEXT NOT NULL,      -- normalised URL after redirects
    options_hash    TEXT NOT NULL,      -- hash of the options that change the page (the second half)
    status          BIGINT NOT NULL,
    content_type    TEXT NOT NULL,
    title           TEXT,
    fetched_at      TEXT NOT NULL,
    fetched_at_ms   BIGINT NOT NULL,
    content_hash    TEXT NOT NULL REFERENCES blobs (sha256),
    raw_hash        TEXT NOT NULL REFERENCES blobs (sha256),
    lines           BIGINT NOT NULL,    -- lines in the text, for paging through it
    info            TEXT NOT NULL       -- the page's description (fetch::PageInfo JSON)
);
CREATE INDEX pages_url ON pages (url, fetched_at_ms);
CREATE INDEX pages_final_url ON pages (final_url, fetched_at_ms);
