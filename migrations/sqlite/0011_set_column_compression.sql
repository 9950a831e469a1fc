-- PostgreSQL's migration of this number sets how it compresses large values; SQLite stores
-- values as they are (blobs are zstd already), so there is nothing to change here. The file
-- keeps both dialects on the same numbering.
SELECT 1;
