-- Retention: ended runs are pruned with everything they own, and a flow definition
-- goes with the last run that ran it (found by this index, not by a scan of the runs).
CREATE INDEX tm_runs_digest ON tm_runs (digest);

-- A run whose steps returned a secret they resolved (their results are kept as they are,
-- for the steps after them): its result is shown with those secrets masked
-- (the `shown_result` payload), made when it ends.
ALTER TABLE tm_runs ADD COLUMN masked INTEGER NOT NULL DEFAULT 0;

-- `GET /api/approvals` reads approvals a page at a time, oldest first, by status.
CREATE INDEX tm_approvals_listed ON tm_approvals (status, created_at, id);
