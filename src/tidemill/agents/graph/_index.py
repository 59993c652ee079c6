"""`GraphIndex`: a thread's LangGraph checkpoints, folded from its journal.

A `GraphCheckpoint` event stores a checkpoint with only the channel values it
changed (those LangGraph names in `new_versions`); every value is kept once,
under its channel and version, and a checkpoint is put back together from
the versions it lists. `GraphWrites` events are keyed like LangGraph's own
savers do: a task's regular write is kept the first time it is stored,
a special one (an error, an interrupt, a resume) the last time.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointMetadata, CheckpointTuple
from langgraph.checkpoint.serde.base import SerializerProtocol
from pydantic import JsonValue

from tidemill.agents.graph._codec import decode
from tidemill.agents.journal import GraphCheckpoint, GraphWrites, JournalEvent, ThreadSnapshot

__all__ = ["GraphIndex"]


@dataclass(frozen=True, slots=True)
class _Stored:
    checkpoint: dict[str, JsonValue]
    """The checkpoint without its channel values."""
    metadata: JsonValue
    parent_id: str | None


@dataclass(frozen=True, slots=True)
class _Write:
    task_id: str
    channel: str
    value: JsonValue
    task_path: str


@dataclass
class GraphIndex:
    """The graph events of one thread, ready to answer a saver's reads."""

    thread_id: str
    checkpoints: dict[str, dict[str, _Stored]] = field(default_factory=dict)
    """By namespace, then checkpoint id."""
    values: dict[tuple[str, str, str], JsonValue] = field(default_factory=dict)
    """Stored channel values by namespace, channel and version."""
    writes: dict[tuple[str, str], dict[tuple[str, int], _Write]] = field(default_factory=dict)
    """Pending writes by namespace and checkpoint id, then task id and index."""

    def add(self, event: JournalEvent) -> None:
        """Fold one journal event in; events of other kinds are ignored."""
        if isinstance(event, GraphCheckpoint):
            self._checkpoint(event)
        elif isinstance(event, GraphWrites):
            self._writes(event)
        elif isinstance(event, ThreadSnapshot):
            # A compacted or forked thread: the snapshot holds every graph event before it.
            self.checkpoints, self.values, self.writes = {}, {}, {}
            for kept in event.graph:
                self.add(kept)

    def fresh_writes(self, event: GraphWrites) -> GraphWrites | None:
        """`event` without the regular writes already stored, or None if nothing is new."""
        stored = self.writes.get((event.checkpoint_ns, event.checkpoint_id), {})
        kept = tuple(w for w in event.writes if w.idx < 0 or (event.task_id, w.idx) not in stored)
        if not kept:
            return None
        return (
            event if len(kept) == len(event.writes) else event.model_copy(update={"writes": kept})
        )

    def missing(self, namespace: str, versions: Mapping[str, object]) -> list[str]:
        """The channels of `versions` whose value at that version is not stored."""
        return [
            channel
            for channel, version in versions.items()
            if (namespace, channel, str(version)) not in self.values
        ]

    def latest(self, namespace: str) -> str | None:
        """The newest checkpoint id in `namespace`: ids sort in creation order."""
        stored = self.checkpoints.get(namespace)
        return max(stored) if stored else None

    def ids(self, namespace: str) -> Iterator[str]:
        """Checkpoint ids in `namespace`, newest first."""
        return iter(sorted(self.checkpoints.get(namespace, {}), reverse=True))

    def namespaces(self) -> list[str]:
        """Every namespace with a checkpoint."""
        return sorted(self.checkpoints)

    def tuple(
        self, namespace: str, checkpoint_id: str, serde: SerializerProtocol
    ) -> CheckpointTuple | None:
        """The checkpoint as LangGraph reads it, its values and pending writes included."""
        stored = self.checkpoints.get(namespace, {}).get(checkpoint_id)
        if stored is None:
            return None
        checkpoint = {key: decode(value, serde) for key, value in stored.checkpoint.items()}
        versions = checkpoint.get("channel_versions") or {}
        channel_values: dict[str, Any] = {}
        for channel, version in versions.items():
            key = (namespace, channel, str(version))
            if key in self.values:
                channel_values[channel] = decode(self.values[key], serde)
        checkpoint["channel_values"] = channel_values
        writes = sorted(
            self.writes.get((namespace, checkpoint_id), {}).items(),
            key=lambda item: (item[1].task_path, item[0][0], item[0][1]),
        )
        return CheckpointTuple(
            config=self._config(namespace, checkpoint_id),
            checkpoint=cast(Checkpoint, checkpoint),
            metadata=cast(CheckpointMetadata, decode(stored.metadata, serde) or {}),
            parent_config=(self._config(namespace, stored.parent_id) if stored.parent_id else None),
            pending_writes=[(w.task_id, w.channel, decode(w.value, serde)) for _, w in writes],
        )

    def _config(self, namespace: str, checkpoint_id: str) -> RunnableConfig:
        return {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": namespace,
                "checkpoint_id": checkpoint_id,
            }
        }

    def _checkpoint(self, event: GraphCheckpoint) -> None:
        body = event.checkpoint if isinstance(event.checkpoint, dict) else {}
        namespace = event.checkpoint_ns
        changed = body.get("channel_values")
        versions = body.get("channel_versions")
        if isinstance(changed, dict) and isinstance(versions, dict):
            for channel, value in changed.items():
                version = versions.get(channel)
                if version is not None:
                    self.values[(namespace, channel, str(version))] = value
        rest = {key: value for key, value in body.items() if key != "channel_values"}
        self.checkpoints.setdefault(namespace, {})[event.checkpoint_id] = _Stored(
            rest, event.metadata, event.parent_id
        )

    def _writes(self, event: GraphWrites) -> None:
        stored = self.writes.setdefault((event.checkpoint_ns, event.checkpoint_id), {})
        for write in event.writes:
            key = (event.task_id, write.idx)
            if write.idx >= 0 and key in stored:
                continue
            stored[key] = _Write(event.task_id, write.channel, write.value, event.task_path)
