"""The durable host's cost per agent iteration, and 200 agent steps in one worker process.

Two tables, on SQLite and on PostgreSQL:

1. Overhead per iteration. One `ai_agent` step whose scripted model asks for
   one tool call per turn, `echo(i=0)` ... `echo(i=N-1)`, then answers
   "done" (N = 10, 50), run through the engine by an in-process worker:

       us/iter = (the step's job: finished_at - started_at) / N

   median over samples interleaved across every cell, after warm-ups. The
   step's tool runs in the worker's script pool (a pre-started process),
   given as `function: agent_steps_tools:echo` or as an inline `script:`,
   or in the worker itself (`function:` with `run: in_process`); all three
   are measured. Next to them, the agent library alone with the same
   checkpointer on the same database (`tidemill.agent()...
   .checkpoint(...)`, timed around `arun`): with the async tool in process,
   as benchmarks/agent_loop.py runs it, and with a tool that makes the same
   call into a script pool, so that the process hop is on both sides.

   The target, from the issue: the host within 2x of the library. It is
   judged like with like: the in-process host against the in-process
   library ("in-proc/lib"), and the pooled host against the library calling
   the same pool ("pool/lib+pool"). One call into the pool (a pipe round
   trip to another process, 100-300 us on a loaded 2-core machine) costs
   about as much as a whole in-process library iteration: that is the price
   of isolating tools, not overhead of the host.

2. 200 agent steps at once. A mock OpenAI-compatible server in this
   process answers `/v1/chat/completions` after 200 ms: a call of the tool
   `echo` on the first turn, the answer on the second. 200 runs of a one-step
   `ai_agent` flow (model `openai-compatible:mock` with `base_url` pointing
   at the mock, `api_key: env:...`: real HTTP through the provider layer)
   are submitted at once to ONE worker process (concurrency 200). Measured:
   steps per second from the submit until every run ended, the most
   requests the mock had in flight at once (200 means every step was in
   progress at the same time), and the worker's peak RSS (VmHWM from
   /proc, read before it stops). Target: all 200 at once, under 300 MB.
   Also printed: the ramp, from the first step's first request reaching
   the mock to the last one's (all 200 are in flight at once only when it
   stays under the mock's latency), which shows where a miss comes from.

   The worker is this script (`--tidemill-agent-worker`), an `AsyncEngine`
   worker with `pool_size=4`: `tidemill worker` sizes the script pool to its
   concurrency, which would start 200 tool processes; the tool call is one
   short call per step, so four processes serve 200 steps (their memory is
   printed apart). The worker builds its model once (its default resolver
   caches models per spec) and all its steps share it, as `tidemill worker`
   does.

    .venv-bench/bin/python benchmarks/agent_steps.py [--quick]

PostgreSQL comes from $TIDEMILL_BENCH_POSTGRES_URL (default
postgresql://postgres@127.0.0.1:5432/test), in a schema of its own per
table, dropped afterwards; its rows are skipped, saying why, when the server
cannot be reached.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).parent))

import tidemill
from tidemill import tool
from tidemill.engine import (
    AsyncEngine,
    ModelChoice,
    ScriptCall,
    ScriptPool,
)
from tidemill.flows import Flow
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall

POSTGRES_ENV = "TIDEMILL_BENCH_POSTGRES_URL"
DEFAULT_POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/test"
SIZES = (10, 50)
FINAL = "done"
PROMPT = "Call echo until told otherwise."
TOOL_FUNCTION = "agent_steps_tools:echo"
TOOL_SCRIPT = "def main(i: int) -> int:\n    '''Return i.\n\n    Args:\n        i: Any integer.\n    '''\n    return i\n"  # noqa: E501
TARGET_RATIO = 2.0

STEPS = 200
LATENCY = 0.2
WORKER_POOL = 4
TARGET_MB = 300.0
KEY_ENV = "TIDEMILL_BENCH_MOCK_KEY"
DEADLINE = 120.0
WORKER_FLAG = "--tidemill-agent-worker"


def check(condition: bool, problem: str) -> None:
    """A check that `python -O` cannot strip: work that was not done fails the benchmark."""
    if not condition:
        raise RuntimeError(f"wrong result: {problem}")


def postgres_base() -> str:
    return os.environ.get(POSTGRES_ENV) or DEFAULT_POSTGRES_URL


def postgres_missing(base: str) -> str | None:
    """Why PostgreSQL cannot be used (None when it can)."""
    try:
        psycopg.connect(base, connect_timeout=5).close()
    except psycopg.Error as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return f"cannot connect to {base} ({first}); set {POSTGRES_ENV}"
    return None


def new_schema() -> str:
    return f"tm_bench_agent_{os.getpid()}_{secrets.token_hex(3)}"


def drop_schema(base: str, schema: str) -> None:
    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


# -- table 1: the host's cost per iteration, next to the library's ----------------------------


def policy(n: int) -> Callable[[ModelRequest], Message]:
    """The scripted model: `echo(0)` ... `echo(n-1)`, one per turn, then the answer.

    Each turn is decided from the last message alone (O(1)); a wrong tool
    result stops the run, so neither side can pass by skipping work.
    """

    def answer(request: ModelRequest) -> Message:
        last = request.messages[-1]
        following = 0
        if last.role == "tool":
            index = int((last.tool_call_id or "").removeprefix("call_"))
            check(json.loads(last.content) == index, f"echo({index}) gave {last.content!r}")
            following = index + 1
        if following >= n:
            return Message.assistant(FINAL)
        call = ToolCall(id=f"call_{following}", name="echo", arguments={"i": following})
        return Message.assistant(tool_calls=(call,))

    return answer


def loop_flow(n: int, kind: str) -> Flow:
    """One agent step of N tool calls; its step id carries N for the model resolver."""
    echo_tool: dict[str, Any] = {
        "function": {"name": "echo", "function": TOOL_FUNCTION},
        "in_process": {"name": "echo", "function": TOOL_FUNCTION, "run": "in_process"},
        "script": {"name": "echo", "script": TOOL_SCRIPT},
    }[kind]
    step = {
        "id": f"loop{n}",
        "ai_agent": {"model": "fake", "tools": [echo_tool], "max_iterations": n + 1},
        "inputs": {"user_message": PROMPT},
    }
    return Flow.model_validate({"name": f"agent-loop-{kind}-{n}", "steps": [step]})


def scripted(choice: ModelChoice) -> ScriptedModel:
    return ScriptedModel(handler=policy(int(choice.step_id.removeprefix("loop"))), record=False)


async def host_sample(engine: AsyncEngine, flow: Flow, n: int) -> float:
    """Seconds per iteration of one run of the step, from its job's timestamps."""
    run_id = await engine.submit(flow, {})
    result = await engine.wait(run_id, timeout=120)
    check(result == FINAL, f"the step answered {result!r}")
    (job,) = await engine.jobs(run_id)
    check(job.status == "succeeded" and job.attempt == 1, f"job {job.status}, {job.attempt}")
    check(len(await engine.usage(run_id)) == n + 1, "not N+1 model calls")
    started, finished = job.started_at, job.finished_at
    check(started is not None and finished is not None, "the job has no times")
    return (float(finished or 0) - float(started or 0)) / n


@tool
async def echo(i: int) -> int:
    """Return i.

    Args:
        i: Any integer.
    """
    return i


def pooled_echo(pool: ScriptPool) -> Any:
    """`echo` as a library tool that calls the same function in a script pool."""

    @tool(name="echo")
    async def echo_in_pool(i: int) -> int:
        """Return i.

        Args:
            i: Any integer.
        """
        outcome = await pool.run(ScriptCall(function=TOOL_FUNCTION, args={"i": i}))
        check(outcome.ok, f"the pooled echo failed: {outcome.error}")
        result: int = outcome.result
        return result

    return echo_in_pool


class Library:
    """The agent library alone: the same model and task, one checkpointer."""

    def __init__(self, n: int, echo_tool: Any, checkpoint: tuple[Any, ...], **config: Any):
        self.n = n
        self.builder = tidemill.agent().llm("fake", handler=policy(n), record=False)
        self.builder.tool(echo_tool).max_iterations(n + 1).checkpoint(*checkpoint, **config)
        self.runtime = self.builder.build()

    async def sample(self) -> float:
        started = time.perf_counter()
        response = await self.runtime.arun(PROMPT)
        elapsed = time.perf_counter() - started
        check(response.output == FINAL, f"the library answered {response.output!r}")
        check(len(response.steps) == self.n + 1, f"{len(response.steps)} steps")
        await self.runtime.checkpointer.delete(response.thread_id)  # every run alike
        return elapsed / self.n

    async def aclose(self) -> None:
        await self.builder.aclose()


COLUMNS = (
    "host: function tool",
    "host: script tool",
    "host: in-process fn",
    "library",
    "library + pool",
)


@dataclass
class Cell:
    backend: str
    n: int
    column: str
    sample: Callable[[], Awaitable[float]]
    values: list[float] = field(default_factory=list)


@asynccontextmanager
async def backend_cells(
    backend: str, url: str, checkpoint: tuple[Any, ...], **config: Any
) -> AsyncIterator[list[Cell]]:
    """The cells of one backend: an engine with its in-process worker, and library runtimes."""
    async with AsyncExitStack() as stack:
        engine = AsyncEngine(url, migrate=True)
        stack.push_async_callback(engine.close)
        await stack.enter_async_context(
            engine.worker(concurrency=1, poll=0.5, pool_size=1, models=scripted)
        )
        pool = await stack.enter_async_context(ScriptPool(size=1))
        cells: list[Cell] = []
        for n in SIZES:
            for kind, column in zip(("function", "script", "in_process"), COLUMNS, strict=False):
                flow = loop_flow(n, kind)

                async def host(flow: Flow = flow, n: int = n) -> float:
                    return await host_sample(engine, flow, n)

                cells.append(Cell(backend, n, column, host))
            for echo_tool, column in ((echo, COLUMNS[3]), (pooled_echo(pool), COLUMNS[4])):
                library = Library(n, echo_tool, checkpoint, **config)
                stack.push_async_callback(library.aclose)
                cells.append(Cell(backend, n, column, library.sample))
        yield cells


async def per_iteration(samples: int, base: str, postgres: bool) -> list[Cell]:
    """Every cell of table 1, sampled round-robin after two warm-up runs each."""
    async with AsyncExitStack() as stack:
        folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="tidemill-bench-"))
        sqlite_url = f"sqlite:///{folder}/store.db"
        cells = await stack.enter_async_context(
            backend_cells("SQLite", sqlite_url, ("sqlite",), path=f"{folder}/store.db")
        )
        if postgres:
            schema = new_schema()
            stack.callback(drop_schema, base, schema)
            cells += await stack.enter_async_context(
                backend_cells("PostgreSQL", f"{base}?schema={schema}", (base,), schema=schema)
            )
        for cell in cells:
            for _ in range(2):
                await cell.sample()
        for _ in range(samples):
            for cell in cells:
                cell.values.append(await cell.sample())
        return cells


def report_per_iteration(cells: list[Cell], samples: int) -> None:
    print(
        f"\nOne ai_agent step, N turns of one tool call each, then the answer: "
        f"us per iteration (median of {samples})"
    )
    widths = [max(len(c), 8) for c in COLUMNS]
    head = " ".join(f"{c:>{w}}" for c, w in zip(COLUMNS, widths, strict=True))
    print(f"{'backend':<11} {'N':>3} {head} {'in-proc/lib':>12} {'pool/lib+pool':>14}  target")
    by = {(c.backend, c.n, c.column): statistics.median(c.values) * 1e6 for c in cells}
    for backend in dict.fromkeys(c.backend for c in cells):
        for n in SIZES:
            us = [by[backend, n, column] for column in COLUMNS]
            row = " ".join(f"{v:>{w}.0f}" for v, w in zip(us, widths, strict=True))
            in_process, pooled = us[2] / us[3], us[0] / us[4]
            verdict = "PASS" if max(in_process, pooled) <= TARGET_RATIO else "FAIL"
            print(
                f"{backend:<11} {n:>3} {row} {in_process:>11.2f}x {pooled:>13.2f}x  "
                f"both <= {TARGET_RATIO:g}x {verdict}"
            )
    print(
        "  host: the step through the engine, its tool in the worker's script pool (function, "
        "script) or called in the worker (`run: in_process`); library: tidemill.agent() with "
        "the same checkpointer, echo in process; library + pool: its echo calls the same "
        "function in a script pool\n"
        "  the target compares like with like: in-process tools on both sides (in-proc/lib), "
        "and tools isolated in a pool process on both sides (pool/lib+pool)"
    )


# -- table 2: 200 agent steps at once in one worker process -----------------------------------


class MockProvider:
    """An OpenAI-compatible `/v1/chat/completions` that answers after `latency` seconds.

    The first turn of a conversation gets a call of `echo(i=0)`, a turn after
    the tool's result gets the answer. It counts requests in flight (read,
    not yet answered) and the most there were at once.
    """

    def __init__(self, latency: float) -> None:
        self.latency = latency
        self.in_flight = 0
        self.peak = 0
        self.turns = {"tool_call": 0, "answer": 0}
        self.errors: list[str] = []
        self.first_turns: list[float] = []

    def reset(self) -> None:
        self.peak = self.in_flight
        self.turns = {"tool_call": 0, "answer": 0}
        self.first_turns = []

    def ramp(self) -> float:
        """Seconds from the first conversation's first request to the last one's."""
        return max(self.first_turns) - min(self.first_turns) if self.first_turns else 0.0

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                headers = dict(
                    (name.strip().lower(), value.strip())
                    for name, _, value in (line.partition(":") for line in lines[1:] if line)
                )
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if self._first_turn(body):
                    self.first_turns.append(time.perf_counter())
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
                try:
                    await asyncio.sleep(self.latency)
                    status, payload = self.answer(lines[0], body)
                finally:
                    self.in_flight -= 1
                writer.write(
                    f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
                    f"content-length: {len(payload)}\r\n\r\n".encode()
                    + payload
                )
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    @staticmethod
    def _first_turn(body: bytes) -> bool:
        """Whether a request opens its conversation (no tool result in it yet)."""
        try:
            messages = json.loads(body)["messages"]
        except (ValueError, KeyError, TypeError):
            return False
        return not any(m.get("role") == "tool" for m in messages)

    def answer(self, request_line: str, body: bytes) -> tuple[str, bytes]:
        if not request_line.startswith("POST ") or "/chat/completions" not in request_line:
            self.errors.append(request_line)
            return "404 Not Found", b'{"error": {"message": "not found"}}'
        messages = json.loads(body)["messages"]
        results = [m for m in messages if m.get("role") == "tool"]
        if results:
            if json.loads(results[-1]["content"]) != 0:
                self.errors.append(f"echo(0) gave {results[-1]['content']!r}")
            self.turns["answer"] += 1
            message: dict[str, Any] = {"role": "assistant", "content": FINAL}
            reason = "stop"
        else:
            self.turns["tool_call"] += 1
            call = {"name": "echo", "arguments": json.dumps({"i": 0})}
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "call_0", "type": "function", "function": call}],
            }
            reason = "tool_calls"
        completion = {
            "id": f"chatcmpl-{secrets.token_hex(6)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": "mock",
            "choices": [{"index": 0, "message": message, "finish_reason": reason}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
        }
        return "200 OK", json.dumps(completion).encode()


def mock_flow(base_url: str) -> Flow:
    step = {
        "id": "agent",
        "ai_agent": {
            "model": "openai-compatible:mock",
            "base_url": base_url,
            "api_key": f"env:{KEY_ENV}",
            "tools": [{"name": "echo", "function": TOOL_FUNCTION}],
            "max_iterations": 3,
        },
        "inputs": {"user_message": "Call echo once, then answer."},
    }
    return Flow.model_validate({"name": "mock-agent", "steps": [step]})


async def _worker_main(url: str, concurrency: int, pool_size: int, models: str) -> None:
    """The worker process of table 2: ready, then work until SIGTERM."""
    engine = AsyncEngine(url)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await engine.store.transact(lambda tx: tx.counts())  # connected and warm
    del models  # the worker's own default: each model built once, shared by its steps
    async with engine.worker(concurrency=concurrency, pool_size=pool_size):
        print("ready", flush=True)
        await stop.wait()
    await engine.close()


def _status(pid: int, field_name: str) -> int:
    """A `/proc/<pid>/status` field in kB (0 when the process is gone)."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    for line in text.splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1])
    return 0


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


@dataclass
class Burst:
    backend: str
    models: str
    seconds: float
    peak: int
    ramp: float
    worker_kb: int
    pool_kb: int
    pool_processes: int


async def burst(backend: str, url: str, models: str = "default") -> Burst:
    """200 one-step agent runs at once against the mock, in one worker process."""
    mock = MockProvider(LATENCY)
    server = await asyncio.start_server(mock.serve, "127.0.0.1", 0, backlog=1024)
    port = server.sockets[0].getsockname()[1]
    flow = mock_flow(f"http://127.0.0.1:{port}/v1")
    engine = AsyncEngine(url, migrate=True)
    await engine.__aenter__()  # the store's tables, before the worker reads them
    env = {**os.environ, KEY_ENV: "sk-mock"}
    worker = await asyncio.create_subprocess_exec(
        sys.executable, __file__, WORKER_FLAG, url, str(STEPS), str(WORKER_POOL), models,
        stdout=asyncio.subprocess.PIPE, env=env,
    )  # fmt: skip
    try:
        assert worker.stdout is not None
        line = await asyncio.wait_for(worker.stdout.readline(), 60)
        check(line.strip() == b"ready", f"the worker said {line!r}")
        # A warm-up run (untimed): imports, the script pool, the first connections.
        check(await engine.wait(await engine.submit(flow, {}), timeout=60) == FINAL, "warm-up")
        mock.reset()
        started = time.perf_counter()
        run_ids = await engine.submit_many(flow, [{}] * STEPS)
        while True:
            counts = await engine.store.transact(lambda tx: tx.counts())
            if counts.get("succeeded", 0) + counts.get("failed", 0) >= STEPS + 1:
                break
            check(
                time.perf_counter() - started < DEADLINE, f"unfinished after {DEADLINE} s: {counts}"
            )
            await asyncio.sleep(0.02)  # each look is a query: not too often, on a shared CPU
        seconds = time.perf_counter() - started
        worker_kb = _status(worker.pid, "VmHWM")
        children = _children(worker.pid)
        pool_kb = sum(_status(child, "VmHWM") for child in children)
        results = [await engine.get(run_id) for run_id in run_ids]
        failed = [r for r in results if r.status != "succeeded" or r.result != FINAL]
        check(not failed, f"{len(failed)} runs did not answer, e.g. {failed[:1]}")
        check(mock.turns == {"tool_call": STEPS, "answer": STEPS}, f"mock turns {mock.turns}")
        check(not mock.errors, f"the mock saw {mock.errors[:3]}")
        return Burst(
            backend, models, seconds, mock.peak, mock.ramp(), worker_kb, pool_kb, len(children)
        )
    finally:
        if worker.returncode is None:
            worker.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(worker.wait(), 30)
            except TimeoutError:
                worker.kill()
                await worker.wait()
        await engine.close()
        server.close()
        await server.wait_closed()


def report_bursts(bursts: list[Burst]) -> None:
    print(
        f"\n{STEPS} one-step agent runs submitted at once, ONE worker process "
        f"(concurrency {STEPS}, script pool {WORKER_POOL}); mock provider {LATENCY * 1000:.0f} ms "
        "per call, 2 calls per step"
    )
    print(
        f"{'backend':<11} {'models':<8} {'steps/s':>8} {'wall s':>7} {'in flight':>10} "
        f"{'ramp ms':>8} {'worker peak':>12} {'pool peak':>14}  target"
    )
    for b in bursts:
        worker_mb = b.worker_kb / 1024
        ok = b.peak >= STEPS and worker_mb < TARGET_MB
        pool = f"{b.pool_kb / 1024:.0f} MB/{b.pool_processes}p"
        print(
            f"{b.backend:<11} {b.models:<8} {STEPS / b.seconds:>8.1f} {b.seconds:>7.2f} "
            f"{b.peak:>6}/{STEPS} {b.ramp * 1000:>8.0f} "
            f"{worker_mb:>9.0f} MB {pool:>14}  all {STEPS} at once, < {TARGET_MB:g} MB: "
            f"{'PASS' if ok else 'FAIL'}"
        )
    print(
        "  in flight: most requests the mock held at once; ramp: first to last first-turn "
        f"request at the mock (all {STEPS} overlap only under {LATENCY * 1000:.0f} ms); "
        "worker peak: the worker process's VmHWM; pool peak: its script processes' together\n"
        "  models: default = the worker's default resolver: each model built once and shared "
        "by its steps, as `tidemill worker` runs"
    )


async def bursts(base: str, postgres: bool) -> list[Burst]:
    found = []
    for models in ("default",):
        with tempfile.TemporaryDirectory(prefix="tidemill-bench-") as folder:
            found.append(await burst("SQLite", f"sqlite:///{folder}/store.db", models))
        if postgres:
            schema = new_schema()
            try:
                found.append(await burst("PostgreSQL", f"{base}?schema={schema}", models))
            finally:
                drop_schema(base, schema)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples in the first table")
    args = parser.parse_args()
    samples = 3 if args.quick else 7
    base = postgres_base()
    missing = postgres_missing(base)
    load = os.getloadavg()[0]
    print(f"{os.cpu_count()} CPUs, load average {load:.2f}; tidemill {tidemill.__version__}")
    if missing:
        print(f"PostgreSQL rows skipped: {missing}")
    cells = asyncio.run(per_iteration(samples, base, missing is None))
    report_per_iteration(cells, samples)
    report_bursts(asyncio.run(bursts(base, missing is None)))


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == WORKER_FLAG:
        asyncio.run(_worker_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]))
    else:
        main()
