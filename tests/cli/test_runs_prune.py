"""`tidemill runs prune`, `tidemill worker --keep-runs` and `tidemill server --keep-runs`.

Runs are made old by moving their times back in the store. `runs prune` runs
in this process, on SQLite and PostgreSQL; the worker runs as a process of its
own; the server's worker in a thread.
"""

from __future__ import annotations

import asyncio
import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from cli_support import cli, running
from tests.server.conftest import ServerThread

from tidemill.cli import main
from tidemill.engine import AsyncEngine, Engine
from tidemill.errors import InvalidOption
from tidemill.flows import Flow
from tidemill.server import ServerConfig, create_app

pytestmark = pytest.mark.timeout(90)

DAY = 86400.0

ECHO = Flow.model_validate({"name": "echo", "steps": [{"id": "echo", "identity": {}}]})

LOOP = Flow.model_validate(
    {
        "name": "loop",
        "steps": [
            {"id": "each", "for_each": {"items": [1, 2, 3], "steps": [
                {"id": "sq", "identity": {}, "inputs": {"v": {"expr": "iter.value"}}}]}},
        ],
    }
)  # fmt: skip

ASK = Flow.model_validate(
    {"name": "ask", "steps": [{"id": "ok", "approval": {"message": "Go on?"}}]}
)

SHOP = {"workspace": "shop", "path": "f/sales/report"}


@pytest.fixture(autouse=True)
def _local_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    for name in ("TIDEMILL_DB", "TIDEMILL_MASTER_KEY", "TIDEMILL_MASTER_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def store(store_url: str) -> str:
    """A store, upgraded (PostgreSQL stores are not on first use), on each backend."""
    with Engine(store_url, migrate=True):
        pass
    return store_url


def ended(db: str, flow: Flow, count: int = 1, source: dict[str, Any] | None = None) -> list[str]:
    """Run `flow` `count` times to its end; the runs' ids."""
    with Engine(db, migrate=True) as engine, engine.worker(concurrency=2, poll=0.05):
        runs = [engine.submit(flow, source=source) for _ in range(count)]
        for run in runs:
            run.wait(timeout=60)
    return [run.id for run in runs]


def waiting(db: str) -> str:
    """A run waiting for a person's decision."""
    with Engine(db, migrate=True) as engine, engine.worker(poll=0.05):
        run = engine.submit(ASK)
        deadline = time.monotonic() + 30
        while run.status != "waiting":
            assert time.monotonic() < deadline, run.status
            time.sleep(0.02)
    return run.id


def age(db: str, run_ids: list[str], days: float) -> None:
    """Move the times of these top-level runs, and of the runs under them, `days` back."""
    shift = days * DAY

    async def main() -> None:
        async with AsyncEngine(db) as engine:
            await engine.store.transact(
                lambda tx: [
                    tx.execute(
                        "UPDATE tm_runs SET created_at = created_at - ?, "
                        "finished_at = finished_at - ? WHERE root_id = ?",
                        (shift, shift, run_id),
                    )
                    for run_id in run_ids
                ]
            )

    asyncio.run(main())


def stored(db: str) -> int:
    """The runs in the store, the runs under others included."""

    async def main() -> int:
        async with AsyncEngine(db) as engine:
            row = await engine.store.transact(lambda tx: tx.one("SELECT COUNT(*) FROM tm_runs"))
        assert row is not None
        return int(row[0])

    return asyncio.run(main())


def top_level(db: str) -> set[str]:
    with Engine(db) as engine:
        return {info.id for info in engine.runs(limit=1000)}


# --- tidemill runs prune -------------------------------------------------------------------


def test_old_ended_runs_are_pruned_and_newer_or_unfinished_ones_kept(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    old = ended(store, LOOP, 2) + ended(store, ECHO)
    new = ended(store, ECHO)
    asking = waiting(store)
    age(store, [*old, asking], 40)
    assert stored(store) == 2 * 4 + 1 + 1 + 1  # a loop run has a child per item
    code, out, err = cli(capsys, "runs", "prune", "--older-than", "30d", "--db", store)
    assert code == 0, err
    assert top_level(store) == {*new, asking}
    assert stored(store) == 2  # and none of the runs under them
    with Engine(store) as engine:
        assert engine.run(asking).status == "waiting"
    lines = out.splitlines()
    assert lines[0].startswith("pruned 3 runs that ended before ")
    assert lines[0].endswith("(each with the runs under it)")
    rows = dict(line.split() for line in lines[2:])
    assert lines[1].split() == ["TABLE", "ROWS"]
    assert rows["tm_runs"] == "9" and rows["tm_jobs"] == str(2 * 4 + 1)
    assert err == "pruned 3 runs...\n"
    code, out, err = cli(capsys, "runs", "prune", "--older-than", "30d", "--db", store)
    assert (code, out.split(" that ")[0], err) == (0, "pruned 0 runs", "")


def test_pruning_goes_a_batch_at_a_time_with_progress_on_stderr(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    old = ended(store, ECHO, 5)
    age(store, old, 2)
    argv = ("runs", "prune", "--older-than", "1d", "--batch", "2", "--json", "--db", store)
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    assert err.splitlines() == ["pruned 2 runs...", "pruned 4 runs...", "pruned 5 runs..."]
    pruned = json.loads(out)
    assert (pruned["runs"], pruned["dry_run"], pruned["workspace"]) == (5, False, None)
    assert pruned["rows"]["tm_runs"] == 5 and pruned["rows"]["tm_definitions"] == 1
    assert pruned["before"] < time.time() - 0.99 * DAY
    assert top_level(store) == set()


def test_a_dry_run_deletes_nothing_and_says_how_many_would_go(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    old = ended(store, ECHO, 2)
    new = ended(store, ECHO)
    age(store, old, 10)
    argv = ("runs", "prune", "--older-than", "7d", "--dry-run", "--db", store)
    code, out, err = cli(capsys, *argv)
    assert code == 0, err
    assert out.startswith("would prune 2 runs that ended before ")
    assert out.rstrip().endswith("(dry run: nothing was deleted)")
    assert "TABLE" not in out and err == ""
    assert top_level(store) == {*old, *new}
    code, out, _ = cli(capsys, *argv, "--json")
    assert json.loads(out)["runs"] == 2 and json.loads(out)["rows"] == {}
    assert json.loads(out)["dry_run"] is True
    assert top_level(store) == {*old, *new}


def test_workspace_keeps_to_the_runs_started_from_its_items(
    store: str, capsys: pytest.CaptureFixture[str]
) -> None:
    shop = ended(store, ECHO, 2, source=SHOP)
    other = ended(store, ECHO, source={**SHOP, "workspace": "other"})
    plain = ended(store, ECHO)
    age(store, [*shop, *other, *plain], 3)
    argv = ("runs", "prune", "--older-than", "1d", "--db", store)
    code, out, _ = cli(capsys, *argv, "--workspace", "nobody")
    assert code == 0 and out.startswith("pruned 0 runs of workspace 'nobody' that ended")
    code, out, _ = cli(capsys, *argv, "--workspace", "shop", "--dry-run")
    assert out.startswith("would prune 2 runs of workspace 'shop'")
    code, out, err = cli(capsys, *argv, "--workspace", "shop")
    assert code == 0, err
    assert out.startswith("pruned 2 runs of workspace 'shop' that ended")
    assert top_level(store) == {*other, *plain}
    code, out, _ = cli(capsys, *argv, "--json")
    assert json.loads(out)["runs"] == 2
    assert top_level(store) == set()


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["--older-than", "0"], "'0' is not a positive duration"),
        (["--older-than=-1d"], "'-1d' is not a positive duration"),
        (["--older-than", "-1d"], "expected one argument"),
        (["--older-than", "soon"], "'soon' is not a positive duration: write 30d, 12h"),
        (["--older-than", "1e999"], "not a positive duration"),
        (["--older-than", "9" * 400 + "d"], "not a positive duration"),
        (["--older-than", "nan"], "not a positive duration"),
        (["--older-than", "3 weeks"], "not a positive duration"),
        ([], "the following arguments are required: --older-than"),
        (["--older-than", "1d", "--batch", "0"], "at least 1"),
    ],
)
def test_bad_durations_and_options_are_refused(
    argv: list[str], words: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    with pytest.raises(SystemExit) as exited:
        main(["runs", "prune", *argv, "--db", db])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "tidemill runs prune: error:" in err
    assert not (tmp_path / "t.db").exists()  # refused before the store is opened


def test_no_store_is_made_by_pruning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path}/missing.db"
    code, _, err = cli(capsys, "runs", "prune", "--older-than", "30d", "--db", db)
    assert code == 2 and "No store at" in err
    assert not (tmp_path / "missing.db").exists()


# --- tidemill worker --keep-runs -----------------------------------------------------------


@pytest.mark.slow
def test_a_worker_with_keep_runs_prunes_old_ended_runs(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    old = ended(db, ECHO)
    new = ended(db, ECHO)
    age(db, old, 2)
    with running("worker", "--keep-runs", "1d", "--poll", "0.05", "--db", db) as (process, lines):
        lines.wait_for(r"pruning the runs that ended more than 1d ago, every minute")
        lines.wait_for(r"retention: pruned 1 run\(s\)")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
    assert top_level(db) == set(new)


@pytest.mark.parametrize("value", ["0", "soon", "-5m"])
def test_worker_keep_runs_takes_a_positive_duration(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["worker", f"--keep-runs={value}"])
    assert exited.value.code == 2
    assert f"argument --keep-runs: {value!r} is not a positive duration" in capsys.readouterr().err


# --- tidemill server --keep-runs -----------------------------------------------------------


def test_server_keep_runs_with_no_worker_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    served: list[ServerConfig] = []

    async def serve(config: ServerConfig, **_: Any) -> None:
        served.append(config)

    monkeypatch.setattr("tidemill.server.serve", serve)
    db = f"sqlite:///{tmp_path}/t.db"
    code, _, err = cli(capsys, "server", "--no-worker", "--keep-runs", "30d", "--db", db)
    assert code == 2 and served == []
    assert "--keep-runs prunes runs from the server's worker, and --no-worker runs none" in err
    assert "tidemill worker" in err  # the hint: where to give it instead
    assert cli(capsys, "server", "--keep-runs", "30d", "--db", db)[0] == 0
    assert [config.keep_runs for config in served] == [30 * DAY]
    assert cli(capsys, "server", "--no-worker", "--db", db)[0] == 0
    assert served[-1].keep_runs is None
    with pytest.raises(SystemExit):
        main(["server", "--keep-runs", "0", "--db", db])
    assert "'0' is not a positive duration" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"keep_runs": 0}, "positive number of seconds"),
        ({"keep_runs": -1.0}, "positive number of seconds"),
        ({"keep_runs": float("nan")}, "positive number of seconds"),
        ({"keep_runs": float("inf")}, "positive number of seconds"),
        ({"keep_runs": "30d"}, "must be a number of seconds"),
        ({"keep_runs": True}, "must be a number of seconds"),
        ({"keep_runs": DAY, "worker": False}, "worker=False runs none"),
    ],
)
def test_server_config_refuses_a_keep_runs_it_cannot_honour(
    options: dict[str, Any], words: str
) -> None:
    with pytest.raises(InvalidOption, match=words):
        ServerConfig(**options)


def test_the_servers_worker_prunes_with_keep_runs(tmp_path: Path) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    old = ended(db, ECHO)
    new = ended(db, ECHO)
    age(db, old, 2)
    thread = ServerThread(create_app(ServerConfig(db=db, keep_runs=DAY, ui=False)))
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while old[0] in top_level(db):
            assert time.monotonic() < deadline, "the server's worker pruned nothing"
            time.sleep(0.05)
    finally:
        thread.stop()
    assert top_level(db) == set(new)
