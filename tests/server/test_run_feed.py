"""`GET /api/runs/feed`: the runs list's live changes, on SQLite and PostgreSQL.

A caller gets the changes of the runs it sees and no others, resumes after
`Last-Event-ID` missing nothing and seeing nothing twice, and its stream
ends cleanly when the server stops. The feed itself (`RunFeed`) is one tail
for every subscriber: a slow one is let go of and catches up from the
store, still getting every change once, in order.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from tests.server.conftest import Live, serving, sse_messages

from tidemill.engine import AsyncEngine
from tidemill.flows import Flow
from tidemill.server import _run_feed
from tidemill.server._run_feed import Delivery, RunChange, RunFeed, changes

pytestmark = pytest.mark.timeout(90)

MAX_FLOW = {
    "steps": [{"id": "hi", "script": "def main(name: str = 'max'):\n    return 'hi ' + name\n"}]
}


class Feed:
    """A feed response's messages so far, read on demand (the feed never ends by itself)."""

    def __init__(self, response: httpx.Response) -> None:
        self.chunks = response.iter_text()
        self.buffer = ""

    def until(self, done: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
        """Every message so far, once `done` holds of them."""
        messages = sse_messages(self.buffer)
        while not done(messages):
            chunk = next(self.chunks, None)
            assert chunk is not None, f"the stream ended early: {self.buffer[-500:]}"
            self.buffer += chunk
            messages = sse_messages(self.buffer)
        return messages


def read_until(
    response: httpx.Response, done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    return Feed(response).until(done)


def finished(*run_ids: str) -> Callable[[list[dict[str, Any]]], bool]:
    """Whether the messages hold each run's `run_finished`."""
    return lambda ms: (
        set(run_ids) <= {m["data"]["run_id"] for m in ms if m["event"] == "run_finished"}
    )


def wait_finished(client: httpx.Client, run_id: str) -> None:
    deadline = time.monotonic() + 30
    while client.get(f"/api/runs/{run_id}").json()["status"] not in ("succeeded", "failed"):
        assert time.monotonic() < deadline, f"run {run_id} did not finish"
        time.sleep(0.05)


def test_a_member_gets_the_changes_of_his_runs_and_not_of_others(live: Live) -> None:
    live.ws.acting_as("max").write("u/max/flow", "flow", MAX_FLOW)
    with (
        live.client("max") as max_,
        live.client("olga") as olga,
        max_.stream("GET", "/api/runs/feed") as stream,
    ):
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        hidden = olga.post("/api/runs", json={"path": "f/team/flow", "inputs": {"name": "o"}})
        assert hidden.status_code == 201, hidden.text
        wait_finished(olga, hidden.json()["id"])  # its changes come before max's run's
        mine = max_.post("/api/runs", json={"path": "u/max/flow"}).json()["id"]
        messages = read_until(stream, finished(mine))
    assert {m["data"]["run_id"] for m in messages} == {mine}
    assert [m["event"] for m in messages] == ["run_queued", "run_finished"]
    assert [m["data"]["status"] for m in messages] == ["running", "succeeded"]
    assert all(m["id"] == str(m["data"]["id"]) for m in messages)
    with live.client("ada") as ada, ada.stream("GET", "/api/runs/feed?after=0") as stream:
        seen = read_until(stream, finished(mine, hidden.json()["id"]))
    assert {hidden.json()["id"], mine} <= {m["data"]["run_id"] for m in seen}


def test_a_wait_for_a_person_and_its_decision_are_changes(live: Live) -> None:
    live.ws.write("f/team/ask", "flow", {"steps": [{"id": "ask", "approval": {"message": "Go?"}}]})
    with live.client("olga") as olga, olga.stream("GET", "/api/runs/feed") as stream:
        feed = Feed(stream)
        run_id = olga.post("/api/runs", json={"path": "f/team/ask"}).json()["id"]
        asked = feed.until(lambda ms: any(m["event"] == "wait_requested" for m in ms))
        waits = olga.get("/api/approvals", params={"run_id": run_id}).json()
        assert olga.post(f"/api/approvals/{waits[0]['id']}/approve", json={}).status_code == 200
        every = feed.until(finished(run_id))
    assert [m["event"] for m in asked] == ["run_queued", "wait_requested"]
    assert asked[-1]["data"]["status"] is None and asked[-1]["data"]["run_id"] == run_id
    assert [m["event"] for m in every] == [
        "run_queued", "wait_requested", "wait_decided", "run_finished"
    ]  # fmt: skip


def test_a_reconnect_with_last_event_id_misses_nothing_and_repeats_nothing(live: Live) -> None:
    with live.client("olga") as client:
        with client.stream("GET", "/api/runs/feed") as stream:
            ids = [
                client.post(
                    "/api/runs", json={"path": "f/team/flow", "inputs": {"name": str(n)}}
                ).json()["id"]
                for n in range(3)
            ]
            whole = read_until(stream, finished(*ids))
        # A client that saw the first two changes, lost its connection, and came back.
        seen = whole[:2]
        with client.stream(
            "GET", "/api/runs/feed", headers={"Last-Event-ID": seen[-1]["id"]}
        ) as stream:
            rest = read_until(stream, lambda ms: len(ms) >= len(whole) - 2)
    assert [m["id"] for m in seen + rest] == [m["id"] for m in whole]
    assert len(whole) == 6  # each run: queued, finished
    assert [int(m["id"]) for m in whole] == sorted(int(m["id"]) for m in whole)


def test_the_stream_ends_cleanly_when_the_server_stops(
    server_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[bytes] = []
    failed: list[BaseException] = []
    opened = threading.Event()

    def follow(url: str, token: str) -> None:
        headers = {"Authorization": f"Bearer {token}"}
        try:
            with (
                httpx.Client(base_url=url, headers=headers, timeout=30) as client,
                client.stream("GET", "/api/runs/feed") as stream,
            ):
                opened.set()
                read.extend(stream.iter_bytes())
        except BaseException as exc:
            failed.append(exc)

    with serving(server_store, monkeypatch) as served:
        reader = threading.Thread(target=follow, args=(served.url, served.tokens["max"]))
        reader.start()
        assert opened.wait(10)
        started = time.monotonic()
    # `serving` stopped the server: it did not wait for the open feed, which ended.
    reader.join(timeout=10)
    assert not reader.is_alive() and not failed, failed
    assert time.monotonic() - started < 10
    assert b"".join(read).startswith(b"retry: 1000")


def test_the_feed_refuses_anonymous_callers_other_scopes_and_bad_input(live: Live) -> None:
    with live.anonymous() as client:
        assert client.get("/api/runs/feed").status_code == 401
    token = live.token("olga", "items:read")
    with httpx.Client(base_url=live.url, headers={"Authorization": f"Bearer {token}"}) as client:
        assert client.get("/api/runs/feed").status_code == 403
    with live.client("olga") as client:
        refused = client.get("/api/runs/feed", params={"after": -1})
        assert refused.status_code == 422 and refused.json()["type"] == "InvalidRequest"
        assert client.get("/api/runs/feed", headers={"Last-Event-ID": "x" * 41}).status_code == 422


# --- the feed itself -----------------------------------------------------


@pytest.fixture
async def engine(store_url: str) -> AsyncIterator[AsyncEngine]:
    async with AsyncEngine(store_url, migrate=True) as engine:
        yield engine


def one_step() -> Flow:
    return Flow.model_validate({"steps": [{"id": "s", "identity": {}, "inputs": {"v": 1}}]})


async def test_a_slow_subscriber_is_let_go_of_and_catches_up_with_every_change(
    engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_run_feed, "BEHIND", 2)
    feed = RunFeed(engine, lambda c, place: f"{c.id}@{place}".encode())
    start = await engine.store.transact(lambda tx: changes(tx, after=0, limit=1_000_000))
    after = start[-1].id if start else 0
    mine: set[str] = set()

    def keep(change: RunChange) -> bool:
        return change.run_id in mine

    async def collect(stream: AsyncIterator[list[Any]], n: int) -> list[int]:
        got: list[int] = []
        while len(got) < n:
            got += [c.id for c, _ in await asyncio.wait_for(anext(stream), 20)]
        return got

    fast = feed.follow(after, keep, idle=0.05)
    slow = feed.follow(after, keep, idle=0.05)
    await anext(fast)  # both subscribed; the slow one reads nothing more for now
    await anext(slow)
    reading = asyncio.create_task(collect(fast, 8))  # each run: queued, finished
    async with engine.worker(concurrency=2, poll=0.05, pool_size=1):
        for _ in range(4):
            mine.add(await engine.submit(one_step()))
        for run_id in mine:
            await engine.wait(run_id, timeout=30)
    truth = [
        c.id
        for c in await engine.store.transact(lambda tx: changes(tx, after=after, limit=10_000))
        if c.run_id in mine
    ]
    assert len(truth) == 8
    assert await reading == truth
    assert await collect(slow, 8) == truth  # let go of (2 behind), then caught up from the store
    feed.stop()
    assert [b async for b in fast] == [] and [b async for b in slow] == []
    # A new feed starts from now: a subscriber resuming before that reads the store.
    later = RunFeed(engine, lambda c, place: b"")
    assert await collect(later.follow(after, keep, idle=0.05), 8) == truth
    later.stop()


async def test_a_change_whose_transaction_commits_late_is_sent_late(
    engine: AsyncEngine, store_url: str
) -> None:
    if store_url.startswith("sqlite"):
        pytest.skip("SQLite commits one transaction at a time, in the order of its ids")
    feed = RunFeed(engine, lambda c, place: f"{c.id}@{place}".encode())
    slow_run = await engine.submit(one_step())
    stream = feed.follow(None, lambda change: True, idle=0.05)
    await anext(stream)  # subscribed, from now
    written, commit = threading.Event(), threading.Event()

    def late(tx: Any) -> None:
        tx.add_event(slow_run, "run_started", {"status": "running"}, now=time.time())
        written.set()
        assert commit.wait(20)

    slow = asyncio.create_task(engine.store.transact(late))
    assert await asyncio.to_thread(written.wait, 20)  # it holds its id, uncommitted
    quick_run = await engine.submit(one_step())  # a later id, committed first
    got: list[Delivery] = []

    async def until_one_of(run_id: str) -> None:
        deadline = time.monotonic() + 10
        while not any(c.run_id == run_id for c, _ in got):
            assert time.monotonic() < deadline, f"no change of {run_id}: {got}"
            got.extend(await asyncio.wait_for(anext(stream), 10))

    try:
        await until_one_of(quick_run)
    finally:
        commit.set()
    await slow
    await until_one_of(slow_run)
    quick, late_one = got[0][0], got[-1][0]
    assert [c.kind for c, _ in got] == ["run_queued", "run_started"]
    assert late_one.id < quick.id  # it came after a later event was sent
    assert got[-1][1] == f"{late_one.id}@{quick.id}".encode()  # under the feed's place
    feed.stop()
