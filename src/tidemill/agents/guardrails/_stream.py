"""Guarding streamed output: pass text on only once it cannot become a match.

A model streams its answer in small pieces, and a card number or an email
address can arrive split across several of them. `StreamGuard` holds back the
shortest suffix that could still be the beginning of a match (an unfinished
email, the first digits of a card number) and releases everything before it,
so what the caller sees, joined up, is exactly what `check_output` makes of
the whole answer. With a blocking policy it raises as soon as a violation is
certain, before any of its text has been released.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from tidemill.agents.guardrails._base import Guardrail, OnViolation, Violation
from tidemill.agents.guardrails._detectors import Detector
from tidemill.agents.guardrails._scan import _UNSET, Found, horizons, next_decision
from tidemill.errors import ConfigurationError, GuardrailViolation

__all__ = [
    "BufferedStreamGuard",
    "OutputGuard",
    "StreamGuard",
    "StreamingGuardrail",
    "guard_stream",
]

# Characters kept before the scan position, for the patterns' lookbehinds.
_CONTEXT = 16


@runtime_checkable
class OutputGuard(Protocol):
    """Checks one streamed answer, piece by piece.

    Feed it each text delta and pass on what it returns; call `flush()` when
    the model's stream ends and pass that on too. One guard per model call.
    """

    @property
    def violations(self) -> tuple[Violation, ...]:
        """What was found so far (redacted or, with a blocking policy, the one that blocked)."""
        ...

    def feed(self, delta: str) -> str:
        """Take the next piece of the answer; return the text now safe to show.

        Raises:
            GuardrailViolation: The policy blocks and a violation is certain.
        """
        ...

    def flush(self) -> str:
        """End the answer; return the rest of the text.

        Raises:
            GuardrailViolation: The policy blocks and the rest holds a violation.
        """
        ...


@runtime_checkable
class StreamingGuardrail(Guardrail, Protocol):
    """A guardrail that checks streamed answers as they arrive."""

    def stream(self) -> OutputGuard:
        """Return a guard for one streamed answer."""
        ...


def guard_stream(guardrail: Guardrail) -> OutputGuard:
    """Return an output guard for one streamed answer under `guardrail`.

    A `StreamingGuardrail` (like `RuleGuardrail`) checks as the text arrives;
    any other guardrail gets a `BufferedStreamGuard`, which releases the
    answer only once it is complete and checked.

    Examples:
        >>> from tidemill.agents.guardrails import RuleGuardrail
        >>> guard = guard_stream(RuleGuardrail())
        >>> [guard.feed(piece) for piece in ["Write to ann", "@example.org", " today"]]
        ['Write to ', '', '[EMAIL] ']
        >>> guard.flush()
        'today'
    """
    if isinstance(guardrail, StreamingGuardrail):
        return guardrail.stream()
    return BufferedStreamGuard(guardrail)


class StreamGuard:
    """The rule-based output guard: holds back only what could still become a match.

    Made by `RuleGuardrail.stream()`. Joined together, the pieces it returns
    equal `RuleGuardrail.check_output(whole_text).text`, however the text was
    split. Violation spans are offsets in the whole raw answer.

    Args:
        detectors: What to look for, in priority order.
        on_violation: `"redact"` to release placeholders, `"block"` to raise.
    """

    def __init__(self, detectors: Sequence[Detector], *, on_violation: OnViolation) -> None:
        self._detectors = tuple(detectors)
        self._block = on_violation == "block"
        self._buffer = ""
        self._offset = 0  # position of `_buffer[0]` in the whole answer
        self._pos = 0  # scan position in `_buffer`; everything before it was released
        self._violations: list[Violation] = []
        self._error: GuardrailViolation | None = None
        self._closed = False

    @property
    def violations(self) -> tuple[Violation, ...]:
        """What was found so far."""
        return tuple(self._violations)

    @property
    def held(self) -> int:
        """How many characters are held back, waiting for more text."""
        return len(self._buffer) - self._pos

    def feed(self, delta: str) -> str:
        """Take the next piece of the answer; return the text now safe to show.

        Raises:
            GuardrailViolation: The policy blocks and a violation is certain.
            ConfigurationError: The guard was already flushed.
        """
        self._check_open()
        if not delta:
            return ""
        self._buffer += delta
        released = self._advance(final=False)
        if self._pos > 2 * _CONTEXT:
            cut = self._pos - _CONTEXT
            self._buffer = self._buffer[cut:]
            self._offset += cut
            self._pos -= cut
        return released

    def flush(self) -> str:
        """End the answer; return the rest of the text, checked.

        Raises:
            GuardrailViolation: The policy blocks and the rest holds a violation.
            ConfigurationError: The guard was already flushed.
        """
        self._check_open()
        released = self._advance(final=True)
        self._closed = True
        return released

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closed:
            raise ConfigurationError(
                "A stream guard cannot be fed after flush().",
                hint="Use one guard per streamed answer: guard_stream(guardrail) for each.",
            )

    def _advance(self, *, final: bool) -> str:
        text, pos = self._buffer, self._pos
        cache: list[tuple[int, int] | None] = [_UNSET] * len(self._detectors)
        limits = None if final else horizons(self._detectors, text, pos)
        pieces: list[str] = []
        while True:
            decision = next_decision(text, pos, self._detectors, cache, limits)
            found = decision.found
            if found is not None and self._block:
                # Certain to be a violation, settled or not: stop before releasing it.
                self._pos = pos
                self._violations.append(self._violation(found))
                self._error = GuardrailViolation("output", self.violations)
                raise self._error
            if found is None or not decision.settled:
                pieces.append(text[pos : decision.stop])
                self._pos = decision.stop
                return "".join(pieces)
            pieces.append(text[pos : found.start])
            pieces.append(found.detector.placeholder)
            self._violations.append(self._violation(found))
            pos = found.end

    def _violation(self, found: Found) -> Violation:
        detector = found.detector
        return Violation(
            category=detector.category,
            span=(self._offset + found.start, self._offset + found.end),
            sample=detector.masked(self._buffer[found.start : found.end]),
            kind=detector.kind,
        )


class BufferedStreamGuard:
    """An output guard for any `Guardrail`: releases the answer once complete and checked.

    The caller sees nothing until the model finishes, then the whole answer
    (redacted if need be) at once.
    """

    def __init__(self, guardrail: Guardrail) -> None:
        self._guardrail = guardrail
        self._pieces: list[str] = []
        self._violations: tuple[Violation, ...] = ()
        self._closed = False

    @property
    def violations(self) -> tuple[Violation, ...]:
        """What the final check found."""
        return self._violations

    def feed(self, delta: str) -> str:
        """Keep `delta`; release nothing yet.

        Raises:
            ConfigurationError: The guard was already flushed.
        """
        if self._closed:
            raise ConfigurationError("A stream guard cannot be fed after flush().")
        self._pieces.append(delta)
        return ""

    def flush(self) -> str:
        """Check the whole answer and return it, redacted if the policy says so.

        Raises:
            GuardrailViolation: The guardrail blocks the answer.
            ConfigurationError: The guard was already flushed.
        """
        if self._closed:
            raise ConfigurationError("A stream guard cannot be flushed twice.")
        self._closed = True
        text = "".join(self._pieces)
        result = self._guardrail.check_output(text)
        self._violations = result.violations
        result.raise_if_blocked()
        return result.text if result.text is not None else text
