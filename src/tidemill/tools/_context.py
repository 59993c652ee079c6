"""What a tool may learn about the call it is serving."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generic

from typing_extensions import TypeVar

__all__ = ["ToolContext"]

DepsT = TypeVar("DepsT", default=Any)
"""The type of a run's `deps`: what `ToolContext[MyDeps].deps` holds."""


@dataclass(frozen=True)
class ToolContext(Generic[DepsT]):
    """Facts about the current call, passed to tools that ask for them.

    Declare a parameter annotated `ToolContext` (or `ToolContext[MyDeps]`,
    to type `deps`) and the runtime fills it in; it is not part of the
    schema the model sees.

    Examples:
        >>> from tidemill import tool
        >>> @tool
        ... def charge(amount: int, ctx: ToolContext) -> str:
        ...     '''Charge the card.'''
        ...     return f"charged {amount} with key {ctx.idempotency_key}"
        >>> sorted(charge.parameters["properties"])
        ['amount']
    """

    thread_id: str
    """The agent thread the call belongs to."""
    call_id: str
    """The model's id for this call."""
    tool_name: str
    """The name of the tool being called."""
    attempt: int = 1
    """1 on the first execution; higher when a crashed run re-runs the call."""
    agent: str = "agent"
    """The name of the agent making the call."""
    deps: DepsT = None  # type: ignore[assignment]  # None when the run was given none
    """What the run was given as `deps=`: a database handle, the current user, clients.

    Live objects for the tools of this process: never journaled and never
    shown to the model, so a resumed run sees only what its own `resume`
    (or `run`) call passes.
    """

    def __init__(
        self,
        thread_id: str,
        call_id: str,
        tool_name: str,
        attempt: int = 1,
        agent: str = "agent",
        deps: DepsT = None,  # type: ignore[assignment]  # as the field above
    ) -> None:
        # The fields above, set in one step: the generated `__init__` of a frozen
        # dataclass calls `object.__setattr__` once per field (13,000 instructions
        # for six, against 8,000 here), and the runtime builds one for every tool call.
        self.__dict__.update(
            thread_id=thread_id,
            call_id=call_id,
            tool_name=tool_name,
            attempt=attempt,
            agent=agent,
            deps=deps,
        )

    @property
    def idempotency_key(self) -> str:
        """A key that is the same on every attempt of this call.

        Pass it to payment APIs and the like so that a call re-run after a
        crash takes effect once.
        """
        return f"{self.thread_id}/{self.call_id}"
