"""Expressions: what they evaluate to, what they refuse, and what they report reading."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from tidemill.errors import ExpressionError
from tidemill.flows import Expression, compile_expression, evaluate_condition

CONTEXT: dict[str, Any] = {
    "flow_input": {
        "customer": {"id": 7, "name": " Ada Lovelace "},
        "list": [10, 20, 30],
        "amount": 250,
        "tags": [],
        "k": "fetch",
    },
    "results": {"fetch": {"text": "hi", "items": [4, 5]}, "classify": {"label": "refund"}},
    "previous_result": {"done": True},
}


def run(text: str, context: dict[str, Any] | None = None) -> Any:
    return compile_expression(text).evaluate(CONTEXT if context is None else context)


def refused(text: str, context: dict[str, Any] | None = None) -> ExpressionError:
    with pytest.raises(ExpressionError) as info:
        run(text, context)
    return info.value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("flow_input.customer.id", 7),
        ("results.fetch", {"text": "hi", "items": [4, 5]}),
        ("results.fetch.items", [4, 5]),  # a key named like a dict method is the key
        ("results['fetch']['text']", "hi"),
        ('results["classify"].label', "refund"),
        ("flow_input.list[0]", 10),
        ("flow_input.list[-1]", 30),
        ("flow_input.list[1:]", [20, 30]),
        ("flow_input.amount > 100 and not flow_input.tags", True),
        ("flow_input.amount < 100 or 'x'", "x"),
        ("flow_input.amount * 2 - 1", 499),
        ("flow_input.amount / 100", 2.5),
        ("flow_input.amount // 100", 2),
        ("flow_input.amount % 100", 50),
        ("2 ** 10", 1024),
        ("-flow_input.amount", -250),
        ("20 in flow_input.list", True),
        ("'refund' not in results.classify.label", False),
        ("'big' if flow_input.amount > 100 else 'small'", "big"),
        ("[1, 'a', None, True]", [1, "a", None, True]),
        ("{'a': 1, 'b': [flow_input.amount]}", {"a": 1, "b": [250]}),
        ("(1, 2)", (1, 2)),
        ("'a' + 'b' + str(1)", "ab1"),
        ("f'id={flow_input.customer.id}'", "id=7"),
        ("previous_result.done is True", True),
    ],
)
def test_evaluates(text: str, expected: Any) -> None:
    assert run(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("len(flow_input.list)", 3),
        ("str(flow_input.amount)", "250"),
        ("int('42')", 42),
        ("float('1.5')", 1.5),
        ("bool(flow_input.tags)", False),
        ("min(flow_input.list)", 10),
        ("max(3, 9)", 9),
        ("abs(-2)", 2),
        ("round(2.567, 2)", 2.57),
        ("sorted([3, 1, 2], reverse=True)", [3, 2, 1]),
        ("sum(flow_input.list)", 60),
        ("any([0, 1])", True),
        ("all([1, 0])", False),
        ("flow_input.customer.name.strip().lower()", "ada lovelace"),
        ("flow_input.customer.name.upper()", " ADA LOVELACE "),
        ("flow_input.customer.name.strip().split(' ')", ["Ada", "Lovelace"]),
        ("', '.join(['a', 'b'])", "a, b"),
        ("results.classify.label.startswith('ref')", True),
        ("results.classify.label.endswith('x')", False),
    ],
)
def test_allowed_functions_and_string_methods(text: str, expected: Any) -> None:
    assert run(text) == expected


def test_missing_key_says_which_key_and_what_exists() -> None:
    error = refused("results.fetc")
    assert error.reason == "results has no key 'fetc'; it has: fetch, classify"
    assert error.hint == "Did you mean 'fetch'?"
    assert "results.fetc" in str(error)


def test_missing_nested_key_and_subscript_name_the_path() -> None:
    assert (
        "flow_input.customer has no key 'email'; it has: id, name"
        in refused("flow_input.customer.email").reason
    )
    assert "results has no key 'nope'" in refused("results['nope']").reason
    assert refused("x.y", {"x": {}}).reason == "x has no key 'y'; it is empty"


def test_index_out_of_range_and_wrong_types_are_expression_errors() -> None:
    assert "flow_input.list has no index 5; it has 3 items" in refused("flow_input.list[5]").reason
    assert "index must be a number" in refused("flow_input.list['a']").reason
    assert "cannot read .x of flow_input.list: it is a list" in refused("flow_input.list.x").reason
    assert "cannot index flow_input.amount: it is an int" in refused("flow_input.amount[0]").reason
    assert "TypeError" in refused("'a' + 1").reason
    assert "ZeroDivisionError" in refused("1 / 0").reason
    assert "only strings have methods" in refused("flow_input.list.lower()").reason


def test_unknown_name_lists_the_available_names() -> None:
    error = refused("nope.x")
    assert error.reason == "unknown name 'nope'; available: flow_input, previous_result, results"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("__import__('os')", "names starting with '_' are not allowed"),
        ("().__class__.__bases__", "names starting with '_' are not allowed"),
        ("flow_input.__class__", "names starting with '_' are not allowed"),
        ("flow_input._private", "names starting with '_' are not allowed"),
        ("_x", "names starting with '_' are not allowed"),
        ("open('x')", "unknown function 'open'"),
        ("eval('1')", "unknown function 'eval'"),
        ("getattr(flow_input, 'x')", "unknown function 'getattr'"),
        ("lambda: 1", "lambda is not allowed"),
        ("(x := 1)", "assignment (:=) is not allowed"),
        ("[x for x in flow_input.list]", "comprehensions are not allowed"),
        ("{x: 1 for x in flow_input.list}", "comprehensions are not allowed"),
        ("sum(x for x in flow_input.list)", "generator expressions are not allowed"),
        ("{1, 2}", "set literals are not allowed"),
        ("[*flow_input.list]", "unpacking (*) is not allowed"),
        ("{**flow_input}", "unpacking (**) is not allowed"),
        ("max(**flow_input)", "unpacking (**) is not allowed"),
        ("flow_input.customer.name.format()", "unknown method .format()"),
        ("flow_input.customer.name.center(10**9)", "unknown method .center()"),
        ("flow_input.list[0]()", "cannot call flow_input.list[0]"),
        ("len", "len is a function"),
        ("b'x'", "bytes literals are not allowed"),
        ("1j", "complex literals are not allowed"),
        ("f'{flow_input!r}'", "conversions and format specs"),
        ("f'{flow_input.amount:>1000000000}'", "conversions and format specs"),
        ("1 << 2", "LShift is not allowed"),
        ("import os", "invalid syntax"),
        ("x = 1", "invalid syntax"),
        ("1 +", "invalid syntax"),
        ("", "the expression is empty"),
    ],
)
def test_forbidden_constructs_are_refused_when_compiled(text: str, reason: str) -> None:
    with pytest.raises(ExpressionError) as info:
        compile_expression(text)
    assert reason in info.value.reason


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("9 ** 4000000", "is too large"),
        ("(2 ** 50000) * (2 ** 50000) * (2 ** 50000)", "too large"),
        ("'a' * 200000", "long"),
        ("str([[1] * 100000] * 100000)", "too large to turn into text"),
        ("f'{[[1] * 100000] * 100000}'", "too large to turn into text"),
        ("'%999999999d' % 1", "'%' formatting is not supported"),
        ("','.join(['a' * 99999] * 100)", "longer than"),
        ("sum([[1], [2]])", "sum() adds numbers only"),
        ("(-8) ** 0.5", "not a real number"),
    ],
)
def test_huge_or_odd_values_are_bounded(text: str, reason: str) -> None:
    started = time.perf_counter()
    error = refused(text)
    assert reason in error.reason
    assert time.perf_counter() - started < 2


def test_an_expression_longer_than_the_limit_is_refused() -> None:
    with pytest.raises(ExpressionError, match="longer than"):
        compile_expression("1 + " * 5000 + "1")


def test_deep_nesting_is_an_expression_error_not_a_crash() -> None:
    with pytest.raises(ExpressionError):
        run("-" * 5000 + "1")


def test_names_and_results_used() -> None:
    expr = compile_expression("results.fetch.text + results['classify'].label + str(iter.index)")
    assert expr.names == {"results", "iter"}  # `str` is a function, not a name
    assert expr.results_used == {"fetch", "classify"}
    assert compile_expression("flow_input.x").results_used == frozenset()


@pytest.mark.parametrize("text", ["results[flow_input.k]", "results", "len(results) > 1"])
def test_results_used_is_none_when_results_is_used_dynamically(text: str) -> None:
    assert compile_expression(text).results_used is None


def test_compiled_expressions_are_cached_and_compare_by_text() -> None:
    first = compile_expression("flow_input.amount")
    assert compile_expression("flow_input.amount") is first
    assert first == Expression("flow_input.amount", first._node, first.names, None)
    assert hash(first) == hash("flow_input.amount")
    assert repr(first) == "Expression('flow_input.amount')"
    assert first.text == "flow_input.amount"


def test_a_non_string_expression_is_refused() -> None:
    with pytest.raises(ExpressionError, match="must be a string"):
        compile_expression(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("flow_input.amount > 100", True),
        ("flow_input.tags", False),
        ("flow_input.customer", True),
        ("0", False),
        ("''", False),
        ("None", False),
    ],
)
def test_evaluate_condition_uses_truthiness(text: str, expected: bool) -> None:
    assert evaluate_condition(text, CONTEXT) is expected
    assert evaluate_condition(compile_expression(text), CONTEXT) is expected


def test_evaluation_leaves_no_names_behind_and_is_thread_safe() -> None:
    expr = compile_expression("flow_input.n * 2")
    assert expr.evaluate({"flow_input": {"n": 1}}) == 2
    with pytest.raises(ExpressionError, match="unknown name 'flow_input'; available: none"):
        expr.evaluate({})
    failures: list[str] = []

    def worker(n: int) -> None:
        for _ in range(500):
            if expr.evaluate({"flow_input": {"n": n}}) != 2 * n:
                failures.append(f"thread {n}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
