"""Budgets: an agent step that reaches a bound asks a person for more (`on_exceeded: ask`).

With `limits.on_exceeded: ask`, the bounds `max_requests`, `max_tool_calls`
and the token bounds are not enforced by the agent loop (which would end the
run); instead `BudgetModel` checks them before each model request, against
the journal's usage. When one is used up, the request is not made: the
journal stays where it is (mid-run) and the step parks with one approval row
of kind `budget`, whose `details` name the `session` (thread id), the
`bound`, its current `limit`, what was `used` and the `expected_seq`.

`max_duration` (wall time) is asked about too: when it runs out, the step
parks the same way (`used` is the seconds elapsed, waits included) instead
of ending the agent run; whatever was in flight (a model call, a tool call)
is cut off and runs again after the extension, as after a crash.

`extend` with a larger limit stores it in `details["decision"]`; every later
execution of the step reads the extensions back (`extended_limits`,
`extended_duration`) and the agent continues from its journal: answered
turns are not asked again. Stopping (or expiry) fails the step with
`LimitExceeded`, as `fail` would. `max_iterations` always fails.

Because the bound is checked before a request, `max_tool_calls` pauses the
agent once that many calls were started (the batch that reached it runs),
and a token bound once that many tokens were spent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from tidemill.agents.checkpoint import Checkpointer
from tidemill.agents.journal import ThreadState
from tidemill.engine._journal import Journal, thread_id
from tidemill.errors import ApprovalDecisionError
from tidemill.llm import Model, ModelRequest
from tidemill.store import ApprovalRow, Tx
from tidemill.types import ModelResponse

if TYPE_CHECKING:
    from tidemill.flows import AIAgent

__all__ = [
    "BUDGET_BOUNDS",
    "BudgetModel",
    "BudgetReached",
    "budget_details",
    "check_extend",
    "extended_duration",
    "extended_limits",
    "reached",
]

BUDGET_BOUNDS = (
    "max_requests",
    "max_tool_calls",
    "max_input_tokens",
    "max_output_tokens",
    "max_total_tokens",
)
"""The bounds `on_exceeded: ask` can extend."""


class BudgetReached(Exception):
    """A bound is used up; the step asks for more before the next model request."""

    def __init__(self, bound: str, limit: int, used: int, state: ThreadState) -> None:
        super().__init__(f"{bound} limit of {limit} reached ({used} used)")
        self.bound, self.limit, self.used, self.state = bound, limit, used, state


def _used(state: ThreadState, bound: str) -> int:
    usage = state.usage
    return {
        "max_requests": usage.requests,
        "max_tool_calls": state.tool_calls,
        "max_input_tokens": usage.input_tokens,
        "max_output_tokens": usage.output_tokens,
        "max_total_tokens": usage.total_tokens,
    }[bound]


def reached(state: ThreadState, limits: Mapping[str, int]) -> tuple[str, int, int] | None:
    """The first bound `state` has used up, as `(bound, limit, used)`, if any.

    Examples:
        >>> state = ThreadState("t", tool_calls=2)
        >>> reached(state, {"max_tool_calls": 2})
        ('max_tool_calls', 2, 2)
        >>> reached(state, {"max_tool_calls": 3}) is None
        True
    """
    for bound in BUDGET_BOUNDS:
        limit = limits.get(bound)
        if limit is not None and _used(state, bound) >= limit:
            return bound, limit, _used(state, bound)
    return None


def extended_limits(agent: AIAgent, rows: Iterable[ApprovalRow]) -> dict[str, int]:
    """The step's askable bounds, each raised to the largest extension granted on `rows`.

    Examples:
        >>> from tidemill.flows import AIAgent
        >>> agent = AIAgent(model="fake", limits={"max_requests": 2, "on_exceeded": "ask"})
        >>> row = ApprovalRow("a1", "r", "r", 1, "s", "", [], "reject", "approved", 0.0,
        ...     None, 1.0, None, None, "budget",
        ...     {"bound": "max_requests", "decision": {"action": "extend", "limit": 5}})
        >>> extended_limits(agent, [row])
        {'max_requests': 5}
    """
    limits: dict[str, int] = {}
    for bound in BUDGET_BOUNDS:
        value = getattr(agent.limits, bound)
        if value is not None:
            limits[bound] = int(value)
    for row in rows:
        details = row.details or {}
        decision = details.get("decision") or {}
        name = str(details.get("bound"))
        if row.kind != "budget" or decision.get("action") != "extend" or name not in limits:
            continue
        limits[name] = max(limits[name], int(decision["limit"]))
    return limits


def extended_duration(agent: AIAgent, rows: Iterable[ApprovalRow]) -> float | None:
    """The step's `max_duration` in seconds, raised to the largest extension granted on `rows`.

    Examples:
        >>> from tidemill.flows import AIAgent
        >>> agent = AIAgent(model="fake", limits={"max_duration": "1m", "on_exceeded": "ask"})
        >>> row = ApprovalRow("a1", "r", "r", 1, "s", "", [], "reject", "approved", 0.0,
        ...     None, 1.0, None, None, "budget",
        ...     {"bound": "max_duration", "decision": {"action": "extend", "limit": 300}})
        >>> extended_duration(agent, []), extended_duration(agent, [row])
        (60.0, 300.0)
    """
    limit = agent.limits.max_duration
    if limit is None:
        return None
    for row in rows:
        details = row.details or {}
        decision = details.get("decision") or {}
        if (
            row.kind == "budget"
            and details.get("bound") == "max_duration"
            and decision.get("action") == "extend"
        ):
            limit = max(limit, float(decision["limit"]))
    return float(limit)


def budget_details(state: ThreadState, bound: str, limit: float, used: float) -> dict[str, Any]:
    """The `details` of a budget approval row.

    Examples:
        >>> details = budget_details(ThreadState("t", seq=7), "max_requests", 2, 2)
        >>> details["session"], details["bound"], details["limit"], details["expected_seq"]
        ('t', 'max_requests', 2, 7)
    """
    return {
        "session": state.thread_id,
        "bound": bound,
        "limit": limit,
        "used": used,
        "expected_seq": state.seq,
        "decision": None,
    }


def check_extend(
    tx: Tx, approval: ApprovalRow, *, new_limit: int | None, actor: str | None
) -> dict[str, Any]:
    """Check an extension (or a stop, `new_limit` None); return the decision as stored.

    The approval's kind, status, expiry and actor are checked by the caller.

    Raises:
        ApprovalDecisionError: `arguments` when the new limit is not larger
            than the current one; `mismatch` when the journal moved on.
    """
    details = approval.details or {}
    if new_limit is None:
        return {"action": "stop", "limit": None, "actor": actor}
    limit = details.get("limit") or 0
    if details.get("bound") == "max_duration":  # the time already spent must fit too
        limit = max(limit, details.get("used") or 0)
    if new_limit <= limit:
        raise ApprovalDecisionError(
            f"The new {details.get('bound')} limit must be larger than {limit}, not {new_limit}.",
            reason="arguments",
            hint=f"tidemill approvals extend {approval.id} --to N (N > {limit}), or --stop",
        )
    expected = thread_id(approval.run_id, approval.step_id)
    seq = max((seq for seq, _ in tx.journal(expected)), default=0)
    if details.get("session") != expected or seq != details.get("expected_seq"):
        raise ApprovalDecisionError(
            f"Approval {approval.id} no longer matches its agent: it expects journal entry "
            f"{details.get('expected_seq')} of {details.get('session')!r}; "
            f"the journal is at {seq}.",
            reason="mismatch",
            hint="The agent moved on; list the pending approvals again.",
        )
    return {"action": "extend", "limit": new_limit, "actor": actor}


class BudgetModel(Model):
    """Wraps the step's model: before each request, the journal's usage is checked.

    Raises `BudgetReached` instead of asking the model when a bound of
    `limits` is used up; the journal is left as it stands.
    """

    def __init__(
        self, model: Model, checkpointer: Checkpointer, thread: str, limits: Mapping[str, int]
    ) -> None:
        self.inner = model
        self.checkpointer = checkpointer
        self.thread = thread
        self.limits = dict(limits)
        self.provider = model.provider
        self.model_name = model.model_name
        self.supports_tools = model.supports_tools
        self.supports_output_format = model.supports_output_format

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Ask the wrapped model, unless a bound is used up."""
        state = (await Journal.read(self.checkpointer, self.thread)).state
        found = reached(state, self.limits)
        if found is not None:
            raise BudgetReached(*found, state)
        return await self.inner.request(request)
