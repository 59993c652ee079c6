"""The agent API seed's examples, adapted to `tidemill.agent()`.

Each test names the seed example it adapts: the module's quick start, the
builder's Level 1-3 examples (model, tools, memory, guardrails, checkpoint,
tracing, the graph runtime), and the doctests of `tool`, `mcp`, `agent`,
`tool_call_retries`, `arun`, `aresume`, the checkpointers, `AgentTool`,
`abroadcast` and `apipeline`. Where the seed called a real provider, the
real adapter runs against a mock HTTP transport; the seed's `npx` MCP server
is the SDK-built calc server of tests/tools/mcp. The seed's Langfuse tracer
has no Tidemill counterpart: `observe("memory")` stands in.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import sys
import tempfile
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tidemill import AgentInterrupt, ToolCall, agent, tool
from tidemill.agents import AgentTool
from tidemill.agents.checkpoint import MemoryCheckpointer, SQLiteCheckpointer
from tidemill.agents.journal import RunFinished
from tidemill.agents.tracing import MemoryTracer
from tidemill.llm import ScriptedModel
from tidemill.tools import ToolContext
from tidemill.types import Message, Role

CALC = pathlib.Path(__file__).parents[1] / "tools" / "mcp" / "servers" / "calc_server.py"


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


# -- real adapters over a mock transport ------------------------------------------------

Reply = Callable[[dict[str, Any]], dict[str, Any]]


class Provider:
    """A mock provider endpoint: keeps each request body, answers with `reply(body)`."""

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.bodies: list[dict[str, Any]] = []

    def client(self) -> httpx.AsyncClient:
        def handle(request: httpx.Request) -> httpx.Response:
            body = json.loads(request.content)
            self.bodies.append(body)
            return httpx.Response(200, json=self.reply(body))

        return httpx.AsyncClient(transport=httpx.MockTransport(handle))


def openai_answer(text: str | None, *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            for n, (name, arguments) in enumerate(calls)
        ]
    return {
        "id": "chatcmpl-seed",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini-2024-07-18",
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
        ],
        "usage": {"prompt_tokens": 12, "completion_tokens": 4, "total_tokens": 16},
    }


def anthropic_answer(text: str) -> dict[str, Any]:
    return {
        "id": "msg_seed",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5-20250929",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 8},
    }


KB = {"API": "v2 of the API dropped XML (changelog, 2026-Q3)."}


@tool
def search(query: str) -> list[str]:
    """Search the knowledge base.

    Args:
        query: What to look for.
    """
    return [text for key, text in KB.items() if key.lower() in query.lower()]


@tool
def calculator(expression: str) -> str:
    """Add the integers in an expression such as '2 + 3'.

    Args:
        expression: Integers joined by '+'.
    """
    return str(sum(int(part) for part in expression.split("+")))


def tool_texts(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def test_module_quick_start_openai_with_a_tool_and_memory(capsys: Any) -> None:
    # Seed: Windlass.agent().llm("openai").tool(search).memory(), then
    # print(agent.run("What changed in the API last quarter?")). `.llm("openai")`
    # is the provider's default model; the key and client are the test's.
    def reply(body: dict[str, Any]) -> dict[str, Any]:
        found = tool_texts(body)
        if not found:
            return openai_answer(None, ("search", {"query": "API changes"}))
        return openai_answer(f"The API dropped XML: {json.loads(found[0])[0]}")

    provider = Provider(reply)
    bot = (
        agent()
        .llm("openai", api_key="sk-test", http_client=provider.client())
        .tool(search)
        .memory()
    )
    print(bot.run("What changed in the API last quarter?"))
    assert capsys.readouterr().out == (
        "The API dropped XML: v2 of the API dropped XML (changelog, 2026-Q3).\n"
    )
    assert [b["model"] for b in provider.bodies] == ["gpt-4o-mini", "gpt-4o-mini"]
    assert provider.bodies[0]["tools"][0]["function"]["name"] == "search"
    assert bot.describe()["memory"] == {"kind": "window", "size": 20}
    bot.close()


def test_level_2_a_real_agent(tmp_path: pathlib.Path) -> None:
    # Seed: .llm("anthropic", model="claude-sonnet-4-5").tool(search).tool(calculator)
    # .system(...).memory("summary").guardrails(pii=True, on_violation="redact")
    # .checkpoint("sqlite", path="./state.db").max_iterations(15).observe("langfuse").
    # Tidemill has no Langfuse tracer; "memory" keeps the spans to look at.
    provider = Provider(lambda body: anthropic_answer("Ask ann@example.org; see [1]."))
    db = tmp_path / "state.db"
    bot = (
        agent()
        .llm("anthropic", model="claude-sonnet-4-5", api_key="k", http_client=provider.client())
        .tool(search)
        .tool(calculator)
        .system("You are a research assistant. Cite your sources.")
        .memory("summary")
        .guardrails(pii=True, on_violation="redact")
        .checkpoint("sqlite", path=db)
        .max_iterations(15)
        .observe("memory")
    )
    response = bot.run("Who knows about the API? I am bob@example.com.", thread_id="t")
    assert response.output == "Ask [EMAIL]; see [1]."
    [body] = provider.bodies
    assert body["model"] == "claude-sonnet-4-5"
    assert body["system"] == "You are a research assistant. Cite your sources."
    assert [t["name"] for t in body["tools"]] == ["search", "calculator"]
    assert "bob@example.com" not in json.dumps(body)  # the input was redacted before sending
    described = bot.describe()
    assert described["max_iterations"] == 15
    assert described["memory"]["kind"] == "summary"  # type: ignore[index,call-overload]
    assert described["checkpointer"] == "SQLiteCheckpointer"
    tracer = bot.build().tracer
    assert isinstance(tracer, MemoryTracer)
    assert [name for name, _ in tracer.tree()] == ["invoke_agent agent"]
    bot.close()
    # The journal outlives the agent, redacted.
    records = asyncio.run(SQLiteCheckpointer(db).read("t"))
    journal = "".join(r.event.model_dump_json() for r in records)
    assert "[EMAIL]" in journal
    assert "example.org" not in journal and "bob@example.com" not in journal
    assert records[-1].event.kind == "finished"


def test_level_3_a_graph_you_control() -> None:
    # Seed: agent = Windlass.agent().llm("openai").tool(search).graph();
    # graph = agent.native_graph(); graph.add_node("critic", critic_fn);
    # graph.add_edge("tools", "critic"); agent.recompile(). In Tidemill the
    # critic replaces the tools -> agent edge and leads back to the agent.
    pytest.importorskip("langgraph")
    note = "Critic: cite the changelog."

    def critic_fn(state: dict[str, list[Message]]) -> dict[str, list[Message]]:
        return {"messages": [Message.user(note)]}

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        if not tool_texts(body):
            return openai_answer(None, ("search", {"query": "API"}))
        return openai_answer(f"Heard: {body['messages'][-1]['content']}")

    provider = Provider(reply)
    bot = agent().llm("openai", api_key="sk-test", http_client=provider.client())
    bot = bot.tool(search).graph()
    graph = bot.native_graph()
    graph.add_node("critic", critic_fn)
    graph.edges.discard(("tools", "agent"))
    graph.add_edge("tools", "critic")
    graph.add_edge("critic", "agent")
    bot.recompile()
    response = bot.run("What changed in the API?")
    assert response.output == f"Heard: {note}"
    assert [m.role for m in response.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.USER,
        Role.ASSISTANT,
    ]
    assert bot.describe()["nodes"] == ["agent", "critic", "tools"]
    bot.close()


def test_mcp_connects_a_server_and_binds_its_tools() -> None:
    # Seed: Windlass.agent().mcp(server="fs", command="npx",
    #     args=["-y", "@modelcontextprotocol/server-filesystem", "."]).
    # The server here is the SDK-built calc server, started over stdio as npx
    # would start the filesystem one.
    pytest.importorskip("mcp")
    bot = (
        agent()
        .llm(
            "fake",
            responses=["", "2 + 3 is 5."],
            tool_calls=[[ToolCall(name="fs__add", arguments={"a": 2, "b": 3})], []],
        )
        .mcp(server="fs", command=sys.executable, args=[str(CALC), "stdio"])
    )
    try:
        names = bot.build().tools.names()
        assert "fs__add" in names and all(n.startswith("fs__") for n in names)
        response = bot.run("2 + 3?")
        assert response.output == "2 + 3 is 5."
        assert response.steps[0].tool_results[0].content == "5"
    finally:
        bot.close()


def test_agent_adds_a_specialist_the_supervisor_routes_on() -> None:
    # Seed: Windlass.agent().llm("fake").agent("researcher", Windlass.agent().llm("fake"),
    #     "Finds and summarises source material.")
    boss = (
        agent()
        .llm("fake", responses=["On it."])
        .agent("researcher", agent().llm("fake"), "Finds and summarises source material.")
    )
    assert boss.run("Research tides.").output == "On it."
    runtime = boss.build()
    assert boss.describe()["specialists"] == ["researcher"]
    assert runtime.tools.get("researcher").description == "Finds and summarises source material."
    assert isinstance(runtime.model, ScriptedModel)
    system = runtime.model.requests[0].messages[0]
    assert system.role == Role.SYSTEM
    assert "- researcher: Finds and summarises source material." in system.content


def test_agent_tool_runs_its_worker_on_a_task() -> None:
    # Seed: t = AgentTool(worker, name="helper", description="Does small jobs.");
    # t.run(task="tidy up").content == 'done'.
    worker = agent().llm("fake", responses=["done", "done again"])
    t = AgentTool(worker, name="helper", description="Does small jobs.")
    assert t.run(task="tidy up").content == "done"
    # The agent runtime's way: the arguments and a ToolContext; the worker's answer is the value.
    context = ToolContext(thread_id="t", call_id="c1", tool_name="helper")
    result = asyncio.run(t.acall({"task": "tidy up"}, context))
    assert result.value == "done again"  # type: ignore[attr-defined]
    assert t.definition.description == "Does small jobs."
    assert t.definition.parameters["required"] == ["task"]


def test_supervisor_abroadcast() -> None:
    # Seed: Supervisor(llm=Windlass.llm("fake"), agents={"a": ...responses=["A"]})
    # then asyncio.run(boss.abroadcast("go"))["a"].output == 'A'. In Tidemill a
    # supervisor is an agent with specialists.
    boss = agent().llm("fake").agent("a", agent().llm("fake", responses=["A"]))
    assert asyncio.run(boss.abroadcast("go"))["a"].output == "A"


def test_supervisor_apipeline() -> None:
    # Seed: agents "draft" -> "a draft", "edit" -> "an edit";
    # asyncio.run(boss.apipeline("write", ["draft", "edit"])).output == 'an edit'.
    edit = ScriptedModel(["an edit"])
    boss = (
        agent()
        .llm("fake")
        .agent("draft", agent().llm("fake", responses=["a draft"]))
        .agent("edit", agent().llm(edit))
    )
    assert asyncio.run(boss.apipeline("write", ["draft", "edit"])).output == "an edit"
    assert edit.requests[0].messages[-1].content == "a draft"  # the editor got the draft


def test_memory_omitted_name_is_a_sliding_window_over_the_thread() -> None:
    # Seed: memory(spec=None) — "Omit it for a sliding window"; thread_id is
    # "required to use memory or checkpointing across calls".
    model = ScriptedModel(["Hi Ann.", "You are Ann."])
    bot = agent().llm(model).memory()
    bot.run("I am Ann.", thread_id="chat")
    assert bot.run("Who am I?", thread_id="chat").output == "You are Ann."
    assert [m.content for m in model.requests[1].messages] == ["I am Ann.", "Hi Ann.", "Who am I?"]
    assert bot.describe()["memory"] == {"kind": "window", "size": 20}


def test_guardrails_omitted_name_is_the_rule_guardrail() -> None:
    # Seed: guardrails(spec=None) — "Omit it for the dependency-free rule guardrail".
    bot = agent().llm("fake", responses=["Mail ann@example.org."]).guardrails(pii=True)
    assert bot.run("Contact?").output == "Mail [EMAIL]."


def test_observe_memory_keeps_the_spans() -> None:
    # Seed: observe("memory"), one of its registry names.
    bot = agent().llm("fake", responses=["ok"]).name("bot").observe("memory")
    bot.run("go", thread_id="t1")
    tracer = bot.build().tracer
    assert isinstance(tracer, MemoryTracer)
    assert tracer.tree() == [("invoke_agent bot", [("chat scripted", [])])]
    assert tracer.find("invoke_agent bot").attributes["gen_ai.conversation.id"] == "t1"
