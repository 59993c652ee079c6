"""Every validation problem names its step and field, and all are reported at once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pydantic import ValidationError

from tidemill.errors import FlowValidationError
from tidemill.flows import Flow, Problem

Problems = Callable[..., list[Problem]]


def test_problem_renders_step_and_field() -> None:
    assert str(Problem("a", "needs", "bad")) == "step 'a', needs: bad"
    assert str(Problem(None, "inputs", "bad")) == "inputs: bad"


def test_unknown_field_suggests_the_kind(problems: Problems) -> None:
    found = problems("steps:\n  - id: a\n    scriptt: 'def main(): pass'\n")
    assert found == [Problem("a", "scriptt", "unknown field 'scriptt'; did you mean 'script'?")]


def test_unknown_kind_lists_the_kinds(problems: Problems) -> None:
    (problem,) = problems("steps:\n  - id: a\n    ai_wizard: {}\n")
    assert (problem.step, problem.field) == ("a", "ai_wizard")
    assert problem.message.startswith("unknown field 'ai_wizard'; a step's kind is one of: script")


def test_unknown_field_inside_a_kind_suggests_its_fields(problems: Problems) -> None:
    found = problems("steps:\n  - id: a\n    retry: {attemps: 2}\n")
    assert found == [
        Problem("a", "retry.attemps", "unknown field 'attemps'; did you mean 'attempts'?")
    ]
    (problem,) = problems("steps: [{id: a, identity: {}}]\nsumary: x\n")
    assert problem == Problem(None, "sumary", "unknown field 'sumary'; did you mean 'summary'?")


def test_a_step_without_a_kind(problems: Problems) -> None:
    (problem,) = problems("steps:\n  - id: a\n    summary: nothing to do\n")
    assert (problem.step, problem.field) == ("a", "kind")
    assert "the step has no kind; set one of script, flow, branch" in problem.message


def test_a_step_with_two_kinds(problems: Problems) -> None:
    (problem,) = problems("steps:\n  - id: a\n    identity: {}\n    approval: {}\n")
    assert problem == Problem(
        "a", "kind", "the step has 2 kinds (approval, identity); set exactly one"
    )


def test_unknown_needs_suggests_a_close_id(problems: Problems) -> None:
    text = "steps:\n  - {id: fetch, identity: {}}\n  - {id: b, identity: {}, needs: [fech]}\n"
    assert problems(text) == [Problem("b", "needs", "unknown step 'fech'; did you mean 'fetch'?")]


def test_needs_naming_a_step_of_another_list(problems: Problems) -> None:
    text = """
steps:
  - {id: a, identity: {}}
  - id: p
    parallel:
      branches:
        - steps:
            - {id: x, identity: {}}
            - {id: y, identity: {}, needs: [a]}
"""
    (problem,) = problems(text)
    assert (problem.step, problem.field) == ("y", "needs")
    assert "'a' is in another list of steps; needs may only name steps of the same list" in (
        problem.message
    )
    assert "(here: x)" in problem.message


def test_a_step_needing_itself(problems: Problems) -> None:
    text = "steps:\n  - {id: a, identity: {}, needs: [a]}\n"
    assert problems(text) == [Problem("a", "needs", "a step cannot need itself")]


def test_dependency_cycles_name_the_steps(problems: Problems) -> None:
    text = """
steps:
  - {id: a, identity: {}, needs: [c]}
  - {id: b, identity: {}}
  - {id: c, identity: {}}
  - {id: d, identity: {}, needs: [e]}
  - {id: e, identity: {}, needs: [d]}
"""
    assert problems(text) == [
        Problem("a", "needs", "dependency cycle: a -> c -> b -> a"),
        Problem("d", "needs", "dependency cycle: d -> e -> d"),
    ]


def test_cycles_inside_nested_bodies_are_found(problems: Problems) -> None:
    text = """
steps:
  - id: loop
    for_each:
      items: [1]
      steps:
        - {id: x, identity: {}, needs: [y]}
        - {id: y, identity: {}, needs: [x]}
"""
    assert problems(text) == [Problem("x", "needs", "dependency cycle: x -> y -> x")]


def test_duplicate_ids_across_nested_bodies(problems: Problems) -> None:
    text = """
steps:
  - {id: a, identity: {}}
  - id: p
    parallel: {branches: [{steps: [{id: a, identity: {}}]}]}
"""
    (problem,) = problems(text)
    assert (problem.step, problem.field) == ("a", "id")
    assert "duplicate id 'a'" in problem.message


@pytest.mark.parametrize("bad", ["1a", "a b", "-a", "a.b", ""])
def test_ids_must_be_identifier_like(problems: Problems, bad: str) -> None:
    (problem,) = problems(f"steps:\n  - {{id: '{bad}', identity: {{}}}}\n")
    assert problem.field in {"id", "steps[0].id"}
    assert f"{bad!r} is not a valid id" in problem.message


def test_a_step_without_an_id_is_named_by_its_path(problems: Problems) -> None:
    text = "steps:\n  - {id: a, identity: {}}\n  - {identity: {}}\n"
    assert problems(text) == [Problem(None, "steps[1].id", "this field is required")]


def test_a_step_that_is_not_a_mapping(problems: Problems) -> None:
    (problem,) = problems("steps:\n  - just text\n")
    assert (problem.step, problem.field) == (None, "steps[0]")
    assert "expected a mapping, got str" in problem.message


def test_empty_steps_and_empty_bodies(problems: Problems) -> None:
    assert problems("steps: []\n") == [Problem(None, "steps", "must not be empty")]
    text = "steps:\n  - id: p\n    parallel: {branches: [{steps: []}]}\n"
    assert problems(text) == [Problem("p", "parallel.branches[0].steps", "must not be empty")]
    text = "steps:\n  - id: p\n    parallel: {branches: []}\n"
    assert problems(text) == [Problem("p", "parallel.branches", "must not be empty")]


def test_bad_expression_syntax_names_the_field(problems: Problems) -> None:
    text = """
steps:
  - id: a
    identity: {}
    inputs: {x: {expr: "(("}}
  - id: b
    identity: {}
    skip_if: "1 +"
  - id: c
    branch:
      branches:
        - when: "lambda: 1"
          steps: [{id: c1, identity: {}}]
"""
    found = problems(text)
    assert [(p.step, p.field) for p in found] == [
        ("a", "inputs.x"),
        ("b", "skip_if"),
        ("c", "branch.branches[0].when"),
    ]
    assert found[0].message.startswith("invalid expression '((': invalid syntax")
    assert "lambda is not allowed" in found[2].message


def test_expr_must_hold_a_string(problems: Problems) -> None:
    (problem,) = problems("steps:\n  - {id: a, identity: {}, inputs: {x: {expr: 5}}}\n")
    assert problem == Problem("a", "inputs.x", "'expr' must be a string holding an expression")


def test_unknown_names_in_expressions(problems: Problems) -> None:
    text = """
steps:
  - id: a
    identity: {}
    inputs: {x: {expr: "flow_inpt.x"}}
    skip_if: "iter.value"
  - id: b
    identity: {}
    inputs: {x: {expr: "result"}}
"""
    found = problems(text)
    assert [(p.step, p.field) for p in found] == [
        ("a", "inputs.x"),
        ("a", "skip_if"),
        ("b", "inputs.x"),
    ]
    assert found[0].message.startswith("unknown name 'flow_inpt'; did you mean 'flow_input'?")
    assert "expressions here can use: flow_input, previous_result, results" in found[0].message
    assert found[1].message == "`iter` is only set inside the steps of a for_each"
    assert found[2].message == "`result` is only set in stop_after_if (the step's own result)"


def test_iter_and_result_where_they_are_set() -> None:
    flow = Flow.parse(
        """
steps:
  - id: loop
    for_each:
      items: [1, 2]
      steps:
        - id: inner
          identity: {}
          inputs: {x: {expr: "iter.value + iter.index"}}
          stop_after_if: "result.x > 2"
"""
    )
    assert flow.find("inner").stop_condition is not None


def test_iter_in_a_for_each_items_expression_is_outside_the_body(problems: Problems) -> None:
    text = """
steps:
  - id: loop
    for_each:
      items: {expr: "iter.value"}
      steps: [{id: inner, identity: {}}]
"""
    assert problems(text) == [
        Problem("loop", "for_each.items", "`iter` is only set inside the steps of a for_each")
    ]


def test_results_of_unknown_steps(problems: Problems) -> None:
    text = """
steps:
  - {id: fetch, identity: {}}
  - {id: b, identity: {}, inputs: {x: {expr: "results.fetc.text"}}}
"""
    assert problems(text) == [
        Problem("b", "inputs.x", "reads results.fetc: no step 'fetc'; did you mean 'fetch'?")
    ]


def test_results_of_steps_that_may_not_have_finished(problems: Problems) -> None:
    text = """
steps:
  - {id: a, identity: {}, inputs: {x: {expr: "results.b"}}}
  - {id: b, identity: {}}
  - {id: c, identity: {}, needs: [], inputs: {x: {expr: "results['b']"}}}
"""
    assert problems(text) == [
        Problem(
            "a",
            "inputs.x",
            "reads results.b, but step 'b' is not sure to have finished; "
            "add 'b' to this step's needs",
        ),
        Problem(
            "c",
            "inputs.x",
            "reads results.b, but step 'b' is not sure to have finished; "
            "add 'b' to this step's needs",
        ),
    ]


def test_a_step_reading_its_own_result(problems: Problems) -> None:
    (problem,) = problems("steps:\n  - {id: a, identity: {}, skip_if: results.a}\n")
    assert (problem.step, problem.field) == ("a", "skip_if")
    assert "a step cannot read its own result" in problem.message


def test_nested_and_enclosing_results(problems: Problems) -> None:
    text = """
steps:
  - {id: first, identity: {}}
  - id: p
    branch:
      branches:
        - when: "results.inner"
          steps:
            - id: inner
              identity: {}
              inputs: {a: {expr: "results.p"}, b: {expr: "results.first"}}
            - {id: other, identity: {}, inputs: {a: {expr: "results.inner"}}}
      default:
        - {id: d, identity: {}, inputs: {a: {expr: "results.inner"}}}
  - {id: after, identity: {}, inputs: {a: {expr: "results.inner"}, b: {expr: "results.d"}}}
"""
    found = problems(text)
    assert [(p.step, p.field) for p in found] == [
        ("p", "branch.branches[0].when"),
        ("inner", "inputs.a"),
        ("d", "inputs.a"),
    ]
    assert "step 'inner' is nested in this step and has not run yet" in found[0].message
    assert "step 'p' holds this step and has not finished while it runs" in found[1].message
    assert "step 'inner' is in another branch of 'p'" in found[2].message


def test_results_of_steps_inside_a_for_each(problems: Problems) -> None:
    text = """
result: {expr: "results.inner"}
steps:
  - id: loop
    for_each:
      items: [1]
      steps:
        - {id: inner, identity: {}}
        - {id: next, identity: {}, inputs: {x: {expr: "results.inner"}}}
  - {id: after, identity: {}, inputs: {x: {expr: "results.inner"}, y: {expr: "results.loop"}}}
"""
    found = problems(text)
    assert [(p.step, p.field) for p in found] == [("after", "inputs.x"), (None, "result")]
    assert "runs once per item of for_each 'loop'; read results.loop" in found[0].message
    assert "runs once per item of for_each 'loop'; read results.loop instead" in found[1].message


def test_a_nested_step_reading_a_step_its_container_needs() -> None:
    flow = Flow.parse(
        """
steps:
  - {id: a, identity: {}}
  - {id: b, identity: {}, needs: []}
  - id: p
    needs: [a]
    parallel:
      branches:
        - steps: [{id: x, identity: {}, inputs: {v: {expr: "results.a"}}}]
"""
    )
    assert flow.find("x").results_used == {"a"}


def test_a_nested_step_reading_a_step_its_container_does_not_need(problems: Problems) -> None:
    text = """
steps:
  - {id: a, identity: {}}
  - {id: b, identity: {}, needs: []}
  - id: p
    needs: [b]
    parallel:
      branches:
        - steps: [{id: x, identity: {}, inputs: {v: {expr: "results.a"}}}]
"""
    (problem,) = problems(text)
    assert problem.step == "x"
    assert "step 'a' is not sure to have finished; add 'a' to the needs of 'p'" in problem.message


def test_flow_result_and_concurrency_key_names(problems: Problems) -> None:
    text = """
result: {expr: "previous_result + results.nope"}
concurrency: {limit: 1, key: "results.a"}
steps: [{id: a, identity: {}}]
"""
    found = problems(text)
    assert [(p.step, p.field) for p in found] == [
        (None, "result"),
        (None, "result"),
        (None, "concurrency.key"),
    ]
    assert found[0].message.startswith("unknown name 'previous_result'")
    assert found[1].message == "reads results.nope: no step 'nope'"
    assert "unknown name 'results'" in found[2].message


def test_concurrency_limit_must_be_positive(problems: Problems) -> None:
    text = "concurrency: {limit: 0}\nsteps: [{id: a, identity: {}}]\n"
    assert problems(text) == [
        Problem(None, "concurrency.limit", "Input should be greater than or equal to 1")
    ]


def test_bad_durations(problems: Problems) -> None:
    text = """
steps:
  - {id: a, identity: {}, timeout: soon}
  - {id: b, identity: {}, timeout: 0}
  - {id: c, approval: {timeout: -5m}}
"""
    found = problems(text)
    assert [(p.step, p.field) for p in found] == [
        ("a", "timeout"),
        ("b", "timeout"),
        ("c", "approval.timeout"),
    ]
    assert found[0].message.startswith("'soon' is not a duration")
    assert found[1].message == "a duration must be finite and greater than zero, got 0"


def test_bad_retry_values(problems: Problems) -> None:
    text = """
steps:
  - id: a
    identity: {}
    retry: {attempts: -1, backoff: -1, multiplier: 0.5, max_backoff: -2}
"""
    found = problems(text)
    assert [p.field for p in found] == [
        "retry.attempts",
        "retry.backoff",
        "retry.multiplier",
        "retry.max_backoff",
    ]
    assert all(p.step == "a" for p in found)
    assert found[2].message == "Input should be greater than or equal to 1"


def test_bad_approval_values(problems: Problems) -> None:
    (problem,) = problems("steps:\n  - {id: a, approval: {on_timeout: maybe}}\n")
    assert problem == Problem("a", "approval.on_timeout", "Input should be 'reject' or 'approve'")


def test_invalid_inputs_json_schema(problems: Problems) -> None:
    (problem,) = problems("inputs: {type: objekt}\nsteps: [{id: a, identity: {}}]\n")
    assert (problem.step, problem.field) == (None, "inputs")
    assert problem.message.startswith("not a valid JSON Schema:")
    assert "(at $.type)" in problem.message


def test_script_problems(problems: Problems) -> None:
    text = """
steps:
  - id: syntax
    script: "def main(:\\n    pass\\n"
  - id: nomain
    script: "def helper():\\n    return 1\\n"
  - id: two
    script: {code: "def main(): pass", function: "m:f"}
  - id: none
    script: {}
  - id: inproc
    script: {code: "def main(): pass", in_process: true}
  - id: func
    script: {function: "not a function"}
"""
    found = problems(text)
    assert found == [
        Problem("syntax", "script.code", "line 1: syntax error: invalid syntax"),
        Problem("nomain", "script.code", "the code must define a top-level function main()"),
        Problem(
            "two", "script", "set exactly one of code, path and function (got code and function)"
        ),
        Problem("none", "script", "set exactly one of code, path and function (got none)"),
        Problem("inproc", "script.in_process", "in_process is only allowed with function"),
        Problem(
            "func", "script.function", "'not a function' is not of the form 'module.path:function'"
        ),
    ]


def test_a_nested_main_does_not_count_but_async_main_does(problems: Problems) -> None:
    text = 'steps:\n  - id: a\n    script: "class X:\\n    def main(self): pass\\n"\n'
    assert problems(text)[0].message == "the code must define a top-level function main()"
    Flow.parse('steps:\n  - id: a\n    script: "async def main():\\n    return 1\\n"\n')


def test_sub_flow_problems_are_prefixed(problems: Problems) -> None:
    text = """
steps:
  - id: s
    flow:
      flow:
        steps:
          - {id: q, identity: {}, inputs: {x: {expr: "results.nope"}}}
  - id: t
    flow: {flow: {steps: [{id: r, scriptt: x}]}}
  - id: u
    flow: {}
"""
    assert problems(text) == [
        Problem("q", "inputs.x", "in the sub-flow of step 's': reads results.nope: no step 'nope'"),
        Problem(
            "r",
            "scriptt",
            "in the sub-flow of step 't': unknown field 'scriptt'; did you mean 'script'?",
        ),
        Problem("u", "flow", "set exactly one of path and flow"),
    ]


def test_sub_flow_ids_are_their_own_namespace() -> None:
    flow = Flow.parse(
        "steps:\n  - {id: a, identity: {}}\n"
        "  - id: s\n    flow: {flow: {steps: [{id: a, identity: {}}]}}\n"
    )
    assert [step.id for step in flow.walk()] == ["a", "s"]


def test_static_inputs_must_be_json(problems: Problems) -> None:
    found = problems("steps:\n  - {id: a, identity: {}, inputs: {x: !!set {a, b}}}\n")
    assert found == [Problem("a", "inputs.x", "the value is set, which is not a JSON value")]
    with pytest.raises(FlowValidationError, match="keys must be strings"):
        Flow.from_dict({"steps": [{"id": "a", "identity": {}, "inputs": {"x": {1: 2}}}]})
    with pytest.raises(FlowValidationError, match="JSON cannot hold"):
        Flow.from_dict({"steps": [{"id": "a", "identity": {}, "inputs": {"x": float("nan")}}]})


def test_for_each_items_must_be_a_list_or_an_expression(problems: Problems) -> None:
    text = "steps:\n  - id: l\n    for_each: {items: 3, steps: [{id: i, identity: {}}]}\n"
    assert problems(text) == [
        Problem("l", "for_each.items", "items must be a list, or {expr: ...} giving a list")
    ]
    text = (
        "steps:\n  - id: l\n"
        "    for_each: {items: [1], parallelism: 0, steps: [{id: i, identity: {}}]}\n"
    )
    assert problems(text)[0].field == "for_each.parallelism"


def test_all_problems_of_a_kind_are_reported_together(problems: Problems) -> None:
    text = """
inputs: {type: 5}
steps:
  - {id: 1a, identity: {}}
  - {id: b, identity: {}, timeout: never}
  - {id: c, identity: {}, retry: {attempts: -1}}
  - {id: d, scriptt: x}
"""
    found = problems(text)
    assert [p.field for p in found] == ["inputs", "id", "timeout", "retry.attempts", "scriptt"]


def test_model_validate_raises_pydantic_errors_with_the_problems_inside() -> None:
    with pytest.raises(ValidationError) as info:
        Flow.model_validate({"steps": [{"id": "a", "identity": {}, "needs": ["zz"]}]})
    assert "unknown step 'zz'" in str(info.value)


def test_the_error_message_lists_the_problems_and_the_source() -> None:
    with pytest.raises(FlowValidationError) as info:
        Flow.parse("steps:\n  - {id: a}\n", source="my.yaml")
    error = info.value
    assert error.source == "my.yaml"
    assert "The flow (my.yaml) is not valid (1 problem):" in error.message
    assert "  - step 'a', kind: the step has no kind" in error.message
    assert error.context["problems"][0]["step"] == "a"
