"""A read-only command on a SQLite store another connection holds locked: an error, no traceback.

The store waits 0.2 s per statement and retries for 0.5 s here (30 s and 60 s
by default), so that the test takes a second.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from cli_support import cli

from tidemill.store import _store


def test_runs_list_on_a_locked_store_says_it_is_locked_and_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_store, "BUSY_TIMEOUT", 0.2)
    monkeypatch.setattr(_store, "RECONNECT_FOR", 0.5)
    db = tmp_path / "t.db"
    url = f"sqlite:///{db}"
    assert cli(capsys, "db", "upgrade", "--db", url)[0] == 0
    other = sqlite3.connect(db, isolation_level=None)
    try:
        other.execute("BEGIN EXCLUSIVE")  # a `sqlite3` shell's open transaction, say
        code, out, err = cli(capsys, "runs", "list", "--db", url)
        other.execute("ROLLBACK")
    finally:
        other.close()
    assert code == 2, (out, err)
    assert f"tidemill runs: error: The SQLite store {db} is locked" in err, err
    assert "Hint: Another process has a transaction open on the file" in err, err
    assert "Traceback" not in err and out == ""
    assert cli(capsys, "runs", "list", "--db", url)[0] == 0  # released: it reads again
