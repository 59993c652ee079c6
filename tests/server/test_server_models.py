"""`ServerConfig.models`: the in-process worker builds models with the given resolver."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import httpx
import pytest
from tests.server.conftest import ServerThread

from tidemill.engine import ModelChoice
from tidemill.llm import Model, ScriptedModel
from tidemill.server import ServerConfig, create_app
from tidemill.workspace import Workspace

FLOW = {
    "inputs": {"type": "object", "properties": {"topic": {"type": "string"}}},
    "steps": [
        {
            "id": "say",
            "ai_action": {"model": "fake", "prompt": "Tell me about {{ flow_input.topic }}"},
        }
    ],
}


def finished(client: httpx.Client, run_id: str) -> dict[str, object]:
    for _ in range(300):
        run = client.get(f"/api/runs/{run_id}").json()
        if run["status"] in ("succeeded", "failed", "cancelled"):
            return dict(run)
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish: {run}")


@pytest.mark.parametrize("scripted", [True, False], ids=["resolver", "default"])
def test_the_worker_asks_the_configured_resolver(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scripted: bool
) -> None:
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    db = f"sqlite:///{tmp_path}/tidemill.db"
    asked: list[ModelChoice] = []

    def models(choice: ModelChoice) -> Model:
        asked.append(choice)
        return ScriptedModel(["from the embedding program"], record=False)

    name = f"w{uuid.uuid4().hex[:8]}"
    ws = Workspace(db, workspace=name, user="ada", migrate=True)
    try:
        ws.add_folder("t")
        ws.write("f/t/say", "flow", FLOW)
        token = ws.create_token("test").text
        config = ServerConfig(db=db, workspace=name, models=models if scripted else None)
        thread = ServerThread(create_app(config))
        url = thread.start()
        try:
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
                answer = client.post(
                    "/api/runs", json={"path": "f/t/say", "inputs": {"topic": "tides"}}
                )
                assert answer.status_code == 201, answer.text
                run = finished(client, answer.json()["id"])
        finally:
            thread.stop()
    finally:
        ws.close()
    assert run["status"] == "succeeded", run
    if scripted:
        assert run["result"] == "from the embedding program"
        assert [c.spec for c in asked] == ["fake"] and asked[0].step_id == "say"
    else:  # the offline model echoes the prompt
        assert run["result"] == "Tell me about tides"
        assert asked == []
