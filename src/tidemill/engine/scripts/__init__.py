"""The script pool: pre-started Python processes that script steps and tools run in.

- `_pool` (`ScriptPool`): starts processes ahead of time, hands each call to
  one, kills a call at its timeout and replaces a process that died; it
  imports nothing else of the engine.
- `_child`: what each process runs (standard library only), started by file
  path.
"""
