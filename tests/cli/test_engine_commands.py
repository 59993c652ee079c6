"""`tidemill run`, `runs`, `approvals`, `db` and `flow`, called in this process."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_support import DOUBLE, FAILING, SHIP, cli, gated, write_flow

from tidemill.cli import main
from tidemill.engine import Engine

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/t.db"


@pytest.fixture
def flows(tmp_path: Path) -> Path:
    directory = tmp_path / "flows"
    directory.mkdir()
    return directory


def wait_for_approval(engine: Engine, run_id: str) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pending = engine.approvals(run_id)
        if pending:
            return pending[0]
        time.sleep(0.02)
    raise AssertionError("no approval appeared")


@pytest.fixture
def engine(db: str) -> Iterator[Engine]:
    with Engine(db) as engine:
        yield engine


# --- -i and other options ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["run", "f.yaml", "-i", "oops"], "expected KEY=VALUE"),
        (["run", "f.yaml", "-i", "=3"], "expected KEY=VALUE"),
        (["run", "f.yaml", "--concurrency", "0"], "at least 1"),
        (["worker", "--lease", "-1"], "positive number of seconds"),
        (["runs"], "required: ACTION"),
        (["runs", "list", "--status", "lost"], "invalid choice"),
    ],
)
def test_bad_options_exit_2(
    argv: list[str], words: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    assert words in capsys.readouterr().err


def test_help_lists_the_engine_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in ("run", "worker", "runs", "approvals", "flow", "db"):
        assert f"    {command} " in out or f"    {command}\n" in out


# --- tidemill run ---------------------------------------------------------------------------


def test_run_prints_progress_on_stderr_and_the_result_on_stdout(
    db: str, flows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_flow(flows, DOUBLE)
    input_file = tmp_path / "in.json"
    input_file.write_text('{"x": 1, "tag": "from-file"}')
    code, out, err = cli(
        capsys, "run", path, "--db", db, "--input-file", str(input_file), "-i", "x=21",
        "-i", "tag=007",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out) == {"value": 42, "tag": "007"}
    assert "started    double" in err
    assert "succeeded  double" in err
    assert "succeeded  show" in err
    assert "run " in err and " succeeded in " in err
    assert "{" not in err


def test_run_reads_values_as_json_else_as_strings(
    db: str, flows: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    echo = {"steps": [{"id": "echo", "identity": {}, "inputs": {"got": {"expr": "flow_input"}}}]}
    path = write_flow(flows, echo)
    code, out, err = cli(
        capsys, "run", path, "--db", db, "-i", "n=3", "-i", "name=bob", "-i", 'tags=["a"]',
        "-i", "flag=true", "-i", "text=a=b", "-i", "none=null",
    )  # fmt: skip
    assert code == 0, err
    assert json.loads(out) == {
        "got": {"n": 3, "name": "bob", "tags": ["a"], "flag": True, "text": "a=b", "none": None}
    }


def test_a_failing_run_exits_1_with_its_error_logs_and_hints(
    db: str, flows: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "run", write_flow(flows, FAILING), "--db", db)
    assert code == 1
    assert out == ""
    assert "failed     boom" in err and "ValueError: bad data" in err
    assert "failed at step 'boom': ValueError: bad data" in err
    assert "stdout | about to fail" in err
    assert "never" not in err
    assert "tidemill runs logs " in err and "tidemill runs retry " in err
    assert f"--db {db}" in err


@pytest.mark.parametrize(
    ("body", "argv", "words"),
    [
        ({"steps": [{"id": "a", "needs": ["nope"], "identity": {}}]}, [], "not valid"),
        (DOUBLE, ["-i", "x=three"], "The input of flow 'double' is not valid"),
        (DOUBLE, [], "is not valid"),
    ],
)
def test_a_bad_flow_or_input_exits_2_before_anything_runs(
    body: dict[str, Any],
    argv: list[str],
    words: str,
    db: str,
    flows: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = cli(capsys, "run", write_flow(flows, body), "--db", db, *argv)
    assert code == 2
    assert err.startswith("tidemill run: error: ")
    assert words in err
    assert out == ""


def test_missing_flow_file_and_input_file(
    db: str, flows: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(capsys, "run", str(flows / "nope.yaml"), "--db", db)
    assert code == 2 and "No flow file" in err
    path = write_flow(flows, DOUBLE)
    code, _, err = cli(capsys, "run", path, "--db", db, "--input-file", str(flows / "no.json"))
    assert code == 2 and "Cannot read the input file" in err
    (flows / "list.json").write_text("[1]")
    code, _, err = cli(capsys, "run", path, "--db", db, "--input-file", str(flows / "list.json"))
    assert code == 2 and "not a JSON object" in err


def test_the_store_comes_from_the_environment(
    db: str, flows: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TIDEMILL_DB", db)
    code, out, err = cli(capsys, "run", write_flow(flows, SHIP), "--detach")
    assert code == 0
    run_id = out.strip()
    assert 'tidemill worker --db "$TIDEMILL_DB"' in err
    with Engine(db) as engine:
        assert engine.run(run_id).status == "queued"


def test_nested_steps_are_shown_with_their_path(
    db: str, flows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "gate").write_text("open")
    code, out, err = cli(capsys, "run", write_flow(flows, gated(tmp_path / "gate")), "--db", db)
    assert code == 0, err
    assert json.loads(out) == "open"
    assert "succeeded  each[0]/inner" in err
    assert "succeeded  each[1]/inner" in err
    assert "succeeded  each " in err


def test_a_failure_deep_in_loops_is_named_by_its_whole_path(
    db: str, flows: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = "def main(v):\n    if v == 3:\n        raise KeyError(v)\n    return v\n"
    x = {"id": "x", "script": script, "inputs": {"v": {"expr": "iter.value"}}}
    inner = {"id": "inner", "for_each": {"items": {"expr": "iter.value"}, "steps": [x]}}
    nested = {"steps": [{"id": "outer", "for_each": {"items": [[1], [2, 3]], "steps": [inner]}}]}
    code, _, err = cli(capsys, "run", write_flow(flows, nested), "--db", db)
    assert code == 1
    assert "failed     outer[1]/inner[1]/x" in err
    assert "failed at step 'outer[1]/inner[1]/x': KeyError: 3" in err
    run_id = json.loads(cli(capsys, "runs", "list", "--db", db, "--json")[1])[0]["id"]
    out = cli(capsys, "runs", "show", run_id, "--db", db)[1]
    assert "error     KeyError: 3  (step outer[1]/inner[1]/x)" in out


# --- tidemill runs ---------------------------------------------------------------------------


def test_runs_list_show_logs_retry(
    db: str, flows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = tmp_path / "gate"
    path = write_flow(flows, gated(gate))
    assert cli(capsys, "run", path, "--db", db)[0] == 1
    code, out, _ = cli(capsys, "runs", "list", "--db", db, "--json")
    [listed] = json.loads(out)
    run_id = listed["id"]
    assert (listed["status"], listed["flow"], listed["done"]) == ("failed", "gated", True)
    assert listed["error"]["step"] == "guard"

    code, out, _ = cli(capsys, "runs", "list", "--db", db)
    assert code == 0
    assert out.splitlines()[0].split() == ["ID", "FLOW", "STATUS", "CREATED", "TOOK", "ERROR"]
    assert run_id in out and "RuntimeError: gate closed" in out
    assert cli(capsys, "runs", "list", "--db", db, "--status", "succeeded")[2] == "no runs\n"

    code, out, _ = cli(capsys, "runs", "show", run_id, "--db", db)
    assert code == 0
    assert "status    failed" in out
    assert "error     RuntimeError: gate closed  (step guard)" in out
    assert "each[1]/inner" in out
    assert "Traceback" in out

    code, out, _ = cli(capsys, "runs", "show", run_id, "--db", db, "--json")
    shown = json.loads(out)
    assert [s["path"] for s in shown["steps"]] == [
        "each",
        "each[0]/inner",
        "each[1]/inner",
        "guard",
    ]

    code, out, _ = cli(capsys, "runs", "logs", run_id, "--db", db, "--step", "guard")
    assert out == f"==> guard (stdout) <==\nchecking {gate}\n"
    code, _, err = cli(capsys, "runs", "logs", run_id, "--db", db, "--step", "gaurd")
    assert code == 2 and "has no step 'gaurd'" in err and "guard" in err

    gate.write_text("open")
    code, out, err = cli(capsys, "runs", "retry", run_id, "--db", db, "--wait")
    assert code == 0, err
    assert json.loads(out) == "open"
    assert "succeeded  guard" in err and "(attempt 2)" in err
    assert "each[0]/inner" not in err  # finished steps are kept, not shown again

    code, out, _ = cli(capsys, "runs", "logs", run_id, "--db", db)
    assert "==> guard (stdout, attempt 2) <==" in out
    assert out.count("checking") == 2


def test_runs_retry_without_wait_and_cancel(
    db: str, flows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "run", write_flow(flows, FAILING), "--db", db)[0] == 1
    [run] = json.loads(cli(capsys, "runs", "list", "--db", db, "--json")[1])
    code, out, err = cli(capsys, "runs", "retry", run["id"], "--db", db)
    assert code == 0
    assert out.startswith(f"run {run['id']} running again")
    assert "tidemill worker --db" in err
    code, out, _ = cli(capsys, "runs", "cancel", run["id"], "--db", db)
    assert (code, out) == (0, f"run {run['id']} cancelled\n")
    code, _, err = cli(capsys, "runs", "cancel", run["id"], "--db", db)
    assert code == 2 and "nothing to cancel" in err


def test_an_unknown_run_is_one_line_with_a_hint(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(capsys, "db", "upgrade", "--db", db)[0] == 0  # a store with no runs
    for action in ("show", "logs", "cancel", "retry"):
        code, _, err = cli(capsys, "runs", action, "nope", "--db", db)
        assert code == 2
        assert err == (
            "tidemill runs: error: No run nope in this store. "
            "Hint: List runs with `tidemill runs list`.\n"
        )


# --- tidemill approvals -----------------------------------------------------------------------


def test_approvals_list_approve_reject(
    db: str, flows: Path, engine: Engine, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_flow(flows, SHIP)
    first = cli(capsys, "run", path, "--db", db, "--detach")[1].strip()
    second = cli(capsys, "run", path, "--db", db, "--detach")[1].strip()
    with engine.worker(poll=0.1):
        one = wait_for_approval(engine, first)
        two = wait_for_approval(engine, second)
        code, out, _ = cli(capsys, "approvals", "list", "--db", db)
        assert code == 0
        assert out.splitlines()[0].split()[:4] == ["ID", "RUN", "STEP", "STATUS"]
        assert one.id in out and two.id in out and "Ship it?" in out and "alice" in out
        code, out, _ = cli(capsys, "approvals", "list", "--db", db, "--run", first, "--json")
        assert [a["id"] for a in json.loads(out)] == [one.id]

        code, out, err = cli(capsys, "approvals", "approve", one.id, "--db", db, "--as", "bob")
        assert code == 2
        assert "bob may not decide approval" in err and "--as NAME" in err
        code, out, _ = cli(
            capsys, "approvals", "approve", one.id, "--db", db, "--as", "alice", "--comment", "go"
        )
        assert code == 0
        assert out == f"approval {one.id} approved by alice (run {first}, step ask)\n"
        assert engine.run(first).wait(timeout=30) == {"by": "alice"}

        code, out, _ = cli(capsys, "approvals", "reject", two.id, "--db", db, "--as", "alice")
        assert code == 0 and "rejected by alice" in out
        code, _, err = cli(capsys, "approvals", "reject", two.id, "--db", db, "--as", "alice")
        assert code == 2 and "already rejected" in err
    assert engine.run(second).status == "failed"
    assert cli(capsys, "approvals", "list", "--db", db)[2] == "no pending approvals\n"
    code, out, _ = cli(capsys, "approvals", "list", "--db", db, "--all")
    assert "approved" in out and "rejected" in out
    code, _, err = cli(capsys, "approvals", "approve", "nope", "--db", db)
    assert code == 2 and "No approval nope" in err
    code, _, err = cli(capsys, "approvals", "list", "--db", db, "--run", "nope")
    assert code == 2 and "No run nope" in err


# --- tidemill db ----------------------------------------------------------------------------


def test_db_upgrade_and_status(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from tidemill.store import current_version

    latest = current_version("postgres" if store_url.startswith("postgres") else "sqlite")
    if store_url.startswith("sqlite"):  # `db status` creates no store: an empty file is one
        Path(store_url.removeprefix("sqlite:///")).touch()
    code, out, _ = cli(capsys, "db", "status", "--db", store_url)
    assert code == 0
    assert "schema version  0" in out and "pending         0001_" in out
    assert "tidemill db upgrade --db" in out
    if store_url.startswith("postgres"):  # PostgreSQL stores are not upgraded on first use
        code, _, err = cli(capsys, "runs", "list", "--db", store_url)
        assert code == 2 and "tidemill db upgrade" in err
    code, out, _ = cli(capsys, "db", "upgrade", "--db", store_url)
    assert code == 0
    assert "applied  0001_" in out and f"now at schema version {latest}" in out
    code, out, _ = cli(capsys, "db", "upgrade", "--db", store_url)
    assert out.endswith(f"up to date (schema version {latest})\n")
    code, out, _ = cli(capsys, "db", "status", "--db", store_url)
    assert f"schema version  {latest}" in out and "up to date" in out
    assert cli(capsys, "runs", "list", "--db", store_url)[0] == 0


def test_a_bad_store_url_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "db", "status", "--db", "mysql://x")
    assert code == 2 and "Unknown store URL" in err


# --- tidemill flow --------------------------------------------------------------------------


def test_flow_validate(flows: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_flow(flows, gated(tmp_path / "gate"))
    code, out, _ = cli(capsys, "flow", "validate", path)
    assert (code, out) == (0, f"OK: {path}: flow 'gated' has 2 steps, 3 in all\n")
    bad = write_flow(flows, {"steps": [{"id": "a", "needs": ["nope"], "identity": {}}]}, "b.yaml")
    code, out, err = cli(capsys, "flow", "validate", bad)
    assert code == 2 and out == ""
    assert "not valid (1 problem)" in err and "nope" in err


def test_flow_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "flow", "schema")
    assert code == 0
    schema = json.loads(out)
    assert "steps" in json.dumps(schema)
