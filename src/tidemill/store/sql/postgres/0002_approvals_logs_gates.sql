-- Approvals, step logs, and the lock rows behind per-flow concurrency limits.
CREATE TABLE tm_approvals (
    id         TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL,
    root_id    TEXT NOT NULL,
    job_id     BIGINT NOT NULL,
    step_id    TEXT NOT NULL,
    message    TEXT NOT NULL,
    approvers  TEXT NOT NULL,
    on_timeout TEXT NOT NULL,
    status     TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION,
    decided_at DOUBLE PRECISION,
    decided_by TEXT,
    comment    TEXT
);
CREATE INDEX tm_approvals_root ON tm_approvals (root_id);
CREATE INDEX tm_approvals_expiry ON tm_approvals (expires_at) WHERE status = 'pending';

CREATE TABLE tm_logs (
    id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id  TEXT NOT NULL,
    job_id  BIGINT NOT NULL,
    stream  TEXT NOT NULL,
    body    TEXT NOT NULL,
    at      DOUBLE PRECISION NOT NULL
);
CREATE INDEX tm_logs_run ON tm_logs (run_id, id);

CREATE TABLE tm_gates (
    key TEXT PRIMARY KEY
);
CREATE INDEX tm_runs_gate ON tm_runs (concurrency_key, created_at) WHERE status = 'queued';
