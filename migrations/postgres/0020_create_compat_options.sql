-- What a Firecrawl-compatible crawl or batch scrape asked each page's document to hold (its
-- formats), by the crawl's or the batch's id: the status routes build the documents from it.
CREATE TABLE compat_options (
    id         TEXT PRIMARY KEY, -- the crawl id or the batch id
    options    TEXT NOT NULL,    -- the document options, JSON
    created_ms BIGINT NOT NULL   -- when it was recorded, Unix milliseconds
);
