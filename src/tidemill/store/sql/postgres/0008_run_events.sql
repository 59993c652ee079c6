-- A run's events, in order: what its steps, logs, model turns, tool calls and waits did,
-- written in the transaction of the change each describes (for live runs over SSE).
CREATE TABLE tm_events (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    root_id TEXT NOT NULL,
    run_id  TEXT NOT NULL,
    job_id  BIGINT,
    step_id TEXT,
    kind    TEXT NOT NULL,
    data    TEXT NOT NULL DEFAULT '{}',
    at      DOUBLE PRECISION NOT NULL
);
CREATE INDEX tm_events_root ON tm_events (root_id, id)
;
