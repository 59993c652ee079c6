"""`ai_agent` steps end to end on SQLite and PostgreSQL, offline with scripted models.

Tools, bound arguments, output schemas, every bound, tool-call approvals and
every way a decision is refused, usage records, the transcript, the CLI, and
a worker SIGKILLed in the middle of a tool call (procs/agent_worker.py).
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
from agent_runs import finish_on_worker

from tidemill.agents.journal import ApprovalDecided
from tidemill.cli import main as cli_main
from tidemill.engine import AsyncEngine, ScriptPool
from tidemill.engine._journal import open_journal, thread_id
from tidemill.engine._models import ModelChoice
from tidemill.engine._outcome import Outcome
from tidemill.engine._step_env import StepEnv
from tidemill.engine.ai._agent import run_ai_agent
from tidemill.errors import ApprovalDecisionError, ProviderError, RunFailed
from tidemill.flows import Flow
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.store import ApprovalRow, JobRow, RunRow, Tx
from tidemill.types import Decision, Message, ToolCall

pytestmark = pytest.mark.timeout(90)

PROCS = Path(__file__).parent / "procs"

LOOKUP = (
    "def main(order_id: str) -> dict:\n"
    "    '''Look up an order.\n\n    Args:\n        order_id: The order's id.\n    '''\n"
    "    return {'order_id': order_id, 'status': 'shipped'}\n"
)
ECHO = (
    "import os\n"
    "def main(**arguments):\n"
    "    return {'arguments': arguments, 'key': os.environ['TIDEMILL_IDEMPOTENCY_KEY'],\n"
    "            'tool_attempt': os.environ['TIDEMILL_TOOL_ATTEMPT']}\n"
)
REFUND = "def main(order_id: str, amount: float):\n    return f'refunded {amount} on {order_id}'\n"


def call(name: str, call_id: str, **arguments: Any) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=arguments)


def agent_flow(agent: dict[str, Any], *, user: Any = "Where is order A1?", **step: Any) -> Flow:
    inputs = {"user_message": user, **step.pop("inputs", {})}
    body = {"id": "agent", "ai_agent": {"model": "fake", **agent}, "inputs": inputs, **step}
    return Flow.model_validate({"steps": [body]})


def models(model: Model) -> Callable[[ModelChoice], Model]:
    def resolve(choice: ModelChoice) -> Model:
        assert choice.step_id == "agent"
        return model

    return resolve


def tool_messages(request: ModelRequest) -> list[Message]:
    return [m for m in request.messages if m.role == "tool"]


async def run_agent(
    engine: AsyncEngine, flow: Flow, model: Model, inputs: dict[str, Any] | None = None
) -> tuple[str, Any]:
    async with engine.worker(concurrency=2, poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow, inputs)
        return run_id, await engine.wait(run_id, timeout=60)


async def failure(engine: AsyncEngine, flow: Flow, model: Model) -> dict[str, Any]:
    with pytest.raises(RunFailed) as caught:
        await run_agent(engine, flow, model)
    error: dict[str, Any] = caught.value.error
    return error


async def pending(engine: AsyncEngine, run_id: str, count: int = 1) -> list[ApprovalRow]:
    for _ in range(1000):
        rows = await engine.approvals(run_id)
        if len(rows) >= count:
            return rows
        await asyncio.sleep(0.02)
    raise AssertionError("no approval appeared")


# --- tools -----------------------------------------------------------------------------------


async def test_a_lookup_tool_then_an_answer(engine: AsyncEngine) -> None:
    model = ScriptedModel(
        ["", "Order A1 has shipped."], tool_calls=[[call("lookup", "c1", order_id="A1")], []]
    )
    flow = agent_flow(
        {"system": "You track orders.", "tools": [{"name": "lookup", "script": LOOKUP}],
         "metadata": {"experiment_id": "exp-1"}}
    )  # fmt: skip
    run_id, result = await run_agent(engine, flow, model)
    assert result == "Order A1 has shipped."
    first, second = model.requests
    assert first.messages[0] == Message.system("You track orders.")
    assert first.messages[1] == Message.user("Where is order A1?")
    (definition,) = first.tools
    assert definition.description == "Look up an order."
    assert definition.parameters == {
        "type": "object",
        "properties": {"order_id": {"type": "string", "description": "The order's id."}},
        "required": ["order_id"],
        "additionalProperties": False,
    }
    (result_message,) = tool_messages(second)
    assert json.loads(result_message.content) == {"order_id": "A1", "status": "shipped"}
    usage = await engine.usage(run_id)
    assert [(u["step_id"], u["provider"], u["experiment_id"]) for u in usage] == [
        ("agent", "scripted", "exp-1")
    ] * 2
    assert all(u["output_tokens"] > 0 and u["error"] is None for u in usage)
    transcript = await engine.transcript(run_id, "agent")
    assert [m.role for m in transcript] == ["user", "assistant", "tool", "assistant"]
    assert transcript[-1].content == "Order A1 has shipped."
    assert await engine.transcript(run_id, "nope") == []


async def test_a_script_tool_gets_its_arguments_and_the_idempotency_key(
    engine: AsyncEngine,
) -> None:
    model = ScriptedModel(["", "ok"], tool_calls=[[call("echo", "c7", x=1, y="two")], []])
    flow = agent_flow({"tools": [{"name": "echo", "script": ECHO}]})
    run_id, _ = await run_agent(engine, flow, model)
    (message,) = tool_messages(model.requests[1])
    assert json.loads(message.content) == {
        "arguments": {"x": 1, "y": "two"},
        "key": f"{run_id}:agent:c7",
        "tool_attempt": "1",
    }
    assert model.requests[0].tools[0].parameters["additionalProperties"] is True


async def test_inputs_bind_arguments_the_model_never_sees(engine: AsyncEngine) -> None:
    code = (
        "def main(order_id: str, tenant: str, region: str = 'us'):\n"
        "    return [order_id, tenant, region]\n"
    )
    tool = {"name": "lookup", "script": code,
            "inputs": {"tenant": {"expr": "tenant"}, "region": "eu"}}  # fmt: skip
    flow = agent_flow({"tools": [tool]}, inputs={"tenant": {"expr": "flow_input.tenant"}})
    model = ScriptedModel(["", "done"], tool_calls=[[call("lookup", "c1", order_id="A1")], []])
    await run_agent(engine, flow, model, {"tenant": "acme"})
    schema: dict[str, Any] = dict(model.requests[0].tools[0].parameters)
    assert list(schema["properties"]) == ["order_id"] and schema["required"] == ["order_id"]
    (message,) = tool_messages(model.requests[1])
    assert json.loads(message.content) == ["A1", "acme", "eu"]


async def test_a_function_tool_and_a_failing_tool(engine: AsyncEngine) -> None:
    broken = "def main(n: int):\n    raise ValueError(f'bad n {n}')\n"
    flow = agent_flow(
        {"tools": [{"name": "dumps", "function": "json:dumps", "description": "JSON."},
                   {"name": "broken", "script": broken}]}
    )  # fmt: skip
    model = ScriptedModel(
        ["", "done"],
        tool_calls=[[call("dumps", "c1", obj=[1, 2]), call("broken", "c2", n=3)], []],
    )
    _, result = await run_agent(engine, flow, model)
    assert result == "done"
    failed, dumped = sorted(tool_messages(model.requests[1]), key=lambda m: m.name or "")
    assert (dumped.name, dumped.content, dumped.is_error) == ("dumps", "[1, 2]", False)
    assert failed.is_error and failed.content == "ValueError: bad n 3"


async def test_a_provider_failure_is_retried_from_the_journal(engine: AsyncEngine) -> None:
    answers = iter(["call", "fail", "answer"])

    def handler(request: ModelRequest) -> Message:
        step = next(answers)
        if step == "call":
            return Message.assistant("", tool_calls=(call("echo", "c1", n=1),))
        if step == "fail":
            raise ProviderError("overloaded", provider="scripted", status_code=503)
        return Message.assistant(f"saw {len(tool_messages(request))} result(s)")

    model = ScriptedModel(handler=handler)
    flow = agent_flow(
        {"tools": [{"name": "echo", "script": ECHO}]}, retry={"attempts": 1, "backoff": 0.1}
    )
    run_id, result = await run_agent(engine, flow, model)
    assert result == "saw 1 result(s)"
    # The retry resumed: the answered first turn was not asked again, the tool ran once.
    assert [len(tool_messages(r)) for r in model.requests] == [0, 1, 1]
    usage = await engine.usage(run_id)
    assert [(u["attempt"], u["error"] is not None) for u in usage] == [
        (1, False), (1, True), (2, False)
    ]  # fmt: skip
    assert "ProviderError" in usage[1]["error"]


async def test_agents_in_a_loop_keep_a_thread_each(engine: AsyncEngine) -> None:
    model = ScriptedModel(
        handler=lambda request: Message.assistant(f"echo: {request.messages[-1].content}")
    )
    body = {"id": "agent", "ai_agent": {"model": "fake"},
            "inputs": {"user_message": {"expr": "iter.value"}}}  # fmt: skip
    flow = Flow.model_validate(
        {"steps": [{"id": "each", "for_each": {"items": ["a", "b"], "steps": [body]}}]}
    )
    run_id, result = await run_agent(engine, flow, model)
    assert result == ["echo: a", "echo: b"]
    assert [m.content for m in await engine.transcript(run_id, "agent")] == ["b", "echo: b"]


async def test_output_schema_gives_the_parsed_object(engine: AsyncEngine) -> None:
    schema = {
        "type": "object",
        "properties": {"status": {"enum": ["shipped", "lost"]}},
        "required": ["status"],
    }
    model = ScriptedModel(['{"status": "late"}', '{"status": "shipped"}'])
    _, result = await run_agent(engine, agent_flow({"output_schema": schema}), model)
    assert result == {"status": "shipped"}
    assert "status" in (model.requests[1].messages[-1].content or "")


async def test_a_broken_step_fails_without_retrying(engine: AsyncEngine) -> None:
    flow = agent_flow({"tools": [{"name": "t", "script": "def main(:"}]}, retry={"attempts": 2})
    error = await failure(engine, flow, ScriptedModel(["never"]))
    assert error["type"] == "ConfigurationError" and "does not parse" in error["message"]
    error = await failure(engine, agent_flow({}, user=""), ScriptedModel(["never"]))
    assert error["type"] == "FlowInputError"


# --- bounds ----------------------------------------------------------------------------------


def busy_model() -> ScriptedModel:
    """A model that calls the `noop` tool every turn."""
    return ScriptedModel(
        handler=lambda _request: Message.assistant("", tool_calls=(ToolCall(name="noop"),))
    )


NOOP = {"name": "noop", "script": "def main():\n    return 'ok'\n"}


@pytest.mark.parametrize(
    ("settings", "bound", "value"),
    [
        ({"max_iterations": 2}, "max_iterations", 2),
        ({"limits": {"max_tool_calls": 1}}, "max_tool_calls", 1),
        ({"limits": {"max_requests": 1}}, "max_requests", 1),
    ],
)
async def test_crossing_a_bound_fails_the_step_naming_it(
    engine: AsyncEngine, settings: dict[str, Any], bound: str, value: int
) -> None:
    flow = agent_flow({"tools": [NOOP], **settings}, retry={"attempts": 2})
    model = busy_model()
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(flow)
        with pytest.raises(RunFailed) as caught:
            await engine.wait(run_id, timeout=60)
        jobs = await engine.jobs(run_id)
    error = caught.value.error
    assert (error["type"], error["limit"], error["value"]) == ("LimitExceeded", bound, value)
    assert error["message"] == f"The agent stopped at its {bound} limit of {value}."
    assert error["transcript"][0] == {"role": "user", "content": "Where is order A1?"}
    assert [job.attempt for job in jobs] == [1]  # not retried
    assert len(await engine.usage(run_id)) == len(model.requests)


@pytest.mark.parametrize(
    ("bound", "sent"),
    [
        # The input is estimated before the call: a call that would cross is never sent.
        ("max_input_tokens", False),
        ("max_total_tokens", False),
        # Output is known only from the answer: the answer is kept, the run stops after it.
        ("max_output_tokens", True),
    ],
)
async def test_token_bounds(engine: AsyncEngine, bound: str, sent: bool) -> None:
    model = ScriptedModel(["x" * 400])
    error = await failure(engine, agent_flow({"limits": {bound: 10}}, user="y" * 400), model)
    assert (error["type"], error["limit"], error["value"]) == ("LimitExceeded", bound, 10)
    expected = ["user", "assistant"] if sent else ["user"]
    assert [m["role"] for m in error["transcript"]] == expected
    assert len(model.requests) == int(sent)


async def test_max_duration_stops_a_slow_tool(engine: AsyncEngine) -> None:
    nap = {"name": "nap", "script": "import time\ndef main():\n    time.sleep(30)\n"}
    model = ScriptedModel(["", "never"], tool_calls=[[call("nap", "c1")], []])
    started = time.monotonic()
    error = await failure(
        engine, agent_flow({"tools": [nap], "limits": {"max_duration": 1}}), model
    )
    assert time.monotonic() - started < 20
    assert (error["type"], error["limit"], error["value"]) == ("LimitExceeded", "max_duration", 1.0)
    assert len(model.requests) == 1
    assert error["transcript"][-1]["tool_calls"][0]["name"] == "nap"


async def step_env(engine: AsyncEngine, run_id: str, model: Model) -> StepEnv:
    def rows(tx: Tx) -> tuple[JobRow, RunRow]:
        run = tx.run(run_id)
        assert run is not None
        return tx.run_jobs(run_id)[-1], run

    job, run = await engine.store.transact(rows)

    def no_pool() -> ScriptPool:
        raise AssertionError("no tool should run")

    return StepEnv(job, run, no_pool, models(model), engine.store)


async def test_a_journaled_outcome_is_recorded_without_asking_again(engine: AsyncEngine) -> None:
    model = ScriptedModel(["All good."])
    flow = agent_flow({})
    run_id, result = await run_agent(engine, flow, model)
    # As if the worker had died after the journal's last entry, before recording it:
    env = await step_env(engine, run_id, model)
    outcome = await run_ai_agent(flow.steps[0], {"user_message": "ignored"}, {}, env)
    assert isinstance(outcome, Outcome)
    assert (outcome.status, outcome.result, outcome.usage) == ("succeeded", result, ())
    assert len(model.requests) == 1


async def test_a_journaled_failure_is_recorded_once_and_a_retry_starts_afresh(
    engine: AsyncEngine,
) -> None:
    model = busy_model()
    flow = agent_flow({"tools": [NOOP], "limits": {"max_requests": 1}})
    with pytest.raises(RunFailed):
        await run_agent(engine, flow, model)
    (run,) = await engine.runs()
    asked = len(model.requests)
    # Not recorded yet (the worker died): the journal's failure is recorded as it is.
    await engine.store.transact(lambda tx: tx.execute("UPDATE tm_jobs SET error = NULL"))
    env = await step_env(engine, run.id, model)
    outcome = await run_ai_agent(flow.steps[0], {"user_message": "again"}, {}, env)
    assert isinstance(outcome, Outcome) and outcome.error is not None
    assert (outcome.error["type"], outcome.error["limit"]) == ("LimitExceeded", "max_requests")
    assert outcome.error["value"] == 1 and outcome.retryable is False
    assert len(model.requests) == asked
    # Recorded: a retry of the run starts a new agent run on the same thread.
    await engine.store.transact(
        lambda tx: tx.execute("UPDATE tm_jobs SET error = ?", (json.dumps(outcome.error),))
    )
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        await engine.retry(run.id)
        with pytest.raises(RunFailed, match="max_requests"):
            await engine.wait(run.id, timeout=60)
    assert len(model.requests) > asked
    transcript = await engine.transcript(run.id, "agent")
    assert [m.content for m in transcript if m.role == "user"] == ["Where is order A1?"] * 2
    assert [job.attempt for job in await engine.jobs(run.id)] == [1, 2]


# --- approvals -------------------------------------------------------------------------------


def refund_flow(**agent: Any) -> Flow:
    tool = {"name": "refund", "script": REFUND, "requires_approval": True,
            "approvers": ["alice"]}  # fmt: skip
    return agent_flow({"tools": [tool], **agent}, user="Refund order A1")


def refund_model() -> ScriptedModel:
    return ScriptedModel(
        ["", "Refunded."], tool_calls=[[call("refund", "r1", order_id="A1", amount=20)], []]
    )


@pytest.mark.parametrize("edited", [None, {"order_id": "A1", "amount": 5}])
async def test_an_approved_call_runs_as_authorised_and_is_never_proposed_again(
    engine: AsyncEngine, edited: dict[str, Any] | None
) -> None:
    model = refund_model()
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(refund_flow(approval_timeout=600))
        (row,) = await pending(engine, run_id)
        assert (await engine.get(run_id)).status == "waiting"
        (job,) = await engine.jobs(run_id)
        assert job.status == "waiting"
        assert row.kind == "tool_call" and row.approvers == ["alice"]
        assert row.expires_at is not None and row.expires_at > time.time() + 500
        details = row.details or {}
        assert details["session"] == thread_id(run_id, "agent")
        assert (details["turn"], details["request_id"], details["tool"]) == (1, "r1", "refund")
        assert details["arguments"] == {"order_id": "A1", "amount": 20}
        assert details["expected_seq"] >= 3
        assert len(await engine.usage(run_id)) == 1  # the pause recorded the first call
        assert len(model.requests) == 1
        with pytest.raises(ApprovalDecisionError) as refused:
            await engine.approve(row.id, actor="alice", edited_arguments={"order_id": 7})
        assert refused.value.reason == "arguments"
        decided = await engine.approve(row.id, actor="alice", edited_arguments=edited)
        assert decided.status == "approved"
        assert await engine.wait(run_id, timeout=60) == "Refunded."
    assert len(model.requests) == 2  # the model never re-proposed the call
    (result,) = tool_messages(model.requests[1])
    amount = 20 if edited is None else 5
    assert result.content == f"refunded {amount} on A1" and not result.is_error
    (job,) = await engine.jobs(run_id)  # the same job, queued again and resumed
    assert (job.status, job.attempt, job.epoch) == ("succeeded", 1, 2)
    assert len(await engine.usage(run_id)) == 2
    (row,) = await engine.approvals(run_id, status=None)
    assert (row.details or {})["decision"] == {
        "action": "approve", "arguments": edited, "feedback": None, "actor": "alice"
    }  # fmt: skip


async def test_a_rejection_is_fed_back_to_the_model(engine: AsyncEngine) -> None:
    model = ScriptedModel(
        ["", "I could not refund it."],
        tool_calls=[[call("refund", "r1", order_id="A1", amount=20)], []],
    )
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(refund_flow())
        (row,) = await pending(engine, run_id)
        with pytest.raises(ApprovalDecisionError) as refused:
            await engine.reject(row.id, actor="mallory", comment="no")
        assert refused.value.reason == "actor"
        await engine.reject(row.id, actor="alice", comment="Refunds over 10 need a manager.")
        with pytest.raises(ApprovalDecisionError) as again:
            await engine.approve(row.id, actor="alice")
        assert again.value.reason == "decided"
        assert await engine.wait(run_id, timeout=60) == "I could not refund it."
    (result,) = tool_messages(model.requests[1])
    assert result.is_error
    assert result.content.endswith("Feedback: Refunds over 10 need a manager.")


async def test_an_expired_call_is_a_rejection_the_model_sees(engine: AsyncEngine) -> None:
    model = ScriptedModel(
        ["", "Nobody answered."], tool_calls=[[call("refund", "r1", order_id="A1", amount=2)], []]
    )
    flow = refund_flow(approval_timeout=0.5)
    async with engine.worker(poll=10, pool_size=1, models=models(model)) as worker:
        run_id = await engine.submit(flow)
        worker.wake()
        (row,) = await pending(engine, run_id)
    await asyncio.sleep(max(0.0, (row.expires_at or 0) - time.time()) + 0.1)
    with pytest.raises(ApprovalDecisionError) as late:
        await engine.approve(row.id, actor="alice")
    assert late.value.reason == "expired"
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        assert await engine.wait(run_id, timeout=60) == "Nobody answered."
    (result,) = tool_messages(model.requests[1])
    assert result.is_error and "expired" in result.content
    (row,) = await engine.approvals(run_id, status=None)
    assert row.status == "expired"
    with pytest.raises(ApprovalDecisionError) as gone:
        await engine.approve(row.id, actor="alice")
    assert gone.value.reason == "expired"


async def test_a_decision_must_match_the_journal(engine: AsyncEngine, store_url: str) -> None:
    model = refund_model()
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(refund_flow())
        (row,) = await pending(engine, run_id)
        details = dict(row.details or {})

        # A faked expectation: another entry, another turn, another call, another session.
        for change in ({"expected_seq": details["expected_seq"] - 1}, {"turn": 2},
                       {"request_id": "r9"}, {"session": thread_id(run_id, "other")}):  # fmt: skip
            await set_details(engine, row.id, {**details, **change})
            with pytest.raises(ApprovalDecisionError) as refused:
                await engine.approve(row.id, actor="alice")
            assert refused.value.reason == "mismatch"
        await set_details(engine, row.id, details)

        # The journal moved on since the pause.
        async with open_journal(engine.url) as journal:
            thread = thread_id(run_id, "agent")
            last = (await journal.read(thread))[-1].seq
            decided = ApprovalDecided(call_id="r9", decision=Decision.approve(), decided_at=now())
            await journal.append(thread, [decided], after=last)
        with pytest.raises(ApprovalDecisionError) as moved:
            await engine.approve(row.id, actor="alice")
        assert moved.value.reason == "mismatch" and "no longer matches" in str(moved.value)
        assert (await engine.approvals(run_id))[0].status == "pending"

        await engine.cancel(run_id)
        with pytest.raises(ApprovalDecisionError) as cancelled:
            await engine.approve(row.id, actor="alice")
        assert cancelled.value.reason == "cancelled"
    assert len(model.requests) == 1


async def set_details(engine: AsyncEngine, approval_id: str, details: dict[str, Any]) -> None:
    await engine.store.transact(
        lambda tx: tx.execute(
            "UPDATE tm_approvals SET details = ? WHERE id = ?", (json.dumps(details), approval_id)
        )
    )


def now() -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC)


async def test_two_calls_wait_for_both_decisions(engine: AsyncEngine) -> None:
    model = ScriptedModel(
        ["", "Both handled."],
        tool_calls=[[call("refund", "r1", order_id="A1", amount=1),
                     call("refund", "r2", order_id="A2", amount=2)], []],
    )  # fmt: skip
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        run_id = await engine.submit(refund_flow())
        rows = {(row.details or {})["request_id"]: row for row in await pending(engine, run_id, 2)}
        first, second = rows["r1"], rows["r2"]
        assert first.details and second.details
        assert first.details["expected_seq"] == second.details["expected_seq"]
        await engine.approve(first.id, actor="alice")
        await asyncio.sleep(0.3)
        (job,) = await engine.jobs(run_id)
        assert job.status == "waiting"  # still waiting for the second decision
        await engine.reject(second.id, actor="alice", comment="not this one")
        assert await engine.wait(run_id, timeout=60) == "Both handled."
    results = {m.tool_call_id: m for m in tool_messages(model.requests[1])}
    assert results["r1"].content == "refunded 1 on A1" and not results["r1"].is_error
    assert results["r2"].is_error and "not this one" in results["r2"].content


def test_the_cli_lists_and_decides_tool_calls(
    store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    if not store_url.startswith("sqlite"):
        pytest.skip("the CLI path is the same on both backends")
    model = refund_model()

    async def until_paused() -> tuple[str, str]:
        engine = AsyncEngine(store_url)
        try:
            async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
                run_id = await engine.submit(refund_flow())
                return run_id, (await pending(engine, run_id))[0].id
        finally:
            await engine.close()

    run_id, approval_id = asyncio.run(until_paused())
    assert cli_main(["approvals", "list", "--db", store_url]) == 0
    out = capsys.readouterr().out
    assert 'tool call refund {"order_id": "A1", "amount": 20}' in out
    with pytest.raises(SystemExit):
        cli_main(["approvals", "approve", approval_id, "--db", store_url, "--edit-args", "[1]"])
    assert "expected a JSON object" in capsys.readouterr().err
    code = cli_main(["approvals", "approve", approval_id, "--db", store_url, "--as", "alice",
                     "--edit-args", '{"order_id": "A1", "amount": 3}'])  # fmt: skip
    assert code == 0 and "approved by alice" in capsys.readouterr().out

    assert finish_on_worker(store_url, model, run_id) == "Refunded."
    assert tool_messages(model.requests[1])[0].content == "refunded 3 on A1"


# --- crash and resume ------------------------------------------------------------------------

EFFECT = (
    "import os, time\n"
    "def main(n: int, path: str):\n"
    "    line = '%s %s %s\\n' % (os.environ['TIDEMILL_IDEMPOTENCY_KEY'],\n"
    "                           os.environ['TIDEMILL_TOOL_ATTEMPT'], os.getpid())\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(line)\n"
    "    if n == 2 and os.environ.get('AGENT_TEST_HANG'):\n"
    "        time.sleep(60)\n"
    "    return {1: 'one', 2: 'two'}[n]\n"
)


@pytest.mark.slow
async def test_a_killed_worker_is_resumed_without_repeating_turns_or_tools(
    engine: AsyncEngine,
    store_url: str,
    tmp_path: Path,
    worker_process: Callable[[str], subprocess.Popen[str]],
) -> None:
    sys.path.insert(0, str(PROCS))
    try:
        from agent_worker import logged
    finally:
        sys.path.remove(str(PROCS))
    effects = tmp_path / "effects.log"
    tools = [{"name": name, "script": EFFECT, "inputs": {"path": str(effects)}}
             for name in ("first", "second")]  # fmt: skip
    run_id = await engine.submit(agent_flow({"tools": tools}, user="go"))

    process = worker_process(store_url)
    assert process.stdout is not None
    assert (await asyncio.to_thread(process.stdout.readline)).startswith("ready")
    deadline = time.monotonic() + 60
    while len(lines(effects)) < 2:  # `first` finished, `second` is running
        assert time.monotonic() < deadline and process.poll() is None
        await asyncio.sleep(0.05)
    os.killpg(process.pid, signal.SIGKILL)
    await asyncio.to_thread(process.wait, 30)

    requests_log = tmp_path / "requests.log"
    before = [json.loads(line) for line in lines(requests_log)]
    assert [entry["tool_results"] for entry in before] == [0, 1]
    model = logged(requests_log)
    async with engine.worker(poll=0.1, pool_size=1, models=models(model)):
        assert await engine.wait(run_id, timeout=60) == "done: one two"
    # The second worker asked the model once, with both results: no answered turn again.
    assert [len(tool_messages(r)) for r in model.requests] == [2]
    first, second_killed, second_again = [line.split() for line in lines(effects)]
    assert first[0] == f"{run_id}:agent:{first[0].rsplit(':', 1)[1]}" and first[1] == "1"
    assert second_killed[0] == second_again[0]  # the same idempotency key
    assert (second_killed[1], second_again[1]) == ("1", "2")
    (job,) = await engine.jobs(run_id)
    assert (job.status, job.attempt, job.epoch) == ("succeeded", 1, 2)
    # The killed worker stored nothing; its two answered calls are recovered from the journal.
    usage = await engine.usage(run_id)
    assert [u["latency_ms"] == 0.0 for u in usage] == [True, True, False]


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []
