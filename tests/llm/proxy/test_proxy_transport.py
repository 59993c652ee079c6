"""`StreamingTransport`: HTTP/1.1 framing, keep-alive, timeouts and failures, on real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest
from llm_replay import ReplayServer, Reply

from tidemill.llm.http._transport import StreamingTransport

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
SSE = b"data: one\n\ndata: two\n\ndata: [DONE]\n\n"


@asynccontextmanager
async def raw_server(handler: Handler) -> AsyncIterator[tuple[str, list[int]]]:
    """A server on 127.0.0.1 whose `handler` writes bytes by hand; yields its URL and peers."""
    peers: list[int] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peers.append(writer.get_extra_info("peername")[1])
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"http://127.0.0.1:{port}", peers


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return head + await reader.readexactly(length)


def client(**options: float) -> httpx.AsyncClient:
    timeout = httpx.Timeout(options.get("read", 5.0), connect=2.0)
    return httpx.AsyncClient(transport=StreamingTransport(), timeout=timeout)


async def test_chunked_streams_are_read_over_one_kept_alive_connection(
    server: ReplayServer,
) -> None:
    for _ in range(2):
        server.replies.append(Reply(SSE, chunk_sizes=(3, 1, 11)))
    async with client() as http:
        for _ in range(2):
            async with http.stream("POST", f"{server.url}/v1/x", json={"n": 1}) as answer:
                pieces = [piece async for piece in answer.aiter_raw()]
            assert answer.status_code == 200
            assert b"".join(pieces) == SSE
    assert [seen.body for seen in server.seen] == [{"n": 1}, {"n": 1}]
    assert server.seen[0].client_port == server.seen[1].client_port


async def test_a_body_closed_early_is_kept_when_its_end_has_arrived() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                await read_request(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.write(b"4\r\nrest\r\n0\r\n\r\n")
            await writer.drain()

    async with raw_server(handler) as (url, peers), client() as http:
        async with http.stream("POST", url, content=b"{}") as answer:
            async for piece in answer.aiter_raw():
                assert piece == b"first"
                await asyncio.sleep(0.2)  # the rest arrives, unread
                break
        answer = await http.post(url, content=b"{}")
    assert answer.content == b"firstrest"
    assert len(peers) == 1


async def test_sized_and_close_delimited_bodies() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello")
        await read_request(reader)
        writer.write(b"HTTP/1.0 200 OK\r\n\r\nuntil the end")
        await writer.drain()

    async with raw_server(handler) as (url, peers), client() as http:
        sized = await http.post(url, content=b"{}")
        until_close = await http.post(url, content=b"{}")
    assert (sized.content, until_close.content) == (b"hello", b"until the end")
    assert len(peers) == 1


async def test_informational_answers_are_skipped() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nok"
        )
        await writer.drain()

    async with raw_server(handler) as (url, _), client() as http:
        answer = await http.post(url, content=b"{}")
    assert (answer.status_code, answer.content) == (201, b"ok")


async def test_a_connection_the_server_closed_while_idle_is_replaced() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()  # then the connection closes, without `connection: close`

    async with raw_server(handler) as (url, peers), client() as http:
        first = await http.post(url, content=b"{}")
        await asyncio.sleep(0.05)
        second = await http.post(url, content=b"{}")
    assert (first.content, second.content) == (b"ok", b"ok")
    assert len(peers) == 2


async def test_a_silent_upstream_is_a_read_timeout() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n")
        await writer.drain()
        await asyncio.sleep(5)

    async with (
        raw_server(handler) as (url, _),
        client(read=0.2) as http,
        http.stream("POST", url, content=b"{}") as answer,
    ):
        with pytest.raises(httpx.ReadTimeout):
            async for _ in answer.aiter_raw():
                pass


async def test_the_read_timeout_counts_from_the_last_bytes_not_the_first() -> None:
    # One timer serves many reads: a stream that keeps sending more often than the read
    # timeout may last many times longer than it; the silence at its end still times out.
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        for _ in range(12):
            writer.write(b"1\r\nx\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
        await asyncio.sleep(5)

    received: list[bytes] = []

    async def read_all(answer: httpx.Response) -> None:
        async for piece in answer.aiter_raw():
            received.append(piece)

    loop = asyncio.get_running_loop()
    started = loop.time()
    async with (
        raw_server(handler) as (url, _),
        client(read=0.2) as http,
        http.stream("POST", url, content=b"{}") as answer,
    ):
        with pytest.raises(httpx.ReadTimeout):
            await read_all(answer)
    assert b"".join(received) == b"x" * 12
    assert loop.time() - started >= 0.6  # well past the 0.2 s timeout before the silence


async def test_a_pooled_connection_holds_no_read_timer() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await read_request(reader)
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
            await writer.drain()

    transport = StreamingTransport()
    async with (
        raw_server(handler) as (url, _),
        httpx.AsyncClient(transport=transport, timeout=0.2) as http,
    ):
        assert (await http.post(url, content=b"{}")).content == b"ok"
        (connection,) = [c for idle in transport._idle.values() for c in idle]
        assert connection._timer is None
        await asyncio.sleep(0.3)  # idle past the read timeout: nothing fires, it is reused
        assert (await http.post(url, content=b"{}")).content == b"ok"
        assert [c for idle in transport._idle.values() for c in idle] == [connection]


def test_the_transport_runs_on_uvloop(server: ReplayServer) -> None:
    uvloop = pytest.importorskip("uvloop")  # what `tidemill proxy` runs on (the proxy extra)

    async def stream() -> list[bytes]:
        assert "uvloop" in type(asyncio.get_running_loop()).__module__
        server.replies.append(Reply(SSE, chunk_sizes=(3, 1, 11)))
        async with client(read=0.5) as http:
            async with http.stream("POST", f"{server.url}/v1/x", json={"n": 1}) as answer:
                pieces = [piece async for piece in answer.aiter_raw()]
            with pytest.raises(httpx.ConnectError):
                await http.post("http://127.0.0.1:9/", content=b"{}")
        return pieces

    assert b"".join(uvloop.run(stream())) == SSE


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"5\r\nabc", "without sending complete message body"),  # cut inside a chunk
        (b"zz\r\nabc\r\n0\r\n\r\n", "bad chunk size"),
        (b"3\r\nabcX\r\n0\r\n\r\n", "no CRLF after a chunk"),
    ],
)
async def test_broken_chunked_bodies_are_protocol_errors(body: bytes, error: str) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n" + body)
        await writer.drain()

    async with raw_server(handler) as (url, _), client() as http:
        with pytest.raises(httpx.RemoteProtocolError, match=error):
            await http.post(url, content=b"{}")


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with raw_server(read_request) as (url, _):
        pass  # closed: nothing listens on its port any more
    async with client() as http:
        with pytest.raises(httpx.ConnectError):
            await http.post(url, content=b"{}")


async def test_closing_the_transport_closes_idle_connections(server: ReplayServer) -> None:
    server.replies.append(Reply(b"{}", content_type="application/json"))
    transport = StreamingTransport()
    async with httpx.AsyncClient(transport=transport) as http:
        await http.post(f"{server.url}/v1/x", json={})
        idle = [c for connections in transport._idle.values() for c in connections]
        assert len(idle) == 1
    assert idle[0].closed
