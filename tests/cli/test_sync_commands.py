"""`tidemill sync pull` and `tidemill sync push`, driven in-process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tidemill.cli import main
from tidemill.workspace import Workspace

EXAMPLE = Path(__file__).parents[2] / "examples" / "workspace"


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A SQLite store whose workspace has ada (its first admin) and bo, a viewer of f/ops."""
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    monkeypatch.delenv("TIDEMILL_DB", raising=False)
    url = f"sqlite:///{tmp_path}/t.db"
    with Workspace(url, user="ada") as ws:
        ws.add_user("bo")
        ws.add_folder("ops", summary="Operations", roles={"bo": "viewer"})
        ws.write("f/ops/region", "variable", "eu-west-1")
        ws.write("f/ops/token", "variable", "sk-plain-secret", secret=True)
    return url


def test_pull_writes_files_and_reports_counts(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "tree"
    assert main(["sync", "pull", str(root), "--db", db]) == 0
    out = capsys.readouterr().out
    assert "1 folder, 2 variable (3 files)" in out
    assert "Secrets written without their values: f/ops/token." in out
    assert "sk-plain-secret" not in (root / "f/ops/token.variable.yaml").read_text()
    assert main(["sync", "pull", str(root), "--db", db, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["counts"] == {"folder": 1, "variable": 2}
    assert report["secrets_without_value"] == ["f/ops/token"]


def test_push_shows_the_changes_and_a_dry_run_changes_nothing(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "tree"
    assert main(["sync", "pull", str(root), "--db", db]) == 0
    (root / "f/ops/region.variable.yaml").write_text("value: us-east-1\n")
    (root / "f/ops/zone.variable.yaml").write_text("value: b\n")
    capsys.readouterr()
    assert main(["sync", "push", str(root), "--db", db, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "update  f/ops/region (variable)  value" in out
    assert "-eu-west-1" in out and "+us-east-1" in out
    assert "create  f/ops/zone (variable)" in out
    assert "Dry run: 1 to create, 1 to update, 2 unchanged; nothing was changed." in out
    with Workspace(db, user="ada") as ws:
        assert ws.get("f/ops/region").value == "eu-west-1"
        assert [i.path for i in ws.list()] == ["f/ops/region", "f/ops/token"]
    assert main(["sync", "push", str(root), "--db", db, "-m", "move"]) == 0
    assert "Pushed: 1 to create, 1 to update, 2 unchanged." in capsys.readouterr().out
    with Workspace(db, user="ada") as ws:
        assert ws.get("f/ops/region").value == "us-east-1"
        assert [e.path for e in ws.audit(action="sync.push")] == ["f/ops/region", "f/ops/zone"]
    assert main(["sync", "push", str(root), "--db", db, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["counts"] == {"create": 0, "update": 0, "unchanged": 4}
    assert plan["applied"] is True


def test_a_broken_file_names_its_file_and_line(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "tree"
    assert main(["sync", "pull", str(root), "--db", db]) == 0
    (root / "f/ops/region.variable.yaml").write_text("value: us-east-1\nsummary: a: b\n")
    (root / "f/ops/zone.variable.yaml").write_text("value: b\n")
    capsys.readouterr()
    assert main(["sync", "push", str(root), "--db", db]) == 2
    err = capsys.readouterr().err
    assert "error: f/ops/region.variable.yaml, line 2: mapping values are not allowed" in err
    assert "nothing was changed" in err
    with Workspace(db, user="ada") as ws:
        assert [i.path for i in ws.list()] == ["f/ops/region", "f/ops/token"]


def test_a_viewers_push_is_refused(
    db: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "tree"
    assert main(["sync", "pull", str(root), "--db", db, "--as", "bo"]) == 0
    (root / "f/ops/region.variable.yaml").write_text("value: us-east-1\n")
    capsys.readouterr()
    assert main(["sync", "push", str(root), "--db", db, "--as", "bo"]) == 2
    err = capsys.readouterr().err
    assert "f/ops/region.variable.yaml: bo may not write f/ops/region" in err
    assert main(["sync", "push", str(root), "--db", db, "--as", "bo", "--dry-run"]) == 2
    captured = capsys.readouterr()
    assert "update  f/ops/region (variable)  value" in captured.out
    assert "the push would fail: f/ops/region.variable.yaml: bo may not write" in captured.err
    with Workspace(db, user="ada") as ws:
        assert ws.get("f/ops/region").value == "eu-west-1"


def test_the_example_workspace_pushes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    db = f"sqlite:///{tmp_path}/demo.db"
    assert main(["sync", "push", str(EXAMPLE), "--db", db, "-m", "the demo"]) == 0
    out = capsys.readouterr().out
    assert "create  f/support/triage (flow)" in out
    assert "Pushed: 8 to create, 0 to update, 0 unchanged." in out
    with Workspace(db, user="ada") as ws:
        assert ws.history("f/support/triage")[0].message == "the demo"


def test_sync_needs_an_action(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["sync"])
    assert exited.value.code == 2
    assert "required: ACTION" in capsys.readouterr().err
