-- The side table of fencing high-water marks: one row per resource, holding
-- the highest fencing token a guarded write for it has carried.
CREATE TABLE IF NOT EXISTS dlock_fence (
    resource text PRIMARY KEY,
    token    bigint NOT NULL CHECK (token >= 0)
);
