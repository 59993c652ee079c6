"""`JournalSaver`: a LangGraph checkpoint saver over a Tidemill `Checkpointer`.

LangGraph's checkpoints and pending writes become `GraphCheckpoint` and
`GraphWrites` events in the thread's journal, beside the Tidemill events of
the same run, so one append-only journal (in memory, SQLite or PostgreSQL)
holds a graph thread whole and a run continues in any process that shares it.

While `GraphRuntime` runs a thread it binds the thread's `ThreadLog` here: the
saver then appends through the run's own writer, after the last entry the run
has seen, so a second process working on the same thread fails its next
append (`ThreadBusy`) rather than interleaving with this one. A graph of your
own is served from a few cached logs, each brought up to date from its
journal's tail under a lock before every read and write: LangGraph saves in
background tasks, and this process's writes must not race each other.
"""

from __future__ import annotations

import asyncio
import secrets
import weakref
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, NoReturn

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from tidemill.agents._thread import ThreadWriter
from tidemill.agents.checkpoint import Checkpointer
from tidemill.agents.graph._codec import encode
from tidemill.agents.graph._index import GraphIndex
from tidemill.agents.journal import (
    GraphCheckpoint,
    GraphWrite,
    GraphWrites,
    JournalEvent,
    ThreadState,
)
from tidemill.errors import ConfigurationError, ThreadBusy

__all__ = ["JournalSaver", "ThreadLog"]

_CACHED = 16
"""Threads whose logs a saver keeps between calls, outside `GraphRuntime` runs."""


@dataclass(frozen=True, slots=True)
class ThreadLog:
    """One run's view of a thread: its Tidemill state and its graph checkpoints, in step."""

    writer: ThreadWriter
    """Appends events to the thread and holds the state they fold into."""
    index: GraphIndex
    """The thread's graph checkpoints and writes, read from the same journal."""

    @property
    def thread_id(self) -> str:
        """The thread."""
        return self.writer.thread_id

    @property
    def state(self) -> ThreadState:
        """The fold of the thread's Tidemill events."""
        return self.writer.state

    async def append(self, *events: JournalEvent) -> None:
        """Append `events` in one write and fold them into both views.

        Raises:
            ThreadBusy: When another writer appended to the thread meanwhile.
        """
        await self.writer.append(*events)
        for event in events:
            self.index.add(event)


@dataclass
class _Cache:
    """Logs of threads outside `GraphRuntime` runs, on one event loop."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    logs: dict[str, ThreadLog] = field(default_factory=dict)


def _strict_serde() -> SerializerProtocol:
    """LangGraph's serializer, loading only the types it lists as safe, never pickling."""
    try:
        return JsonPlusSerializer(pickle_fallback=False, allowed_msgpack_modules=None)
    except TypeError:  # pragma: no cover - an older langgraph-checkpoint without allowlists
        return JsonPlusSerializer(pickle_fallback=False)


class JournalSaver(BaseCheckpointSaver[str]):
    """Keeps LangGraph checkpoints in a Tidemill checkpointer's journals.

    Use it to give your own LangGraph graph Tidemill's storage; `GraphRuntime`
    uses one for its agent graph. Only the async methods work: run the graph
    with `ainvoke`/`astream`.

    Args:
        checkpointer: Where the journals are kept.
        serde: LangGraph's serializer for values that are not plain JSON or
            Tidemill messages. The default loads only the types LangGraph
            lists as safe; one that pickles is refused when it tries.

    Examples:
        >>> import asyncio
        >>> from langgraph.checkpoint.base import empty_checkpoint
        >>> from tidemill.agents.checkpoint import MemoryCheckpointer
        >>> saver = JournalSaver(MemoryCheckpointer())
        >>> config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
        >>> stored = asyncio.run(saver.aput(config, empty_checkpoint(), {"step": -1}, {}))
        >>> asyncio.run(saver.aget_tuple(config)).metadata["step"]
        -1
    """

    def __init__(self, checkpointer: Checkpointer, *, serde: SerializerProtocol | None = None):
        super().__init__(serde=serde or _strict_serde())
        self.checkpointer = checkpointer
        # Shared with the copies LangGraph makes (`with_allowlist`); never reassigned.
        self._bound: dict[str, ThreadLog] = {}
        self._caches: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Cache] = (
            weakref.WeakKeyDictionary()
        )

    # -- runs ------------------------------------------------------------------------

    async def open(self, thread_id: str) -> ThreadLog:
        """Read the thread's journal once into a `ThreadLog`."""
        state, index = ThreadState(thread_id), GraphIndex(thread_id)
        for record in await self.checkpointer.read(thread_id):
            state.apply(record.seq, record.event)
            index.add(record.event)
        return ThreadLog(ThreadWriter(self.checkpointer, state), index)

    @contextmanager
    def bind(self, log: ThreadLog) -> Iterator[ThreadLog]:
        """Serve and append the thread through `log` while the block runs.

        Raises:
            ThreadBusy: When a run in this process already has the thread.
        """
        if log.thread_id in self._bound:
            raise ThreadBusy(
                f"Thread {log.thread_id!r} has a run in progress in this process.",
                hint="Wait for it to finish or pause, or use another thread.",
                context={"thread_id": log.thread_id},
            )
        self._bound[log.thread_id] = log
        try:
            yield log
        finally:
            del self._bound[log.thread_id]

    @asynccontextmanager
    async def _thread(self, thread_id: str) -> AsyncIterator[ThreadLog]:
        """The thread's log: the bound run's, or a cached one read up to the journal's end."""
        bound = self._bound.get(thread_id)
        if bound is not None:
            yield bound
            return
        # A cache per event loop: a log's writer and lock belong to one loop.
        cache = self._caches.setdefault(asyncio.get_running_loop(), _Cache())
        async with cache.lock:
            log = cache.logs.pop(thread_id, None)
            if log is None:
                log = ThreadLog(
                    ThreadWriter(self.checkpointer, ThreadState(thread_id)), GraphIndex(thread_id)
                )
            for record in await self.checkpointer.read(thread_id, after=log.state.seq):
                log.state.apply(record.seq, record.event)
                log.index.add(record.event)
            cache.logs[thread_id] = log  # the most recently used last
            while len(cache.logs) > _CACHED:
                del cache.logs[next(iter(cache.logs))]
            yield log

    # -- the saver protocol (async) -------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Return the checkpoint `config` names, or the thread's newest one."""
        thread_id, namespace, checkpoint_id = _address(config)
        async with self._thread(thread_id) as log:
            checkpoint_id = checkpoint_id or log.index.latest(namespace)
            return log.index.tuple(namespace, checkpoint_id, self.serde) if checkpoint_id else None

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Yield checkpoints newest first: of one thread, or of every thread when `config` is None.

        Args:
            config: The thread, and optionally its namespace and one checkpoint id.
            filter: Metadata every yielded checkpoint has.
            before: Only checkpoints older than this one.
            limit: At most this many.
        """
        configurable = (config or {}).get("configurable", {})
        threads = (
            [str(configurable["thread_id"])]
            if "thread_id" in configurable
            else await self.checkpointer.threads()
        )
        only = configurable.get("checkpoint_id")
        older = _address(before)[2] if before else None
        remaining = limit
        for thread_id in threads:
            async with self._thread(thread_id) as log:
                index = log.index
            namespaces = (
                [str(configurable["checkpoint_ns"])]
                if "checkpoint_ns" in configurable
                else index.namespaces()
            )
            for namespace in namespaces:
                for checkpoint_id in index.ids(namespace):
                    if (only and checkpoint_id != only) or (older and checkpoint_id >= older):
                        continue
                    found = index.tuple(namespace, checkpoint_id, self.serde)
                    if found is None or not _matches(found.metadata, filter):
                        continue
                    if remaining is not None and remaining <= 0:
                        return
                    yield found
                    if remaining is not None:
                        remaining -= 1

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Journal a checkpoint, with the values of the channels it changed.

        A value whose version the journal lacks is stored too, so a checkpoint
        is whole even after LangGraph lost an earlier save.
        """
        thread_id, namespace, parent_id = _address(config)
        values = checkpoint["channel_values"]
        body = {
            key: encode(value, self.serde)
            for key, value in checkpoint.items()
            if key != "channel_values"
        }
        metadata_json = encode(dict(get_checkpoint_metadata(config, metadata)), self.serde)
        async with self._thread(thread_id) as log:
            missing = log.index.missing(namespace, checkpoint["channel_versions"])
            body["channel_values"] = {
                channel: encode(values[channel], self.serde)
                for channel in (*new_versions, *missing)
                if channel in values
            }
            event = GraphCheckpoint(
                checkpoint_ns=namespace,
                checkpoint_id=checkpoint["id"],
                parent_id=parent_id,
                checkpoint=body,
                metadata=metadata_json,
            )
            await log.append(event)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Journal a task's writes after a checkpoint; a regular write is kept once."""
        thread_id, namespace, checkpoint_id = _address(config)
        if checkpoint_id is None:
            raise ConfigurationError("put_writes needs a config that names a checkpoint.")
        event = GraphWrites(
            checkpoint_ns=namespace,
            checkpoint_id=checkpoint_id,
            task_id=task_id,
            task_path=task_path,
            writes=tuple(
                GraphWrite(
                    channel=channel,
                    idx=WRITES_IDX_MAP.get(channel, position),
                    value=encode(value, self.serde),
                )
                for position, (channel, value) in enumerate(writes)
            ),
        )
        async with self._thread(thread_id) as log:
            fresh = log.index.fresh_writes(event)
            if fresh is not None:
                await log.append(fresh)

    async def adelete_thread(self, thread_id: str) -> None:
        """Delete the thread's whole journal, its Tidemill events included."""
        for cache in list(self._caches.values()):
            cache.logs.pop(thread_id, None)
        await self.checkpointer.delete(thread_id)

    def get_next_version(self, current: str | None, channel: None) -> str:
        """A version greater than `current`, unique to this write.

        The random part keeps two branches forked from one checkpoint from
        storing different values under the same version.
        """
        number = 0 if current is None else int(str(current).split(".", 1)[0])
        return f"{number + 1:032}.{secrets.token_hex(8)}"

    # -- the saver protocol (sync): not supported ----------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Not supported: the saver is async."""
        _async_only("get_tuple")

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Not supported: the saver is async."""
        _async_only("list")

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Not supported: the saver is async."""
        _async_only("put")

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Not supported: the saver is async."""
        _async_only("put_writes")

    def delete_thread(self, thread_id: str) -> None:
        """Not supported: the saver is async."""
        _async_only("delete_thread")


def _address(config: RunnableConfig) -> tuple[str, str, str | None]:
    """The thread, namespace and checkpoint id a config names."""
    configurable = config.get("configurable", {})
    if "thread_id" not in configurable:
        raise ConfigurationError(
            "A graph checkpoint config needs a thread_id.",
            hint='Pass {"configurable": {"thread_id": "..."}}.',
        )
    checkpoint_id = configurable.get("checkpoint_id")
    return (
        str(configurable["thread_id"]),
        str(configurable.get("checkpoint_ns", "")),
        str(checkpoint_id) if checkpoint_id else None,
    )


def _matches(metadata: CheckpointMetadata, wanted: dict[str, Any] | None) -> bool:
    stored: dict[str, Any] = dict(metadata)
    return all(stored.get(key) == value for key, value in (wanted or {}).items())


def _async_only(method: str) -> NoReturn:
    raise ConfigurationError(
        f"JournalSaver.{method} is not supported: the saver only works asynchronously.",
        hint="Run the graph with ainvoke()/astream(), or a GraphRuntime's run()/stream(), "
        "which drive it on their own event loop.",
    )
