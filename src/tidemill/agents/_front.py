"""`RuntimeFront`: an agent front that hands its work to the runtime it builds.

`AgentBuilder` is one: it runs nothing itself, and each of these methods
builds the agent (`build()`, on first use and after a change) and passes the
call on to the `AgentRuntime` or `GraphRuntime` it got. `AgentFacade` adds
the blocking twins.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import TYPE_CHECKING, Unpack

from pydantic import JsonValue

from tidemill.agents._facade import AgentFacade, Prompt
from tidemill.agents._limits import UsageLimits
from tidemill.agents._runtime import AgentRuntime
from tidemill.agents.journal import JournalRecord, ThreadState
from tidemill.errors import ConfigurationError
from tidemill.llm import ModelSettings
from tidemill.types import AgentResponse, Decision, StreamEvent, ToolCall

if TYPE_CHECKING:
    from tidemill.agents.graph import GraphRuntime

__all__ = ["RuntimeFront"]


class RuntimeFront(AgentFacade):
    """An agent's methods, run by the runtime `build()` returns; see `AgentBuilder`."""

    @abstractmethod
    def build(self) -> AgentRuntime | GraphRuntime:
        """Build the agent, or return the one already built."""

    # -- running (see AgentRuntime for the details) ---------------------------------

    async def arun(
        self,
        prompt: Prompt,
        *,
        thread_id: str | None = None,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> AgentResponse:
        """Run the agent until it answers; see `AgentRuntime.arun`."""
        return await self.build().arun(
            prompt,
            thread_id=thread_id,
            max_iterations=max_iterations,
            limits=limits,
            deps=deps,
            **settings,
        )

    def astream(
        self,
        prompt: Prompt,
        *,
        thread_id: str | None = None,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> AsyncIterator[StreamEvent]:
        """Run the agent, yielding events; see `AgentRuntime.astream`."""
        return self.build().astream(
            prompt,
            thread_id=thread_id,
            max_iterations=max_iterations,
            limits=limits,
            deps=deps,
            **settings,
        )

    async def aresume(
        self,
        thread_id: str,
        decisions: Mapping[str, Decision] | None = None,
        *,
        approved: bool | None = None,
        feedback: str = "",
        edited_arguments: Mapping[str, dict[str, JsonValue]] | None = None,
        retry_in_flight: bool = False,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> AgentResponse:
        """Continue a paused or interrupted run; see `AgentRuntime.aresume`."""
        return await self.build().aresume(
            thread_id,
            decisions,
            approved=approved,
            feedback=feedback,
            edited_arguments=edited_arguments,
            retry_in_flight=retry_in_flight,
            max_iterations=max_iterations,
            limits=limits,
            deps=deps,
            **settings,
        )

    async def abroadcast(self, task: str, *, deps: object = None) -> dict[str, AgentResponse]:
        """Run every specialist on the same task; see `AgentRuntime.abroadcast`."""
        return await self.build().abroadcast(task, deps=deps)

    def broadcast(self, task: str, *, deps: object = None) -> dict[str, AgentResponse]:
        """Blocking `abroadcast`."""
        return self._sync.run(self.abroadcast(task, deps=deps))

    async def apipeline(
        self, task: str, order: Sequence[str], *, deps: object = None
    ) -> AgentResponse:
        """Chain specialists; see `AgentRuntime.apipeline`."""
        return await self.build().apipeline(task, order, deps=deps)

    def pipeline(self, task: str, order: Sequence[str], *, deps: object = None) -> AgentResponse:
        """Blocking `apipeline`."""
        return self._sync.run(self.apipeline(task, order, deps=deps))

    async def astate(self, thread_id: str) -> ThreadState | None:
        """Return the thread's state, folded from its journal, or None."""
        return await self.build().astate(thread_id)

    async def apending_approvals(self, thread_id: str) -> list[ToolCall]:
        """Return the calls waiting for a decision on the thread."""
        return await self.build().apending_approvals(thread_id)

    async def ahistory(self, thread_id: str, limit: int | None = 20) -> list[JournalRecord]:
        """Return the thread's last `limit` journal records, oldest first: the audit trail."""
        return await self.build().ahistory(thread_id, limit)

    async def afork(self, thread_id: str, *, at: int, new_thread_id: str | None = None) -> str:
        """Start a new thread from `thread_id`'s state as of its record `at`; return its id."""
        return await self.build().afork(thread_id, at=at, new_thread_id=new_thread_id)

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description of the agent."""
        return self.build().describe()

    def _graph_runtime(self) -> GraphRuntime:
        runtime = self.build()
        if isinstance(runtime, AgentRuntime):
            raise ConfigurationError(
                "This agent runs the built-in loop, which has no graph.",
                hint="Build it with .graph() to get a LangGraph StateGraph to edit.",
            )
        return runtime
