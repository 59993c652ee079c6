"""The conformance suite: what every `Checkpointer` backend must do.

Each check is an async function that takes a checkpointer, exercises one part
of the protocol and raises `AssertionError`, saying what went wrong, when the
backend does not conform. `validate` runs them all and returns the failure
messages, so a backend conforms when it returns an empty list. The suite
needs no test framework; a third-party backend can run it from its own tests:

    failures = await validate(MyCheckpointer(...))
    assert not failures, failures

Checks use thread ids that start with a random token, so several runs can
share one database, and only `check_prune` touches threads it did not
create: it removes every thread whose newest record is older than a fraction
of a second, so run the suite against a store that holds nothing you need.

`COMPACTION_CHECKS` are for a backend made with `max_history` (a bounded
journal: `validate(MyCheckpointer(max_history=6), checks=COMPACTION_CHECKS)`);
`CHECKS` for one made without it.

Who owns what: `_protocol` checks what each call promises (seqs, stale
appends, reads, listing, deletes, pruning, timestamps), `_concurrency`
racing appends on one loop and from OS threads, `_round_trip` that every
event kind, text and number reads back exactly, `_compaction` bounded
journals and forks; `_samples` holds `sample_events`, and `_harness` the
steps the checks share.

Examples:
    >>> import asyncio
    >>> from tidemill.agents.checkpoint import MemoryCheckpointer
    >>> asyncio.run(check_read_after_returns_tail(MemoryCheckpointer()))
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from tidemill.agents.checkpoint._base import Checkpointer
from tidemill.agents.checkpoint.conformance._compaction import (
    check_compaction_big_append,
    check_compaction_keeps_bound_and_state,
    check_compaction_keeps_graph_events,
    check_compaction_racing_appends_one_wins,
    check_compaction_stale_after_conflicts,
    check_fork,
    check_fork_inside_compacted_prefix,
    conversation,
)
from tidemill.agents.checkpoint.conformance._concurrency import (
    check_appends_from_os_threads,
    check_concurrent_appends_one_wins,
    check_os_thread_race_one_wins,
)
from tidemill.agents.checkpoint.conformance._protocol import (
    check_created_at,
    check_delete,
    check_empty_append_stores_nothing,
    check_prune,
    check_read_after_returns_tail,
    check_seqs_contiguous,
    check_stale_after_conflicts,
    check_threads_sorted,
    check_unknown_thread_reads_empty,
)
from tidemill.agents.checkpoint.conformance._round_trip import (
    check_event_kinds_round_trip,
    check_json_numbers_round_trip,
    check_large_payload_round_trip,
    check_nul_character_round_trips,
    check_unencodable_event_is_rejected,
    check_unicode_round_trip,
)
from tidemill.agents.checkpoint.conformance._samples import sample_events

__all__ = [
    "CHECKS",
    "COMPACTION_CHECKS",
    "Check",
    "check_appends_from_os_threads",
    "check_compaction_big_append",
    "check_compaction_keeps_bound_and_state",
    "check_compaction_keeps_graph_events",
    "check_compaction_racing_appends_one_wins",
    "check_compaction_stale_after_conflicts",
    "check_concurrent_appends_one_wins",
    "check_created_at",
    "check_delete",
    "check_empty_append_stores_nothing",
    "check_event_kinds_round_trip",
    "check_fork",
    "check_fork_inside_compacted_prefix",
    "check_json_numbers_round_trip",
    "check_large_payload_round_trip",
    "check_nul_character_round_trips",
    "check_os_thread_race_one_wins",
    "check_prune",
    "check_read_after_returns_tail",
    "check_seqs_contiguous",
    "check_stale_after_conflicts",
    "check_threads_sorted",
    "check_unencodable_event_is_rejected",
    "check_unicode_round_trip",
    "check_unknown_thread_reads_empty",
    "conversation",
    "sample_events",
    "validate",
]

Check = Callable[[Checkpointer], Awaitable[None]]
"""A conformance check: raises `AssertionError` when the backend does not conform."""


CHECKS: list[Check] = [
    check_event_kinds_round_trip,
    check_seqs_contiguous,
    check_stale_after_conflicts,
    check_read_after_returns_tail,
    check_unknown_thread_reads_empty,
    check_threads_sorted,
    check_delete,
    check_prune,
    check_concurrent_appends_one_wins,
    check_appends_from_os_threads,
    check_os_thread_race_one_wins,
    check_unicode_round_trip,
    check_nul_character_round_trips,
    check_json_numbers_round_trip,
    check_large_payload_round_trip,
    check_created_at,
    check_empty_append_stores_nothing,
    check_unencodable_event_is_rejected,
    check_fork,
]
"""Every check for a backend without `max_history`, in the order `validate` runs them."""

COMPACTION_CHECKS: list[Check] = [
    check_compaction_keeps_bound_and_state,
    check_compaction_big_append,
    check_compaction_stale_after_conflicts,
    check_compaction_racing_appends_one_wins,
    check_compaction_keeps_graph_events,
    check_fork_inside_compacted_prefix,
]
"""The checks for a backend made with `max_history`: `validate(..., checks=COMPACTION_CHECKS)`."""


async def validate(
    checkpointer: Checkpointer, *, checks: Sequence[Check] = CHECKS, time_limit: float = 120.0
) -> list[str]:
    """Run the conformance checks against a checkpointer.

    Args:
        checkpointer: The backend to check. Checks add threads to it, and
            `check_prune` removes old ones: use a store that holds nothing
            you need.
        checks: The checks to run; all of them by default.
        time_limit: Seconds each check may take.

    Returns:
        One message per failing check, `"check_name: what went wrong"`; an
        empty list when the backend conforms.

    Examples:
        >>> import asyncio
        >>> from tidemill.agents.checkpoint import SQLiteCheckpointer
        >>> asyncio.run(validate(SQLiteCheckpointer(":memory:")))
        []
        >>> bounded = SQLiteCheckpointer(":memory:", max_history=6)
        >>> asyncio.run(validate(bounded, checks=COMPACTION_CHECKS))
        []
    """
    failures: list[str] = []
    for check in checks:
        name = getattr(check, "__name__", repr(check))
        try:
            await asyncio.wait_for(check(checkpointer), time_limit)
        except AssertionError as exc:
            failures.append(f"{name}: {exc}")
        except TimeoutError:
            failures.append(f"{name}: did not finish within {time_limit} s")
        except Exception as exc:
            failures.append(f"{name}: raised {type(exc).__name__}: {exc}")
    return failures
