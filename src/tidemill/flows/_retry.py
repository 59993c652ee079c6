"""`Retry`: how often a failed step is tried again, and how long to wait between tries."""

from __future__ import annotations

from pydantic import Field

from tidemill.flows._base import FlowModel

__all__ = ["Retry"]


class Retry(FlowModel):
    """Retries of a failed step, with exponential backoff.

    The wait before retry `n` (1-based) is `backoff * multiplier ** (n - 1)`
    seconds, at most `max_backoff`.

    Examples:
        >>> retry = Retry(attempts=3, backoff=1.5, multiplier=2, max_backoff=5)
        >>> [retry.delay(n) for n in (1, 2, 3)]
        [1.5, 3.0, 5.0]
    """

    attempts: int = Field(default=0, ge=0)
    """Retries after the first try (0: the step runs once)."""

    backoff: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    """Seconds to wait before the first retry."""

    multiplier: float = Field(default=2.0, ge=1, allow_inf_nan=False)
    """Each wait is this many times the one before."""

    max_backoff: float = Field(default=300.0, ge=0, allow_inf_nan=False)
    """The longest wait, in seconds."""

    def delay(self, retry_number: int) -> float:
        """Return the seconds to wait before retry `retry_number` (1 for the first retry).

        Raises:
            ValueError: When `retry_number` is less than 1.
        """
        if retry_number < 1:
            raise ValueError(f"retry_number starts at 1, got {retry_number}")
        try:
            wait = self.backoff * self.multiplier ** (retry_number - 1)
        except OverflowError:
            return self.max_backoff
        return min(wait, self.max_backoff)
