"""`store_for`: the vector store that lives where a checkpointer keeps its journals.

The memory package may not import the checkpointers (they are sibling
backends of the agent runtime), so a checkpointer is recognised by what it
holds, as `Protocol`s: a SQLite file (`path`, `busy_timeout`: the
`SQLiteCheckpointer`) or a PostgreSQL database (`url`, `schema`,
`max_connections`: the `PostgresCheckpointer`). Anything else, the
`MemoryCheckpointer` and a SQLite checkpointer at `":memory:"` included,
gets an `InMemoryVectorStore`: vectors live as long as the process, as
those journals do.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from tidemill.agents.memory._vector_postgres import PostgresVectorStore
from tidemill.agents.memory._vector_sqlite import SQLiteVectorStore
from tidemill.agents.memory._vector_store import InMemoryVectorStore, VectorStore

__all__ = ["store_for"]


@runtime_checkable
class _SQLiteFile(Protocol):
    path: str
    busy_timeout: float


@runtime_checkable
class _PostgresDatabase(Protocol):
    url: str
    schema: str
    max_connections: int


def store_for(checkpointer: object) -> VectorStore:
    """A vector store in the same database as `checkpointer`'s journals.

    Examples:
        >>> import pathlib, tempfile
        >>> from tidemill.agents.checkpoint import MemoryCheckpointer, SQLiteCheckpointer
        >>> type(store_for(MemoryCheckpointer())).__name__
        'InMemoryVectorStore'
        >>> saver = SQLiteCheckpointer(pathlib.Path(tempfile.mkdtemp()) / "agent.db")
        >>> store_for(saver).path == saver.path
        True
    """
    if isinstance(checkpointer, VectorStore):
        return checkpointer
    if isinstance(checkpointer, _PostgresDatabase):
        return PostgresVectorStore(checkpointer.url, schema=checkpointer.schema)
    if isinstance(checkpointer, _SQLiteFile) and checkpointer.path != ":memory:":
        return SQLiteVectorStore(checkpointer.path, busy_timeout=checkpointer.busy_timeout)
    return InMemoryVectorStore()
