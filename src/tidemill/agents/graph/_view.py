"""What an agent's memory sees of a graph thread: the graph's conversation, on the journal's terms.

A `Memory` chooses from a `ThreadState`: its messages and the positions in
them where the current run, the latest user turn and an earlier summary's
coverage begin. The journal's messages are those of Tidemill's own events;
the graph's state has them too, in the same order, with whatever your own
nodes (or subgraphs) added in between. `thread_view` hands the memory the
graph's conversation with those positions moved onto it, so a window, a
summary or a run-only memory choose among everything the graph holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from tidemill.agents.journal import ThreadState
from tidemill.types import Message, Role

__all__ = ["thread_view"]


def thread_view(state: ThreadState, messages: Sequence[Message]) -> ThreadState:
    """`state` with the graph's `messages` as its conversation, its positions moved onto them.

    Examples:
        >>> from tidemill.agents.journal import UserInput
        >>> state = ThreadState("t")
        >>> state.apply(1, UserInput(messages=(Message.user("q1"),), run_id="r1"))
        >>> state.apply(2, UserInput(messages=(Message.user("q2"),), run_id="r2"))
        >>> note = Message.user("A note from a node.")
        >>> view = thread_view(state, [Message.user("q1"), note, Message.user("q2")])
        >>> view.run_start, view.last_user, [m.content for m in view.messages[view.run_start :]]
        (2, 2, ['q2'])
    """
    journal = state.messages
    if len(journal) == len(messages) and journal == list(messages):
        return state
    positions = _positions(journal, messages)

    def moved(index: int) -> int:
        if index < len(positions):
            return positions[index]
        return positions[-1] + 1 if positions else 0

    run_start = moved(state.run_start)
    last_user = next(
        (i for i in range(len(messages) - 1, run_start - 1, -1) if messages[i].role == Role.USER),
        run_start,
    )
    return dataclasses.replace(
        state,
        messages=list(messages),
        run_start=run_start,
        last_user=last_user,
        summary_upto=moved(state.summary_upto) if state.summary_upto else 0,
    )


def _positions(journal: Sequence[Message], messages: Sequence[Message]) -> list[int]:
    """Where each of the journal's messages is in the graph's, in order, as far as they match."""
    positions: list[int] = []
    at = 0
    for message in journal:
        while at < len(messages) and messages[at] != message:
            at += 1
        if at == len(messages):
            break  # the graph does not have it (an edited graph that dropped it)
        positions.append(at)
        at += 1
    return positions
