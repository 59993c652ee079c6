"""The OpenAPI document tells a generated client the truth: its errors, defaults and `/me`.

Every error status an operation can answer is declared with the `ErrorBody`
schema (the server never answers FastAPI's own validation shape); a request
body's defaulted fields are optional, and an answer's are required (the
server always sends them). Live, each operation's answers to an anonymous
caller, to a token of another domain and to ada are statuses it declares,
and their error bodies fit `ErrorBody`. `GET /api/auth/me` answers when the
caller's credential expires, and a cookie session's CSRF token (never a
token caller's). A schemathesis run checks generated requests' answers
against the document: their status declared, their body fitting its schema.
"""

from __future__ import annotations

import re
import time
from typing import Any

import httpx
import pytest
import schemathesis
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from tests.server.conftest import PASSWORD, Live

from tidemill.server import ErrorBody, ServerConfig, create_app

PUBLIC = {("GET", "/health"), ("POST", "/api/auth/sign-in")}
"""The operations that never read the caller."""

REF = "#/components/schemas/"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    """The app's `/openapi.json`, asked outside its lifespan (no store is opened)."""
    return TestClient(create_app(ServerConfig(worker=False))).get("/openapi.json").json()


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, op)
        for path, ops in document["paths"].items()
        for method, op in ops.items()
    ]


def schema_names(node: Any) -> set[str]:
    return set(re.findall(re.escape(REF) + r"([\w.-]+)", str(node)))


def request_schemas(document: dict[str, Any]) -> set[str]:
    """The component schemas request bodies name (and those they name)."""
    schemas = document["components"]["schemas"]
    todo = list(schema_names([op.get("requestBody") for _, _, op in operations(document)]))
    found: set[str] = set()
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo += schema_names(schemas[name])
    return found


def test_request_bodies_leave_their_defaulted_fields_optional(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    required = {name: set(schemas[name].get("required", [])) for name in schemas}
    assert required["WriteIn"] == {"kind", "value"}
    assert required["RestoreIn"] == {"version"}
    assert required["NewTokenIn"] == {"name"}
    assert not required["DeployIn"]
    asked = request_schemas(document)
    assert {"WriteIn", "RestoreIn", "DraftIn", "SubmitIn"} <= asked
    for name in asked:
        for field, spec in schemas[name].get("properties", {}).items():
            if "default" in spec:
                assert field not in required[name], f"{name}.{field} has a default"


def test_answers_require_the_fields_the_server_always_sends(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    assert "draft" in schemas["RunOut"]["required"]
    assert set(schemas["Me"]["required"]) >= {"user", "expires_at", "csrf"}
    # An error leaves out its null hint and problems.
    assert set(schemas["ErrorBody"]["required"]) == {"type", "message"}


def test_every_error_an_operation_answers_is_declared_as_an_error_body(
    document: dict[str, Any],
) -> None:
    assert "HTTPValidationError" not in document["components"]["schemas"]
    found = operations(document)
    assert len(found) > 40
    for method, path, op in found:
        responses = op["responses"]
        where = f"{method} {path}"
        for status, answer in responses.items():
            if status.startswith(("4", "5")):
                schema = answer["content"]["application/json"]["schema"]
                assert schema == {"$ref": REF + "ErrorBody"}, where
        declared = set(responses)
        if (method, path) not in PUBLIC:
            assert {"401", "403"} <= declared, where
        if "{" in path:
            assert "404" in declared, where
        if op.get("parameters") or op.get("requestBody"):
            assert "422" in declared, where
        if method != "GET" and (method, path) not in PUBLIC and "sign-out" not in path:
            assert {"400", "404", "409", "422"} <= declared, where
    sign_in = document["paths"]["/api/auth/sign-in"]["post"]["responses"]
    assert {"401", "422", "429"} <= set(sign_in)
    assert set(document["paths"]["/health"]["get"]["responses"]) == {"200"}


def is_stream(path: str) -> bool:
    """Whether the route answers server-sent events (a run's, or the runs feed)."""
    return path.endswith("/events") or path == "/api/runs/feed"


def fill(template: str) -> str:
    return re.sub(
        r"\{([^}:]+)(?::[^}]*)?\}",
        lambda m: "f/team/script" if m[1].startswith("path") else "nothing-here",
        template,
    )


def undeclared(client: httpx.Client, document: dict[str, Any], who: str) -> list[str]:
    """The answers to `client` whose status the document does not declare, or whose error
    body is not an `ErrorBody`."""
    wrong = []
    for method, path, op in operations(document):
        if is_stream(path):
            continue  # answered once the run ends (or the server stops)
        body: Any = {} if method in ("POST", "PUT", "PATCH") else None
        answer = client.request(method, fill(path), json=body)
        status = str(answer.status_code)
        if status not in op["responses"]:
            wrong.append(f"{who}: {method} {path} answered {status}: {answer.text[:200]}")
        elif answer.status_code >= 400:
            try:
                ErrorBody.model_validate(answer.json())
            except ValueError as exc:
                wrong.append(f"{who}: {method} {path} {status} is no ErrorBody: {exc}")
    return wrong


def test_what_the_server_answers_is_what_the_document_declares(live: Live) -> None:
    with live.anonymous() as client:
        document = client.get("/openapi.json").json()
        wrong = undeclared(client, document, "anonymous")
    narrow = live.token("max", "proxy:read")
    with httpx.Client(
        base_url=live.url, headers={"Authorization": f"Bearer {narrow}"}, timeout=30
    ) as client:
        wrong += undeclared(client, document, "a proxy:read token")
    with live.client("max") as client:
        wrong += undeclared(client, document, "max")
    with live.client("ada") as client:
        wrong += undeclared(client, document, "ada")
    assert not wrong, "\n".join(wrong)


CHECKS = [status_code_conformance, response_schema_conformance, content_type_conformance]


def conformance(operation: Any, url: str, token: str, failures: list[str]) -> None:
    """Call `operation` with generated cases; note each answer the document does not describe."""
    headers = {"Authorization": f"Bearer {token}"}

    @settings(
        max_examples=6,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    @given(case=operation.as_strategy())
    def call(case: schemathesis.Case) -> None:
        response = case.call(base_url=url, headers=headers)
        try:
            case.validate_response(response, checks=CHECKS)
        except BaseException as exc:  # schemathesis raises a group of its failures
            failures.append(f"{case.method} {case.formatted_path}: {str(exc)[:300]}")

    call()


def test_generated_requests_are_answered_as_the_document_declares(live: Live) -> None:
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json")
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        if not is_stream(operation.path):
            # A token per operation: DELETE /api/auth/tokens/{id} may revoke one.
            conformance(operation, live.url, live.token("ada"), failures)
    assert not failures, "\n".join(failures[:10])


def test_me_answers_a_token_callers_expiry_and_no_csrf_token(live: Live) -> None:
    with live.client("olga") as client:
        me = client.get("/api/auth/me").json()
        never = client.post("/api/auth/tokens", json={"name": "ci", "expires_in_days": None})
    assert me["via"] == "token" and me["csrf"] is None
    assert me["expires_at"] == pytest.approx(time.time() + 90 * 86400, abs=600)
    assert never.status_code == 201, never.text
    headers = {"Authorization": f"Bearer {never.json()['token']}"}
    with httpx.Client(base_url=live.url, headers=headers, timeout=30) as client:
        forever = client.get("/api/auth/me").json()
    assert (forever["expires_at"], forever["csrf"]) == (None, None)


def test_me_answers_a_cookie_sessions_csrf_token_and_expiry(live: Live) -> None:
    live.ws.set_password("olga", PASSWORD)
    with live.anonymous() as client:
        session = client.post("/api/auth/sign-in", json={"user": "olga", "password": PASSWORD})
        assert session.status_code == 200, session.text
        client.cookies.pop("tidemill_csrf")  # a page that has only the session cookie
        me = client.get("/api/auth/me").json()
        assert me["csrf"] is None  # the server keeps only the token's digest
        client.cookies.set("tidemill_csrf", session.json()["csrf"])
        me = client.get("/api/auth/me").json()
        assert (me["via"], me["csrf"]) == ("session", session.json()["csrf"])
        assert me["expires_at"] == pytest.approx(session.json()["expires_at"], abs=5)
        # What /me answers is the token the session's writes take.
        made = client.post(
            "/api/auth/tokens", json={"name": "x"}, headers={"X-CSRF-Token": me["csrf"]}
        )
        assert made.status_code == 201, made.text
        client.cookies.set("tidemill_csrf", "forged")
        assert client.get("/api/auth/me").json()["csrf"] is None
        client.cookies.set("tidemill_csrf", session.json()["csrf"])
        # A token sent with the session's cookies is the caller: no CSRF token for it.
        mine = {"Authorization": f"Bearer {live.tokens['max']}"}
        me = client.get("/api/auth/me", headers=mine).json()
        assert (me["user"], me["via"], me["csrf"]) == ("max", "token", None)
        # The session's own text sent as a bearer token is no cookie session.
        text = client.cookies["tidemill_session"]
        me = client.get("/api/auth/me", headers={"Authorization": f"Bearer {text}"}).json()
        assert (me["via"], me["csrf"]) == ("session", None)
