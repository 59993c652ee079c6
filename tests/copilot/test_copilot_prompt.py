"""The copilot's instructions and its tools, as the model is shown them."""

from __future__ import annotations

from tidemill.copilot import APPROVAL_TOOLS, SYSTEM_PROMPT, TOOLS, system_prompt
from tidemill.copilot._outline import find_step, outline


def test_the_prompt_searches_flows_then_scripts_before_writing() -> None:
    text = SYSTEM_PROMPT
    assert text.index("first `search_flows`") < text.index("then `search_scripts`")
    assert "a new inline script only when nothing found fits" in text
    assert "read its input schema with `get_flow_details`" in text
    assert "`inputs` are bound to exactly that schema" in text


def test_the_prompt_lints_after_every_change_and_never_touches_secrets() -> None:
    assert "After every change" in SYSTEM_PROMPT
    assert "`get_lint_errors`" in SYSTEM_PROMPT
    assert "Never ask for, read or write a secret's value" in SYSTEM_PROMPT
    assert system_prompt("f/a/b").endswith("The flow being edited is f/a/b.")
    assert system_prompt() == SYSTEM_PROMPT


def test_only_the_test_runs_wait_for_approval_and_every_tool_is_described() -> None:
    assert {"test_run_flow", "test_run_step"} == APPROVAL_TOOLS
    assert len({t.name for t in TOOLS}) == len(TOOLS) == 13
    for each in TOOLS:
        assert each.description, each.name
        assert "ctx" not in each.parameters["properties"], each.name


BRANCHY = [
    {"id": "route", "branch": {
        "branches": [{"when": "true", "steps": [{"id": "a", "flow": "f/x/child"}]}],
        "default": [{"id": "b", "approval": {"message": "ok?"}}],
    }},
    {"id": "fan", "parallel": {"branches": [{"steps": [{"id": "c", "script": {"code": "x"}}]}]}},
    "not a step",
]  # fmt: skip


def test_the_outline_shows_nested_steps_and_what_they_reference() -> None:
    route, fan = outline(BRANCHY)
    assert route["branches"] == {
        "branches[0]": [{"id": "a", "summary": "", "kind": "flow", "flow": "f/x/child"}],
        "default": [{"id": "b", "summary": "", "kind": "approval", "message": "ok?"}],
    }
    assert fan["branches"]["branches[0]"][0] == {
        "id": "c", "summary": "", "kind": "script", "inline": True,
    }  # fmt: skip
    assert find_step(BRANCHY, "b") == {"id": "b", "approval": {"message": "ok?"}}
    assert find_step(BRANCHY, "zz") is None
