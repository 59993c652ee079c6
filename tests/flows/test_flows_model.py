"""The flow model: kinds and their shorthands, scopes and needs, inputs, retries, durations."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from tidemill.errors import ExpressionError, FlowInputError
from tidemill.flows import (
    AIAction,
    AIAgent,
    Approval,
    Branch,
    Expr,
    Expression,
    Flow,
    ForEach,
    Identity,
    Parallel,
    Retry,
    ScriptStep,
    Sleep,
    Step,
    StepKind,
    SubFlow,
    WaitForEvent,
    evaluate_inputs,
    parse_duration,
    resolved_needs,
)

NESTED = """
steps:
  - {id: a, identity: {}}
  - id: p
    parallel:
      branches:
        - steps: [{id: p1, identity: {}}, {id: p2, identity: {}}]
        - steps: [{id: p3, identity: {}}]
  - id: b
    branch:
      branches:
        - when: "flow_input.x"
          steps: [{id: c1, identity: {}}]
      default: [{id: d1, identity: {}}, {id: d2, identity: {}, needs: []}]
  - id: loop
    for_each:
      items: {expr: "flow_input.items"}
      steps: [{id: inner, identity: {}}]
  - {id: join, identity: {}, needs: [p, b]}
"""


def test_every_kind_is_a_step_field_with_a_step_kind_model() -> None:
    for kind in Step.KINDS:
        assert kind in Step.model_fields
    expected = {
        "script": ScriptStep,
        "flow": SubFlow,
        "branch": Branch,
        "parallel": Parallel,
        "for_each": ForEach,
        "approval": Approval,
        "sleep": Sleep,
        "wait_for_event": WaitForEvent,
        "identity": Identity,
        "ai_action": AIAction,
        "ai_agent": AIAgent,
    }
    assert set(expected) == set(Step.KINDS)
    for kind, model in expected.items():
        assert issubclass(model, StepKind)
        assert model in _annotation_models(kind)


def _annotation_models(field: str) -> tuple[object, ...]:
    annotation = Step.model_fields[field].annotation
    return getattr(annotation, "__args__", (annotation,))


def test_kind_and_settings() -> None:
    step = Step.model_validate({"id": "s", "approval": {"message": "ok?"}})
    assert step.kind == "approval"
    assert isinstance(step.settings, Approval)
    assert step.settings.message == "ok?"
    assert step.settings.on_timeout == "reject"
    assert step.settings.approvers == []


@pytest.mark.parametrize("value", [None, True, {}])
def test_identity_shorthands(value: object) -> None:
    step = Step.model_validate({"id": "s", "identity": value})
    assert step.kind == "identity"
    assert step.identity == Identity()


def test_identity_null_next_to_another_kind_is_not_a_second_kind() -> None:
    # model_dump writes every kind key, unset ones as null; that must load back.
    step = Step.model_validate({"id": "s", "approval": {}, "identity": None})
    assert step.kind == "approval"
    assert Step.model_validate(step.model_dump()) == step


def test_identity_false_is_refused() -> None:
    with pytest.raises(ValidationError):
        Step.model_validate({"id": "s", "identity": False})


def test_script_shorthand_is_code() -> None:
    step = Step.model_validate({"id": "s", "script": "def main():\n    return 1\n"})
    assert step.script == ScriptStep(code="def main():\n    return 1\n")


def test_flow_shorthand_is_a_path() -> None:
    step = Step.model_validate({"id": "s", "flow": "child.yaml"})
    assert step.flow == SubFlow(path="child.yaml")
    assert step.flow.flow is None


def test_inputs_are_static_values_or_exprs() -> None:
    step = Step.model_validate(
        {
            "id": "s",
            "identity": {},
            "inputs": {
                "a": {"expr": "flow_input.x"},
                "b": {"expr": "flow_input.x", "other": 1},  # two keys: static data
                "c": [1, {"expr": "nested is data"}],
                "d": None,
            },
        }
    )
    assert step.inputs["a"] == Expr(expr="flow_input.x")
    assert step.inputs["b"] == {"expr": "flow_input.x", "other": 1}
    assert step.inputs["c"] == [1, {"expr": "nested is data"}]
    assert step.inputs["d"] is None


def test_evaluate_inputs_evaluates_exprs_and_copies_static_values() -> None:
    step = Step.model_validate(
        {
            "id": "s",
            "identity": {},
            "inputs": {"n": {"expr": "flow_input.n * 2"}, "mode": "fast", "list": [1, 2]},
        }
    )
    values = evaluate_inputs(step, {"flow_input": {"n": 21}})
    assert values == {"n": 42, "mode": "fast", "list": [1, 2]}
    values["list"].append(3)
    assert step.inputs["list"] == [1, 2]
    with pytest.raises(ExpressionError, match="flow_input has no key 'n'"):
        evaluate_inputs(step, {"flow_input": {}})


def test_step_expressions_are_compiled_once_and_listed_by_field() -> None:
    flow = Flow.parse(
        """
steps:
  - id: s
    branch:
      branches:
        - when: "flow_input.a"
          steps: [{id: x, identity: {}}]
        - when: "flow_input.b"
          steps: [{id: y, identity: {}}]
    inputs: {v: {expr: "flow_input.v"}, w: 1}
    skip_if: "flow_input.skip"
    stop_after_if: "result"
  - id: loop
    for_each: {items: {expr: "flow_input.items"}, steps: [{id: z, identity: {}}]}
  - id: static
    for_each: {items: [1, 2], steps: [{id: z2, identity: {}}]}
"""
    )
    step = flow.find("s")
    fields = step.expressions_by_field()
    assert list(fields) == [
        "inputs.v",
        "skip_if",
        "stop_after_if",
        "branch.branches[0].when",
        "branch.branches[1].when",
    ]
    assert all(isinstance(e, Expression) for e in step.expressions())
    assert step.expressions() == tuple(fields.values())
    assert step.expressions()[0] is step.expressions()[0]
    assert step.skip_condition is fields["skip_if"]
    assert step.stop_condition is fields["stop_after_if"]
    assert list(flow.find("loop").expressions_by_field()) == ["for_each.items"]
    assert flow.find("static").expressions() == ()
    assert flow.find("x").skip_condition is None


def test_results_used_by_a_step() -> None:
    flow = Flow.parse(
        """
steps:
  - {id: a, identity: {}}
  - {id: b, identity: {}}
  - id: c
    identity: {}
    inputs: {x: {expr: "results.a"}}
    skip_if: "results['b'].skip"
  - {id: d, identity: {}, inputs: {x: {expr: "results"}}}
  - {id: e, identity: {}}
"""
    )
    assert flow.find("c").results_used == {"a", "b"}
    assert flow.find("d").results_used is None
    assert flow.find("e").results_used == frozenset()


def test_resolved_needs_defaults_to_the_previous_step() -> None:
    steps = [
        Step(id="a", identity=Identity()),
        Step(id="b", identity=Identity()),
        Step(id="c", identity=Identity(), needs=["a", "b", "a"]),
        Step(id="d", identity=Identity(), needs=[]),
    ]
    assert resolved_needs(steps) == {"a": (), "b": ("a",), "c": ("a", "b"), "d": ()}


def test_walk_find_placement_and_needs_of() -> None:
    flow = Flow.parse(NESTED)
    assert [step.id for step in flow.walk()] == [
        "a", "p", "p1", "p2", "p3", "b", "c1", "d1", "d2", "loop", "inner", "join",
    ]  # fmt: skip
    assert flow.find("p3").kind == "identity"
    assert flow.needs_of("p") == ("a",)
    assert flow.needs_of("p1") == ()
    assert flow.needs_of("p2") == ("p1",)
    assert flow.needs_of("p3") == ()
    assert flow.needs_of("d2") == ()
    assert flow.needs_of("join") == ("p", "b")
    assert flow.needs_of(flow.find("p2")) == ("p1",)
    place = flow.placement("p2")
    assert (place.parent, place.body, place.siblings) == (
        "p",
        "parallel.branches[0].steps",
        ("p1", "p2"),
    )
    assert place.ancestors == ("p",)
    assert not place.in_for_each
    assert flow.placement("d1").body == "branch.default"
    assert flow.placement("c1").body == "branch.branches[0].steps"
    inner = flow.placement("inner")
    assert (inner.parent, inner.body, inner.in_for_each) == ("loop", "for_each.steps", True)
    top = flow.placement("a")
    assert (top.parent, top.body, top.ancestors) == (None, "steps", ())
    with pytest.raises(KeyError, match="no step 'zz'"):
        flow.find("zz")


def test_step_bodies() -> None:
    flow = Flow.parse(NESTED)
    assert [path for path, _ in flow.find("p").bodies()] == [
        "parallel.branches[0].steps",
        "parallel.branches[1].steps",
    ]
    assert [path for path, _ in flow.find("b").bodies()] == [
        "branch.branches[0].steps",
        "branch.default",
    ]
    assert flow.find("a").bodies() == ()


def test_flow_result_expression_and_concurrency_key() -> None:
    flow = Flow.parse(
        "result: {expr: results.a}\nconcurrency: {limit: 2, key: flow_input.user}\n"
        "steps: [{id: a, identity: {}}]\n"
    )
    assert flow.result_expression is not None
    assert flow.result_expression.evaluate({"results": {"a": 1}}) == 1
    assert flow.concurrency is not None
    assert flow.concurrency.limit == 2
    assert flow.concurrency.key_expression is not None
    assert flow.concurrency.key_expression.evaluate({"flow_input": {"user": "u"}}) == "u"
    bare = Flow.parse("steps: [{id: a, identity: {}}]\n")
    assert bare.result_expression is None
    assert bare.concurrency is None


def test_models_are_frozen() -> None:
    flow = Flow.parse("steps: [{id: a, identity: {}}]\n")
    with pytest.raises(ValidationError):
        flow.summary = "changed"  # type: ignore[misc]


def test_validate_input_lists_each_violation_with_its_path() -> None:
    flow = Flow.parse(
        """
name: triage
inputs:
  type: object
  properties:
    ticket: {type: string}
    amount: {type: number, minimum: 0}
    tags: {type: array, items: {type: string}}
  required: [ticket]
steps: [{id: a, identity: {}}]
"""
    )
    assert flow.validate_input({"ticket": "T-1"}) == {"ticket": "T-1"}
    with pytest.raises(FlowInputError) as info:
        flow.validate_input({"amount": -1, "tags": ["a", 2]})
    assert info.value.errors == [
        "$: 'ticket' is a required property",
        "$.amount: -1 is less than the minimum of 0",
        "$.tags[1]: 2 is not of type 'string'",
    ]
    assert "of flow 'triage'" in info.value.message
    with pytest.raises(FlowInputError, match="'ticket' is a required property"):
        flow.validate_input(None)
    with pytest.raises(FlowInputError, match="the input must be an object, not list"):
        flow.validate_input([1])  # type: ignore[arg-type]


def test_an_empty_input_schema_accepts_any_object() -> None:
    flow = Flow.parse("steps: [{id: a, identity: {}}]\n")
    assert flow.validate_input(None) == {}
    assert flow.validate_input({"anything": [1]}) == {"anything": [1]}


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (30, 30.0),
        (1.5, 1.5),
        ("45", 45.0),
        ("500ms", 0.5),
        ("30s", 30.0),
        ("5m", 300.0),
        ("2h", 7200.0),
        ("3d", 259200.0),
        ("1.5h", 5400.0),
        (" 10 s ", 10.0),
    ],
)
def test_durations(value: object, seconds: float) -> None:
    assert parse_duration(value) == seconds
    assert Step.model_validate({"id": "s", "identity": {}, "timeout": value}).timeout == seconds


@pytest.mark.parametrize("value", ["soon", "5x", "-1s", "0s", 0, -3, math.inf, True, None, [1]])
def test_bad_durations(value: object) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_duration(value)


def test_retry_defaults_and_delays() -> None:
    retry = Retry()
    assert (retry.attempts, retry.backoff, retry.multiplier, retry.max_backoff) == (
        0,
        1.0,
        2.0,
        300.0,
    )
    assert [retry.delay(n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert retry.delay(20) == 300.0
    assert retry.delay(100_000) == 300.0  # no overflow
    custom = Retry(attempts=3, backoff=1.5, multiplier=2, max_backoff=60)
    assert [custom.delay(n) for n in (1, 2, 3, 7)] == [1.5, 3.0, 6.0, 60.0]
    assert Retry(backoff=2, multiplier=1).delay(5) == 2.0
    with pytest.raises(ValueError, match="starts at 1"):
        retry.delay(0)


def test_retry_rejects_bad_values() -> None:
    for bad in ({"attempts": -1}, {"backoff": -1}, {"multiplier": 0.9}, {"max_backoff": -1}):
        with pytest.raises(ValidationError):
            Retry.model_validate(bad)
    with pytest.raises(ValidationError):
        Retry.model_validate({"backoff": math.inf})
