-- A running job asked to stop: the runner ends it as cancelled at its next safe point.
-- An integer (0 or 1), as in SQLite, so both stores share their statements.
ALTER TABLE jobs ADD COLUMN cancel_requested BIGINT NOT NULL DEFAULT 0;
