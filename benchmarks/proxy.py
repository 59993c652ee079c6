"""What the OpenAI-compatible proxy adds to a streamed chat completion, next to LiteLLM's.

A local mock upstream streams 200 tokens (OpenAI-format SSE, one token per
chunk, a fixed interval apart, then a usage chunk and `[DONE]`). The same
load is sent three ways, in the same run, on the same mock:

- direct: straight to the mock (the baseline);
- tidemill: through `tidemill proxy` (uvicorn, one worker), model `openai:mock`
  pointed at the mock with `OPENAI_BASE_URL`;
- litellm: through LiteLLM's proxy (`litellm --config`, one worker), model
  `openai/mock` with `api_base` at the mock.

For each target and each concurrency (1, 50 and 200 streams at once) a load
generator, in a process of its own, runs closed-loop workers that each make a
few streamed requests, and times every stream. Workers start at random
moments spread over one stream's duration (4 s), then go on back to back (a
warm-up stream, the timed ones, one more to keep the others company), so
requests and tokens arrive at independent moments, as at a proxy serving 50
users. The `50 burst` row is the other extreme: after a warm-up round, all
50 timed requests are sent in the same instant, so each waits for the
proxy's work on the requests ahead of it (about 0.5 ms each for Tidemill),
and their tokens arrive in lockstep. Until 2026-11-30 every level was a
burst, which measured that queue rather than what one stream pays.

    TTFB = first body bytes after sending the request
    TTLB = the body's last byte (after `data: [DONE]`)
    added = percentile(through a proxy) - percentile(direct), same concurrency

Throughput is streams (and tokens) completed per second of the load
generator's wall time. Every stream is checked outside the timed region: all
200 tokens present, in order, and `[DONE]` at the end.

The mock paces tokens (20 ms apart by default: 50 tokens/s, the pace of a
typical hosted model; `--interval-ms 5` is a fast one) because a proxy's
added latency is what a client sees on top of a real upstream. With an
unpaced mock the numbers would measure CPU time per chunk instead, and on a
small machine the mock, the proxy and the load generator compete for the
same cores; `--interval-ms 0` shows that.

The load generator speaks HTTP/1.1 over raw asyncio sockets: `httpx` costs
about 100 us of CPU per streamed chunk, which saturated a core at 50 streams
and hid the proxies' own cost (`--client httpx` reproduces that).

Run it with `make bench` (its own virtualenv, with LiteLLM installed from
benchmarks/requirements.txt), or directly:

    .venv-bench/bin/python benchmarks/proxy.py [--quick] [--interval-ms 5]

LiteLLM's rows are skipped, saying why, when it is not installed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TOKENS = 200
LEVELS = ("1", "50", "200", "50b")
"""Concurrent streams per cell; `b` marks a burst (every timed stream sent in the same instant)."""
API_KEY = "sk-bench-5f0c2a9e7d1b4c6a8e3f9b2d7a1c4e6f"
"""The key clients send to both proxies (each requires one), and the key they send upstream."""
MODEL = "mock"

# -- the mock upstream -----------------------------------------------------------------------


def _chunk(payload: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n"


def mock_chunks(tokens: int) -> tuple[list[bytes], bytes]:
    """The token chunks of one answer, and its closing bytes (usage chunk and `[DONE]`)."""
    head = {"id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 0, "model": MODEL}
    chunks = [
        _chunk(
            {
                **head,
                "choices": [
                    {
                        "index": 0,
                        "delta": {"role": "assistant", "content": f"w{i} "}
                        if i == 0
                        else {"content": f"w{i} "},
                        "finish_reason": None,
                    }
                ],
            }
        )
        for i in range(tokens)
    ]
    chunks[-1] = chunks[-1].replace(b'"finish_reason":null', b'"finish_reason":"stop"')
    usage = {"prompt_tokens": 12, "completion_tokens": tokens, "total_tokens": 12 + tokens}
    closing = _chunk({**head, "choices": [], "usage": usage}) + b"data: [DONE]\n\n"
    return chunks, closing


def _framed(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class MockUpstream(asyncio.Protocol):
    """A minimal HTTP/1.1 server that streams a paced Chat Completions answer per request."""

    def __init__(self, chunks: list[bytes], closing: bytes, interval: float) -> None:
        self.chunks = [_framed(c) for c in chunks]
        self.closing = _framed(closing) + b"0\r\n\r\n"
        self.interval = interval
        self.buffer = bytearray()
        self.transport: Any = None  # uvloop's transports are not asyncio.Transport subclasses
        self.busy: asyncio.Task[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.busy is not None:
            self.busy.cancel()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if self.busy is None:
            self._next()

    def _next(self) -> None:
        end = self.buffer.find(b"\r\n\r\n")
        if end < 0:
            return
        length = 0
        for line in bytes(self.buffer[:end]).split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(self.buffer) < end + 4 + length:
            return
        body = bytes(self.buffer[end + 4 : end + 4 + length])
        del self.buffer[: end + 4 + length]
        self.busy = asyncio.get_running_loop().create_task(self._answer(body))

    async def _answer(self, body: bytes) -> None:
        assert self.transport is not None
        request = json.loads(body or b"{}")
        usage = bool((request.get("stream_options") or {}).get("include_usage"))
        write = self.transport.write
        write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n"
        )
        loop = asyncio.get_running_loop()
        start = loop.time()
        for index, chunk in enumerate(self.chunks):
            # Absolute deadlines, so a late wake-up does not delay every later token.
            wait = start + index * self.interval - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if self.transport.is_closing():
                return
            write(chunk)
        write(self.closing if usage else _framed(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        self.busy = None
        self._next()


async def serve_mock(port: int, tokens: int, interval: float) -> None:
    chunks, closing = mock_chunks(tokens)
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: MockUpstream(chunks, closing, interval), "127.0.0.1", port, backlog=1024
    )
    async with server:
        await server.serve_forever()


# -- the load generator --------------------------------------------------------------------


@dataclass
class Samples:
    ttfb: list[float] = field(default_factory=list)
    ttlb: list[float] = field(default_factory=list)
    wall: float = 0.0
    streams: int = 0
    errors: list[str] = field(default_factory=list)


def check_body(body: bytes, tokens: int) -> str | None:
    """Why a streamed body is wrong, or None when all tokens and `[DONE]` are there."""
    position = 0
    for i in range(tokens):
        found = body.find(b'"w%d ' % i, position)
        if found < 0:
            return f"token {i} missing"
        position = found
    if not body.rstrip().endswith(b"data: [DONE]"):
        return "no [DONE] at the end"
    return None


class RawStream(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection that POSTs and reads a chunked answer.

    The load generator's own cost per chunk must stay far below the proxies':
    a few microseconds here, where `httpx` spends about 100 us per chunk of
    CPU and saturates a core at 50 streams (`--client httpx` shows it).
    """

    def __init__(self) -> None:
        self.transport: Any = None
        self.buffer = bytearray()
        self.done: asyncio.Future[tuple[int, float, bytes]] | None = None
        self.first = 0.0
        self.status = 0
        self.head = True
        self.length: int | None = None
        self.body: list[bytes] = []
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError(f"connection lost: {exc}"))
        if not self.lost.done():
            self.lost.set_result(None)

    def request(self, data: bytes) -> asyncio.Future[tuple[int, float, bytes]]:
        self.done = asyncio.get_running_loop().create_future()
        self.buffer.clear()
        self.body = []
        self.first = 0.0
        self.head, self.length = True, None
        self.transport.write(data)
        return self.done

    def data_received(self, data: bytes) -> None:
        buf = self.buffer
        buf += data
        if self.head:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                return
            lines = bytes(buf[:end]).split(b"\r\n")
            self.status = int(lines[0].split()[1])
            for line in lines[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    self.length = int(value)
            del buf[: end + 4]
            self.head = False
        if self.length is not None:  # a whole body, e.g. an error
            if len(buf) >= self.length:
                self._finish(bytes(buf[: self.length]))
            return
        while True:  # chunked transfer encoding
            line_end = buf.find(b"\r\n")
            if line_end < 0:
                return
            size = int(bytes(buf[:line_end]).split(b";")[0], 16)
            if len(buf) < line_end + 2 + size + 2:
                return
            if size == 0:
                del buf[: line_end + 4]
                self._finish(b"".join(self.body))
                return
            if not self.first:
                self.first = time.perf_counter()
            self.body.append(bytes(buf[line_end + 2 : line_end + 2 + size]))
            del buf[: line_end + 2 + size + 2]

    def _finish(self, body: bytes) -> None:
        if not self.first:
            self.first = time.perf_counter()
        assert self.done is not None
        if not self.done.done():
            self.done.set_result((self.status, self.first, body))


async def generate_load(
    url: str,
    concurrency: int,
    per_worker: int,
    warmup: int,
    tokens: int,
    client: str,
    deadline: float,
    spread: float = 0.0,
) -> Samples:
    """Run `concurrency` closed-loop workers against `url` and time their streams.

    With `spread` 0 (a burst) every worker makes its warm-up streams, then
    all start their timed streams in the same instant. With `spread` > 0 each
    worker starts after a random delay within `spread` seconds and goes on
    back to back (warm-up, timed, then one more stream so that the others'
    timed streams keep `concurrency` company): requests arrive at independent
    moments, as they do at a proxy serving that many users.
    """
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Count to 200."}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    samples = Samples()
    bodies: list[bytes] = []
    spans: list[tuple[float, float]] = []
    one = await (_raw_client if client == "raw" else _httpx_client)(url, body, concurrency)
    rng = random.Random(concurrency)

    left = concurrency * per_worker  # timed streams not yet ended
    all_timed = asyncio.Event()

    def ended(count: int = 1) -> None:
        nonlocal left
        left -= count
        if left <= 0:
            all_timed.set()

    async def worker(plan: Sequence[bool], delay: float = 0.0) -> None:
        await asyncio.sleep(delay)
        stream = await one.open()
        try:
            for index, record in enumerate(plan):
                try:
                    status, started, first, ended_at, text = await stream()
                except Exception as exc:
                    samples.errors.append(f"{type(exc).__name__}: {exc}")
                    ended(sum(plan[index:]))
                    return
                if not record:
                    continue
                ended()
                if status != 200:
                    samples.errors.append(f"HTTP {status}: {text[:200]!r}")
                    continue
                samples.ttfb.append(first - started)
                samples.ttlb.append(ended_at - started)
                spans.append((started, ended_at))
                bodies.append(text)
        finally:
            await one.close(stream)

    try:
        started = time.perf_counter()
        if spread:
            # Warm-up, timed, then one more stream to keep the others company.
            plan = [False] * warmup + [True] * per_worker + [False]
            delays = [rng.uniform(0, spread) for _ in range(concurrency)]
            running = asyncio.gather(*(worker(plan, delay) for delay in delays))
            deadline += spread * (warmup + 1)
        else:
            if warmup:
                await asyncio.gather(*(worker([False] * warmup) for _ in range(concurrency)))
            started = time.perf_counter()
            running = asyncio.gather(*(worker([True] * per_worker) for _ in range(concurrency)))
        try:
            await asyncio.wait_for(all_timed.wait(), deadline)
        except TimeoutError:
            unfinished = concurrency * per_worker - len(bodies)
            samples.errors.append(f"{unfinished} stream(s) unfinished after {deadline:g} s")
        samples.wall = time.perf_counter() - started
        if spread and spans:  # the window the timed streams ran in
            samples.wall = max(end for _, end in spans) - min(start for start, _ in spans)
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
    finally:
        await one.aclose()
    samples.streams = len(bodies)
    for text in bodies:
        problem = check_body(text, tokens)
        if problem:
            samples.errors.append(problem)
    return samples


Timed = tuple[int, float, float, float, bytes]
"""status, sent, first body bytes, last body byte, body."""


class _Client:
    async def open(self) -> Any:
        raise NotImplementedError

    async def close(self, stream: Any) -> None:
        pass

    async def aclose(self) -> None:
        pass


async def _raw_client(url: str, body: dict[str, Any], concurrency: int) -> _Client:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    payload = json.dumps(body).encode()
    request = (
        f"POST {parts.path} HTTP/1.1\r\nhost: {parts.netloc}\r\n"
        f"authorization: Bearer {API_KEY}\r\ncontent-type: application/json\r\n"
        f"accept: text/event-stream\r\ncontent-length: {len(payload)}\r\n\r\n"
    ).encode() + payload
    loop = asyncio.get_running_loop()

    class Raw(_Client):
        async def open(self) -> Any:
            _, protocol = await loop.create_connection(RawStream, parts.hostname, parts.port)

            async def stream() -> Timed:
                started = time.perf_counter()
                status, first, text = await protocol.request(request)
                return status, started, first, time.perf_counter(), text

            stream.protocol = protocol  # type: ignore[attr-defined]
            return stream

        async def close(self, stream: Any) -> None:
            stream.protocol.transport.close()

    return Raw()


async def _httpx_client(url: str, body: dict[str, Any], concurrency: int) -> _Client:
    import httpx

    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    client = httpx.AsyncClient(limits=limits, timeout=120.0)
    headers = {"authorization": f"Bearer {API_KEY}"}

    async def stream() -> Timed:
        parts: list[bytes] = []
        started = time.perf_counter()
        first = 0.0
        async with client.stream("POST", url, json=body, headers=headers) as response:
            async for part in response.aiter_raw():
                if not first:
                    first = time.perf_counter()
                parts.append(part)
        return response.status_code, started, first, time.perf_counter(), b"".join(parts)

    class Httpx(_Client):
        async def open(self) -> Any:
            return stream

        async def aclose(self) -> None:
            await client.aclose()

    return Httpx()


# -- processes -------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(port: int, process: subprocess.Popen[bytes], name: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            out = process.stdout.read().decode(errors="replace") if process.stdout else ""
            raise RuntimeError(f"{name} exited with {process.returncode}:\n{out[-3000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{name} did not start within {timeout:.0f} s")


@dataclass
class Target:
    name: str
    url: str
    process: subprocess.Popen[bytes] | None = None
    skipped: str | None = None


@contextlib.contextmanager
def processes(args: argparse.Namespace, workdir: Path) -> Iterator[list[Target]]:
    started: list[subprocess.Popen[bytes]] = []

    def spawn(command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})},
            cwd=workdir,
        )
        started.append(process)
        return process

    try:
        mock_port = free_port()
        mock = spawn(
            [sys.executable, __file__, "mock", "--port", str(mock_port),
             "--tokens", str(args.tokens), "--interval-ms", str(args.interval_ms)]
        )  # fmt: skip
        wait_ready(mock_port, mock, "the mock upstream", 20)
        upstream = f"http://127.0.0.1:{mock_port}/v1"
        targets = [Target("direct", f"{upstream}/chat/completions", mock)]

        port = free_port()
        tidemill = spawn(
            [sys.executable, "-m", "tidemill.cli", "proxy", "--port", str(port),
             "--model-alias", f"{MODEL}=openai:{MODEL}", "--log-level", "warning",
             "--api-key", API_KEY],
            {"OPENAI_API_KEY": API_KEY, "OPENAI_BASE_URL": upstream},
        )  # fmt: skip
        wait_ready(port, tidemill, "tidemill proxy", 60)
        targets.append(Target("tidemill", f"http://127.0.0.1:{port}/v1/chat/completions", tidemill))

        if args.no_litellm:
            targets.append(Target("litellm", "", skipped="--no-litellm"))
        else:
            targets.append(start_litellm(spawn, upstream, workdir))
        yield targets
    finally:
        for process in started:
            if process.poll() is None:
                process.terminate()
        for process in started:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def start_litellm(spawn: Any, upstream: str, workdir: Path) -> Target:
    executable = shutil.which("litellm", path=str(Path(sys.executable).parent))
    if executable is None:
        return Target("litellm", "", skipped="LiteLLM is not installed in this environment")
    config = workdir / "litellm.yaml"
    config.write_text(
        "model_list:\n"
        f"  - model_name: {MODEL}\n"
        "    litellm_params:\n"
        f"      model: openai/{MODEL}\n"
        f"      api_base: {upstream}\n"
        f"      api_key: {API_KEY}\n"
        "general_settings:\n"
        f"  master_key: {API_KEY}\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
    )
    port = free_port()
    process = spawn(
        [executable, "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
         "--num_workers", "1"],
        # Offline: the bundled model price list, no telemetry, no update checks.
        {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_LOG": "ERROR",
         "LITELLM_TELEMETRY": "False", "DISABLE_ADMIN_UI": "True"},
    )  # fmt: skip
    try:
        wait_ready(port, process, "litellm", 120)
    except RuntimeError as exc:
        return Target("litellm", "", skipped=str(exc).splitlines()[0])
    return Target("litellm", f"http://127.0.0.1:{port}/v1/chat/completions", process)


def run_loadgen(
    target: Target,
    concurrency: int,
    per_worker: int,
    warmup: int,
    args: argparse.Namespace,
    spread: float = 0.0,
) -> Samples:
    command = [
        sys.executable, __file__, "loadgen", "--url", target.url,
        "--concurrency", str(concurrency), "--per-worker", str(per_worker),
        "--warmup", str(warmup), "--tokens", str(args.tokens), "--client", args.client,
        "--deadline", str(args.deadline), "--spread", str(spread),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        return Samples(errors=[f"load generator failed: {done.stderr.strip()[-500:]}"])
    data = json.loads(done.stdout)
    return Samples(**data)


# -- report ------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = q / 100 * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Cell:
    target: str
    level: str
    samples: Samples

    def q(self, metric: str, pct: float) -> float:
        values: list[float] = getattr(self.samples, metric)
        return percentile(values, pct) * 1000.0


def _order(level: str) -> tuple[int, bool]:
    return int(level.rstrip("b")), level.endswith("b")


def _label(level: str) -> str:
    return level[:-1] + " burst" if level.endswith("b") else level


def _ms(value: float) -> str:
    return "-" if value != value else f"{value:.2f}"


def report(cells: list[Cell], args: argparse.Namespace, skipped: dict[str, str]) -> str:
    lines: list[str] = []
    load = os.getloadavg()
    lines.append(
        f"proxy overhead: {args.tokens} tokens per stream, {args.interval_ms:g} ms apart; "
        f"python {platform.python_version()}, {os.cpu_count()} cpus, "
        f"load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    # Both proxies run under uvicorn, which picks uvloop and httptools when they are installed
    # (Tidemill's proxy extra brings both; LiteLLM's asks for uvloop).
    versions = [f"tidemill {_version('tidemill')}", f"uvicorn {_version('uvicorn')}"]
    versions += [f"uvloop {_version('uvloop')}", f"httptools {_version('httptools')}"]
    versions.append(f"litellm {_version('litellm')}")
    lines.append("versions: " + ", ".join(versions))
    for name, why in skipped.items():
        lines.append(f"{name}: skipped ({why})")
    lines.append("")
    header = (
        f"{'streams':>7} {'target':<9} {'n':>5} {'ttfb p50':>9} {'ttfb p99':>9} "
        f"{'ttlb p50':>9} {'ttlb p99':>9} {'+ttfb p50':>9} {'+ttlb p50':>9} {'+ttlb p99':>9} "
        f"{'streams/s':>9} {'tok/s':>8} {'errors':>6}"
    )
    lines.append(header + "   (times in ms; + = added over direct)")
    lines.append("-" * len(header))
    by = {(c.target, c.level): c for c in cells}
    for level in sorted({c.level for c in cells}, key=_order):
        base = by.get(("direct", level))
        for cell in [c for c in cells if c.level == level]:
            s = cell.samples
            added = ["-", "-", "-"]
            if base is not None and cell.target != "direct" and s.ttlb:
                added = [
                    _ms(cell.q("ttfb", 50) - base.q("ttfb", 50)),
                    _ms(cell.q("ttlb", 50) - base.q("ttlb", 50)),
                    _ms(cell.q("ttlb", 99) - base.q("ttlb", 99)),
                ]
            rate = s.streams / s.wall if s.wall else 0.0
            lines.append(
                f"{_label(level):>7} {cell.target:<9} {s.streams:>5} {_ms(cell.q('ttfb', 50)):>9} "
                f"{_ms(cell.q('ttfb', 99)):>9} {_ms(cell.q('ttlb', 50)):>9} "
                f"{_ms(cell.q('ttlb', 99)):>9} {added[0]:>9} {added[1]:>9} {added[2]:>9} "
                f"{rate:>9.1f} {rate * args.tokens:>8.0f} {len(s.errors):>6}"
            )
        lines.append("")
    lines += ratios(by)
    lines.append("")
    lines += targets(by)
    errors = [(c.target, c.level, e) for c in cells for e in c.samples.errors[:3]]
    for target, level, error in errors:
        lines.append(f"error: {target} at {_label(level)} streams: {error}")
    return "\n".join(lines)


def added(
    by: dict[tuple[str, str], Cell], target: str, level: str, metric: str, pct: float
) -> float:
    cell, base = by.get((target, level)), by.get(("direct", level))
    if cell is None or base is None or not cell.samples.ttlb:
        return float("nan")
    return cell.q(metric, pct) - base.q(metric, pct)


def ratios(by: dict[tuple[str, str], Cell]) -> list[str]:
    lines = ["added latency, LiteLLM / Tidemill (how many times more LiteLLM adds):"]
    for level in sorted({level for _, level in by}, key=_order):
        parts = []
        for metric, pct in (("ttfb", 50), ("ttlb", 50), ("ttlb", 99)):
            ours, theirs = (
                added(by, "tidemill", level, metric, pct),
                added(by, "litellm", level, metric, pct),
            )
            parts.append(f"{metric} p{pct:g} {_ratio(theirs, ours)}")
        tidemill, litellm = by.get(("tidemill", level)), by.get(("litellm", level))
        if tidemill and litellm and tidemill.samples.streams and litellm.samples.streams:
            rate = (tidemill.samples.streams / tidemill.samples.wall) / (
                litellm.samples.streams / litellm.samples.wall
            )
            parts.append(f"throughput tidemill/litellm {rate:.2f}x")
        lines.append(f"  {_label(level):>9} streams: " + ", ".join(parts))
    return lines


def _ratio(theirs: float, ours: float) -> str:
    if theirs != theirs or ours != ours:
        return "-"
    if ours <= 0:
        return "inf (tidemill adds nothing measurable)" if theirs > 0 else "-"
    return f"{theirs / ours:.1f}x"


def targets(by: dict[tuple[str, str], Cell]) -> list[str]:
    p50 = added(by, "tidemill", "50", "ttlb", 50)
    p99 = added(by, "tidemill", "50", "ttlb", 99)
    theirs = added(by, "litellm", "50", "ttlb", 50)
    checks = [
        ("Tidemill adds <= 1 ms p50 time-to-last-byte at 50 streams", p50, p50 <= 1.0),
        ("Tidemill adds <= 3 ms p99 time-to-last-byte at 50 streams", p99, p99 <= 3.0),
    ]
    lines = ["targets:"]
    for label, value, passed in checks:
        lines.append(f"  [{'PASS' if passed else 'FAIL'}] {label}: {_ms(value)} ms")
    if theirs != theirs:
        lines.append("  [SKIP] at least 3x less added latency than LiteLLM: LiteLLM not measured")
    else:
        ok = theirs >= 3 * max(p50, 0.0)
        lines.append(
            f"  [{'PASS' if ok else 'FAIL'}] at least 3x less added latency than LiteLLM "
            f"(p50 time-to-last-byte at 50 streams): {_ms(p50)} ms vs {_ms(theirs)} ms "
            f"({_ratio(theirs, p50)})"
        )
    return lines


def _version(name: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


# -- main ----------------------------------------------------------------------------------------


def orchestrate(args: argparse.Namespace) -> int:
    # Timed and warm-up streams per worker, sized to keep the run near 4 minutes.
    plan = {"1": (3, 1), "50": (2, 1), "200": (1, 0), "50b": (1, 1)}
    if args.quick:
        plan = {"1": (1, 1), "50": (1, 0), "200": (1, 0), "50b": (1, 0)}
    duration = args.tokens * args.interval_ms / 1000.0
    cells: list[Cell] = []
    skipped: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp, processes(args, Path(tmp)) as all_targets:
        live = []
        for target in all_targets:
            if target.skipped:
                skipped[target.name] = target.skipped
            elif not args.only or target.name in args.only or target.name == "direct":
                live.append(target)
        for level in args.levels:
            per_worker, warmup = plan.get(level, (2, 1))
            concurrency = int(level.rstrip("b"))
            # Independent arrivals, spread over one stream's duration; none for a burst.
            spread = duration if concurrency > 1 and not level.endswith("b") else 0.0
            for target in live:
                cell = Cell(target.name, level, Samples())
                for _ in range(args.rounds):
                    samples = run_loadgen(target, concurrency, per_worker, warmup, args, spread)
                    merge(cell.samples, samples)
                    settle([t.process for t in all_targets])
                cells.append(cell)
                print(
                    f"  {target.name:<9} {_label(level):>9} streams: {cell.samples.streams} "
                    f"timed, {len(cell.samples.errors)} errors",
                    file=sys.stderr,
                    flush=True,
                )
    print(report(cells, args, skipped))
    # Unfinished streams of a slow peer are a result, not a failure of the run.
    broken = [e for c in cells for e in c.samples.errors if "unfinished" not in e]
    return 1 if broken else 0


def settle(
    processes: Sequence[subprocess.Popen[bytes] | None], *, quiet: float = 0.05, most: float = 20
) -> None:
    """Wait until the mock and the proxies are idle (each under `quiet` of a CPU), at most `most` s.

    A proxy may go on with streams after their client left (those a cell's deadline cut
    short); the next cell must not run beside them.
    """
    pids = [p.pid for p in processes if p is not None and os.path.exists(f"/proc/{p.pid}/stat")]
    if not pids:
        return  # not Linux: no CPU times to read
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu() -> list[float]:
        times = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:  # it exited
                times.append(0.0)
                continue
            times.append((int(fields[11]) + int(fields[12])) / ticks)
        return times

    deadline = time.monotonic() + most
    before = cpu()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = cpu()
        if all(after - earlier <= quiet * 0.5 for earlier, after in zip(before, now, strict=True)):
            return
        before = now


def merge(into: Samples, more: Samples) -> None:
    """Pool the samples of another round of the same cell."""
    into.ttfb += more.ttfb
    into.ttlb += more.ttlb
    into.wall += more.wall
    into.streams += more.streams
    into.errors += more.errors


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("role", nargs="?", default="bench", choices=("bench", "mock", "loadgen"))
    parser.add_argument("--quick", action="store_true", help="fewer streams per cell")
    parser.add_argument("--tokens", type=int, default=TOKENS, help="tokens per stream")
    parser.add_argument(
        "--interval-ms", type=float, default=20.0, help="ms between tokens (20: 50 tokens/s)"
    )
    parser.add_argument(
        "--levels", nargs="*", default=list(LEVELS), help="e.g. 1 50 200 50b (b: a burst)"
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds per cell, pooled")
    parser.add_argument("--only", nargs="*", help="targets to measure besides direct")
    parser.add_argument("--no-litellm", action="store_true", help="do not start LiteLLM")
    parser.add_argument(
        "--deadline",
        type=float,
        default=30.0,
        help="seconds a cell's timed streams may take; unfinished ones count as errors",
    )
    parser.add_argument(
        "--client",
        choices=("raw", "httpx"),
        default="raw",
        help="load generator's HTTP client (httpx costs ~100 us of CPU per chunk)",
    )
    # Roles run as child processes.
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--url", default="")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--per-worker", type=int, default=1)
    parser.add_argument("--warmup", type=int, default=0)
    parser.add_argument("--spread", type=float, default=0.0)
    return parser.parse_args(argv)


def _run(coroutine: Any) -> Any:
    # The mock and the load generator are the same for every target; uvloop keeps
    # them cheap where it is installed (LiteLLM's extra brings it).
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coroutine)
    return uvloop.run(coroutine)


def main() -> int:
    args = parse_args()
    if args.role == "mock":
        _run(serve_mock(args.port, args.tokens, args.interval_ms / 1000.0))
        return 0
    if args.role == "loadgen":
        samples = _run(
            generate_load(
                args.url,
                args.concurrency,
                args.per_worker,
                args.warmup,
                args.tokens,
                args.client,
                args.deadline,
                args.spread,
            )
        )
        json.dump(samples.__dict__, sys.stdout)
        return 0
    return orchestrate(args)


if __name__ == "__main__":
    sys.exit(main())
