"""`CopilotSession`: what every copilot tool acts through, and how a tool refuses.

The copilot's tools are module-level `@tool` functions; the runtime hands
each the run's `deps`, a `CopilotSession`: the asking user's `AsyncWorkspace`
(so every read and write is asked as that user, and the workspace's
permissions decide), the engine test runs go to, the flow being edited and
a callback that shows what a tool is doing as it does it. It is live state
of this process, never journaled: a resumed run passes it again.

A refusal (a path the user may not read, a flow that does not validate, a
patch that does not apply) is a tool result marked as an error, with what
happened and what to do, so the model can correct itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass
from typing import TYPE_CHECKING, Any

from tidemill.engine import AsyncEngine, ToolRun
from tidemill.errors import TidemillError
from tidemill.tools import ToolContext, ToolReturn

if TYPE_CHECKING:
    from tidemill.workspace import AsyncWorkspace

__all__ = ["CopilotSession", "Status", "refusal", "refused", "session_of"]

Status = Callable[[str, str], None]
"""Shows progress: called with the tool's name and one line on what it does."""


def _quiet(tool: str, text: str) -> None:
    """Show nothing."""


@dataclass(slots=True)
class CopilotSession:
    """The user, workspace and engine a copilot conversation acts with.

    Examples:
        >>> session = CopilotSession(workspace=None, flow="f/billing/invoice")
        >>> session.flow
        'f/billing/invoice'
    """

    _: KW_ONLY
    workspace: AsyncWorkspace
    """The workspace, as the user who asks: every tool reads and writes through it."""
    engine: AsyncEngine | None = None
    """Where test runs go (the workspace's store); None: test runs are refused."""
    flow: str | None = None
    """The flow being built or changed: `set_flow` saves the user's draft there."""
    status: Status = _quiet
    """Told what each tool is doing, as it does it (the CLI prints it)."""
    run_timeout: float = 60.0
    """How long a test run is waited for before the tool answers that it still runs."""
    max_code_chars: int = 8000
    """A script's code shown to the model is cut past this many characters."""


def session_of(ctx: ToolContext[Any]) -> CopilotSession:
    """The session a tool call acts with.

    Given by `Copilot` as the run's `deps`; or, in a turn of the chat API (an
    engine run whose agent step calls these tools in the worker), made from
    the call's `ToolRun`: the run's workspace as the user it runs as, the
    worker's engine, and the run's input `flow` as the flow being edited.

    Raises:
        TypeError: The run was given neither a `CopilotSession` nor a `ToolRun`.
        ConfigurationError: A `ToolRun` of a run that runs as no one.
    """
    deps = ctx.deps
    if isinstance(deps, CopilotSession):
        return deps
    if isinstance(deps, ToolRun):
        flow = deps.flow_input.get("flow")
        return CopilotSession(
            workspace=deps.workspace(),
            engine=deps.engine if isinstance(deps.engine, AsyncEngine) else None,
            flow=flow if isinstance(flow, str) and flow else None,
        )
    raise TypeError(
        "The copilot's tools need a CopilotSession as the run's deps: "
        "run them through tidemill.copilot.Copilot (or the server's chat API)."
    )


def refusal(message: str, *, hint: str = "", **details: Any) -> ToolReturn:
    """A tool result that says why nothing was done, and what to try instead."""
    body: dict[str, Any] = {"error": message}
    if hint:
        body["hint"] = hint
    body.update(details)
    return ToolReturn(body, is_error=True)


def refused(exc: TidemillError) -> ToolReturn:
    """A Tidemill error as a refusal: its message and hint, never its context."""
    return refusal(exc.message, hint=exc.hint or "")
