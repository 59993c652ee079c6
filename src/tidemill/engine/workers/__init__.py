"""Workers: claim jobs from the store under a lease, run them, record the outcome.

- `_worker` (`Worker`): the claim/execute/record loop, over the run changes of
  `tidemill.engine.runs`; it renews each job's lease while the job runs.
- `_execute`: one claimed step by its kind: a leaf step (a script, an
  identity) runs here and returns an `Outcome`; a step with a body spawns
  child runs; an AI step goes to `tidemill.engine.ai`.
- `_prepare` (`Preparer`): what executing a claimed job needs, read once;
  `_logs` (`LiveLogs`): what running steps print, stored as they print it.
"""
