"""What the workspace costs: resolving a run's references, search, and listing a big folder.

On SQLite (a temporary file) and, when a URL is given, on PostgreSQL (a schema
of its own, dropped afterwards):

1. Reference resolution: `await ws.resolve(inputs)` for step inputs holding a
   plain `$var:` and a `$res:` (an `openai` resource whose `api_key` is a
   secret `$var:`), as a non-admin user who reads the folder through a
   group's viewer grant (so grants are checked and the secret decrypted and
   audited): median and p95 over N calls, in ms. Also `has_references(inputs)`
   on inputs without references, the cost every step pays, in us.
2. The engine's added cost per step: 20 identity steps whose inputs hold the
   same references against the same values written literally, submitted with
   `run_as` to an engine with an in-process worker; ms per step of each and
   the difference (an engine without `run_as`: the bare resolution, pending).
3. Search: ITEMS items (paths `f/big/<area>/<verb>_<noun>_<n>`, summaries as
   short sentences, from word lists) written in one transaction through the
   workspace's queries; 20 varied queries (words, typos, prefixes, several
   words, a path, nothing that matches). The first call builds the index and
   is reported on its own; steady-state median and p95 over every query of
   every round, as the admin and as a viewer.
4. Listing: `await ws.list("f/big/", limit=100, after=last)` through every page
   of the folder, per page median and p95 in ms, as the admin and as a viewer
   with a folder grant.

Targets (the issue's): resolution adds at most 0.5 ms to a step on SQLite,
search over 10,000 items answers in at most 20 ms, listing pages in at most
10 ms a page. A verdict is on the median; a p95 over the target is noted.

    .venv/bin/python benchmarks/workspace.py [--quick] [--postgres URL] [--profile PART]

PostgreSQL comes from --postgres or $TIDEMILL_BENCH_POSTGRES_URL; without
either, only SQLite runs. --profile resolve|search|list prints a cProfile of
200 calls of that part (on PostgreSQL when a URL is given, else on SQLite).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import inspect
import os
import pstats
import random
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from tidemill.store import dumps
from tidemill.workspace import AsyncWorkspace, Item, Keyring, MasterKey, has_references

POSTGRES_ENV = "TIDEMILL_BENCH_POSTGRES_URL"
TARGET_RESOLVE_MS = 0.5
TARGET_SEARCH_MS = 20.0
TARGET_PAGE_MS = 10.0
PAGE = 100
STEPS = 20

AREAS = [
    "billing", "support", "sales", "ops", "security", "data", "growth", "hr",
    "finance", "legal", "infra", "mobile", "web", "search", "ml", "docs",
    "payments", "shipping", "inventory", "marketing",
]  # fmt: skip
VERBS = [
    "sync", "export", "import", "triage", "refund", "notify", "summarize",
    "classify", "archive", "validate", "enrich", "translate", "review", "score",
    "route", "index", "backfill", "audit", "escalate", "forecast", "reconcile",
    "dedupe", "label", "publish", "schedule",
]  # fmt: skip
NOUNS = [
    "orders", "tickets", "invoices", "customers", "emails", "leads", "reports",
    "contracts", "payments", "users", "events", "logs", "documents", "alerts",
    "shipments", "reviews", "accounts", "subscriptions", "refunds", "metrics",
]  # fmt: skip
OBJECTS = [
    "from the CRM", "into the warehouse", "for the weekly report", "with an LLM",
    "before month end", "for the on-call team", "from Zendesk", "to Slack",
    "by priority", "every night", "for compliance", "in three languages",
]  # fmt: skip
QUERIES = [
    "refund", "tirage tickets", "invoices", "summarize emails", "reconcle payments",
    "exp", "forecast metrics weekly", "billing/refund", "slack alerts", "escalate",
    "nightly backfill logs", "classify leads llm", "shipmnts", "customer accounts",
    "dedupe", "warehouse import events", "kubernetes", "publish reports",
    "audit contracts compliance", "tr",
]  # fmt: skip


def ms(seconds: float) -> float:
    return seconds * 1000


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


@dataclass
class Figure:
    backend: str
    what: str
    median: float
    p95: float | None
    unit: str
    target: float | None = None
    note: str = ""

    def verdict(self) -> str:
        if self.target is None:
            return ""
        met = self.median <= self.target
        text = "met" if met else "NOT MET"
        if met and self.p95 is not None and self.p95 > self.target:
            text += " (p95 over)"
        return text


async def timed(fn: Callable[[], Awaitable[Any]], n: int) -> list[float]:
    """Seconds for each of `n` awaits of `fn()`."""
    times: list[float] = []
    for _ in range(n):
        started = time.perf_counter()
        await fn()
        times.append(time.perf_counter() - started)
    return times


def item_rows(count: int) -> list[tuple[str, str, str]]:
    """(path, summary, code) of `count` distinct scripts under f/big/."""
    rng = random.Random(17)
    rows: list[tuple[str, str, str]] = []
    for n in range(count):
        area, verb, noun = rng.choice(AREAS), rng.choice(VERBS), rng.choice(NOUNS)
        path = f"f/big/{area}/{verb}_{noun}_{n}"
        summary = f"{verb.capitalize()} {area} {noun} {rng.choice(OBJECTS)}."
        code = f"'''{summary}'''\ndef main(x: int):\n    return x\n"
        rows.append((path, summary, code))
    return rows


async def setup(url: Any, items: int) -> tuple[AsyncWorkspace, AsyncWorkspace, AsyncWorkspace]:
    """The admin, a viewer through a group, a viewer through a folder grant."""
    keyring = Keyring(MasterKey.parse(os.environ["TIDEMILL_MASTER_KEY"]))
    admin = AsyncWorkspace(url, user="ada", keyring=keyring, migrate=True)
    await admin.add_folder("ai", summary="Models and keys")
    await admin.add_user("vera")
    await admin.add_user("finn")
    await admin.add_group("readers")
    await admin.set_member("readers", "vera")
    await admin.grant("f/ai", "g/readers", "viewer")
    await admin.write("f/ai/region", "variable", "eu-west-1")
    await admin.write("f/ai/openai_key", "variable", "sk-bench-0123456789", secret=True)
    await admin.write(
        "f/ai/openai",
        "resource",
        {"api_key": "$var:f/ai/openai_key", "base_url": "https://api.openai.com/v1"},
        resource_type="openai",
    )
    await admin.add_folder("big", summary="Many scripts", roles={"finn": "viewer"})
    await admin.grant("f/big", "g/readers", "viewer")
    rows = item_rows(items)

    def bulk(ctx: Any) -> None:
        for path, summary, code in rows:
            item = Item(path, "script", summary, "", 1, ctx.principal.name, ctx.now, code)
            ctx.q.put_item(item, dumps(code), exists=False)

    started = time.perf_counter()
    await admin.transact(bulk)
    if items:
        print(
            f"  wrote {items:,} items in one transaction in {time.perf_counter() - started:.2f} s"
        )
    vera = await admin.acting_as("vera")
    finn = await admin.acting_as("finn")
    return admin, vera, finn


RESOURCE = {"api_key": "sk-bench-0123456789", "base_url": "https://api.openai.com/v1"}
INPUTS = {
    "prompt": "Summarize the ticket",
    "region": "$var:f/ai/region",
    "llm": "$res:f/ai/openai",
    "n": 3,
}
LITERAL = {
    "prompt": "Summarize the ticket",
    "region": "eu-west-1",
    "options": {"temperature": 0.2, "tags": ["support", "urgent"], "n": 3},
}


async def resolution(backend: str, viewer: AsyncWorkspace, n: int) -> list[Figure]:
    resolved = await viewer.resolve(INPUTS, purpose="bench")
    if resolved.value["llm"] != RESOURCE or resolved.value["region"] != "eu-west-1":
        raise RuntimeError(f"resolved to {resolved.value!r}")
    await timed(lambda: viewer.resolve(INPUTS, purpose="bench"), max(5, n // 20))
    times = [ms(t) for t in await timed(lambda: viewer.resolve(INPUTS, purpose="bench"), n)]
    figures = [
        Figure(
            backend,
            f"resolve $var + $res(secret), viewer via group, N={n}",
            statistics.median(times),
            p95(times),
            "ms",
            TARGET_RESOLVE_MS if backend == "SQLite" else None,
        ),
    ]
    if backend == "SQLite":
        loops = 20_000 if n >= 500 else 2_000
        samples = []
        for _ in range(5):
            started = time.perf_counter()
            for _ in range(loops):
                has_references(LITERAL)
            samples.append((time.perf_counter() - started) / loops * 1e6)
        figures.insert(
            1,
            Figure(
                "any",
                "has_references(inputs without references)",
                statistics.median(samples),
                max(samples),
                "us",
                note="p95 column: the slowest of 5 samples",
            ),
        )
    return figures


def chain(references: bool) -> Any:
    """STEPS identity steps, with references in their inputs or the same values literally."""
    from tidemill.flows import Flow

    llm: Any = "$res:f/ai/openai" if references else dict(RESOURCE)
    region = "$var:f/ai/region" if references else "eu-west-1"
    steps = [
        {"id": f"s{i}", "identity": {}, "inputs": {"region": region, "llm": llm, "n": i}}
        for i in range(STEPS)
    ]
    return Flow.model_validate({"name": "refs" if references else "literal", "steps": steps})


async def engine_steps(backend: str, url: str, runs: int, resolve_ms: float) -> list[Figure]:
    """ms per step of a chain with references and without, through a worker in-process."""
    from tidemill.engine import AsyncEngine

    target = TARGET_RESOLVE_MS if backend == "SQLite" else None
    if "run_as" not in inspect.signature(AsyncEngine.submit).parameters:
        note = "pending: the engine does not resolve references yet; this is one resolution"
        return [Figure(backend, "engine: added ms/step", resolve_ms, None, "ms", target, note)]
    engine = AsyncEngine(url, migrate=True)
    per_step: dict[bool, list[float]] = {False: [], True: []}
    try:
        admin, _, _ = await setup(engine.store, 0)
        await admin.close()
        flows = {flag: chain(flag) for flag in (False, True)}
        async with engine.worker(concurrency=4, poll=0.5):
            for index in range(runs + 1):
                for flag in (False, True):  # interleaved: a slow patch hits both
                    started = time.perf_counter()
                    run_id = await engine.submit(flows[flag], {}, run_as="vera")
                    result = await engine.wait(run_id, timeout=120)
                    elapsed = time.perf_counter() - started
                    if result["llm"]["base_url"] != RESOURCE["base_url"]:
                        raise RuntimeError(f"the chain returned {result!r}")
                    if index:  # the first run of each warms up
                        per_step[flag].append(ms(elapsed) / STEPS)
    finally:
        await engine.close()
    literal, refs = (statistics.median(per_step[flag]) for flag in (False, True))
    what = f"engine, {STEPS} identity steps, {runs} runs: ms/step"
    return [
        Figure(backend, f"{what}, literal inputs", literal, None, "ms"),
        Figure(backend, f"{what}, $var/$res", refs, None, "ms"),
        Figure(
            backend,
            "engine: added ms/step by references (difference)",
            refs - literal,
            None,
            "ms",
            target,
            f"each step is a job, resolved once; a bare resolution: {resolve_ms:.3f} ms",
        ),
    ]


async def search(
    backend: str, admin: AsyncWorkspace, viewer: AsyncWorkspace, items: int, rounds: int
) -> list[Figure]:
    figures = []
    for who, ws in (("admin", admin), ("viewer", viewer)):
        started = time.perf_counter()
        first = await ws.search(QUERIES[0])
        build = ms(time.perf_counter() - started)
        if not first:
            raise RuntimeError(f"no hit for {QUERIES[0]!r}")
        times: list[float] = []
        for _ in range(rounds):
            for query in QUERIES:
                started = time.perf_counter()
                await ws.search(query)
                times.append(ms(time.perf_counter() - started))
        figures.append(
            Figure(
                backend,
                f"search {items:,} items, first call (index build), {who}",
                build,
                None,
                "ms",
            )
        )
        figures.append(
            Figure(
                backend,
                f"search {items:,} items, steady, {who}, {len(times)} calls",
                statistics.median(times),
                p95(times),
                "ms",
                TARGET_SEARCH_MS,
            )
        )
    return figures


async def listing(
    backend: str, admin: AsyncWorkspace, viewer: AsyncWorkspace, items: int, passes: int
) -> list[Figure]:
    figures = []
    for who, ws in (("admin", admin), ("viewer (folder grant)", viewer)):
        times: list[float] = []
        for _ in range(passes):
            after: str | None = None
            seen = 0
            while True:
                started = time.perf_counter()
                page = await ws.list("f/big/", limit=PAGE, after=after)
                times.append(ms(time.perf_counter() - started))
                seen += len(page)
                if len(page) < PAGE:
                    break
                after = page[-1].path
            if seen != items:
                raise RuntimeError(f"listed {seen} items, not {items}")
        figures.append(
            Figure(
                backend,
                f"list f/big/ ({items:,}) by {PAGE}, {who}, {len(times)} pages",
                statistics.median(times),
                p95(times),
                "ms",
                TARGET_PAGE_MS,
            )
        )
    return figures


async def run_backend(
    backend: str, url: str, engine_url: str, items: int, n: int, rounds: int
) -> list[Figure]:
    print(f"{backend}:")
    admin, vera, finn = await setup(url, items)
    try:
        figures = await resolution(backend, vera, n)
        at = len(figures)
        figures += await search(backend, admin, vera, items, rounds)
        figures += await listing(backend, admin, finn, items, rounds)
    finally:
        await admin.close()
    figures[at:at] = await engine_steps(backend, engine_url, 2 * rounds, figures[0].median)
    return figures


async def profile(part: str, url: str, items: int) -> None:
    admin, vera, finn = await setup(url, items)
    try:
        await vera.search("warm")
        await finn.list("f/big/", limit=PAGE)
        calls: dict[str, Callable[[], Awaitable[Any]]] = {
            "resolve": lambda: vera.resolve(INPUTS, purpose="bench"),
            "search": lambda: vera.search(random.choice(QUERIES)),
            "list": lambda: finn.list("f/big/", limit=PAGE, after="f/big/m"),
        }
        # The work runs on the store's threads: profile each transaction there.
        profiler = cProfile.Profile()
        store: Any = admin.store
        blocking = store._transact_blocking
        store._transact_blocking = lambda fn: profiler.runcall(blocking, fn)
        started = time.perf_counter()
        await timed(calls[part], 200)
        print(f"  200 calls of {part}: {ms(time.perf_counter() - started) / 200:.3f} ms each")
    finally:
        await admin.close()
    pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def drop_schema(base: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(base, autocommit=True) as connection:
        connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def report(figures: list[Figure]) -> None:
    print()
    print(
        f"{'backend':10} {'figure':62} {'median':>9} {'p95':>9} {'unit':4}  {'target':>9}  verdict"
    )
    for f in figures:
        target = "" if f.target is None else f"<= {f.target:g} {f.unit}"
        spread = "" if f.p95 is None else f"{f.p95:.3f}"
        print(
            f"{f.backend:10} {f.what:62} {f.median:9.3f} {spread:>9} {f.unit:4}  {target:>9}  "
            f"{f.verdict()}"
        )
        if f.note:
            print(f"{'':10}   ({f.note})")
    missed = [f for f in figures if f.target is not None and f.median > f.target]
    if missed:
        print("\nTargets NOT MET:")
        for f in missed:
            print(f"  {f.backend}: {f.what}: {f.median:.3f} {f.unit} > {f.target:g} {f.unit}")
    else:
        print("\nEvery target met (verdicts on the median).")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{os.cpu_count()} CPUs, load average {load:.2f}, Python {sys.version.split()[0]}")


def main() -> None:
    # The engine's workers read the master key as any worker does: from the environment.
    os.environ.setdefault("TIDEMILL_MASTER_KEY", MasterKey.generate().encoded())
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 items, fewer iterations")
    parser.add_argument("--postgres", default=os.environ.get(POSTGRES_ENV), help="a server URL")
    parser.add_argument("--profile", choices=["resolve", "search", "list"], help="cProfile a part")
    args = parser.parse_args()
    items, n, rounds = (1_000, 50, 1) if args.quick else (10_000, 500, 5)
    with tempfile.TemporaryDirectory() as tmp:
        if args.profile:  # on PostgreSQL when a URL is given, else on SQLite
            if args.postgres:
                schema = f"tm_bench_ws_{os.getpid()}_{secrets.token_hex(3)}"
                try:
                    asyncio.run(profile(args.profile, f"{args.postgres}?schema={schema}", items))
                finally:
                    drop_schema(args.postgres, schema)
            else:
                asyncio.run(profile(args.profile, f"sqlite:///{tmp}/p.db", items))
            return
        sqlite = f"sqlite:///{tmp}/ws.db", f"sqlite:///{tmp}/engine.db"
        figures = asyncio.run(run_backend("SQLite", *sqlite, items, n, rounds))
    if args.postgres:
        schemas = [f"tm_bench_ws_{os.getpid()}_{secrets.token_hex(3)}" for _ in range(2)]
        try:
            ws_url, engine_url = (f"{args.postgres}?schema={schema}" for schema in schemas)
            figures += asyncio.run(run_backend("PostgreSQL", ws_url, engine_url, items, n, rounds))
        except OSError as error:
            print(f"PostgreSQL skipped: {error}")
        finally:
            for schema in schemas:
                drop_schema(args.postgres, schema)
    else:
        print(f"PostgreSQL skipped: no --postgres URL and no ${POSTGRES_ENV}")
    report(figures)


if __name__ == "__main__":
    main()
