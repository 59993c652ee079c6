"""A request is sent again on a fresh connection only when nothing of it can have been processed.

The upstreams here count the POSTs they read. One that reads a request on a
reused connection, waits and closes without answering may have started the
work (a vendor would generate and bill it): that POST is not sent again by
the pool; the retry policy decides, with its backoff.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpx
import pytest

from tidemill.errors import ProviderError
from tidemill.llm import RetryPolicy
from tidemill.llm.http._client import HttpClient
from tidemill.llm.http._transport import StreamingTransport

OK = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]


class Counts:
    """What the upstream saw: the requests it read, by method, and the connections."""

    def __init__(self) -> None:
        self.methods: list[bytes] = []
        self.connections = 0

    @property
    def posts(self) -> int:
        return self.methods.count(b"POST")


async def read_request(reader: asyncio.StreamReader, counts: Counts) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    await reader.readexactly(length)
    counts.methods.append(head.split(b" ", 1)[0])


@asynccontextmanager
async def upstream(answers: int) -> AsyncIterator[tuple[str, Counts]]:
    """An upstream that answers the first `answers` requests of its first connection, then
    reads each further request, waits and closes the connection without answering."""
    counts = Counts()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts.connections += 1
        first = counts.connections == 1
        served = 0
        try:
            while True:
                await read_request(reader, counts)
                if first and served < answers:
                    writer.write(OK)
                    await writer.drain()
                    served += 1
                    continue
                await asyncio.sleep(0.05)  # as if it had started on the answer
                return
        except asyncio.IncompleteReadError:
            return
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}/v1/chat", counts


def client() -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=StreamingTransport(), timeout=httpx.Timeout(5.0))


async def test_a_post_read_on_a_reused_connection_is_not_sent_again() -> None:
    async with upstream(answers=1) as (url, counts), client() as http:
        assert (await http.post(url, content=b"{}")).status_code == 200
        with pytest.raises(httpx.RemoteProtocolError, match="without sending a response"):
            await http.post(url, content=b"{}")
    assert counts.posts == 2  # the answered one, and the one read and dropped: never a third
    assert counts.connections == 1


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.mark.parametrize("retries", [0, 1])
async def test_the_retry_policy_decides_with_its_backoff(retries: int) -> None:
    sleeps = Sleeps()
    policy = RetryPolicy(max_retries=retries, initial_delay=0.25, jitter=0.0)
    async with upstream(answers=1) as (url, counts), client() as raw:
        http = HttpClient("openai", client=raw, retry=policy, sleep=sleeps)
        assert await http.post_json(url, {"q": 1}, headers={}) == {}
        with pytest.raises(ProviderError, match="RemoteProtocolError") as caught:
            await http.post_json(url, {"q": 1}, headers={})
    assert caught.value.status_code is None and caught.value.retryable
    assert counts.posts == 2 + retries  # one POST per attempt the policy allowed
    assert sleeps.waits == [0.25] * retries


async def test_an_idempotent_request_is_sent_again_on_a_fresh_connection() -> None:
    # A GET can be repeated safely, as browsers and httpcore do: it is, on a new connection.
    counts = Counts()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        counts.connections += 1
        first = counts.connections == 1
        try:
            await read_request(reader, counts)
            writer.write(OK)
            await writer.drain()
            await read_request(reader, counts)
            if not first:
                writer.write(OK)
                await writer.drain()
        except asyncio.IncompleteReadError:
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1/models"
    async with server, client() as http:
        assert (await http.get(url)).status_code == 200
        assert (await http.get(url)).status_code == 200
    assert counts.methods == [b"GET", b"GET", b"GET"] and counts.connections == 2


@contextmanager
def closing_upstream() -> Iterator[tuple[str, threading.Event, Counts]]:
    """An upstream in a thread that answers once per connection, then closes it and sets
    the event: the close reaches the client's socket while its loop is busy."""
    counts = Counts()
    closed = threading.Event()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5.0)

    def serve() -> None:
        for _ in range(2):
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                counts.connections += 1
                data = b""
                while b"\r\n\r\n{}" not in data:
                    data += conn.recv(65536)
                counts.methods.append(data.split(b" ", 1)[0])
                conn.sendall(OK)
            closed.set()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1/chat", closed, counts
    finally:
        listener.close()
        thread.join(5)


async def test_a_connection_closed_while_idle_is_not_used_even_before_the_loop_notices() -> None:
    with closing_upstream() as (url, closed, counts):
        async with client() as http:
            assert (await http.post(url, content=b"{}")).status_code == 200
            assert closed.wait(5)  # blocks the loop: it has not read the end of the connection
            assert (await http.post(url, content=b"{}")).status_code == 200
    assert counts.posts == 2 and counts.connections == 2
