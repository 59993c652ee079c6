"""How well workspace search finds what a user means: recall@5 and MRR over typed queries.

The fixture (`search_quality.yaml`, next to this file) is a team's workspace
of 215 scripts and flows across billing, support, notifications, devops,
data, HR, sales, marketing, a shop, security, IT, finance, legal and
engineering, each with a path and a one-line summary, and 70 queries as
users type them: other words (`vacation approval` for a leave request),
typos (`refnud`, `onbaording`, `slak`), other word orders (`invoice
processing`), fragments (`payroll`), each with the items it should find.

Each query is searched as `AsyncWorkspace.search` searches (the workspace's
`SearchIndex`, built from every item's path, kind and summary, all kinds,
limit 5). Per query:

- recall@5: the share of its expected items in the first five hits;
- reciprocal rank: 1 / the rank of its first expected hit (0 if none in the
  first ten).

The table gives the means over all queries and, with `--misses`, each query
whose expected items are not all in the first five. Target (issue 25):
recall@5 >= 0.9.

    .venv/bin/python benchmarks/search_quality.py [--misses]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from tidemill.workspace._search import SearchEntry, SearchIndex

FIXTURE = Path(__file__).with_name("search_quality.yaml")
TARGET_RECALL = 0.9
K = 5


@dataclass(frozen=True)
class Outcome:
    """What one query found."""

    query: str
    expected: tuple[str, ...]
    hits: tuple[str, ...]

    @property
    def recall(self) -> float:
        return sum(1 for p in self.expected if p in self.hits[:K]) / len(self.expected)

    @property
    def reciprocal_rank(self) -> float:
        for rank, path in enumerate(self.hits, start=1):
            if path in self.expected:
                return 1.0 / rank
        return 0.0


def load(path: Path = FIXTURE) -> tuple[list[SearchEntry], list[tuple[str, tuple[str, ...]]]]:
    """The fixture's entries and its queries with their expected paths."""
    data = yaml.safe_load(path.read_text())
    entries = [SearchEntry(p, kind, summary) for p, kind, summary in data["items"]]
    queries = [(q, tuple(expected)) for q, expected in data["queries"]]
    return entries, queries


def evaluate(index: SearchIndex, queries: list[tuple[str, tuple[str, ...]]]) -> list[Outcome]:
    """Search each query; what each found, in order (the first ten hits)."""
    return [
        Outcome(q, expected, tuple(hit.path for hit in index.search(q, limit=10)))
        for q, expected in queries
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--misses", action="store_true", help="list the queries missed at 5")
    args = parser.parse_args(argv)
    entries, queries = load()
    index = SearchIndex(entries)
    started = time.perf_counter()
    outcomes = evaluate(index, queries)
    elapsed = (time.perf_counter() - started) / len(queries) * 1000
    recall = statistics.fmean(o.recall for o in outcomes)
    mrr = statistics.fmean(o.reciprocal_rank for o in outcomes)
    found_first = sum(1 for o in outcomes if o.reciprocal_rank == 1.0)
    verdict = "met" if recall >= TARGET_RECALL else "missed"
    print(f"search quality: {len(entries)} items, {len(queries)} queries ({FIXTURE.name})")
    print()
    print("| measure | value | target | verdict |")
    print("| --- | --- | --- | --- |")
    print(f"| recall@{K} | {recall:.3f} | >= {TARGET_RECALL} | {verdict} |")
    print(f"| MRR | {mrr:.3f} | | |")
    print(f"| expected item ranked first | {found_first} of {len(queries)} | | |")
    print(f"| time per query | {elapsed:.2f} ms | | |")
    if args.misses:
        print()
        for o in outcomes:
            if o.recall < 1.0:
                print(f"- {o.query!r}: expected {list(o.expected)}, got {list(o.hits[:K])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
