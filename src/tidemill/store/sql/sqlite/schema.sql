-- The whole current schema, for a fresh database. Keep it equal to the migrations
-- applied in order (tests/store/test_migrations.py checks it).
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
    error           TEXT,
    run_as          TEXT,
    source          TEXT,
    memory_id       TEXT
);
CREATE INDEX tm_runs_root ON tm_runs (root_id);
CREATE INDEX tm_runs_parent_job ON tm_runs (parent_job);
CREATE INDEX tm_runs_top ON tm_runs (created_at) WHERE parent_id IS NULL;
CREATE INDEX tm_runs_gate ON tm_runs (concurrency_key, created_at) WHERE status = 'queued';

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
CREATE TABLE tm_approvals (
    id         TEXT PRIMARY KEY,
    run_id     TEXT NOT NULL,
    root_id    TEXT NOT NULL,
    job_id     INTEGER NOT NULL,
    step_id    TEXT NOT NULL,
    message    TEXT NOT NULL,
    approvers  TEXT NOT NULL,
    on_timeout TEXT NOT NULL,
    status     TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL,
    decided_at REAL,
    decided_by TEXT,
    comment    TEXT,
    kind       TEXT NOT NULL DEFAULT 'step',
    details    TEXT
);
CREATE INDEX tm_approvals_root ON tm_approvals (root_id);
CREATE INDEX tm_approvals_expiry ON tm_approvals (expires_at) WHERE status = 'pending';

CREATE TABLE tm_logs (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id  TEXT NOT NULL,
    job_id  INTEGER NOT NULL,
    stream  TEXT NOT NULL,
    body    TEXT NOT NULL,
    at      REAL NOT NULL
);
CREATE INDEX tm_logs_run ON tm_logs (run_id, id);

CREATE TABLE tm_gates (
    key TEXT PRIMARY KEY
);

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

CREATE TABLE tm_agent_memory (
    memory_id TEXT NOT NULL,
    step_key  TEXT NOT NULL,
    seq       INTEGER NOT NULL,
    role      TEXT NOT NULL,
    content   TEXT NOT NULL,
    run_id    TEXT NOT NULL,
    at        REAL NOT NULL,
    PRIMARY KEY (memory_id, step_key, seq)
);

CREATE TABLE tm_ws_workspaces (
    name       TEXT PRIMARY KEY,
    data_key   TEXT NOT NULL,
    generation INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL
);

CREATE TABLE tm_ws_users (
    workspace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    is_admin   INTEGER NOT NULL DEFAULT 0,
    disabled   INTEGER NOT NULL DEFAULT 0,
    created_at REAL NOT NULL,
    PRIMARY KEY (workspace, name)
);

CREATE TABLE tm_ws_groups (
    workspace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    summary    TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL,
    PRIMARY KEY (workspace, name)
);

CREATE TABLE tm_ws_members (
    workspace  TEXT NOT NULL,
    group_name TEXT NOT NULL,
    user_name  TEXT NOT NULL,
    PRIMARY KEY (workspace, group_name, user_name)
);

CREATE TABLE tm_ws_folders (
    workspace  TEXT NOT NULL,
    name       TEXT NOT NULL,
    summary    TEXT NOT NULL DEFAULT '',
    created_by TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (workspace, name)
);

CREATE TABLE tm_ws_grants (
    workspace TEXT NOT NULL,
    target    TEXT NOT NULL,
    grantee   TEXT NOT NULL,
    role      TEXT NOT NULL,
    PRIMARY KEY (workspace, target, grantee)
);

CREATE TABLE tm_ws_items (
    workspace     TEXT NOT NULL,
    path          TEXT NOT NULL,
    kind          TEXT NOT NULL,
    summary       TEXT NOT NULL DEFAULT '',
    description   TEXT NOT NULL DEFAULT '',
    resource_type TEXT,
    secret        INTEGER NOT NULL DEFAULT 0,
    body          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    updated_by    TEXT NOT NULL,
    updated_at    REAL NOT NULL,
    deleted_at    REAL,
    PRIMARY KEY (workspace, path)
);

CREATE TABLE tm_ws_versions (
    workspace     TEXT NOT NULL,
    path          TEXT NOT NULL,
    version       INTEGER NOT NULL,
    kind          TEXT NOT NULL,
    summary       TEXT NOT NULL DEFAULT '',
    description   TEXT NOT NULL DEFAULT '',
    resource_type TEXT,
    body          TEXT NOT NULL,
    message       TEXT NOT NULL DEFAULT '',
    created_by    TEXT NOT NULL,
    created_at    REAL NOT NULL,
    PRIMARY KEY (workspace, path, version)
);

CREATE TABLE tm_ws_drafts (
    workspace     TEXT NOT NULL,
    path          TEXT NOT NULL,
    owner         TEXT NOT NULL,
    kind          TEXT NOT NULL,
    summary       TEXT NOT NULL DEFAULT '',
    description   TEXT NOT NULL DEFAULT '',
    resource_type TEXT,
    body          TEXT NOT NULL,
    updated_at    REAL NOT NULL,
    PRIMARY KEY (workspace, path, owner)
);

CREATE TABLE tm_ws_audit (
    id        INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace TEXT NOT NULL,
    at        REAL NOT NULL,
    actor     TEXT NOT NULL,
    action    TEXT NOT NULL,
    path      TEXT,
    details   TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX tm_ws_audit_at ON tm_ws_audit (workspace, id);

CREATE TABLE tm_ws_passwords (
    workspace  TEXT NOT NULL,
    user_name  TEXT NOT NULL,
    hash       TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (workspace, user_name)
);

CREATE TABLE tm_ws_tokens (
    id           TEXT PRIMARY KEY,
    workspace    TEXT NOT NULL,
    kind         TEXT NOT NULL,
    user_name    TEXT NOT NULL,
    name         TEXT NOT NULL DEFAULT '',
    hash         TEXT NOT NULL,
    scopes       TEXT NOT NULL DEFAULT '[]',
    csrf_hash    TEXT,
    created_at   REAL NOT NULL,
    expires_at   REAL,
    last_used_at REAL,
    revoked_at   REAL
);
CREATE INDEX tm_ws_tokens_user ON tm_ws_tokens (workspace, user_name, kind);

CREATE TABLE tm_events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    root_id TEXT NOT NULL,
    run_id  TEXT NOT NULL,
    job_id  INTEGER,
    step_id TEXT,
    kind    TEXT NOT NULL,
    data    TEXT NOT NULL DEFAULT '{}',
    at      REAL NOT NULL
);
CREATE INDEX tm_events_root ON tm_events (root_id, id);

-- A top-level run's workspace, path and folder (`f/team`, `u/max`), read from its source
-- (generated, never written): the server lists the runs a caller may see, page by page,
-- one index walk per folder, path or user it may see.
ALTER TABLE tm_runs ADD COLUMN workspace TEXT GENERATED ALWAYS AS (json_extract(source, '$.workspace')) VIRTUAL;
ALTER TABLE tm_runs ADD COLUMN path TEXT GENERATED ALWAYS AS (json_extract(source, '$.path')) VIRTUAL;
ALTER TABLE tm_runs ADD COLUMN folder TEXT GENERATED ALWAYS AS (substr(json_extract(source, '$.path'), 1, instr(substr(json_extract(source, '$.path'), 3), '/') + 1)) VIRTUAL;
CREATE INDEX tm_runs_path ON tm_runs (workspace, path, created_at) WHERE parent_id IS NULL;
CREATE INDEX tm_runs_folder ON tm_runs (workspace, folder, created_at) WHERE parent_id IS NULL;
CREATE INDEX tm_runs_run_as ON tm_runs (workspace, run_as, created_at) WHERE parent_id IS NULL;

-- The proxy's calls (`/v1` of the server): who asked, with which token, for which
-- provider resource, and what it cost. A sibling of tm_usage, which is a run's.
CREATE TABLE tm_proxy_usage (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace     TEXT NOT NULL,
    user_name     TEXT NOT NULL,
    token_id      TEXT,
    model         TEXT NOT NULL,
    resource      TEXT,
    provider      TEXT,
    status        INTEGER,
    input_tokens  INTEGER NOT NULL,
    output_tokens INTEGER NOT NULL,
    cost_usd      REAL,
    latency_ms    REAL NOT NULL,
    at            REAL NOT NULL
);
CREATE INDEX tm_proxy_usage_user ON tm_proxy_usage (workspace, user_name, id);

-- Steps that wait, and what starts runs from outside: schedules' fires, webhooks' replays.
--
-- A step waiting for a time (`sleep`) or an event (`wait_for_event`): its job is
-- `waiting`, held by no worker, until a sweep finds `due_at` passed (a sleep's end,
-- an event wait's deadline) or an event with its workspace, path, name and key is sent.
CREATE TABLE tm_waits (
    job_id     INTEGER PRIMARY KEY,
    root_id    TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    workspace  TEXT NOT NULL DEFAULT '',
    path       TEXT NOT NULL DEFAULT '',
    name       TEXT,
    key        TEXT,
    due_at     REAL,
    created_at REAL NOT NULL
);
CREATE INDEX tm_waits_due ON tm_waits (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX tm_waits_event ON tm_waits (workspace, path, name, key) WHERE kind = 'event';
CREATE INDEX tm_waits_root ON tm_waits (root_id);

-- Events sent to runs: taken by the steps waiting for them when sent, else kept
-- (`taken_by` NULL) until `keep_until` for the first step that comes to wait for one.
CREATE TABLE tm_signals (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    workspace  TEXT NOT NULL DEFAULT '',
    path       TEXT NOT NULL DEFAULT '',
    name       TEXT NOT NULL,
    key        TEXT NOT NULL,
    payload    TEXT NOT NULL,
    dedupe_id  TEXT,
    sent_by    TEXT,
    sent_at    REAL NOT NULL,
    keep_until REAL NOT NULL,
    taken_by   TEXT
);
CREATE UNIQUE INDEX tm_signals_dedupe ON tm_signals (workspace, path, name, dedupe_id)
    WHERE dedupe_id IS NOT NULL;
CREATE INDEX tm_signals_kept ON tm_signals (workspace, path, name, key, id) WHERE taken_by IS NULL;
CREATE INDEX tm_signals_expiry ON tm_signals (keep_until);

-- The workspace's schedules, read by every scheduler each second or two.
CREATE INDEX tm_ws_items_kind ON tm_ws_items (workspace, kind) WHERE deleted_at IS NULL;

-- A schedule's fires, one row per (schedule, fire time), written in the transaction
-- that starts its run (or records it skipped): whoever inserts it first fires it.
CREATE TABLE tm_schedule_fires (
    workspace  TEXT NOT NULL,
    path       TEXT NOT NULL,
    fire_at    REAL NOT NULL,
    status     TEXT NOT NULL,
    run_id     TEXT,
    version    INTEGER,
    outcome    TEXT,
    handler_id TEXT,
    error      TEXT,
    created_at REAL NOT NULL,
    PRIMARY KEY (workspace, path, fire_at)
);
CREATE INDEX tm_schedule_fires_open ON tm_schedule_fires (run_id) WHERE outcome IS NULL;

-- A webhook's `Idempotency-Key`: a replay with the same key gets the first run.
CREATE TABLE tm_hook_keys (
    workspace  TEXT NOT NULL,
    path       TEXT NOT NULL,
    key        TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (workspace, path, key)
);
CREATE INDEX tm_hook_keys_age ON tm_hook_keys (created_at);

-- Retention: ended runs are pruned with everything they own, and a flow definition
-- goes with the last run that ran it (found by this index, not by a scan of the runs).
CREATE INDEX tm_runs_digest ON tm_runs (digest);

-- A run whose steps returned a secret they resolved (their results are kept as they are,
-- for the steps after them): its result is shown with those secrets masked
-- (the `shown_result` payload), made when it ends.
ALTER TABLE tm_runs ADD COLUMN masked INTEGER NOT NULL DEFAULT 0;

-- `GET /api/approvals` reads approvals a page at a time, oldest first, by status.
CREATE INDEX tm_approvals_listed ON tm_approvals (status, created_at, id);
