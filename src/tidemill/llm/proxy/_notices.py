"""What the operator must hear once: a provider the proxy cannot serve, and what to set.

A client asking for a provider the proxy has no key or base URL for is told
only that the model is not served here (404); the operator reads, in the
proxy's log, which variable is missing. That line is written once per
provider and reason for the life of the process, not once per request, so a
client cannot flood the log with it.
"""

from __future__ import annotations

import logging
import threading

from tidemill.errors import ConfigurationError

__all__ = ["forget", "note_unconfigured", "setup_detail", "unconfigured_provider"]

_logger = logging.getLogger("tidemill.llm.proxy")
_noted: set[tuple[str, str]] = set()
_lock = threading.Lock()


def unconfigured_provider(error: BaseException) -> str | None:
    """The provider `error` says is not set up (a missing key or base URL), else None.

    Setup errors carry the variable that would fix them in their context
    (`{"provider": "groq", "env": "GROQ_API_KEY"}`); a bad option or a
    request the model cannot take carries none.

    Examples:
        >>> from tidemill.errors import MissingCredentialsError
        >>> unconfigured_provider(MissingCredentialsError(
        ...     "No API key.", context={"provider": "groq", "env": "GROQ_API_KEY"}))
        'groq'
        >>> unconfigured_provider(ConfigurationError("DeepSeek takes text only.")) is None
        True
    """
    if not isinstance(error, ConfigurationError):
        return None
    provider, variable = error.context.get("provider"), error.context.get("env")
    if isinstance(provider, str) and isinstance(variable, str) and variable:
        return provider
    return None


def setup_detail(error: ConfigurationError) -> str:
    """What a setup error says, with the variable that would fix it.

    Examples:
        >>> from tidemill.errors import MissingCredentialsError
        >>> setup_detail(MissingCredentialsError(
        ...     "No AWS credentials.", context={"provider": "bedrock", "env": "AWS_ACCESS_KEY_ID"}))
        'No AWS credentials. Set AWS_ACCESS_KEY_ID where the proxy runs.'
    """
    detail = str(error)
    variable = error.context.get("env")
    if isinstance(variable, str) and variable and variable not in detail:
        detail += f" Set {variable} where the proxy runs."
    return detail


def note_unconfigured(provider: str, detail: str) -> None:
    """Tell the operator, once per provider and `detail`, why `provider` is not served."""
    with _lock:
        if (provider, detail) in _noted:
            return
        _noted.add((provider, detail))
    _logger.warning("The proxy does not serve %r models: %s", provider, detail)


def forget() -> None:
    """Forget what was noted, so each test starts afresh."""
    with _lock:
        _noted.clear()
