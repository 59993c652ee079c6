"""Every detector against its corpus: what it must find, what it must leave alone."""

from __future__ import annotations

import pytest
from guardrail_corpus import CLEAN_PARAGRAPHS, DIRTY_PARAGRAPHS, NEGATIVES, POSITIVES

from tidemill.agents.guardrails import BUILTIN_DETECTORS, RuleGuardrail, builtin_categories

GUARD = RuleGuardrail()
DETECTORS = {detector.category: detector for detector in BUILTIN_DETECTORS}

# The first character of each two-character lookahead a pattern ends with
# (`(?!\.[0-9])`): a match followed by it is still undecided.
TWO_CHARACTER_LOOKAHEADS = {"email": ".", "ipv4": ".", "phone": ".-", "ssn": ".-"}

POSITIVE_CASES = [(category, value) for category, values in POSITIVES.items() for value in values]
NEGATIVE_CASES = [(category, value) for category, values in NEGATIVES.items() for value in values]


def test_the_corpus_covers_every_detector() -> None:
    assert set(POSITIVES) == set(builtin_categories())
    assert set(builtin_categories()) <= set(NEGATIVES)
    assert all(len(POSITIVES[c]) >= 1 and len(NEGATIVES[c]) >= 1 for c in builtin_categories())


@pytest.mark.parametrize(("category", "value"), POSITIVE_CASES)
@pytest.mark.parametrize(("before", "after"), [("", ""), ("Note: ", " - thanks."), ("(", ")\n")])
def test_positives_are_found_whole(category: str, value: str, before: str, after: str) -> None:
    text = before + value + after
    violations = GUARD.scan(text)
    assert [(v.category, v.span) for v in violations] == [
        (category, (len(before), len(before) + len(value)))
    ]
    redacted = GUARD.redact(text)
    assert redacted == before + DETECTORS[category].placeholder + after
    assert value not in redacted


@pytest.mark.parametrize(("category", "value"), NEGATIVE_CASES)
def test_negatives_pass_untouched(category: str, value: str) -> None:
    for text in (value, f"See {value} here."):
        assert GUARD.scan(text) == [], f"{category}: {text!r}"
        assert GUARD.check_output(text).text == text


@pytest.mark.parametrize(("category", "value"), POSITIVE_CASES)
def test_masked_samples_never_reveal_the_value(category: str, value: str) -> None:
    (violation,) = GUARD.scan(value)
    assert violation.sample != value
    assert value not in violation.sample
    # At most a vendor prefix, a country code or the last few digits survive.
    digits = [ch for ch in value if ch.isdigit()]
    if category in ("credit_card", "phone", "ssn", "iban"):
        assert sum(ch.isdigit() for ch in violation.sample) <= 4 < len(digits)


@pytest.mark.parametrize(("category", "value"), POSITIVE_CASES)
def test_detectors_keep_their_streaming_promises(category: str, value: str) -> None:
    """`max_length` bounds every match, and `partial` accepts every beginning of one.

    The stream guard's exactness rests on these two facts; the property tests
    in `test_guardrail_stream.py` check the consequence.
    """
    detector = DETECTORS[category]
    assert len(value) <= detector.max_length
    assert detector.partial is not None
    for end in range(1, len(value) + 1):
        assert detector.partial.fullmatch(value[:end]), (category, value[:end])
    for lookahead in TWO_CHARACTER_LOOKAHEADS.get(category, ""):
        assert detector.partial.fullmatch(value + lookahead), (category, lookahead)


@pytest.mark.parametrize(("category", "value"), POSITIVE_CASES)
def test_every_match_holds_one_of_its_detectors_required_strings(category: str, value: str) -> None:
    """A built-in skips texts without any of its `required` strings: each sample has one."""
    required = DETECTORS[category].required
    assert required, f"{category} names no required strings"
    assert any(needle in value for needle in required), (category, value)


def test_false_positive_rate_on_realistic_paragraphs() -> None:
    flagged = [(p, GUARD.scan(p)) for p in CLEAN_PARAGRAPHS if GUARD.scan(p)]
    rate = len(flagged) / len(CLEAN_PARAGRAPHS)
    assert len(CLEAN_PARAGRAPHS) >= 40
    assert rate <= 0.02, f"false-positive rate {rate:.1%}: {flagged}"


def test_recall_on_realistic_paragraphs() -> None:
    for paragraph, expected in DIRTY_PARAGRAPHS:
        found = [v.category for v in GUARD.scan(paragraph)]
        assert found == expected, paragraph


def test_an_order_number_next_to_a_card_is_left_alone() -> None:
    result = GUARD.check_output("Card 4111 1111 1111 1111 2027, order 100234567.")
    assert result.text == "Card [CREDIT_CARD] 2027, order 100234567."


def test_an_iban_followed_by_a_currency_is_cut_at_its_length() -> None:
    result = GUARD.check_output("Pay to GB82 WEST 1234 5698 7654 32 EUR now")
    assert result.text == "Pay to [IBAN] EUR now"


def test_a_bearer_token_swallows_the_jwt_it_carries() -> None:
    (violation,) = GUARD.scan(f"Authorization: Bearer {POSITIVES['jwt'][0]}")
    assert violation.category == "bearer_token"
    assert violation.sample == "Bearer ****"


def test_anthropic_keys_are_not_reported_as_openai_keys() -> None:
    (violation,) = GUARD.scan(POSITIVES["anthropic_api_key"][0])
    assert (violation.category, violation.sample) == ("anthropic_api_key", "sk-ant-****")


def test_private_key_samples_show_the_header_only() -> None:
    (violation,) = GUARD.scan(POSITIVES["private_key"][0])
    assert violation.sample == "-----BEGIN RSA PRIVATE KEY-----****"
