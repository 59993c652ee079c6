"""Linked `ai_agent` steps: a workspace agent run by the flows that link it, resolved live.

`ada` (the first, admin user) keeps the agent `f/x/triage` (a resource of the
type `ai_agent`); `bob` is a viewer of the folder `f/x` and cannot read the
folder `f/y`. Flows link the agent with their own `tool_inputs` and
`enabled_tools`; the scripted model answers a user message `call <tool>` by
calling that tool, then (and for any other message) with what it saw: the
system prompt, the tools it was given and the tool results, as JSON.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import RunFailed
from tidemill.flows import Flow
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.store import ApprovalRow
from tidemill.types import Message, ToolCall
from tidemill.workspace import AsyncWorkspace, MasterKey

pytestmark = pytest.mark.timeout(120)


GREET = "'''Greet someone.'''\ndef main(greeting: str, name: str = 'you'):\n    return greeting\n"
SHOW = (
    "'''Show a token.'''\ndef main(token: str):\n"
    "    print('using', token)\n"
    "    return {'token': token, 'length': len(token)}\n"
)
REFUND = (
    "'''Refund an order.'''\ndef main(order_id: str = 'A1'):\n    return 'refunded ' + order_id\n"
)


def agent_value(system: str = "You triage v1.", **extra: Any) -> dict[str, Any]:
    return {
        "model": "fake",
        "system": system,
        "tools": [
            {"name": "greet", "script": GREET, "inputs": {"greeting": "hello"}},
            {"name": "secret", "script": SHOW, "inputs": {"token": "$var:f/x/token"}},
            {"name": "hidden", "script": SHOW, "inputs": {"token": "$var:f/y/hidden"}},
            {"name": "refund", "script": REFUND, "requires_approval": True},
        ],
        **extra,
    }


def linked(agent: str, **link: Any) -> dict[str, Any]:
    """A one-step flow linking `agent`; its user message is the input `q`."""
    return {
        "inputs": {"type": "object", "properties": {"q": {"type": "string"}}},
        "steps": [
            {
                "id": "agent",
                "ai_agent": {"agent": agent, **link},
                "inputs": {"user_message": {"expr": "flow_input.q"}},
            }
        ],
    }


def answer(request: ModelRequest) -> Message:
    results = [m for m in request.messages if m.role == "tool"]
    users = [m for m in request.messages if m.role == "user"]
    text = str(users[-1].content) if users else ""
    if not results and text.startswith("call "):
        name = text.split()[1]
        arguments = {"message": "hi"} if name == "helper" else {}
        return Message.assistant(
            "", tool_calls=(ToolCall(id="c1", name=name, arguments=arguments),)
        )
    system = request.messages[0].content if request.messages[0].role == "system" else ""
    seen = {
        "system": system,
        "tools": sorted(tool.name for tool in request.tools),
        "results": [m.content for m in results],
        "errors": [bool(m.is_error) for m in results],
    }
    return Message.assistant(json.dumps(seen))


@dataclass
class Setup:
    engine: AsyncEngine
    ada: AsyncWorkspace
    bob: AsyncWorkspace
    secret: str
    model: ScriptedModel

    def models(self) -> Callable[[Any], ScriptedModel]:
        return lambda choice: self.model

    async def run(self, who: AsyncWorkspace, path: str, q: str, *, draft: bool = False) -> Any:
        run_id = await self.engine.submit_path(who, path, {"q": q}, draft=draft)
        return json.loads(await self.engine.wait(run_id, timeout=60)), run_id

    async def fails(self, flow: dict[str, Any], who: str | None = "bob") -> dict[str, Any]:
        run_id = await self.engine.submit(Flow.model_validate(flow), {"q": "hi"}, run_as=who)
        with pytest.raises(RunFailed) as caught:
            await self.engine.wait(run_id, timeout=60)
        error: dict[str, Any] = caught.value.error
        return error

    async def logs(self, run_id: str) -> str:
        return "".join(row.body for row in await self.engine.logs(run_id))


@pytest.fixture
async def setup(store_url: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Setup]:
    if store_url.startswith("postgres"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    secret = f"sk-LINKED-{uuid.uuid4().hex}"
    engine = AsyncEngine(store_url, migrate=True)
    await engine._open()
    ada = AsyncWorkspace(engine.store, user="ada")
    try:
        await ada.add_user("bob")
        await ada.add_folder("x", roles={"bob": "viewer"})
        await ada.add_folder("y")
        await ada.write("f/x/token", "variable", secret, secret=True)
        await ada.write("f/y/hidden", "variable", "not for bob", secret=True)
        await ada.write("f/x/triage", "resource", agent_value(), resource_type="ai_agent")
        bob = await ada.acting_as("bob")
        yield Setup(engine, ada, bob, secret, ScriptedModel(handler=answer))
    finally:
        await ada.close()
        await engine.close()


async def test_two_flows_link_one_agent_and_an_edit_reaches_both(setup: Setup) -> None:
    ada, bob = setup.ada, setup.bob
    await ada.write(
        "f/x/narrow",
        "flow",
        linked(
            "f/x/triage", tool_inputs={"greet": {"greeting": "bonjour"}}, enabled_tools=["greet"]
        ),
    )
    await ada.write("f/x/wide", "flow", linked("f/x/triage"))
    await ada.write("f/x/pinned", "flow", linked("f/x/triage@1"))
    async with setup.engine.worker(poll=0.1, pool_size=1, models=setup.models()):
        narrow, narrow_run = await setup.run(bob, "f/x/narrow", "call greet")
        wide, _ = await setup.run(bob, "f/x/wide", "call greet")
        assert narrow == {
            "system": "You triage v1.", "tools": ["greet"], "results": ["bonjour"],
            "errors": [False],
        }  # fmt: skip
        assert wide["tools"] == ["greet", "hidden", "refund", "secret"]
        assert wide["results"] == ["hello"]
        assert "agent f/x/triage version 1" in await setup.logs(narrow_run)
        # An edit of the agent reaches the next run of every flow linking it ...
        await ada.write(
            "f/x/triage", "resource", agent_value("You triage v2."), resource_type="ai_agent"
        )
        narrow, narrow_run = await setup.run(bob, "f/x/narrow", "hi")
        wide, wide_run = await setup.run(bob, "f/x/wide", "hi")
        assert (narrow["system"], wide["system"]) == ("You triage v2.", "You triage v2.")
        assert "agent f/x/triage version 2" in await setup.logs(wide_run)
        # ... but not a step pinning a version.
        pinned, pinned_run = await setup.run(bob, "f/x/pinned", "hi")
        assert pinned["system"] == "You triage v1."
        assert "agent f/x/triage version 1" in await setup.logs(pinned_run)
    (recorded,) = await setup.engine.linked_agents(wide_run)
    assert {key: recorded[key] for key in ("step_id", "path", "version", "draft")} == {
        "step_id": "agent", "path": "f/x/triage", "version": 2, "draft": False,
    }  # fmt: skip
    (recorded,) = await setup.engine.linked_agents(pinned_run)
    assert recorded["version"] == 1


async def test_tool_defaults_resolve_only_when_the_tool_runs(setup: Setup) -> None:
    ada, bob = setup.ada, setup.bob
    await ada.write("f/x/wide", "flow", linked("f/x/triage"))
    await ada.write(
        "f/x/override", "flow", linked("f/x/triage", tool_inputs={"hidden": {"token": "plain"}})
    )
    async with setup.engine.worker(poll=0.1, pool_size=1, models=setup.models(), log_flush=0.01):
        # `hidden` names a variable bob cannot read: unused, it fails nothing.
        unused, _ = await setup.run(bob, "f/x/wide", "hi")
        assert unused["results"] == []
        # Called, it gives the model an error result; the step goes on.
        called, _ = await setup.run(bob, "f/x/wide", "call hidden")
        assert called["errors"] == [True]
        assert "f/y/hidden" in called["results"][0]
        # A host flow overrides the default it cannot read.
        override, _ = await setup.run(bob, "f/x/override", "call hidden")
        assert json.loads(override["results"][0]) == {"token": "plain", "length": 5}
        # A default bob may read resolves as bob when the tool runs, masked.
        shown, shown_run = await setup.run(bob, "f/x/wide", "call secret")
        assert json.loads(shown["results"][0]) == {"token": "***", "length": len(setup.secret)}
    logs = await setup.logs(shown_run)
    assert "using ***" in logs
    assert setup.secret not in logs


async def test_an_inline_step_narrows_its_tools_and_a_nested_agent_tool_links_too(
    setup: Setup,
) -> None:
    engine = setup.engine
    inline = {
        "inputs": {"type": "object", "properties": {"q": {"type": "string"}}},
        "steps": [
            {
                "id": "agent",
                "ai_agent": {
                    "model": "fake",
                    "system": "Inline.",
                    "tools": [
                        {"name": "greet", "script": GREET, "inputs": {"greeting": "hey"}},
                        {"name": "helper", "agent": {"agent": "f/x/triage"}},
                    ],
                    "enabled_tools": ["helper"],
                },
                "inputs": {"user_message": {"expr": "flow_input.q"}},
            }
        ],
    }
    async with engine.worker(poll=0.1, pool_size=1, models=setup.models()):
        run_id = await engine.submit(
            Flow.model_validate(inline), {"q": "call helper"}, run_as="bob"
        )
        seen = json.loads(await engine.wait(run_id, timeout=60))
    assert (seen["system"], seen["tools"]) == ("Inline.", ["helper"])
    nested = json.loads(seen["results"][0])  # the linked agent, run as a child
    assert nested["system"] == "You triage v1."
    assert nested["tools"] == ["greet", "hidden", "refund", "secret"]
    (recorded,) = await engine.linked_agents(run_id)
    assert (recorded["step_id"], recorded["path"], recorded["version"]) == (
        "helper",
        "f/x/triage",
        1,
    )
    assert recorded["run_id"] != run_id


async def test_a_draft_of_the_agent_runs_only_in_its_authors_preview(setup: Setup) -> None:
    ada, bob = setup.ada, setup.bob
    await ada.write("f/x/wide", "flow", linked("f/x/triage"))
    await ada.save_draft(
        "f/x/triage", "resource", agent_value("You triage, drafted."), resource_type="ai_agent"
    )
    async with setup.engine.worker(poll=0.1, pool_size=1, models=setup.models()):
        preview, preview_run = await setup.run(ada, "f/x/wide", "hi", draft=True)
        deployed, _ = await setup.run(ada, "f/x/wide", "hi")
        others, _ = await setup.run(bob, "f/x/wide", "hi", draft=True)
    assert preview["system"] == "You triage, drafted."
    assert deployed["system"] == "You triage v1."
    assert others["system"] == "You triage v1."  # bob has no draft of the agent
    assert "agent f/x/triage draft" in await setup.logs(preview_run)
    (recorded,) = await setup.engine.linked_agents(preview_run)
    assert (recorded["version"], recorded["draft"]) == (0, True)


async def pending(engine: AsyncEngine, run_id: str) -> ApprovalRow:
    for _ in range(1000):
        rows = await engine.approvals(run_id)
        if rows:
            return rows[0]
        await asyncio.sleep(0.02)
    raise AssertionError("no approval appeared")


async def test_a_paused_step_resumes_on_the_agent_it_started_with(setup: Setup) -> None:
    ada, bob, engine = setup.ada, setup.bob, setup.engine
    await ada.write("f/x/wide", "flow", linked("f/x/triage"))
    async with engine.worker(poll=0.1, pool_size=1, models=setup.models()):
        run_id = await engine.submit_path(bob, "f/x/wide", {"q": "call refund"})
        row = await pending(engine, run_id)
        # The agent changes while the step waits: its prompt, and the tool goes.
        edited = agent_value("You triage v2.")
        edited["tools"] = edited["tools"][:1]
        await ada.write("f/x/triage", "resource", edited, resource_type="ai_agent")
        await engine.approve(row.id, actor="ada")
        seen = json.loads(await engine.wait(run_id, timeout=60))
        assert seen["system"] == "You triage v1."
        assert seen["tools"] == ["greet", "hidden", "refund", "secret"]
        assert seen["results"] == ["refunded A1"]
        # The next run sees the edit.
        after, _ = await setup.run(bob, "f/x/wide", "hi")
        assert (after["system"], after["tools"]) == ("You triage v2.", ["greet"])
    logs = await setup.logs(run_id)
    assert "agent f/x/triage version 1" in logs
    assert "version 2" not in logs
    (recorded,) = await engine.linked_agents(run_id)  # one job, paused and resumed
    assert (recorded["version"], recorded["attempt"]) == (1, 1)


async def test_a_link_that_does_not_resolve_fails_the_step_clearly(setup: Setup) -> None:
    ada = setup.ada
    await ada.write(
        "f/y/private", "resource", agent_value(), resource_type="ai_agent"
    )  # bob may not read f/y
    await ada.write("f/x/type", "resource_type", {"type": "object"})
    await ada.write("f/x/other", "resource", {"a": 1}, resource_type="f/x/type")
    async with setup.engine.worker(poll=0.1, pool_size=1, models=setup.models()):
        missing = await setup.fails(linked("f/x/nope"))
        private = await setup.fails(linked("f/y/private"))
        other = await setup.fails(linked("f/x/other"))
        unknown = await setup.fails(linked("f/x/triage", enabled_tools=["greet", "nope"]))
        old = await setup.fails(linked("f/x/triage@9"))
        nobody = await setup.fails(linked("f/x/triage"), who=None)
    # A resource bob may not read looks like none.
    for error, path in ((missing, "f/x/nope"), (private, "f/y/private")):
        assert f"{path}, which names no ai_agent resource that bob may read" in error["message"]
        assert error["type"] == "UnresolvedReference"
    assert "f/x/other" in other["message"] and "not an ai_agent resource" in other["message"]
    assert "'nope'" in unknown["message"] and "f/x/triage" in unknown["message"]
    assert "greet, secret, hidden, refund" in unknown["message"]
    assert "f/x/triage@9" in old["message"]
    assert nobody["type"] == "UnresolvedReference" and "no identity" in nobody["message"]


EFFECT = (
    "import os, time\n"
    "def main(n: int, path: str):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write('%s %s\\n' % (n, os.getpid()))\n"
    "    while n == 2 and os.path.exists(path + '.hang'):\n"
    "        time.sleep(0.05)\n"
    "    return {1: 'one', 2: 'two'}[n]\n"
)


def first_then_second(request: ModelRequest) -> Message:
    results = [str(m.content) for m in request.messages if m.role == "tool"]
    if len(results) < 2:
        n = len(results) + 1
        name = ("first", "second")[n - 1]
        call = ToolCall(id=f"c{n}", name=name, arguments={"n": n})
        return Message.assistant("", tool_calls=(call,))
    return Message.assistant("done: " + " ".join(results))


async def test_a_step_whose_worker_died_resumes_on_the_agent_it_started_with(
    setup: Setup, tmp_path: Path
) -> None:
    ada, engine = setup.ada, setup.engine
    effects = tmp_path / "effects.log"
    hang = tmp_path / "effects.log.hang"
    hang.touch()

    def value(system: str, names: tuple[str, ...]) -> dict[str, Any]:
        tools = [
            {"name": name, "script": EFFECT, "inputs": {"path": str(effects)}} for name in names
        ]
        return {"model": "fake", "system": system, "tools": tools}

    def lines() -> list[str]:
        return effects.read_text().splitlines() if effects.exists() else []

    await ada.write(
        "f/x/crash", "resource", value("v1", ("first", "second")), resource_type="ai_agent"
    )
    run_id = await engine.submit(
        Flow.model_validate(linked("f/x/crash")), {"q": "go"}, run_as="bob"
    )
    model = ScriptedModel(handler=first_then_second)

    async def doomed() -> None:
        async with engine.worker(poll=0.1, pool_size=1, models=lambda choice: model):
            await asyncio.Event().wait()

    dying = asyncio.create_task(doomed())
    deadline = time.monotonic() + 60
    while len(lines()) < 2:  # `first` finished, `second` is running
        assert time.monotonic() < deadline and not dying.done()
        await asyncio.sleep(0.05)
    while not dying.done():  # the worker stops at once, abandoning the step mid-call
        dying.cancel()
        await asyncio.sleep(0.05)
    # The agent changes while nobody runs the step: its prompt, and `second` goes.
    await ada.write("f/x/crash", "resource", value("v2", ("first",)), resource_type="ai_agent")
    hang.unlink()
    async with engine.worker(poll=0.1, pool_size=1, models=lambda choice: model):
        assert await engine.wait(run_id, timeout=60) == "done: one two"
    last = model.requests[-1]
    assert last.messages[0] == Message.system("v1")
    assert sorted(tool.name for tool in last.tools) == ["first", "second"]
    (job,) = await engine.jobs(run_id)
    assert job.attempt == 1 and job.epoch >= 2  # the same job, taken over
    (recorded,) = await engine.linked_agents(run_id)
    assert (recorded["version"], recorded["job_id"]) == (1, job.id)
    assert "version 2" not in await setup.logs(run_id)


async def test_the_brains_provider_resolves_as_the_runs_identity(setup: Setup) -> None:
    ada, engine = setup.ada, setup.engine
    await ada.write("f/x/openai", "resource", {"api_key": "$var:f/x/token"}, resource_type="openai")
    await ada.write("f/y/openai", "resource", {"api_key": "$var:f/x/token"}, resource_type="openai")
    for path, provider in (("f/x/keyed", "f/x/openai"), ("f/x/locked", "f/y/openai")):
        value = agent_value(provider=f"$res:{provider}")
        await ada.write(path, "resource", value, resource_type="ai_agent")
    seen: list[Any] = []

    def models(choice: Any) -> ScriptedModel:
        seen.append(choice.credentials)
        return setup.model

    async with engine.worker(poll=0.1, pool_size=1, models=models):
        run_id = await engine.submit(
            Flow.model_validate(linked("f/x/keyed")), {"q": "hi"}, run_as="bob"
        )
        assert json.loads(await engine.wait(run_id, timeout=60))["system"] == "You triage v1."
        locked = await setup.fails(linked("f/x/locked"))
    assert seen == [{"api_key": setup.secret}]
    assert locked["type"] == "UnresolvedReference" and "$res:f/y/openai" in locked["message"]
