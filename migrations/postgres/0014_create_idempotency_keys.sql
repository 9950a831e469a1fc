-- Idempotency keys of POST /v1/jobs, /v1/crawls and /v1/sessions: the first answer given to a
-- key (per token), kept 24 h, so a request sent again gets that answer instead of acting twice.
CREATE TABLE idempotency_keys (
    owner      TEXT NOT NULL,    -- the token's fingerprint ('anonymous' on a server without tokens)
    idem_key   TEXT NOT NULL,    -- the Idempotency-Key header
    request    TEXT NOT NULL,    -- sha256 of the method, the path and the body
    status     BIGINT,           -- the answer's HTTP status; NULL while the first request runs
    response   TEXT,             -- the answer's body
    created_ms BIGINT NOT NULL,  -- when the key was first used, Unix milliseconds
    PRIMARY KEY (owner, idem_key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_ms);
