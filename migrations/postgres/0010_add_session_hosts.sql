-- Distributed sessions: the workers that host agent sessions (each `trawl work` with a browser
-- and sessions.listen registers here and renews its row every few seconds), and the host a
-- session lives on, so any API process can route the session's actions to it.
CREATE TABLE session_hosts (
    url      TEXT PRIMARY KEY,  -- where the API reaches the worker (sessions.advertise)
    capacity BIGINT NOT NULL,   -- sessions it takes at most (sessions.max_sessions)
    open     BIGINT NOT NULL,   -- sessions open on it at its last renewal
    seen_ms  BIGINT NOT NULL    -- its last renewal, Unix milliseconds
);
ALTER TABLE sessions ADD COLUMN host TEXT;  -- the host's url; NULL: the process that opened it
