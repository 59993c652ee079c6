"""One delegated task: a specialist's agent run on a journal thread of its own.

The task's thread is derived from the delegating thread, the `delegate`
call and the task id, so a `delegate` call run again after a crash finds
its tasks where they stood: a finished one gives its answer without asking
the model again, a failed one its error, and one whose worker died
continues from its journal. The task's entry is what the delegating model
sees: `{"id", "specialist", "ok": true, "result"}` or `{..., "ok": false,
"error": {"type", "message", ...}}`.
"""

from __future__ import annotations

from typing import Any

from tidemill.agents import AgentRuntime
from tidemill.agents.checkpoint import Checkpointer
from tidemill.agents.journal import RunFailed
from tidemill.engine._journal import Journal
from tidemill.engine.ai._admission import Task
from tidemill.errors import LimitExceeded, TidemillError
from tidemill.llm import ModelSettings
from tidemill.types import AgentResponse, Usage

__all__ = ["failed_entry", "limit_name", "run_task", "task_thread"]

_ENDED = {
    "tool_call_retries": "ToolRetriesExceeded",
    "output_validation": "OutputValidationError",
    "guardrail": "GuardrailViolation",
}


def task_thread(parent_thread: str, call_id: str, task_id: str) -> str:
    """The journal thread of a task of a `delegate` call.

    Examples:
        >>> task_thread("tidemill:r1:agent", "c1", "t1")
        'tidemill:r1:agent:c1:t1'
    """
    return f"{parent_thread}:{call_id}:{task_id}"


def limit_name(name: str) -> str:
    """The flow's name of one of the agent library's limits.

    Examples:
        >>> limit_name("requests"), limit_name("max_iterations")
        ('max_requests', 'max_iterations')
    """
    return name if name.startswith("max_") else f"max_{name}"


def failed_entry(task: Task, error: dict[str, Any]) -> dict[str, Any]:
    """A task's entry when it failed.

    Examples:
        >>> failed_entry(Task("t1", "writer", "..."), {"type": "E", "message": "no"})["ok"]
        False
    """
    return {"id": task.id, "specialist": task.specialist, "ok": False, "error": error}


def _journaled_error(journal: Journal) -> dict[str, Any]:
    """The error a task's failed journal ends with."""
    last = next(
        (r.event for r in reversed(journal.records) if isinstance(r.event, RunFailed)), None
    )
    message = journal.state.error or "the specialist's run failed"
    if last is not None and last.reason == "limit" and last.limit is not None:
        return {"type": "LimitExceeded", "message": message, "limit": limit_name(last.limit)}
    return {"type": _ENDED.get(last.reason if last else "", "AgentError"), "message": message}


def _raised_error(exc: Exception) -> dict[str, Any]:
    message = exc.message if isinstance(exc, TidemillError) else str(exc)
    error: dict[str, Any] = {"type": type(exc).__name__, "message": message}
    if isinstance(exc, LimitExceeded):
        error.update(type="LimitExceeded", limit=limit_name(exc.limit), value=exc.value)
    return error


async def run_task(
    runtime: AgentRuntime,
    task: Task,
    thread: str,
    checkpointer: Checkpointer,
    settings: ModelSettings,
) -> tuple[dict[str, Any], Usage, int]:
    """Run (or continue, or recall) one task.

    Returns its entry, what it spent that is not counted yet, and the tool
    calls its agent made (its own delegations' included): they count against
    the delegating agent's `max_tool_calls`. A task that ended in an earlier
    attempt of the `delegate` call gives its entry again with its whole
    usage: that attempt never reported it.
    """
    journal = await Journal.read(checkpointer, thread)
    state = journal.state
    if state.status == "finished":
        entry = {"id": task.id, "specialist": task.specialist, "ok": True, "result": state.output}
        return entry, state.usage, state.tool_calls
    if state.status == "failed":
        return failed_entry(task, _journaled_error(journal)), state.usage, state.tool_calls
    if state.status == "paused":  # specialists have no tools that ask a person
        error = {"type": "AgentError", "message": "the specialist's run waits for approval"}
        return failed_entry(task, error), state.usage, state.tool_calls
    try:
        if state.status == "running":  # its worker died mid-task
            response = await runtime.aresume(thread, retry_in_flight=True, **settings)
        else:
            response = await runtime.arun(task.prompt, thread_id=thread, **settings)
    except Exception as exc:
        partial = getattr(exc, "response", None)
        usage = partial.usage if isinstance(partial, AgentResponse) else Usage()
        return (
            failed_entry(task, _raised_error(exc)),
            usage,
            await _tool_calls(checkpointer, thread),
        )
    entry = {"id": task.id, "specialist": task.specialist, "ok": True, "result": response.output}
    return entry, response.usage, await _tool_calls(checkpointer, thread)


async def _tool_calls(checkpointer: Checkpointer, thread: str) -> int:
    return (await Journal.read(checkpointer, thread)).state.tool_calls
