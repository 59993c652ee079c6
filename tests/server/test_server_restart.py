"""The server restarted during a run, and the run finishing: `tidemill server` as real processes.

A flow of three script steps is submitted over HTTP: `first` appends a line
to a file and finishes, `slow` appends a line and waits for a gate file,
`last` returns the answer. While `slow` is in flight the server is stopped,
either killed (SIGKILL: a crash) or asked to stop (SIGTERM); a new server
process on the same store then finishes the run. Over HTTP the run succeeds
with the right result, `first` ran once, the event stream resumed with the
`Last-Event-ID` seen before the stop delivers the rest (ending in
`run_finished`), and the jobs say which process did what.

The servers run with `--lease 2`: after the crash, the new server takes the
step in flight over once the dead worker's claim runs out.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.conftest import POSTGRES_ENV, drop_postgres_schema, unique_schema

from tidemill.workspace import MasterKey, Workspace

SLOW = """\
import os
import time


def main(folder: str, n: int):
    with open(os.path.join(folder, "slow.txt"), "a") as out:
        out.write(f"attempt {os.environ.get('TIDEMILL_ATTEMPT')}\\n")
    deadline = time.monotonic() + 20
    while not os.path.exists(os.path.join(folder, "gate")) and time.monotonic() < deadline:
        time.sleep(0.02)
    return n + 1
"""
FLOW = {
    "summary": "Three steps, the second slow",
    "inputs": {
        "type": "object",
        "properties": {"folder": {"type": "string"}, "n": {"type": "integer"}},
    },
    "steps": [
        {
            "id": "first",
            "script": "import os\n\n\ndef main(folder: str, n: int):\n"
            "    with open(os.path.join(folder, 'first.txt'), 'a') as out:\n"
            "        out.write('first\\n')\n"
            "    return 2 * n\n",
            "inputs": {"folder": {"expr": "flow_input.folder"}, "n": {"expr": "flow_input.n"}},
        },
        {
            "id": "slow",
            "script": SLOW,
            "inputs": {"folder": {"expr": "flow_input.folder"}, "n": {"expr": "results.first"}},
        },
        {
            "id": "last",
            "script": "def main(m: int):\n    return {'answer': m}\n",
            "inputs": {"m": {"expr": "results.slow"}},
        },
    ],
}
"""With n = 20: first 40, slow 41, the result `{"answer": 41}`."""


@dataclass
class Store:
    """A store on one backend, with a workspace, the flow, and ada's token."""

    url: str
    workspace: str
    token: str
    env: dict[str, str]


class Server:
    """`python -m tidemill.cli server` in a process (and session) of its own, on a free port."""

    def __init__(self, store: Store, cwd: Path, *options: str) -> None:
        self.stderr = (cwd / f"server-{uuid.uuid4().hex[:6]}.log").open("w+")
        command = [sys.executable, "-m", "tidemill.cli", "server", "--db", store.url]
        command += [
            "--workspace",
            store.workspace,
            "--port",
            "0",
            "--concurrency",
            "2",
            "--lease",
            "2",
            *options,
        ]
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env=store.env,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            text=True,
            start_new_session=True,  # its script processes too, to clean up after a crash
        )
        self.url = self._ready(timeout=20)

    def _ready(self, timeout: float) -> str:
        """The base URL the server prints once it listens."""
        lines: queue.Queue[str] = queue.Queue()
        assert self.process.stdout is not None
        stdout = self.process.stdout
        self.reader = threading.Thread(target=lambda: [lines.put(line) for line in stdout])
        self.reader.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = lines.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            if line.startswith("Tidemill server at "):
                return line.split()[3]
        self.stderr.seek(0)
        log = self.stderr.read()
        self.kill_all()
        raise AssertionError(f"the server did not start:\n{log}")

    @property
    def pid(self) -> int:
        return self.process.pid

    def client(self, token: str) -> httpx.Client:
        headers = {"Authorization": f"Bearer {token}"}
        # A run that stops moving fails the test: the streams' keep-alives come every 15 s.
        return httpx.Client(base_url=self.url, headers=headers, timeout=10)

    def wait_until_refusing(self, timeout: float = 10) -> None:
        """Wait until the server, stopping, no longer takes connections."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/health", timeout=1)
            except httpx.TransportError:
                return
            time.sleep(0.02)
        raise AssertionError("the server still answers after SIGTERM")

    def kill_all(self) -> None:
        """SIGKILL what is left of its session (the server, its script processes)."""
        with contextlib.suppress(ProcessLookupError):  # none of it is left
            os.killpg(self.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        self.reader.join(timeout=10)
        assert self.process.stdout is not None
        self.process.stdout.close()
        self.stderr.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Store]:
    """A fresh store (a SQLite file, a PostgreSQL schema of its own) with ada's flow."""
    schema = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path}/tidemill.db"
    else:
        base = os.environ.get(POSTGRES_ENV)
        if not base:
            pytest.skip(f"{POSTGRES_ENV} is not set; PostgreSQL tests need a server (CI sets it)")
        schema = unique_schema()
        url = f"{base}?schema={schema}"
    key = MasterKey.generate().encoded()
    monkeypatch.setenv("TIDEMILL_USER", "ada")
    monkeypatch.setenv("TIDEMILL_MASTER_KEY", key)
    name = f"w{uuid.uuid4().hex[:12]}"
    try:
        with Workspace(url, workspace=name, user="ada", migrate=True) as ws:
            ws.write("u/ada/restart", "flow", FLOW)
            token = ws.create_token("test").text
        yield Store(url, name, token, dict(os.environ))
    finally:
        if schema is not None:
            drop_postgres_schema(url.partition("?schema=")[0], schema)


@pytest.fixture
def servers(store: Store) -> Iterator[list[Server]]:
    """The servers a test starts; each killed (with its script processes) before the store goes."""
    started: list[Server] = []
    yield started
    for server in started:
        if not server.stderr.closed:
            server.kill_all()


class Events:
    """A run's SSE stream, read message by message."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.iter_lines()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        fields: dict[str, Any] = {}
        for line in self.lines:
            if not line:
                if "data" in fields:
                    yield fields
                fields = {}
                continue
            name, _, value = line.partition(": ")
            if name in ("id", "event", "data"):
                fields[name] = json.loads(value) if name == "data" else value


def read_until_slow_runs(events: Events, folder: Path) -> list[dict[str, Any]]:
    """The events up to `slow`'s `step_started`, once `slow` is in its script."""
    seen = []
    for message in events:
        seen.append(message)
        if message["event"] == "step_started" and message["data"]["step_id"] == "slow":
            break
    else:
        raise AssertionError(f"the stream ended before `slow` started: {seen}")
    deadline = time.monotonic() + 10
    while not (folder / "slow.txt").exists():
        assert time.monotonic() < deadline, "`slow` never began"
        time.sleep(0.02)
    return seen


def worker_pid(job: dict[str, Any]) -> int:
    """The pid in a job's worker name (`host:pid:suffix`)."""
    return int(str(job["worker"]).split(":")[-2])


@pytest.mark.parametrize("stop", ["crash", "graceful"])
def test_the_server_restarted_during_a_run_and_the_run_finishing(
    store: Store, servers: list[Server], tmp_path: Path, stop: str
) -> None:
    folder = tmp_path / "effects"
    folder.mkdir()
    servers.append(Server(store, tmp_path))
    old = servers[0]
    with old.client(store.token) as client:
        answer = client.post(
            "/api/runs", json={"path": "u/ada/restart", "inputs": {"folder": str(folder), "n": 20}}
        )
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
        with client.stream("GET", f"/api/runs/{run_id}/events") as response:
            events = Events(response)
            before = read_until_slow_runs(events, folder)
            assert client.get(f"/api/runs/{run_id}").json()["status"] == "running"
            if stop == "crash":
                old.process.send_signal(signal.SIGKILL)
                assert old.process.wait(timeout=10) == -signal.SIGKILL
                # The client's connection drops with the server.
                with pytest.raises(httpx.HTTPError):
                    before.extend(events)
        if stop == "graceful":
            # With the stream closed: uvicorn waits for open responses before the lifespan
            # ends (and the worker with it), and a run's stream ends only with the run.
            old.process.send_signal(signal.SIGTERM)
            old.wait_until_refusing()
            time.sleep(0.5)  # then its worker stops, and waits for `slow`, which waits for the gate
            assert old.process.poll() is None, "the server did not wait for the step in hand"
    (folder / "gate").touch()
    if stop == "graceful":
        old.process.wait(timeout=15)

    servers.append(Server(store, tmp_path))
    new = servers[1]
    with new.client(store.token) as client:
        last_seen = before[-1]["id"]
        with client.stream(
            "GET", f"/api/runs/{run_id}/events", headers={"Last-Event-ID": last_seen}
        ) as response:
            assert response.status_code == 200
            try:
                rest = list(Events(response))
            except httpx.ReadTimeout:
                jobs = client.get(f"/api/runs/{run_id}/jobs").json()
                pytest.fail(f"the run stopped moving after the restart; its jobs: {jobs}")
        run = client.get(f"/api/runs/{run_id}").json()
        jobs = {job["step_id"]: job for job in client.get(f"/api/runs/{run_id}/jobs").json()}
        everything = client.get(f"/api/runs/{run_id}/events/page", params={"limit": 1000}).json()

    assert (run["status"], run["result"]) == ("succeeded", {"answer": 41})
    assert sorted(jobs) == ["first", "last", "slow"]
    assert rest and rest[-1]["event"] == "run_finished"
    assert rest[-1]["data"]["data"]["status"] == "succeeded"
    # Nothing missed, nothing twice: the events before the stop and after it are all of them.
    assert [int(m["id"]) for m in before + rest] == [event["id"] for event in everything]
    finished = [m["data"]["step_id"] for m in rest if m["event"] == "step_finished"]
    assert "first" not in finished and "last" in finished
    # The finished step did not run again; the one in flight ran again only after a crash.
    assert (folder / "first.txt").read_text() == "first\n"
    slow_runs = (folder / "slow.txt").read_text().splitlines()
    assert worker_pid(jobs["first"]) == old.pid
    assert worker_pid(jobs["last"]) == new.pid
    assert all(job["status"] == "succeeded" for job in jobs.values())
    if stop == "crash":
        assert len(slow_runs) == 2, slow_runs
        assert worker_pid(jobs["slow"]) == new.pid
        taken_over = [m for m in rest if m["event"] == "step_started"]
        assert taken_over[0]["data"]["step_id"] == "slow"
        assert taken_over[0]["data"]["data"].get("reclaimed") is True
    else:
        assert len(slow_runs) == 1, slow_runs
        assert worker_pid(jobs["slow"]) == old.pid
        assert old.process.returncode in (0, -signal.SIGTERM)


def test_a_live_event_stream_does_not_hold_a_stopping_server(
    store: Store, servers: list[Server], tmp_path: Path
) -> None:
    # No worker: the run stays queued, so its event stream would stay open forever.
    servers.append(Server(store, tmp_path, "--no-worker"))
    server = servers[0]
    folder = tmp_path / "never"
    folder.mkdir()
    with server.client(store.token) as client:
        answer = client.post(
            "/api/runs", json={"path": "u/ada/restart", "inputs": {"folder": str(folder), "n": 1}}
        )
        assert answer.status_code == 201, answer.text
        run_id = answer.json()["id"]
        with client.stream("GET", f"/api/runs/{run_id}/events") as response:
            assert response.status_code == 200
            next(iter(Events(response)))  # the stream is live
            started = time.monotonic()
            server.process.send_signal(signal.SIGTERM)
            server.process.wait(timeout=20)
    assert time.monotonic() - started < 20
    assert server.process.returncode is not None
