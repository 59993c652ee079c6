"""Shared fixtures: checkpointers on every backend, PostgreSQL isolation."""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest

from tidemill.agents.checkpoint import (
    Checkpointer,
    MemoryCheckpointer,
    PostgresCheckpointer,
    SQLiteCheckpointer,
)

POSTGRES_ENV = "TIDEMILL_TEST_POSTGRES_URL"
BACKENDS = ["memory", "sqlite", "postgres"]


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """Do not collect conftest files as doctest modules.

    Several test folders have a `conftest.py`; `--doctest-modules` would import
    each as the module `conftest`, and a run naming two folders
    (`pytest tests/engine tests/llm`) then fails on the name clash. They hold no
    doctests; pytest still loads them as conftests.
    """
    return True if collection_path.name == "conftest.py" else None


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keep real provider keys out of tests unless a test sets them itself."""
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def postgres_url() -> str:
    """The test database URL; skips the test, saying why, when it is not set."""
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server (CI sets it)")
    return url


def unique_schema() -> str:
    """A schema name no other test run uses."""
    return f"tidemill_test_{os.getpid()}_{secrets.token_hex(4)}"


@pytest.fixture
async def postgres_checkpointer(postgres_url: str) -> AsyncIterator[PostgresCheckpointer]:
    """A PostgreSQL checkpointer in a schema of its own, dropped afterwards."""
    checkpointer = PostgresCheckpointer(postgres_url, schema=unique_schema())
    try:
        yield checkpointer
    finally:
        await checkpointer.drop_schema()
        await checkpointer.aclose()


@pytest.fixture(params=BACKENDS)
async def checkpointer(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[Checkpointer]:
    """Each backend in turn: memory, SQLite in a temp file, PostgreSQL (when configured)."""
    backend: Checkpointer
    if request.param == "memory":
        backend = MemoryCheckpointer()
    elif request.param == "sqlite":
        backend = SQLiteCheckpointer(tmp_path / "journal.db")
    else:
        url = os.environ.get(POSTGRES_ENV)
        if not url:
            pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server (CI sets it)")
        backend = PostgresCheckpointer(url, schema=unique_schema())
    try:
        yield backend
    finally:
        if isinstance(backend, PostgresCheckpointer):
            await backend.drop_schema()
        await backend.aclose()


def drop_postgres_schema(url: str, schema: str) -> None:
    """Drop a test schema and everything in it."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A store URL on each backend: a SQLite file, a PostgreSQL schema of its own (dropped)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/tidemill.db"
        return
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server (CI sets it)")
    schema = unique_schema()
    try:
        yield f"{url}?schema={schema}"
    finally:
        drop_postgres_schema(url, schema)


@pytest.fixture
def drop_schema() -> Callable[[str], None]:
    """Drop the PostgreSQL schema named in a store URL (`...?schema=name`)."""

    def drop(url: str) -> None:
        base, _, schema = url.partition("?schema=")
        if schema:
            drop_postgres_schema(base, schema)

    return drop
