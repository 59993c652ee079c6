-- Runs, their jobs (the hot queue), step results and payloads.
CREATE TABLE tm_definitions (
    digest     TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at REAL NOT NULL
);

CREATE TABLE tm_runs (
    id              TEXT PRIMARY KEY,
    root_id         TEXT NOT NULL,
    parent_id       TEXT,
    parent_job      INTEGER,
    child_index     INTEGER,
    scope           TEXT NOT NULL,
    flow_name       TEXT NOT NULL,
    digest          TEXT NOT NULL REFERENCES tm_definitions (digest),
    status          TEXT NOT NULL,
    concurrency_key TEXT,
    created_at      REAL NOT NULL,
    started_at      REAL,
    finished_at     REAL,
    error           TEXT
);
CREATE INDEX tm_runs_root ON tm_runs (root_id);
CREATE INDEX tm_runs_parent_job ON tm_runs (parent_job);
CREATE INDEX tm_runs_top ON tm_runs (created_at) WHERE parent_id IS NULL;

CREATE TABLE tm_payloads (
    run_id TEXT NOT NULL,
    key    TEXT NOT NULL,
    body   TEXT NOT NULL,
    PRIMARY KEY (run_id, key)
);

CREATE TABLE tm_jobs (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id      TEXT NOT NULL,
    step_id     TEXT NOT NULL,
    attempt     INTEGER NOT NULL,
    status      TEXT NOT NULL,
    run_at      REAL NOT NULL,
    worker      TEXT,
    lease_until REAL,
    epoch       INTEGER NOT NULL DEFAULT 0,
    created_at  REAL NOT NULL,
    started_at  REAL,
    finished_at REAL,
    error       TEXT,
    UNIQUE (run_id, step_id, attempt)
);
CREATE INDEX tm_jobs_ready ON tm_jobs (run_at, id) WHERE status = 'queued';
CREATE INDEX tm_jobs_leases ON tm_jobs (lease_until) WHERE status = 'running';

CREATE TABLE tm_results (
    run_id      TEXT NOT NULL,
    step_id     TEXT NOT NULL,
    job_id      INTEGER NOT NULL,
    status      TEXT NOT NULL,
    body        TEXT NOT NULL,
    recorded_at REAL NOT NULL,
    PRIMARY KEY (run_id, step_id)
);
