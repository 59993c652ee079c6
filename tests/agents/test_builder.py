"""The fluent builder, and the seed's examples adapted to `tidemill.agent()`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import tidemill
from tidemill import (
    AgentInterrupt,
    ConfigurationError,
    MaxIterationsExceeded,
    ToolCall,
    agent,
    tool,
)
from tidemill.agents.checkpoint import MemoryCheckpointer, SQLiteCheckpointer
from tidemill.llm import ScriptedModel


@tool
def now() -> str:
    """Return the current time."""
    return "12:00"


def test_level_one_two_lines() -> None:
    bot = agent().llm("fake", responses=["Hello!"])
    assert str(bot.run("Say hello")) == "Hello!"


def test_fluent_configuration_reaches_the_runtime(tmp_path: Path) -> None:
    bot = (
        agent()
        .llm("fake", responses=["ok"])
        .tool(now)
        .tools([lambda_free_tool])
        .system("Be brief.")
        .name("clock")
        .max_iterations(4)
        .tool_call_retries(1)
        .parallel_tools(False, max_parallel=3)
        .human_in_the_loop()
        .checkpoint("sqlite", path=tmp_path / "a.db")
    )
    runtime = bot.build()
    assert runtime is bot.build()  # built once
    assert (runtime.name, runtime.system_prompt, runtime.max_iterations) == (
        "clock",
        "Be brief.",
        4,
    )
    assert (runtime.tool_call_retries, runtime.parallel_tools, runtime.max_parallel) == (
        1,
        False,
        3,
    )
    assert runtime.require_approval is True
    assert runtime.tools.names() == ["now", "lambda_free_tool"]
    assert isinstance(runtime.checkpointer, SQLiteCheckpointer)
    described = bot.describe()
    assert json.loads(json.dumps(described)) == described
    assert described["checkpointer"] == "SQLiteCheckpointer"
    bot.close()


def lambda_free_tool(x: int) -> int:
    """A plain function, wrapped automatically."""
    return x


def test_changes_after_build_rebuild_but_keep_the_default_checkpointer() -> None:
    call = ToolCall(name="deploy", arguments={"env": "prod"})

    @tool(requires_approval=True)
    def deploy(env: str) -> str:
        """Deploy."""
        return f"deployed to {env}"

    bot = agent().llm("fake", responses=["", "Deployed."], tool_calls=[[call], []]).tool(deploy)
    first = bot.build()
    with pytest.raises(AgentInterrupt):
        bot.run("ship it", thread_id="t")
    bot.system("New instructions.")
    second = bot.build()
    assert second is not first
    assert second.checkpointer is first.checkpointer  # the pause survives the rebuild
    assert isinstance(second.checkpointer, MemoryCheckpointer)
    assert bot.pending_approvals("t") == [call]
    assert bot.resume("t", approved=True).output == "Deployed."
    state = bot.state("t")
    assert state is not None and state.status == "finished"
    assert [r.event.kind for r in bot.history("t", limit=2)] == ["model_response", "finished"]
    assert bot.state("unknown") is None


def test_an_agent_without_a_model_says_what_to_do() -> None:
    with pytest.raises(ConfigurationError, match="no model") as info:
        agent().run("hi")
    assert ".llm(" in str(info.value)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda b: b.max_iterations(0), "at least 1"),
        (lambda b: b.tool_call_retries(-1), "must not be negative"),
        (lambda b: b.parallel_tools(max_parallel=0), "at least 1"),
        (lambda b: b.name(""), "must not be empty"),
        (lambda b: b.tool(42), "Cannot use int as a tool"),
        (lambda b: b.llm("opnai:gpt-4o"), "Did you mean 'openai'"),
        (lambda b: b.llm("openai:"), "names no model"),
        (lambda b: b.llm("fake", colour="red"), "Bad option"),
        (lambda b: b.llm(ScriptedModel(), responses=["x"]), "already built"),
        (lambda b: b.checkpoint("sqlit"), "Did you mean 'sqlite'"),
        (lambda b: b.checkpoint("memory", path="x"), "Bad option"),
        (lambda b: b.checkpoint(object()), "Cannot use object as a checkpointer"),
    ],
)
def test_bad_configuration_is_refused_where_it_is_made(call: object, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        call(agent())  # type: ignore[operator]


def test_a_provider_without_its_key_is_refused_where_it_is_made() -> None:
    # Every known provider is callable; a missing key still fails at .llm(), not at the run.
    with pytest.raises(ConfigurationError, match="No API key") as info:
        agent().llm("anthropic:claude-sonnet-4-5")
    assert info.value.context == {"provider": "anthropic", "env": "ANTHROPIC_API_KEY"}


def test_checkpoint_specs(tmp_path: Path) -> None:
    assert isinstance(agent().llm("fake").checkpoint().build().checkpointer, MemoryCheckpointer)
    url = f"sqlite:///{tmp_path / 'b.db'}"
    sqlite = agent().llm("fake").checkpoint(url).build().checkpointer
    assert isinstance(sqlite, SQLiteCheckpointer) and sqlite.path == str(tmp_path / "b.db")
    mine = MemoryCheckpointer()
    assert agent().llm("fake").checkpoint(mine).build().checkpointer is mine


async def test_async_entry_points() -> None:
    bot = agent().llm("fake", responses=["a b", "c"])
    assert (await bot.arun("x")).output == "a b"
    assert "".join([t async for t in bot.astream_text("y")]) == "c"


def test_sync_stream() -> None:
    bot = agent().llm("fake", responses=["one two"])
    events = list(bot.stream("x"))
    assert events[-1].type == "done"


def test_max_iterations_partial_response() -> None:
    loop = ToolCall(name="now")
    bot = agent().llm("fake", tool_calls=[[loop]] * 5).tool(now).max_iterations(2)
    with pytest.raises(MaxIterationsExceeded) as info:
        bot.run("spin")
    assert info.value.response is not None
    assert len(info.value.response.steps) == 2


def test_top_level_names() -> None:
    import tidemill.agents.checkpoint as checkpoint

    assert tidemill.agent is agent  # the builder function
    assert checkpoint.SQLiteCheckpointer is SQLiteCheckpointer  # the library, by module path
    assert tidemill.agents.memory.WindowMemory.__module__.startswith("tidemill.agents.memory")
    assert isinstance(tidemill.__version__, str)


async def test_close_releases_what_the_builder_made_and_nothing_else(tmp_path: Path) -> None:
    made = agent().llm("fake", responses=["a"]).checkpoint("sqlite", path=tmp_path / "m.db")
    await made.arun("x", thread_id="t")
    checkpointer = made.build().checkpointer
    await made.aclose()
    with pytest.raises(ConfigurationError, match="was closed"):
        await checkpointer.read("t")

    mine = SQLiteCheckpointer(tmp_path / "mine.db")
    given = agent().llm("fake", responses=["b"]).checkpoint(mine)
    await given.arun("y", thread_id="t")
    await given.aclose()
    assert len(await mine.read("t")) == 3  # still open
    await mine.aclose()
