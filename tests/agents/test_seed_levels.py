"""The builder docstring's Level 1, 2 and 3 examples from the agent API seed, as written.

Only two things differ from the seed's text: `Windlass.agent()` is
`tidemill.agent()`, and where the seed names a vendor (`"anthropic"`,
`"openai"`) the offline model answers instead, scripted to use the tools.
Level 2's Langfuse tracer sends its spans to a local OTLP/HTTP receiver
named by the usual `LANGFUSE_*` variables.
"""

from __future__ import annotations

import importlib.util
import os
import pathlib
import sys
from types import ModuleType
from typing import Any

import pytest

from tidemill import ToolCall, agent, tool
from tidemill.types import Role


@tool
def search(query: str) -> list[str]:
    """Search the knowledge base."""
    return [f"API v2 replaced v1 ({query})"]


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as `2 + 3`."""
    left, _, right = expression.partition("+")
    return str(int(left) + int(right))


def test_level_1_a_working_agent_in_two_lines(capsys: pytest.CaptureFixture[str]) -> None:
    agent_ = agent().llm("fake", responses=["Hello!"])
    print(agent_.run("Say hello"))
    assert capsys.readouterr().out == "Hello!\n"


def test_level_3_a_graph_you_control() -> None:
    pytest.importorskip("langgraph")
    critiques: list[int] = []

    def critic_fn(state: dict[str, Any]) -> dict[str, Any]:
        critiques.append(len(state["messages"]))
        return {}

    agent_ = (
        agent()
        .llm(
            "fake",
            responses=["", "The API moved to v2."],
            tool_calls=[[ToolCall(name="search", arguments={"query": "API"})], []],
        )
        .tool(search)
        .graph()
    )
    graph = agent_.native_graph()
    graph.add_node("critic", critic_fn)
    graph.add_edge("tools", "critic")
    agent_.recompile()

    response = agent_.run("What changed in the API last quarter?")
    assert response.output == "The API moved to v2."
    assert [m.role for m in response.messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert critiques == [3]  # the critic ran once, after the tools, on the conversation so far
    assert agent_.describe()["nodes"] == ["agent", "critic", "tools"]
    agent_.close()


def _receiver_module() -> ModuleType:
    """tests/agents/tracing/otlp_receiver.py, the local OTLP/HTTP receiver."""
    loaded = sys.modules.get("otlp_receiver")
    if loaded is not None:
        return loaded
    path = pathlib.Path(__file__).parent / "tracing" / "otlp_receiver.py"
    spec = importlib.util.spec_from_file_location("otlp_receiver", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["otlp_receiver"] = module
    spec.loader.exec_module(module)
    return module


def test_level_2_a_real_agent(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    monkeypatch.chdir(tmp_path)
    with _receiver_module().serve() as receiver:
        monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk-lf-level-2")
        monkeypatch.setenv("LANGFUSE_SECRET_KEY", "sk-lf-level-2")
        monkeypatch.setenv("LANGFUSE_HOST", receiver.url)
        _level_2(tmp_path)
    assert {export.path for export in receiver.exports} == {"/api/public/otel/v1/traces"}
    [root] = receiver.named("invoke_agent agent")
    assert root.attributes["langfuse.observation.type"] == "agent"
    assert root.attributes["session.id"] == "t"
    assert {span.name for span in receiver.spans()} >= {"execute_tool search"}


def _level_2(tmp_path: pathlib.Path) -> None:
    agent_ = (
        agent()
        .llm(
            "fake",
            responses=["", "Ask [EMAIL]: v2 replaced v1 [1]."],
            tool_calls=[[ToolCall(name="search", arguments={"query": "API changes"})], []],
        )
        .tool(search)
        .tool(calculator)
        .system("You are a research assistant. Cite your sources.")
        .memory("summary")
        .guardrails(pii=True, on_violation="redact")
        .checkpoint("sqlite", path="./state.db")
        .max_iterations(15)
        .observe("langfuse")
    )
    response = agent_.run("What changed? I am bob@example.com.", thread_id="t")
    assert response.output == "Ask [EMAIL]: v2 replaced v1 [1]."
    described = agent_.describe()
    assert described["max_iterations"] == 15
    assert described["memory"]["kind"] == "summary"  # type: ignore[index,call-overload]
    assert described["guardrail"] is not None
    agent_.close()
    assert (tmp_path / "state.db").exists()
    assert os.path.getsize(tmp_path / "state.db") > 0
