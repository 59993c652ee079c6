"""Guardrails: keep personal data and credentials out of prompts and answers.

`RuleGuardrail` finds emails, phone numbers, card numbers, IBANs, SSNs, IP
addresses and API keys with dependency-free rules, and redacts them
(`[EMAIL]`) or blocks the run (`GuardrailViolation`). Any object with
`check_input`, `check_output` and `describe` is a `Guardrail`.
`NemoGuardrail` (the `nemo` extra) runs the input and output rails of an
NVIDIA NeMo Guardrails configuration instead.

For streamed answers, `guard_stream(guardrail)` returns an `OutputGuard`
that releases text only once it cannot become part of a match.

Examples:
    >>> from tidemill.agents.guardrails import RuleGuardrail
    >>> guard = RuleGuardrail(on_violation="redact")
    >>> result = guard.check_output("Reach me at ann@example.org or +1 415 555 0100.")
    >>> result.text
    'Reach me at [EMAIL] or [PHONE].'
    >>> [(v.category, v.sample) for v in result.violations]
    [('email', 'a***@e***.org'), ('phone', '+* *** *** **00')]
"""

from tidemill.agents.guardrails._base import (
    Action,
    Guardrail,
    GuardrailResult,
    OnViolation,
    Side,
    Violation,
    ViolationKind,
)
from tidemill.agents.guardrails._detectors import BUILTIN_DETECTORS, Detector, builtin_categories
from tidemill.agents.guardrails._nemo import NemoGuardrail
from tidemill.agents.guardrails._resolve import resolve_guardrail
from tidemill.agents.guardrails._rules import RuleGuardrail
from tidemill.agents.guardrails._stream import (
    BufferedStreamGuard,
    OutputGuard,
    StreamGuard,
    StreamingGuardrail,
    guard_stream,
)
from tidemill.errors import GuardrailViolation

__all__ = [
    "BUILTIN_DETECTORS",
    "Action",
    "BufferedStreamGuard",
    "Detector",
    "Guardrail",
    "GuardrailResult",
    "GuardrailViolation",
    "NemoGuardrail",
    "OnViolation",
    "OutputGuard",
    "RuleGuardrail",
    "Side",
    "StreamGuard",
    "StreamingGuardrail",
    "Violation",
    "ViolationKind",
    "builtin_categories",
    "guard_stream",
    "resolve_guardrail",
]
