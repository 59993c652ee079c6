"""`--models MODULE:FUNCTION` on `tidemill run` and `tidemill worker`: models of one's own.

Crash tests of AI steps from the CLI use it: a scripted model, importable by
the worker process, drives the agent while a worker is killed mid-tool-call.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from cli_support import cli, environment, running, tidemill, write_flow

from tidemill.engine import Engine

pytestmark = pytest.mark.timeout(90)

MODELS = '''
import json
import os
from tidemill.llm import ScriptedModel
from tidemill.types import ToolCall

def resolve(choice):
    """Every AI step: call `effect` once, then answer with what it returned."""
    log = os.environ.get("MODELS_LOG")
    if log:
        with open(log, "a") as f:
            f.write(json.dumps({"spec": choice.spec, "step": choice.step_id}) + "\\n")
    call = ToolCall(id="c1", name="effect", arguments={})
    return ScriptedModel(["", "done"], tool_calls=[[call], []])
'''
TOOL = (
    "import os, time\n"
    "def main(path: str, hang: str):\n"
    "    attempt = os.environ['TIDEMILL_TOOL_ATTEMPT']\n"
    "    with open(path, 'a') as f:\n"
    "        f.write(os.environ['TIDEMILL_IDEMPOTENCY_KEY'] + ' ' + attempt + '\\n')\n"
    "    if attempt == '1' and os.path.exists(hang):\n"
    "        time.sleep(60)\n"
    "    return 'effect done'\n"
)


def agent_flow(tmp_path: Path) -> dict[str, Any]:
    inputs = {"path": str(tmp_path / "effects"), "hang": str(tmp_path / "hang")}
    tool = {"name": "effect", "script": TOOL, "inputs": inputs}
    agent = {"model": "anthropic:claude-sonnet-4-5", "tools": [tool]}
    step = {"id": "agent", "inputs": {"user_message": "go"}, "ai_agent": agent}
    return {"name": "agent", "steps": [step]}


@pytest.fixture
def models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`my_models:resolve`, importable here and in the processes the test starts."""
    (tmp_path / "my_models.py").write_text(MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    )
    monkeypatch.setenv("MODELS_LOG", str(tmp_path / "models.log"))
    for name in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "models.log"


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def test_run_builds_every_model_with_the_function(
    tmp_path: Path, models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    code, out, err = cli(capsys, "run", write_flow(tmp_path, agent_flow(tmp_path)), "--db", db,
                         "--models", "my_models:resolve")  # fmt: skip
    assert code == 0, err
    assert json.loads(out) == "done"
    assert [json.loads(line) for line in lines(models)] == [
        {"spec": "anthropic:claude-sonnet-4-5", "step": "agent"}
    ]
    assert len(lines(tmp_path / "effects")) == 1


def test_aliases_apply_before_the_function(
    tmp_path: Path, models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    code, _, err = cli(capsys, "run", write_flow(tmp_path, agent_flow(tmp_path)), "--db", db,
                       "--models", "my_models:resolve",
                       "--model-alias", "anthropic:claude-sonnet-4-5=openai:gpt-4o")  # fmt: skip
    assert code == 0, err
    assert [json.loads(line)["spec"] for line in lines(models)] == ["openai:gpt-4o"]


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("my_models", "takes MODULE:FUNCTION, not 'my_models'"),
        ("no_such_module:resolve", "the module 'no_such_module' cannot be imported"),
        ("my_models:nothing", "'my_models' has no function 'nothing'"),
        ("my_models:json", "'my_models' has no function 'json'"),
    ],
)
@pytest.mark.parametrize("command", ["run", "worker"])
def test_a_bad_reference_is_refused_before_anything_runs(
    tmp_path: Path,
    models: Path,
    capsys: pytest.CaptureFixture[str],
    command: str,
    value: str,
    words: str,
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    argv = [command, "--db", db, "--models", value]
    if command == "run":
        argv.insert(1, write_flow(tmp_path, agent_flow(tmp_path)))
    with pytest.raises(SystemExit) as caught:
        cli(capsys, *argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert "argument --models" in err and words in err
    assert not (tmp_path / "t.db").exists()


@pytest.mark.slow
def test_a_worker_killed_mid_tool_call_leaves_it_to_the_next_one(
    tmp_path: Path, models: Path
) -> None:
    """The first worker is SIGKILLed while the tool runs; the next runs the call again.

    Same call, same idempotency key, attempt 2; the model's first turn is
    not asked again (the second worker builds its model and answers from the
    journal's turn).
    """
    db = f"sqlite:///{tmp_path}/t.db"
    (tmp_path / "hang").touch()
    submitted = subprocess.run(
        tidemill("run", write_flow(tmp_path, agent_flow(tmp_path)), "--db", db, "--detach"),
        capture_output=True, text=True, timeout=60, env=environment(), check=False,
    )  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip()
    effects = tmp_path / "effects"
    worker_argv = ("worker", "--db", db, "--poll", "0.1", "--lease", "1",
                   "--models", "my_models:resolve")  # fmt: skip
    with running(*worker_argv) as (first, _):
        deadline = time.monotonic() + 60
        while not lines(effects):
            assert time.monotonic() < deadline and first.poll() is None
            time.sleep(0.05)
        first.send_signal(signal.SIGKILL)  # mid-call: the tool sleeps
        first.wait(30)
    with Engine(db) as engine, running(*worker_argv) as (second, output):
        assert engine.run(run_id).wait(timeout=60) == "done"
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=30) == 0, output.rest()
    keys = [line.split() for line in lines(effects)]
    assert [attempt for _, attempt in keys] == ["1", "2"]
    assert keys[0][0] == keys[1][0] == f"{run_id}:agent:c1"
