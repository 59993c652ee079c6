-- Steps that wait, and what starts runs from outside: schedules' fires, webhooks' replays.
--
-- A step waiting for a time (`sleep`) or an event (`wait_for_event`): its job is
-- `waiting`, held by no worker, until a sweep finds `due_at` passed (a sleep's end,
-- an event wait's deadline) or an event with its workspace, path, name and key is sent.
CREATE TABLE tm_waits (
    job_id     BIGINT PRIMARY KEY,
    root_id    TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    kind       TEXT NOT NULL,
    workspace  TEXT NOT NULL DEFAULT '',
    path       TEXT NOT NULL DEFAULT '',
    name       TEXT,
    key        TEXT,
    due_at     DOUBLE PRECISION,
    created_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX tm_waits_due ON tm_waits (due_at) WHERE due_at IS NOT NULL;
CREATE INDEX tm_waits_event ON tm_waits (workspace, path, name, key) WHERE kind = 'event';
CREATE INDEX tm_waits_root ON tm_waits (root_id);

-- Events sent to runs: taken by the steps waiting for them when sent, else kept
-- (`taken_by` NULL) until `keep_until` for the first step that comes to wait for one.
CREATE TABLE tm_signals (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    workspace  TEXT NOT NULL DEFAULT '',
    path       TEXT NOT NULL DEFAULT '',
    name       TEXT NOT NULL,
    key        TEXT NOT NULL,
    payload    TEXT NOT NULL,
    dedupe_id  TEXT,
    sent_by    TEXT,
    sent_at    DOUBLE PRECISION NOT NULL,
    keep_until DOUBLE PRECISION NOT NULL,
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
    fire_at    DOUBLE PRECISION NOT NULL,
    status     TEXT NOT NULL,
    run_id     TEXT,
    version    BIGINT,
    outcome    TEXT,
    handler_id TEXT,
    error      TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workspace, path, fire_at)
);
CREATE INDEX tm_schedule_fires_open ON tm_schedule_fires (run_id) WHERE outcome IS NULL;

-- A webhook's `Idempotency-Key`: a replay with the same key gets the first run.
CREATE TABLE tm_hook_keys (
    workspace  TEXT NOT NULL,
    path       TEXT NOT NULL,
    key        TEXT NOT NULL,
    run_id     TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (workspace, path, key)
);
CREATE INDEX tm_hook_keys_age ON tm_hook_keys (created_at)
;
