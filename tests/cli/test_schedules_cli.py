"""`tidemill schedules ...`: create, list, show, next, pause, resume and fires, in this process."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cli_support import cli

from tidemill.engine import Engine

pytestmark = pytest.mark.timeout(60)

SCRIPT = "def main(name: str = 'x'):\n    return 'hello ' + name\n"


@pytest.fixture(autouse=True)
def _local_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    for name in ("TIDEMILL_DB", "TIDEMILL_MASTER_KEY", "TIDEMILL_MASTER_KEY_FILE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def ops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """A store with ada's folder `ops`, the script `f/ops/hello`, and bob, a viewer of ops."""
    db = f"sqlite:///{tmp_path}/t.db"
    script = tmp_path / "hello.py"
    script.write_text(SCRIPT)
    for argv in (
        ("folders", "add", "ops"),
        ("write", "f/ops/hello", "--kind", "script", "--file", str(script)),
        ("users", "add", "bob"),
        ("grant", "f/ops", "bob", "viewer"),
    ):
        code, _, err = cli(capsys, "ws", *argv, "--db", db)
        assert code == 0, err
    return db


def ok(capsys: pytest.CaptureFixture[str], db: str, *argv: str) -> str:
    code, out, err = cli(capsys, "schedules", *argv, "--db", db)
    assert code == 0, err
    return out


def test_a_schedule_is_made_shown_paused_and_resumed(
    ops: str, capsys: pytest.CaptureFixture[str]
) -> None:
    made = ok(capsys, ops, "create", "f/ops/nightly", "--cron", "0 30 2 * * *",
              "--timezone", "Europe/Paris", "--target", "f/ops/hello",
              "--inputs", '{"name": "ann"}', "--catch-up", "skip")  # fmt: skip
    assert "state:        active" in made and "Europe/Paris" in made
    shown = json.loads(ok(capsys, ops, "show", "f/ops/nightly", "--json"))
    assert (shown["cron"], shown["target"], shown["inputs"]) == (
        "0 30 2 * * *", "f/ops/hello", {"name": "ann"}
    )  # fmt: skip
    assert (shown["catch_up"], shown["owner"], len(shown["next_fires"])) == ("skip", "ada", 5)
    text = ok(capsys, ops, "show", "f/ops/nightly")
    # Each next fire in the schedule's zone (02:30 in Paris) and in UTC.
    fires = [line for line in text.splitlines() if " 02:30:00 +0" in line]
    assert len(fires) == 5 and all(line.rstrip().endswith(":30:00Z") for line in fires)
    listed = ok(capsys, ops, "list", "--under", "f/ops/")
    assert "f/ops/nightly" in listed and "active" in listed
    nexts = json.loads(ok(capsys, ops, "next", "f/ops/nightly", "--count", "3", "--json"))
    assert len(nexts["next_fires"]) == 3
    assert ok(capsys, ops, "pause", "f/ops/nightly").startswith("paused f/ops/nightly")
    assert "none while paused" in ok(capsys, ops, "show", "f/ops/nightly")
    assert "is paused" in ok(capsys, ops, "next", "f/ops/nightly")
    assert "runs as ada" in ok(capsys, ops, "resume", "f/ops/nightly")
    assert ok(capsys, ops, "fires", "f/ops/nightly") == "f/ops/nightly has not fired yet\n"
    paused = ok(capsys, ops, "create", "f/ops/later", "--cron", "@daily",
                "--target", "f/ops/hello", "--paused", "--json")  # fmt: skip
    assert json.loads(paused)["enabled"] is False


def test_bad_schedules_and_callers_without_rights_are_refused(
    ops: str, capsys: pytest.CaptureFixture[str]
) -> None:
    create = ("schedules", "create", "f/ops/x", "--target", "f/ops/hello", "--db", ops)
    code, _, err = cli(capsys, *create, "--cron", "0 25 * * *")
    assert code == 2 and "out of range" in err
    code, _, err = cli(capsys, *create, "--cron", "@daily", "--timezone", "Mars/Olympus")
    assert code == 2 and "Mars/Olympus" in err
    with pytest.raises(SystemExit):
        cli(capsys, *create, "--cron", "@daily", "--inputs", "[1]")
    ok(capsys, ops, "create", "f/ops/nightly", "--cron", "@daily", "--target", "f/ops/hello")
    code, _, err = cli(capsys, *create, "--cron", "@daily", "--as", "bob")  # a viewer
    assert code == 2 and "bob may not" in err
    code, _, err = cli(capsys, "schedules", "pause", "f/ops/nightly", "--as", "bob", "--db", ops)
    assert code == 2 and "bob may not" in err
    shown = ok(capsys, ops, "show", "f/ops/nightly", "--as", "bob")  # a viewer reads it
    assert "state:        active" in shown
    code, _, err = cli(capsys, "schedules", "show", "f/ops/nothing", "--db", ops)
    assert code == 2 and "No schedule at f/ops/nothing" in err


def test_a_schedule_fires_and_its_history_is_shown(
    ops: str, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(capsys, ops, "create", "f/ops/often", "--cron", "* * * * * *", "--target", "f/ops/hello")
    with Engine(ops) as engine, engine.worker(concurrency=1, poll=0.1):
        deadline = time.monotonic() + 30
        while True:
            fires = json.loads(ok(capsys, ops, "fires", "f/ops/often", "--json"))
            if any(f["status"] == "started" for f in fires):
                break
            assert time.monotonic() < deadline, fires
            time.sleep(0.1)
        ok(capsys, ops, "pause", "f/ops/often")
    started = next(f for f in fires if f["status"] == "started")
    assert started["run_id"] and started["fire_at"].endswith("Z")
    table = ok(capsys, ops, "fires", "f/ops/often")
    assert table.startswith("FIRE AT") and started["run_id"] in table
