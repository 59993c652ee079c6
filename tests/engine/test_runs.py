"""Runs end to end on SQLite and PostgreSQL: every step kind, retries, failures, approvals."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tidemill.engine import AsyncEngine
from tidemill.errors import (
    ApprovalDecisionError,
    FlowInputError,
    FlowValidationError,
    InvalidOption,
    RunFailed,
    RunNotFound,
    RunStateError,
    RunTimeout,
)
from tidemill.flows import Flow

pytestmark = pytest.mark.timeout(90)

DOUBLE = "def main(x):\n    return x * 2\n"
INC = "def main(n):\n    return n + 1\n"


def flow(steps: list[dict[str, Any]], **extra: Any) -> Flow:
    return Flow.model_validate({"steps": steps, **extra})


def script(step_id: str, code: str, **extra: Any) -> dict[str, Any]:
    return {"id": step_id, "script": code, **extra}


def expr(text: str) -> dict[str, str]:
    return {"expr": text}


async def run_to_end(engine: AsyncEngine, f: Flow, inputs: dict[str, Any] | None = None) -> Any:
    async with engine.worker(concurrency=4, poll=0.2, pool_size=2):
        run_id = await engine.submit(f, inputs)
        return await engine.wait(run_id, timeout=60)


async def test_sequential_steps_pass_results_along(engine: AsyncEngine) -> None:
    f = flow(
        [
            script("double", DOUBLE, inputs={"x": expr("flow_input.x")}),
            {"id": "add", "script": {"function": "stepfns:add", "in_process": True},
             "inputs": {"a": expr("previous_result"), "b": expr("results.double")}},
            {"id": "show", "identity": {}, "inputs": {"total": expr("results.add"), "tag": "t"}},
        ],
        inputs={"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    )  # fmt: skip
    assert await run_to_end(engine, f, {"x": 5}) == {"total": 20, "tag": "t"}


async def test_submit_only_enqueues(engine: AsyncEngine) -> None:
    run_id = await engine.submit(flow([{"id": "a", "identity": {}}]))
    with pytest.raises(RunTimeout, match="still queued"):
        await engine.wait(run_id, timeout=0.3)
    assert (await engine.get(run_id)).status == "queued"
    async with engine.worker(poll=0.2):
        assert await engine.wait(run_id, timeout=30) is None
    assert (await engine.get(run_id)).status == "succeeded"


async def test_bad_input_is_refused_before_anything_is_stored(engine: AsyncEngine) -> None:
    f = flow(
        [{"id": "a", "identity": {}}],
        inputs={"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    with pytest.raises(FlowInputError, match="n"):
        await engine.submit(f, {"n": "three"})
    assert await engine.runs() == []


async def test_fan_out_and_fan_in(engine: AsyncEngine) -> None:
    f = flow(
        [
            {"id": "start", "identity": {}, "inputs": {"v": 1}},
            {"id": "left", "identity": {}, "inputs": {"v": expr("results.start.v + 1")},
             "needs": ["start"]},
            {"id": "right", "identity": {}, "inputs": {"v": expr("results.start.v + 2")},
             "needs": ["start"]},
            {"id": "join", "identity": {}, "needs": ["left", "right"],
             "inputs": {"sum": expr("results.left.v + results.right.v"),
                        "prev": expr("previous_result")}},
        ]
    )  # fmt: skip
    result = await run_to_end(engine, f)
    assert result == {"sum": 5, "prev": {"left": {"v": 2}, "right": {"v": 3}}}


async def test_parallel_branches_return_their_results_in_order(engine: AsyncEngine) -> None:
    slow = "import time\ndef main():\n    time.sleep(0.3)\n    return 'slow'\n"
    f = flow(
        [
            {"id": "both", "parallel": {"branches": [
                {"steps": [script("first", slow)]},
                {"steps": [{"id": "second", "identity": {}, "inputs": {"v": "fast"}}]},
            ]}},
        ]
    )  # fmt: skip
    assert await run_to_end(engine, f) == ["slow", {"v": "fast"}]


async def test_for_each_with_a_parallelism_limit(engine: AsyncEngine) -> None:
    f = flow(
        [
            {"id": "each", "for_each": {
                "items": expr("flow_input.items"), "parallelism": 2,
                "steps": [script("sq", "def main(x, i):\n    return x * x + i\n",
                                 inputs={"x": expr("iter.value"), "i": expr("iter.index")})],
            }},
        ]
    )  # fmt: skip
    assert await run_to_end(engine, f, {"items": [1, 2, 3, 4, 5]}) == [1, 5, 11, 19, 29]


async def test_for_each_over_nothing_is_an_empty_list(engine: AsyncEngine) -> None:
    f = flow([{"id": "each", "for_each": {"items": [], "steps": [{"id": "x", "identity": {}}]}}])
    assert await run_to_end(engine, f) == []


async def test_branch_takes_the_first_case_that_holds(engine: AsyncEngine) -> None:
    f = flow(
        [
            {"id": "pick", "branch": {
                "branches": [
                    {"when": "flow_input.n > 10", "steps": [
                        {"id": "big", "identity": {}, "inputs": {"size": "big"}}]},
                    {"when": "flow_input.n > 0", "steps": [
                        {"id": "small", "identity": {}, "inputs": {"size": "small"}}]},
                ],
                "default": [{"id": "none", "identity": {}, "inputs": {"size": "none"}}],
            }},
            {"id": "after", "identity": {}, "inputs": {"got": expr("results.pick.size")}},
        ]
    )  # fmt: skip
    assert await run_to_end(engine, f, {"n": 5}) == {"got": "small"}
    assert await run_to_end(engine, f, {"n": 50}) == {"got": "big"}
    assert await run_to_end(engine, f, {"n": -1}) == {"got": "none"}


async def test_a_sub_flow_gets_its_own_input(engine: AsyncEngine) -> None:
    child = {
        "inputs": {"type": "object", "required": ["n"]},
        "steps": [script("inc", INC, inputs={"n": expr("flow_input.n")})],
    }  # fmt: skip
    f = flow([{"id": "sub", "flow": {"flow": child}, "inputs": {"n": expr("flow_input.n")}}])
    assert await run_to_end(engine, f, {"n": 41}) == 42


async def test_skip_if_and_stop_after_if(engine: AsyncEngine) -> None:
    f = flow(
        [
            {"id": "maybe", "identity": {}, "inputs": {"v": 1}, "skip_if": "flow_input.skip"},
            {"id": "check", "identity": {}, "inputs": {"done": expr("flow_input.stop")},
             "stop_after_if": "result.done"},
            {"id": "last", "identity": {}, "inputs": {"v": "reached"}},
        ]
    )  # fmt: skip
    assert await run_to_end(engine, f, {"skip": True, "stop": False}) == {"v": "reached"}
    assert await run_to_end(engine, f, {"skip": False, "stop": True}) == {"done": True}


async def test_result_expression(engine: AsyncEngine) -> None:
    f = flow(
        [{"id": "a", "identity": {}, "inputs": {"v": 2}}, {"id": "b", "identity": {}}],
        result={"expr": "results.a.v * 10"},
    )
    assert await run_to_end(engine, f) == 20


async def test_retries_then_succeeds_with_a_stable_idempotency_key(
    engine: AsyncEngine, tmp_path: Any
) -> None:
    marker = tmp_path / "tries"
    code = (
        "import os, pathlib\n"
        "def main(path):\n"
        "    p = pathlib.Path(path)\n"
        "    p.write_text(p.read_text() + os.environ['TIDEMILL_IDEMPOTENCY_KEY'] + '\\n'"
        " if p.exists() else os.environ['TIDEMILL_IDEMPOTENCY_KEY'] + '\\n')\n"
        "    if len(p.read_text().splitlines()) < 3:\n"
        "        raise RuntimeError('flaky')\n"
        "    return os.environ['TIDEMILL_ATTEMPT']\n"
    )
    f = flow(
        [script("flaky", code, inputs={"path": str(marker)},
                retry={"attempts": 3, "backoff": 0.01})]
    )  # fmt: skip
    assert await run_to_end(engine, f) == "3"
    keys = marker.read_text().splitlines()
    assert len(keys) == 3
    assert len(set(keys)) == 1
    assert keys[0].endswith(":flaky")


async def test_a_failing_script_fails_the_run_with_its_error_and_logs(engine: AsyncEngine) -> None:
    code = "def main():\n    print('about to fail')\n    raise ValueError('bad data')\n"
    async with engine.worker(poll=0.2, pool_size=1):
        run_id = await engine.submit(flow([script("boom", code), {"id": "never", "identity": {}}]))
        with pytest.raises(RunFailed, match="bad data") as caught:
            await engine.wait(run_id, timeout=60)
    assert caught.value.step == "boom"
    assert caught.value.error["type"] == "ValueError"
    assert "Traceback" in caught.value.error["traceback"]
    logs = await engine.logs(run_id)
    assert [(log.stream, log.body.strip()) for log in logs] == [("stdout", "about to fail")]
    steps = {job.step_id: job.status for job in await engine.jobs(run_id)}
    assert steps == {"boom": "failed"}


async def test_a_hanging_script_is_killed_at_its_timeout(engine: AsyncEngine) -> None:
    f = flow([script("hang", "import time\ndef main():\n    time.sleep(60)\n", timeout=0.5)])
    async with engine.worker(poll=0.2, pool_size=1):
        run_id = await engine.submit(f)
        with pytest.raises(RunFailed, match="Timeout"):
            await engine.wait(run_id, timeout=60)


async def test_a_script_that_exits_fails_its_step_not_the_worker(engine: AsyncEngine) -> None:
    exits = flow([script("bye", "import os\ndef main():\n    os._exit(3)\n")])
    fine = flow([script("ok", "def main():\n    return 'still working'\n")])
    async with engine.worker(poll=0.2, pool_size=1):
        first = await engine.submit(exits)
        with pytest.raises(RunFailed, match="ProcessExited"):
            await engine.wait(first, timeout=60)
        second = await engine.submit(fine)
        assert await engine.wait(second, timeout=60) == "still working"


async def test_failure_inside_a_loop_names_the_iteration(engine: AsyncEngine) -> None:
    code = "def main(x):\n    if x == 2:\n        raise KeyError(x)\n    return x\n"
    f = flow(
        [{"id": "each", "for_each": {"items": [1, 2, 3], "steps": [
            script("inner", code, inputs={"x": expr("iter.value")})]}}]
    )  # fmt: skip
    async with engine.worker(poll=0.2, pool_size=1):
        run_id = await engine.submit(f)
        with pytest.raises(RunFailed) as caught:
            await engine.wait(run_id, timeout=60)
    assert caught.value.step == "each[1]/inner"
    assert caught.value.error["type"] == "KeyError"


async def test_retry_a_failed_run_from_the_failed_step(engine: AsyncEngine, tmp_path: Any) -> None:
    gate = tmp_path / "gate"
    counter = tmp_path / "count"
    counting = (
        "import pathlib\n"
        "def main(path):\n"
        "    p = pathlib.Path(path)\n"
        "    n = int(p.read_text()) + 1 if p.exists() else 1\n"
        "    p.write_text(str(n))\n"
        "    return n\n"
    )
    guarded = (
        "import pathlib\n"
        "def main(path):\n"
        "    if not pathlib.Path(path).exists():\n"
        "        raise RuntimeError('gate closed')\n"
        "    return 'open'\n"
    )
    f = flow(
        [script("count", counting, inputs={"path": str(counter)}),
         script("guard", guarded, inputs={"path": str(gate)})]
    )  # fmt: skip
    async with engine.worker(poll=0.2, pool_size=1):
        run_id = await engine.submit(f)
        with pytest.raises(RunFailed, match="gate closed"):
            await engine.wait(run_id, timeout=60)
        with pytest.raises(RunStateError, match="only a failed run"):
            await engine.retry(await engine.submit(flow([{"id": "a", "identity": {}}])))
        gate.write_text("x")
        await engine.retry(run_id)
        assert await engine.wait(run_id, timeout=60) == "open"
    assert counter.read_text() == "1"  # the finished step was not run again
    attempts = [(j.step_id, j.attempt, j.status) for j in await engine.jobs(run_id)]
    assert attempts == [
        ("count", 1, "succeeded"),
        ("guard", 1, "failed"),
        ("guard", 2, "succeeded"),
    ]


async def test_cancel_stops_running_steps(engine: AsyncEngine) -> None:
    f = flow([script("long", "import time\ndef main():\n    time.sleep(30)\n")])
    async with engine.worker(poll=0.1, pool_size=1, lease=0.6) as worker:
        run_id = await engine.submit(f)
        for _ in range(200):
            if any(j.status == "running" for j in await engine.jobs(run_id)):
                break
            await asyncio.sleep(0.02)
        await engine.cancel(run_id)
        with pytest.raises(RunStateError, match="cancelled"):
            await engine.wait(run_id, timeout=5)
        for _ in range(200):  # the renewal notices within a third of the lease
            if worker.processed:
                break
            await asyncio.sleep(0.05)
        assert worker.processed == 1
    with pytest.raises(RunStateError, match="nothing to cancel"):
        await engine.cancel(run_id)
    with pytest.raises(RunNotFound):
        await engine.cancel("no-such-run")


async def test_approval_approved(engine: AsyncEngine) -> None:
    f = flow(
        [
            {"id": "ask", "approval": {"message": "Ship it?", "approvers": ["alice"]}},
            {"id": "after", "identity": {}, "inputs": {"ok": expr("results.ask.approved"),
                                                       "by": expr("results.ask.by")}},
        ]
    )  # fmt: skip
    async with engine.worker(poll=0.1):
        run_id = await engine.submit(f)
        pending = await _pending(engine, run_id)
        assert (await engine.get(run_id)).status == "waiting"
        assert pending.message == "Ship it?"
        with pytest.raises(ApprovalDecisionError, match="may not decide") as caught:
            await engine.approve(pending.id, actor="mallory")
        assert caught.value.reason == "actor"
        await engine.approve(pending.id, actor="alice", comment="go")
        with pytest.raises(ApprovalDecisionError, match="already approved") as again:
            await engine.approve(pending.id, actor="alice")
        assert again.value.reason == "decided"
        assert await engine.wait(run_id, timeout=30) == {"ok": True, "by": "alice"}


async def test_approval_rejected_fails_the_run(engine: AsyncEngine) -> None:
    f = flow([{"id": "ask", "approval": {}}, {"id": "after", "identity": {}}])
    async with engine.worker(poll=0.1):
        run_id = await engine.submit(f)
        pending = await _pending(engine, run_id)
        await engine.reject(pending.id, actor="bob", comment="too risky")
        with pytest.raises(RunFailed, match="too risky") as caught:
            await engine.wait(run_id, timeout=30)
    assert caught.value.error["type"] == "ApprovalRejected"


async def test_approval_times_out(engine: AsyncEngine) -> None:
    f = flow([{"id": "ask", "approval": {"timeout": 0.3, "on_timeout": "reject"}}])
    async with engine.worker(poll=0.1):
        run_id = await engine.submit(f)
        with pytest.raises(RunFailed, match="ApprovalExpired"):
            await engine.wait(run_id, timeout=30)
    expired = await engine.approvals(run_id, status=None)
    assert [a.status for a in expired] == ["expired"]
    with pytest.raises(ApprovalDecisionError, match="already expired"):
        await engine.approve(expired[0].id)


async def test_per_flow_concurrency_limit(engine: AsyncEngine) -> None:
    f = flow([{"id": "ask", "approval": {}}], concurrency={"limit": 1}, name="one-at-a-time")
    async with engine.worker(poll=0.1):
        first = await engine.submit(f)
        second = await engine.submit(f)
        await _pending(engine, first)
        assert (await engine.get(second)).status == "queued"
        approval = (await engine.approvals(first))[0]
        await engine.approve(approval.id)
        await engine.wait(first, timeout=30)
        second_approval = await _pending(engine, second)
        await engine.approve(second_approval.id)
        await engine.wait(second, timeout=30)


async def _pending(engine: AsyncEngine, run_id: str) -> Any:
    for _ in range(500):
        pending = await engine.approvals(run_id)
        if pending:
            return pending[0]
        await asyncio.sleep(0.02)
    raise AssertionError("no approval appeared")


async def test_a_join_reads_results_of_steps_inside_branches(engine: AsyncEngine) -> None:
    f = flow(
        [
            {"id": "both", "parallel": {"branches": [
                {"steps": [{"id": "a", "identity": {}, "inputs": {"v": 1}}]},
                {"steps": [{"id": "b", "identity": {}, "inputs": {"v": 2}},
                           {"id": "b2", "identity": {},
                            "inputs": {"v": expr("results.b.v * 10")}}]},
            ]}},
            {"id": "join", "identity": {},
             "inputs": {"a": expr("results.a.v"), "b2": expr("results.b2.v")}},
        ]
    )  # fmt: skip
    assert await run_to_end(engine, f) == {"a": 1, "b2": 20}


async def test_a_failure_in_nested_loops_names_every_index(engine: AsyncEngine) -> None:
    code = "def main(v):\n    if v == 3:\n        raise KeyError(v)\n    return v\n"
    f = flow(
        [{"id": "outer", "for_each": {"items": [[1], [2, 3]], "steps": [
            {"id": "inner", "for_each": {"items": expr("iter.value"), "steps": [
                script("x", code, inputs={"v": expr("iter.value")})]}}]}}]
    )  # fmt: skip
    async with engine.worker(poll=0.2, pool_size=1):
        run_id = await engine.submit(f)
        with pytest.raises(RunFailed) as caught:
            await engine.wait(run_id, timeout=60)
    assert caught.value.step == "outer[1]/inner[1]/x"


async def test_a_flow_given_as_a_mapping_is_checked_and_anything_else_refused(
    engine: AsyncEngine,
) -> None:
    document = {
        "steps": [{"id": "echo", "identity": {}, "inputs": {"n": {"expr": "flow_input.n"}}}]
    }
    async with engine.worker(poll=0.05):
        assert await engine.wait(await engine.submit(document, {"n": 3}), timeout=60) == {"n": 3}
    with pytest.raises(FlowValidationError):
        await engine.submit({"steps": [{"id": "x"}]})  # a step of no kind
    for wrong in (42, None, ["steps"]):
        with pytest.raises(InvalidOption, match="is a Flow, a mapping or the path"):
            await engine.submit(wrong)  # type: ignore[arg-type]
