-- A top-level run's workspace, path and folder (`f/team`, `u/max`), read from its source
-- (generated, never written): the server lists the runs a caller may see, page by page,
-- one index walk per folder, path or user it may see.
ALTER TABLE tm_runs ADD COLUMN workspace TEXT GENERATED ALWAYS AS ((source::jsonb) ->> 'workspace') STORED;
ALTER TABLE tm_runs ADD COLUMN path TEXT GENERATED ALWAYS AS ((source::jsonb) ->> 'path') STORED;
ALTER TABLE tm_runs ADD COLUMN folder TEXT GENERATED ALWAYS AS (split_part((source::jsonb) ->> 'path', '/', 1) || '/' || split_part((source::jsonb) ->> 'path', '/', 2)) STORED;
CREATE INDEX tm_runs_path ON tm_runs (workspace, path, created_at) WHERE parent_id IS NULL;
CREATE INDEX tm_runs_folder ON tm_runs (workspace, folder, created_at) WHERE parent_id IS NULL;
CREATE INDEX tm_runs_run_as ON tm_runs (workspace, run_as, created_at) WHERE parent_id IS NULL
;
