"""A worker process for the reliability tests: `python reliability_worker.py URL [options]`.

It runs `AsyncEngine(URL).worker(...)` until SIGTERM (then finishes the jobs
in hand and exits 0), printing `ready <pid>` once the worker is working, and
logging to stderr at INFO. The tests SIGKILL and SIGSTOP it at random moments;
it keeps nothing another worker needs.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

from tidemill.engine import AsyncEngine


async def serve(url: str, concurrency: int, lease: float, poll: float) -> None:
    """Work on the store at `url` until SIGTERM."""
    engine = AsyncEngine(url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    try:
        async with engine.worker(concurrency=concurrency, lease=lease, poll=poll):
            print(f"ready {os.getpid()}", flush=True)
            await stop.wait()
    finally:
        await engine.close()


def main() -> None:
    """Parse the arguments and serve."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--lease", type=float, default=1.0)
    parser.add_argument("--poll", type=float, default=0.1)
    args = parser.parse_args()
    # Lease losses and refused late writes are logged at INFO: the tests read them.
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    asyncio.run(serve(args.url, args.concurrency, args.lease, args.poll))


if __name__ == "__main__":
    main()
