"""Why a run waits: what each unfinished step of a run waits for, read from the store.

`read_waits` reads a run's tree (its runs, jobs and pending approvals) in one
transaction and says, for each unfinished step, what it waits for: a
person's decision (with the commands that give it), child runs (and,
recursively, what they wait for), a worker to claim it, the time of its
next retry, the worker running it, or a slot under its flow's concurrency
limit. A finished run waits for nothing.
"""

from __future__ import annotations

import json
import shlex
from collections import defaultdict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tidemill.engine.runs._context import load_definition, top_run_or_error
from tidemill.engine.runs._scope import Definitions
from tidemill.flows import iso_time
from tidemill.store import FINISHED_RUN, ApprovalRow, JobRow, RunRow, Tx, WaitRow

__all__ = ["WAIT_KINDS", "Wait", "read_waits"]

WAIT_KINDS = (
    "approval",
    "tool_call",
    "question",
    "budget",
    "reconcile",
    "children",
    "queued",
    "retry",
    "running",
    "stalled",
    "concurrency",
    "sleep",
    "event",
    "start",
    "waiting",
)
"""What a step (or a run) can wait for.

`approval`: an approval step's decision. `tool_call`, `question`, `budget`,
`reconcile`: an agent step's request to a person, of that approval kind.
`children`: child runs (a branch, parallel branches, loop iterations, a
sub-flow, or runs started by an agent's tool calls). `queued`: a worker to
claim it. `retry`: the time of its next attempt. `running`: the worker
running it. `stalled`: a worker whose lease ran out (it seems to have died)
to be taken over. `concurrency`: a slot under the flow's concurrency limit
(the run itself, `step` None). `sleep`: a `sleep` step's end. `event`: an
event sent to a `wait_for_event` step (with the command that sends it).
`start`: a run submitted to start later (`submit(start_at=...)`), its first
steps due then. `waiting`: parked with nothing pending found.
"""

_WORKER = "tidemill worker"


@dataclass(frozen=True, slots=True)
class Wait:
    """What one unfinished step of a run waits for.

    Examples:
        >>> wait = Wait("queued", "hi", "r1", "queued; no worker has claimed it yet",
        ...             commands=("tidemill worker",))
        >>> [w.step for w in wait.walk()], wait.commands
        (['hi'], ('tidemill worker',))
    """

    kind: str
    """One of `WAIT_KINDS`."""
    step: str | None
    """The step's path from the run asked about (`ask`, `each[2]/agent`).

    None when the run itself waits (`concurrency`)."""
    run_id: str
    """The run (or child run) the step belongs to."""
    reason: str
    """What it waits for, in one line."""
    job_id: int | None = None
    """The step attempt's job, when there is one."""
    approval_id: str | None = None
    """The approval request to decide, for a person's decision."""
    approvers: tuple[str, ...] = ()
    """Who may decide it (empty: anyone)."""
    commands: tuple[str, ...] = ()
    """The commands that unblock it, where a person can.

    Add `--db URL` to them unless `TIDEMILL_DB` names the store."""
    since: float | None = None
    """When this wait began (seconds since the epoch)."""
    until: float | None = None
    """When it ends by itself, if it does (seconds since the epoch).

    An approval's expiry, a retry's due time, the end of a worker's lease."""
    then: str | None = None
    """What happens at `until`."""
    details: Mapping[str, Any] = field(default_factory=dict)
    """The facts behind `reason`.

    The tool and its arguments, the question, the bound and its limit, the
    worker, the concurrency key and limit, ..."""
    children: tuple[Wait, ...] = ()
    """For `children`: what the unfinished child runs wait for."""

    def walk(self) -> Iterator[Wait]:
        """This wait, then those of its child runs, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


def read_waits(tx: Tx, defs: Definitions, run_id: str, now: float) -> list[Wait]:
    """What each unfinished step of a run waits for; empty once the run is finished.

    `run_id` may be a top-level run or a child run; step paths start from it.

    Raises:
        RunNotFound: No such run.
    """
    run = top_run_or_error(tx, run_id)
    if run.status in FINISHED_RUN:
        return []
    return _Tree(tx, defs, run.root_id, now).run(run, "")


class _Tree:
    """A run's tree as read once: child runs by parent job, jobs by run, approvals by job."""

    def __init__(self, tx: Tx, defs: Definitions, root_id: str, now: float) -> None:
        self.tx, self.defs, self.now = tx, defs, now
        self.children: dict[int, list[RunRow]] = defaultdict(list)
        for child in tx.tree(root_id):
            if child.parent_job is not None:
                self.children[child.parent_job].append(child)
        for runs in self.children.values():
            runs.sort(key=lambda r: r.child_index or 0)
        self.jobs: dict[str, list[JobRow]] = defaultdict(list)
        for job in tx.tree_jobs(root_id):
            self.jobs[job.run_id].append(job)
        self.approvals: dict[int, list[ApprovalRow]] = defaultdict(list)
        for approval in tx.approvals(status="pending", root_id=root_id):
            self.approvals[approval.job_id].append(approval)
        self.timed = {wait.job_id: wait for wait in tx.tree_waits(root_id)}

    def run(self, run: RunRow, prefix: str) -> list[Wait]:
        """The waits of an unfinished run's steps, in the order they were queued."""
        if run.status == "queued":
            return [self._gate(run)]
        waits: list[Wait] = []
        for job in self.jobs[run.id]:
            path = prefix + job.step_id
            if job.status == "queued":
                waits.append(self._queued(run, job, path))
            elif job.status == "running":
                waits.append(self._running(job, path))
            elif job.status == "waiting":
                waits.extend(self._waiting(run, job, path))
        return waits

    # --- a worker's part --------------------------------------------------

    def _queued(self, run: RunRow, job: JobRow, path: str) -> Wait:
        details: dict[str, Any] = {"attempt": job.attempt}
        if job.run_at <= self.now:
            again = f" (attempt {job.attempt})" if job.attempt > 1 else ""
            reason = f"queued; no worker has claimed it yet{again}"
            return Wait(
                "queued", path, run.id, reason, job_id=job.id, commands=(_WORKER,),
                since=job.run_at, details=details,
            )  # fmt: skip
        earlier = [j for j in self.jobs[run.id] if j.step_id == job.step_id and j.id < job.id]
        if not earlier and job.attempt == 1:  # a first attempt due later: a run started later
            return Wait(
                "start", path, run.id, f"the run starts at {iso_time(job.run_at)}",
                job_id=job.id, since=job.created_at, until=job.run_at,
                then="it is due, and the next worker to poll runs it", details=details,
            )  # fmt: skip
        error = earlier[-1].error if earlier else None
        details["previous_error"] = error
        reason = f"attempt {job.attempt} is scheduled"
        if error:
            reason += f" after attempt {job.attempt - 1} failed: {_error_line(error)}"
        return Wait(
            "retry", path, run.id, reason, job_id=job.id, since=job.created_at,
            until=job.run_at, then="it is due, and the next worker to poll runs it",
            details=details,
        )  # fmt: skip

    def _running(self, job: JobRow, path: str) -> Wait:
        details = {
            "worker": job.worker,
            "lease_until": job.lease_until,
            "attempt": job.attempt,
            "epoch": job.epoch,
        }
        lease = job.lease_until
        if lease is not None and lease < self.now:
            reason = (
                f"claimed by worker {job.worker}, which stopped renewing its lease "
                "(it died or stalled)"
            )
            then = "its lease ended; the next worker to poll takes the step over"
            return Wait(
                "stalled", path, job.run_id, reason, job_id=job.id, commands=(_WORKER,),
                since=job.started_at, until=lease, then=then, details=details,
            )  # fmt: skip
        reason = f"running on worker {job.worker} (attempt {job.attempt})"
        then = "its lease ends unless the worker renews it"
        return Wait(
            "running", path, job.run_id, reason, job_id=job.id, since=job.started_at,
            until=lease, then=then, details=details,
        )  # fmt: skip

    # --- parked: a person's decision, child runs --------------------------

    def _waiting(self, run: RunRow, job: JobRow, path: str) -> list[Wait]:
        timed = self.timed.get(job.id)
        if timed is not None:
            return [_timed(timed, path)]
        waits = [_decision(a, path, self.now) for a in self.approvals.get(job.id, [])]
        children = self.children.get(job.id, [])
        if children:
            waits.append(self._children(run, job, path, children))
        if not waits:
            reason = "parked, with no pending request or unfinished child run"
            waits.append(Wait("waiting", path, run.id, reason, job_id=job.id))
        return waits

    def _children(self, run: RunRow, job: JobRow, path: str, children: list[RunRow]) -> Wait:
        open_ = [c for c in children if c.status not in FINISHED_RUN]
        labels = [_child_label(path, c) for c in open_]
        nested: list[Wait] = []
        for child, label in zip(open_, labels, strict=True):
            nested.extend(self.run(child, label + "/"))
        details: dict[str, Any] = {"children": [c.id for c in open_], "unfinished": labels}
        reason = f"{len(open_)} of {len(children)} child runs unfinished: {', '.join(labels)}"
        items = self.tx.payload(run.id, f"items:{job.id}") if _is_loop(children) else None
        if isinstance(items, list):
            details["items"], details["started"] = len(items), len(children)
            if len(items) > len(children):
                more = len(items) - len(children)
                reason += f"; {more} more item{'s' if more > 1 else ''} to start as these finish"
        return Wait(
            "children", path, run.id, reason, job_id=job.id,
            since=min(c.created_at for c in children), details=details, children=tuple(nested),
        )  # fmt: skip

    # --- the run itself ---------------------------------------------------

    def _gate(self, run: RunRow) -> Wait:
        key = run.concurrency_key or ""
        flow = load_definition(self.tx, self.defs, run.digest)
        limit = None if flow.concurrency is None else flow.concurrency.limit
        active = self.tx.gate_active(key)
        ahead = self.tx.gate_ahead(key, run)
        details = {"key": key, "limit": limit, "active": active, "ahead": ahead}
        reason = (
            f"queued behind its flow's concurrency limit: {active} of {limit} runs "
            f"under {key!r} are active, {ahead} queued ahead of it"
        )
        return Wait("concurrency", None, run.id, reason, since=run.created_at, details=details)


def _timed(wait: WaitRow, path: str) -> Wait:
    """What a `sleep` or `wait_for_event` step waits for."""
    details: dict[str, Any] = {}
    if wait.kind == "sleep":
        until = iso_time(wait.due_at or wait.created_at)
        return Wait(
            "sleep", path, wait.run_id, f"sleeping until {until}", job_id=wait.job_id,
            since=wait.created_at, until=wait.due_at, then="the step ends and the run goes on",
            details={"until": until},
        )  # fmt: skip
    details = {"name": wait.name, "key": wait.key, "workspace": wait.workspace, "path": wait.path}
    reason = f"waiting for the event {wait.name!r} with key {wait.key!r}"
    command = f"tidemill events send {wait.name} --key {shlex.quote(wait.key or '')}"
    if wait.path:
        command += f" --path {wait.path}"
    if wait.due_at is not None:
        details["deadline"] = iso_time(wait.due_at)
        reason += f" (until {details['deadline']})"
    return Wait(
        "event", path, wait.run_id, reason, job_id=wait.job_id, commands=(command,),
        since=wait.created_at, until=wait.due_at,
        then=None if wait.due_at is None else "the wait times out (see the step's on_timeout)",
        details=details,
    )  # fmt: skip


def _child_label(path: str, child: RunRow) -> str:
    """A child run's path: `each[2]`, `pick` (a case or a sub-flow), `agent[tool:lookup:c1]`.

    Loop iterations and parallel branches carry their index; a branch's case
    and a sub-flow have one body; other parts (an agent's tool calls) are named.
    """
    scope = json.loads(child.scope)
    part = str(scope[-1][1]) if scope else ""
    if part == "flow" or part.startswith("case:"):
        return path
    if part == "body" or part.startswith("branch:") or not part:
        return f"{path}[{child.child_index}]"
    return f"{path}[{part}]"


def _is_loop(children: list[RunRow]) -> bool:
    scope = json.loads(children[0].scope)
    return bool(scope) and scope[-1][1] == "body"


def _error_line(error: Mapping[str, Any] | None) -> str:
    if not error:
        return ""
    message = str(error.get("message") or "").strip().splitlines()
    return f"{error.get('type', 'Error')}: {message[0] if message else ''}".rstrip(": ")


# --- a person's decision -------------------------------------------------------------------

_EXPIRY = {
    "tool_call": "it expires, and the agent's model is told the call was refused",
    "question": "it expires, and the agent's model is told no answer came",
    "budget": "it expires, and the step fails with LimitExceeded",
    "reconcile": "it expires, and the step fails (nobody said whether the call ran)",
}


def _decision(approval: ApprovalRow, path: str, now: float) -> Wait:
    """The wait for one pending approval request: what it asks, who decides, how."""
    details = approval.details or {}
    kind = approval.kind if approval.kind in _EXPIRY else "approval"
    who = _who(approval.approvers)
    arguments = json.dumps(details.get("arguments", {}), ensure_ascii=False)
    call = f"{details.get('tool', '?')} {arguments}"
    if kind == "tool_call":
        reason = f"tool call {call} needs approval ({who} may decide)"
        facts = {"tool": details.get("tool"), "arguments": details.get("arguments")}
    elif kind == "question":
        reason = f"the agent asks: {details.get('question', approval.message)} ({who} may answer)"
        facts = {"question": details.get("question", approval.message)}
    elif kind == "budget":
        reason = (
            f"the agent used up its {details.get('bound')} limit of {details.get('limit')} "
            f"({details.get('used')} used); {who} may extend it or stop it"
        )
        facts = {key: details.get(key) for key in ("bound", "limit", "used")}
    elif kind == "reconcile":
        reason = f"did the call {call} take effect? Its worker died while it ran ({who} may say)"
        facts = {key: details.get(key) for key in ("tool", "arguments", "attempt", "question")}
    else:
        reason = f"approval: {approval.message} ({who} may decide)"
        facts = {"message": approval.message, "on_timeout": approval.on_timeout}
    then = None
    if approval.expires_at is not None:
        if approval.expires_at <= now:
            then = "it expired; a worker resolves it on its next poll"
        elif kind == "approval" and approval.on_timeout == "approve":
            then = "it is approved"
        else:
            then = _EXPIRY.get(kind, "it expires, and the step fails")
    return Wait(
        kind, path, approval.run_id, reason, job_id=approval.job_id, approval_id=approval.id,
        approvers=tuple(approval.approvers), commands=_commands(kind, approval),
        since=approval.created_at, until=approval.expires_at, then=then, details=facts,
    )  # fmt: skip


def _who(approvers: list[str]) -> str:
    """Who may decide, in words (a group as "a member of g/<group>").

    Examples:
        >>> _who([]), _who(["alice"]), _who(["alice", "g/support"])
        ('anyone', 'alice', 'alice or a member of g/support')
    """
    if not approvers:
        return "anyone"
    named = [f"a member of {a}" if a.startswith("g/") else a for a in approvers]
    if len(named) == 1:
        return named[0]
    return ", ".join(named[:-1]) + " or " + named[-1]


def _commands(kind: str, approval: ApprovalRow) -> tuple[str, ...]:
    """The commands that decide an approval request (`--as` one of its approvers).

    Examples:
        >>> row = ApprovalRow("a1", "r", "r", 1, "s", "", ["alice"], "reject", "pending",
        ...     0.0, None, None, None, None, "budget", {"bound": "max_requests", "limit": 2})
        >>> for command in _commands("budget", row):
        ...     print(command)
        tidemill approvals extend a1 --to 4 --as alice
        tidemill approvals extend a1 --stop --as alice
        >>> row.approvers = ["g/support"]
        >>> _commands("approval", row)[0]
        'tidemill approvals approve a1 --as NAME'
    """
    id_, approvers = approval.id, approval.approvers
    only = approvers[0] if len(approvers) == 1 and not approvers[0].startswith("g/") else None
    as_ = "" if not approvers else f" --as {only or 'NAME'}"  # a group's member: NAME
    if kind == "question":
        actions = [f'answer {id_} --text "ANSWER"']
    elif kind == "budget":
        limit = int((approval.details or {}).get("limit") or 0)
        actions = [f"extend {id_} --to {max(2 * limit, limit + 1)}", f"extend {id_} --stop"]
    elif kind == "reconcile":
        actions = [f"reconcile {id_} --happened", f"reconcile {id_} --not-happened"]
    else:
        actions = [f"approve {id_}", f"reject {id_}"]
    return tuple(f"tidemill approvals {action}{as_}" for action in actions)
