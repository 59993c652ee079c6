"""A linked agent step whose worker process is SIGKILLed mid-step, resumed by another worker.

`ada` keeps the agent `f/x/crash` (a resource of type `ai_agent`) whose
tools `first` and `second` run the workspace script `f/x/effect` by path
(`first` pins `@1`, `second` takes the deployed one). procs/agent_worker.py's
model calls `first`, then `second`, then answers "done: one two"; `second`
hangs in that process (`AGENT_TEST_HANG`). The worker is killed while
`second` runs, the agent and the script are edited, and a worker of this
process resumes the step: it does not call `first` again and runs the
agent (and the script) it started with. On SQLite and PostgreSQL.
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
from tidemill.flows import Flow
from tidemill.llm import ScriptedModel
from tidemill.types import Message
from tidemill.workspace import AsyncWorkspace, MasterKey

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

PROCS = Path(__file__).parent / "procs"


def effect(mark: str) -> str:
    """The tool script: it logs `<mark> <idempotency key> <n> <pid>`, and `n == 2` may hang."""
    return (
        "import os, time\n"
        "def main(n: int, path: str):\n"
        "    with open(path, 'a') as f:\n"
        f"        f.write('{mark} %s %s %s\\n' % (os.environ['TIDEMILL_IDEMPOTENCY_KEY'], n,\n"
        "                                      os.getpid()))\n"
        "    if n == 2 and os.environ.get('AGENT_TEST_HANG'):\n"
        "        time.sleep(60)\n"
        "    return {1: 'one', 2: 'two'}[n]\n"
    )


def agent(system: str, effects: Path, names: tuple[str, ...]) -> dict[str, Any]:
    paths = {"first": "f/x/effect@1", "second": "f/x/effect"}
    tools = [
        {"name": name, "script": {"path": paths[name]}, "inputs": {"path": str(effects)}}
        for name in names
    ]
    return {"model": "fake", "system": system, "tools": tools}


def linked_flow() -> Flow:
    step = {"id": "agent", "ai_agent": {"agent": "f/x/crash"}, "inputs": {"user_message": "go"}}
    return Flow.model_validate({"steps": [step]})


def logged_model(log: Path) -> ScriptedModel:
    sys.path.insert(0, str(PROCS))
    try:
        from agent_worker import logged
    finally:
        sys.path.remove(str(PROCS))
    model: ScriptedModel = logged(log)
    return model


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_a_killed_linked_step_resumes_on_its_agent_without_repeating_a_tool(
    store_url: str,
    tmp_path: Path,
    worker_process: Callable[[str], subprocess.Popen[str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if store_url.startswith("postgres"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    monkeypatch.delenv("AGENT_TEST_HANG", raising=False)  # only the doomed process hangs
    effects, log = tmp_path / "effects.log", tmp_path / "requests.log"
    engine = AsyncEngine(store_url, migrate=True)
    await engine._open()
    ada = AsyncWorkspace(engine.store, user="ada")
    try:
        await ada.add_folder("x")
        await ada.write("f/x/effect", "script", effect("v1"))
        value = agent("v1", effects, ("first", "second"))
        await ada.write("f/x/crash", "resource", value, resource_type="ai_agent")
        run_id = await engine.submit(linked_flow(), run_as="ada")

        process = worker_process(store_url)
        assert process.stdout is not None
        assert (await asyncio.to_thread(process.stdout.readline)).startswith("ready")
        deadline = time.monotonic() + 60
        while len(lines(effects)) < 2:  # `first` finished, `second` is running
            assert time.monotonic() < deadline and process.poll() is None
            await asyncio.sleep(0.05)
        os.killpg(process.pid, signal.SIGKILL)
        await asyncio.to_thread(process.wait, 30)
        before = [json.loads(line)["tool_results"] for line in lines(log)]
        assert before == [0, 1]  # the model saw `first`'s result, and asked for `second`

        # While nobody runs the step, its agent changes (prompt, `second` dropped) and so
        # does the script its tools run.
        await ada.write(
            "f/x/crash", "resource", agent("v2", effects, ("first",)), resource_type="ai_agent"
        )
        await ada.write("f/x/effect", "script", effect("v2"))

        model = logged_model(log)
        async with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
            assert await engine.wait(run_id, timeout=60) == "done: one two"
        # The new worker asked once, with both results: no answered turn, no finished tool again.
        (request,) = model.requests
        assert request.messages[0] == Message.system("v1")
        assert sorted(tool.name for tool in request.tools) == ["first", "second"]
        ran = [line.split() for line in lines(effects)]
        assert [(mark, n) for mark, _key, n, _pid in ran] == [("v1", "1"), ("v1", "2"), ("v1", "2")]
        assert ran[1][1] == ran[2][1]  # `second` again, under its idempotency key
        assert ran[1][3] != ran[2][3]  # in another process
        (job,) = await engine.jobs(run_id)
        assert (job.status, job.attempt) == ("succeeded", 1)
        assert job.epoch >= 2  # the same job, taken over
        (recorded,) = await engine.linked_agents(run_id)
        assert (recorded["path"], recorded["version"], recorded["job_id"]) == (
            "f/x/crash", 1, job.id
        )  # fmt: skip
        assert recorded["scripts"] == [
            {"tool": "first", "path": "f/x/effect", "version": 1},
            {"tool": "second", "path": "f/x/effect", "version": 1},
        ]
        logs = "".join(row.body for row in await engine.logs(run_id))
        assert "agent f/x/crash version 1" in logs and "version 2" not in logs
    finally:
        await ada.close()
        await engine.close()


async def test_linked_agents_lists_the_versions_of_the_tool_scripts_and_flows_it_ran(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if store_url.startswith("postgres"):
        monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    engine = AsyncEngine(store_url, migrate=True)
    await engine._open()
    ada = AsyncWorkspace(engine.store, user="ada")
    try:
        await ada.add_folder("x")
        await ada.write("f/x/look", "script", "def main():\n    return 'v1'\n")
        await ada.write("f/x/look", "script", "def main():\n    return 'v2'\n")
        await ada.write("f/x/pay", "flow", {"steps": [{"id": "pay", "identity": {}}]})
        value = {
            "model": "fake",
            "tools": [
                {"name": "old", "script": {"path": "f/x/look@1"}},
                {"name": "live", "script": {"path": "f/x/look"}},
                {"name": "pay", "flow": "f/x/pay"},
                {"name": "inner", "agent": {"model": "fake", "tools": [
                    {"name": "deep", "script": {"path": "f/x/look"}}]}},
            ],
        }  # fmt: skip
        await ada.write("f/x/triage", "resource", value, resource_type="ai_agent")
        await ada.save_draft("f/x/look", "script", "def main():\n    return 'draft'\n")
        step = {"id": "agent", "ai_agent": {"agent": "f/x/triage"},
                "inputs": {"user_message": "go"}}  # fmt: skip
        await ada.write("f/x/uses", "flow", {"steps": [step]})
        model = ScriptedModel(responses=[Message.assistant("ok")] * 2)
        async with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
            deployed = await engine.submit_path(ada, "f/x/uses")
            preview = await engine.submit_path(ada, "f/x/uses", draft=True)
            assert await engine.wait(deployed, timeout=60) == "ok"
            assert await engine.wait(preview, timeout=60) == "ok"
        (recorded,) = await engine.linked_agents(deployed)
        assert recorded["scripts"] == [
            {"tool": "old", "path": "f/x/look", "version": 1},
            {"tool": "live", "path": "f/x/look", "version": 2},
            {"tool": "inner.deep", "path": "f/x/look", "version": 2},
        ]
        assert recorded["flows"] == [{"tool": "pay", "path": "f/x/pay", "version": 1}]
        (drafted,) = await engine.linked_agents(preview)  # a preview reads ada's drafts
        assert [s["version"] for s in drafted["scripts"]] == [1, 0, 0]
    finally:
        await ada.close()
        await engine.close()
