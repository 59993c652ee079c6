"""Token usage."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["Usage"]


class Usage(BaseModel):
    """Tokens and requests spent, summed with `+`.

    Example:
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

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage.model_construct(
            requests=self.requests + other.requests,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
        )
