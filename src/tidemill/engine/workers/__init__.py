"""Workers: claim jobs from the store under a lease, run them, record the outcome.

`Worker` is the claim/execute/record loop; `ScriptPool` keeps pre-started
Python processes (each running `_child.py`) for script steps and tools.
"""
