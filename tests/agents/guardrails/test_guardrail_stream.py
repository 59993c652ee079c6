"""Streamed output: the holdback releases exactly the whole-text redaction, and nothing raw."""

from __future__ import annotations

import itertools
import re

import pytest
from guardrail_corpus import NEGATIVES, POSITIVES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tidemill.agents.guardrails import (
    BufferedStreamGuard,
    Detector,
    GuardrailResult,
    GuardrailViolation,
    OutputGuard,
    RuleGuardrail,
    StreamGuard,
    Violation,
    guard_stream,
)
from tidemill.errors import ConfigurationError

REDACT = RuleGuardrail()
BLOCK = RuleGuardrail(on_violation="block")
CUSTOM = RuleGuardrail(
    patterns={"order_id": r"ORD-[0-9]{8}", "ticket": r"[0-9]{3}/[A-Z]{2}"},
    detectors=[Detector("code", re.compile(r"#[a-z]{3,6}#"), max_length=8)],
)

# Pieces texts are made of: whole samples, near misses, and the characters
# that sit at the edges of matches.
FRAGMENTS = [
    *(value for values in POSITIVES.values() for value in values),
    *(value for values in NEGATIVES.values() for value in values),
    "ORD-12345678", "ORD-1234", "123/AB", "#abc#", "#toolong#",
    " ", "  ", "\n", ".", ",", "-", "@", "+", ":", "::", "(", ")", "/",
    "1", "12", "555", "0100", "a", "e", "ey", "eyJ", "sk-", "sk-ant-", "Bear", "Bearer ",
    "AKIA", "ghp_", "xoxb-", "AIza", "-----BEGIN ", "DE89", "4111", "+1 ",
]  # fmt: skip
_CHARS = st.text(alphabet="0123456789 -.@:+()/#abcdefxyzABCDEFsk_\n", max_size=12)
TEXTS = st.lists(st.one_of(st.sampled_from(FRAGMENTS), _CHARS), max_size=10).map("".join)


def split(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(cut, len(text)) for cut in cuts})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def stream_through(guard: OutputGuard, pieces: list[str], whole: str) -> list[str]:
    """Feed `pieces`, checking that each release continues a prefix of `whole`."""
    released: list[str] = []
    for piece in pieces:
        released.append(guard.feed(piece))
        assert whole.startswith("".join(released))
    released.append(guard.flush())
    return released


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_any_split_releases_exactly_the_whole_text_redaction(text: str, cuts: list[int]) -> None:
    whole = REDACT.check_output(text)
    expected = whole.text if whole.text is not None else text
    guard = REDACT.stream()
    released = stream_through(guard, split(text, cuts), expected)
    assert "".join(released) == expected
    assert guard.violations == whole.violations
    # Nothing matched is ever released raw: every match became its placeholder.
    for violation in whole.violations:
        raw = text[violation.span[0] : violation.span[1]]
        if raw not in REDACT.redact(text):  # (unless it also occurs unmatched elsewhere)
            assert all(raw not in "".join(released[: i + 1]) for i in range(len(released)))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_blocking_raises_before_any_of_the_match_is_released(text: str, cuts: list[int]) -> None:
    violations = BLOCK.scan(text)
    released, error = block_stream(split(text, cuts))
    if error is None:
        assert not violations
        assert released == text
        return
    assert violations, "raised on a clean text"
    assert len(released) <= violations[0].span[0]
    assert text.startswith(released)
    assert error.side == "output" and len(error.violations) == 1
    # It names a real match: one the whole-text scan finds, or one inside it.
    start = error.violations[0].span[0]
    assert any(v.span[0] <= start < v.span[1] for v in violations)


def block_stream(pieces: list[str]) -> tuple[str, GuardrailViolation | None]:
    """Stream under the blocking policy: what was released, and the error if it blocked."""
    guard = BLOCK.stream()
    released = ""
    try:
        for piece in pieces:
            released += guard.feed(piece)
        released += guard.flush()
    except GuardrailViolation as error:
        return released, error
    return released, None


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=TEXTS, cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=12))
def test_custom_patterns_stream_exactly_too(text: str, cuts: list[int]) -> None:
    expected = CUSTOM.redact(text)
    released = stream_through(CUSTOM.stream(), split(text, cuts), expected)
    assert "".join(released) == expected


def test_an_email_split_across_deltas_is_held_then_replaced() -> None:
    guard = REDACT.stream()
    assert guard.feed("Write to ann") == "Write to "
    assert guard.held == 3
    assert guard.feed("@example") == ""
    assert guard.feed(".org today") == "[EMAIL] "
    assert guard.flush() == "today"
    assert [(v.category, v.span) for v in guard.violations] == [("email", (9, 24))]


def test_a_card_is_held_digit_by_digit_and_released_as_a_placeholder() -> None:
    guard = REDACT.stream()
    released = [guard.feed(ch) for ch in "Pay 4111 1111 1111 1111 now"]
    assert "".join(released) + guard.flush() == "Pay [CREDIT_CARD] now"
    assert "1" not in "".join(released)


def test_blocking_stops_before_the_secret_and_stays_stopped() -> None:
    key = POSITIVES["aws_access_key_id"][0]
    guard = BLOCK.stream()
    assert guard.feed("The key is ") == "The key is "
    assert guard.feed(key[:10]) == ""
    with pytest.raises(GuardrailViolation) as caught:
        guard.feed(key[10:] + " ok")
    assert caught.value.violations[0].sample == "AKIA****"
    with pytest.raises(GuardrailViolation):
        guard.feed("more")
    with pytest.raises(GuardrailViolation):
        guard.flush()


def test_ordinary_prose_is_released_almost_at_once() -> None:
    guard = REDACT.stream()
    words = ["The", "report", "shows", "revenue", "grew", "12%", "in", "Q3,", "driven", "by"]
    held = []
    for word in words * 20:
        guard.feed(word + " ")
        held.append(guard.held)
    assert max(held) <= 12  # at most the last word or number
    assert sum(held) / len(held) < 3


def test_a_private_key_is_held_until_it_ends() -> None:
    pem = POSITIVES["private_key"][0]
    guard = REDACT.stream()
    released = "".join(guard.feed(line + "\n") for line in pem.split("\n"))
    assert released == ""
    released += guard.feed("Keep it safe.")
    assert released == "[PRIVATE_KEY]\nKeep it "  # "safe." could still start an email
    assert guard.flush() == "safe."


def test_feeding_after_flush_names_the_rule() -> None:
    guard = REDACT.stream()
    assert guard.feed("") == ""
    assert guard.flush() == ""
    with pytest.raises(ConfigurationError, match="cannot be fed after flush"):
        guard.feed("x")


class _Upper:
    """A guardrail without streaming support: redacts words in capitals."""

    def check_input(self, messages: object) -> GuardrailResult:
        return GuardrailResult("input")

    def check_output(self, text: str) -> GuardrailResult:
        found = [m for m in re.finditer(r"\b[A-Z]{3,}\b", text)]
        if not found:
            return GuardrailResult("output", text=text)
        violations = tuple(Violation("caps", m.span(), "***", kind="custom") for m in found)
        return GuardrailResult(
            "output", "redact", violations, re.sub(r"\b[A-Z]{3,}\b", "[X]", text)
        )

    def describe(self) -> dict[str, object]:
        return {"type": "upper"}


def test_guard_stream_picks_the_holdback_guard_or_buffers() -> None:
    assert isinstance(guard_stream(REDACT), StreamGuard)
    buffered = guard_stream(_Upper())  # type: ignore[arg-type]
    assert isinstance(buffered, BufferedStreamGuard)
    assert isinstance(buffered, OutputGuard)
    assert buffered.feed("say HELLO ") == ""
    assert buffered.feed("world") == ""
    assert buffered.flush() == "say [X] world"
    assert [v.category for v in buffered.violations] == ["caps"]
    with pytest.raises(ConfigurationError):
        buffered.feed("late")


def test_a_buffered_guard_raises_when_its_guardrail_blocks() -> None:
    class Blocking(_Upper):
        def check_output(self, text: str) -> GuardrailResult:
            return GuardrailResult("output", "block", (Violation("caps", (0, 1), "*"),))

    guard = guard_stream(Blocking())  # type: ignore[arg-type]
    guard.feed("ANY")
    with pytest.raises(GuardrailViolation):
        guard.flush()
