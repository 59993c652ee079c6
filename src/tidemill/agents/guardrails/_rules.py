"""`RuleGuardrail`: the dependency-free guardrail, built on regular expressions and checksums."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence

from pydantic import JsonValue

from tidemill.agents.guardrails._base import GuardrailResult, OnViolation, Side, Violation
from tidemill.agents.guardrails._detectors import BUILTIN_DETECTORS, Detector, prefix_pattern
from tidemill.agents.guardrails._scan import Found, redact, required_gate, scan
from tidemill.agents.guardrails._stream import StreamGuard
from tidemill.errors import ConfigurationError
from tidemill.types import Message

__all__ = ["RuleGuardrail"]

_NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")


class RuleGuardrail:
    """Finds personal data and credentials with rules, and redacts or blocks them.

    Personal data (`pii`): `email`, `phone`, `credit_card` (Luhn-checked),
    `iban` (length and mod-97 checked), `ssn` (valid ranges only), `ipv4`,
    `ipv6`. Credentials (`secrets`): `openai_api_key`, `anthropic_api_key`,
    `aws_access_key_id`, `github_token`, `slack_token`, `google_api_key`,
    `bearer_token`, `private_key` (PEM blocks), `jwt`.

    Rules trade recall for precision where they must: a bare run of digits
    is not a phone number, and `1.2.3` is a version, not an address.

    Args:
        pii: Look for personal data.
        secrets: Look for credentials.
        on_violation: `"redact"` replaces each match with a placeholder such
            as `[EMAIL]` and lets the run go on; `"block"` stops it with
            `GuardrailViolation`.
        categories: Only these built-in categories (each must belong to an
            enabled family); all of them by default.
        patterns: Extra categories: a name (`order_id`) and a regular
            expression. Redacted as `[ORDER_ID]`.
        detectors: Extra `Detector` objects, for checks beyond a pattern.

    Raises:
        ConfigurationError: For an unknown category, a policy other than
            `redact`/`block`, a bad pattern, or nothing left to look for.

    Examples:
        >>> guard = RuleGuardrail(on_violation="redact")
        >>> guard.check_output("Card 4111 1111 1111 1111, mail ann@example.org").text
        'Card [CREDIT_CARD], mail [EMAIL]'
        >>> guard.check_output("Version 1.2.3, order 100234567").passed
        True
        >>> orders = RuleGuardrail(patterns={"order_id": r"ORD-[0-9]{8}"})
        >>> orders.check_output("See ORD-12345678").text
        'See [ORDER_ID]'
    """

    def __init__(
        self,
        *,
        pii: bool = True,
        secrets: bool = True,
        on_violation: OnViolation = "redact",
        categories: Iterable[str] | None = None,
        patterns: Mapping[str, str | re.Pattern[str]] | None = None,
        detectors: Iterable[Detector] = (),
    ) -> None:
        if on_violation not in ("redact", "block"):
            raise ConfigurationError(
                f"on_violation must be 'redact' or 'block', not {on_violation!r}.",
                hint="'redact' replaces what was found with placeholders; 'block' stops the run.",
            )
        self.on_violation: OnViolation = on_violation
        enabled = {"pii": pii, "secret": secrets}
        chosen = _builtin(enabled, categories)
        extra = [*(_from_pattern(name, regex) for name, regex in (patterns or {}).items())]
        extra.extend(detectors)
        names = {detector.category for detector in chosen}
        for detector in extra:
            if detector.category in names or detector.category in _BUILTIN_NAMES:
                raise ConfigurationError(
                    f"The category {detector.category!r} is defined twice.",
                    hint="Give custom patterns names of their own.",
                )
            names.add(detector.category)
        self.detectors: tuple[Detector, ...] = (*chosen, *extra)
        if not self.detectors:
            raise ConfigurationError(
                "The guardrail has nothing to look for.",
                hint="Enable pii= or secrets=, or pass patterns= or detectors=.",
            )
        self._gate = required_gate(self.detectors)

    @property
    def categories(self) -> tuple[str, ...]:
        """The categories this guardrail looks for."""
        return tuple(dict.fromkeys(detector.category for detector in self.detectors))

    def scan(self, text: str) -> list[Violation]:
        """Return everything found in `text`, in order, whatever the policy."""
        return [_violation(found, text) for found in self._scan(text)]

    def redact(self, text: str) -> str:
        """Return `text` with everything found replaced by placeholders, whatever the policy."""
        return redact(text, self._scan(text))

    def check_output(self, text: str) -> GuardrailResult:
        """Check the model's text before the caller sees it.

        Examples:
            >>> RuleGuardrail(on_violation="block").check_output("key sk-ant-" + "aB3" * 10).action
            'block'
        """
        found = self._scan(text)
        if not found:
            return GuardrailResult("output", text=text)
        violations = tuple(_violation(match, text) for match in found)
        if self.on_violation == "block":
            return GuardrailResult("output", "block", violations)
        return GuardrailResult("output", "redact", violations, text=redact(text, found))

    def check_input(self, messages: Sequence[Message]) -> GuardrailResult:
        """Check messages before the model sees them: their `content`, each on its own.

        Tool calls and images are not looked at. Spans are offsets in the
        content of the message that `message_index` names.
        """
        violations: list[Violation] = []
        checked: list[Message] = []
        for index, message in enumerate(messages):
            found = self._scan(message.content)
            if not found:
                checked.append(message)
                continue
            violations.extend(_violation(match, message.content, index) for match in found)
            redacted = redact(message.content, found)
            checked.append(message.model_copy(update={"content": redacted}))
        return self._decide("input", violations, tuple(checked))

    def stream(self) -> StreamGuard:
        """Return a guard for one streamed answer; see `StreamGuard`."""
        return StreamGuard(self.detectors, on_violation=self.on_violation)

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description of the policy."""
        return {
            "type": "rules",
            "on_violation": self.on_violation,
            "categories": list(self.categories),
        }

    def _scan(self, text: str) -> list[Found]:
        """Every match in `text`; a text without any required string is not searched further."""
        if self._gate is not None and self._gate.search(text) is None:
            return []
        return scan(text, self.detectors)

    def _decide(
        self, side: Side, violations: list[Violation], messages: tuple[Message, ...]
    ) -> GuardrailResult:
        if not violations:
            return GuardrailResult(side, messages=messages)
        if self.on_violation == "block":
            return GuardrailResult(side, "block", tuple(violations))
        return GuardrailResult(side, "redact", tuple(violations), messages=messages)

    def __repr__(self) -> str:
        return f"RuleGuardrail(on_violation={self.on_violation!r}, categories={self.categories!r})"


_BUILTIN_NAMES = frozenset(detector.category for detector in BUILTIN_DETECTORS)


def _builtin(enabled: Mapping[str, bool], categories: Iterable[str] | None) -> list[Detector]:
    if categories is None:
        return [d for d in BUILTIN_DETECTORS if enabled[d.kind]]
    wanted = list(categories)
    if isinstance(categories, str):
        wanted = [categories]
    families = {d.category: d.kind for d in BUILTIN_DETECTORS}
    for name in wanted:
        if name not in families:
            close = difflib.get_close_matches(name, sorted(families), n=1)
            raise ConfigurationError(
                f"Unknown guardrail category {name!r}.",
                hint=(f"Did you mean {close[0]!r}? " if close else "")
                + "Known: "
                + ", ".join(sorted(families))
                + ". Use patterns= for your own.",
            )
        if not enabled[families[name]]:
            flag = "pii" if families[name] == "pii" else "secrets"
            raise ConfigurationError(
                f"The category {name!r} is {families[name]} data, but {flag}=False.",
                hint=f"Drop it from categories=, or set {flag}=True.",
            )
    return [d for d in BUILTIN_DETECTORS if d.category in wanted]


def _from_pattern(name: str, regex: str | re.Pattern[str]) -> Detector:
    if not _NAME.fullmatch(name):
        raise ConfigurationError(
            f"The pattern name {name!r} is not usable.",
            hint="Use lower-case letters, digits and '_', starting with a letter (order_id).",
        )
    try:
        pattern = regex if isinstance(regex, re.Pattern) else re.compile(regex)
    except re.error as exc:
        raise ConfigurationError(f"The pattern for {name!r} is not valid: {exc}.") from exc
    return Detector(name, pattern, partial=_literal_start(pattern))


def _literal_start(pattern: re.Pattern[str]) -> re.Pattern[str] | None:
    """A `partial` for a custom pattern that starts with literal text (`ORD-`), else None.

    It accepts every prefix of the literal, and anything once the literal is
    complete: conservative, yet it spares streams the full `max_length`
    holdback until the literal shows up.
    """
    source = pattern.pattern
    if "|" in source or pattern.flags & re.VERBOSE:
        return None
    literal: list[str] = []
    for ch in source:
        if ch in _METACHARACTERS:
            if ch in "*?{" and literal:  # the last character is repeated or optional
                literal.pop()
            break
        literal.append(ch)
    if not literal:
        return None
    flags = re.IGNORECASE if pattern.flags & re.IGNORECASE else 0
    return re.compile(prefix_pattern("".join(literal), r"[\s\S]*"), flags)


_METACHARACTERS = frozenset(".^$*+?{}[]\\|()")


def _violation(found: Found, text: str, message_index: int | None = None) -> Violation:
    detector = found.detector
    return Violation(
        category=detector.category,
        span=(found.start, found.end),
        sample=detector.masked(text[found.start : found.end]),
        kind=detector.kind,
        message_index=message_index,
    )
