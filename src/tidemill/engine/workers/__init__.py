"""Workers: claim jobs from the store under a lease, run them, record the outcome.

- `_worker` (`Worker`): the claim/execute/record loop, over the engine's run
  changes (`Transition`) and step dispatch (`execute`).
- `_pool` (`ScriptPool`): pre-started Python processes for script steps and
  tools; it imports nothing of the engine, and the steps' executors use it.
- `_child`: what each of those processes runs, started by file path.
"""
