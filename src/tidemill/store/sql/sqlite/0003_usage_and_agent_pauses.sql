-- Usage of every model call, and approvals that pause an agent step (not only approval steps).
CREATE TABLE tm_usage (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id        TEXT NOT NULL,
    root_id       TEXT NOT NULL,
    step_id       TEXT NOT NULL,
    job_id        INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,
    model         TEXT NOT NULL,
    provider      TEXT NOT NULL,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd      REAL,
    latency_ms    REAL NOT NULL,
    error         TEXT,
    experiment_id TEXT,
    exposure_id   TEXT,
    at            REAL NOT NULL
);
CREATE INDEX tm_usage_root ON tm_usage (root_id, id);

ALTER TABLE tm_approvals ADD COLUMN kind TEXT NOT NULL DEFAULT 'step';
ALTER TABLE tm_approvals ADD COLUMN details TEXT;
