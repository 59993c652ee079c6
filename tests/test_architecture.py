"""The shape of `src/`: small modules, no long import cycles.

The layering itself (which package may import which) is checked by
import-linter's contracts in `pyproject.toml`, run by `make check`; this file
checks what import-linter does not: module size and cycle length.
"""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

SRC = Path(__file__).resolve().parent.parent / "src" / "tidemill"
MAX_LINES = 600
MAX_CYCLE = 2


def strongly_connected(graph: grimp.ImportGraph) -> list[set[str]]:
    """The import graph's strongly connected components (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    counter = 0
    for root in sorted(graph.modules):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = []
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        work.append((root, sorted(graph.find_modules_directly_imported_by(root))))
        while work:
            node, pending = work[-1]
            if pending:
                nxt = pending.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.find_modules_directly_imported_by(nxt))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def test_strongly_connected_finds_a_cycle_and_leaves_a_chain_alone() -> None:
    graph = grimp.ImportGraph()
    for name in ("a", "b", "c", "d"):
        graph.add_module(name)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    graph.add_import(importer="c", imported="a")
    graph.add_import(importer="c", imported="d")
    found = sorted(sorted(c) for c in strongly_connected(graph))
    assert found == [["a", "b", "c"], ["d"]]


def test_no_import_cycle_spans_more_than_two_modules() -> None:
    graph = grimp.build_graph("tidemill")
    long_cycles = [sorted(c) for c in strongly_connected(graph) if len(c) > MAX_CYCLE]
    assert not long_cycles, (
        "these modules import each other in a cycle; move what they share into a "
        f"module below them: {long_cycles}"
    )


@pytest.mark.parametrize(
    "path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC.parent))
)
def test_no_module_passes_600_lines(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.name} has {lines} lines; split it by concern"
