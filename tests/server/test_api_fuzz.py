"""A schema-driven fuzz of the whole API (schemathesis, from its OpenAPI document): no 500s.

Every operation of `/openapi.json` is called with inputs generated from its
schema, as ada (the admin, so that as much as possible gets past sign-in),
and must never answer a server error. Generation is derandomized, so a run
is repeatable.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from tests.server.conftest import Live

pytestmark = pytest.mark.timeout(600)

EXAMPLES = 12
"""Generated cases per operation."""


def fuzz(operation: Any, url: str, token: str, statuses: list[int], failures: list[str]) -> None:
    """Call `operation` with `EXAMPLES` generated cases, noting each status and each 5xx."""
    headers = {"Authorization": f"Bearer {token}"}

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    @given(case=operation.as_strategy())
    def call(case: schemathesis.Case) -> None:
        response = case.call(base_url=url, headers=headers)
        statuses.append(response.status_code)
        if response.status_code >= 500:
            failures.append(
                f"{case.method} {case.formatted_path} {case.query} {case.body!r}: "
                f"{response.status_code} {response.text[:300]}"
            )

    call()


def test_no_operation_answers_a_server_error(live: Live) -> None:
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    failures: list[str] = []
    statuses: list[int] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 5
    for operation in operations:
        # A token per operation: fuzzing DELETE /api/auth/tokens/{id} may revoke one.
        fuzz(operation, live.url, live.token("ada"), statuses, failures)
    assert not failures, "\n".join(failures[:20])
    # It did call the API, and got past sign-in for most calls.
    assert len(statuses) >= len(operations)
    assert sum(status != 401 for status in statuses) > len(statuses) // 2
