"""Secret variables: encrypted at rest, never shown, audited when read, gone when deleted."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.workspace.conftest import FLOW, Team, build_team, open_workspace

from tidemill.errors import ConfigurationError, ItemNotFound, UnresolvedReference
from tidemill.store import Tx
from tidemill.workspace import (
    AsyncWorkspace,
    InvalidValue,
    Keyring,
    MasterKey,
    SecretKeyError,
)


def plaintext() -> str:
    return f"sk-PLAINTEXT-{uuid.uuid4().hex}"


async def _row(ws: AsyncWorkspace, path: str) -> tuple[Any, ...] | None:
    def read(tx: Tx) -> tuple[Any, ...] | None:
        row = tx.one(
            "SELECT body, secret, deleted_at FROM tm_ws_items WHERE workspace = ? AND path = ?",
            (ws.name, path),
        )
        return None if row is None else tuple(row)

    return await ws.store.transact(read)


async def _postgres_texts(ws: AsyncWorkspace) -> list[tuple[str, str, str]]:
    """(table, column, value) of every text column of the tables that could hold a secret."""

    def read(tx: Tx) -> list[tuple[str, str, str]]:
        columns = tx.all(
            "SELECT table_name, column_name FROM information_schema.columns "
            "WHERE table_schema = current_schema() "
            "AND data_type IN ('text', 'character varying', 'json', 'jsonb', 'bytea') "
            "AND (left(table_name, 6) = 'tm_ws_' "
            "OR table_name IN ('tm_runs', 'tm_payloads', 'tm_logs'))",
        )
        found: list[tuple[str, str, str]] = []
        for table, column in columns:
            for (value,) in tx.all(f'SELECT "{column}"::text FROM "{table}"'):
                if value is not None:
                    found.append((table, column, str(value)))
        return found

    return await ws.store.transact(read)


def _sqlite_files_holding(url: str, *texts: str) -> list[str]:
    """Which of the database file, its WAL and its shared memory file hold one of `texts`."""
    database = Path(url.removeprefix("sqlite:///"))
    assert database.exists()
    found = []
    for file in (database, Path(f"{database}-wal"), Path(f"{database}-shm")):
        data = file.read_bytes() if file.exists() else b""
        found += [f"{text} in {file.name}" for text in texts if text.encode() in data]
    return found


def _key_file_exists(url: str) -> bool:
    return Path(url.removeprefix("sqlite:///") + ".key").exists()


async def test_the_plaintext_is_nowhere_in_the_store(store_url: str, keyring: Keyring) -> None:
    secret, replaced, deleted = plaintext(), plaintext(), plaintext()
    ada = open_workspace(store_url, keyring=keyring)
    try:
        await build_team(ada, replaced)
        # Everything that reads or moves the secret: overwrite, reveal, resolve, run, audit.
        await ada.write("f/team/key", "variable", secret, secret=True, message="rotate it")
        await ada.write("f/team/gone", "variable", deleted, secret=True)
        await ada.delete("f/team/gone")
        assert (await ada.get("f/team/key", reveal=True)).value == secret
        resolved = await ada.resolve({"llm": "$res:f/team/openai"}, purpose="run r1 step s")
        assert resolved.value == {"llm": {"api_key": secret}}
        plan = await ada.run_plan("f/team/flow")
        await ada.record_run("r1", plan)
        await ada.save_draft(
            "f/team/openai", "resource", {"api_key": "$var:f/team/key"}, resource_type="openai"
        )
        await ada.search(secret)
        await ada.audit()
        if store_url.startswith("sqlite"):
            database = Path(store_url.removeprefix("sqlite:///"))
            files = [
                p
                for p in (database, Path(f"{database}-wal"), Path(f"{database}-shm"))
                if p.exists()
            ]
            assert database in files
            for file in files:
                data = file.read_bytes()
                for text in (secret, replaced, deleted):
                    assert text.encode() not in data, f"{text} in {file.name}"
        else:
            texts = await _postgres_texts(ada)
            assert {table for table, _, _ in texts} >= {"tm_ws_items", "tm_ws_audit"}
            for table, column, value in texts:
                for text in (secret, replaced, deleted):
                    assert text not in value, f"{text} in {table}.{column}"
    finally:
        await ada.close()
    if store_url.startswith("sqlite"):  # and once closed (the WAL checkpointed)
        assert _sqlite_files_holding(store_url, secret, replaced, deleted) == []


async def test_no_repr_or_str_shows_a_secret(team: Team) -> None:
    ada, secret = team.ada, team.secret
    shown: list[Any] = [
        ada,
        team.max,
        team.keyring,
        team.keyring.master,
        await ada.write("f/team/key", "variable", secret, secret=True),
        await ada.get("f/team/key"),
        await ada.get("f/team/key", reveal=True),
        await ada.list("f/team/"),
        await ada.history("f/team/openai"),
        await ada.history("f/team/key"),
        await ada.save_draft(
            "f/team/openai", "resource", {"api_key": "$var:f/team/key"}, resource_type="openai"
        ),
        await ada.drafts(),
        await ada.whoami(),
        await ada.run_plan("f/team/flow"),
    ]
    await ada.resolve("$res:f/team/openai")
    shown.extend(await ada.audit())
    shown.append(await ada.audit())
    for thing in shown:
        assert secret not in repr(thing), thing
        assert secret not in str(thing), thing
    revealed = await ada.get("f/team/key", reveal=True)
    assert revealed.value == secret and "<secret>" in repr(revealed)


async def test_reveal_and_resolve_are_audited(team: Team) -> None:
    ada = team.ada
    await team.vic.get("f/team/key")  # not revealed: not a decryption
    assert await ada.audit(action="secret.decrypt") == []
    await team.vic.get("f/team/key", reveal=True)
    await team.olga.resolve("$var:f/team/key", purpose="run r7 step s")
    await team.vic.resolve({"m": "$res:f/team/openai"})
    entries = await ada.audit(action="secret.decrypt")
    assert [(e.actor, e.path, e.details.get("purpose")) for e in entries] == [
        ("vic", "f/team/key", "read"),
        ("olga", "f/team/key", "run r7 step s"),
        ("vic", "f/team/key", "resolve"),
    ]
    # A refused reveal is not a decryption.
    with pytest.raises(ItemNotFound):
        await team.max.get("f/team/key", reveal=True)
    assert len(await ada.audit(action="secret.decrypt")) == 3


async def test_refusals_and_key_errors_tell_no_secret(team: Team) -> None:
    secret = team.secret
    refusals: list[BaseException] = []
    for attempt in (
        team.max.get("f/team/key", reveal=True),
        team.max.resolve("$var:f/team/key"),
        team.max.resolve("$res:f/team/openai"),
        team.vic.write("f/team/key", "variable", secret, secret=True),
        team.max.write("f/team/key", "variable", secret, secret=True),
        team.max.write("u/max/openai", "resource", {"api_key": secret}, resource_type="openai"),
    ):
        with pytest.raises(Exception) as caught:
            await attempt
        refusals.append(caught.value)
    wrong = open_workspace(
        team.url, "vic", keyring=Keyring(MasterKey.generate()), workspace=team.workspace
    )
    try:
        with pytest.raises(SecretKeyError) as caught:
            await wrong.get("f/team/key", reveal=True)
        refusals.append(caught.value)
    finally:
        await wrong.close()
    for error in refusals:
        assert secret not in str(error) and secret not in repr(error)
        assert secret not in repr(getattr(error, "context", {}))


async def test_a_secret_has_no_drafts_and_no_versions(team: Team) -> None:
    with pytest.raises(ConfigurationError, match="only scripts, flows and resources have drafts"):
        await team.ada.save_draft("f/team/key", "variable", team.secret)
    assert await team.ada.drafts() == []
    item = await team.ada.get("f/team/key")
    assert (item.version, item.secret, item.value) == (0, True, None)
    assert await team.ada.history("f/team/key") == []
    with pytest.raises(ItemNotFound):
        await team.ada.get("f/team/key", version=0)
    with pytest.raises(ItemNotFound):
        await team.ada.restore("f/team/key", 0)
    # Only a variable can be secret.
    with pytest.raises(InvalidValue, match="only variables can be secret"):
        await team.ada.write("f/team/s", "script", "def main():\n    return 1\n", secret=True)


async def test_a_resource_takes_a_key_only_as_a_reference(team: Team) -> None:
    key = plaintext()
    for value in (
        {"api_key": key},
        {"api_key": key, "organization": "org"},
        {"api_key": key, "base_url": 5},  # fails the schema too
        {"api_key": key, "extra": key},
        {"api_key": f"$res:{key}"},
    ):
        with pytest.raises(InvalidValue) as caught:
            await team.ada.write("f/team/openai", "resource", value, resource_type="openai")
        error = caught.value
        for text in (str(error), repr(error), repr(error.problems), repr(error.context)):
            assert key not in text
    with pytest.raises(InvalidValue) as caught:
        await team.ada.save_draft(
            "f/team/openai", "resource", {"api_key": key}, resource_type="openai"
        )
    assert key not in str(caught.value)
    assert (await team.ada.get("f/team/openai")).version == 1  # nothing was written
    written = await team.ada.write(
        "f/team/openai", "resource", {"api_key": "$var:f/team/key"}, resource_type="openai"
    )
    assert written.version == 2


async def test_rotating_the_master_key(team: Team) -> None:
    old, new = team.keyring.master, MasterKey.generate()
    await team.ada.rotate_key(new)
    assert (await team.ada.get("f/team/key", reveal=True)).value == team.secret
    entries = await team.ada.audit(action="key.rotate")
    assert [e.details["key_id"] for e in entries] == [new.key_id]
    assert old.encoded() not in repr(entries) and new.encoded() not in repr(entries)
    for keyring, opens in ((Keyring(new), True), (Keyring(old), False)):
        other = open_workspace(team.url, "olga", keyring=keyring, workspace=team.workspace)
        try:
            if opens:
                assert (await other.get("f/team/key", reveal=True)).value == team.secret
                resolved = await other.resolve("$res:f/team/openai")
                assert resolved.value == {"api_key": team.secret}
            else:
                with pytest.raises(SecretKeyError, match=new.key_id):
                    await other.get("f/team/key", reveal=True)
                with pytest.raises(SecretKeyError):
                    await other.resolve("$var:f/team/key")
                # What is not secret still reads.
                assert (await other.get("f/team/region")).value == "eu-west-1"
        finally:
            await other.close()
    # Only an admin rotates.
    with pytest.raises(Exception, match="workspace admin"):
        await team.olga.rotate_key(MasterKey.generate())


async def test_deleting_a_secret_removes_its_ciphertext(team: Team) -> None:
    before = await _row(team.ada, "f/team/key")
    assert before is not None
    body = str(before[0])
    assert team.secret not in body and body.strip('"').startswith("v1:")
    await team.olga.delete("f/team/key")
    after = await _row(team.ada, "f/team/key")
    assert after is not None and after[2] is not None  # marked deleted
    assert str(after[0]) == "null"
    with pytest.raises(ItemNotFound):
        await team.ada.get("f/team/key", reveal=True)
    with pytest.raises(UnresolvedReference):
        await team.ada.resolve("$res:f/team/openai")
    # Written again, it is a secret again, with a ciphertext of its own.
    again = plaintext()
    await team.ada.write("f/team/key", "variable", again, secret=True)
    row = await _row(team.ada, "f/team/key")
    assert row is not None and str(row[0]) != body and again not in str(row[0])
    assert (await team.vic.get("f/team/key", reveal=True)).value == again


async def test_the_master_key_from_the_environment(
    store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = MasterKey.generate()
    monkeypatch.setenv("TIDEMILL_MASTER_KEY", key.encoded())
    secret = plaintext()
    ada = AsyncWorkspace(store_url, user="ada", migrate=True)
    try:
        await ada.add_folder("team")
        await ada.write("f/team/key", "variable", secret, secret=True)
        assert (await ada.get("f/team/key", reveal=True)).value == secret
    finally:
        await ada.close()
    with_key = AsyncWorkspace(store_url, user="ada", keyring=Keyring(key))
    try:
        assert (await with_key.get("f/team/key", reveal=True)).value == secret
    finally:
        await with_key.close()


async def test_acting_as_reads_secrets_with_the_same_master_key(store_url: str) -> None:
    """A session made by `acting_as` must open secrets with its parent's master key.

    The parent was given its key in `environ`; the child is made before the
    parent first needed it, so it has no keyring yet and loads one itself.
    """
    key = MasterKey.generate()
    ada = AsyncWorkspace(
        store_url, user="ada", environ={"TIDEMILL_MASTER_KEY": key.encoded()}, migrate=True
    )
    try:
        await ada.add_user("olga")
        await ada.add_folder("team", roles={"olga": "viewer"})
        olga = await ada.acting_as("olga")
        await ada.write("f/team/key", "variable", "the secret", secret=True)
        assert (await olga.get("f/team/key", reveal=True)).value == "the secret"
    finally:
        await ada.close()
    if store_url.startswith("sqlite"):  # and it made no key file of its own
        assert not _key_file_exists(store_url)


def test_the_blocking_workspace_keeps_secrets_too(tmp_path: Path) -> None:
    from tidemill.workspace import Workspace

    secret = plaintext()
    url = f"sqlite:///{tmp_path}/t.db"
    with Workspace(url, user="ada") as ws:
        ws.add_folder("team")
        ws.write("f/team/key", "variable", secret, secret=True)
        ws.write("f/team/flow", "variable", str(FLOW))
        assert ws.get("f/team/key").value is None
        assert ws.get("f/team/key", reveal=True).value == secret
    key_file = tmp_path / "t.db.key"
    assert key_file.stat().st_mode & 0o077 == 0  # the key next to the database is private
    assert secret.encode() not in (tmp_path / "t.db").read_bytes()
