-- Tenants: every job, batch, crawl and page carries the tenant it was made for (the API
-- token's tenant; `default` for the command line and a server without tokens), and every read
-- is filtered by it. What existed before belongs to the `default` tenant. A session's owner is
-- its tenant's name from now on (it was the token's fingerprint).
ALTER TABLE jobs ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE batches ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE crawls ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
ALTER TABLE pages ADD COLUMN tenant TEXT NOT NULL DEFAULT 'default';
UPDATE sessions SET owner = 'default';
-- A tenant's newest page of a URL (read, grep).
CREATE INDEX pages_tenant_url ON pages (tenant, url, fetched_at_ms);
CREATE INDEX pages_tenant_final_url ON pages (tenant, final_url, fetched_at_ms);
-- The archive index gained a tenant field (in a new directory, `index-v2`): archived pages are
-- archived again into it (their WARC records, already written, are not written again).
UPDATE pages SET archive_state = 'pending' WHERE archive_state = 'archived';
