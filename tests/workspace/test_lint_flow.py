"""`AsyncWorkspace.lint_flow`: a flow checked as the caller's draft save checks it, stored nowhere.

Each problem names its step and field; the verdict is the save's (a lint
with no problem is a draft that saves, and the other way round), on both
backends.
"""

from __future__ import annotations

from typing import Any

import pytest
from tests.workspace.conftest import FLOW, Team

from tidemill.errors import ConfigurationError, ItemNotFound
from tidemill.flows import Problem
from tidemill.workspace import AsyncWorkspace

GREET = {"id": "greet", "script": {"path": "f/team/script"}, "inputs": {"name": "x"}}
LINKED = {"id": "ask", "inputs": {"user_message": "hi"}, "ai_agent": {"agent": "f/team/agent"}}
TOOL_FLOW = {"model": "fake", "tools": [{"name": "greet", "flow": "f/team/flow"}]}
NESTED = {"model": "fake", "tools": [{"name": "helper", "agent": {"agent": "f/team/agent"}}]}

CASES: dict[str, tuple[Any, list[tuple[str | None, str]]]] = {
    # name: (the value max lints at u/max/new, the (step, field) of each problem)
    "a good flow": ({"steps": [{"id": "one", "script": "def main():\n    return 1\n"}]}, []),
    "as YAML text": ("steps:\n  - id: one\n    script: |\n      def main():\n"
                     "          return 1\n", []),
    "an unknown need": ({"steps": [{"id": "one", "script": "def main(): ...",
                                    "needs": ["nope"]}]}, [("one", "needs")]),
    "a missing script": ({"steps": [{**GREET, "script": {"path": "u/max/nothing"}}]},
                         [("greet", "script.path")]),
    "a script the caller may not read": ({"steps": [GREET]}, [("greet", "script.path")]),
    "a linked agent the caller may not read": ({"steps": [LINKED]}, [("ask", "ai_agent.agent")]),
    "a linked agent whose tool the caller may not read": (
        {"steps": [{**LINKED, "ai_agent": {"agent": "u/max/agent"}}]},
        [("ask", "ai_agent.agent")],
    ),
    "an inline agent's tool the caller may not read": (
        {"steps": [{**LINKED, "ai_agent": TOOL_FLOW}]}, [("ask", "ai_agent.tools[0].flow.path")]
    ),
    "an inline agent's nested agent the caller may not read": (
        {"steps": [{**LINKED, "ai_agent": NESTED}]}, [("ask", "ai_agent.tools[0].agent.agent")]
    ),
    "bad YAML": ("steps:\n  - id: one\n   script: [\n", [(None, "yaml")]),
    "YAML that is a list": ("- id: one\n", [(None, "value")]),
    "a number": (5, [(None, "value")]),
}  # fmt: skip


@pytest.fixture
async def linted(team: Team) -> Team:
    """The team, with an agent of ada's in f/team and one in u/max whose tool max may not read."""
    await team.ada.write("f/team/agent", "resource", {"model": "fake"}, resource_type="ai_agent")
    await team.ada.write("u/max/agent", "resource", TOOL_FLOW, resource_type="ai_agent")
    return team


async def saves(ws: AsyncWorkspace, path: str, value: Any) -> bool:
    try:
        await ws.save_draft(path, "flow", value)
    except ConfigurationError:
        return False
    await ws.discard_draft(path)
    return True


@pytest.mark.parametrize("name", list(CASES))
async def test_each_problem_names_its_step_and_field_as_the_save_decides(
    linted: Team, name: str
) -> None:
    value, expected = CASES[name]
    problems = await linted.max.lint_flow("u/max/new", value)
    assert [(p.step, p.field) for p in problems] == expected, problems
    assert all(isinstance(p, Problem) and p.message for p in problems)
    # The verdict is the save's own, and the lint stored nothing.
    assert await saves(linted.max, "u/max/new", value) == (not problems)
    assert await linted.max.drafts() == []
    with pytest.raises(ItemNotFound):
        await linted.max.get("u/max/new")


async def test_the_messages_say_what_is_wrong_and_where(linted: Team) -> None:
    max_ = linted.max
    (yaml,) = await max_.lint_flow("u/max/new", CASES["bad YAML"][0])
    assert yaml.message.startswith("invalid YAML at line 3")
    (need,) = await max_.lint_flow("u/max/new", CASES["an unknown need"][0])
    assert "nope" in need.message
    (script,) = await max_.lint_flow("u/max/new", {"steps": [GREET]})
    assert "f/team/script" in script.message and "max" in script.message
    (link,) = await max_.lint_flow("u/max/new", CASES["a linked agent the caller may not read"][0])
    assert link.message == (
        "step 'ask' links f/team/agent, which names no ai_agent resource that max may read."
    )
    (tool,) = await max_.lint_flow(
        "u/max/new", CASES["a linked agent whose tool the caller may not read"][0]
    )
    assert tool.message == (
        "u/max/agent names, at tools[0].flow: no flow f/team/flow that max may read "
        "(deployed, or a draft of theirs)"
    )


async def test_every_problem_is_listed_not_only_the_first(linted: Team) -> None:
    steps = [
        {**GREET, "id": "a"},
        {**LINKED, "id": "b"},
        {**LINKED, "id": "c", "ai_agent": NESTED},
        {**LINKED, "id": "d", "ai_agent": {"agent": "u/max/agent"}},
    ]
    problems = await linted.max.lint_flow("u/max/new", {"steps": steps})
    assert [(p.step, p.field) for p in problems] == [("a", "script.path")]  # the model's first
    problems = await linted.max.lint_flow("u/max/new", {"steps": steps[1:]})
    assert [(p.step, p.field) for p in problems] == [
        ("b", "ai_agent.agent"), ("c", "ai_agent.tools[0].agent.agent"), ("d", "ai_agent.agent")
    ]  # fmt: skip


async def test_drafts_of_the_caller_count_as_a_draft_save_sees_them(linted: Team) -> None:
    olga = linted.olga
    flow = {"steps": [{**GREET, "script": {"path": "f/team/drafted"}}]}
    assert [p.field for p in await olga.lint_flow("f/team/new", flow)] == ["script.path"]
    await olga.save_draft("f/team/drafted", "script", "def main(name):\n    return name\n")
    assert await olga.lint_flow("f/team/new", flow) == []
    # Someone else's draft is not theirs to see.
    assert [p.field for p in await linted.ada.lint_flow("f/team/new", flow)] == ["script.path"]


async def test_a_lint_needs_the_path_readable_and_its_folder(linted: Team) -> None:
    assert await linted.vic.lint_flow("f/team/flow", FLOW) == []  # a viewer may lint
    with pytest.raises(ItemNotFound):
        await linted.max.lint_flow("f/team/flow", FLOW)
    with pytest.raises(ItemNotFound, match="no folder"):
        await linted.ada.lint_flow("f/nowhere/flow", FLOW)
    with pytest.raises(ConfigurationError):
        await linted.ada.lint_flow("not a path", FLOW)
