-- Batches submitted together (API), so that their completion is announced exactly once.
CREATE TABLE batches (
    id                 TEXT PRIMARY KEY,
    webhook            TEXT,
    total              BIGINT NOT NULL,
    created_at         TEXT NOT NULL,
    completed_notified BIGINT NOT NULL DEFAULT 0   -- 0 or 1, as in SQLite
);
