"""The proxy's usage plane: one `tm_proxy_usage` row per call, with its user and token.

A run's model calls are recorded in `tm_usage`, keyed by run and step; a
call through the server's proxy (`/v1`) has no run, so it has a table of its
own, keyed by workspace and user. `record_call` writes a row once the answer
has gone out (a stream's, once its last event has); `proxy_calls` reads them
back, newest first.

Examples:
    >>> call = ProxyCall("default", "ada", "tok1", "f/ai/openai:gpt-4o-mini", 200, at=0.0)
    >>> call.input_tokens, call.resource
    (0, None)
"""

from __future__ import annotations

from dataclasses import KW_ONLY, astuple, dataclass, fields

from tidemill.store import Store, Tx

__all__ = ["ProxyCall", "proxy_calls", "record_call"]


@dataclass(frozen=True, slots=True)
class ProxyCall:
    """One call through the proxy, as recorded."""

    workspace: str
    user: str
    """The token's user."""
    token_id: str | None
    """The token's id (`tm_pat_<id>_...`); never its secret."""
    model: str
    """The `model` the client asked for (a resource path, `path:model` or an alias)."""
    status: int | None
    """The HTTP status answered; None when the client left first."""
    _: KW_ONLY
    resource: str | None = None
    """The provider resource that served it (None: refused before one was found)."""
    provider: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    """None when the price is not known."""
    latency_ms: float = 0.0
    at: float
    call_id: int | None = None
    """The row's id, once recorded."""


_COLUMNS = (
    "workspace",
    "user_name",
    "token_id",
    "model",
    "status",
    "resource",
    "provider",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "latency_ms",
    "at",
)


async def record_call(store: Store, call: ProxyCall) -> None:
    """Write `call` as a row of `tm_proxy_usage`."""
    values = astuple(call)[: len(_COLUMNS)]
    marks = ", ".join("?" for _ in _COLUMNS)

    def put(tx: Tx) -> None:
        tx.execute(f"INSERT INTO tm_proxy_usage ({', '.join(_COLUMNS)}) VALUES ({marks})", values)

    await store.transact(put)


async def proxy_calls(
    store: Store, workspace: str, *, user: str | None = None, limit: int = 100
) -> list[ProxyCall]:
    """The calls recorded in `workspace` (of `user` only, when given), newest first."""
    where = "workspace = ?" + (" AND user_name = ?" if user is not None else "")
    params = (workspace, user) if user is not None else (workspace,)

    def read(tx: Tx) -> list[ProxyCall]:
        rows = tx.all(
            f"SELECT {', '.join(_COLUMNS)}, id FROM tm_proxy_usage WHERE {where} "
            "ORDER BY id DESC LIMIT ?",
            (*params, limit),
        )
        names = [f.name for f in fields(ProxyCall)]
        return [ProxyCall(**dict(zip(names, row, strict=True))) for row in rows]

    calls: list[ProxyCall] = await store.transact(read)
    return calls
