"""`tidemill memory list` and `delete`, on a store with stored agent memory."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tidemill.cli import main
from tidemill.engine import AsyncEngine
from tidemill.engine._memory import memory_uuid


def seed(url: str) -> None:
    async def go() -> None:
        engine = AsyncEngine(url, migrate=True)
        try:
            await engine._transact(
                lambda tx: (
                    tx.append_agent_memory(
                        memory_uuid("cust-1", scope="flow:support"), "agent",
                        [("user", "hi"), ("assistant", "hello")], run_id="r1", now=1.0,
                    ),
                    tx.append_agent_memory(
                        memory_uuid("cust-2", scope="flow:support"), "agent",
                        [("user", "yo")], run_id="r2", now=2.0,
                    ),
                )
            )  # fmt: skip
        finally:
            await engine.close()

    asyncio.run(go())


def test_list_and_delete_by_id_and_by_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    seed(url)
    one, two = (
        memory_uuid("cust-1", scope="flow:support"),
        memory_uuid("cust-2", scope="flow:support"),
    )
    assert main(["memory", "list", "--db", url]) == 0
    out = capsys.readouterr().out
    assert out.index(two) < out.index(one)  # newest first
    assert main(["memory", "list", "--key", "cust-1", "--flow", "support", "--db", url]) == 0
    out = capsys.readouterr().out
    assert one in out and two not in out
    assert main(["memory", "delete", "--key", "cust-1", "--flow", "support", "--db", url]) == 0
    assert "deleted 2 messages" in capsys.readouterr().out
    assert main(["memory", "delete", two, "--step", "other", "--db", url]) == 0
    assert "deleted 0 messages" in capsys.readouterr().out
    assert main(["memory", "list", "--json", "--db", url]) == 0
    assert one not in capsys.readouterr().out


def test_a_key_without_its_flow_is_refused_with_a_hint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/t.db"
    seed(url)
    assert main(["memory", "delete", "--key", "cust-1", "--db", url]) != 0
    err = capsys.readouterr().err
    assert "--flow" in err and "--path" in err
    assert main(["memory", "delete", "--db", url]) != 0
    assert "Name the memory" in capsys.readouterr().err
    assert main(["memory", "list", "--db", url]) == 0
    assert memory_uuid("cust-1", scope="flow:support") in capsys.readouterr().out  # nothing lost
