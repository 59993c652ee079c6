"""`SupervisorRuntime`: the type a builder with specialists builds, and what the seed asks of it."""

from __future__ import annotations

import pytest

from tidemill import AgentRuntime, ConfigurationError, ProviderError, agent
from tidemill.agents import AgentTool, SupervisorRuntime
from tidemill.llm import ModelRequest, ScriptedModel
from tidemill.types import Message, Role, ToolCall


def test_a_builder_with_specialists_builds_a_supervisor_named_supervisor() -> None:
    boss = agent().llm("fake").agent("a", agent().llm("fake"), "Does A.")
    runtime = boss.build()
    assert type(runtime) is SupervisorRuntime
    described = boss.describe()
    assert described["name"] == "supervisor"
    assert described["runtime"] == "builtin"
    assert described["pattern"] == "supervisor"
    assert described["team"] == {"a": "Does A."}
    # A plain agent stays a plain runtime, named "agent".
    plain = agent().llm("fake").build()
    assert type(plain) is AgentRuntime
    assert plain.name == "agent"
    assert "pattern" not in plain.describe()
    # .name() wins over the default.
    assert agent().llm("fake").name("boss").agent("a", agent().llm("fake")).build().name == "boss"


def test_a_specialist_without_a_description_uses_the_workers_own() -> None:
    described = agent().llm("fake").description("Checks facts against sources.")
    prompted = agent().llm("fake").system("You translate French into English.\nBe literal.")
    bare = agent().llm("fake")
    boss = (
        agent()
        .llm("fake")
        .agent("checker", described)
        .agent("translator", prompted)
        .agent("bare", bare)
        .agent("named", bare, "Given here.")
    )
    assert boss.describe()["team"] == {
        "checker": "Checks facts against sources.",
        "translator": "You translate French into English.",
        "bare": "Delegate a task to the 'bare' specialist.",
        "named": "Given here.",
    }


def test_the_routing_prompt_replaces_the_default_instructions() -> None:
    seen: list[str] = []

    def handler(request: ModelRequest) -> str:
        seen.append(request.messages[0].content if request.messages else "")
        return "ok"

    boss = (
        agent()
        .llm(ScriptedModel(handler=handler))
        .system("Be brief.")
        .agent("maths", agent().llm("fake"), "Does sums.")
        .routing("Hand sums to:\n{roster}")
    )
    boss.run("2+2?")
    [system] = seen
    assert system == "Be brief.\n\nHand sums to:\n- maths: Does sums."
    default = agent().llm(ScriptedModel(handler=handler)).agent("m", agent().llm("fake"), "D.")
    default.run("x")
    assert "You lead a team of specialists" in seen[-1]
    with pytest.raises(ConfigurationError, match="routing prompt is empty"):
        agent().routing("  ")


def test_a_supervisor_built_directly_takes_agents_and_descriptions() -> None:
    boss = SupervisorRuntime(
        model=ScriptedModel(),
        agents={"a": agent().llm("fake", responses=["A"]), "b": agent().llm("fake")},
        descriptions={"a": "Answers A."},
    )
    assert boss.name == "supervisor"
    assert boss.describe()["team"] == {
        "a": "Answers A.",
        "b": "Delegate a task to the 'b' specialist.",
    }
    assert boss.broadcast("go")["a"].output == "A"
    with pytest.raises(ConfigurationError, match="at least one specialist"):
        SupervisorRuntime(model=ScriptedModel())
    with pytest.raises(ConfigurationError, match="names no specialist: c"):
        SupervisorRuntime(model=ScriptedModel(), agents={"a": agent()}, descriptions={"c": "?"})


def test_add_agent_after_construction_is_delegated_to() -> None:
    def boss_handler(request: ModelRequest) -> Message | str:
        if request.messages[-1].role == Role.USER:
            return Message.assistant(tool_calls=[ToolCall(name="late", arguments={"task": "t"})])
        return "Report: " + request.messages[-1].content

    boss = SupervisorRuntime(
        model=ScriptedModel(handler=boss_handler), agents={"first": agent().llm("fake")}
    )
    boss.add_agent("late", agent().llm("fake", responses=["late answer"]), "Joins later.")
    assert "- late: Joins later." in (boss._loop.system_prompt or "")
    assert boss.run("go").output == "Report: late answer"
    with pytest.raises(ConfigurationError, match="already named 'late'"):
        boss.add_agent("late", agent().llm("fake"))


def test_a_worker_without_arun_is_refused_where_it_is_added() -> None:
    with pytest.raises(ConfigurationError, match="has no arun"):
        agent().llm("fake").agent("x", object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="has no arun"):
        AgentTool("not an agent", name="x")  # type: ignore[arg-type]


def failing_model(error: Exception) -> ScriptedModel:
    def handler(request: ModelRequest) -> str:
        raise error

    return ScriptedModel(handler=handler)


def test_broadcast_keeps_the_others_when_one_fails_with_a_provider_error() -> None:
    boss = (
        agent()
        .llm("fake")
        .agent("ok", agent().llm("fake", responses=["fine"]))
        .agent("down", agent().llm(failing_model(ProviderError("upstream 503", provider="openai"))))
        .agent("buggy", agent().llm(failing_model(RuntimeError("a bug"))))
    )
    answers = boss.broadcast("go")
    assert answers["ok"].output == "fine"
    assert answers["down"].metadata == {"error": "ProviderError", "agent": "down"}
    assert answers["down"].output == "down failed: upstream 503"
    assert answers["buggy"].metadata["error"] == "RuntimeError"


def test_a_delegated_specialist_failing_with_a_provider_error_reaches_the_supervisor() -> None:
    def boss_handler(request: ModelRequest) -> Message | str:
        if request.messages[-1].role == Role.USER:
            return Message.assistant(tool_calls=[ToolCall(name="down", arguments={"task": "t"})])
        return "Saw: " + request.messages[-1].content

    boss = agent().llm(ScriptedModel(handler=boss_handler))
    boss.agent("down", agent().llm(failing_model(ProviderError("rate limited", provider="openai"))))
    assert boss.run("go").output == "Saw: The 'down' specialist failed: rate limited"


def test_pipeline_answers_on_a_thread_of_its_own() -> None:
    boss = (
        agent()
        .llm("fake")
        .agent("draft", agent().llm("fake", responses=["a draft"]))
        .agent("edit", agent().llm("fake", responses=["an edit"]))
    )
    first = boss.pipeline("write", ["draft", "edit"])
    second = boss.pipeline("write", ["draft", "edit"])
    assert first.output == "an edit"
    assert first.thread_id.startswith("pipeline_")
    assert first.thread_id != second.thread_id
    threads = first.metadata["threads"]
    assert isinstance(threads, list) and len(threads) == 2 and all(threads)


def test_the_runtime_property_and_native_worker() -> None:
    worker = agent().llm("fake")
    boss = agent().llm("fake").agent("w", worker)
    assert boss.runtime is boss.build()
    assert isinstance(boss.runtime, SupervisorRuntime)
    assert boss.runtime.specialists["w"].native() is worker
