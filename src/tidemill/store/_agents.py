"""`AgentQueries`: what `ai_agent` steps keep in the store: journals and conversation memory."""

from __future__ import annotations

from collections.abc import Sequence

from tidemill.store._rows import MemoryRow
from tidemill.store._statements import Statements, dumps

__all__ = ["AgentQueries"]


class AgentQueries(Statements):
    """The statements that read an agent thread's journal and keep an agent's memory."""

    def journal(self, thread_id: str) -> list[tuple[int, str]]:
        """An agent thread's journal entries as `(seq, JSON text)`, oldest first.

        The journal table is the agent library's (`tidemill_journal`, kept by
        its SQLite or PostgreSQL checkpointer in the store's database); an
        `ai_agent` step creates it on first use.
        """
        rows = self.all(
            "SELECT seq, payload FROM tidemill_journal WHERE thread_id = ? ORDER BY seq",
            (thread_id,),
        )
        return [
            (int(seq), payload if isinstance(payload, str) else dumps(payload))
            for seq, payload in rows
        ]

    def append_agent_memory(
        self,
        memory_id: str,
        step_key: str,
        entries: Sequence[tuple[str, str]],
        *,
        run_id: str,
        now: float,
    ) -> None:
        """Append `(role, content)` messages to the memory of `(memory_id, step_key)`.

        Each message takes the next `seq` of that memory; on PostgreSQL, writers
        of one memory are serialised by a transaction-scoped advisory lock.
        """
        if self.dialect == "postgres":
            self.execute(
                "SELECT pg_advisory_xact_lock(hashtextextended(?, 0))",
                (dumps(["tm_agent_memory", memory_id, step_key]),),
            )
        row = self.one(
            "SELECT MAX(seq) FROM tm_agent_memory WHERE memory_id = ? AND step_key = ?",
            (memory_id, step_key),
        )
        seq = 0 if row is None or row[0] is None else int(row[0])
        for role, content in entries:
            seq += 1
            self.execute(
                "INSERT INTO tm_agent_memory (memory_id, step_key, seq, role, content, run_id, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (memory_id, step_key, seq, role, content, run_id, now),
            )

    def agent_memory(self, memory_id: str, step_key: str, limit: int) -> list[tuple[str, str]]:
        """The newest `limit` messages of a memory as `(role, content)`, oldest first."""
        rows = self.all(
            "SELECT role, content FROM tm_agent_memory WHERE memory_id = ? AND step_key = ? "
            "ORDER BY seq DESC LIMIT ?",
            (memory_id, step_key, limit),
        )
        return [(str(role), str(content)) for role, content in reversed(rows)]

    def agent_memory_runs(self, memory_id: str, step_key: str) -> list[str]:
        """The run of each message of a memory, oldest first (a run per exchange it wrote)."""
        rows = self.all(
            "SELECT run_id FROM tm_agent_memory WHERE memory_id = ? AND step_key = ? ORDER BY seq",
            (memory_id, step_key),
        )
        return [str(run_id) for (run_id,) in rows]

    def agent_memories(self, memory_id: str | None = None, *, limit: int = 100) -> list[MemoryRow]:
        """Stored memories (of one memory id, or all), most recently written first."""
        where, params = ("WHERE memory_id = ? ", (memory_id,)) if memory_id else ("", ())
        rows = self.all(
            "SELECT memory_id, step_key, COUNT(*), MAX(at) FROM tm_agent_memory "
            f"{where}GROUP BY memory_id, step_key ORDER BY MAX(at) DESC, memory_id, step_key "
            "LIMIT ?",
            (*params, limit),
        )
        return [MemoryRow(str(m), str(s), int(n), float(at)) for m, s, n, at in rows]

    def delete_agent_memory(self, memory_id: str, step_key: str | None = None) -> int:
        """Delete a memory (of every step, or of one); return how many messages went."""
        if step_key is None:
            cursor = self.execute("DELETE FROM tm_agent_memory WHERE memory_id = ?", (memory_id,))
        else:
            cursor = self.execute(
                "DELETE FROM tm_agent_memory WHERE memory_id = ? AND step_key = ?",
                (memory_id, step_key),
            )
        return int(cursor.rowcount)
