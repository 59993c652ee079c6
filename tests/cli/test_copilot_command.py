"""`tidemill copilot`, called in this process with a scripted model in place of `--model`'s."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from cli_support import cli
from tests.copilot.conftest import Conversation, Transcript, call

from tidemill.llm import ScriptedModel
from tidemill.workspace import Workspace

pytestmark = pytest.mark.timeout(60)

FLOW = """\
summary: Ping
steps:
  - id: ping
    script: "def main():\\n    print('pinged')\\n    return 'pong'\\n"
"""


@pytest.fixture(autouse=True)
def _local_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    for name in ("TIDEMILL_DB", "TIDEMILL_MASTER_KEY", "TIDEMILL_MASTER_KEY_FILE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name in ("TIDEMILL_COPILOT_MODEL", "TIDEMILL_DEFAULT_MODEL"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path}/t.db"
    with Workspace(url, user="ada") as ws:
        ws.add_folder("ops")
    return url


def _scripted(monkeypatch: pytest.MonkeyPatch, model: ScriptedModel) -> None:
    monkeypatch.setattr("tidemill.cli._copilot.model_spec", lambda args: model)


def _answer(transcript: Transcript) -> str:
    ran = transcript.last("test_run_flow")  # a refusal is the runtime's text, not JSON
    outcome = ran["status"] if isinstance(ran, dict) else "was refused"
    return f"Saved f/ops/ping; the test run {outcome}."


def _build_and_test() -> ScriptedModel:
    return Conversation(
        [call("search_flows", query="ping")],
        [call("set_flow", flow=FLOW, path="f/ops/ping")],
        [call("test_run_flow", inputs={})],
        _answer,
    ).model()


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_each_tool_call_is_shown_and_a_yes_on_the_terminal_runs_the_test(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, db: str
) -> None:
    _scripted(monkeypatch, _build_and_test())
    monkeypatch.setattr("sys.stdin", _Terminal("y\n"))
    code, out, err = cli(capsys, "copilot", "build a ping flow", "--db", db)
    assert code == 0, err
    assert out.strip() == "Saved f/ops/ping; the test run succeeded."
    assert '[search_flows] Searching for workspace flows related to "ping"' in err
    assert "[set_flow] Saved your draft of f/ops/ping" in err
    assert "The copilot wants to test-run your draft with inputs {}." in err
    assert "Run it? [y/N]" in err
    assert "Your draft: f/ops/ping (deploy it with: tidemill ws deploy f/ops/ping)" in err
    with Workspace(db, user="ada") as ws:
        assert ws.draft("f/ops/ping").summary == "Ping"


def test_no_on_the_terminal_refuses_the_test_run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, db: str
) -> None:
    model = _build_and_test()
    _scripted(monkeypatch, model)
    monkeypatch.setattr("sys.stdin", _Terminal("\n"))
    code, out, _ = cli(capsys, "copilot", "build a ping flow", "--db", db)
    assert code == 0
    assert out.strip() == "Saved f/ops/ping; the test run was refused."
    refused = [m for m in model.requests[-1].messages if m.name == "test_run_flow"]
    assert refused[0].is_error and "answered no" in refused[0].content


def test_without_a_terminal_a_test_run_is_refused_unless_yes(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, db: str
) -> None:
    _scripted(monkeypatch, _build_and_test())
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # not a terminal: never read
    code, out, err = cli(capsys, "copilot", "build a ping flow", "--db", db)
    assert code == 0
    assert "there is no terminal to ask on: this test run was refused. Pass --yes" in err
    assert out.strip() == "Saved f/ops/ping; the test run was refused."

    _scripted(monkeypatch, _build_and_test())
    code, out, err = cli(capsys, "copilot", "build a ping flow", "--db", db, "--yes")
    assert code == 0
    assert "Approved (--yes)." in err
    assert out.strip() == "Saved f/ops/ping; the test run succeeded."


def test_with_no_model_named_it_says_how_to_name_one(
    capsys: pytest.CaptureFixture[str], db: str
) -> None:
    code, _, err = cli(capsys, "copilot", "build a flow", "--db", db)
    assert code == 2
    assert "The copilot needs a model" in err
    assert "--model openai:gpt-4o" in err


def test_the_model_spec_comes_from_the_option_then_the_environment(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, db: str
) -> None:
    # "fake" is the offline scripted model: with no script it echoes the request.
    code, out, _ = cli(capsys, "copilot", "nothing to do", "--db", db, "--model", "fake")
    assert (code, out.strip()) == (0, "nothing to do")
    monkeypatch.setenv("TIDEMILL_COPILOT_MODEL", "fake")
    code, out, err = cli(capsys, "copilot", "still nothing", "--db", db, "--flow", "f/ops/x")
    assert (code, out.strip()) == (0, "still nothing")
    assert "Your draft" not in err  # it proposed nothing: there is no draft to deploy
