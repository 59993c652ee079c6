"""Components by name, factory or object: `bind()`, plugins' entry points, the default model."""

from __future__ import annotations

import pathlib
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from tidemill import ConfigurationError, InvalidOption, agent, tool
from tidemill.agents import GROUPS, AgentRuntime
from tidemill.agents.checkpoint import MemoryCheckpointer, SQLiteCheckpointer
from tidemill.agents.guardrails import RuleGuardrail
from tidemill.agents.memory import WindowMemory
from tidemill.agents.tracing import MemoryTracer
from tidemill.llm import ScriptedModel


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key.upper()


def test_bound_names_resolve_on_that_builder_only() -> None:
    made: list[dict[str, Any]] = []

    def corp_model(**options: Any) -> ScriptedModel:
        made.append(options)
        return ScriptedModel(["from mycorp"])

    bot = (
        agent()
        .bind("mycorp", corp_model)
        .bind("short", lambda size=2: WindowMemory(size=size))
        .bind("strict", lambda: RuleGuardrail(pii=True, on_violation="block"))
        .bind("spans", MemoryTracer)
        .bind("keep", MemoryCheckpointer)
        .bind("lookup", lookup)
    )
    bot.llm("mycorp:big", temperature=0).memory("short", size=3).guardrails("strict")
    bot.observe("spans").checkpoint("keep").tool("lookup")
    assert made == [{"model": "big", "temperature": 0}]
    described = bot.describe()
    assert described["memory"] == {"kind": "window", "size": 3}
    assert described["tracer"] == {"type": "MemoryTracer", "capture_content": False}
    assert described["checkpointer"] == "MemoryCheckpointer"
    assert [t["name"] for t in described["tools"]] == ["lookup"]  # type: ignore[index,union-attr]
    assert bot.run("hi").output == "from mycorp"
    # Another builder knows none of it.
    with pytest.raises(ConfigurationError, match="Unknown memory 'short'"):
        agent().memory("short")
    with pytest.raises(ConfigurationError, match="No tool is named 'lookup'"):
        agent().tool("lookup")


def test_a_bound_name_wins_over_a_builtin_one() -> None:
    bot = agent().llm("fake").bind("window", lambda: WindowMemory(size=1))
    assert bot.memory("window").describe()["memory"] == {"kind": "window", "size": 1}


def test_factories_are_accepted_wherever_a_component_is() -> None:
    bot = (
        agent()
        .llm(ScriptedModel, responses=["made by a factory"])
        .memory(WindowMemory, size=4)
        .guardrails(lambda: RuleGuardrail(secrets=True))
        .observe(MemoryTracer, capture_content=True)
        .checkpoint(SQLiteCheckpointer, path=":memory:")
    )
    described = bot.describe()
    assert described["memory"] == {"kind": "window", "size": 4}
    assert described["tracer"] == {"type": "MemoryTracer", "capture_content": True}
    assert described["checkpointer"] == "SQLiteCheckpointer"
    assert bot.run("hi").output == "made by a factory"
    bot.close()


def test_bad_factories_and_bindings_say_what_is_wrong() -> None:
    with pytest.raises(ConfigurationError, match="Bad option for the memory factory WindowMemory"):
        agent().memory(WindowMemory, sizes=4)
    with pytest.raises(ConfigurationError, match="returned str, which is not a memory"):
        agent().memory(lambda: "window")
    with pytest.raises(ConfigurationError, match="returned int, which is not a model"):
        agent().bind("corp", lambda: 42).llm("corp")
    with pytest.raises(ConfigurationError, match="is bound already"):
        agent().bind("x", MemoryTracer).bind("x", MemoryTracer)
    with pytest.raises(ConfigurationError, match="non-empty string"):
        agent().bind("", MemoryTracer)
    with pytest.raises(ConfigurationError, match="not callable"):
        agent().bind("x", 42)  # type: ignore[arg-type]
    # A near miss of a bound name is suggested.
    with pytest.raises(ConfigurationError, match="Did you mean 'mymemory', bound on this builder"):
        agent().bind("mymemory", WindowMemory).memory("mymemroy")


def test_llm_says_what_it_accepts() -> None:
    # Was a bare TypeError ("'int' object is not iterable").
    with pytest.raises(ConfigurationError, match="Cannot use int as a model"):
        agent().llm(42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="Cannot use list as a model"):
        agent().llm([])


def test_tool_takes_names_and_skips_none() -> None:
    bot = agent().llm("fake").bind("lookup", lookup).tool(None, "lookup", None)
    assert [t["name"] for t in bot.describe()["tools"]] == ["lookup"]  # type: ignore[index,union-attr]


def test_the_default_model_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TIDEMILL_DEFAULT_MODEL", raising=False)
    with pytest.raises(ConfigurationError, match="TIDEMILL_DEFAULT_MODEL") as raised:
        agent().run("hi")
    assert raised.value.message == "The agent has no model."
    monkeypatch.setenv("TIDEMILL_DEFAULT_MODEL", "fake")
    bot = agent()
    assert bot.native_llm().provider == "scripted"
    assert bot.run("hi").output == "hi"
    assert agent().llm().native_llm().provider == "scripted"
    monkeypatch.setenv("TIDEMILL_DEFAULT_MODEL", "opnai:gpt-4o")
    with pytest.raises(ConfigurationError, match="Unknown model provider in 'opnai:gpt-4o'"):
        agent().run("hi")
    # A bound name works as the default too.
    monkeypatch.setenv("TIDEMILL_DEFAULT_MODEL", "mycorp")
    bot = agent().bind("mycorp", lambda: ScriptedModel(["corp default"]))
    assert bot.run("hi").output == "corp default"


def test_native_llm_is_the_model_on_builder_and_runtime() -> None:
    model = ScriptedModel()
    bot = agent().llm(model)
    assert bot.native_llm() is model
    assert bot.build().native_llm() is model


def test_limits_out_of_range_are_value_errors() -> None:
    for call in (
        lambda: agent().max_iterations(0),
        lambda: agent().tool_call_retries(-1),
        lambda: agent().parallel_tools(max_parallel=0),
        lambda: AgentRuntime(model=ScriptedModel(), max_iterations=0),
        lambda: AgentRuntime(model=ScriptedModel(), tool_call_retries=-1),
    ):
        with pytest.raises(ValueError) as raised:
            call()
        assert isinstance(raised.value, InvalidOption)
        assert isinstance(raised.value, ConfigurationError)


class Closing(ScriptedModel):
    closed = 0

    async def aclose(self) -> None:
        type(self).closed += 1
        await super().aclose()


def test_closing_a_runtime_closes_what_its_builder_made_once() -> None:
    Closing.closed = 0
    runtime = agent().llm(Closing).build()
    runtime.close()
    assert Closing.closed == 1
    # The builder closing afterwards closes nothing twice.
    builder = agent().llm(Closing)
    builder.build().close()
    builder.close()
    assert Closing.closed == 2
    # A model passed in stays the caller's.
    mine = Closing()
    runtime = agent().llm(mine).build()
    runtime.close()
    assert Closing.closed == 2
    direct = AgentRuntime(model=mine)
    direct.close()
    assert Closing.closed == 2


async def test_aclose_is_awaitable_on_runtimes() -> None:
    Closing.closed = 0
    runtime = agent().llm(Closing).build()
    await runtime.aclose()
    await runtime.aclose()
    assert Closing.closed == 1
    runtime.close()


# -- plugins, through real entry points ---------------------------------------------


@pytest.fixture
def plugin(tmp_path: pathlib.Path) -> Iterator[pathlib.Path]:
    """An installed distribution `tidemill-corp` with an entry point in every group."""
    (tmp_path / "corp_plugin.py").write_text(
        textwrap.dedent(
            '''
            from tidemill.agents.memory import WindowMemory
            from tidemill.agents.tracing import MemoryTracer
            from tidemill.llm import ScriptedModel
            from tidemill.tools import tool

            def model(**options):
                return ScriptedModel([f"corp says hi ({options.get('model')})"])

            def memory(size=5):
                return WindowMemory(size=size)

            @tool
            def corp_search(query: str) -> str:
                """Search the corporate wiki."""
                return query

            NOT_CALLABLE = 42
            '''
        )
    )
    info = tmp_path / "tidemill_corp-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tidemill-corp\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        textwrap.dedent(
            f"""
            [{GROUPS["model"]}]
            corp = corp_plugin:model
            [{GROUPS["memory"]}]
            corpmem = corp_plugin:memory
            broken = corp_plugin_missing:memory
            odd = corp_plugin:NOT_CALLABLE
            window = corp_plugin:memory
            [{GROUPS["tracer"]}]
            corptrace = tidemill.agents.tracing:MemoryTracer
            [{GROUPS["tool"]}]
            corp_search = corp_plugin:corp_search
            """
        )
    )
    sys.path.insert(0, str(tmp_path))
    try:
        yield tmp_path
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("corp_plugin", None)


def test_plugins_add_names_for_every_builder(plugin: pathlib.Path) -> None:
    bot = agent().llm("corp:large").memory("corpmem", size=2).observe("corptrace")
    bot.tool("corp_search")
    described = bot.describe()
    assert described["memory"] == {"kind": "window", "size": 2}
    assert described["tracer"]["type"] == "MemoryTracer"  # type: ignore[index,call-overload]
    assert [t["name"] for t in described["tools"]] == ["corp_search"]  # type: ignore[index,union-attr]
    assert bot.run("hi").output == "corp says hi (large)"
    # Tidemill's own names are not shadowed by a plugin's.
    assert agent().llm("fake").memory("window").describe()["memory"] == {
        "kind": "window",
        "size": 20,
    }


def test_broken_plugins_name_the_package_and_entry_point(plugin: pathlib.Path) -> None:
    with pytest.raises(ConfigurationError, match="'broken' from tidemill-corp could not be loaded"):
        agent().memory("broken")
    with pytest.raises(ConfigurationError, match="'odd' from tidemill-corp is not callable"):
        agent().memory("odd")
    with pytest.raises(ConfigurationError, match="Unknown memory 'nosuch'"):
        agent().memory("nosuch")


def test_a_graph_runtime_closes_what_its_builder_made_and_names_its_model() -> None:
    pytest.importorskip("langgraph")
    Closing.closed = 0
    runtime = agent().llm(Closing).graph().build()
    assert runtime.native_llm().provider == "scripted"
    runtime.close()
    assert Closing.closed == 1
    with pytest.raises(ValueError, match="max_iterations"):
        agent().llm("fake").graph().max_iterations(0)
