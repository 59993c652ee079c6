-- Retention: ended runs are pruned with everything they own, and a flow definition
-- goes with the last run that ran it (found by this index, not by a scan of the runs).
CREATE INDEX tm_runs_digest ON tm_runs (digest);
