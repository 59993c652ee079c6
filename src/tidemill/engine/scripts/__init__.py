"""The script pool: pre-started Python processes that script steps and tools run in.

- `_pool` (`ScriptPool`): starts processes ahead of time, hands each call to
  one, kills a call at its timeout and replaces a process that died; it
  imports nothing else of the engine.
- `_call` (`ScriptCall`, `ScriptOutcome`, `ScriptError`): what a call is and
  what it did; `_output` (`OutputTail`): a running call's output, handed on
  as it is written.
- `_child`: what each process runs (standard library only), started by file
  path.
"""
