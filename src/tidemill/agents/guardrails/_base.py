"""The `Guardrail` protocol and what a check returns.

A guardrail looks at what goes into a model (the prompt a run starts with)
and what comes out of it (the answer's text), and says whether it may pass,
must be redacted, or must be blocked. The runtime calls `check_input` on a
run's prompt before it is journaled, and `check_output` (or a stream guard,
for streamed text) on each answer before it is journaled or reaches the
caller. Tool results are not checked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from pydantic import JsonValue

from tidemill.errors import GuardrailViolation
from tidemill.types import Message

__all__ = [
    "Action",
    "Guardrail",
    "GuardrailResult",
    "OnViolation",
    "Side",
    "Violation",
    "ViolationKind",
]

Side = Literal["input", "output"]
"""What was checked: `input`, a run's prompt; `output`, the model's answer text."""

OnViolation = Literal["redact", "block"]
"""A guardrail's policy when it finds something: replace it, or stop the run."""

Action = Literal["allow", "redact", "block"]
"""What a check decided: let the text through as it is, redacted, or not at all."""

ViolationKind = Literal["pii", "secret", "custom"]
"""The family a detector belongs to: personal data, credentials, or a user's own pattern."""


@dataclass(frozen=True, slots=True)
class Violation:
    """One piece of sensitive data a guardrail found.

    It never holds the matched text: `sample` is masked (`j***@e***.com`,
    `**** **** **** 1111`, `sk-ant-****`), so a violation is safe to log,
    journal and show.
    """

    category: str
    """What was found: `email`, `credit_card`, `openai_api_key`, a custom name, ..."""
    span: tuple[int, int]
    """Start and end offsets of the match in the checked text (in its message, for input)."""
    sample: str
    """A masked rendering of the match, for people reading logs."""
    kind: ViolationKind = "pii"
    """The detector's family."""
    message_index: int | None = None
    """For an input check: the index of the message the match is in."""

    def to_dict(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description, for journals and API responses."""
        return {
            "category": self.category,
            "span": [self.span[0], self.span[1]],
            "sample": self.sample,
            "kind": self.kind,
            "message_index": self.message_index,
        }


@dataclass(frozen=True, slots=True)
class GuardrailResult:
    """What one check found and decided.

    `passed` is True when nothing was found. Otherwise `action` says what the
    policy decided: with `"redact"`, `text` (output) or `messages` (input)
    hold the redacted version to use instead; with `"block"`, they are None
    and `raise_if_blocked()` raises `GuardrailViolation`.

    Examples:
        >>> from tidemill.agents.guardrails import RuleGuardrail
        >>> result = RuleGuardrail().check_output("Call +44 20 7946 0958 today.")
        >>> result.passed, result.action, result.text
        (False, 'redact', 'Call [PHONE] today.')
        >>> result.violations[0].sample
        '+** ** **** **58'
    """

    side: Side
    """The side that was checked."""
    action: Action = "allow"
    """What the policy decided: `allow` (nothing found), `redact` or `block`."""
    violations: tuple[Violation, ...] = ()
    """What was found, in the order found; empty when the check passed."""
    text: str | None = None
    """For an output check: the text to pass on (the original, or redacted); None when blocked."""
    messages: tuple[Message, ...] | None = field(default=None)
    """For an input check: the messages to pass on (as given, or redacted); None when blocked."""

    @property
    def passed(self) -> bool:
        """Whether nothing was found."""
        return not self.violations

    @property
    def blocked(self) -> bool:
        """Whether the policy stops the run."""
        return self.action == "block"

    def raise_if_blocked(self) -> None:
        """Raise `GuardrailViolation` if the policy blocks; otherwise do nothing.

        Raises:
            GuardrailViolation: With the side and the (masked) violations.
        """
        if self.action == "block":
            raise GuardrailViolation(self.side, self.violations)


@runtime_checkable
class Guardrail(Protocol):
    """An input and output policy the agent runtime applies.

    Implement the three methods to plug in another engine (a hosted
    moderation API, an NLP model); `RuleGuardrail` is the dependency-free
    built-in. A guardrail that can check streamed text as it arrives also
    implements `stream()` (see `StreamingGuardrail`); any other is streamed
    by holding the whole answer back until it is complete.
    """

    def check_input(self, messages: Sequence[Message]) -> GuardrailResult:
        """Check messages about to be sent to the model.

        Args:
            messages: The messages a run starts with (its prompt); tool
                results are not checked.

        Returns:
            The decision; with `"redact"`, `messages` holds the same messages
            with their `content` redacted.
        """
        ...

    def check_output(self, text: str) -> GuardrailResult:
        """Check text the model wrote, before the caller sees it.

        Returns:
            The decision; with `"redact"`, `text` is the redacted text.
        """
        ...

    def describe(self) -> dict[str, JsonValue]:
        """Return a JSON-safe description of the policy, for `describe()` and logs."""
        ...
