"""A flow as a durable run: parallel checks, a loop, and a person's approval.

Runs on the embedded defaults: the store is a SQLite file (.tidemill/demo.db)
and the worker runs in this process. The run pauses at its approval step; the
demo shows the pause, approves it (as a person would from another terminal
with `tidemill approvals approve ID`), and prints every step and the result.

    make demo        # or: python examples/flow_demo.py
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from tidemill.engine import Engine
from tidemill.flows import Flow

FLOW = Path(__file__).parent / "flows" / "order_review.yaml"
ORDER = {
    "customer": "ada@example.com",
    "lines": [
        {"sku": "grinder", "qty": 1},
        {"sku": "kettle", "qty": 2},
        {"sku": "scale", "qty": 3},
    ],
}


def main() -> None:
    flow = Flow.load(FLOW)
    print(f"Flow {flow.name!r}: {flow.summary}")
    with Engine("sqlite:///.tidemill/demo.db") as engine, engine.worker(concurrency=4):
        run = engine.submit(flow, ORDER)
        print(f"Submitted run {run.id}; the worker in this process picks it up.\n")
        while not engine.approvals(run.id):
            time.sleep(0.05)
        approval = engine.approvals(run.id)[0]
        print(f"The run is {run.status}: step {approval.step_id!r} asks {approval.message!r}")
        print(f"  (from a terminal: tidemill approvals approve {approval.id} --db {engine.url})")
        engine.approve(approval.id, actor="demo", comment="looks right")
        print("Approved by 'demo'.\n")
        result = run.wait(timeout=60)
        print("Steps (every attempt, nested ones included):")
        for job in engine.jobs(run.id):
            took = (job.finished_at or 0) - (job.started_at or job.created_at)
            print(f"  {job.step_id:8} {job.status:10} {took * 1000:7.1f} ms")
        print("\nWhat the scripts printed:")
        for log in engine.logs(run.id):
            print(f"  [{log.stream}] {log.body.rstrip()}")
        print(f"\nResult ({run.status}):")
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
