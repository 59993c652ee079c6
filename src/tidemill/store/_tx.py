"""`Tx`: the store's SQL, one method per operation, inside one transaction.

The operations are grouped by what they are about, one module each, and `Tx`
puts them together: runs, definitions, payloads and concurrency gates
(`_runs`), jobs (`_jobs`), claims and leases (`_claims`), results, logs and
usage (`_results`), approvals (`_approvals`), agents' journals and memory
(`_agents`), waiting steps and events sent to runs (`_waits`), schedules'
fires (`_schedule_fires`), webhooks' idempotency keys (`_hook_keys`), ended
runs found and pruned (`_retention`) and a run's events (`_events`, written
by the others in the same transaction as the change each describes), all
over the plumbing of `_statements`.
"""

from __future__ import annotations

from tidemill.store._agents import AgentQueries
from tidemill.store._approvals import ApprovalQueries
from tidemill.store._claims import ClaimQueries
from tidemill.store._hook_keys import HookKeyQueries
from tidemill.store._retention import RetentionQueries
from tidemill.store._schedule_fires import ScheduleFireQueries
from tidemill.store._waits import WaitQueries

__all__ = ["Tx"]


class Tx(
    ClaimQueries,
    ApprovalQueries,
    AgentQueries,
    WaitQueries,
    ScheduleFireQueries,
    HookKeyQueries,
    RetentionQueries,
):
    """The operations of one transaction.

    `Store.transact` builds one for each transaction and passes it to the
    function it runs; `Tx.offline` builds one with no database behind it.
    """
