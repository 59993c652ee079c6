"""`VectorStore`: where a vector memory keeps the embeddings of a thread's messages.

A store holds, per thread and embedding model, one vector per recall unit
(a message, or a tool call with its results), keyed by the unit's first
message index and fingerprinted by its text, and answers "the `k` units
most similar to this vector, among those that end before message `n`".

Three backends, one per checkpointer: `InMemoryVectorStore` (this module),
`SQLiteVectorStore` (a table in the checkpointer's SQLite file) and
`PostgresVectorStore` (a table in the checkpointer's schema, with pgvector
where the server has it). `store_for` picks the one that matches a
checkpointer, reading its `path`, or its `url` and `schema`.
"""

from __future__ import annotations

import heapq
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tidemill.llm.embeddings import Vector

__all__ = [
    "InMemoryVectorStore",
    "Match",
    "StoredUnit",
    "VectorStore",
    "normalized",
    "top_k",
]


@dataclass(frozen=True, slots=True)
class StoredUnit:
    """The vector of messages `start` to `end` of a thread."""

    start: int
    end: int
    digest: str
    """A fingerprint of the unit's text; a different one at `start` means the vector is stale."""
    vector: Vector


@dataclass(frozen=True, slots=True, order=True)
class Match:
    """A unit found similar to a query: messages `start` to `end`, and how similar."""

    score: float
    """Cosine similarity to the query, from -1 to 1."""
    start: int
    end: int


@runtime_checkable
class VectorStore(Protocol):
    """Keeps the unit vectors of threads; see the module docstring.

    Implementations must be safe to share between the tasks of one event
    loop and between threads, as checkpointers are.
    """

    async def digests(self, thread_id: str, model: str) -> dict[int, str]:
        """The fingerprint of every unit stored for the thread and model, by `start`."""
        ...

    async def add(self, thread_id: str, model: str, units: Sequence[StoredUnit]) -> None:
        """Store `units`, replacing any stored at the same `start`."""
        ...

    async def nearest(
        self, thread_id: str, model: str, query: Vector, *, before: int, k: int
    ) -> list[Match]:
        """The `k` units most similar to `query` among those ending at or before `before`.

        Best first.
        """
        ...

    async def delete(self, thread_id: str) -> None:
        """Forget every vector of a thread."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def normalized(vector: Sequence[float]) -> Vector:
    """`vector` scaled to length 1 (a zero vector stays zero), so a dot product is a cosine.

    Examples:
        >>> normalized([3.0, 4.0])
        (0.6, 0.8)
    """
    norm = math.sqrt(sum(x * x for x in vector))
    if norm == 0.0:
        return tuple(float(x) for x in vector)
    return tuple(x / norm for x in vector)


def top_k(
    query: Vector, candidates: Iterable[tuple[int, int, Sequence[float]]], k: int
) -> list[Match]:
    """The `k` candidates `(start, end, vector)` nearest `query` by cosine, best first.

    A candidate of another length than the query (stored by a model that
    has since changed its dimensions) is skipped.

    Examples:
        >>> top_k((1.0, 0.0), [(0, 1, (0.0, 1.0)), (1, 2, (1.0, 0.0)), (2, 3, (1.0, 1.0))], 2)
        [Match(score=1.0, start=1, end=2), Match(score=0.707..., start=2, end=3)]
    """
    unit = normalized(query)
    scored = (
        Match(sum(a * b for a, b in zip(unit, normalized(v), strict=True)), start, end)
        for start, end, v in candidates
        if len(v) == len(unit)
    )
    return heapq.nlargest(k, scored)


class InMemoryVectorStore:
    """Vectors in a dict: for the in-memory checkpointer, tests and single processes.

    Examples:
        >>> import asyncio
        >>> store = InMemoryVectorStore()
        >>> asyncio.run(store.add("t", "m", [StoredUnit(0, 1, "d", (1.0, 0.0))]))
        >>> asyncio.run(store.nearest("t", "m", (1.0, 0.1), before=1, k=3))[0].start
        0
    """

    def __init__(self) -> None:
        self._units: dict[tuple[str, str], dict[int, StoredUnit]] = {}
        self._lock = threading.Lock()

    async def digests(self, thread_id: str, model: str) -> dict[int, str]:
        """The stored fingerprints, by `start`."""
        with self._lock:
            units = self._units.get((thread_id, model), {})
            return {start: unit.digest for start, unit in units.items()}

    async def add(self, thread_id: str, model: str, units: Sequence[StoredUnit]) -> None:
        """Store `units`, replacing those at the same `start`."""
        with self._lock:
            stored = self._units.setdefault((thread_id, model), {})
            for unit in units:
                stored[unit.start] = unit

    async def nearest(
        self, thread_id: str, model: str, query: Vector, *, before: int, k: int
    ) -> list[Match]:
        """The `k` most similar units that end by `before`, computed here."""
        with self._lock:
            units = list(self._units.get((thread_id, model), {}).values())
        return top_k(query, ((u.start, u.end, u.vector) for u in units if u.end <= before), k)

    async def delete(self, thread_id: str) -> None:
        """Forget the thread's vectors, for every model."""
        with self._lock:
            for key in [key for key in self._units if key[0] == thread_id]:
                del self._units[key]

    async def aclose(self) -> None:
        """Nothing to release."""
