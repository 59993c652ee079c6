"""A run's result as shown (`RunInfo.shown_result`) masks the secrets its steps returned.

A step that resolves a secret and returns it keeps its real result (the steps
after it, a parent flow and `wait` read it); the run's result as the API shows
it is built from the step's masked copy. On SQLite and PostgreSQL, through
the engine: a run whose last step returns a secret, a result expression over
it (and one that cannot be evaluated on the masked value, shown as `***`), a
run of a one-step flow (the worker's fast path), and a run with no secret.
"""

from __future__ import annotations

import pytest

from tidemill.engine import AsyncEngine
from tidemill.workspace import AsyncWorkspace, MasterKey

pytestmark = pytest.mark.timeout(120)

SECRET = "12345"
READ = "def main(key):\n    return {'key': key}\n"


def flow(result: str | None = None, *, two: bool = True) -> dict[str, object]:
    steps: list[dict[str, object]] = [
        {"id": "read", "script": READ, "inputs": {"key": "$var:f/ops/pin"}}
    ]
    if two:
        steps.append({"id": "size", "script": "def main(v):\n    return len(v['key'])\n",
                      "needs": ["read"], "inputs": {"v": {"expr": "results.read"}}})  # fmt: skip
    body: dict[str, object] = {"steps": steps}
    if result is not None:
        body["result"] = {"expr": result}
    return body


async def test_the_shown_result_masks_what_steps_returned(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    ws = AsyncWorkspace(engine.store, user="ada", migrate=True)
    await ws.add_folder("ops")
    await ws.write("f/ops/pin", "variable", SECRET, secret=True)
    cases = {
        "f/ops/last": (flow(two=False), {"key": SECRET}, {"key": "***"}),
        "f/ops/both": (
            flow("{'read': results.read, 'size': results.size}"),
            {"read": {"key": SECRET}, "size": 5},
            {"read": {"key": "***"}, "size": 5},
        ),
        "f/ops/derived": (flow("int(results.read.key) + 1"), 12346, "***"),
        "f/ops/plain": (
            {"steps": [{"id": "x", "script": "def main():\n    return 'no secret'\n"}]},
            "no secret",
            "no secret",
        ),
    }
    for path, (body, _, _) in cases.items():
        await ws.write(path, "flow", body)
    async with engine.worker(poll=0.05):
        runs = {path: await engine.submit_path(ws, path) for path in cases}
        for run_id in runs.values():
            await engine.wait(run_id, timeout=60)
    for path, (_, real, shown) in cases.items():
        info = await engine.get(runs[path])
        assert (info.status, info.result, info.shown_result) == ("succeeded", real, shown), path
    await ws.close()
