"""`tidemill ws agent save|unlink`, called in this process."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import cli

pytestmark = pytest.mark.timeout(60)

FLOW: dict[str, Any] = {
    "name": "triage",
    "steps": [
        {"id": "hello", "identity": {}},
        {
            "id": "triage",
            "ai_agent": {"model": "fake", "system": "Triage."},
            "inputs": {"user_message": "hi"},
        },
    ],
}


@pytest.fixture(autouse=True)
def _local_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    for name in ("TIDEMILL_DB", "TIDEMILL_MASTER_KEY", "TIDEMILL_MASTER_KEY_FILE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


def test_save_and_unlink(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"

    def ws(*argv: str) -> tuple[int, str, str]:
        return cli(capsys, "ws", *argv, "--db", db)

    assert ws("folders", "add", "support")[0] == 0
    flow = tmp_path / "triage.yaml"
    flow.write_text(yaml.safe_dump(FLOW))
    assert ws("write", "f/support/triage", "--kind", "flow", "--file", str(flow))[0] == 0
    code, out, err = ws("agent", "save", "f/support/triage", "triage", "f/support/agent", "-m", "x")
    assert code == 0, err
    assert "wrote agent f/support/agent as version 1" in out
    assert "version 2" in out
    code, out, err = ws("agent", "save", "f/support/triage", "triage", "f/support/agent")
    assert code != 0 and "already links" in err
    code, out, err = ws("agent", "unlink", "f/support/triage", "triage", "--draft")
    assert code == 0, err
    assert "unlinked step triage of f/support/triage (draft)" in out
    code, out, err = ws("agent", "unlink", "f/support/triage", "hello")
    assert code != 0 and "not an ai_agent step" in err
