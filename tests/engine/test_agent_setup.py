"""What an agent step sets up before its first model call, cached where it can be.

Tool schemas are parsed once per source (not once per step), a module's
source is read again only when its file changed, and a thread the step has
just read is not read again by the agent runtime.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tidemill.agents.checkpoint import MemoryCheckpointer
from tidemill.agents.journal import RunFinished
from tidemill.engine._journal import StepJournal
from tidemill.engine.ai._tools import tool_schema
from tidemill.flows import AgentToolSpec
from tidemill.flows._signature import function_source, signature_schema


@pytest.fixture
def on_path(tmp_path: Path) -> Iterator[Path]:
    """A folder at the front of the import path."""
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))


def test_the_same_source_is_parsed_once() -> None:
    source = "def main(order: str, amount: float = 0.0):\n    '''Refund.'''\n"
    first = signature_schema(source, where="the script of tool 'refund'")
    assert signature_schema(source, where="the script of tool 'refund'") is first
    other = signature_schema(source.replace("float", "int"), where="the script of tool 'refund'")
    assert other.parameters["properties"]["amount"]["type"] == "integer"
    assert first.parameters["properties"]["amount"]["type"] == "number"


def test_two_flows_tools_keep_their_own_schemas() -> None:
    """Same tool name and bound input, different scripts: each step sees its own schema."""
    one = AgentToolSpec(
        name="lookup", inputs={"tenant": "a"}, script="def main(tenant: str, sku: str): ..."
    )
    two = AgentToolSpec(
        name="lookup", inputs={"tenant": "b"}, script="def main(tenant: str, limit: int): ..."
    )
    for _ in range(2):  # the second time from the cache
        assert tool_schema(one)[0]["properties"] == {"sku": {"type": "string"}}
        assert tool_schema(two)[0]["properties"] == {"limit": {"type": "integer"}}
    schema, _ = tool_schema(one)
    schema["properties"]["sku"]["type"] = "changed by a caller"
    assert tool_schema(one)[0]["properties"] == {"sku": {"type": "string"}}


def test_an_edited_module_is_read_again(on_path: Path) -> None:
    module = on_path / "tm_setup_tools_a.py"
    module.write_text("def echo(i: int) -> int:\n    return i\n")
    source, name = function_source("tm_setup_tools_a:echo")
    assert name == "echo" and "i: int" in source
    assert function_source("tm_setup_tools_a:echo")[0] == source
    module.write_text("def echo(i: int, times: int = 2) -> int:\n    return i * times\n")
    stat = module.stat()
    os.utime(module, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert "times: int = 2" in function_source("tm_setup_tools_a:echo")[0]


def test_a_module_is_found_on_the_current_import_path(tmp_path: Path) -> None:
    """Two folders with a module of the same name: the one the import path finds first."""
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, parameter in ((first, "a"), (second, "b")):
        folder.mkdir()
        (folder / "tm_setup_tools_b.py").write_text(f"def f({parameter}: int): ...\n")
    for folder, parameter in ((first, "a"), (second, "b"), (first, "a")):
        sys.path.insert(0, str(folder))
        try:
            assert f"def f({parameter}:" in function_source("tm_setup_tools_b:f")[0]
        finally:
            sys.path.remove(str(folder))


async def test_a_step_journal_reads_a_thread_once_until_it_writes() -> None:
    checkpointer = MemoryCheckpointer()
    await checkpointer.append("t", [RunFinished(output=1)], after=0)
    journal = StepJournal(checkpointer)
    first = await journal.read("t")
    await checkpointer.append("t", [RunFinished(output=2)], after=1)  # another process, say
    assert await journal.read("t") is first  # the runtime's read right after the step's
    assert len(await journal.read("t")) == 2  # then the database again
    await journal.read("t")
    await journal.append("t", [RunFinished(output=3)], after=2)
    assert [r.seq for r in await journal.read("t")] == [1, 2, 3]  # a write forgets the read
    await journal.read("t")
    assert [r.seq for r in await journal.read("t", after=2)] == [3]
    await journal.aclose()
    assert await checkpointer.threads() == ["t"]  # the checkpointer stays open
