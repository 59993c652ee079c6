"""`Copilot`: the flow-building assistant, a Tidemill agent acting as the user who asks.

It is built with the agent library (`tidemill.agent()`): the instructions
of `_prompt`, the tools of `_reading`, `_editing` and `_testing`, and a
checkpointer that journals every model turn and tool call, so a
conversation paused on a test run's approval can be decided later. Every
tool acts through the session's `AsyncWorkspace`, so what the copilot may
read and change is what the user may.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tidemill.agents import AgentBuilder, agent
from tidemill.copilot._editing import get_lint_errors, patch_flow, set_flow, show_flow
from tidemill.copilot._prompt import system_prompt
from tidemill.copilot._reading import (
    get_flow_details,
    get_script_details,
    resource_type,
    search_flows,
    search_scripts,
)
from tidemill.copilot._session import CopilotSession, Status
from tidemill.copilot._testing import get_run, list_runs, trial_run_flow, trial_run_step
from tidemill.engine import AsyncEngine
from tidemill.llm import Model
from tidemill.tools import Tool
from tidemill.types import AgentResponse, ToolCall
from tidemill.workspace import AsyncWorkspace

__all__ = ["APPROVAL_TOOLS", "TOOLS", "Copilot"]

TOOLS: tuple[Tool, ...] = (
    search_flows,
    search_scripts,
    get_flow_details,
    get_script_details,
    resource_type,
    show_flow,
    get_lint_errors,
    set_flow,
    patch_flow,
    trial_run_flow,
    trial_run_step,
    list_runs,
    get_run,
)
"""Every tool the copilot has, in the order the model is shown them."""

APPROVAL_TOOLS = frozenset(t.name for t in TOOLS if t.requires_approval)
"""The tools that wait for the user's approval: the test runs."""


class Copilot:
    """Build and change flows in a workspace by asking, as the workspace's user.

    `ask` runs one turn of the conversation; a test run pauses it with
    `AgentInterrupt` until `decide` approves or refuses the run.

    Args:
        workspace: The workspace, as the user who asks.
        model: The model: a spec (`"openai:gpt-4o"`) or a `Model`
            (`ScriptedModel(handler=...)` in tests).
        engine: Where test runs go (on the workspace's store); None refuses them.
        flow: The flow to build or change (its path); None: the model picks
            one when it first saves.
        checkpoint: Where the conversation's journal is kept (a checkpointer
            spec, as `AgentBuilder.checkpoint` takes); in memory by default.
        status: Told what each tool is doing, as `(tool, text)`.
        max_iterations: The most model turns one `ask` may take.

    Examples:
        >>> import asyncio, tempfile
        >>> from tidemill.llm import ScriptedModel
        >>> async def main():
        ...     ws = AsyncWorkspace(f"sqlite:///{tempfile.mkdtemp()}/t.db", user="ada")
        ...     bot = Copilot(ws, model=ScriptedModel(["Nothing to do."]))
        ...     reply = await bot.ask("Hello")
        ...     await bot.aclose()
        ...     await ws.close()
        ...     return reply.output
        >>> asyncio.run(main())
        'Nothing to do.'
    """

    def __init__(
        self,
        workspace: AsyncWorkspace,
        *,
        model: str | Model,
        engine: AsyncEngine | None = None,
        flow: str | None = None,
        checkpoint: Any = None,
        status: Status | None = None,
        max_iterations: int = 40,
    ) -> None:
        self.session = CopilotSession(workspace=workspace, engine=engine, flow=flow)
        if status is not None:
            self.session.status = status
        builder: AgentBuilder = (
            agent()
            .name("copilot")
            .system(system_prompt(flow))
            .tool(*TOOLS)
            .llm(model)
            # The tools share the session (the flow being edited): one call at a time.
            .parallel_tools(False)
            .max_iterations(max_iterations)
        )
        if checkpoint is not None:
            builder.checkpoint(checkpoint)
        self.agent = builder
        """The agent behind it (`tidemill.agent()`), for its history and state."""

    async def ask(self, text: str, *, thread_id: str | None = None) -> AgentResponse:
        """Ask the copilot; answers when it is done or raises when a test run waits.

        Args:
            text: The user's request ("build a flow that ...").
            thread_id: The conversation to continue; a new one when omitted.

        Raises:
            AgentInterrupt: A test run waits for the user's approval
                (`pending` holds it); answer with `decide`.
        """
        return await self.agent.arun(text, thread_id=thread_id, deps=self.session)

    async def decide(self, thread_id: str, *, approved: bool, feedback: str = "") -> AgentResponse:
        """Approve or refuse the test runs a conversation waits for, and let it go on.

        Args:
            thread_id: The paused conversation (`AgentInterrupt.thread_id`).
            approved: Run them (True), or refuse them (False).
            feedback: Shown to the model with a refusal.

        Raises:
            AgentInterrupt: It reached another test run waiting for approval.
        """
        if not approved and not feedback:
            feedback = "The user did not approve this test run."
        return await self.agent.aresume(
            thread_id, approved=approved, feedback=feedback, deps=self.session
        )

    async def pending(self, thread_id: str) -> Sequence[ToolCall]:
        """The test runs the conversation waits for a decision on."""
        return await self.agent.apending_approvals(thread_id)

    async def aclose(self) -> None:
        """Release the agent's resources (the workspace and engine stay the caller's)."""
        await self.agent.aclose()
