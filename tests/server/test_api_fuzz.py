"""A schema-driven fuzz of the whole API (schemathesis, from its OpenAPI document): no 500s.

Every operation of `/openapi.json` is called with inputs generated from its
schema, as ada (the admin, so that as much as possible gets past sign-in),
and must never answer a server error. Generation is derandomized, so a run
is repeatable. A test proves the harness reports a route that fails with an
unhandled exception.
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from fastapi import APIRouter
from hypothesis import HealthCheck, given, settings
from tests.server.conftest import Live, serving

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


def fuzz_failures(live: Live, keep: str | None = None) -> tuple[list[str], list[int]]:
    """Fuzz every operation of the served app (`keep`: only those of that path).

    The 5xx answers as lines, and every status seen.
    """
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    failures: list[str] = []
    statuses: list[int] = []
    operations = [result.ok() for result in schema.get_all_operations()]
    # The runs feed answers a stream that lasts until the server stops (its own tests check
    # its parameters).
    operations = [op for op in operations if op.path != "/api/runs/feed"]
    if keep is not None:
        operations = [op for op in operations if op.path == keep]
    assert len(operations) >= (1 if keep else 5)
    for operation in operations:
        # A token per operation: fuzzing DELETE /api/auth/tokens/{id} may revoke one.
        fuzz(operation, live.url, live.token("ada"), statuses, failures)
    assert len(statuses) >= len(operations)  # it did call the API
    return failures, statuses


def test_no_operation_answers_a_server_error(live: Live) -> None:
    failures, statuses = fuzz_failures(live)
    assert not failures, "\n".join(failures[:20])
    # It got past sign-in for most calls.
    assert sum(status != 401 for status in statuses) > len(statuses) // 2


def test_the_fuzz_reports_a_route_that_fails(
    server_store: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not server_store.startswith("sqlite"):
        pytest.skip("the harness is the same on each backend")
    rogue = APIRouter(prefix="/api/rogue")

    @rogue.get("/boom/{n}")
    async def boom(n: int) -> dict[str, int]:
        raise RuntimeError(f"a bug of the server: {n}")

    with serving(server_store, monkeypatch, routers=[rogue]) as served:
        failures, statuses = fuzz_failures(served, keep="/api/rogue/boom/{n}")
    assert failures and 500 in statuses, statuses
    assert all(line.startswith("GET /api/rogue/boom/") for line in failures)
