-- A run's memory id, set when it is queued (a memory_id run parameter): the memory a
-- window-memory agent step of the run recalls and extends when the step names none.
ALTER TABLE tm_runs ADD COLUMN memory_id TEXT
;
