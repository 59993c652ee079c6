"""`run_page` on SQLite and PostgreSQL: keyset pages, and each way a caller reaches runs."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tidemill.store import RunReach, RunRow, Store, StoreURL, Tx, run_page, upgrade


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    store = Store(StoreURL.parse(store_url))
    await upgrade(store)
    try:
        yield store
    finally:
        await store.close()


RUNS = [
    # id, run_as, workspace, path, created_at (two share one moment: the id breaks the tie)
    ("r01", "olga", "w", "f/team/flow", 1.0),
    ("r02", "max", "w", "u/max/flow", 2.0),
    ("r03", "vic", "w", "f/team/flow", 3.0),
    ("r04", "olga", "w", "f/ops/deploy", 4.0),
    ("r05", "max", "w", "f/ops/deploy", 4.0),
    ("r06", "ann", "other", "f/team/flow", 5.0),
    ("r07", None, None, None, 6.0),
    ("r08", "olga", "w", "f/ops/secret", 7.0),
]


def fill(tx: Tx) -> None:
    tx.put_definition("d", "f", "{}", 1.0)
    for run_id, run_as, workspace, path, at in RUNS:
        source = None if workspace is None else {"workspace": workspace, "path": path}
        row = RunRow(
            run_id, run_id, None, None, None, "[]", "f", "d", "succeeded", None, at, at, at, None
        )
        row.run_as, row.source = run_as, source
        tx.insert_run(row)


async def ids(
    store: Store,
    reach: RunReach,
    *,
    limit: int = 50,
    before: tuple[float, str] | None = None,
    status: str | None = None,
    path: str | None = None,
) -> list[str]:
    rows = await store.transact(
        lambda tx: run_page(tx, reach, limit=limit, before=before, status=status, path=path)
    )
    return [row.id for row, _ in rows]


async def test_pages_follow_each_other_newest_first_without_repeats(store: Store) -> None:
    await store.transact(fill)
    reach = RunReach("w", everything=True, unsourced=True)
    seen: list[str] = []
    before = None
    while page := await ids(store, reach, limit=2, before=before):
        seen.extend(page)
        at = next(r[4] for r in RUNS if r[0] == page[-1])
        before = (at, page[-1])
    assert seen == ["r08", "r07", "r05", "r04", "r03", "r02", "r01"]
    rows = await store.transact(lambda tx: run_page(tx, reach))
    assert {shown for _, shown in rows} == {"succeeded"}


async def test_each_way_of_reaching_runs_is_filtered_in_sql(store: Store) -> None:
    await store.transact(fill)
    admin = RunReach("w", everything=True)
    assert await ids(store, admin) == ["r08", "r05", "r04", "r03", "r02", "r01"]
    assert await ids(store, RunReach(None, everything=True)) == [r[0] for r in RUNS][::-1]
    olga = RunReach("w", run_as="olga", folders=("u/olga", "f/team"))
    assert await ids(store, olga) == ["r08", "r04", "r03", "r01"]
    max_ = RunReach("w", run_as="max", folders=("u/max",))
    assert await ids(store, max_) == ["r05", "r02"]
    item = RunReach("w", run_as="zed", paths=("f/ops/deploy",))
    assert await ids(store, item) == ["r05", "r04"]
    assert await ids(store, RunReach("w")) == []
    scoped = RunReach("w", everything=True, unsourced=True, within=("u/max/",))
    assert await ids(store, scoped) == ["r02"]
    # The filters narrow every way alike.
    assert await ids(store, olga, path="f/ops/deploy") == ["r04"]
    assert await ids(store, item, path="f/ops/deploy", limit=1) == ["r05"]
    assert await ids(store, olga, path="f/team/flow") == ["r03", "r01"]
    assert await ids(store, admin, status="failed") == []
    assert await ids(store, olga, status="running") == []
