"""`tidemill flow`: check a flow file, or print the JSON Schema of the format."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tidemill.flows import Flow

__all__ = ["count_steps", "register", "run"]


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `flow` command and its actions; return the function that runs them."""
    parser = subparsers.add_parser(
        "flow",
        help="validate a flow file, or print the flow format's JSON Schema",
        description="Work with flow files.",
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    validate = actions.add_parser(
        "validate",
        help="check a flow file; list every problem",
        description="Check a flow file without running it: its shape, and what its steps "
        "use (model specs, prompt placeholders, the inputs of scripts' main). Exits with "
        "status 2 and lists every problem when it is not valid.",
    )
    validate.add_argument("file", metavar="FILE", help="the flow file (YAML or JSON)")
    validate.add_argument(
        "--json",
        action="store_true",
        help="print the verdict as JSON: file, valid, problems (each with step, field and "
        "message) and, when valid, steps (how many, nested ones included)",
    )
    actions.add_parser(
        "schema",
        help="print the JSON Schema of flow files",
        description="Print the JSON Schema of flow files (for editors and linters).",
    )
    return run


def run(args: argparse.Namespace) -> int:
    """Run one `flow` action; return its exit status."""
    if args.action == "schema":
        from tidemill.flows import Flow

        print(json.dumps(Flow.json_schema(), indent=2))
        return 0
    from tidemill.cli._run import load_flow
    from tidemill.errors import FlowValidationError

    try:
        flow = load_flow(args.file)
    except FlowValidationError as exc:
        if not args.json:
            raise
        problems = [{"step": p.step, "field": p.field, "message": p.message} for p in exc.problems]
        print(json.dumps({"file": args.file, "valid": False, "problems": problems}, indent=2))
        return 2
    total = count_steps(flow)
    if args.json:
        report = {"file": args.file, "valid": True, "problems": [], "steps": total}
        print(json.dumps(report, indent=2))
        return 0
    top = len(flow.steps)
    nested = f", {total} in all" if total != top else ""
    name = f"flow {flow.name!r}" if flow.name else "the flow"
    print(f"OK: {args.file}: {name} has {top} step{'s' if top != 1 else ''}{nested}")
    return 0


def count_steps(flow: Flow) -> int:
    """How many steps a flow has, counting those inside branches and loops.

    Examples:
        >>> from tidemill.flows import Flow
        >>> inner = [{"id": "x", "identity": {}}]
        >>> loop = {"id": "each", "for_each": {"items": [1], "steps": inner}}
        >>> count_steps(Flow.from_dict({"steps": [loop, {"id": "y", "identity": {}}]}))
        3
    """
    return sum(1 for _ in flow.walk())
