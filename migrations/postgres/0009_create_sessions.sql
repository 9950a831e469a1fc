-- Agent sessions and their replay log: every action, its outcome and its screenshot (a blob).
-- Credentials a session was opened with are never stored.
CREATE TABLE sessions (
    id           TEXT PRIMARY KEY,   -- ULID
    owner        TEXT NOT NULL,      -- fingerprint of the API token that opened it
    profile      TEXT NOT NULL,      -- desktop | mobile
    created_at   TEXT NOT NULL,
    closed_at    TEXT,
    close_reason TEXT                -- closed | expired | browser_failed | shutdown
);
CREATE TABLE session_steps (
    session_id   TEXT NOT NULL,
    seq          BIGINT NOT NULL,   -- 1, 2, … in the order the actions ran
    action       TEXT NOT NULL,      -- the action's JSON form
    outcome      TEXT NOT NULL,      -- its outcome's JSON form, without the image
    image_sha256 TEXT,               -- the step's screenshot in blobs
    image_type   TEXT,               -- image/jpeg or image/png
    created_at   TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
