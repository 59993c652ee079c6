"""Plain functions that test flows call in-process (`script: {function: stepfns:add}`)."""

from __future__ import annotations

from tidemill.engine import current_step


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def whoami() -> dict[str, object]:
    """The step's identity, as an in-process function sees it."""
    info = current_step()
    assert info is not None
    return {"step": info.step_id, "attempt": info.attempt, "key": info.idempotency_key}


async def lookup(order: str, tenant: str = "-") -> dict[str, object]:
    """Look up an order (an async agent tool called in the worker).

    Args:
        order: The order's id.
    """
    info = current_step()
    assert info is not None
    return {"order": order, "tenant": tenant, "key": info.idempotency_key}


def refuse(order: str) -> str:
    """Always fails."""
    raise PermissionError(f"no access to {order}")
