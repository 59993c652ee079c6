"""`AgentFacade`: the blocking methods every agent front offers, over its async core.

`AgentRuntime`, the LangGraph-backed `GraphRuntime` and the `AgentBuilder`
implement the async methods; this class gives each of them the same blocking
twins, run on the object's own event loop (see `tidemill._sync`: on the
calling thread while nothing else needs the loop, on its own thread otherwise).
A run started by one of them is all its caller waits for, so it lends that
loop to the agent's sync tools (`sync_on_loop=True`): they run on the loop's
thread while nothing else runs on it, and in a worker thread otherwise.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Protocol, Unpack

from pydantic import JsonValue

from tidemill._sync import LoopThread
from tidemill.agents._limits import UsageLimits
from tidemill.agents.journal import JournalRecord, ThreadState
from tidemill.errors import ConfigurationError
from tidemill.llm import ModelSettings
from tidemill.types import AgentResponse, Decision, Message, StreamEvent, TextDelta, ToolCall

__all__ = ["AgentFacade", "Closeable", "Prompt", "prompt_messages"]

Prompt = str | Message | Sequence[Message]
"""What a run starts from: a user's text, one message, or a transcript."""


class Closeable(Protocol):
    """A component that holds something open: a connection, a client, a process."""

    async def aclose(self) -> None:
        """Release it."""


class AgentFacade(ABC):
    """Blocking twins of an agent's async methods; subclasses implement the async core."""

    _sync: LoopThread

    @abstractmethod
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
        """Run the agent until it answers."""

    @abstractmethod
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
        """Run the agent, yielding what happens as it happens."""

    @abstractmethod
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
        """Continue a paused or interrupted run."""

    @abstractmethod
    async def astate(self, thread_id: str) -> ThreadState | None:
        """The thread's state, folded from its journal, or None if it has none."""

    @abstractmethod
    async def apending_approvals(self, thread_id: str) -> list[ToolCall]:
        """The calls waiting for a decision on the thread."""

    @abstractmethod
    async def ahistory(self, thread_id: str, limit: int | None = 20) -> list[JournalRecord]:
        """The thread's last `limit` journal records (all with None), oldest first."""

    @abstractmethod
    async def afork(self, thread_id: str, *, at: int, new_thread_id: str | None = None) -> str:
        """A new thread holding `thread_id`'s state as of its record `at`; its id."""

    def run(
        self,
        prompt: Prompt,
        *,
        thread_id: str | None = None,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> AgentResponse:
        """Blocking `arun`."""
        return self._sync.run(
            self.arun(
                prompt,
                thread_id=thread_id,
                max_iterations=max_iterations,
                limits=limits,
                deps=deps,
                **settings,
            ),
            sync_on_loop=True,
        )

    def stream(
        self,
        prompt: Prompt,
        *,
        thread_id: str | None = None,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> Iterator[StreamEvent]:
        """Blocking `astream`."""
        return self._sync.iterate(
            self.astream(
                prompt,
                thread_id=thread_id,
                max_iterations=max_iterations,
                limits=limits,
                deps=deps,
                **settings,
            ),
            sync_on_loop=True,
        )

    async def astream_text(
        self,
        prompt: Prompt,
        *,
        thread_id: str | None = None,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> AsyncIterator[str]:
        """Yield only the assistant's text, as it is written."""
        events = self.astream(
            prompt,
            thread_id=thread_id,
            max_iterations=max_iterations,
            limits=limits,
            deps=deps,
            **settings,
        )
        async for event in events:
            if isinstance(event, TextDelta):
                yield event.delta

    def stream_text(
        self,
        prompt: Prompt,
        *,
        thread_id: str | None = None,
        max_iterations: int | None = None,
        limits: UsageLimits | None = None,
        deps: object = None,
        **settings: Unpack[ModelSettings],
    ) -> Iterator[str]:
        """Blocking `astream_text`.

        Examples:
            >>> from tidemill import agent
            >>> bot = agent().llm("fake", responses=["Hello there"])
            >>> "".join(bot.stream_text("Hi"))
            'Hello there'
        """
        return self._sync.iterate(
            self.astream_text(
                prompt,
                thread_id=thread_id,
                max_iterations=max_iterations,
                limits=limits,
                deps=deps,
                **settings,
            ),
            sync_on_loop=True,
        )

    def resume(
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
        """Blocking `aresume`."""
        return self._sync.run(
            self.aresume(
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
            ),
            sync_on_loop=True,
        )

    def state(self, thread_id: str) -> ThreadState | None:
        """Blocking `astate`."""
        return self._sync.run(self.astate(thread_id))

    def pending_approvals(self, thread_id: str) -> list[ToolCall]:
        """Blocking `apending_approvals`."""
        return self._sync.run(self.apending_approvals(thread_id))

    def history(self, thread_id: str, limit: int | None = 20) -> list[JournalRecord]:
        """Blocking `ahistory`."""
        return self._sync.run(self.ahistory(thread_id, limit))

    def fork(self, thread_id: str, *, at: int, new_thread_id: str | None = None) -> str:
        """Blocking `afork`."""
        return self._sync.run(self.afork(thread_id, at=at, new_thread_id=new_thread_id))

    async def aclose(self) -> None:  # noqa: B027 - optional: most fronts own nothing
        """Release what the agent owns; nothing by default."""

    def close(self) -> None:
        """Blocking `aclose`; also stops the thread behind the blocking methods."""
        try:
            self._sync.run(self.aclose())
        finally:
            self._sync.close()


def prompt_messages(prompt: Prompt) -> tuple[Message, ...]:
    """The messages a prompt stands for.

    Raises:
        ConfigurationError: For anything but a string, a message or a
            non-empty sequence of messages.
    """
    if isinstance(prompt, str):
        return (Message.user(prompt),)
    if isinstance(prompt, Message):
        return (prompt,)
    items = list(prompt) if isinstance(prompt, Sequence) else []
    messages = tuple(m for m in items if isinstance(m, Message))
    if not messages or len(messages) != len(items):
        raise ConfigurationError(
            "A prompt is a string, a Message, or a non-empty sequence of Messages.",
            context={"type": type(prompt).__name__},
        )
    return messages
