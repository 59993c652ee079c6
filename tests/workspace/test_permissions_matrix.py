"""Every operation of the Python API, as each kind of principal: allowed, or refused how.

The matrix runs on one workspace per backend, built once (with the blocking
`Workspace`): the team of `conftest.py`, a second folder `f/lab` with the same
grants for the operations that change things (each principal on its own
targets, so one case never changes what another sees), and:

- `dan`: a workspace admin, a member of `g/readers` and a writer of both
  folders, who is disabled: the flag alone must stop him from doing anything;
- `u/max/notes`, `u/max/openai` (a resource referencing `$var:f/team/key`) and
  `u/max/flow` (naming `f/team/script`), written by `ada`;
- a deleted script `f/team/old`, and drafts by `olga` of the flow and the script.

The scenarios after the matrix change grants, so each builds its own team.
"""

from __future__ import annotations

import contextlib
import enum
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

import pytest
from tests.workspace.conftest import (
    FLOW,
    RESOURCE,
    SCRIPT,
    SCRIPT_V2,
    Team,
    build_team,
    new_workspace_name,
)

from tidemill.errors import (
    FlowValidationError,
    ItemNotFound,
    PermissionDenied,
    UnresolvedReference,
    VersionConflict,
)
from tidemill.workspace import (
    AsyncWorkspace,
    InvalidValue,
    Keyring,
    MasterKey,
    RunPlan,
    Workspace,
)

PRINCIPALS = ("ada", "olga", "vic", "max", "dan")
TEAM_PATHS = ["f/team/flow", "f/team/key", "f/team/openai", "f/team/region", "f/team/script"]
MAX_FLOW = {
    "steps": [{"id": "greet", "script": {"path": "f/team/script"}, "inputs": {"name": "x"}}]
}


SCHEDULES = sorted(f"f/lab/{kind}-{p}" for kind in ("paused", "sched") for p in PRINCIPALS)
"""The schedules of f/lab besides f/lab/nightly: one to pause and one to resume per principal."""

AGENT_WITH_FLOW_TOOL = {"model": "fake", "tools": [{"name": "greet", "flow": "f/team/flow"}]}
"""An agent whose tool is the team's flow: reading it in needs the viewer role on it."""


class Outcome(enum.Enum):
    """What an operation does for a principal."""

    OK = "allowed"
    EMPTY = "allowed, and shows nothing of f/team"
    HIDDEN = "ItemNotFound"
    DENIED = "PermissionDenied"
    UNRESOLVED = "UnresolvedReference"
    INVALID = "FlowValidationError"
    CONFLICT = "VersionConflict"
    REFUSED = "PermissionDenied or ItemNotFound"


RAISES: dict[Outcome, tuple[type[Exception], ...]] = {
    Outcome.HIDDEN: (ItemNotFound,),
    Outcome.DENIED: (PermissionDenied,),
    Outcome.UNRESOLVED: (UnresolvedReference,),
    Outcome.INVALID: (FlowValidationError,),
    Outcome.CONFLICT: (VersionConflict,),
    Outcome.REFUSED: (PermissionDenied, ItemNotFound),
}
WORDS = {
    "ok": Outcome.OK,
    "empty": Outcome.EMPTY,
    "hidden": Outcome.HIDDEN,
    "denied": Outcome.DENIED,
    "unresolved": Outcome.UNRESOLVED,
    "invalid": Outcome.INVALID,
    "conflict": Outcome.CONFLICT,
    "refused": Outcome.REFUSED,
}


@dataclass(frozen=True)
class Env:
    """What an operation may need besides the workspace: who, and the shared facts."""

    p: str
    secret: str
    keyring: Keyring
    plan: RunPlan


Op = Callable[[AsyncWorkspace, Env], Awaitable[Any]]
Check = Callable[[Any, Env], None]


@dataclass(frozen=True)
class Case:
    """One operation, and its outcome for each principal (in `PRINCIPALS` order)."""

    name: str
    op: Op
    table: str

    def outcome(self, principal: str) -> Outcome:
        words = self.table.split()
        assert len(words) == len(PRINCIPALS), self.name
        return WORDS[words[PRINCIPALS.index(principal)]]


# Operations.


def paths(result: Any) -> list[str]:
    return [entry.path for entry in result]


def no_team(result: Any, env: Env) -> None:
    assert not [path for path in paths(result) if path.startswith("f/team/")]


async def deploy(ws: AsyncWorkspace, env: Env) -> Any:
    with contextlib.suppress(PermissionDenied):
        await ws.save_draft("f/lab/script", "script", SCRIPT)
    return await ws.deploy("f/lab/script", message="ship")


async def discard(ws: AsyncWorkspace, env: Env) -> Any:
    with contextlib.suppress(PermissionDenied):
        await ws.save_draft("f/lab/script", "script", SCRIPT)
    return await ws.discard_draft("f/lab/script")


async def rotate(ws: AsyncWorkspace, env: Env) -> Any:
    await ws.rotate_key(MasterKey.generate())
    await ws.rotate_key(env.keyring.master)  # back: the other cases keep the key they have


async def acting(ws: AsyncWorkspace, env: Env) -> Any:
    other = await ws.acting_as("tgt")
    return await other.whoami()


async def revoke_own(ws: AsyncWorkspace, env: Env) -> Any:
    made = await ws.create_token("to revoke")
    return await ws.revoke_token(made.token.id)


def check_plan(result: Any, env: Env) -> None:
    assert isinstance(result, RunPlan)
    assert result.run_as == env.p
    assert result.source["items"] == {"f/team/script": 2}
    assert result.source["version"] == 1 and result.source["draft"] is False


def check_draft_plan(result: Any, env: Env) -> None:
    """A preview runs the principal's drafts where it has them, the rest as deployed."""
    source = result.source
    assert source["draft"] is True
    if env.p == "olga":  # her drafts of the flow and of the script
        assert (source["version"], source.get("flow_draft")) == (0, True)
        assert source["items"] == {"f/team/script": 0}
    else:
        assert (source["version"], source.get("flow_draft")) == (1, False)
        assert source["items"] == {"f/team/script": 2}


def check_drafts(result: Any, env: Env) -> None:
    expected = ["f/team/flow", "f/team/script"] if env.p == "olga" else []
    assert paths(result) == expected


def names(result: Any) -> list[str]:
    return [entry.name for entry in result]


READS = [
    # The item itself, and the sibling paths that reach it another way.
    #                                                               ada   olga   vic    max    dan
    Case("get", lambda ws, e: ws.get("f/team/script"),
         "ok ok ok hidden hidden"),
    Case("get version=1", lambda ws, e: ws.get("f/team/script", version=1),
         "ok ok ok hidden hidden"),
    Case("get a deleted item's version", lambda ws, e: ws.get("f/team/old", version=1),
         "ok ok ok hidden hidden"),
    Case("get reveal=True", lambda ws, e: ws.get("f/team/key", reveal=True),
         "ok ok ok hidden hidden"),
    Case("get a secret unrevealed", lambda ws, e: ws.get("f/team/key"),
         "ok ok ok hidden hidden"),
    Case("get u/max/notes", lambda ws, e: ws.get("u/max/notes"),
         "ok hidden hidden ok hidden"),
    Case("list f/team/", lambda ws, e: ws.list("f/team/"),
         "ok ok ok empty empty"),
    Case("list everything", lambda ws, e: ws.list(""),
         "ok ok ok empty empty"),
    Case("list deleted", lambda ws, e: ws.list("f/team/", deleted=True),
         "ok ok ok empty empty"),
    Case("history", lambda ws, e: ws.history("f/team/script"),
         "ok ok ok hidden hidden"),
    Case("history of a deleted item", lambda ws, e: ws.history("f/team/old"),
         "ok ok ok hidden hidden"),
    Case("diff", lambda ws, e: ws.diff("f/team/script", 1, 2),
         "ok ok ok hidden hidden"),
    Case("draft (olga's)", lambda ws, e: ws.draft("f/team/flow"),
         "hidden ok hidden hidden hidden"),
    Case("drafts", lambda ws, e: ws.drafts(),
         "ok ok ok ok ok"),
    Case("search", lambda ws, e: ws.search("helo"),
         "ok ok ok empty empty"),
    # Through a run.
    Case("run_plan", lambda ws, e: ws.run_plan("f/team/flow"),
         "ok ok ok hidden hidden"),
    Case("run_plan draft=True", lambda ws, e: ws.run_plan("f/team/flow", draft=True),
         "ok ok ok hidden hidden"),
    Case("run_plan u/max/flow", lambda ws, e: ws.run_plan("u/max/flow"),
         "ok hidden hidden invalid hidden"),
    Case("record_run", lambda ws, e: ws.record_run(f"run-{e.p}", replace(e.plan, run_as=e.p)),
         "ok ok ok denied denied"),
    Case("record_run of ada's plan", lambda ws, e: ws.record_run(f"run-{e.p}", e.plan),
         "ok denied denied denied denied"),
    # Sending an event to a flow's runs: asked like running it.
    Case("check_event_target", lambda ws, e: ws.check_event_target("f/team/flow"),
         "ok ok ok hidden hidden"),
    Case("check_event_target of a script", lambda ws, e: ws.check_event_target("f/team/script"),
         "hidden hidden hidden hidden hidden"),
    Case("check_event_target no path", lambda ws, e: ws.check_event_target(None),
         "ok denied denied denied denied"),
    Case("record_event_sent", lambda ws, e: ws.record_event_sent("f/team/flow", name="paid"),
         "ok ok ok hidden hidden"),
    Case("record_event_sent no path", lambda ws, e: ws.record_event_sent(None, name="paid"),
         "ok denied denied denied denied"),
    # Pruning the workspace's ended runs (any flow's, anyone's): a workspace admin's.
    Case("check_prune_runs", lambda ws, e: ws.check_prune_runs(),
         "ok denied denied denied denied"),
    Case("record_runs_pruned",
         lambda ws, e: ws.record_runs_pruned(runs=2, before=1.7e9, dry_run=True),
         "ok denied denied denied denied"),
    # Through a reference, and a reference inside a resource.
    # Schedules (in f/lab: ada's, of f/lab/script).
    Case("schedules", lambda ws, e: ws.schedules("f/lab/"),
         "ok ok ok empty empty"),
    Case("schedule", lambda ws, e: ws.schedule("f/lab/nightly"),
         "ok ok ok hidden hidden"),
    Case("schedule_fires", lambda ws, e: ws.schedule_fires("f/lab/nightly"),
         "ok ok ok hidden hidden"),
    Case("resolve $res:f/team/openai", lambda ws, e: ws.resolve("$res:f/team/openai"),
         "ok ok ok unresolved unresolved"),
    Case("resolve $var:f/team/key", lambda ws, e: ws.resolve("$var:f/team/key"),
         "ok ok ok unresolved unresolved"),
    Case("resolve $var:f/team/region", lambda ws, e: ws.resolve({"r": "$var:f/team/region"}),
         "ok ok ok unresolved unresolved"),
    Case("linked_drafts", lambda ws, e: ws.linked_drafts("f/team/flow"),
         "ok ok ok hidden hidden"),
    # A lint reads the folder and what the flow names, as a draft save would; it stores nothing.
    Case("lint_flow", lambda ws, e: ws.lint_flow("f/team/new-flow", FLOW),
         "ok ok ok hidden hidden"),
    # Through a linked agent's tools: the flows they name are read as the principal.
    Case("inline_agent", lambda ws, e: ws.inline_agent(AGENT_WITH_FLOW_TOOL),
         "ok ok ok invalid invalid"),
    Case("resolve $res:u/max/openai", lambda ws, e: ws.resolve("$res:u/max/openai"),
         "ok unresolved unresolved unresolved unresolved"),
    # People.
    Case("whoami", lambda ws, e: ws.whoami(),
         "ok ok ok ok ok"),
    Case("users", lambda ws, e: ws.users(),
         "ok ok ok ok denied"),
    Case("groups", lambda ws, e: ws.groups(),
         "ok ok ok ok denied"),
    Case("folders", lambda ws, e: ws.folders(),
         "ok ok ok empty empty"),
    Case("audit", lambda ws, e: ws.audit(),
         "ok denied denied denied denied"),
    Case("acting_as", acting,
         "ok denied denied denied denied"),
]  # fmt: skip

WRITES = [
    #                                                               ada   olga   vic    max    dan
    Case("write", lambda ws, e: ws.write("f/lab/script", "script", SCRIPT_V2),
         "ok ok denied denied denied"),
    Case("write a new item", lambda ws, e: ws.write(f"f/lab/new-{e.p}", "variable", "v"),
         "ok ok denied denied denied"),
    Case("write a secret",
         lambda ws, e: ws.write(f"f/lab/token-{e.p}", "variable", "t", secret=True),
         "ok ok denied denied denied"),
    Case("write base_version", lambda ws, e: ws.write(
             "f/lab/clear", "script", SCRIPT, base_version=9999),
         "conflict conflict denied denied denied"),
    Case("write u/max/scratch", lambda ws, e: ws.write("u/max/scratch", "variable", "v"),
         "ok denied denied ok denied"),
    Case("delete", lambda ws, e: ws.delete(f"f/lab/del-{e.p}"),
         "ok ok denied denied denied"),
    Case("save_step_as_agent", lambda ws, e: ws.save_step_as_agent(
             f"f/lab/agentflow-{e.p}", "a", f"f/lab/agent-{e.p}"),
         "ok ok denied hidden hidden"),
    Case("unlink_step", lambda ws, e: ws.unlink_step(f"f/lab/linked-{e.p}", "a"),
         "ok ok denied hidden hidden"),
    Case("pause_schedule", lambda ws, e: ws.pause_schedule(f"f/lab/sched-{e.p}"),
         "ok ok denied denied denied"),
    Case("resume_schedule", lambda ws, e: ws.resume_schedule(f"f/lab/paused-{e.p}"),
         "ok ok denied denied denied"),
    Case("restore", lambda ws, e: ws.restore("f/lab/script", 1),
         "ok ok denied denied denied"),
    Case("clear_history", lambda ws, e: ws.clear_history("f/lab/clear"),
         "ok ok denied denied denied"),
    Case("save_draft", lambda ws, e: ws.save_draft("f/lab/script", "script", SCRIPT),
         "ok ok denied denied denied"),
    Case("deploy", deploy,
         "ok ok denied denied denied"),
    Case("discard_draft", discard,
         "ok ok hidden hidden hidden"),
    Case("grant on f/team", lambda ws, e: ws.grant("f/team", "tgt", "viewer"),
         "ok ok denied denied denied"),
    Case("grant on an item", lambda ws, e: ws.grant("f/team/script", "tgt", "writer"),
         "ok ok denied denied denied"),
    Case("revoke on f/lab", lambda ws, e: ws.grant("f/lab", "tgt", None),
         "ok ok denied denied denied"),
    Case("grant on u/max/notes", lambda ws, e: ws.grant("u/max/notes", "tgt", "viewer"),
         "ok denied denied ok denied"),
    Case("set_folder", lambda ws, e: ws.set_folder("lab", summary=f"by {e.p}"),
         "ok ok denied denied denied"),
    Case("add_user", lambda ws, e: ws.add_user(f"new-{e.p}"),
         "ok denied denied denied denied"),
    Case("set_user", lambda ws, e: ws.set_user(f"t-{e.p}", disabled=True),
         "ok denied denied denied denied"),
    Case("add_group", lambda ws, e: ws.add_group(f"new-{e.p}"),
         "ok denied denied denied denied"),
    Case("set_member", lambda ws, e: ws.set_member("spare", f"t-{e.p}"),
         "ok denied denied denied denied"),
    Case("delete_group", lambda ws, e: ws.delete_group(f"gone-{e.p}"),
         "ok denied denied denied denied"),
    Case("add_folder", lambda ws, e: ws.add_folder(f"new-{e.p}"),
         "ok denied denied denied denied"),
    Case("rotate_key", rotate,
         "ok denied denied denied denied"),
    # Signing in: one's own password and tokens; another user's for an admin.
    Case("set_password", lambda ws, e: ws.set_password(e.p, "correct horse battery"),
         "ok ok ok ok denied"),
    Case("set_password of another user", lambda ws, e: ws.set_password("tgt", "a long password"),
         "ok denied denied denied denied"),
    Case("create_token", lambda ws, e: ws.create_token("ci", scopes=["runs:read"]),
         "ok ok ok ok denied"),
    # A webhook token: for a flow the principal may run (the viewer role on it).
    Case("create_hook_token", lambda ws, e: ws.create_hook_token("f/team/flow"),
         "ok ok ok hidden denied"),
    Case("create_hook_token u/max/flow", lambda ws, e: ws.create_hook_token("u/max/flow"),
         "ok hidden hidden ok denied"),
    Case("tokens", lambda ws, e: ws.tokens(),
         "ok ok ok ok denied"),
    Case("tokens of another user", lambda ws, e: ws.tokens(user="tgt"),
         "ok denied denied denied denied"),
    Case("revoke_token", revoke_own,
         "ok ok ok ok denied"),
]  # fmt: skip

CHECKS: dict[str, Check] = {
    "get": lambda r, e: _eq(r.value, SCRIPT_V2),
    "get version=1": lambda r, e: _eq((r.value, r.version), (SCRIPT, 1)),
    "get a deleted item's version": lambda r, e: _eq(r.version, 1),
    "get reveal=True": lambda r, e: _eq(r.value, e.secret),
    "get a secret unrevealed": lambda r, e: _eq((r.value, r.secret), (None, True)),
    "list f/team/": lambda r, e: _eq(paths(r), TEAM_PATHS),
    "list everything": lambda r, e: _contains(paths(r), TEAM_PATHS),
    "list deleted": lambda r, e: _eq(paths(r), sorted([*TEAM_PATHS, "f/team/old"])),
    "history": lambda r, e: _eq([v.version for v in r], [2, 1]),
    "history of a deleted item": lambda r, e: _eq([v.version for v in r], [1]),
    "diff": lambda r, e: _eq("+    return 'HELLO ' + name" in r, True),
    "draft (olga's)": lambda r, e: _eq(r.owner, "olga"),
    "drafts": check_drafts,
    "search": lambda r, e: _contains(paths(r), ["f/team/script"]),
    "run_plan": check_plan,
    "run_plan draft=True": check_draft_plan,
    "run_plan u/max/flow": lambda r, e: _eq(r.source["items"], {"f/team/script": 2}),
    "check_event_target": lambda r, e: _eq(r, "f/team/flow"),
    "check_event_target no path": lambda r, e: _eq(r, ""),
    "check_prune_runs": lambda r, e: _eq(r, None),
    "record_runs_pruned": lambda r, e: _eq(r, None),
    "resolve $res:f/team/openai": lambda r, e: _eq(r.value, {"api_key": e.secret}),
    "resolve $var:f/team/key": lambda r, e: _eq((r.value, r.secrets), (e.secret, {e.secret})),
    "resolve $var:f/team/region": lambda r, e: _eq(r.value, {"r": "eu-west-1"}),
    "resolve $res:u/max/openai": lambda r, e: _eq(r.value, {"api_key": e.secret}),
    "whoami": lambda r, e: _eq((r.name, r.disabled), (e.p, e.p == "dan")),
    "users": lambda r, e: _contains(names(r), list(PRINCIPALS)),
    "groups": lambda r, e: _contains(names(r), ["readers"]),
    "folders": lambda r, e: _contains(names(r), ["lab", "team"]),
    "acting_as": lambda r, e: _eq(r.name, "tgt"),
    "create_token": lambda r, e: _eq((r.token.user, r.token.scopes), (e.p, ("runs:read",))),
    "create_hook_token": lambda r, e: _eq(
        (r.token.user, r.token.scopes, r.token.expires_at),
        (e.p, ("hooks:write:f/team/flow",), None),
    ),
    "create_hook_token u/max/flow": lambda r, e: _eq(r.token.scopes, ("hooks:write:u/max/flow",)),
    "revoke_token": lambda r, e: _eq((r.user, r.revoked_at is not None), (e.p, True)),
    "write": lambda r, e: _eq(r.updated_by, e.p),
    "restore": lambda r, e: _eq(r.value, SCRIPT),
    "save_draft": lambda r, e: _eq(r.owner, e.p),
    "lint_flow": lambda r, e: _eq(r, []),
    "deploy": lambda r, e: _eq((r.value, r.updated_by), (SCRIPT, e.p)),
    "schedules": lambda r, e: _eq(paths(r), ["f/lab/nightly", *SCHEDULES]),
    "schedule": lambda r, e: _eq((r.owner, r.spec.target), ("ada", "f/lab/script")),
    "schedule_fires": lambda r, e: _eq(r, []),
    "pause_schedule": lambda r, e: _eq((r.spec.enabled, r.owner), (False, e.p)),
    "resume_schedule": lambda r, e: _eq((r.spec.enabled, r.owner), (True, e.p)),
}
EMPTY_CHECKS: dict[str, Check] = {
    "list f/team/": no_team,
    "list everything": no_team,
    "list deleted": no_team,
    "search": no_team,
    "folders": lambda r, e: _eq(names(r), []),
    "schedules": lambda r, e: _eq(r, []),
}


def _eq(got: Any, expected: Any) -> None:
    assert got == expected


def _contains(got: list[str], expected: list[str]) -> None:
    assert set(expected) <= set(got), (got, expected)


# The shared workspace.


@dataclass(frozen=True)
class Shared:
    keyring: Keyring
    secret: str
    plan: RunPlan
    sessions: dict[str, AsyncWorkspace]


def _fill(ada: Workspace, secret: str) -> RunPlan:
    """Everything of the module docstring, in a workspace with only `ada` in it."""
    ada._loop.run(build_team(ada.core, secret))
    ada.add_user("dan", admin=True)
    ada.add_user("tgt")
    ada.set_member("readers", "dan")
    ada.add_group("spare")
    for name in PRINCIPALS:
        ada.add_user(f"t-{name}")
        ada.add_group(f"gone-{name}")
    ada.add_folder("lab", roles={"olga": "admin", "g/readers": "viewer", "dan": "writer"})
    ada.grant("f/team", "dan", "writer")
    ada.write("f/lab/script", "script", SCRIPT, message="first")
    ada.write("f/lab/script", "script", SCRIPT_V2, message="second")
    ada.write("f/lab/clear", "script", SCRIPT)
    ada.write("f/lab/clear", "script", SCRIPT_V2)
    for name in PRINCIPALS:
        ada.write(f"f/lab/del-{name}", "variable", "gone soon")
    ada.write("f/lab/agent0", "resource", {"model": "fake"}, resource_type="ai_agent")
    for name in PRINCIPALS:
        inline = {"model": "fake", "system": "Help."}
        step = {"id": "a", "ai_agent": inline, "inputs": {"user_message": "hi"}}
        ada.write(f"f/lab/agentflow-{name}", "flow", {"steps": [step]})
        linked = {**step, "ai_agent": {"agent": "f/lab/agent0"}}
        ada.write(f"f/lab/linked-{name}", "flow", {"steps": [linked]})
    nightly = {"cron": "0 2 * * *", "target": "f/lab/script"}
    ada.write("f/lab/nightly", "schedule", nightly)
    for name in PRINCIPALS:
        ada.write(f"f/lab/sched-{name}", "schedule", nightly)
        ada.write(f"f/lab/paused-{name}", "schedule", {**nightly, "enabled": False})
    ada.write("f/team/old", "script", SCRIPT)
    ada.delete("f/team/old")
    ada.write("u/max/notes", "variable", "max's notes")
    ada.write("u/max/openai", "resource", RESOURCE, resource_type="openai")
    ada.write("u/max/flow", "flow", MAX_FLOW)
    olga = ada.acting_as("olga")
    olga.save_draft("f/team/flow", "flow", {**FLOW, "summary": "Olga's draft"})
    olga.save_draft("f/team/script", "script", SCRIPT)
    ada.set_user("dan", disabled=True)
    return ada.run_plan("f/team/flow")


@pytest.fixture(scope="module")
def shared(shared_store: str) -> Iterator[Shared]:
    """The matrix's workspace, built once per backend; each principal has a session on it."""
    keyring = Keyring(MasterKey.generate())
    secret = f"sk-PLAINTEXT-{uuid.uuid4().hex}"
    name = new_workspace_name()
    with Workspace(shared_store, workspace=name, user="ada", keyring=keyring, migrate=True) as ada:
        plan = _fill(ada, secret)
        sessions = {
            who: AsyncWorkspace(
                ada.core.store, workspace=name, user=who, keyring=keyring, create=False
            )
            for who in PRINCIPALS
        }
        yield Shared(keyring, secret, plan, sessions)


async def _outcome(case: Case, principal: str, shared: Shared) -> str:
    """What `case` did as `principal`: an `Outcome`'s value, or what went wrong instead."""
    env = Env(principal, shared.secret, shared.keyring, shared.plan)
    expected = case.outcome(principal)
    try:
        result = await case.op(shared.sessions[principal], env)
    except Exception as exc:
        if shared.secret in str(exc) or shared.secret in repr(exc.args):
            return f"{type(exc).__name__} that tells the secret"  # a refusal never does
        for outcome, types in RAISES.items():
            if isinstance(exc, types) and (outcome is expected or outcome is not Outcome.REFUSED):
                return outcome.value
        return f"{type(exc).__name__}: {exc}"
    if expected is Outcome.EMPTY:
        try:
            EMPTY_CHECKS[case.name](result, env)
        except AssertionError:
            return f"allowed, and shows f/team: {result!r}"[:300]
        return Outcome.EMPTY.value
    check = CHECKS.get(case.name)
    try:
        if check is not None:
            check(result, env)
    except AssertionError:
        return f"allowed, but returned {result!r}"[:300]
    return Outcome.OK.value


@pytest.mark.parametrize("case", READS + WRITES, ids=[case.name for case in READS + WRITES])
async def test_matrix(case: Case, shared: Shared) -> None:
    """Each principal in turn; every one that does not get its expected outcome is listed."""
    wrong = []
    for principal in PRINCIPALS:
        expected = case.outcome(principal).value
        got = await _outcome(case, principal, shared)
        if got != expected:
            wrong.append(f"{principal}: expected {expected}, got {got}")
    assert not wrong, f"{case.name}: " + "; ".join(wrong)


def test_the_table_is_well_formed() -> None:
    for case in READS + WRITES:
        outcomes = [case.outcome(p) for p in PRINCIPALS]
        if Outcome.EMPTY in outcomes:
            assert case.name in EMPTY_CHECKS, case.name
    assert len({case.name for case in READS + WRITES}) == len(READS + WRITES)


def test_every_operation_is_in_the_matrix() -> None:
    """A new method of AsyncWorkspace must get a row (or a reason not to)."""
    covered = {case.name.split()[0] for case in READS + WRITES}
    public = {
        name
        for name in dir(AsyncWorkspace)
        if not name.startswith("_") and callable(getattr(AsyncWorkspace, name))
    }
    not_asked = {"close", "keyring", "transact"}  # plumbing, no principal question
    not_asked |= {"push", "pull"}  # the directory sync: tests/workspace/test_sync_directory.py
    not_asked |= {"resolve_in"}  # resolve in the caller's transaction: test_run_plans.py
    not_asked |= {"signed_in"}  # a front door's handle for who it signed in: each call asks
    assert public - not_asked - covered == set()


def test_the_blocking_workspace_has_every_operation() -> None:
    public = {n for n in dir(AsyncWorkspace) if not n.startswith("_")}
    plumbing = {"transact", "keyring", "store", "name", "user", "resolve_in", "signed_in"}
    assert public - plumbing <= set(dir(Workspace))


# Scenarios: each changes grants, so each has a team of its own.


async def test_own_resource_cannot_reach_a_variable_its_owner_may_not_read(team: Team) -> None:
    # max may not write it: the key must be a secret variable he may read ...
    with pytest.raises(InvalidValue) as refused:
        await team.max.write("u/max/openai", "resource", RESOURCE, resource_type="openai")
    assert "$var:f/team/key" in str(refused.value) and team.secret not in str(refused.value)
    # ... exactly as if it did not exist.
    with pytest.raises(InvalidValue) as absent:
        await team.max.write(
            "u/max/openai", "resource", {"api_key": "$var:f/team/nope"}, resource_type="openai"
        )
    told = str(refused.value).replace("$var:f/team/key", "$var:X")
    assert told == str(absent.value).replace("$var:f/team/nope", "$var:X")
    # Written by ada, it is max's resource; resolving it, as max, must not reach f/team/key.
    await team.ada.write("u/max/openai", "resource", RESOURCE, resource_type="openai")
    with pytest.raises(UnresolvedReference) as caught:
        await team.max.resolve("$res:u/max/openai")
    assert "$var:f/team/key" in str(caught.value) and "max" in str(caught.value)
    assert team.secret not in str(caught.value)
    # ada may read both.
    assert (await team.ada.resolve("$res:u/max/openai")).value == {"api_key": team.secret}
    # olga may read the variable, not max's resource.
    with pytest.raises(UnresolvedReference):
        await team.olga.resolve("$res:u/max/openai")


async def test_a_reference_inside_a_readable_resource_is_checked_too(team: Team) -> None:
    await team.max.write("u/max/token", "variable", "max-token", secret=True)
    await team.ada.write(
        "f/team/proxy", "resource", {"api_key": "$var:u/max/token"}, resource_type="openai"
    )
    assert (await team.ada.resolve("$res:f/team/proxy")).value == {"api_key": "max-token"}
    for reader in (team.olga, team.vic):  # they read f/team/proxy, not u/max/token
        assert (await reader.get("f/team/proxy")).value == {"api_key": "$var:u/max/token"}
        with pytest.raises(UnresolvedReference) as caught:
            await reader.resolve({"model": "$res:f/team/proxy"})
        assert "$var:u/max/token" in str(caught.value)
        assert "max-token" not in str(caught.value)


async def test_a_flow_naming_a_script_its_writer_may_not_read(team: Team) -> None:
    with pytest.raises(FlowValidationError) as refused:
        await team.max.write("u/max/flow", "flow", MAX_FLOW)
    assert "f/team/script" in str(refused.value)
    # It reads exactly as a script that does not exist: it tells nothing.
    missing = {"steps": [{**MAX_FLOW["steps"][0], "script": {"path": "f/team/nothing"}}]}
    with pytest.raises(FlowValidationError) as absent:
        await team.max.write("u/max/flow", "flow", missing)
    assert str(refused.value).replace("f/team/script", "X") == str(absent.value).replace(
        "f/team/nothing", "X"
    )
    with pytest.raises(ItemNotFound):
        await team.max.get("u/max/flow")  # nothing was written
    # Written by ada, it is max's flow; still, max cannot run what he cannot read.
    await team.ada.write("u/max/flow", "flow", MAX_FLOW)
    assert (await team.max.get("u/max/flow")).version == 1
    with pytest.raises(FlowValidationError) as caught:
        await team.max.run_plan("u/max/flow")
    assert "f/team/script" in str(caught.value)
    plan = await team.ada.run_plan("u/max/flow")
    assert plan.source["items"] == {"f/team/script": 2}


async def test_a_disabled_user_is_stopped_at_once(team: Team) -> None:
    await team.max.write("u/max/notes", "variable", "mine")
    await team.ada.set_user("max", disabled=True)
    # The same session, opened before: the next call already knows.
    with pytest.raises(ItemNotFound):
        await team.max.get("u/max/notes")
    with pytest.raises(PermissionDenied):
        await team.max.write("u/max/notes", "variable", "changed")
    assert await team.max.list() == []
    assert await team.max.search("notes") == []
    with pytest.raises(UnresolvedReference):
        await team.max.resolve("$var:u/max/notes")
    assert (await team.max.whoami()).disabled
    await team.ada.set_user("max", disabled=False)
    assert (await team.max.get("u/max/notes")).value == "mine"


async def test_drafts_are_per_user_even_for_an_admin(team: Team) -> None:
    draft = await team.olga.save_draft("f/team/script", "script", SCRIPT)
    assert draft.owner == "olga"
    # Nobody else sees it: not the deployed item, not as a draft, not even ada.
    for other in (team.ada, team.vic):
        assert (await other.get("f/team/script")).value == SCRIPT_V2
    with pytest.raises(ItemNotFound):
        await team.ada.draft("f/team/script")
    assert await team.ada.drafts() == []
    ada_plan = await team.ada.run_plan("f/team/flow")
    assert ada_plan.source["items"] == {"f/team/script": 2}
    # ada's own draft of the flow reads the deployed script, not olga's draft.
    await team.ada.save_draft("f/team/flow", "flow", FLOW)
    ada_preview = await team.ada.run_plan("f/team/flow", draft=True)
    assert ada_preview.source["items"] == {"f/team/script": 2}
    # An admin reaches it by acting as olga.
    as_olga = await team.ada.acting_as("olga")
    assert (await as_olga.draft("f/team/script")).value == SCRIPT
    # olga's preview of the flow runs her draft of the script.
    await team.olga.save_draft("f/team/flow", "flow", FLOW)
    olga_preview = await team.olga.run_plan("f/team/flow", draft=True)
    assert olga_preview.source["items"] == {"f/team/script": 0}
    # A viewer cannot save a draft.
    with pytest.raises(PermissionDenied):
        await team.vic.save_draft("f/team/script", "script", SCRIPT)
    # olga deploys: now everyone gets it, and her draft is gone.
    deployed = await team.olga.deploy("f/team/script", message="olga's")
    assert deployed.version == 3
    assert (await team.vic.get("f/team/script")).value == SCRIPT
    with pytest.raises(ItemNotFound):
        await team.olga.draft("f/team/script")


async def test_an_item_grant_opens_that_item_only(team: Team) -> None:
    await team.olga.grant("f/team/script", "max", "viewer")
    assert (await team.max.get("f/team/script")).value == SCRIPT_V2
    assert (await team.max.get("f/team/script", version=1)).value == SCRIPT
    assert [v.version for v in await team.max.history("f/team/script")] == [2, 1]
    assert paths(await team.max.list("f/team/")) == ["f/team/script"]
    assert "f/team/script" in paths(await team.max.search("helo"))
    assert "f/team/flow" not in paths(await team.max.search("greet someone"))
    # Not its siblings.
    for sibling in ("f/team/flow", "f/team/key", "f/team/openai", "f/team/region"):
        with pytest.raises(ItemNotFound):
            await team.max.get(sibling)
    with pytest.raises(ItemNotFound):
        await team.max.run_plan("f/team/flow")
    with pytest.raises(UnresolvedReference):
        await team.max.resolve("$var:f/team/key")
    # A viewer, not a writer.
    with pytest.raises(PermissionDenied):
        await team.max.write("f/team/script", "script", SCRIPT)
    with pytest.raises(PermissionDenied):
        await team.max.grant("f/team/script", "vic", "writer")
    # Revoking takes effect at once.
    await team.olga.grant("f/team/script", "max", None)
    with pytest.raises(ItemNotFound):
        await team.max.get("f/team/script")
    assert await team.max.list("f/team/") == []


async def test_a_group_grant_and_its_revocation(team: Team) -> None:
    assert (await team.vic.get("f/team/region")).value == "eu-west-1"
    with pytest.raises(PermissionDenied):
        await team.vic.write("f/team/region", "variable", "us-east-1")
    await team.olga.grant("f/team", "g/readers", "writer")
    await team.vic.write("f/team/region", "variable", "us-east-1")
    # Revoked: the same session loses it on its next call.
    await team.olga.grant("f/team", "g/readers", None)
    with pytest.raises(ItemNotFound):
        await team.vic.get("f/team/region")
    assert await team.vic.list("f/team/") == []
    assert await team.vic.folders() == []
    # Membership counts the same way.
    await team.ada.grant("f/team", "g/readers", "viewer")
    assert (await team.vic.get("f/team/region")).value == "us-east-1"
    await team.ada.set_member("readers", "vic", member=False)
    with pytest.raises(ItemNotFound):
        await team.vic.get("f/team/region")
    await team.ada.set_member("readers", "vic")
    assert (await team.vic.get("f/team/region")).value == "us-east-1"
    # Deleting the group deletes its grants: a new group of that name has none.
    await team.ada.delete_group("readers")
    await team.ada.add_group("readers")
    await team.ada.set_member("readers", "vic")
    with pytest.raises(ItemNotFound):
        await team.vic.get("f/team/region")


async def test_a_folder_admin_manages_only_her_folder(team: Team) -> None:
    await team.ada.add_folder("other")
    await team.ada.write("f/other/x", "variable", "x")
    with pytest.raises(PermissionDenied):
        await team.olga.grant("f/other", "olga", "admin")
    with pytest.raises(ItemNotFound):
        await team.olga.get("f/other/x")
    await team.olga.grant("f/team", "max", "writer")
    await team.max.write("f/team/region", "variable", "by max")
    with pytest.raises(PermissionDenied):  # a writer does not grant
        await team.max.grant("f/team", "vic", "writer")
    await team.olga.grant("f/team", "max", None)
    with pytest.raises(PermissionDenied):
        await team.max.write("f/team/region", "variable", "again")
