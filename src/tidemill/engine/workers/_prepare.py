"""What executing a claimed job needs, read once: its run, its step, the values it sees.

A worker reads it in the transaction that claims the job (or that recorded
the job before it, for a job handed straight to it), from caches when it can:
a run's row and context do not change while its steps run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tidemill.engine.runs._context import context_for, load_definition
from tidemill.engine.runs._scope import Definitions
from tidemill.flows import Step
from tidemill.store import JobRow, RunRow, Tx

__all__ = ["Prepared", "Preparer", "known_results"]

_CACHED_RUNS = 1024


@dataclass(slots=True)
class Prepared:
    """A claimed job and what executing it needs."""

    job: JobRow
    run: RunRow
    step: Step
    context: dict[str, Any]
    sent: float = 0.0
    """When the transaction that claimed the job was sent (`time.monotonic`): its lease's start."""


class Preparer:
    """Reads what executing a job needs, keeping the newest runs' rows and contexts."""

    def __init__(self, defs: Definitions) -> None:
        self.defs = defs
        self._runs: dict[str, tuple[RunRow, dict[str, Any]]] = {}

    def __call__(
        self,
        tx: Tx,
        *,
        job: JobRow,
        known: dict[str, Any] | None = None,
        run: tuple[RunRow, Any] | None = None,
    ) -> Prepared:
        """Read what executing `job` needs: its run, step and the values its expressions see.

        `run` is the job's run and its context when the claim brought them;
        `known` the results recorded in this transaction (`known_results`).
        """
        cached = self._runs.get(job.run_id)
        if cached is None and run is not None:
            cached = (run[0], run[1] or {})
        elif cached is not None and run is not None and run[0].masked:
            cached[0].masked = True  # the claim read it afresh: a step returned a secret since
        if cached is None:
            found = tx.run_and_payload(job.run_id, "context")
            assert found is not None
            cached = (found[0], found[1] or {})
        if job.run_id not in self._runs:
            if len(self._runs) >= _CACHED_RUNS:
                self._runs.pop(next(iter(self._runs)))
            self._runs[job.run_id] = cached
        row, payload = cached
        load_definition(tx, self.defs, row.digest)
        step = self.defs.scope(row.digest, row.scope).by_id[job.step_id]
        context = context_for(tx, self.defs, row, step, payload, known)
        return Prepared(job, row, step, context)


def known_results(recorded: dict[tuple[str, str], Any], run_id: str) -> dict[str, Any]:
    """The results a transaction recorded for the steps of `run_id`, by step id."""
    return {step: value for (run, step), value in recorded.items() if run == run_id}
