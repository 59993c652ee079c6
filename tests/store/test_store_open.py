"""Opening a store: paths that cannot hold one, a missing driver, asking for pending migrations."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from tidemill.errors import MissingDependencyError, StoreError
from tidemill.store import Store, StoreURL, pending, upgrade


def open_and_count(url: str) -> dict[str, int]:
    """Open the store at `url`, bring it up to date and count what it holds."""

    async def main() -> dict[str, int]:
        store = Store(StoreURL.parse(url))
        try:
            await upgrade(store)
            counts: dict[str, int] = await store.transact(lambda tx: tx.counts())
            return counts
        finally:
            await store.close()

    return asyncio.run(main())


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError) as raised:
        open_and_count(f"sqlite:///{tmp_path}")
    message = f"The SQLite store {tmp_path} is a directory, not a database file."
    assert raised.value.message == message
    assert raised.value.hint == f"Name a file, e.g. sqlite:///{tmp_path}/tidemill.db."


@pytest.mark.parametrize("content", [b"hello\n" * 50, b"\x00\xff" * 4096, b"SQLite format 2\x00"])
def test_a_file_that_is_not_sqlite_is_refused_and_kept(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(content)
    with pytest.raises(StoreError) as raised:
        open_and_count(f"sqlite:///{path}")
    assert raised.value.message == f"{path} is not a SQLite database; it was left as it is."
    assert raised.value.hint and "Name a Tidemill store" in raised.value.hint
    assert path.read_bytes() == content
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data.bin"]


def test_a_directory_that_cannot_be_made(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(StoreError) as raised:
        open_and_count(f"sqlite:///{blocker}/deeper/t.db")
    assert raised.value.message.startswith(
        f"Cannot create the directory {blocker}/deeper of the SQLite store {blocker}/deeper/t.db: "
    )
    assert raised.value.hint
    assert blocker.read_text() == "x"


@pytest.mark.skipif(not Path("/proc/self").exists(), reason="needs Linux's /proc")
def test_a_file_system_that_takes_no_files() -> None:
    with pytest.raises(StoreError) as raised:
        open_and_count("sqlite:////proc/tidemill-test.db")
    assert raised.value.message.startswith("Cannot open the SQLite store /proc/tidemill-test.db: ")
    assert raised.value.hint and "read and written" in raised.value.hint


def test_an_existing_store_still_opens(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/a/b/t.db"
    assert open_and_count(url) == {}
    assert open_and_count(url) == {}


def test_postgres_without_psycopg_says_which_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [name for name in sys.modules if name.split(".")[0] == "psycopg"]:
        monkeypatch.setitem(sys.modules, name, None)  # as if never installed
    monkeypatch.setitem(sys.modules, "psycopg", None)
    with pytest.raises(MissingDependencyError) as raised:
        Store(StoreURL.parse("postgresql://nobody@127.0.0.1:9/x"))
    assert raised.value.extra == "postgres"
    assert raised.value.hint == "Install it with: pip install 'tidemill[postgres]'"


async def test_a_tidemill_error_while_connecting_is_not_masked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The retry check must not import the driver to look at an error that is not the driver's."""
    store = Store(StoreURL.parse("postgresql://nobody@127.0.0.1:9/x"), reconnect_for=0)

    def no_driver() -> None:
        raise MissingDependencyError("psycopg", extra="postgres", feature="A PostgreSQL store")

    monkeypatch.setattr(store, "_connect", no_driver)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    try:
        with pytest.raises(MissingDependencyError):
            await store.transact(lambda tx: tx.counts())
    finally:
        monkeypatch.undo()
        await store.close()


async def test_asking_what_is_pending_writes_nothing(store_url: str) -> None:
    store = Store(StoreURL.parse(store_url))
    try:
        assert [m.version for m in await pending(store)][:1] == [1]
        if store.dialect == "sqlite":
            sql = "SELECT name FROM sqlite_master"
        else:
            sql = (
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema()"
            )
        assert await store.transact(lambda tx: tx.all(sql)) == []
    finally:
        await store.close()
