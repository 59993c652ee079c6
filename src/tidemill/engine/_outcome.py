"""What executing a step produces for the run: an `Outcome`, a `SpawnPlan`, or a `WaitPlan`.

A leaf step (a script, an identity, an AI step) ends with an `Outcome`; a
container step (branch, parallel, for_each, flow) with a `SpawnPlan`; a
`sleep` or `wait_for_event` step that must wait with a `WaitPlan`. The
worker records each in one transaction (see `Transition.complete`,
`Transition.spawn` and `Transition.park_for_wait`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from tidemill.engine._memory import MemoryWrite

__all__ = ["Outcome", "SpawnPlan", "WaitPlan"]


@dataclass(slots=True)
class Outcome:
    """What executing a step produced.

    Attributes:
        status: `succeeded`, `skipped` (its `skip_if` held) or `failed`.
        result: The step's JSON result.
        error: For a failure: `type`, `message`, and `traceback` for scripts.
        retryable: False for failures a retry cannot fix (a bad expression).
        stop: True when the step's `stop_after_if` held.
        logs: What the step printed, as `(stream, text)` pairs.
        usage: One record per model call the step made (see `Tx.insert_usage`).
        memory: For an `ai_agent` step with memory: the exchange to append
            to it, in the transaction that records a success (else dropped).
        inputs: The inputs the step was called with, its references resolved
            (None: it was not called: skipped, or its inputs failed).
        shown: What the API shows of the job: `inputs` and, for a success,
            `result`, with the secrets the job resolved masked (the worker
            sets it, and records it with the job; see `shown_copy`).
    """

    status: Literal["succeeded", "skipped", "failed"]
    result: Any = None
    error: dict[str, Any] | None = None
    retryable: bool = True
    stop: bool = False
    logs: tuple[tuple[str, str], ...] = ()
    usage: tuple[dict[str, Any], ...] = ()
    memory: MemoryWrite | None = None
    inputs: dict[str, Any] | None = None
    shown: dict[str, Any] | None = None

    @property
    def masked_result(self) -> bool:
        """True when the step succeeded and returned a secret it resolved.

        Its shown copy then differs from its result; with no secret to mask
        the copy is the result itself, so the check costs nothing then.
        """
        if self.status != "succeeded" or self.shown is None:
            return False
        shown = self.shown["result"]
        return shown is not self.result and shown != self.result


@dataclass(slots=True)
class SpawnPlan:
    """What a container step starts: child runs, one per body instance.

    Attributes:
        parts: The body of each child to start now (`case:0`, `branch:1`,
            `body`, `flow`), in declared order. Empty means the container is
            done at once with `empty_result` (no case matched, no items).
        contexts: Each child's context: `flow_input`, and `iter` in loops.
        items: A loop's items (all of them; only the first `parts` start now).
        parallelism: How many loop iterations may run at once.
        empty_result: The result when nothing is started.
    """

    parts: list[str]
    contexts: list[dict[str, Any]]
    items: list[Any] | None = None
    parallelism: int = 1
    empty_result: Any = None


@dataclass(frozen=True, slots=True)
class WaitPlan:
    """What a waiting step waits for: a time (`kind` `sleep`) or an event (`event`).

    Attributes:
        kind: `sleep` or `event`.
        due_at: A sleep's end; an event wait's deadline (None: none), in epoch seconds.
        name: The event's name (`event`).
        key: The event's key (`event`).
    """

    kind: Literal["sleep", "event"]
    due_at: float | None
    name: str | None = None
    key: str | None = None
