-- Where a job's events are POSTed (signed), if anywhere.
ALTER TABLE jobs ADD COLUMN webhook TEXT;
