-- What the archive pool needs of a page: the response headers and the address it came from
-- (for WARC records), whether it is waiting to be archived, and where its WARC record is.
ALTER TABLE pages ADD COLUMN headers TEXT;            -- response headers, JSON [[name, value], ...]
ALTER TABLE pages ADD COLUMN ip TEXT;                 -- the address the response came from
ALTER TABLE pages ADD COLUMN archive_state TEXT CHECK (archive_state IN ('pending', 'archived', 'failed'));
ALTER TABLE pages ADD COLUMN archived_at TEXT;
ALTER TABLE pages ADD COLUMN warc_record_id TEXT;     -- its response (or revisit) record
ALTER TABLE pages ADD COLUMN warc_file TEXT;
ALTER TABLE pages ADD COLUMN warc_offset BIGINT;
CREATE INDEX pages_archive_pending ON pages (rowid) WHERE archive_state = 'pending';
