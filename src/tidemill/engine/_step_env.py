"""What a step's executor is given and may answer besides an `Outcome`.

`StepInfo` is the step being executed, as a script or a function sees it
(`current_step`); `call_in_process` calls a `module:function` with it, for
in-process script steps and script tools alike. `StepEnv` is what executing
a step may use besides its inputs (the job, the run, the script pool, the
models, the store). An approval step's executor answers with an
`ApprovalPlan` (an agent step's with an `AgentPause`, a kind of it).
`ToolRun` is what an in-process function tool that asks for a `ToolContext`
finds in its `deps`: the run's identity, its workspace as that identity, the
engine.
"""

from __future__ import annotations

import asyncio
import contextvars
import importlib
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import TYPE_CHECKING, Any

from tidemill.engine._lease import Lease
from tidemill.engine._models import ModelResolver
from tidemill.engine.scripts._pool import ScriptPool
from tidemill.errors import ConfigurationError
from tidemill.store import JobRow, RunRow, Store
from tidemill.tools import FunctionTool

if TYPE_CHECKING:
    from tidemill.engine._journal import Journals
    from tidemill.engine._metrics import Metrics
    from tidemill.workspace import AsyncWorkspace

__all__ = [
    "ApprovalPlan",
    "Secrets",
    "StepEnv",
    "StepInfo",
    "ToolRun",
    "call_in_process",
    "current_step",
]

MASK = "***"
"""What a secret's plaintext is replaced with in what a job records."""


@dataclass(frozen=True, slots=True)
class StepInfo:
    """The step being executed, as a script or a function sees it."""

    run_id: str
    """The run the step belongs to."""
    step_id: str
    """The step's id."""
    attempt: int
    """1 for the first try, 2 for the first retry, ..."""
    idempotency_key: str
    """Stable for the step across retries and worker crashes.

    Use it to make side effects exactly-once."""


_CURRENT: contextvars.ContextVar[StepInfo | None] = contextvars.ContextVar(
    "tidemill_step", default=None
)


def current_step() -> StepInfo | None:
    """The step being executed in this context, or None outside a step.

    In-process functions see it directly; a script running in the pool
    reads the same facts from `TIDEMILL_RUN_ID`, `TIDEMILL_STEP_ID`,
    `TIDEMILL_ATTEMPT` and `TIDEMILL_IDEMPOTENCY_KEY`, which this function
    also falls back to.

    Examples:
        >>> current_step() is None
        True
    """
    info = _CURRENT.get()
    if info is not None:
        return info
    import os

    key = os.environ.get("TIDEMILL_IDEMPOTENCY_KEY")
    if key is None:
        return None
    return StepInfo(
        os.environ.get("TIDEMILL_RUN_ID", ""),
        os.environ.get("TIDEMILL_STEP_ID", ""),
        int(os.environ.get("TIDEMILL_ATTEMPT", "1")),
        key,
    )


@dataclass(frozen=True, slots=True)
class ApprovalPlan:
    """An approval step asks a person; the job waits until they decide."""

    message: str
    approvers: list[str]
    timeout: float | None
    on_timeout: str
    allow_self_approval: bool = True
    """False: the run's `run_as` user may not decide it (`Approval.allow_self_approval`)."""


class Secrets:
    """The plaintexts of the secrets one job resolved: masked in everything it records.

    The worker makes one per job and hands it to the job's log writer and to
    the step (`StepEnv.secrets`); resolving the step's references adds to
    it. What the step prints, its error and its usage records have every
    plaintext replaced by `***` before they are stored (the longest first,
    so a secret inside another is not half shown).

    Examples:
        >>> secrets = Secrets()
        >>> secrets.add({"hunter2", "pw"})
        >>> secrets.mask("login pw, then hunter2")
        'login ***, then ***'
        >>> secrets.mask_value({"e": ["hunter2!", 3]})
        {'e': ['***!', 3]}
    """

    __slots__ = ("_texts",)

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self._texts: tuple[str, ...] = ()
        self.add(texts)

    def __bool__(self) -> bool:
        return bool(self._texts)

    def __repr__(self) -> str:
        return f"Secrets({len(self._texts)} hidden)"

    def add(self, texts: Iterable[str]) -> None:
        """Mask these plaintexts too (empty ones cannot be masked and are left out)."""
        known = set(self._texts)
        known.update(text for text in texts if isinstance(text, str) and text)
        self._texts = tuple(sorted(known, key=lambda text: (-len(text), text)))

    @property
    def longest(self) -> int:
        """The length of the longest secret (0 when there is none)."""
        return len(self._texts[0]) if self._texts else 0

    def mask(self, text: str) -> str:
        """`text` with every secret replaced by `***`."""
        for secret in self._texts:
            if secret in text:
                text = text.replace(secret, MASK)
        return text

    def mask_value(self, value: Any) -> Any:
        """`value` (JSON-like) with every secret in its strings (keys too) replaced by `***`."""
        if not self._texts:
            return value
        if isinstance(value, str):
            return self.mask(value)
        if isinstance(value, Mapping):
            return {self.mask_value(k): self.mask_value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            masked = [self.mask_value(v) for v in value]
            return tuple(masked) if isinstance(value, tuple) else masked
        return value

    def pending(self, text: str) -> int:
        """How many characters at the end of `text` may begin a secret printed in pieces.

        A log writer keeps them back until more comes (or the step ends), so a
        secret split across two writes is still masked.
        """
        best = 0
        for secret in self._texts:
            for size in range(min(len(secret) - 1, len(text)), best, -1):
                if text.endswith(secret[:size]):
                    best = size
                    break
        return best


@dataclass(frozen=True, slots=True)
class StepEnv:
    """What executing a step may use besides its inputs.

    Attributes:
        job: The claimed job (its `attempt`, its `epoch`).
        run: The job's run.
        pool: The worker's script pool (started on first use).
        models: Builds the model of an AI step.
        store: The store, for steps that keep state of their own there (an
            agent's journal).
        journals: The worker's agent journal checkpointers, shared by its
            steps; None opens one per agent step attempt.
        metrics: Where AI steps count their model calls, tokens and tool
            calls; None records nothing.
        on_output: Where a script step hands what it prints, as
            `(stream, text)`, while it runs (the worker stores it as it goes);
            None: the output comes with the step's outcome only.
        lease: The worker's claim on the job, checked before each effect
            (`hold`); None: nothing to check (the job is not leased).
        secrets: The secrets the job resolved, masked in all it records.
        credentials: For an AI step naming a `provider` resource or an
            `api_key: $var:`, the keyword arguments of the provider layer its
            model is built with, resolved as the run's identity (never logged).
        resolve: Resolves `$var:`/`$res:` references in a value as the run's
            identity, giving the value and the secrets in it: an agent step's
            tools resolve their bound inputs with it when they run; None:
            nothing resolves them (they pass on as written).
        workspace: The run's workspace as the run's identity (`run_as`), for
            an agent step's in-process tools (`ToolRun`); None: the run has
            no identity.
        engine: The engine that started the worker, for the same tools; None
            for a worker made without one.
    """

    job: JobRow
    run: RunRow
    pool: Callable[[], ScriptPool]
    models: ModelResolver
    store: Store
    journals: Journals | None = None
    metrics: Metrics | None = None
    on_output: Callable[[str, str], None] | None = None
    lease: Lease | None = None
    secrets: Secrets = field(default_factory=Secrets)
    credentials: Mapping[str, Any] | None = field(default=None, repr=False)
    resolve: Callable[[Any], Awaitable[tuple[Any, set[str]]]] | None = field(
        default=None, repr=False
    )
    workspace: AsyncWorkspace | None = field(default=None, repr=False)
    # An `AsyncEngine` (typed loosely: the engine is a layer above what steps share).
    engine: Any = field(default=None, repr=False)

    async def hold(self) -> None:
        """Return when the job is still this worker's (see `Lease.hold`).

        Called right before each effect: a script, a tool call, a model call.

        Raises:
            LeaseLost: Another worker took the job over, or its run ended.
        """
        if self.lease is not None:
            await self.lease.hold()


@dataclass(frozen=True, slots=True)
class ToolRun:
    """The run an in-process tool call belongs to: a `ToolContext`'s `deps` in an agent step.

    A `function` tool with `run: in_process` whose function declares a
    parameter annotated `ToolContext` is given one on each call, with this as
    its `deps`: who the run runs as, its workspace opened as that user (so
    the tool reads and writes what the user may, no more), and the engine
    (to submit or read runs). Live objects of the worker, never journaled.

    Examples:
        >>> run = ToolRun("r1", "r1", "agent", 1, run_as=None, workspace_name="default")
        >>> run.workspace()
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: Run r1 runs as no one, so it has no workspace ...
    """

    run_id: str
    """The run of the step (a child run's own id)."""
    root_id: str
    """The top-level run it belongs to."""
    step_id: str
    """The agent step."""
    attempt: int
    """The job's attempt."""
    _: KW_ONLY
    run_as: str | None
    """The workspace user the run runs as; None: no one."""
    workspace_name: str
    """The workspace the run came from (`source["workspace"]`, else `default`)."""
    flow_input: Mapping[str, Any] = field(default_factory=dict)
    """The input of the run (what `flow_input` reads in the step's expressions)."""
    # An `AsyncEngine` (typed loosely: the engine is a layer above what steps share).
    engine: Any = field(default=None, repr=False)
    """The engine that started the worker; None for a worker made without one."""
    session: AsyncWorkspace | None = field(default=None, repr=False)
    """The workspace as `run_as` (the worker's, shared: do not close it)."""

    def workspace(self) -> AsyncWorkspace:
        """The run's workspace as the user it runs as.

        Raises:
            ConfigurationError: The run runs as no one (it was submitted
                without `run_as`), or the worker has no workspace for it.
        """
        if self.session is None:
            raise ConfigurationError(
                f"Run {self.run_id} runs as no one, so it has no workspace to act in.",
                hint="Submit it from the workspace (engine.submit_path) or with run_as=<user>.",
            )
        return self.session


_FUNCTIONS: dict[str, Callable[..., Any]] = {}


def _resolve(reference: str) -> Callable[..., Any]:
    function = _FUNCTIONS.get(reference)
    if function is None:
        module_name, _, name = reference.partition(":")
        function = getattr(importlib.import_module(module_name), name)
        if isinstance(function, FunctionTool):  # a `@tool`: call the function it made one of
            function = function.function
        _FUNCTIONS[reference] = function
    return function


async def call_in_process(
    reference: str, arguments: dict[str, Any], info: StepInfo, limit: float | None
) -> Any:
    """Call a `module:function` in this process (no isolation: it shares the worker).

    The function sees `info` through `current_step()`. A coroutine function is
    awaited; a plain one runs on the event loop when there is no `limit`
    (the fastest way, for short functions), else in a thread.

    Raises:
        TimeoutError: It ran longer than `limit` seconds.
        Exception: Whatever the function (or importing it) raised.
    """
    token = _CURRENT.set(info)
    try:
        function = _resolve(reference)
        if inspect.iscoroutinefunction(function):
            return await asyncio.wait_for(function(**arguments), limit)
        if limit is None:
            return function(**arguments)
        return await asyncio.wait_for(asyncio.to_thread(function, **arguments), limit)
    finally:
        _CURRENT.reset(token)
