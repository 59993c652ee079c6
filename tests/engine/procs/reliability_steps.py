"""In-process step functions for the reliability tests (`stepfns`-style, workers import them)."""

from __future__ import annotations

import asyncio
import os
import random

from tidemill.engine import current_step


def mark(path: str) -> None:
    """Append "<idempotency key> <attempt> <pid>" to `path` in one write (a countable effect)."""
    info = current_step()
    assert info is not None
    line = f"{info.idempotency_key} {info.attempt} {os.getpid()}\n".encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


async def effect(path: str, n: int) -> int:
    """Record the side effect, pause 10-150 ms without blocking the worker, return `n`."""
    mark(path)
    await asyncio.sleep(random.uniform(0.01, 0.15))
    return n


def noop(**_: object) -> None:
    """Do nothing: the cheapest step there is."""
