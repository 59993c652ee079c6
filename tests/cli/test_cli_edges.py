"""The CLI's edges: broken pipes, bad or missing stores, id prefixes, times, `-i`, `--version`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import DOUBLE, FAILING, SHIP, cli, environment, tidemill, write_flow

import tidemill as package
from tidemill.cli import main
from tidemill.cli._common import stamp
from tidemill.engine import Engine

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]

PAIR = {
    "name": "pair",
    "steps": [{"id": "ask", "approval": {"message": "Go?", "approvers": ["alice", "bob"]}}],
}

ORDER = {
    "name": "order",
    "inputs": {
        "type": "object",
        "properties": {"order_id": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["order_id"],
    },
    "steps": [{"id": "show", "identity": {}, "inputs": {"o": {"expr": "flow_input.order_id"}}}],
}


def wait_for_approval(engine: Engine, run_id: str) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pending = engine.approvals(run_id)
        if pending:
            return pending[0]
        time.sleep(0.02)
    raise AssertionError("no approval appeared")


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A store with a succeeded run, a failed one and one waiting for an approval."""
    directory = tmp_path_factory.mktemp("filled")
    db = f"sqlite:///{directory}/t.db"
    with Engine(db) as engine, engine.worker(poll=0.05):
        done = engine.submit(write_flow(directory, DOUBLE, "double.yaml"), {"x": 2, "tag": "t"})
        done.wait(timeout=30)
        failed = engine.submit(write_flow(directory, FAILING, "failing.yaml"))
        with pytest.raises(Exception, match="bad data"):
            failed.wait(timeout=30)
        waiting = engine.submit(write_flow(directory, SHIP, "ship.yaml"))
        approval = wait_for_approval(engine, waiting.id)
    return {
        "db": db,
        "dir": str(directory),
        "done": done.id,
        "failed": failed.id,
        "waiting": waiting.id,
        "approval": approval.id,
    }


# --- broken pipes ----------------------------------------------------------------------------


def into_a_closed_pipe(*argv: str) -> subprocess.CompletedProcess[str]:
    """Run `tidemill ARGV` with its stdout a pipe nobody reads any more (`| head -1` at its end)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run(
            tidemill(*argv),
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env=environment(),
            timeout=90,
            check=False,
        )
    finally:
        os.close(write)


PIPED = [
    ["runs", "list", "--db", "{db}"],
    ["runs", "show", "{done}", "--db", "{db}"],
    ["runs", "show", "{failed}", "--json", "--db", "{db}"],
    ["runs", "logs", "{failed}", "--db", "{db}"],
    ["runs", "why", "{waiting}", "--db", "{db}"],
    ["approvals", "list", "--all", "--db", "{db}"],
    ["db", "status", "--db", "{db}"],
    ["flow", "schema"],
    ["run", "{dir}/double.yaml", "-i", "x=1", "-i", "tag=t", "--db", "sqlite:///{dir}/other.db"],
]


@pytest.mark.parametrize("argv", PIPED, ids=" ".join)
def test_a_broken_pipe_ends_quietly_with_the_sigpipe_status(
    argv: list[str], filled: dict[str, str]
) -> None:
    done = into_a_closed_pipe(*(word.format(**filled) for word in argv))
    assert done.returncode == 128 + signal.SIGPIPE, done.stderr
    assert "Traceback" not in done.stderr
    assert "Exception ignored" not in done.stderr
    assert "BrokenPipeError" not in done.stderr


@pytest.mark.parametrize("argv", [["--help"], ["--version"], ["runs", "--help"]], ids=" ".join)
def test_help_into_a_broken_pipe_is_quiet(argv: list[str]) -> None:
    done = into_a_closed_pipe(*argv)  # argparse gives up writing help, and exits as usual
    assert (done.returncode, done.stderr) == (0, "")


# --- stores that cannot be opened ---------------------------------------------------------------


def test_a_directory_is_not_a_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flow = write_flow(tmp_path, DOUBLE)
    for argv in (["runs", "list"], ["db", "status"], ["run", flow, "-i", "x=1", "-i", "tag=t"]):
        code, out, err = cli(capsys, *argv, "--db", f"sqlite:///{tmp_path}")
        assert code == 2, err
        assert "is a directory, not a database file" in err
        assert "Hint: " in err and "Traceback" not in err
        assert out == ""


def test_a_file_that_is_not_sqlite_is_refused_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes, not a database\n" * 10)
    flow = write_flow(tmp_path, DOUBLE)
    for argv in (["runs", "list"], ["db", "upgrade"], ["run", flow, "-i", "x=1", "-i", "tag=t"]):
        code, _, err = cli(capsys, *argv, "--db", f"sqlite:///{notes}")
        assert code == 2, err
        assert f"{notes} is not a SQLite database" in err and "Hint: " in err
    assert notes.read_text() == "my notes, not a database\n" * 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["flow.yaml", "notes.txt"]


def test_a_path_that_cannot_be_opened_or_created(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flow = write_flow(tmp_path, DOUBLE)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    code, _, err = cli(
        capsys, "run", flow, "-i", "x=1", "-i", "tag=t", "--db", f"sqlite:///{blocker}/sub/x.db"
    )
    assert code == 2, err
    assert f"Cannot create the directory {blocker}/sub of the SQLite store" in err
    assert "Hint: " in err
    if Path("/proc/self").exists():  # Linux: a file system that takes no new files
        code, _, err = cli(
            capsys, "run", flow, "-i", "x=1", "-i", "tag=t", "--db", "sqlite:////proc/x.db"
        )
        assert code == 2, err
        assert "Cannot open the SQLite store /proc/x.db" in err and "Hint: " in err
        code, _, err = cli(capsys, "db", "upgrade", "--db", "sqlite:////proc/x.db")
        assert code == 2 and "Cannot open the SQLite store /proc/x.db" in err


WITHOUT_PSYCOPG = (
    "import sys; sys.modules['psycopg'] = None; "  # as after a plain `pip install tidemill`
    "from tidemill.cli import main; sys.exit(main(sys.argv[1:]))"
)


@pytest.mark.parametrize(
    "argv",
    [["runs", "list"], ["db", "status"], ["db", "upgrade"], ["worker"], ["run", "{flow}"]],
    ids=" ".join,
)
def test_postgres_without_the_extra_says_to_install_it(argv: list[str], tmp_path: Path) -> None:
    flow = write_flow(tmp_path, SHIP)
    words = [word.format(flow=flow) for word in argv]
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT_PSYCOPG,
            *words,
            "--db",
            "postgresql://nobody@127.0.0.1:9/x",
        ],
        capture_output=True,
        text=True,
        env=environment(),
        timeout=90,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "needs the 'psycopg' package" in done.stderr
    assert "pip install 'tidemill[postgres]'" in done.stderr


# --- read-only commands on a store that does not exist -----------------------------------------

READ_ONLY = [
    ["runs", "list"],
    ["runs", "show", "01a2"],
    ["runs", "why", "01a2"],
    ["runs", "logs", "01a2"],
    ["runs", "usage", "01a2", "--json"],
    ["runs", "cancel", "01a2"],
    ["runs", "retry", "01a2"],
    ["approvals", "list"],
    ["approvals", "approve", "01a2"],
    ["approvals", "extend", "01a2", "--stop"],
    ["db", "status"],
]


@pytest.mark.parametrize("argv", READ_ONLY, ids=" ".join)
def test_commands_on_what_is_stored_create_no_store(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    code, out, err = cli(capsys, *argv, "--db", f"sqlite:///{missing}")
    assert code == 2
    assert f"No store at {missing}" in err
    assert "from --db" in err and "Hint: " in err
    assert out == ""
    assert list(tmp_path.iterdir()) == []


def test_the_default_store_is_named_with_how_it_was_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TIDEMILL_DB", raising=False)
    code, _, err = cli(capsys, "runs", "list")
    assert code == 2
    assert f"No store at {tmp_path}/.tidemill/tidemill.db" in err
    assert "the default" in err and "$TIDEMILL_DB" in err and "--db" in err
    monkeypatch.setenv("TIDEMILL_DB", f"sqlite:///{tmp_path}/env.db")
    code, _, err = cli(capsys, "approvals", "list")
    assert code == 2
    assert f"No store at {tmp_path}/env.db (from $TIDEMILL_DB)" in err
    assert list(tmp_path.iterdir()) == []


def test_a_relative_sqlite_path_is_explained_with_its_absolute_form(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "runs", "list", "--db", "sqlite:///tmp/x.db")
    assert code == 2
    assert f"No store at {tmp_path}/tmp/x.db" in err
    assert "relative" in err and "sqlite:////tmp/x.db" in err
    assert list(tmp_path.iterdir()) == []


def test_commands_that_add_work_still_create_the_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = tmp_path / "a" / "b" / "x.db"
    flow = write_flow(tmp_path, DOUBLE)
    code, _, err = cli(
        capsys, "run", flow, "-i", "x=1", "-i", "tag=t", "--db", f"sqlite:///{first}"
    )
    assert code == 0, err
    second = tmp_path / "c" / "y.db"
    assert cli(capsys, "db", "upgrade", "--db", f"sqlite:///{second}")[0] == 0
    assert first.is_file() and second.is_file()
    code, out, _ = cli(capsys, "runs", "list", "--db", f"sqlite:///{first}", "--json")
    assert code == 0 and len(json.loads(out)) == 1


def test_db_status_on_an_empty_file_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.db"
    empty.touch()
    code, out, _ = cli(capsys, "db", "status", "--db", f"sqlite:///{empty}")
    assert code == 0 and "schema version  0" in out
    import sqlite3

    with sqlite3.connect(empty) as lite:
        assert lite.execute("SELECT name FROM sqlite_master").fetchall() == []


# --- approvals list --all: approvers and the decider ------------------------------------------


def test_approvals_list_shows_approvers_and_the_decider_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    with Engine(db) as engine, engine.worker(poll=0.05):
        run = engine.submit(write_flow(tmp_path, PAIR))
        approval = wait_for_approval(engine, run.id)
        code, out, _ = cli(capsys, "approvals", "list", "--db", db)
        header, row = out.splitlines()
        assert code == 0 and "alice,bob" in row
        assert "APPROVERS" in header and "DECIDED BY" not in header  # only with --all
        assert cli(capsys, "approvals", "approve", approval.id, "--as", "bob", "--db", db)[0] == 0
        run.wait(timeout=30)
    code, out, _ = cli(capsys, "approvals", "list", "--all", "--db", db)
    assert code == 0
    header, row = out.splitlines()
    columns = header.split("  ")
    assert "APPROVERS" in columns and "DECIDED BY" in columns
    approvers_at, decider_at = header.index("APPROVERS"), header.index("DECIDED BY")
    assert row[approvers_at:].startswith("alice,bob")
    assert row[decider_at:].startswith("bob ")
    _, out, _ = cli(capsys, "approvals", "list", "--all", "--db", db, "--json")
    [decided] = json.loads(out)
    assert decided["approvers"] == ["alice", "bob"] and decided["decided_by"] == "bob"


# --- --version ------------------------------------------------------------------------------


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"tidemill {package.__version__}\n"


# --- ids by prefix ---------------------------------------------------------------------------


def common_start(ids: list[str]) -> str:
    """The longest start the ids share."""
    first, last = min(ids), max(ids)
    size = 0
    while size < len(first) and first[size] == last[size]:
        size += 1
    return first[:size]


def unique_prefix(target: str, others: list[str]) -> str:
    for size in range(1, len(target)):
        if not any(other.startswith(target[:size]) for other in others if other != target):
            return target[:size]
    raise AssertionError("no unique prefix")


@pytest.mark.parametrize("action", ["show", "why", "logs", "usage"])
def test_a_run_is_found_by_a_unique_prefix(
    action: str, filled: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [filled["done"], filled["failed"], filled["waiting"]]
    prefix = unique_prefix(filled["failed"], runs)
    code, out, err = cli(capsys, "runs", action, prefix, "--db", filled["db"])
    assert code == 0, err
    assert filled["failed"] in out + err or "about to fail" in out
    code, again, err = cli(capsys, "runs", action, prefix.upper(), "--db", filled["db"])
    assert (code, again) == (0, out), err


def test_an_ambiguous_prefix_lists_the_candidates(
    filled: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [filled["done"], filled["failed"], filled["waiting"]]
    common = common_start(runs)
    assert common  # ids are ordered by time: runs made a moment apart share their start
    code, out, err = cli(capsys, "runs", "show", common, "--db", filled["db"])
    assert code == 2 and out == ""
    assert f"tidemill runs: error: {common} is the start of 3 runs" in err
    for run_id in runs:
        assert run_id in err
    assert "Hint: " in err and "more of the id" in err


@pytest.mark.parametrize("given", ["ffff", "%", "_", "' OR 1=1 --", "", "0" * 36])
def test_an_unknown_or_hostile_prefix_says_so(
    given: str, filled: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "runs", "show", given, "--db", filled["db"])
    assert code == 2 and out == ""
    assert f"No run {given} in this store" in err and "tidemill runs list" in err


def test_approvals_are_found_by_a_unique_prefix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    with Engine(db) as engine, engine.worker(poll=0.05):
        first = engine.submit(write_flow(tmp_path, PAIR))
        second = engine.submit(write_flow(tmp_path, PAIR))
        one = wait_for_approval(engine, first.id)
        two = wait_for_approval(engine, second.id)
        run_prefix = unique_prefix(first.id, [first.id, second.id])
        code, out, _ = cli(capsys, "approvals", "list", "--run", run_prefix, "--db", db, "--json")
        assert code == 0 and [a["id"] for a in json.loads(out)] == [one.id]
        common = common_start([one.id, two.id])
        code, _, err = cli(capsys, "approvals", "approve", common, "--as", "bob", "--db", db)
        assert code == 2 and f"{common} is the start of 2 approvals" in err
        assert one.id in err and two.id in err and "tidemill approvals list" in err
        prefix = unique_prefix(one.id, [one.id, two.id])
        code, out, err = cli(capsys, "approvals", "approve", prefix, "--as", "bob", "--db", db)
        assert code == 0, err
        assert out.startswith(f"approval {one.id} approved by bob")
        code, _, err = cli(capsys, "approvals", "reject", "ffff", "--db", db)
        assert code == 2 and "No approval ffff in this store" in err
        first.wait(timeout=30)


# --- times with their zone -------------------------------------------------------------------


@pytest.fixture
def in_india(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Local time is UTC+05:30 (a POSIX zone: no tz database needed)."""
    monkeypatch.setenv("TZ", "IST-05:30")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_times_carry_their_offset(
    in_india: None, filled: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert stamp(0.0) == "1970-01-01 05:30:00 +05:30"
    code, out, _ = cli(capsys, "runs", "show", filled["done"], "--db", filled["db"])
    assert code == 0
    created = next(line for line in out.splitlines() if line.startswith("created"))
    assert created.endswith(" +05:30")
    started = [line for line in out.splitlines() if "succeeded" in line and "double" in line]
    assert started and " +05:30 " in started[0]
    code, out, _ = cli(capsys, "runs", "list", "--db", filled["db"])
    assert all(" +05:30 " in line for line in out.splitlines()[1:])
    code, out, _ = cli(capsys, "approvals", "list", "--db", filled["db"])
    assert " +05:30 " in out.splitlines()[1]


# --- -i and strings --------------------------------------------------------------------------


def test_a_number_given_for_a_string_input_hints_at_quoting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    flow = write_flow(tmp_path, ORDER)
    code, out, err = cli(capsys, "run", flow, "-i", "order_id=1001", "--db", db)
    assert code == 2 and out == ""
    assert "$.order_id: 1001 is not of type 'string'" in err
    assert "order_id=1001 was read as JSON" in err
    assert """-i order_id='"1001"'""" in err
    code, out, err = cli(capsys, "run", flow, "-i", 'order_id="1001"', "--db", db)
    assert code == 0, err
    assert json.loads(out) == {"o": "1001"}


def test_other_input_errors_keep_the_schema_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    flow = write_flow(tmp_path, ORDER)
    code, _, err = cli(capsys, "run", flow, "-i", "order_id=A1", "-i", "n=two", "--db", db)
    assert code == 2
    assert "$.n: 'two' is not of type 'integer'" in err
    assert "read as JSON" not in err and "inputs` JSON Schema" in err


# --- make says what it installs --------------------------------------------------------------


@pytest.mark.parametrize("target", ["demo", "test"])
def test_make_says_what_it_installs_before_pip(target: str) -> None:
    done = subprocess.run(
        ["make", "--dry-run", "--always-make", target],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0 and "No rule" in done.stderr:
        pytest.skip(done.stderr)
    lines = done.stdout.splitlines()
    pip = next(i for i, line in enumerate(lines) if "-m pip install" in line)
    said = [line for line in lines[:pip] if line.startswith("echo")]
    assert any("Installing" in line and "[dev]" in line for line in said), done.stdout
