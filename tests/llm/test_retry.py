from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tidemill.llm import RetryPolicy
from tidemill.llm._retry import parse_retry_after

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after": "3"}, 3.0),
        ({"Retry-After": "0.5"}, 0.5),
        ({"retry-after-ms": "250", "retry-after": "9"}, 0.25),
        ({"retry-after": "Sun, 01 Mar 2026 12:00:07 GMT"}, 7.0),
        ({"retry-after": "Sun, 01 Mar 2026 11:59:00 GMT"}, 0.0),  # in the past: now
        ({"retry-after": "soon"}, None),
        ({"retry-after": "-1"}, None),
        ({"retry-after": "nan"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=NOW) == expected


def test_backoff_doubles_up_to_the_cap_with_jitter_below_it() -> None:
    policy = RetryPolicy(initial_delay=0.5, max_delay=3.0, jitter=0.5)
    assert [policy.delay(n, rand=lambda: 0.0) for n in range(4)] == [0.5, 1.0, 2.0, 3.0]
    assert policy.delay(1, rand=lambda: 1.0) == 0.5
    delays = [policy.delay(1) for _ in range(100)]
    assert all(d is not None and 0.5 <= d <= 1.0 for d in delays)


def test_retry_after_is_used_as_is_unless_too_long() -> None:
    policy = RetryPolicy(max_retry_after=30)
    assert policy.delay(5, retry_after=12.0) == 12.0
    assert policy.delay(0, retry_after=31.0) is None
