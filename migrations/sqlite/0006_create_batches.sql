-- Batches submitted together (API), so that their completion is announced exactly once.
CREATE TABLE batches (
    id                 TEXT PRIMARY KEY,
    webhook            TEXT,
    total              INTEGER NOT NULL,
    created_at         TEXT NOT NULL,
    completed_notified INTEGER NOT NULL DEFAULT 0
);
