"""`UsageLimits`: budgets a run may not cross, checked before the work that would cross them."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.types import Usage

__all__ = ["LimitName", "UsageLimits"]

LimitName = str
"""`requests`, `tool_calls`, `input_tokens`, `output_tokens` or `total_tokens`."""


@dataclass(frozen=True, slots=True)
class UsageLimits:
    """What one run may spend, across approval pauses and resumes.

    `requests` and `tool_calls` are checked before the model call or the batch
    of tool calls that would cross them, so the work never happens. Token
    counts are only known once a model has answered: a turn that crosses a
    token limit ends the run before any of its tool calls runs.

    Example:
        >>> limits = UsageLimits(requests=3, total_tokens=1000)
        >>> limits.before_request(Usage(requests=3))
        ('requests', 3)
        >>> limits.before_request(Usage(requests=2)) is None
        True
    """

    requests: int | None = None
    """Model calls."""
    tool_calls: int | None = None
    """Tool calls started."""
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None

    def __post_init__(self) -> None:
        for name in ("requests", "tool_calls", "input_tokens", "output_tokens", "total_tokens"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigurationError(
                    f"The {name} limit must be at least 1, not {value}.",
                    hint="Leave a limit out (None) to have none.",
                )

    @property
    def tokens(self) -> bool:
        """Whether any token limit is set (checking one needs the run's usage)."""
        return (
            self.input_tokens is not None
            or self.output_tokens is not None
            or self.total_tokens is not None
        )

    def before_request(self, used: Usage) -> tuple[LimitName, int] | None:
        """The limit one more model call would cross, if any."""
        if self.requests is not None and used.requests + 1 > self.requests:
            return "requests", self.requests
        return None

    def before_tools(self, started: int, batch: int) -> tuple[LimitName, int] | None:
        """The limit starting `batch` more tool calls would cross, if any."""
        if self.tool_calls is not None and started + batch > self.tool_calls:
            return "tool_calls", self.tool_calls
        return None

    def after_response(self, used: Usage) -> tuple[LimitName, int] | None:
        """The token limit `used` has crossed, if any."""
        for name, value, limit in (
            ("input_tokens", used.input_tokens, self.input_tokens),
            ("output_tokens", used.output_tokens, self.output_tokens),
            ("total_tokens", used.total_tokens, self.total_tokens),
        ):
            if limit is not None and value > limit:
                return name, limit
        return None

    def describe(self) -> dict[str, JsonValue]:
        """The limits that are set."""
        return {
            name: getattr(self, name)
            for name in ("requests", "tool_calls", "input_tokens", "output_tokens", "total_tokens")
            if getattr(self, name) is not None
        }
