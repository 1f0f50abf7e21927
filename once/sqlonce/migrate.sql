-- The table of once records (package sqlonce). Plain SQL: run it with
-- your migration tool, or call sqlonce.Migrate. Safe to run again.
CREATE TABLE IF NOT EXISTS dlock_once (
    key          text        PRIMARY KEY,
    state        smallint    NOT NULL CHECK (state IN (1, 2, 3)), -- 1 in progress, 2 completed, 3 failed
    token        bigint      NOT NULL,  -- fencing token of the claiming lease
    payload_hash bytea       NOT NULL,  -- SHA-256 of the payload
    result       bytea,                 -- set when completed
    expires_at   timestamptz NOT NULL   -- rows past it are ignored, then overwritten or purged
);
CREATE INDEX IF NOT EXISTS dlock_once_expires_at ON dlock_once (expires_at);
