-- Large values are stored compressed by PostgreSQL itself (TOAST, above about 2 kB). Its
-- default, pglz, took about 8 % of all CPU in the crawl benchmark: job results (the page's
-- text, up to max_chars) and page descriptions (with their links) are compressed with lz4
-- instead, several times faster; blobs are zstd already, so they are stored as they are.
-- Values written before keep their compression.
ALTER TABLE jobs ALTER COLUMN result SET COMPRESSION lz4;
ALTER TABLE pages ALTER COLUMN info SET COMPRESSION lz4;
ALTER TABLE blobs ALTER COLUMN bytes SET STORAGE EXTERNAL;
