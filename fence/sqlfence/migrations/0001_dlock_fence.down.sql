DROP TABLE IF EXISTS dlock_fence;
