"""`tidemill server` in a process of its own, and `tidemill ws tokens|password` beside it."""

from __future__ import annotations

import io
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from cli_support import Lines, cli, environment, tidemill

pytestmark = [pytest.mark.timeout(90), pytest.mark.slow]


@pytest.fixture(autouse=True)
def _local_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    for name in ("TIDEMILL_DB", "TIDEMILL_MASTER_KEY", "TIDEMILL_MASTER_KEY_FILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, str, Lines, subprocess.Popen[str]]]:
    db = f"sqlite:///{tmp_path}/t.db"
    env = {**environment(), "TIDEMILL_USER": "ada"}
    process = subprocess.Popen(
        tidemill("server", "--db", db, "--port", "0"),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )  # fmt: skip
    lines = Lines(process.stdout)
    try:
        url = lines.wait_for(r"Tidemill server at (http://127\.0\.0\.1:\d+)")[1]
        yield db, url, lines, process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        assert process.stdout is not None
        process.stdout.close()


def test_first_start_names_the_first_admin_and_a_token_signs_in(
    server: tuple[str, str, Lines, subprocess.Popen[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    db, url, lines, process = server
    lines.wait_for(r"ada is its first admin")
    lines.wait_for(r"tidemill ws tokens create")
    code, out, _ = cli(capsys, "ws", "tokens", "create", "laptop", "--db", db)
    assert code == 0
    token = out.splitlines()[0]
    assert token.startswith("tm_pat_")
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.get("/api/auth/me").json()["user"] == "ada"
        code, out, _ = cli(capsys, "ws", "tokens", "list", "--db", db)
        prefix = "_".join(token.split("_")[:3])
        assert code == 0 and prefix in out and token not in out
        assert cli(capsys, "ws", "tokens", "revoke", prefix, "--db", db)[0] == 0
        assert client.get("/api/auth/me").status_code == 401
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=30) == 0


def test_a_password_set_on_the_command_line_signs_in_to_the_server(
    server: tuple[str, str, Lines, subprocess.Popen[str]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db, url, _, _ = server
    monkeypatch.setattr("sys.stdin", io.StringIO("a long enough password\n"))
    assert cli(capsys, "ws", "password", "--db", db)[0] == 0
    with httpx.Client(base_url=url) as client:
        signed = client.post(
            "/api/auth/sign-in", json={"user": "ada", "password": "a long enough password"}
        )
        assert signed.status_code == 200
        assert client.get("/api/auth/me").json()["via"] == "session"


def test_bad_token_options_are_refused_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = f"sqlite:///{tmp_path}/t.db"
    code, _, err = cli(capsys, "ws", "tokens", "create", "x", "--scope", "runs:fly", "--db", db)
    assert code == 2 and "Hint:" in err
    monkeypatch.setattr("sys.stdin", io.StringIO("short\n"))
    code, _, err = cli(capsys, "ws", "password", "--db", db)
    assert code == 2 and "at least" in err
