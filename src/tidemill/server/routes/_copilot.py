"""The copilot's chat API: a durable conversation per user and flow (scope domain `items`).

`POST /api/copilot/{path}/messages` starts a turn: a run of the copilot's
built-in flow, as the caller (`tidemill.copilot.start_turn`), whose events
stream at `GET /api/runs/{run_id}/events` and whose test runs wait as
ordinary `tool_call` approvals (`GET /api/approvals`, then
`POST /api/approvals/{id}/approve` or `reject`). `GET` reads the
conversation back; `DELETE` forgets it.

The caller must be able to read the flow's path (the flow need not exist
yet: the copilot may create it). The copilot's tools act with the caller's
rights wherever they read, so starting a turn takes a token whose scopes
reach every path for `items:write` and `runs:write` (a password session or
an unscoped token always does).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, Field

from tidemill.copilot import conversation, forget, start_turn
from tidemill.errors import ConfigurationError, ItemNotFound, PermissionDenied
from tidemill.server._caller import Caller, SignedIn, requires
from tidemill.server._state import ServerState, state_of
from tidemill.server.routes._body import Body
from tidemill.server.routes._items import checked_path
from tidemill.types import Message

__all__ = ["router"]

router = APIRouter(prefix="/api/copilot", tags=["copilot"], dependencies=[requires("items")])

State = Annotated[ServerState, Depends(state_of)]


class MessageIn(Body):
    """A message to the copilot: what to build or change."""

    message: str = Field(min_length=1, max_length=100_000)
    model: str | None = Field(default=None, min_length=1, max_length=200)
    """The model spec for this turn (`openai:gpt-4o`); None: the server's (`--copilot-model`)."""


class TurnOut(BaseModel):
    """A turn started: follow its run's events, decide its approvals."""

    run_id: str
    """The turn's run (`/api/runs/{run_id}/events`)."""
    conversation: str
    """The conversation's id (the memory the turns share)."""


class ConversationOut(BaseModel):
    """A conversation so far."""

    conversation: str
    flow: str
    messages: list[Message]
    """Each turn's messages, oldest first: the user's, the copilot's tool calls and their
    results, its answers (as `/api/runs/{id}/steps/copilot/transcript` shows them)."""
    runs: list[str]
    """The turns' runs, oldest first; the turn in flight last."""
    running: str | None
    """The turn in flight (queued, running or waiting for approvals), or None."""
    pending_approvals: list[str]
    """The approvals the turn in flight waits for (`/api/approvals/{id}/approve`)."""


async def _readable(who: Caller, path: str) -> str:
    """`path` as a flow path the caller may read, else `ItemNotFound` (404)."""
    path = checked_path(who, path, "read")
    if not await who.ws.transact(lambda ctx: ctx.rules.allows("read", path)):
        raise ItemNotFound(
            f"No flow at {path} that {who.user} may read.",
            hint="Ask an admin of its folder for access, or pick a path you may read.",
        )
    return path


def _everywhere(who: Caller) -> None:
    """Refuse a token whose scopes do not reach every path: the tools act as the user."""
    for domain in ("items", "runs"):
        reach = who.scopes is None or any(
            s.glob is None and s.allows(domain, "write") for s in who.scopes
        )
        if not reach:
            raise PermissionDenied(
                f"A copilot turn acts with your rights on every path; this token's {domain} "
                "scopes are narrower.",
                hint=f"Use a token with the scope {domain}:write (and items:write, runs:write), "
                "or sign in with your password.",
            )


@router.post("/{path:path}/messages", status_code=201, response_model=TurnOut)
async def send_message(path: str, body: MessageIn, who: SignedIn, state: State) -> TurnOut:
    """Start a turn of the caller's conversation about the flow at `path`.

    Refused (409) while the conversation's previous turn has not ended; with
    no model named here nor configured on the server (422).
    """
    path = await _readable(who, path)
    _everywhere(who)
    model = body.model or state.config.copilot_model
    if not model:
        raise ConfigurationError(
            "The copilot has no model: this request names none and the server has none.",
            hint='Send "model": "openai:gpt-4o" (or another spec), or start the server '
            "with --copilot-model SPEC (or $TIDEMILL_COPILOT_MODEL).",
        )
    run_id, cid = await start_turn(state.engine, who.ws, path, body.message, model=model)
    return TurnOut(run_id=run_id, conversation=cid)


@router.get("/{path:path}", response_model=ConversationOut)
async def read_conversation(path: str, who: SignedIn, state: State) -> ConversationOut:
    """The caller's conversation about the flow at `path` (empty before its first turn)."""
    path = await _readable(who, path)
    found = await conversation(state.engine, who.ws, path)
    return ConversationOut(
        conversation=found.id,
        flow=found.flow,
        messages=found.messages,
        runs=found.runs,
        running=found.running,
        pending_approvals=found.pending_approvals,
    )


@router.delete("/{path:path}", status_code=204)
async def forget_conversation(path: str, who: SignedIn, state: State) -> Response:
    """Forget the caller's conversation about `path`: the next turn starts a new one.

    Refused (409) while a turn of it has not ended (cancel it first).
    """
    path = await _readable(who, path)
    await forget(state.engine, who.ws, path)
    return Response(status_code=204)
