"""Every request body the API reads refuses fields it does not know (a 422 naming them)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from fastapi.routing import APIRoute

from tidemill.server.routes import ROUTERS
from tidemill.server.routes._body import Body


def _models(annotation: Any) -> list[type[pydantic.BaseModel]]:
    """The pydantic models in a field's annotation (list[...] and unions included)."""
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return [annotation]
    found: list[type[pydantic.BaseModel]] = []
    for argument in getattr(annotation, "__args__", ()):
        found.extend(_models(argument))
    return found


def _bodies() -> dict[str, type[pydantic.BaseModel]]:
    bodies: dict[str, type[pydantic.BaseModel]] = {}
    for router in ROUTERS:
        for route in router.routes:
            if isinstance(route, APIRoute) and route.body_field is not None:
                for model in _models(route.body_field.field_info.annotation):
                    bodies[f"{sorted(route.methods)[0]} {route.path}"] = model
    return bodies


BODIES = _bodies()


def test_the_api_reads_request_bodies() -> None:
    # The routes below are found at all (a change of FastAPI's internals would hide them).
    assert {
        "POST /api/runs",
        "POST /api/approvals/{approval_id}/approve",
        "PUT /api/items/{path:path}",
    } <= set(BODIES)


@pytest.mark.parametrize("route", sorted(BODIES))
def test_each_body_and_what_it_nests_refuses_unknown_fields(route: str) -> None:
    seen: set[type[pydantic.BaseModel]] = set()
    todo = [BODIES[route]]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        assert issubclass(model, Body), f"{route}: {model.__name__} is no Body"
        assert model.model_config.get("extra") == "forbid"
        for field in model.model_fields.values():
            todo.extend(_models(field.annotation))
