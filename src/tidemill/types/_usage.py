"""Token usage."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict

__all__ = ["Usage"]


class Usage(BaseModel):
    """Tokens and requests spent, summed with `+`.

    A request whose provider sent no usage counts in `requests` and in
    `unreported_requests`, with no tokens: they are unknown, not zero.

    Examples:
        >>> total = Usage(input_tokens=10, output_tokens=2, requests=1) + Usage(
        ...     input_tokens=5, output_tokens=1, requests=1
        ... )
        >>> total.total_tokens, total.requests
        (18, 2)
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    requests: int = 0
    """Model calls made."""
    input_tokens: int = 0
    """Prompt tokens, including cached ones."""
    output_tokens: int = 0
    """Completion tokens, including reasoning tokens."""
    cache_read_tokens: int = 0
    """Prompt tokens served from the provider's cache."""
    cache_write_tokens: int = 0
    """Prompt tokens written to the provider's cache."""
    reasoning_tokens: int = 0
    """Output tokens spent on reasoning."""
    cost_usd: float = 0.0
    """What the priced requests cost, in US dollars."""
    unpriced_requests: int = 0
    """Requests whose price is not known, so `cost_usd` leaves them out."""
    unreported_requests: int = 0
    """Requests whose provider reported no usage, so the token counts leave them out."""

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage.total((self, other))

    @classmethod
    def total(cls, usages: Iterable[Usage]) -> Usage:
        """Sum many usages at once.

        Examples:
            >>> Usage.total([Usage(requests=1), Usage(requests=2)]).requests
            3
        """
        requests = input_tokens = output_tokens = cache_read = cache_write = reasoning = 0
        unpriced = unreported = 0
        cost = 0.0
        for usage in usages:
            requests += usage.requests
            input_tokens += usage.input_tokens
            output_tokens += usage.output_tokens
            cache_read += usage.cache_read_tokens
            cache_write += usage.cache_write_tokens
            reasoning += usage.reasoning_tokens
            cost += usage.cost_usd
            unpriced += usage.unpriced_requests
            unreported += usage.unreported_requests
        return cls(
            requests=requests,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cache_read_tokens=cache_read,
            cache_write_tokens=cache_write,
            reasoning_tokens=reasoning,
            cost_usd=cost,
            unpriced_requests=unpriced,
            unreported_requests=unreported,
        )
