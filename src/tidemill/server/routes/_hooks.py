"""Webhooks: `POST /hooks/<path>` starts the workspace flow at that path.

The caller is a token whose scopes allow `hooks:write` on the path: one made
by `AsyncWorkspace.create_hook_token` (its only scope is that path's), or a
`*` token. The run runs as the token's user, who must be allowed to run the
flow (the viewer role on it), exactly as `POST /api/runs` would start it.

The body (a JSON object; empty: `{}`) is the flow's input, checked against
its input schema: a 422 lists the problems and starts nothing. The answer is
the run (202), or with `?wait=30s` its result (200) when it ends within the
wait (at most `MAX_WAIT`), else 202 with the run still going. A call with
an `Idempotency-Key` header already sent to this path in the last 24 hours
(`tidemill.store._hook_keys.HOOK_KEY_TTL`) answers the first call's run,
with `Idempotent-Replayed: true`, and starts none. The engine stores the key
in the transaction that creates the run, so racing calls start one run; the
header is set when the key was stored before the call came (a call racing
the first answers the first run, maybe without it).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Path, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.exceptions import HTTPException

from tidemill.engine import RunInfo
from tidemill.errors import FlowInputError, RunFailed, RunStateError, RunTimeout
from tidemill.flows import parse_duration
from tidemill.server._caller import SignedIn, requires
from tidemill.server._errors import ErrorBody, error_response
from tidemill.server._state import ServerState, state_of
from tidemill.store._hook_keys import HOOK_KEY_TTL

__all__ = ["MAX_BODY", "MAX_WAIT", "REPLAYED_HEADER", "HookRun", "router"]

MAX_WAIT = 300.0
"""The longest `?wait=` a call may ask for, in seconds (a longer one waits this long)."""

MAX_BODY = 1024 * 1024
"""The largest body a webhook takes, in bytes (a larger one is refused with 413)."""

REPLAYED_HEADER = "Idempotent-Replayed"
"""The answer's header, `true`, when an `Idempotency-Key` named an earlier call's run."""

router = APIRouter(prefix="/hooks", tags=["hooks"], dependencies=[requires("hooks")])

State = Annotated[ServerState, Depends(state_of)]
FlowPath = Annotated[str, Path(min_length=1, max_length=500, description="The flow's path.")]
Wait = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=32,
        description="Wait this long for the run to end (seconds, or 500ms, 30s, 5m; at most "
        f"{MAX_WAIT:.0f} s) and answer its result.",
    ),
]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        description="A replay of a call with this key (to this path, within "
        f"{HOOK_KEY_TTL / 3600:.0f} h) answers the first call's run and starts none.",
    ),
]

_BODY_DOC = {
    "required": False,
    "description": "The flow's input: a JSON object, checked against its input schema "
    "(no body: `{}`).",
    "content": {"application/json": {"schema": {"type": "object", "additionalProperties": True}}},
}


class HookRun(BaseModel):
    """The run a webhook started (or, replayed, the one its first call started)."""

    run_id: str
    status: str
    """`queued`, `running`, `waiting`, or how it ended: `succeeded`, `failed`, `cancelled`."""
    result: Any = None
    """The flow's result, once it succeeded (only with `?wait=`)."""
    error: dict[str, Any] | None = None
    """For a failed run: the failed `step`, the error's `type` and `message`."""

    @classmethod
    def of(cls, info: RunInfo) -> HookRun:
        return cls(run_id=info.id, status=info.status, result=info.shown_result, error=info.error)


def _invalid(where: str, message: str) -> RequestValidationError:
    return RequestValidationError([{"loc": (where,), "msg": message, "type": "value_error"}])


def _wait_seconds(wait: str | None) -> float | None:
    """The wait asked for, in seconds (capped at `MAX_WAIT`); None: answer at once."""
    if wait is None:
        return None
    try:
        return min(parse_duration(wait), MAX_WAIT)
    except ValueError as exc:
        raise _invalid("query.wait", str(exc)) from exc


async def _inputs(request: Request) -> dict[str, Any]:
    """The body as the flow's input: a JSON object (no body: `{}`)."""
    raw = bytearray()
    async for chunk in request.stream():
        raw += chunk
        if len(raw) > MAX_BODY:
            raise HTTPException(413, f"The body is larger than {MAX_BODY} bytes.")
    if not raw.strip():
        return {}
    try:
        value = json.loads(bytes(raw))
    except (ValueError, UnicodeDecodeError) as exc:
        raise _invalid("body", f"the body is not JSON ({exc})") from exc
    if not isinstance(value, dict):
        kind = "null" if value is None else type(value).__name__
        raise _invalid("body", f"the body must be a JSON object of the flow's inputs, not {kind}")
    return value


async def _waited(state: ServerState, run_id: str, seconds: float) -> RunInfo | None:
    """The run once it ended within `seconds`; None: it is still going."""
    try:
        await state.engine.wait(run_id, timeout=seconds)
    except RunTimeout:
        return None
    except (RunFailed, RunStateError):
        pass  # it ended, failed or cancelled: the answer says which
    return await state.engine.get(run_id)


@router.post(
    "/{path:path}",
    response_model=HookRun,
    status_code=202,
    summary="Start a flow by webhook",
    responses={
        200: {"model": HookRun, "description": "With `?wait=`: the run ended within the wait."},
        413: {"model": ErrorBody, "description": f"The body is larger than {MAX_BODY} bytes."},
    },
    openapi_extra={"requestBody": _BODY_DOC},
)
async def start(
    path: FlowPath,
    request: Request,
    response: Response,
    who: SignedIn,
    state: State,
    wait: Wait = None,
    idempotency_key: IdempotencyKey = None,
) -> HookRun | JSONResponse:
    """Start the flow at `path` as the token's user, with the body as its input.

    Answers 202 with the run, or with `?wait=` 200 and its result when it ends
    within the wait. Needs a token with the scope `hooks:write:<path>` (make
    one with `tidemill ws tokens create-hook <path>`), or `*`.
    """
    who.require("hooks", "write", path)
    seconds = _wait_seconds(wait)
    inputs = await _inputs(request)
    try:
        run_id, created = await state.engine.start_path(
            who.ws, path, inputs, idempotency_key=idempotency_key
        )
    except FlowInputError as exc:
        return error_response(422, type(exc).__name__, exc.message, exc.hint, problems=exc.errors)
    if not created:
        response.headers[REPLAYED_HEADER] = "true"
    info = None if seconds is None else await _waited(state, run_id, seconds)
    if info is None:
        return HookRun.of(await state.engine.get(run_id))
    response.status_code = 200
    return HookRun.of(info)
