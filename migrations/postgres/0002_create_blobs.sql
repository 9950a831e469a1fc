-- Content-addressed blobs: raw bodies and extracted texts, zstd-compressed, stored once.
CREATE TABLE blobs (
    sha256 TEXT PRIMARY KEY,            -- of the uncompressed bytes, hex
    codec  TEXT NOT NULL CHECK (codec IN ('zstd', 'none')),
    size   BIGINT NOT NULL,             -- uncompressed bytes
    bytes  BYTEA NOT NULL
);
