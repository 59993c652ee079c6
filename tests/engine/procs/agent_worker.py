"""An agent worker process for test_ai_agent: `python agent_worker.py URL REQUESTS_LOG`.

It runs `AsyncEngine(URL).worker(...)` with a short lease until SIGTERM,
printing `ready <pid>` once working. Its model is `answer` (below): it reads
the conversation and calls the tool `first`, then `second`, then answers;
each request it gets is appended to REQUESTS_LOG as one JSON line. The tests
SIGKILL it while `second` runs, during a model call, or while the step waits
for an approval.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
from pathlib import Path

from tidemill.engine import AsyncEngine
from tidemill.engine._models import ModelChoice
from tidemill.llm import Model, ModelRequest, ScriptedModel
from tidemill.types import Message, ToolCall


def answer(request: ModelRequest) -> Message:
    """The next turn, from the tool results the conversation holds."""
    results = [m.content for m in request.messages if m.role == "tool"]
    if not results:
        return Message.assistant("", tool_calls=(ToolCall(name="first", arguments={"n": 1}),))
    if len(results) == 1:
        return Message.assistant("", tool_calls=(ToolCall(name="second", arguments={"n": 2}),))
    return Message.assistant("done: " + " ".join(results))


def logged(path: Path) -> ScriptedModel:
    """The model `answer`, logging each request as `{"pid", "tool_results"}`.

    With `AGENT_TEST_HANG_MODEL=N` in the environment, the request that sees N
    tool results hangs (the test kills the worker during that model call).
    """

    async def handler(request: ModelRequest) -> Message:
        seen = sum(1 for m in request.messages if m.role == "tool")
        with path.open("a") as log:
            log.write(json.dumps({"pid": os.getpid(), "tool_results": seen}) + "\n")
        if os.environ.get("AGENT_TEST_HANG_MODEL") == str(seen):
            await asyncio.sleep(60)
        return answer(request)

    return ScriptedModel(handler=handler)


async def serve(url: str, log: Path) -> None:
    """Work on the store at `url` until SIGTERM."""
    model = logged(log)

    def models(_choice: ModelChoice) -> Model:
        return model

    engine = AsyncEngine(url)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    try:
        async with engine.worker(concurrency=1, lease=1.0, poll=0.1, pool_size=1, models=models):
            print(f"ready {os.getpid()}", flush=True)
            await stop.wait()
    finally:
        await engine.close()


def main() -> None:
    """Parse the arguments and serve."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("log", type=Path)
    args = parser.parse_args()
    asyncio.run(serve(args.url, args.log))


if __name__ == "__main__":
    main()
