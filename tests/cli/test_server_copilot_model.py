"""`tidemill server --copilot-model SPEC` (else `$TIDEMILL_COPILOT_MODEL`): the chat API's model."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from cli_support import cli

from tidemill.server import ServerConfig


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[ServerConfig]:
    """The configs `tidemill server` would serve (nothing is served)."""
    seen: list[ServerConfig] = []

    async def serve(config: ServerConfig, **options: Any) -> None:
        seen.append(config)

    monkeypatch.setattr("tidemill.server.serve", serve)
    monkeypatch.delenv("TIDEMILL_COPILOT_MODEL", raising=False)
    return seen


def test_the_flag_names_the_copilots_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], served: list[ServerConfig]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    assert cli(capsys, "server", "--db", db, "--copilot-model", "openai:gpt-4o")[0] == 0
    assert cli(capsys, "server", "--db", db)[0] == 0
    assert [c.copilot_model for c in served] == ["openai:gpt-4o", None]


def test_the_environment_names_it_when_the_flag_does_not(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    served: list[ServerConfig],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TIDEMILL_COPILOT_MODEL", "anthropic:claude-sonnet-4-5")
    db = f"sqlite:///{tmp_path}/t.db"
    assert cli(capsys, "server", "--db", db)[0] == 0
    assert cli(capsys, "server", "--db", db, "--copilot-model", "openai:gpt-4o")[0] == 0
    assert [c.copilot_model for c in served] == ["anthropic:claude-sonnet-4-5", "openai:gpt-4o"]
