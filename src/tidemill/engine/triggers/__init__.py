"""What starts runs from outside: schedules' fires (`Scheduler`).

- `_workspaces` (`WorkspaceSchedulers`): a worker's scheduler for each workspace with schedules.
- `_scheduler` (`Scheduler`): ticks, fires what is due, sleeps until the next fire.
- `_known`: the schedule items as last read, parsed once per version, with cursors.
- `_due`: which fires are due, and which of them a catch-up policy runs.
- `_start`: a run started from a workspace plan inside the fire's transaction.
- `_handlers`: a fired run's outcome, and the `on_failure`/`on_recovery` run it starts.
"""

from tidemill.engine.triggers._due import KEEP, ON_TIME
from tidemill.engine.triggers._scheduler import Scheduler
from tidemill.engine.triggers._workspaces import WorkspaceSchedulers

__all__ = ["KEEP", "ON_TIME", "Scheduler", "WorkspaceSchedulers"]
