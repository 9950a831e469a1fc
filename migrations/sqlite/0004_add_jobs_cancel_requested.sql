-- A running job asked to stop: the runner ends it as cancelled at its next safe point.
ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;
