"""`VectorMemory`: the current run, plus the earlier messages closest in meaning to the request."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pydantic import JsonValue

from tidemill.agents.journal import MemoryRecalled, RecalledUnit, ThreadState
from tidemill.agents.memory._base import MemoryView
from tidemill.agents.memory._store_for import store_for
from tidemill.agents.memory._transcript import Unit, units_of
from tidemill.agents.memory._vector_store import StoredUnit, VectorStore
from tidemill.errors import ConfigurationError
from tidemill.llm import Model
from tidemill.llm.embeddings import EmbeddingModel, Vector, resolve_embedder
from tidemill.types import Usage

__all__ = ["RECALL_HEADING", "VectorMemory"]

_log = logging.getLogger("tidemill.agents.memory")

RECALL_HEADING = (
    "Earlier messages of this conversation that may bear on the request (oldest first):"
)
"""The line that opens the recalled messages in the system prompt."""


class VectorMemory:
    """Recall by meaning: the current run, plus the `k` earlier messages most like the request.

    When a run starts, every message of the thread not embedded yet is
    embedded (once: its vector is stored, keyed by its position and
    fingerprinted by its text) and the latest user message is compared with
    the earlier ones. The `k` most similar earlier units are journaled
    (`MemoryRecalled`, with what embedding cost, which counts in the run's
    usage and limits), and each model call of the run, in this process or in
    one that resumes it, gets them, oldest first, in the system prompt,
    followed by the run's own messages. A unit is a message, or an
    assistant's tool calls together with their results, so a call is never
    recalled without what it returned.

    Vectors are kept in `store`: by default next to the journals of the
    checkpointer the memory is bound to (`bound`), in memory otherwise.

    Args:
        embedder: The embedding model: a spec (`"openai:text-embedding-3-small"`,
            `"fake"` offline) or an `EmbeddingModel`.
        k: Earlier units recalled at most.
        min_score: Units less similar than this (cosine, -1 to 1) are not recalled.
        store: A `VectorStore`, or a checkpointer whose database should hold the
            vectors (`SQLiteCheckpointer`, `PostgresCheckpointer`); in memory by default.

    Raises:
        ConfigurationError: Without an embedder, or for `k` below 1.

    Examples:
        >>> memory = VectorMemory(embedder="fake", k=3)
        >>> memory.describe()["k"], memory.describe()["embedder"]["provider"]
        (3, 'fake')
    """

    def __init__(
        self,
        *,
        embedder: str | EmbeddingModel | None = None,
        k: int = 4,
        min_score: float = 0.0,
        store: object = None,
    ) -> None:
        if embedder is None:
            raise ConfigurationError(
                "A vector memory needs an embedding model.",
                hint="Pass embedder='openai:text-embedding-3-small' (or another provider's), "
                "or embedder='fake' for an offline one in tests.",
            )
        if k < 1:
            raise ConfigurationError(
                f"A vector memory recalls at least 1 message, not k={k}.",
                hint="Pass k=4 (the default) or another count of earlier messages.",
            )
        self._owns_embedder = isinstance(embedder, str)
        self.embedder = resolve_embedder(embedder)
        self.k = k
        self.min_score = min_score
        self._given_store = store is not None
        self.store: VectorStore = store_for(store)
        self._owns_store = not isinstance(store, VectorStore)
        self.usage = Usage()
        """What embedding has cost so far, in this process (each run's share is journaled)."""

    def bound(self, checkpointer: object) -> VectorMemory:
        """This memory with its vectors in `checkpointer`'s database, unless a store was given.

        For whatever builds a runtime: the builder's checkpointer is known
        only then. A memory given its own `store=` is returned as it is.
        """
        if self._given_store:
            return self
        copy = VectorMemory(embedder=self.embedder, k=self.k, min_score=self.min_score)
        copy._owns_embedder = False  # the original closes it; the copy closes its store
        copy.store = store_for(checkpointer)
        return copy

    def view(self, state: ThreadState) -> MemoryView:
        """The run's messages, with the recalled ones as context."""
        return MemoryView(state.messages[state.run_start :], self.recall_context(state))

    async def compact(self, state: ThreadState, model: Model) -> MemoryRecalled | None:
        """Embed what is new and recall from before the run, as an event to journal."""
        return await self.recall(state, before=state.run_start)

    async def recall(self, state: ThreadState, *, before: int) -> MemoryRecalled | None:
        """Embed the thread's new units; recall for this run from the units that end by `before`.

        Returns:
            The recalled units and what embedding cost, or None when nothing
            was embedded and nothing recalled.

        Raises:
            ProviderError: When the embedding model fails; the run does not start.
        """
        units = units_of(state.messages)
        if not units:
            return None
        model = self.embedder.model_name
        known = await self.store.digests(state.thread_id, model)
        fresh = [u for u in units if known.get(u.start) != u.digest]
        vectors: dict[int, Vector] = {}
        spent = Usage()
        if fresh:
            found = await self.embedder.aembed([u.text for u in fresh])
            spent += found.usage
            self.usage += found.usage
            vectors = {u.start: v for u, v in zip(fresh, found.vectors, strict=True)}
            stored = [StoredUnit(u.start, u.end, u.digest, vectors[u.start]) for u in fresh]
            await self.store.add(state.thread_id, model, stored)
            _log.debug("embedded %d unit(s) of thread %s", len(fresh), state.thread_id)
        chosen: list[Unit] = []
        query = _query_unit(units, state.last_user)
        if query is not None and before > 0:
            vector = vectors.get(query.start)
            if vector is None:
                again = await self.embedder.aembed([query.text])
                spent += again.usage
                self.usage += again.usage
                vector = again.vectors[0]
            matches = await self.store.nearest(
                state.thread_id, model, vector, before=before, k=self.k
            )
            by_start = {u.start: u for u in units}
            chosen = sorted(
                (
                    by_start[m.start]
                    for m in matches
                    if m.score >= self.min_score and m.start in by_start
                ),
                key=lambda u: u.start,
            )
        if not chosen and spent == Usage():
            return None
        recalled = tuple(RecalledUnit(start=u.start, end=u.end, text=u.text) for u in chosen)
        return MemoryRecalled(units=recalled, usage=spent)

    def recall_context(self, state: ThreadState) -> str | None:
        """The units recalled for the current run as system-prompt text, or None for none."""
        units = state.recalled
        if not units:
            return None
        return "\n".join([RECALL_HEADING, *(u.text for u in units)])

    async def aclose(self) -> None:
        """Close the store this memory opened and the embedder it built from a spec."""
        if self._owns_store:
            await self.store.aclose()
        if self._owns_embedder:
            await self.embedder.aclose()

    def describe(self) -> dict[str, JsonValue]:
        """Describe the memory."""
        return {"kind": "vector", "embedder": self.embedder.describe(), "k": self.k}


def _query_unit(units: Sequence[Unit], last_user: int) -> Unit | None:
    """The unit of the latest user message, which recall is measured against."""
    for unit in reversed(units):
        if unit.start <= last_user < unit.end:
            return unit
    return None
