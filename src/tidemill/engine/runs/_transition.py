"""How a run moves on: every state change of runs and jobs, one transaction each.

Each public method of `Transition` takes a `Tx` and runs inside one store
transaction, so recording a step's result and scheduling the steps it
unblocks (or finishing the run, or waking the parent run of a branch or
loop) happen together or not at all. Writes by a worker name the epoch of
its claim; a worker whose lease was taken over gets `LeaseLost` and changes
nothing.

`Transition` gathers the changes by who asks for them, each in its own
module on the machinery of `Progress` (`_progress`):

- `Recording` (`_record`): a worker records what a claimed job produced;
- `Decisions` (`_decisions`): a job parks for people's decisions, and
  their decisions (or timeouts) move the run on;
- `Lifecycle` (`_lifecycle`): a caller creates, cancels or retries a
  top-level run;
- `Waiting` (`_waiting`): a step parks for a time or an event, and the
  time's coming (a worker's sweep) or the event's sending moves the run on.
"""

from __future__ import annotations

from tidemill.engine.runs._decisions import Decisions
from tidemill.engine.runs._lifecycle import Lifecycle
from tidemill.engine.runs._record import Recording
from tidemill.engine.runs._waiting import Waiting

__all__ = ["Transition"]


class Transition(Recording, Decisions, Lifecycle, Waiting):
    """One transaction's worth of run changes (see `Progress` for its arguments)."""
