"""RuleGuardrail: policies, input and output checks, configuration, errors."""

from __future__ import annotations

import re

import pytest

import tidemill
from tidemill.agents.guardrails import (
    Detector,
    Guardrail,
    GuardrailResult,
    GuardrailViolation,
    RuleGuardrail,
    StreamingGuardrail,
    Violation,
    resolve_guardrail,
)
from tidemill.agents.guardrails._scan import required_gate
from tidemill.errors import AgentError, ConfigurationError
from tidemill.types import Message, Role, ToolCall, ToolResult

CARD = "4111 1111 1111 1111"
EMAIL = "ann@example.org"


def test_it_is_a_guardrail_that_streams() -> None:
    guard = RuleGuardrail()
    assert isinstance(guard, Guardrail)
    assert isinstance(guard, StreamingGuardrail)


def test_clean_output_passes_as_it_is() -> None:
    result = RuleGuardrail().check_output("All good, version 1.2.3.")
    assert result == GuardrailResult("output", "allow", (), text="All good, version 1.2.3.")
    assert result.passed and not result.blocked
    result.raise_if_blocked()


def test_redacting_output_replaces_each_match_with_its_placeholder() -> None:
    result = RuleGuardrail().check_output(f"Card {CARD}; mail {EMAIL}.")
    assert (result.action, result.passed, result.blocked) == ("redact", False, False)
    assert result.text == "Card [CREDIT_CARD]; mail [EMAIL]."
    assert [v.to_dict() for v in result.violations] == [
        {
            "category": "credit_card",
            "span": [5, 24],
            "sample": "**** **** **** 1111",
            "kind": "pii",
            "message_index": None,
        },
        {
            "category": "email",
            "span": [31, 46],
            "sample": "a***@e***.org",
            "kind": "pii",
            "message_index": None,
        },
    ]
    result.raise_if_blocked()  # redaction lets the run go on


def test_blocking_output_withholds_the_text_and_raises_a_typed_error() -> None:
    result = RuleGuardrail(on_violation="block").check_output(f"Card {CARD}")
    assert (result.action, result.text, result.blocked) == ("block", None, True)
    with pytest.raises(GuardrailViolation) as caught:
        result.raise_if_blocked()
    error = caught.value
    assert isinstance(error, AgentError)
    assert error.side == "output"
    assert error.violations == result.violations
    assert CARD not in str(error) and CARD not in repr(error.context)
    assert str(error).startswith("The guardrail blocked the output: it contains credit_card (1).")
    assert "on_violation='redact'" in str(error)
    assert error.context == {
        "side": "output",
        "violations": [
            {"category": "credit_card", "span": [5, 24], "sample": "**** **** **** 1111"}
        ],
    }


def test_the_error_is_exported_at_the_top_level() -> None:
    assert tidemill.GuardrailViolation is GuardrailViolation
    assert "GuardrailViolation" in tidemill.__all__


def test_input_messages_are_redacted_one_by_one_keeping_everything_else() -> None:
    call = ToolCall(id="c1", name="lookup", arguments={"q": EMAIL})
    messages = [
        Message.system("You are helpful."),
        Message.user(f"My card is {CARD}"),
        Message.assistant("Looking it up", tool_calls=(call,)),
        Message.tool(ToolResult(call_id="c1", name="lookup", content=f"owner {EMAIL}")),
    ]
    result = RuleGuardrail().check_input(messages)
    assert result.side == "input" and result.action == "redact"
    assert result.messages is not None
    redacted = list(result.messages)
    assert redacted[0] is messages[0] and redacted[2] is messages[2]
    assert redacted[1].content == "My card is [CREDIT_CARD]"
    assert redacted[1].role is Role.USER
    assert redacted[3].content == "owner [EMAIL]"
    assert (redacted[3].tool_call_id, redacted[3].name) == ("c1", "lookup")
    # Only `content` is looked at: tool-call arguments are left alone.
    assert redacted[2].tool_calls == (call,)
    assert [(v.category, v.message_index, v.span) for v in result.violations] == [
        ("credit_card", 1, (11, 30)),
        ("email", 3, (6, 21)),
    ]


def test_blocked_input_names_its_side() -> None:
    result = RuleGuardrail(on_violation="block").check_input([Message.user(f"mail {EMAIL}")])
    assert result.messages is None
    with pytest.raises(GuardrailViolation, match="blocked the input") as caught:
        result.raise_if_blocked()
    assert caught.value.side == "input"
    assert "from the prompt" in str(caught.value)


def test_clean_input_passes_the_same_messages() -> None:
    messages = (Message.user("hello"),)
    result = RuleGuardrail(on_violation="block").check_input(messages)
    assert result.passed and result.messages == messages


def test_families_can_be_switched_off() -> None:
    text = f"{EMAIL} AKIAIOSFODNN7EXAMPLE"
    assert [v.category for v in RuleGuardrail(secrets=False).scan(text)] == ["email"]
    assert [v.category for v in RuleGuardrail(pii=False).scan(text)] == ["aws_access_key_id"]


def test_categories_narrow_the_search() -> None:
    guard = RuleGuardrail(categories=["email"])
    assert guard.categories == ("email",)
    assert guard.check_output(f"{EMAIL} {CARD}").text == f"[EMAIL] {CARD}"
    assert RuleGuardrail(categories="ssn").categories == ("ssn",)


def test_an_unknown_category_gets_a_suggestion() -> None:
    with pytest.raises(ConfigurationError, match="Unknown guardrail category 'emial'") as caught:
        RuleGuardrail(categories=["emial"])
    assert "Did you mean 'email'?" in str(caught.value)


def test_a_category_of_a_disabled_family_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="pii=False"):
        RuleGuardrail(pii=False, categories=["email"])


def test_the_policy_must_be_redact_or_block() -> None:
    with pytest.raises(ConfigurationError, match="'redact' or 'block'"):
        RuleGuardrail(on_violation="warn")  # type: ignore[arg-type]


def test_nothing_to_look_for_is_a_mistake() -> None:
    with pytest.raises(ConfigurationError, match="nothing to look for"):
        RuleGuardrail(pii=False, secrets=False)


def test_custom_patterns_get_a_typed_placeholder() -> None:
    guard = RuleGuardrail(pii=False, secrets=False, patterns={"order_id": r"ORD-[0-9]{8}"})
    result = guard.check_output("Orders ORD-12345678 and ORD-87654321.")
    assert result.text == "Orders [ORDER_ID] and [ORDER_ID]."
    assert [(v.category, v.kind, v.sample) for v in result.violations] == [
        ("order_id", "custom", "OR****"),
        ("order_id", "custom", "OR****"),
    ]


def test_custom_patterns_may_be_compiled() -> None:
    guard = RuleGuardrail(patterns={"ticket": re.compile(r"tkt-[0-9]{4}", re.IGNORECASE)})
    assert guard.check_output("See TKT-1234").text == "See [TICKET]"


def test_custom_detectors_bring_their_own_checks() -> None:
    even = Detector(
        "even_id",
        re.compile(r"ID[0-9]{4}"),
        placeholder="<id>",
        max_length=6,
        refine=lambda text: len(text) if int(text[2:]) % 2 == 0 else 0,
        mask=lambda text: "ID****",
    )
    guard = RuleGuardrail(pii=False, secrets=False, detectors=[even])
    result = guard.check_output("ID1234 ID1235")
    assert result.text == "<id> ID1235"
    assert result.violations == (Violation("even_id", (0, 6), "ID****", kind="custom"),)


def test_required_strings_decide_whether_a_pattern_runs() -> None:
    def guard(*required: str) -> RuleGuardrail:
        detector = Detector("code", re.compile(r"a.b[0-9]"), max_length=4, required=required)
        return RuleGuardrail(pii=False, secrets=False, detectors=[detector])

    text = "codes a-b1 and a.b2"
    assert guard().redact(text) == "codes [CODE] and [CODE]"
    # Present: the pattern runs over the whole text, not only after the string.
    assert guard("a.b", "zz").redact(text) == "codes [CODE] and [CODE]"
    # Absent: the pattern is not run, so even its true matches are left alone.
    assert guard("zz").redact(text) == text
    # Required strings are literal: "a.b" is not the pattern a.b.
    assert guard("a.b").redact("code a-b1") == "code a-b1"


def test_one_gate_for_all_detectors_skips_only_text_none_could_match() -> None:
    gated = Detector("code", re.compile(r"a.b[0-9]"), max_length=4, required=("a.b",))
    other = Detector("pin", re.compile(r"PIN-[0-9]{4}"), max_length=8, required=("PIN-",))
    ungated = Detector("word", re.compile(r"secretword"), max_length=10)
    assert required_gate([gated, other]) is not None
    # A detector that requires nothing must always run, so there is no shared gate.
    assert required_gate([gated, ungated]) is None
    both = RuleGuardrail(pii=False, secrets=False, detectors=[gated, other])
    assert both.redact("a.b1 and PIN-1234") == "[CODE] and [PIN]"
    assert both.redact("PIN-1234 only") == "[PIN] only"
    assert both.check_output("nothing here").passed
    mixed = RuleGuardrail(pii=False, secrets=False, detectors=[gated, ungated])
    assert mixed.redact("the secretword") == "the [WORD]"
    checked = mixed.check_input([Message.user("plain"), Message.user("a secretword")])
    assert [m.content for m in checked.messages or ()] == ["plain", "a [WORD]"]


@pytest.mark.parametrize(
    ("patterns", "message"),
    [
        ({"Order": "x"}, "not usable"),
        ({"email": "x"}, "defined twice"),
        ({"bad": "ORD-[0-9"}, "not valid"),
    ],
)
def test_bad_custom_patterns_are_refused(patterns: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        RuleGuardrail(patterns=patterns)


def test_an_invalid_pattern_keeps_the_cause() -> None:
    with pytest.raises(ConfigurationError) as caught:
        RuleGuardrail(patterns={"bad": "("})
    assert isinstance(caught.value.__cause__, re.error)


def test_describe_is_json_safe() -> None:
    description = RuleGuardrail(on_violation="block", categories=["email", "phone"]).describe()
    assert description == {
        "type": "rules",
        "on_violation": "block",
        "categories": ["email", "phone"],
    }
    assert "RuleGuardrail(on_violation='block'" in repr(RuleGuardrail(on_violation="block"))


def test_resolve_builds_rules_or_passes_objects_through() -> None:
    built = resolve_guardrail(on_violation="block", categories=["email"])
    assert isinstance(built, RuleGuardrail) and built.on_violation == "block"
    assert isinstance(resolve_guardrail("rules"), RuleGuardrail)
    assert resolve_guardrail(built) is built


def test_resolve_refuses_what_it_cannot_use() -> None:
    with pytest.raises(ConfigurationError, match="Did you mean 'rules'"):
        resolve_guardrail("rule")
    with pytest.raises(ConfigurationError, match="Bad option"):
        resolve_guardrail(pi=True)
    with pytest.raises(ConfigurationError, match="Options were given"):
        resolve_guardrail(RuleGuardrail(), pii=False)
    with pytest.raises(ConfigurationError, match="Cannot use int"):
        resolve_guardrail(42)  # type: ignore[arg-type]


class _Shouty:
    """A third-party guardrail: blocks answers in capitals."""

    def check_input(self, messages: object) -> GuardrailResult:
        return GuardrailResult("input")

    def check_output(self, text: str) -> GuardrailResult:
        if text.isupper():
            return GuardrailResult(
                "output", "block", (Violation("shouting", (0, len(text)), "***"),)
            )
        return GuardrailResult("output", text=text)

    def describe(self) -> dict[str, object]:
        return {"type": "shouty"}


def test_any_object_with_the_three_methods_is_a_guardrail() -> None:
    shouty = _Shouty()
    assert isinstance(shouty, Guardrail)
    assert not isinstance(shouty, StreamingGuardrail)
    assert resolve_guardrail(shouty) is shouty  # type: ignore[arg-type]
