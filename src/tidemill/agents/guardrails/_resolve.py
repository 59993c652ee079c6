"""Guardrail specs (`"rules"`, `"nemo"`, an object) made into guardrails, for `guardrails()`."""

from __future__ import annotations

import difflib
from typing import Any

from tidemill.agents.guardrails._base import Guardrail
from tidemill.agents.guardrails._nemo import NemoGuardrail
from tidemill.agents.guardrails._rules import RuleGuardrail
from tidemill.errors import ConfigurationError

__all__ = ["resolve_guardrail"]

_NAMES = ("rules", "nemo")


def resolve_guardrail(spec: str | Guardrail | None = None, /, **config: Any) -> Guardrail:
    """Build a guardrail from a name; pass a guardrail object through.

    `None` or `"rules"` builds a `RuleGuardrail` with `config` as its options
    (`pii=`, `secrets=`, `on_violation=`, `categories=`, `patterns=`, `detectors=`).
    `"nemo"` builds a `NemoGuardrail` (the `nemo` extra) from `config=` (a
    rails directory or a `RailsConfig`) or `yaml=`/`colang=`, with `actions=`,
    `llm=` and `on_violation=`.

    Raises:
        ConfigurationError: For an unknown name or option, or options given with an object.
        MissingDependencyError: For `"nemo"` without the `nemo` extra.

    Examples:
        >>> resolve_guardrail(on_violation="block").describe()["on_violation"]
        'block'
        >>> resolve_guardrail("rule")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: Unknown guardrail 'rule'. Hint: Did you mean ...
    """
    if spec is not None and not isinstance(spec, str):
        if not isinstance(spec, Guardrail):
            raise ConfigurationError(
                f"Cannot use {type(spec).__name__} as a guardrail.",
                hint="Pass 'rules', 'nemo', or an object with check_input, check_output "
                "and describe.",
            )
        if config:
            raise ConfigurationError(
                "Options were given with a guardrail object.",
                hint="Configure the object itself, or pass 'rules' with the options.",
            )
        return spec
    name = spec or "rules"
    if name == "rules":
        try:
            return RuleGuardrail(**config)
        except TypeError as exc:
            raise ConfigurationError(f"Bad option for the 'rules' guardrail: {exc}") from None
    if name == "nemo":
        try:
            return NemoGuardrail(**config)
        except TypeError as exc:
            raise ConfigurationError(
                f"Bad option for the 'nemo' guardrail: {exc}",
                hint="It takes config= (a rails directory or RailsConfig), or yaml= and "
                "colang=, and actions=, llm=, on_violation=.",
            ) from None
    close = difflib.get_close_matches(name, _NAMES, n=1)
    raise ConfigurationError(
        f"Unknown guardrail {name!r}.",
        hint=(f"Did you mean {close[0]!r}? " if close else "")
        + "Use 'rules', 'nemo' (NeMo Guardrails, the 'nemo' extra) or pass a Guardrail object.",
    )
