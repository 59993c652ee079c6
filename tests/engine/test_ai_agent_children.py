"""`flow`, `agent` and `mcp` tools of `ai_agent` steps, on SQLite and PostgreSQL.

A `flow` or `agent` tool's call runs as a child run whose id is derived from
(run, step, call): the step waits without a worker while it runs, then
finds it again and reads its result; nothing runs twice.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.engine._models import ModelChoice
from tidemill.engine.ai._child_runs import ChildRequest, ChildWait, child_run_id
from tidemill.engine.runs._scope import Definitions
from tidemill.engine.runs._transition import Transition
from tidemill.errors import FlowValidationError
from tidemill.flows import Flow
from tidemill.llm import Model, ScriptedModel
from tidemill.store import RunRow, Tx
from tidemill.types import Message, ToolCall

pytestmark = pytest.mark.timeout(90)

CALC = Path(__file__).parent.parent / "tools" / "mcp" / "servers" / "calc_server.py"
PROCS = Path(__file__).parent / "procs"

REFUND_FLOW: dict[str, Any] = {
    "name": "refund",
    "summary": "Refund an order.",
    "inputs": {
        "type": "object",
        "properties": {"order": {"type": "string"}, "currency": {"type": "string"}},
        "required": ["order", "currency"],
    },
    "steps": [
        {
            "id": "pay",
            "script": "def main(order, currency):\n    return f'refunded {order} in {currency}'\n",
            "inputs": {
                "order": {"expr": "flow_input.order"},
                "currency": {"expr": "flow_input.currency"},
            },
        }
    ],
}


def call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def agent_flow(tools: list[dict[str, Any]], **agent: Any) -> Flow:
    step = {
        "id": "agent",
        "ai_agent": {"model": "fake", "tools": tools, **agent},
        "inputs": {"user_message": "Refund order A1."},
    }
    return Flow.model_validate({"steps": [step]})


def by_step(**models: Model) -> Callable[[ModelChoice], Model]:
    def resolve(choice: ModelChoice) -> Model:
        return models[choice.step_id]

    return resolve


def tool_messages(model: ScriptedModel, turn: int) -> list[Message]:
    return [m for m in model.requests[turn].messages if m.role == "tool"]


async def tree(engine: AsyncEngine, run_id: str) -> list[RunRow]:
    def read(tx: Tx) -> list[RunRow]:
        return tx.tree(run_id)

    rows: list[RunRow] = await engine.store.transact(read)
    return rows


async def run(
    engine: AsyncEngine, flow: Flow, resolve: Callable[[ModelChoice], Model]
) -> tuple[str, Any]:
    async with engine.worker(concurrency=2, poll=0.05, pool_size=1, models=resolve):
        run_id = await engine.submit(flow)
        return run_id, await engine.wait(run_id, timeout=60)


# --- flow tools ------------------------------------------------------------------------------


async def test_a_flow_tool_runs_its_sub_flow_as_a_child_run(engine: AsyncEngine) -> None:
    model = ScriptedModel(["", "Done."], tool_calls=[[call("refund", "c1", order="A1")], []])
    tool = {"name": "refund", "flow": {"flow": REFUND_FLOW}, "inputs": {"currency": "EUR"}}
    run_id, result = await run(engine, agent_flow([tool]), by_step(agent=model))
    assert result == "Done."
    (definition,) = model.requests[0].tools
    assert definition.description == "Refund an order."
    assert definition.parameters["properties"] == {"order": {"type": "string"}}
    assert definition.parameters["required"] == ["order"]
    (message,) = tool_messages(model, 1)
    assert (message.content, message.is_error) == ("refunded A1 in EUR", False)
    assert len(model.requests) == 2  # the model was not asked again while the child ran

    top, child = await tree(engine, run_id)
    assert child.id == child_run_id(f"{run_id}:agent:c1")
    assert (child.parent_id, child.status, child.flow_name) == (top.id, "succeeded", "refund")
    assert json.loads(child.scope) == [["agent", "tool:refund:c1"]]
    jobs = await engine.store.transact(lambda tx: tx.run_jobs(top.id))
    (agent_job,) = jobs
    assert child.parent_job == agent_job.id
    assert agent_job.epoch == 2  # claimed, parked while the child ran, claimed again


async def test_a_failed_sub_flow_is_an_error_result_the_model_reads(engine: AsyncEngine) -> None:
    broken = "def main():\n    raise KeyError('no such order')\n"
    failing = {**REFUND_FLOW, "steps": [{"id": "pay", "script": broken}]}
    model = ScriptedModel(
        ["", "It could not be refunded."], tool_calls=[[call("refund", "c1", order="A1")], []]
    )
    tool = {"name": "refund", "flow": {"flow": failing}, "inputs": {"currency": "EUR"}}
    run_id, result = await run(engine, agent_flow([tool]), by_step(agent=model))
    assert result == "It could not be refunded."
    (message,) = tool_messages(model, 1)
    assert message.is_error
    assert message.content.startswith("KeyError (step pay):")
    assert "no such order" in message.content
    statuses = sorted(r.status for r in await tree(engine, run_id))
    assert statuses == ["failed", "succeeded"]  # the child failed, the agent's run did not


async def test_arguments_that_break_the_sub_flow_schema_start_nothing(
    engine: AsyncEngine,
) -> None:
    model = ScriptedModel(["", "ok"], tool_calls=[[call("refund", "c1", order="A1")], []])
    tool = {"name": "refund", "flow": {"flow": REFUND_FLOW}, "inputs": {"currency": 7}}
    run_id, _ = await run(engine, agent_flow([tool]), by_step(agent=model))
    (message,) = tool_messages(model, 1)
    assert message.is_error and message.content.startswith("FlowInputError")
    assert "$.currency" in message.content
    assert len(await tree(engine, run_id)) == 1


async def test_parallel_calls_wait_together_and_finished_calls_do_not_run_again(
    engine: AsyncEngine, tmp_path: Path
) -> None:
    marks = tmp_path / "marks.txt"
    mark = f"def main(n: int):\n    open({str(marks)!r}, 'a').write(f'{{n}}\\n')\n    return n\n"
    model = ScriptedModel(
        ["", "All done."],
        tool_calls=[
            [
                call("refund", "c1", order="A1"),
                call("mark", "c2", n=1),
                call("refund", "c3", order="B2"),
            ],
            [],
        ],
    )
    tools = [
        {"name": "refund", "flow": {"flow": REFUND_FLOW}, "inputs": {"currency": "EUR"}},
        {"name": "mark", "script": mark},
    ]
    run_id, result = await run(engine, agent_flow(tools), by_step(agent=model))
    assert result == "All done."
    assert marks.read_text() == "1\n"  # finished before the wait: not run again
    contents = {m.tool_call_id: m.content for m in tool_messages(model, 1)}
    assert contents == {"c1": "refunded A1 in EUR", "c2": "1", "c3": "refunded B2 in EUR"}
    children = [r for r in await tree(engine, run_id) if r.parent_id is not None]
    assert sorted(c.id for c in children) == sorted(
        child_run_id(f"{run_id}:agent:{c}") for c in ("c1", "c3")
    )


async def test_an_unread_flow_file_fails_the_step_saying_how_to_load_it(
    engine: AsyncEngine,
) -> None:
    model = ScriptedModel(["never"])
    tool = {"name": "refund", "flow": "refund.yaml"}
    async with engine.worker(concurrency=1, poll=0.05, models=by_step(agent=model)):
        run_id = await engine.submit(agent_flow([tool]))
        with pytest.raises(Exception, match="was not read") as caught:
            await engine.wait(run_id, timeout=30)
    assert "Flow.load" in str(caught.value.error.get("hint", ""))  # type: ignore[attr-defined]
    assert model.requests == []


# --- agent tools -----------------------------------------------------------------------------


async def test_an_agent_tool_runs_a_nested_agent_with_its_own_tools(engine: AsyncEngine) -> None:
    parent = ScriptedModel(
        ["", "The researcher says: A1 shipped."],
        tool_calls=[[call("researcher", "c1", message="Where is A1?")], []],
    )
    nested = ScriptedModel(["", "A1 shipped."], tool_calls=[[call("lookup", "n1", order="A1")], []])
    lookup = "def main(order: str):\n    return {'order': order, 'status': 'shipped'}\n"
    researcher = {
        "name": "researcher",
        "description": "Researches orders.",
        "agent": {"model": "fake", "system": "You research.", "tools": [
            {"name": "lookup", "script": lookup}]},
    }  # fmt: skip
    resolve = by_step(agent=parent, researcher=nested)
    run_id, result = await run(engine, agent_flow([researcher]), resolve)
    assert result == "The researcher says: A1 shipped."
    (definition,) = parent.requests[0].tools
    assert definition.description == "Researches orders."
    assert definition.parameters["required"] == ["message"]
    first = nested.requests[0].messages
    assert [m.content for m in first] == ["You research.", "Where is A1?"]  # only its task
    (message,) = tool_messages(parent, 1)
    assert message.content == "A1 shipped."
    _, child = await tree(engine, run_id)
    assert child.id == child_run_id(f"{run_id}:agent:c1")
    transcript = await engine.transcript(run_id, "researcher")  # found in the tree
    assert [m.content for m in transcript][-1] == "A1 shipped."


async def test_a_nested_agent_s_approval_is_listed_under_the_run_and_resumes_both(
    engine: AsyncEngine,
) -> None:
    parent = ScriptedModel(
        ["", "The refunder says: refunded."],
        tool_calls=[[call("refunder", "c1", message="Refund A1.")], []],
    )
    nested = ScriptedModel(["", "refunded"], tool_calls=[[call("refund", "n1", order="A1")], []])
    refund = "def main(order: str):\n    return f'refunded {order}'\n"
    refunder = {
        "name": "refunder",
        "agent": {"model": "fake", "tools": [
            {"name": "refund", "script": refund, "requires_approval": True,
             "approvers": ["dana"]}]},
    }  # fmt: skip
    resolve = by_step(agent=parent, refunder=nested)
    async with engine.worker(concurrency=2, poll=0.05, pool_size=1, models=resolve):
        run_id = await engine.submit(agent_flow([refunder]))
        for _ in range(1000):
            if pending := await engine.approvals(run_id):
                break
            await _sleep()
        (approval,) = pending
        assert (approval.details or {})["tool"] == "refund" and approval.approvers == ["dana"]
        assert approval.run_id == child_run_id(f"{run_id}:agent:c1")  # the nested agent's run
        assert (await engine.get(run_id)).status == "waiting"
        await engine.approve(approval.id, actor="dana")
        assert await engine.wait(run_id, timeout=60) == "The refunder says: refunded."
    assert len(parent.requests) == 2 and len(nested.requests) == 2


# --- script tools with `run: child` ----------------------------------------------------------


async def test_a_script_tool_may_run_each_call_as_a_child_run(engine: AsyncEngine) -> None:
    code = (
        "import os\n"
        "def main(order: str, note: str = '-', currency: str = 'USD'):\n"
        '    """Look up an order."""\n'
        "    return [order, note, currency, os.environ['TIDEMILL_RUN_ID']]\n"
    )
    tool = {"name": "lookup", "script": code, "run": "child", "inputs": {"currency": "EUR"}}
    calls = [call("lookup", "c1", order="A1"), call("lookup", "c2", order="B2", note="n")]
    model = ScriptedModel(["", "ok"], tool_calls=[calls, []])
    run_id, _ = await run(engine, agent_flow([tool]), by_step(agent=model))
    (definition,) = model.requests[0].tools
    assert definition.description == "Look up an order."
    assert list(definition.parameters["properties"]) == ["order", "note"]  # the pool's schema
    contents = {m.tool_call_id: json.loads(m.content) for m in tool_messages(model, 1)}
    one, two = child_run_id(f"{run_id}:agent:c1"), child_run_id(f"{run_id}:agent:c2")
    assert contents == {"c1": ["A1", "-", "EUR", one], "c2": ["B2", "n", "EUR", two]}


# --- function tools with `run: in_process` ---------------------------------------------------


async def test_a_function_tool_may_run_in_the_worker_itself(engine: AsyncEngine) -> None:
    tools = [
        {"name": "lookup", "function": "stepfns:lookup", "run": "in_process",
         "inputs": {"tenant": "acme"}},
        {"name": "refuse", "function": "stepfns:refuse", "run": "in_process"},
    ]  # fmt: skip
    calls = [call("lookup", "c1", order="A1"), call("refuse", "c2", order="B2")]
    model = ScriptedModel(["", "ok"], tool_calls=[calls, []])
    run_id, _ = await run(engine, agent_flow(tools), by_step(agent=model))
    lookup, _ = model.requests[0].tools
    assert lookup.parameters["properties"] == {
        "order": {"type": "string", "description": "The order's id."}
    }
    results = {m.tool_call_id: m for m in tool_messages(model, 1)}
    assert json.loads(results["c1"].content) == {
        "order": "A1", "tenant": "acme", "key": f"{run_id}:agent:c1"
    }  # fmt: skip
    assert results["c2"].is_error
    assert results["c2"].content == "PermissionError: no access to B2"


# --- the transaction: a re-dispatch finds its child --------------------------------------


async def test_a_second_job_of_the_step_is_handed_the_existing_child(engine: AsyncEngine) -> None:
    """A retried (or reclaimed) agent step asks for the same child: none is started twice."""
    flow = agent_flow([{"name": "refund", "flow": {"flow": REFUND_FLOW}}])
    run_id = await engine.submit(flow)
    child_flow = Flow.model_validate(REFUND_FLOW)
    request = ChildRequest(
        child_run_id(f"{run_id}:agent:c1"), "refund", "c1", child_flow, child_flow.digest(),
        child_flow.model_dump_json(), {"order": "A1", "currency": "EUR"},
    )  # fmt: skip
    defs = Definitions()

    def claim(tx: Tx) -> Any:
        return tx.claim("w1", 1, now=time.time(), lease_until=time.time() + 30, reclaim=False)[0]

    def park(job: Any) -> Callable[[Tx], None]:
        def work(tx: Tx) -> None:
            Transition(tx, defs, time.time()).park_for_children(job, ChildWait((request,)))

        return work

    first = await engine.store.transact(claim)
    await engine.store.transact(park(first))
    # The step's next job (here: the same step queued again under a new id) asks again.
    second = await engine.store.transact(
        lambda tx: tx.insert_job(run_id, "agent", 2, now=time.time(), status="running",
                                 worker="w2", lease_until=time.time() + 30)
    )  # fmt: skip
    await engine.store.transact(park(second))
    runs = await tree(engine, run_id)
    children = [r for r in runs if r.parent_id is not None]
    assert [c.id for c in children] == [request.run_id]
    assert children[0].parent_job == second.id


# --- cancellation ----------------------------------------------------------------------------


async def test_cancelling_the_run_cancels_the_child_it_waits_for(engine: AsyncEngine) -> None:
    waits = {
        "name": "slow",
        "steps": [{"id": "sign", "approval": {"message": "Sign it?"}}],
    }
    model = ScriptedModel(["", "never"], tool_calls=[[call("slow", "c1")], []])
    flow = agent_flow([{"name": "slow", "flow": {"flow": waits}}])
    async with engine.worker(concurrency=2, poll=0.05, models=by_step(agent=model)):
        run_id = await engine.submit(flow)
        for _ in range(500):
            if await engine.approvals(run_id):
                break
            await _sleep()
        (approval,) = await engine.approvals(run_id)  # the child's, listed under the run
        await engine.cancel(run_id)
    statuses = {r.parent_id is None: r.status for r in await tree(engine, run_id)}
    assert statuses == {True: "cancelled", False: "cancelled"}
    assert (await engine.approvals(run_id, status="cancelled"))[0].id == approval.id


async def _sleep() -> None:
    await asyncio.sleep(0.02)


# --- mcp tools -------------------------------------------------------------------------------


async def test_an_mcp_server_s_tools_are_the_agent_s(engine: AsyncEngine) -> None:
    pytest.importorskip("mcp")
    from tidemill.engine._journal import thread_id

    calls = [call("calc__add", "c1", a=2, b=3), call("calc__key", "c2")]
    model = ScriptedModel(["", "5"], tool_calls=[calls, []])
    server = {"command": sys.executable, "args": [str(CALC), "stdio"], "tools": ["add", "key"]}
    run_id, result = await run(
        engine, agent_flow([{"name": "calc", "mcp": server}]), by_step(agent=model)
    )
    assert result == "5"
    assert [t.name for t in model.requests[0].tools] == ["calc__add", "calc__key"]
    contents = {m.tool_call_id: m.content for m in tool_messages(model, 1)}
    assert contents == {"c1": "5", "c2": f"{thread_id(run_id, 'agent')}/c2"}  # its key, in _meta


async def test_an_mcp_tool_list_naming_a_missing_tool_fails_the_step(engine: AsyncEngine) -> None:
    pytest.importorskip("mcp")
    server = {"command": sys.executable, "args": [str(CALC), "stdio"], "tools": ["divide"]}
    flow = agent_flow([{"name": "calc", "mcp": server}])
    async with engine.worker(concurrency=1, poll=0.05, models=by_step(agent=ScriptedModel())):
        run_id = await engine.submit(flow)
        with pytest.raises(Exception, match="'divide', which its server does not offer"):
            await engine.wait(run_id, timeout=30)


# --- the flow format -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "message"),
    [
        ({"name": "t", "script": "def main(): ...", "flow": {"flow": REFUND_FLOW}},
         "needs exactly one of script, function, flow, agent, mcp; it has script and flow"),
        ({"name": "t"}, "needs exactly one of script, function, flow, agent, mcp"),
        ({"name": "t", "flow": {"flow": REFUND_FLOW}, "idempotent": False},
         "`idempotent: false` does not apply"),
        ({"name": "t", "agent": {"model": "fake"}, "inputs": {"a b": 1}},
         "binds step inputs of its agent by name"),
        ({"name": "t", "mcp": {"command": "x"}, "inputs": {"a": 1}}, "takes no inputs"),
        ({"name": "t", "flow": {"flow": REFUND_FLOW}, "run": "child"},
         "`run` applies to script and function tools"),
        ({"name": "t", "script": "def main(): ...", "run": "in_process"},
         "`run: in_process` applies to function tools"),
        ({"name": "t", "script": "def main(): ...", "run": "child", "idempotent": False},
         "`idempotent: false` does not apply"),
        ({"name": "t", "mcp": {"command": "x", "url": "http://h/mcp"}}, "exactly one of command"),
    ],
)  # fmt: skip
def test_malformed_tools_are_refused_naming_the_problem(tool: dict[str, Any], message: str) -> None:
    data = {"steps": [{"id": "agent", "ai_agent": {"model": "fake", "tools": [tool]}}]}
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict(data)
    (problem,) = caught.value.problems
    assert problem.step == "agent" and problem.field.startswith("ai_agent.tools")
    assert message in problem.message


def test_specialists_may_not_use_child_run_tools() -> None:
    agent = {
        "model": "fake",
        "tools": [{"name": "refund", "flow": {"flow": REFUND_FLOW}}],
        "specialists": [{"name": "helper", "tools": ["refund"]}],
        "delegation": {"allow": ["refund"]},
    }
    with pytest.raises(FlowValidationError) as caught:
        Flow.from_dict({"steps": [{"id": "agent", "ai_agent": agent}]})
    assert "function tools that do not run as child runs" in str(caught.value)


def test_flow_load_reads_a_tool_s_sub_flow_file(tmp_path: Path) -> None:
    import yaml

    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "refund.yaml").write_text(yaml.safe_dump(REFUND_FLOW))
    main = {
        "steps": [
            {
                "id": "agent",
                "ai_agent": {
                    "model": "fake",
                    "tools": [
                        {"name": "refund", "flow": "tools/refund.yaml"},
                        {"name": "helper", "agent": {"model": "fake", "tools": [
                            {"name": "again", "flow": "tools/refund.yaml"}]}},
                    ],
                },
                "inputs": {"user_message": "hi"},
            }
        ]
    }  # fmt: skip
    (tmp_path / "main.yaml").write_text(yaml.safe_dump(main))
    flow = Flow.load(tmp_path / "main.yaml")
    agent = flow.steps[0].ai_agent
    assert agent is not None
    refund, helper = agent.tools
    assert refund.flow is not None and refund.flow.flow is not None
    assert refund.flow.source_path == "tools/refund.yaml"
    assert refund.flow.flow.steps[0].id == "pay"
    assert helper.agent is not None
    nested = helper.agent.tools[0].flow
    assert nested is not None and nested.flow is not None


def test_a_missing_tool_flow_file_names_the_tool(tmp_path: Path) -> None:
    import yaml

    main = {
        "steps": [
            {
                "id": "agent",
                "ai_agent": {"model": "fake", "tools": [{"name": "r", "flow": "gone.yaml"}]},
                "inputs": {"user_message": "hi"},
            }
        ]
    }
    (tmp_path / "main.yaml").write_text(yaml.safe_dump(main))
    with pytest.raises(FlowValidationError) as caught:
        Flow.load(tmp_path / "main.yaml")
    (problem,) = caught.value.problems
    assert (problem.step, problem.field) == ("agent", "ai_agent.tools[0].flow.path")
    assert "no such file" in problem.message


# --- a worker killed while a tool call's child run is in flight ------------------------------

CHILD_EFFECT = (
    "import os, time\n"
    "def main(n: int, path: str):\n"
    "    with open(path, 'a') as f:\n"
    "        f.write('%s %s\\n' % (os.environ['TIDEMILL_RUN_ID'], n))\n"
    "    if n == 2 and os.environ.get('AGENT_TEST_HANG'):\n"
    "        time.sleep(60)\n"
    "    return {1: 'one', 2: 'two'}[n]\n"
)


@pytest.mark.slow
async def test_a_killed_worker_s_child_run_is_found_again_not_started_twice(
    engine: AsyncEngine,
    store_url: str,
    tmp_path: Path,
    worker_process: Callable[[str], subprocess.Popen[str]],
) -> None:
    """procs/agent_worker.py's model calls `first`, then `second`; both are flow tools here.

    The worker is SIGKILLed while the child run of `second` executes its step.
    Another worker takes the child's job over after its lease, the child ends,
    the agent resumes: one child per call, the model asked once more, with both
    results.
    """
    sys.path.insert(0, str(PROCS))
    try:
        from agent_worker import logged
    finally:
        sys.path.remove(str(PROCS))
    effects = tmp_path / "effects.log"
    sub_flow = {
        "inputs": {"type": "object", "properties": {"n": {"type": "integer"}}},
        "steps": [
            {
                "id": "effect",
                "script": CHILD_EFFECT,
                "inputs": {"n": {"expr": "flow_input.n"}, "path": {"expr": "flow_input.path"}},
            }
        ],
    }
    tools = [
        {"name": name, "flow": {"flow": sub_flow}, "inputs": {"path": str(effects)}}
        for name in ("first", "second")
    ]
    step = {"id": "agent", "ai_agent": {"model": "fake", "tools": tools},
            "inputs": {"user_message": "go"}}  # fmt: skip
    run_id = await engine.submit(Flow.model_validate({"steps": [step]}))

    process = worker_process(store_url)
    assert process.stdout is not None
    assert (await asyncio.to_thread(process.stdout.readline)).startswith("ready")
    deadline = time.monotonic() + 60
    while len(lines(effects)) < 2:  # `first`'s child finished, `second`'s is running
        assert time.monotonic() < deadline and process.poll() is None
        await asyncio.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    await asyncio.to_thread(process.wait, 30)

    requests_log = tmp_path / "requests.log"
    model = logged(requests_log)
    async with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
        assert await engine.wait(run_id, timeout=60) == "done: one two"
    assert [sum(1 for m in r.messages if m.role == "tool") for r in model.requests] == [2]
    children = [r for r in await tree(engine, run_id) if r.parent_id is not None]
    assert sorted(c.id for c in children) == sorted(
        child_run_id(f"{run_id}:agent:{json.loads(c.scope)[-1][1].split(':', 2)[2]}")
        for c in children
    )
    assert len(children) == 2 and all(c.status == "succeeded" for c in children)
    first, second_killed, second_again = [line.split() for line in lines(effects)]
    assert second_killed == second_again  # the same child run, its step run again
    assert first[0] != second_killed[0]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
