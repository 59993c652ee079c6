"""How a run moves on: every change of runs and jobs, one transaction each.

`Transition` (`_transition`) is what workers and the engine call; it is made
of one part per concern, each on `Progress` (`_progress`: scheduling the next
steps, recording results, finishing runs, waking parents, failing and
cancelling, concurrency gates):

- `_record` (`Recording`): a job's result, its spawned children, its parking.
- `_decisions` (`Decisions`): approvals, questions, budget extensions and
  reconciliations, and their expiry.
- `_lifecycle` (`Lifecycle`): create, cancel, retry.
- `_context`: what a step's expressions may read; `_scope`: the list of steps
  a run executes.
- `_waits`: what each unfinished step of a run waits for (`tidemill runs why`).
"""
