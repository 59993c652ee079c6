"""`RetryPolicy`: when and how long to wait before trying a failed call again."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

__all__ = ["RETRY_STATUSES", "RetryPolicy", "parse_retry_after"]

RETRY_STATUSES: frozenset[int] = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
"""HTTP statuses worth retrying: timeouts, conflicts, rate limits, server errors, overload."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retries with exponential backoff and jitter, honouring `retry-after`.

    A call is retried on a status in `statuses`, a dropped or refused
    connection, or a timeout, up to `max_retries` times, but never once
    the first byte of a stream has arrived. This policy is the only thing
    that sends a model call again: the HTTP transport repeats no POST once
    it was written (the upstream may have started on it). When the provider says how long
    to wait (`retry-after`, `retry-after-ms`) that wait is used, unless it is
    longer than `max_retry_after`, in which case the error is raised at once
    so the caller can decide.

    Examples:
        >>> policy = RetryPolicy(initial_delay=1.0, jitter=0.0)
        >>> [policy.delay(attempt) for attempt in range(4)]
        [1.0, 2.0, 4.0, 8.0]
        >>> policy.delay(0, retry_after=3.0), policy.delay(0, retry_after=600.0)
        (3.0, None)
    """

    max_retries: int = 2
    """Retries after the first attempt; `0` disables retrying."""
    initial_delay: float = 0.5
    """Seconds before the first retry, doubled for each one after."""
    max_delay: float = 8.0
    """Upper bound of the computed backoff."""
    max_retry_after: float = 60.0
    """The longest `retry-after` honoured; a longer one fails the call at once."""
    jitter: float = 0.25
    """Up to this fraction of each backoff is removed at random, to spread retries."""
    statuses: frozenset[int] = field(default=RETRY_STATUSES)
    """The HTTP statuses that are retried."""

    def delay(
        self,
        attempt: int,
        *,
        retry_after: float | None = None,
        rand: Callable[[], float] = random.random,
    ) -> float | None:
        """Seconds to wait before retry number `attempt + 1`, or `None` to give up."""
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        backoff = min(self.max_delay, self.initial_delay * (2.0**attempt))
        return backoff * (1.0 - self.jitter * rand())


def parse_retry_after(headers: Mapping[str, str], *, now: datetime | None = None) -> float | None:
    """Read how long the server asked to wait, in seconds.

    Understands `retry-after-ms` (OpenAI, Anthropic), and `retry-after` as
    seconds or as an HTTP date. Returns `None` when neither is usable.

    Examples:
        >>> parse_retry_after({"retry-after": "2"})
        2.0
        >>> now = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)
        >>> parse_retry_after({"retry-after": "Thu, 01 Jan 2026 12:00:05 GMT"}, now=now)
        5.0
    """
    lowered = {k.lower(): v for k, v in headers.items()}
    millis = _number(lowered.get("retry-after-ms"))
    if millis is not None:
        return millis / 1000.0
    value = lowered.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return seconds
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    current = now or datetime.now(UTC)
    return max(0.0, (when - current).total_seconds())


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if number != number or number < 0 or number == float("inf"):  # NaN, negative, infinite
        return None
    return number
