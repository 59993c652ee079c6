"""Health, Prometheus metrics and the audit log."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response
from pydantic import BaseModel

from tidemill._version import __version__
from tidemill.errors import PermissionDenied
from tidemill.server._caller import SignedIn, requires
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._params import After

__all__ = ["router"]

router = APIRouter(tags=["system"])


class Health(BaseModel):
    """The server is up, and its store answers."""

    status: str
    version: str
    store: str
    """`sqlite` or `postgres`."""


class AuditOut(BaseModel):
    """One audited action."""

    id: int
    at: float
    actor: str
    action: str
    path: str | None
    details: dict[str, Any]


@router.get("/health", response_model=Health)
async def health(state: Annotated[ServerState, Depends(state_of)]) -> Health:
    """Whether the server and its store answer (no sign-in needed; says nothing else)."""
    await state.engine.store.transact(lambda tx: tx.one("SELECT 1"))
    return Health(status="ok", version=__version__, store=state.engine.store.dialect)


@router.get("/metrics", response_class=Response, dependencies=[requires("audit")])
async def metrics(who: SignedIn, state: Annotated[ServerState, Depends(state_of)]) -> Response:
    """Prometheus metrics of the server's worker (workspace admins; scope `audit:read`)."""
    principal = await who.ws.whoami()
    if not principal.is_admin:
        raise PermissionDenied(
            f"{principal.name} may not read the metrics: it needs a workspace admin.",
            hint="Scrape with an admin's token (scope audit:read).",
        )
    if state.metrics is None:
        body = b"# no metrics: install tidemill[metrics] (prometheus-client)\n"
    else:
        from prometheus_client import generate_latest

        body = generate_latest(state.metrics.registry)
    return Response(body, media_type="text/plain; version=0.0.4; charset=utf-8")


@router.get(
    "/api/audit", response_model=list[AuditOut], tags=["people"], dependencies=[requires("audit")]
)
async def audit(
    who: SignedIn,
    actor: str | None = None,
    action: str | None = None,
    path: str | None = None,
    after: After = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[AuditOut]:
    """Audit rows, oldest first, after the id `after` (workspace admins; scope `audit:read`)."""
    rows = await who.ws.audit(actor=actor, action=action, path=path, after=after, limit=limit)
    return [AuditOut(**{k: getattr(r, k) for k in AuditOut.model_fields}) for r in rows]
