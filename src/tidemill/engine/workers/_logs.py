"""`LiveLogs`: what the steps a worker runs print, stored while they print it.

A script step hands its output on as it is written (`ScriptPool.run`'s
`on_output`); the worker keeps it here, per job, and writes what has
gathered every `interval` seconds in one transaction for all its jobs (sooner
when a job's buffer passes `limit` bytes): never a transaction per line.
When the step ends, the rest goes into the transaction that records it; when
it is stopped (its run cancelled, its lease lost, the worker abandoning it),
the rest is written by itself, so what a step printed is kept however it ends.

Every secret the job resolved (`Secrets`) is masked as `***` before its
output leaves the writer; the end of a piece that may begin a secret is
kept back until the next write, so a secret printed in two pieces is
masked too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass, field

from tidemill.engine._step_env import Secrets
from tidemill.errors import StoreError
from tidemill.store import JobRow, Store, Tx

__all__ = ["LiveLogs", "LogWriter"]

log = logging.getLogger("tidemill.worker")

Chunks = list[tuple[str, str]]


@dataclass(slots=True)
class LogWriter:
    """One job's output not yet written: `(stream, text)` pieces, a stream's run joined."""

    run_id: str
    job_id: int
    logs: LiveLogs
    chunks: Chunks = field(default_factory=list)
    size: int = 0
    secrets: Secrets = field(default_factory=Secrets)
    """The job's resolved secrets, masked in all it hands over."""

    def __call__(self, stream: str, text: str) -> None:
        """Keep a piece the step printed (called by the script pool)."""
        if not text:
            return
        if self.chunks and self.chunks[-1][0] == stream:
            self.chunks[-1] = (stream, self.chunks[-1][1] + text)
        else:
            self.chunks.append((stream, text))
        self.size += len(text)
        if self.size >= self.logs.limit:
            self.logs.full.set()

    def take(self, *, final: bool = True) -> Chunks:
        """The pieces kept so far, secrets masked, handed over (the writer starts empty again).

        Unless `final`, the end of the last piece that may begin a secret
        stays in the writer, for the next take to mask whole.
        """
        chunks, self.chunks, self.size = self.chunks, [], 0
        if not self.secrets or not chunks:
            return chunks
        chunks = [(stream, self.secrets.mask(text)) for stream, text in chunks]
        if not final:
            stream, text = chunks[-1]
            keep = self.secrets.pending(text)
            if keep:
                chunks[-1] = (stream, text[:-keep])
                self.chunks, self.size = [(stream, text[-keep:])], keep
                if not chunks[-1][1]:
                    chunks.pop()
        return chunks


class LiveLogs:
    """The output of a worker's running steps, written to the store as it gathers.

    Args:
        store: Where the logs go (`tm_logs`).
        interval: Seconds between writes while steps run (`Worker(log_flush=...)`).
        limit: Characters one job may gather before a write comes early.
    """

    def __init__(self, store: Store, *, interval: float = 1.0, limit: int = 256 * 1024) -> None:
        self.store = store
        self.interval = interval
        self.limit = limit
        self.full = asyncio.Event()
        self._writers: dict[int, LogWriter] = {}
        self._lock = asyncio.Lock()  # a job's pieces are written in the order printed

    def open(self, job: JobRow, secrets: Secrets | None = None) -> LogWriter:
        """Start keeping `job`'s output; the writer is what its steps hand it to.

        `secrets` are the job's, masked in what is written (they may be added
        to while the step runs).
        """
        kept = Secrets() if secrets is None else secrets  # an empty one is falsy: not `or`
        writer = LogWriter(job.run_id, job.id, self, secrets=kept)
        self._writers[job.id] = writer
        return writer

    async def close(self, job: JobRow) -> Chunks:
        """Stop keeping `job`'s output; return what is not written yet.

        The caller records it with the job's outcome. A write of earlier
        pieces still in flight commits first, so the rest lands after them.
        """
        async with self._lock:
            writer = self._writers.pop(job.id, None)
            return [] if writer is None else writer.take()

    async def keep(self, job: JobRow, chunks: Chunks | None = None) -> None:
        """Write `job`'s unwritten output now (its step was stopped), then stop keeping it.

        `chunks` is output already handed back by `close`; a failure to write
        is logged, never raised (the step is being stopped already).
        """
        async with self._lock:
            writer = self._writers.pop(job.id, None)
            rest = (chunks or []) + ([] if writer is None else writer.take())
            if not rest:
                return
            try:
                await self.store.transact(lambda tx: _append(tx, [(job.run_id, job.id, rest)]))
            except StoreError as exc:
                log.warning("job %s: could not store what it printed: %s", job.id, exc)

    async def flush(self) -> None:
        """Write every running job's gathered output, in one transaction."""
        self.full.clear()
        async with self._lock:
            batch = [
                (w.run_id, w.job_id, w.take(final=False))
                for w in self._writers.values()
                if w.chunks
            ]
            batch = [entry for entry in batch if entry[2]]
            if not batch:
                return
            try:
                await self.store.transact(lambda tx: _append(tx, batch))
            except StoreError as exc:  # keep them for the next write, in front of newer pieces
                log.warning("storing steps' output failed, will retry: %s", exc)
                for _, job_id, chunks in batch:
                    writer = self._writers[job_id]  # closing a job waits for this lock
                    writer.chunks[:0] = chunks
                    writer.size += sum(len(text) for _, text in chunks)

    async def run(self) -> None:
        """Write gathered output every `interval` seconds (sooner when a job has much), forever."""
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.full.wait(), self.interval)
            await self.flush()


def _append(tx: Tx, batch: list[tuple[str, int, Chunks]]) -> None:
    now = time.time()
    for run_id, job_id, chunks in batch:
        tx.append_logs(run_id, job_id, chunks, now)
