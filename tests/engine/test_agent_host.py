"""One agent, two hosts: a workspace `ai_agent` resource run from Python, and saved from it.

`ada` (the first, admin user) keeps the agent `f/x/triage`; `bob` is a viewer
of the folder `f/x` and cannot read `f/y`; `carol` has no role anywhere. The
scripted model answers a user message `call <tool>` by calling that tool,
then (and for any other message) with what it saw, as JSON: the system
prompt, the tools, the tool results and the temperature of the request.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import tidemill
from tidemill import AgentBuilder, AgentInterrupt, ConfigurationError, tool
from tidemill.engine import (
    AsyncEngine,
    HostedAgent,
    ModelChoice,
    agent_value,
    aload_agent,
    save_agent,
)
from tidemill.errors import ItemNotFound, PermissionDenied, UnresolvedReference
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, RunDone, ToolCall, ToolCallEnd
from tidemill.workspace import AsyncWorkspace, Workspace

pytestmark = pytest.mark.timeout(120)

CALC = Path(__file__).parents[1] / "tools" / "mcp" / "servers" / "calc_server.py"

GREET = "'''Greet someone.'''\ndef main(greeting: str, name: str = 'you'):\n    return greeting\n"
SHOW = (
    "'''Show a token.'''\ndef main(token: str):\n"
    "    return {'token': token, 'length': len(token)}\n"
)
REFUND = (
    "'''Refund an order.'''\ndef main(order_id: str = 'A1'):\n    return 'refunded ' + order_id\n"
)
SECRET = "sk-HOSTED-0123456789"

ARGUMENTS: dict[str, dict[str, Any]] = {
    "helper": {"message": "hi"},
    "double": {"x": 21},
    "calc__add": {"a": 2, "b": 3},
}


def triage(system: str = "You triage v1.", **extra: Any) -> dict[str, Any]:
    return {
        "model": "fake",
        "system": system,
        "temperature": 0.3,
        "max_iterations": 4,
        "tools": [
            {"name": "greet", "script": GREET, "inputs": {"greeting": "hello"}},
            {"name": "secret", "script": SHOW, "inputs": {"token": "$var:f/x/token"}},
            {"name": "refund", "script": REFUND, "requires_approval": True},
        ],
        **extra,
    }


def answer(request: ModelRequest) -> Message:
    results = [m for m in request.messages if m.role == "tool"]
    users = [m for m in request.messages if m.role == "user"]
    text = str(users[-1].content) if users else ""
    if not results and text.startswith("call "):
        name = text.split()[1]
        call = ToolCall(id="c1", name=name, arguments=ARGUMENTS.get(name, {}))
        return Message.assistant("", tool_calls=(call,))
    system = request.messages[0].content if request.messages[0].role == "system" else ""
    seen = {
        "system": system,
        "tools": sorted(tool.name for tool in request.tools),
        "results": [m.content for m in results],
        "errors": [bool(m.is_error) for m in results],
        "temperature": request.settings.get("temperature"),
    }
    return Message.assistant(json.dumps(seen))


def models(choice: ModelChoice) -> ScriptedModel:
    return ScriptedModel(handler=answer)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    """The workspace as ada, with bob and carol, the folders and the agent `f/x/triage`."""
    with Workspace(f"sqlite:///{tmp_path}/tidemill.db", user="ada") as ada:
        ada.add_user("bob")
        ada.add_user("carol")
        ada.add_folder("x", roles={"bob": "viewer"})
        ada.add_folder("y")
        ada.write("f/x/token", "variable", SECRET, secret=True)
        ada.write("f/x/triage", "resource", triage(), resource_type="ai_agent")
        yield ada


@pytest.fixture
def bob(ws: Workspace) -> Workspace:
    return ws.acting_as("bob")


def output(response: Any) -> dict[str, Any]:
    seen: dict[str, Any] = json.loads(response.output)
    return seen


def test_run_a_saved_agent_from_python(bob: Workspace) -> None:
    bot = tidemill.agent("f/x/triage", workspace=bob, models=models)
    try:
        assert isinstance(bot, AgentBuilder)
        assert isinstance(bot, HostedAgent)
        assert (bot.path, bot.version) == ("f/x/triage", 1)
        seen = output(bot.run("call greet"))
        assert seen == {
            "system": "You triage v1.", "tools": ["greet", "refund", "secret"],
            "results": ["hello"], "errors": [False], "temperature": 0.3,
        }  # fmt: skip
        # A tool's `$var:` input resolves as bob when it runs, and is masked.
        secret = output(bot.run("call secret"))
        assert json.loads(secret["results"][0]) == {"token": "***", "length": len(SECRET)}
        assert bot.describe()["max_iterations"] == 4
    finally:
        bot.close()


def test_the_plain_builder_is_unchanged(ws: Workspace) -> None:
    assert type(tidemill.agent()) is AgentBuilder
    assert tidemill.agent().llm("fake", responses=["Hi"]).run("Hello").output == "Hi"
    with pytest.raises(ConfigurationError, match="no path"):
        tidemill.agent(workspace=ws)
    with pytest.raises(ConfigurationError, match="needs the workspace"):
        tidemill.agent("f/x/triage")


def test_stream_a_saved_agent(bob: Workspace) -> None:
    bot = tidemill.agent("f/x/triage", workspace=bob, models=models)
    try:
        events = list(bot.stream("call greet"))
    finally:
        bot.close()
    kinds = [event.type for event in events]
    assert kinds.index("tool_call") < kinds.index("tool_result") < kinds.index("done")
    (result,) = [event for event in events if isinstance(event, ToolCallEnd)]
    assert result.result.content == "hello"
    (done,) = [event for event in events if isinstance(event, RunDone)]
    assert output(done.response)["results"] == ["hello"]


def test_resume_a_pause_in_another_builder(bob: Workspace, tmp_path: Path) -> None:
    journal = tmp_path / "threads.db"
    first = tidemill.agent("f/x/triage", workspace=bob, models=models)
    first.checkpoint("sqlite", path=journal)
    try:
        with pytest.raises(AgentInterrupt) as paused:
            first.run("call refund", thread_id="t1")
        assert [call.name for call in paused.value.pending] == ["refund"]
    finally:
        first.close()
    # Another builder (another process, say) on the same checkpointer resumes it.
    second = tidemill.agent("f/x/triage", workspace=bob, models=models)
    second.checkpoint("sqlite", path=journal)
    try:
        seen = output(second.resume("t1", approved=True))
    finally:
        second.close()
    assert seen["results"] == ["refunded A1"]
    assert seen["temperature"] == 0.3


def test_a_pinned_version(ws: Workspace, bob: Workspace) -> None:
    ws.write("f/x/triage", "resource", triage("You triage v2."), resource_type="ai_agent")
    pinned = tidemill.agent("f/x/triage@1", workspace=bob, models=models)
    latest = tidemill.agent("f/x/triage", workspace=bob, models=models)
    try:
        assert (pinned.version, latest.version) == (1, 2)
        assert output(pinned.run("hi"))["system"] == "You triage v1."
        assert output(latest.run("hi"))["system"] == "You triage v2."
    finally:
        pinned.close()
        latest.close()


def test_tool_inputs_and_enabled_tools_as_a_linked_step(bob: Workspace) -> None:
    bot = tidemill.agent(
        "f/x/triage",
        workspace=bob,
        models=models,
        tool_inputs={"greet": {"greeting": "bonjour"}},
        enabled_tools=["greet"],
    )
    try:
        seen = output(bot.run("call greet"))
    finally:
        bot.close()
    assert (seen["tools"], seen["results"]) == (["greet"], ["bonjour"])


def test_a_reader_without_a_grant_is_refused_as_the_workspace_refuses(ws: Workspace) -> None:
    carol = ws.acting_as("carol")
    with pytest.raises((ItemNotFound, PermissionDenied)) as direct:
        carol.get("f/x/triage")
    with pytest.raises(type(direct.value)):
        tidemill.agent("f/x/triage", workspace=carol, models=models)


def test_the_brains_provider_resolves_as_the_principal(ws: Workspace, bob: Workspace) -> None:
    ws.write("f/x/openai", "resource", {"api_key": "$var:f/x/token"}, resource_type="openai")
    ws.write("f/y/openai", "resource", {"api_key": "$var:f/x/token"}, resource_type="openai")
    for path, provider in (("f/x/keyed", "f/x/openai"), ("f/x/locked", "f/y/openai")):
        ws.write(path, "resource", triage(provider=f"$res:{provider}"), resource_type="ai_agent")
    seen: list[Any] = []

    def capture(choice: ModelChoice) -> ScriptedModel:
        seen.append(choice.credentials)
        return ScriptedModel(handler=answer)

    tidemill.agent("f/x/keyed", workspace=bob, models=capture).close()
    assert seen == [{"api_key": SECRET}]
    with pytest.raises(UnresolvedReference, match=r"\$res:f/y/openai"):
        tidemill.agent("f/x/locked", workspace=bob, models=capture)


def test_a_missing_path_or_no_agent(ws: Workspace) -> None:
    with pytest.raises(ItemNotFound):
        tidemill.agent("f/x/nothing", workspace=ws, models=models)
    with pytest.raises(ItemNotFound):
        tidemill.agent("f/x/triage@9", workspace=ws, models=models)
    with pytest.raises(ConfigurationError, match="not an ai_agent resource"):
        tidemill.agent("f/x/token", workspace=ws, models=models)
    with pytest.raises(ConfigurationError, match="names no agent"):
        tidemill.agent("not a path", workspace=ws, models=models)


def test_a_python_tool_is_refused_on_save(ws: Workspace) -> None:
    @tool
    def now() -> str:
        """Return the time."""
        return "12:00"

    bot = tidemill.agent().llm("fake").system("Tell the time.").tool(now)
    with pytest.raises(ConfigurationError) as refused:
        save_agent(ws, "f/x/clock", bot, message="first")
    assert refused.value.context["tools"] == ["now"]
    assert "'now'" in refused.value.message
    assert refused.value.hint is not None and "script tool" in refused.value.hint
    with pytest.raises(ItemNotFound):
        ws.get("f/x/clock")  # nothing was written


def test_save_then_load_is_the_same_agent(ws: Workspace) -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {"label": {"type": "string"}},
        "required": ["label"],
    }
    built = (
        tidemill.agent()
        .llm("fake")
        .system("Label the ticket.")
        .max_iterations(3)
        .limits(requests=5, total_tokens=2000)
        .output(schema)
        .memory("window", size=6)
    )
    item = tidemill.save_agent(ws, "f/x/labeller", built, message="first", temperature=0.2)
    assert (item.version, item.resource_type) == (1, "ai_agent")
    assert ws.get("f/x/labeller").value == {
        "model": "fake", "system": "Label the ticket.", "max_iterations": 3,
        "limits": {"max_requests": 5, "max_total_tokens": 2000}, "output_schema": schema,
        "memory": {"kind": "window", "context_length": 6}, "temperature": 0.2,
    }  # fmt: skip
    loaded = tidemill.agent("f/x/labeller", workspace=ws)
    try:
        assert agent_value(loaded) == agent_value(built, temperature=0.2)
        assert loaded.settings == {"temperature": 0.2}
        keys = ("system_prompt", "max_iterations", "limits", "memory", "output_schema")
        assert {key: loaded.describe()[key] for key in keys} == {
            key: built.describe()[key] for key in keys
        }
        assert loaded.run("Refund please").output == {"label": ""}
    finally:
        loaded.close()
        built.close()


def test_a_loaded_agent_saves_its_tools_as_written(ws: Workspace) -> None:
    loaded = tidemill.agent("f/x/triage", workspace=ws, models=models)
    try:
        save_agent(ws, "f/x/copy", loaded, message="copy")
        assert ws.get("f/x/copy").value == ws.get("f/x/triage").value
        # Its model replaced by the builder's, the builder's is what is saved.
        loaded.llm("ollama:llama3")
        assert agent_value(loaded)["model"] == "ollama:llama3"
    finally:
        loaded.close()


def test_a_nested_agent_tool_by_path(ws: Workspace, bob: Workspace) -> None:
    boss = {
        "model": "fake",
        "system": "You route.",
        "tools": [{"name": "helper", "agent": {"agent": "f/x/triage@1"}}],
    }
    ws.write("f/x/boss", "resource", boss, resource_type="ai_agent")
    bot = tidemill.agent("f/x/boss", workspace=bob, models=models)
    try:
        seen = output(bot.run("call helper"))
    finally:
        bot.close()
    assert seen["tools"] == ["helper"]
    (nested,) = seen["results"]
    assert json.loads(nested)["system"] == "You triage v1."

    # Agents that run each other are refused when they are loaded.
    def linking(target: str) -> dict[str, Any]:
        return {"model": "fake", "tools": [{"name": "next", "agent": {"agent": target}}]}

    ws.write("f/x/ping", "resource", linking("f/x/triage"), resource_type="ai_agent")
    ws.write("f/x/pong", "resource", linking("f/x/ping"), resource_type="ai_agent")
    ws.write("f/x/ping", "resource", linking("f/x/pong"), resource_type="ai_agent")
    with pytest.raises(ConfigurationError, match="names itself"):
        tidemill.agent("f/x/ping", workspace=ws, models=models)


def test_an_mcp_tool(ws: Workspace) -> None:
    pytest.importorskip("mcp")
    value = {
        "model": "fake",
        "tools": [
            {
                "name": "calc",
                "mcp": {"command": sys.executable, "args": [str(CALC), "stdio"], "tools": ["add"]},
            }
        ],
    }
    ws.write("f/x/maths", "resource", value, resource_type="ai_agent")
    bot = tidemill.agent("f/x/maths", workspace=ws, models=models)
    try:
        seen = output(bot.run("call calc__add"))
    finally:
        bot.close()
    assert seen["tools"] == ["calc__add"]
    assert seen["results"] == ["5"]


DOUBLE = {
    "summary": "Double a number.",
    "inputs": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    "steps": [
        {"id": "double", "script": "def main(x):\n    return x * 2\n",
         "inputs": {"x": {"expr": "flow_input.x"}}},
    ],
}  # fmt: skip

DOUBLER = {
    "model": "fake",
    "tools": [
        {"name": "double", "flow": "f/x/double"},
        {"name": "greet", "script": GREET, "inputs": {"greeting": "hello"}},
    ],
}


def test_a_flow_tool_needs_an_engine(ws: Workspace) -> None:
    ws.write("f/x/double", "flow", DOUBLE)
    ws.write("f/x/doubler", "resource", DOUBLER, resource_type="ai_agent")
    with pytest.raises(ConfigurationError, match="'double'") as refused:
        tidemill.agent("f/x/doubler", workspace=ws, models=models)
    assert refused.value.hint is not None and "engine=" in refused.value.hint
    bot = tidemill.agent("f/x/doubler", workspace=ws, models=models, enabled_tools=["greet"])
    try:
        assert output(bot.run("call greet"))["results"] == ["hello"]
    finally:
        bot.close()


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[tuple[AsyncEngine, AsyncWorkspace]]:
    engine = AsyncEngine(f"sqlite:///{tmp_path}/runs.db", migrate=True)
    await engine._open()
    ada = AsyncWorkspace(engine.store, user="ada")
    try:
        await ada.add_folder("x")
        await ada.write("f/x/double", "flow", DOUBLE)
        await ada.write("f/x/doubler", "resource", DOUBLER, resource_type="ai_agent")
        yield engine, ada
    finally:
        await ada.close()
        await engine.close()


async def test_a_flow_tool_runs_on_the_engine(engine: tuple[AsyncEngine, AsyncWorkspace]) -> None:
    runs, ada = engine
    bot = await aload_agent("f/x/doubler", workspace=ada, engine=runs, models=models)
    try:
        async with runs.worker(poll=0.05, pool_size=1):
            seen = output(await bot.arun("call double"))
        # Saved back, the flow tool stays a path.
        assert agent_value(bot)["tools"] == DOUBLER["tools"]
    finally:
        await bot.aclose()
    assert seen["results"] == ["42"]
    (run,) = await runs.runs()
    assert run.source is not None
    assert (run.source["agent"], run.source["tool"]) == ("f/x/doubler", "double")


def test_a_loaded_agent_runs_its_rendered_prompt_and_saves_the_placeholders(
    ws: Workspace,
) -> None:
    ws.write("f/x/greeter", "resource", triage("You help {{ flow_input.name }}."),
             resource_type="ai_agent")  # fmt: skip
    loaded = tidemill.agent(
        "f/x/greeter", workspace=ws, models=models, inputs={"flow_input": {"name": "Ada"}}
    )
    try:
        assert output(loaded.run("hi"))["system"] == "You help Ada."
        save_agent(ws, "f/x/greeter", loaded, message="again")
        assert ws.get("f/x/greeter").value == triage("You help {{ flow_input.name }}.")
        loaded.system("You help everyone.")  # a prompt of the builder's own is saved as set
        assert agent_value(loaded)["system"] == "You help everyone."
    finally:
        loaded.close()


def test_what_only_a_flow_step_runs_is_refused_or_warned_about_clearly(ws: Workspace) -> None:
    specialists = {"specialists": [{"name": "researcher", "model": "fake"}]}
    ws.write("f/x/lead", "resource", triage(**specialists), resource_type="ai_agent")
    with pytest.raises(ConfigurationError) as refused:
        tidemill.agent("f/x/lead", workspace=ws, models=models)
    assert refused.value.message.startswith(
        "The agent f/x/lead has specialists ('researcher'), which only an ai_agent step of a "
        "flow runs"
    )
    assert refused.value.hint is not None
    assert (
        "ai_agent: {agent: f/x/lead}" in refused.value.hint and "f/x/lead@N" in refused.value.hint
    )
    assert refused.value.context["keys"] == ["specialists"]
    nested = {"name": "helper", "agent": {"model": "fake", "questions": {}}}
    ws.write("f/x/boss", "resource", {"model": "fake", "tools": [nested]},
             resource_type="ai_agent")  # fmt: skip
    with pytest.raises(ConfigurationError) as nested_refused:
        tidemill.agent("f/x/boss", workspace=ws, models=models)
    assert nested_refused.value.message.startswith(
        "The agent nested in f/x/boss as the tool 'helper' has questions (ask_person)"
    )
    assert "ai_agent: {agent: f/x/boss}" in str(nested_refused.value.hint)
    # A time bound is not applied from Python: loading says so rather than dropping it silently.
    ws.write("f/x/timed", "resource", triage(limits={"max_duration": "5m"}),
             resource_type="ai_agent")  # fmt: skip
    with pytest.warns(UserWarning, match=r"limits.max_duration \(300.0s\).*not bounded in time"):
        timed = tidemill.agent("f/x/timed", workspace=ws, models=models)
    timed.close()
