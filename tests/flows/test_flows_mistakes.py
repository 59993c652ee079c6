"""Mistakes a flow's models accept but a run would trip over: each is a problem when loading.

A mistyped model provider, a `{{ placeholder }}` naming nothing the prompt
sees, a script input `main` cannot take or a parameter no input fills. They
are found by `Flow.load`/`parse`/`from_dict`, `flow.check()`, `engine.submit`
and `tidemill flow validate`; a stored definition (`Flow.model_validate_json`)
is not held to them, so a run stored before the check existed still reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tidemill import Engine
from tidemill.cli import main as cli_main
from tidemill.errors import FlowValidationError
from tidemill.flows import Flow, Problem

Problems = Callable[..., list[Problem]]

EXAMPLES = Path(__file__).parents[2] / "examples"


def ok(text: str, **kwargs: Any) -> Flow:
    """Parse a flow that must load, and check it again as submit does."""
    flow = Flow.parse(text, **kwargs)
    flow.check()
    return flow


def action(model: str = "openai:gpt-4o-mini", prompt: str = "Hi", **step: Any) -> dict[str, Any]:
    return {"id": "ask", "ai_action": {"model": model, "prompt": prompt}, **step}


def refused(data: dict[str, Any]) -> list[Problem]:
    with pytest.raises(FlowValidationError) as info:
        Flow.from_dict(data)
    return [Problem(p.step, p.field, p.message) for p in info.value.problems]


# --- model specs --------------------------------------------------------------------------


def test_a_mistyped_provider_is_a_problem_with_a_did_you_mean() -> None:
    found = refused({"steps": [action("opnai:gpt-4o")]})
    assert found == [
        Problem(
            "ask",
            "ai_action.model",
            "Unknown model provider in 'opnai:gpt-4o'. Did you mean 'openai'?",
        )
    ]


def test_an_unknown_provider_without_a_close_name_says_how_to_write_one() -> None:
    (problem,) = refused({"steps": [action("nosuchvendor:model-1")]})
    assert (problem.step, problem.field) == ("ask", "ai_action.model")
    assert problem.message.startswith("Unknown model provider in 'nosuchvendor:model-1'.")
    assert "'provider:model'" in problem.message


def test_a_spec_with_no_model_after_the_colon_is_a_problem() -> None:
    (problem,) = refused({"steps": [action("openai:")]})
    assert problem.field == "ai_action.model"
    assert "names no model after the colon" in problem.message
    assert "'openai:<model id>'" in problem.message


def test_agent_specialist_and_nested_agent_models_are_checked() -> None:
    agent = {
        "model": "antropic:claude-sonnet-4-5",
        "specialists": [{"name": "writer", "model": "gemnii:gemini-2.5-flash"}],
        "tools": [{"name": "helper", "agent": {"model": "mistrall:mistral-small-latest"}}],
    }
    found = refused({"steps": [{"id": "agent", "ai_agent": agent}]})
    assert [(p.step, p.field) for p in found] == [
        ("agent", "ai_agent.model"),
        ("agent", "ai_agent.specialists[0].model"),
        ("agent", "ai_agent.tools[0].agent.model"),
    ]
    assert "Did you mean 'anthropic'" in found[0].message
    assert "Did you mean 'gemini'" in found[1].message
    assert "Did you mean 'mistral'" in found[2].message


@pytest.mark.parametrize(
    "spec",
    [
        "openai:gpt-4o-mini",
        "anthropic:claude-sonnet-4-5",
        "gpt-4o",
        "claude-sonnet-4-5",
        "openai",
        "fake",
        "scripted",
        "ollama:llama3.2:3b",
        "bedrock:us.anthropic.claude-3-7-sonnet-20250219-v1:0",
        "openai-compatible:my-model",
    ],
)
def test_valid_model_specs_are_accepted(spec: str) -> None:
    ok(json.dumps({"steps": [action(spec)]}))


def test_hostile_model_specs_are_reported_not_crashed_on() -> None:
    for spec in ["x" * 100_000, ":" * 50, "\u202eopenai:gpt-4o", "open ai:gpt-4o"]:
        (problem,) = refused({"steps": [action(spec)]})
        assert problem.field == "ai_action.model"
        assert problem.message.startswith(("Unknown model provider", "The model spec"))


def test_a_stored_definition_is_not_held_to_the_check() -> None:
    # A run stored before the check existed must still read back on a worker.
    flow = Flow.model_validate({"steps": [action("opnai:gpt-4o")]})
    again = Flow.model_validate_json(flow.model_dump_json())
    assert again == flow
    with pytest.raises(FlowValidationError) as info:
        again.check()
    assert [(p.step, p.field) for p in info.value.problems] == [("ask", "ai_action.model")]


def test_a_mistake_in_a_sub_flow_names_its_step_and_the_sub_flow() -> None:
    child = {"steps": [action("opnai:gpt-4o")]}
    found = refused({"steps": [{"id": "child", "flow": {"flow": child}}]})
    assert found == [
        Problem(
            "ask",
            "ai_action.model",
            "in the sub-flow of step 'child': "
            "Unknown model provider in 'opnai:gpt-4o'. Did you mean 'openai'?",
        )
    ]


def test_a_mistake_in_a_sub_flow_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "child.yaml").write_text(
        "steps:\n  - id: ask\n    ai_action: {model: 'opnai:gpt-4o', prompt: hi}\n"
    )
    (tmp_path / "parent.yaml").write_text("steps:\n  - {id: child, flow: child.yaml}\n")
    with pytest.raises(FlowValidationError) as info:
        Flow.load(tmp_path / "parent.yaml")
    (problem,) = info.value.problems
    assert (problem.step, problem.field) == ("ask", "ai_action.model")
    assert problem.message.startswith("in the sub-flow of step 'child' (child.yaml): Unknown")
    assert info.value.source == str(tmp_path / "parent.yaml")


def test_a_mistake_in_an_agent_flow_tool_names_the_tool() -> None:
    tool_flow = {"steps": [action("opnai:gpt-4o")]}
    agent = {"model": "fake", "tools": [{"name": "sub", "flow": {"flow": tool_flow}}]}
    (problem,) = refused({"steps": [{"id": "agent", "ai_agent": agent}]})
    assert (problem.step, problem.field) == ("ask", "ai_action.model")
    assert problem.message.startswith("in the flow of step 'agent', ai_agent.tools[0]: Unknown")


# --- placeholders -------------------------------------------------------------------------


def test_a_placeholder_naming_nothing_the_prompt_sees_is_a_problem() -> None:
    step = action(
        prompt="Classify: {{ tiket.text }}", inputs={"ticket": {"expr": "flow_input.ticket"}}
    )
    assert refused({"steps": [step]}) == [
        Problem(
            "ask",
            "ai_action.prompt",
            "placeholder {{ tiket.text }}: unknown name 'tiket'; did you mean 'ticket'? "
            "(this prompt can use: flow_input, previous_result, results, ticket)",
        )
    ]


def test_system_prompts_of_actions_and_agents_are_checked() -> None:
    steps = [
        {"id": "a", "ai_action": {"model": "fake", "prompt": "Hi", "system": "{{ lang }}"}},
        {
            "id": "b",
            "inputs": {"user_message": "hi", "tone": "dry"},
            "ai_agent": {"model": "fake", "system": "Be {{ tone }}, in {{ lnag }}"},
        },
    ]
    found = refused({"steps": steps})
    assert [(p.step, p.field) for p in found] == [
        ("a", "ai_action.system"),
        ("b", "ai_agent.system"),
    ]
    assert found[0].message.startswith("placeholder {{ lang }}: unknown name 'lang' (this prompt")
    assert found[1].message.startswith("placeholder {{ lnag }}: unknown name 'lnag' (")
    assert "tone, user_message" in found[1].message


def test_a_placeholder_repeated_is_reported_once() -> None:
    found = refused({"steps": [action(prompt="{{ tiket }} " * 500)]})
    assert len(found) == 1 and found[0].message.startswith("placeholder {{ tiket }}:")


def test_iter_in_a_prompt_is_only_set_inside_a_for_each() -> None:
    (problem,) = refused({"steps": [action(prompt="Item {{ iter.value }}")]})
    assert problem == Problem(
        "ask",
        "ai_action.prompt",
        "placeholder {{ iter.value }}: `iter` is only set inside the steps of a for_each",
    )
    each = {
        "id": "each",
        "for_each": {"items": [1, 2], "steps": [action(prompt="{{ iter.value }}")]},
    }
    ok(json.dumps({"steps": [each]}))


def test_a_placeholder_reading_a_result_that_may_not_have_finished() -> None:
    steps = [
        {"id": "first", "identity": {}},
        action(prompt="{{ results.later }}"),
        {"id": "later", "identity": {}},
    ]
    (problem,) = refused({"steps": steps})
    assert (problem.step, problem.field) == ("ask", "ai_action.prompt")
    assert problem.message.startswith("placeholder {{ results.later }}: reads results.later, but")
    (problem,) = refused({"steps": [action(prompt="{{ results.nope }}")]})
    assert problem.message == "placeholder {{ results.nope }}: reads results.nope: no step 'nope'"


def test_placeholders_over_what_the_prompt_sees_are_accepted() -> None:
    ok(
        """
inputs: {type: object}
steps:
  - id: fetch
    identity: {}
    inputs: {text: {expr: flow_input.text}}
  - id: ask
    inputs: {ticket: {expr: results.fetch}, lang: fr}
    ai_action:
      model: fake
      system: "Answer in {{ lang }}; the run is {{ flow_input }}"
      prompt: >-
        {{ ticket.text }} {{ results.fetch.text }} {{ previous_result }}
        {{ len(ticket.text) }} {{ flow_input.x }} {{ 'a' if lang else 'b' }}
"""
    )


# --- script parameters --------------------------------------------------------------------

TWO = "def main(x, y):\n    return x + y\n"


def test_a_parameter_no_input_fills_is_a_problem() -> None:
    step = {"id": "add", "script": TWO, "inputs": {"x": 1}}
    assert refused({"steps": [step]}) == [
        Problem(
            "add",
            "inputs",
            "main(x, y) needs 'y', which no input gives and which has no default; "
            "add the input, or give the parameter a default",
        )
    ]


def test_an_input_that_names_no_parameter_is_a_problem_with_a_did_you_mean() -> None:
    step = {"id": "add", "script": TWO, "inputs": {"x": 1, "yy": 2}}
    found = refused({"steps": [step]})
    assert found == [
        Problem(
            "add",
            "inputs",
            "main(x, y) needs 'y', which no input gives and which has no default; "
            "add the input, or give the parameter a default",
        ),
        Problem(
            "add",
            "inputs.yy",
            "main(x, y) has no parameter 'yy'; did you mean 'y'? "
            "Remove the input, or add the parameter (or **kwargs)",
        ),
    ]


def test_keyword_only_and_positional_only_parameters() -> None:
    code = "def main(a, /, b=1, *, c, d=2):\n    return a\n"
    shown = "main(a, /, b=1, *, c, d=2)"
    found = refused({"steps": [{"id": "s", "script": code, "inputs": {"b": 2}}]})
    assert [(p.field, p.message.split(";")[0]) for p in found] == [
        ("inputs", f"{shown} takes 'a' only by position, which an input cannot fill"),
        ("inputs", f"{shown} needs 'c', which no input gives and which has no default"),
    ]
    found = refused({"steps": [{"id": "s", "script": code, "inputs": {"a": 1, "c": 2}}]})
    assert found == [
        Problem("s", "inputs.a", f"{shown} takes 'a' only by position, not by name; remove the `/`")
    ]


@pytest.mark.parametrize(
    ("code", "inputs"),
    [
        (TWO, {"x": 1, "y": {"expr": "flow_input.y"}}),  # expressions bind by name too
        ("def main(x, y=2):\n    return x\n", {"x": 1}),  # a default
        ("def main(**kwargs):\n    return kwargs\n", {"anything": 1}),  # **kwargs
        ("def main(x, **extra):\n    return x\n", {"x": 1, "more": 2}),
        ("def main(*args, x):\n    return x\n", {"x": 1}),  # *args stays empty
        ("def main(x, *, y=0):\n    return x\n", {"x": 1, "y": 2}),
        ("async def main(x):\n    return x\n", {"x": 1}),
        ("def main():\n    return 1\n", {}),
        ("def main(a=0, /, b=1):\n    return a\n", {"b": 2}),  # positional-only, defaulted
        ("def main(a=0, /, **kw):\n    return kw\n", {"a": 1}),  # `a` goes to **kw
    ],
)
def test_scripts_whose_inputs_fit_main_are_accepted(code: str, inputs: dict[str, Any]) -> None:
    ok(json.dumps({"steps": [{"id": "s", "script": code, "inputs": inputs}]}))


@pytest.mark.parametrize(
    "code",
    [
        # A decorator may change the signature; a main bound twice is not known until it runs.
        "import functools\n@functools.lru_cache\ndef main(x, y):\n    return x\n",
        "def main(x, y):\n    return x\nmain = lambda **kw: kw\n",
        "def main(x, y):\n    return x\nif True:\n    def main(**kw):\n        return kw\n",
        "from mylib import main as _m\ndef main(x, y):\n    return x\nfrom mylib import main\n",
    ],
)
def test_a_main_that_is_not_known_without_running_it_is_not_checked(code: str) -> None:
    ok(json.dumps({"steps": [{"id": "s", "script": code, "inputs": {"x": 1, "z": 2}}]}))


def test_function_references_are_not_checked() -> None:
    step = {"id": "s", "script": {"function": "mypkg.steps:run"}, "inputs": {"anything": 1}}
    ok(json.dumps({"steps": [step]}))


def test_a_script_in_a_for_each_body_takes_its_inputs_from_iter() -> None:
    inner = {"id": "twice", "script": "def main(n):\n    return 2 * n\n",
             "inputs": {"n": {"expr": "iter.value"}}}  # fmt: skip
    ok(json.dumps({"steps": [{"id": "each", "for_each": {"items": [1, 2], "steps": [inner]}}]}))
    inner["inputs"] = {"nn": {"expr": "iter.value"}}
    found = refused({"steps": [{"id": "each", "for_each": {"items": [1, 2], "steps": [inner]}}]})
    assert [(p.step, p.field) for p in found] == [("twice", "inputs"), ("twice", "inputs.nn")]
    assert "did you mean 'n'?" in found[1].message


def test_a_script_read_from_a_file_is_checked_and_named(tmp_path: Path) -> None:
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "add.py").write_text(TWO)
    (tmp_path / "flow.yaml").write_text(
        "steps:\n  - id: add\n    script: {path: steps/add.py}\n    inputs: {x: 1}\n"
    )
    with pytest.raises(FlowValidationError) as info:
        Flow.load(tmp_path / "flow.yaml")
    (problem,) = info.value.problems
    assert problem == Problem(
        "add",
        "inputs",
        "main(x, y) in steps/add.py needs 'y', which no input gives and which has no default; "
        "add the input, or give the parameter a default",
    )
    (tmp_path / "flow.yaml").write_text(
        "steps:\n  - id: add\n    script: {path: steps/add.py}\n    inputs: {x: 1, y: 2}\n"
    )
    Flow.load(tmp_path / "flow.yaml").check()


# --- every problem at once, through every door --------------------------------------------

BAD = """
steps:
  - id: add
    script: "def main(x, y):\\n    return x + y\\n"
    inputs: {x: 1}
  - id: ask
    ai_action: {model: "opnai:gpt-4o", prompt: "{{ tiket }}"}
    inputs: {ticket: {expr: results.add}}
"""

BAD_PROBLEMS = [
    ("add", "inputs"),
    ("ask", "ai_action.model"),
    ("ask", "ai_action.prompt"),
]


def test_every_mistake_is_reported_at_once(problems: Problems) -> None:
    assert [(p.step, p.field) for p in problems(BAD)] == BAD_PROBLEMS


def test_submit_refuses_a_flow_with_the_same_problems(tmp_path: Path) -> None:
    flow = Flow.model_validate(Flow.parse("steps: [{id: a, identity: {}}]").model_dump())
    bad = Flow.model_validate(
        {
            "steps": [
                {"id": "add", "script": TWO, "inputs": {"x": 1}},
                {"id": "ask", "ai_action": {"model": "opnai:gpt-4o", "prompt": "{{ tiket }}"},
                 "inputs": {"ticket": {"expr": "results.add"}}},
            ]
        }
    )  # fmt: skip
    with Engine(f"sqlite:///{tmp_path / 'runs.db'}") as engine:
        with pytest.raises(FlowValidationError) as info:
            engine.submit(bad)
        assert [(p.step, p.field) for p in info.value.problems] == BAD_PROBLEMS
        assert engine.runs() == []
        (tmp_path / "bad.yaml").write_text(BAD)
        with pytest.raises(FlowValidationError) as info:
            engine.submit(tmp_path / "bad.yaml")
        assert [(p.step, p.field) for p in info.value.problems] == BAD_PROBLEMS
        assert engine.runs() == []
        assert engine.submit(flow).id


def test_flow_validate_lists_them_as_text_and_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(BAD)
    assert cli_main(["flow", "validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "not valid (3 problems)" in err
    assert "step 'ask', ai_action.model: Unknown model provider in 'opnai:gpt-4o'." in err
    assert "Did you mean 'openai'?" in err
    assert "placeholder {{ tiket }}: unknown name 'tiket'; did you mean 'ticket'?" in err
    assert "main(x, y) needs 'y'" in err
    assert cli_main(["flow", "validate", "--json", str(path)]) == 2
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert report["valid"] is False and report["file"] == str(path)
    assert [(p["step"], p["field"]) for p in report["problems"]] == BAD_PROBLEMS
    assert "Did you mean 'openai'?" in report["problems"][1]["message"]
    good = tmp_path / "good.yaml"
    good.write_text("name: fine\nsteps: [{id: a, identity: {}}]\n")
    assert cli_main(["flow", "validate", "--json", str(good)]) == 0
    out, _ = capsys.readouterr()
    assert json.loads(out) == {"file": str(good), "valid": True, "problems": [], "steps": 1}


@pytest.mark.parametrize(
    "path",
    # examples/workspace holds workspace items (tests/workspace pushes and runs them).
    sorted(p for p in EXAMPLES.rglob("*.yaml") if "workspace" not in p.relative_to(EXAMPLES).parts),
    ids=lambda p: str(p.relative_to(EXAMPLES)),
)
def test_the_example_flows_still_load(path: Path) -> None:
    Flow.load(path).check()


def test_the_test_example_flows_still_load(examples: Path) -> None:
    for path in [*examples.rglob("*.yaml"), *examples.rglob("*.json")]:
        if path.parent.name != "shared":
            Flow.load(path).check()
