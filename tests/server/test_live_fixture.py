"""The `live` fixture's team and items are what its docstring says they are."""

from __future__ import annotations

import time
from typing import Any

from tests.server.conftest import Live


def test_the_team_flow_passes_its_input_to_the_script(live: Live) -> None:
    with live.client("olga") as olga:
        answer = olga.post("/api/runs", json={"path": "f/team/flow", "inputs": {"name": "ann"}})
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
        deadline = time.monotonic() + 60
        while True:
            run: dict[str, Any] = olga.get(f"/api/runs/{run_id}").json()
            if run["status"] in ("succeeded", "failed", "cancelled"):
                break
            assert time.monotonic() < deadline, run
            time.sleep(0.05)
    # The step's `name` is the flow input's, not the text of the expression.
    assert (run["status"], run["result"]) == ("succeeded", "hello ann"), run
