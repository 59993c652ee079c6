"""Helpers of the agent-step tests that drive runs from synchronous code (the CLI's)."""

from __future__ import annotations

import asyncio
from typing import Any

from tidemill.engine import AsyncEngine
from tidemill.llm import Model


def finish_on_worker(url: str, model: Model, run_id: str) -> Any:
    """Run an in-process worker on `url` (every step gets `model`) until the run ends."""

    async def finish() -> Any:
        engine = AsyncEngine(url)
        try:
            async with engine.worker(poll=0.1, pool_size=1, models=lambda _choice: model):
                return await engine.wait(run_id, timeout=60)
        finally:
            await engine.close()

    return asyncio.run(finish())
