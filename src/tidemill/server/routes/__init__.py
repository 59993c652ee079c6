"""The server's routes, one module per area; `ROUTERS` lists them in the order they are mounted."""

from __future__ import annotations

from fastapi import APIRouter

from tidemill.server.routes import (
    _approvals,
    _auth,
    _copilot,
    _drafts,
    _events,
    _hooks,
    _items,
    _items_sync,
    _people,
    _retention,
    _run_details,
    _run_feed,
    _runs,
    _schedules,
    _signals,
    _system,
)

__all__ = ["ROUTERS"]

ROUTERS: tuple[APIRouter, ...] = (
    _system.router,
    _auth.router,
    _items.router,
    _drafts.router,
    _items_sync.router,
    _people.router,
    _run_feed.router,  # before `_runs`: its `/api/runs/feed` is no `/{run_id}`
    _retention.router,  # likewise `/api/runs/prune`
    _runs.router,
    _run_details.router,
    _events.router,
    _approvals.router,
    _copilot.router,
    _hooks.router,
    _signals.router,
    _schedules.router,
)
