"""The agent API seed's examples, adapted to `tidemill.agent()`.

Each test names the seed example it adapts. Examples for parts that come
later (MCP, memory, guardrails, tracing, specialists, the graph runtime) are
not here yet.
"""

from __future__ import annotations

import asyncio
import pathlib
import tempfile

from tidemill import AgentInterrupt, ToolCall, agent, tool
from tidemill.agents.checkpoint import MemoryCheckpointer, SQLiteCheckpointer
from tidemill.agents.journal import RunFinished


def test_level_1_a_working_agent_in_two_lines(capsys: object) -> None:
    bot = agent().llm("fake", responses=["Hello!"])
    print(bot.run("Say hello"))
    assert capsys.readouterr().out == "Hello!\n"  # type: ignore[attr-defined]


def test_tool_binds_a_decorated_function() -> None:
    @tool
    def now() -> str:
        """Return the current time."""
        return "12:00"

    bot = agent().tool(now)
    assert bot.llm("fake").build().tools.names() == ["now"]


def test_tool_call_retries() -> None:
    assert agent().llm("fake").tool_call_retries(3).build().tool_call_retries == 3


def test_arun_says_done() -> None:
    bot = agent().llm("fake", responses=["Done."])
    assert asyncio.run(bot.arun("Say done.")).output == "Done."


def test_resume_after_approval() -> None:
    @tool(requires_approval=True)
    def deploy(env: str) -> str:
        """Deploy to an environment."""
        return f"deployed to {env}"

    bot = (
        agent()
        .llm(
            "fake",
            responses=["", "Deployed."],
            tool_calls=[[ToolCall(name="deploy", arguments={"env": "prod"})], []],
        )
        .tool(deploy)
        .checkpoint()
    )
    try:
        bot.run("Deploy to prod", thread_id="t1")
    except AgentInterrupt:
        resumed = bot.resume("t1", approved=True)
    assert resumed.output == "Deployed."


def test_memory_checkpointer_keeps_what_is_appended() -> None:
    # The seed's checkpointer stored snapshots (put/get/history); Tidemill's
    # appends journal events, and state is their fold.
    saver = MemoryCheckpointer()
    asyncio.run(saver.append("t", [RunFinished(output=1)], after=0))
    asyncio.run(saver.append("t", [RunFinished(output=2)], after=1))
    records = asyncio.run(saver.read("t"))
    assert (records[-1].event.output, len(records)) == (2, 2)  # type: ignore[union-attr]


def test_sqlite_checkpointer_survives_a_new_instance() -> None:
    db = pathlib.Path(tempfile.mkdtemp()) / "state.db"
    asyncio.run(SQLiteCheckpointer(db).append("t", [RunFinished(output=7)], after=0))
    assert asyncio.run(SQLiteCheckpointer(db).read("t"))[0].event.output == 7  # type: ignore[union-attr]


def test_llm_accepts_a_bare_model_id_and_provider_options() -> None:
    # The seed's `.llm("gpt-4o-mini", temperature=0)`, with a key given
    # explicitly since tests never read real credentials.
    from tidemill.llm import OpenAIChatModel

    model = agent().llm("gpt-4o-mini", temperature=0, api_key="sk-test").build().model
    assert isinstance(model, OpenAIChatModel)
    assert (model.provider, model.model_name) == ("openai", "gpt-4o-mini")
    assert model.settings == {"temperature": 0}
