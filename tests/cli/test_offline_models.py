"""`--model-alias` on `tidemill run` and `tidemill worker`: AI flows offline, with no API key."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_support import cli, environment, running, tidemill, write_flow

from tidemill.engine import Engine

pytestmark = pytest.mark.timeout(90)

TRIAGE: dict[str, Any] = {
    "name": "triage",
    "inputs": {"type": "object", "properties": {"text": {"type": "string"}}},
    "steps": [
        {"id": "classify", "inputs": {"text": {"expr": "flow_input.text"}}, "ai_action": {
            "model": "openai:gpt-4o-mini",
            "prompt": "Classify this ticket: {{ text }}",
            "output_schema": {"type": "object", "required": ["label", "urgent"], "properties": {
                "label": {"enum": ["refund", "bug", "question"]},
                "urgent": {"type": "boolean"}}}}},
        {"id": "reply", "inputs": {"user_message": {"expr": "flow_input.text"}}, "ai_agent": {
            "model": "anthropic:claude-sonnet-4-5",
            "system": "You answer support tickets.",
            "tools": [{"name": "lookup_order",
                       "script": "def main(order_id: str):\n    return 'shipped'\n"}]}},
        {"id": "summary", "identity": {}, "inputs": {
            "label": {"expr": "results.classify.label"}, "reply": {"expr": "results.reply"}}},
    ],
}  # fmt: skip
"""An `ai_action` with an output schema, then an agent with a tool, on two vendors' models."""


@pytest.fixture
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("no_keys")
def test_run_with_every_model_aliased_to_fake_needs_no_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    flow = write_flow(tmp_path, TRIAGE)
    code, out, err = cli(capsys, "run", flow, "--db", db, "-i", "text=My parcel is late",
                         "--model-alias", "*=fake")  # fmt: skip
    assert code == 0, err
    # The action answers the simplest value of its schema; the agent, the user's message.
    assert json.loads(out) == {"label": "refund", "reply": "My parcel is late"}
    with Engine(db) as engine:
        (run,) = engine.runs()
        providers = {record["provider"] for record in engine.usage(run.id)}
    assert providers == {"scripted"}


@pytest.mark.usefixtures("no_keys")
def test_without_the_alias_the_same_flow_needs_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "run", write_flow(tmp_path, TRIAGE), "--db",
                       f"sqlite:///{tmp_path}/t.db", "-i", "text=late")  # fmt: skip
    assert code == 1
    assert "MissingCredentialsError" in err


@pytest.mark.usefixtures("no_keys")
def test_an_alias_serves_only_the_model_it_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow = {"name": "two", "steps": [
        {"id": "offline", "ai_action": {"model": "openai:gpt-4o-mini", "prompt": "Hi there",
                                        "api_key": "env:TIDEMILL_TEST_UNSET_KEY",
                                        "base_url": "http://127.0.0.1:9/v1"}},
        {"id": "online", "needs": ["offline"],
         "ai_action": {"model": "anthropic:claude-sonnet-4-5", "prompt": "Hi"}},
    ]}  # fmt: skip
    code, _, err = cli(capsys, "run", write_flow(tmp_path, flow), "--db",
                       f"sqlite:///{tmp_path}/t.db",
                       "--model-alias", "openai:gpt-4o-mini=fake")  # fmt: skip
    assert code == 1
    # The aliased step ran offline: its own key variable and endpoint were not used.
    assert "succeeded  offline" in err
    assert "online" in err and "ANTHROPIC_API_KEY" in err


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("fake", "expected NAME=SPEC"),
        ("*=", "expected NAME=SPEC"),
        ("*=opnai:gpt-4o", "Did you mean 'openai'?"),
        ("opnai:gpt-4o=fake", "Did you mean 'openai'?"),
        ("*=*", "Unknown model provider in '*'"),
    ],
)
@pytest.mark.parametrize("command", ["run", "worker"])
def test_a_bad_alias_is_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str, value: str, words: str
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    argv = [command, "--db", db, "--model-alias", value]
    if command == "run":
        argv.insert(1, write_flow(tmp_path, TRIAGE))
    with pytest.raises(SystemExit) as caught:
        cli(capsys, *argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "argument --model-alias" in err and words in err
    assert not (tmp_path / "t.db").exists()  # nothing was stored


@pytest.mark.slow
def test_a_worker_with_the_alias_runs_a_detached_ai_flow(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    env = {k: v for k, v in environment().items() if not k.endswith("_API_KEY")}
    submitted = subprocess.run(
        tidemill("run", write_flow(tmp_path, TRIAGE), "--db", db, "-i", "text=late", "--detach"),
        capture_output=True, text=True, timeout=60, env=env, check=False,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()
    with (
        Engine(db) as engine,
        running("worker", "--db", db, "--poll", "0.2", "--model-alias", "*=fake") as (
            worker,
            lines,
        ),
    ):
        assert engine.run(run_id).wait(timeout=60) == {"label": "refund", "reply": "late"}
        worker.send_signal(signal.SIGTERM)
        assert worker.wait(timeout=30) == 0, lines.rest()
