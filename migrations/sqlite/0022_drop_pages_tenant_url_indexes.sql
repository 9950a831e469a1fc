-- A page's URL indexes once, not twice. `pages_tenant_url` and `pages_tenant_final_url`
-- (0012) repeated `pages_url` and `pages_final_url` with the tenant in front. The reads that
-- name a URL either take the tenant as a filter that may be absent (`latest_page`: `$2 IS NULL
-- OR tenant = $2`), which no index led by the tenant can serve, or look a URL's few versions
-- up by `url` and keep the tenant's (`versions_in`). Each stored page still paid for two more
-- inserts at a random place of a big B-tree (a page of the index written to the log at each
-- group commit, and again at the checkpoint).
DROP INDEX IF EXISTS pages_tenant_url;
DROP INDEX IF EXISTS pages_tenant_final_url;
