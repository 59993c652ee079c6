r"""The engine: flows as durable runs, executed by workers sharing a store.

`Engine` (blocking) and `AsyncEngine` submit runs and act on them; a
`Worker` claims their jobs under renewed leases and executes them: scripts
in a pool of pre-started processes, branches and loops as child runs.

Who owns what, from the top down (a module imports only from those below
it; an import-linter contract keeps it so):

- `_host_save` (`save_agent`) over `_host` (`load_agent`): a workspace agent
  run from Python, and a builder saved as one.
- `_facade` (`Engine`, `Run`) over `_engine` (`AsyncEngine`): the front,
  put together from parts over `_engine_core`: `_deciding` (approvals'
  decisions), `_signalling` (`send_event`: events for the steps that wait)
  and `_pruning` (`prune_runs`: ended runs deleted by age).
- `workers`: `Worker` claims a job, executes it by its kind (`_execute`) and
  records the result; `_retention` prunes ended runs (`Pruned`).
- `runs`: every change of runs and jobs, one transaction each (`Transition`),
  and what a run waits for (`Wait`): a person, a child run, a time, an event.
- `ai`: the `ai_action` and `ai_agent` steps (see `tidemill.engine.ai`).
- What the steps share: `_step_env` (`StepInfo`, `StepEnv`), `_metrics`,
  `_outcome` (`Outcome`, `SpawnPlan`), `_journal` and `_memory` (what agent
  steps keep in the store), `_events` (`RunEvent`: a run's events, read and
  followed), `_models`, `_ids`, and `scripts` (`ScriptPool`,
  the pre-started processes scripts and tools run in).

Examples:
    >>> import tempfile
    >>> from tidemill import Engine, Flow
    >>> flow = Flow.model_validate({"steps": [
    ...     {"id": "double", "script": "def main(x):\n    return x * 2\n",
    ...      "inputs": {"x": {"expr": "flow_input.x"}}},
    ... ]})
    >>> with Engine(f"sqlite:///{tempfile.mkdtemp()}/t.db") as engine, engine.worker():
    ...     engine.submit(flow, {"x": 21}).wait(timeout=60)
    42
"""

from tidemill.engine._engine import AsyncEngine, RunInfo
from tidemill.engine._events import RunEvent
from tidemill.engine._facade import Engine, Run
from tidemill.engine._host import HostedAgent, aload_agent, load_agent
from tidemill.engine._host_save import agent_value, asave_agent, save_agent
from tidemill.engine._metrics import Metrics, MetricsServer
from tidemill.engine._models import ModelChoice, ModelResolver, aliased_models, default_models
from tidemill.engine._signalling import EVENT_KEEP
from tidemill.engine._step_env import StepInfo, ToolRun, current_step
from tidemill.engine.runs._waiting import Delivery
from tidemill.engine.runs._waits import WAIT_KINDS, Wait
from tidemill.engine.scripts._pool import ScriptCall, ScriptOutcome, ScriptPool
from tidemill.engine.workers._retention import Pruned
from tidemill.engine.workers._worker import Worker

__all__ = [
    "EVENT_KEEP",
    "WAIT_KINDS",
    "AsyncEngine",
    "Delivery",
    "Engine",
    "HostedAgent",
    "Metrics",
    "MetricsServer",
    "ModelChoice",
    "ModelResolver",
    "Pruned",
    "Run",
    "RunEvent",
    "RunInfo",
    "ScriptCall",
    "ScriptOutcome",
    "ScriptPool",
    "StepInfo",
    "ToolRun",
    "Wait",
    "Worker",
    "agent_value",
    "aliased_models",
    "aload_agent",
    "asave_agent",
    "current_step",
    "default_models",
    "load_agent",
    "save_agent",
]
