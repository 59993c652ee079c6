"""`tidemill ws agent save|unlink`: save an inline ai_agent step as an agent, or unlink one."""

from __future__ import annotations

import argparse

from tidemill.cli._ws_people import Actions, add_ws_options, handler, open_workspace

__all__ = ["register_agents"]


def register_agents(actions: Actions) -> None:
    """Add `ws agent save` and `ws agent unlink`."""
    agent = actions.add_parser(
        "agent", help="save an ai_agent step as a reusable agent, or unlink one",
        description="Turn an inline ai_agent step into a linked agent, and back.",
    ).add_subparsers(dest="ws_action", metavar="ACTION", required=True)  # fmt: skip
    sub = handler(agent.add_parser("save", help="save an inline step as an agent"), _save)
    sub.description = "Write the step's agent at AGENT_PATH and make the step link it."
    sub.add_argument("flow", metavar="FLOW_PATH", help="the flow's path")
    sub.add_argument("step", metavar="STEP_ID", help="the ai_agent step's id")
    sub.add_argument("agent", metavar="AGENT_PATH", help="where to write the agent")
    _common(sub)
    sub = handler(agent.add_parser("unlink", help="fork a linked step back inline"), _unlink)
    sub.description = "Replace a linked ai_agent step by the inline configuration it runs."
    sub.add_argument("flow", metavar="FLOW_PATH", help="the flow's path")
    sub.add_argument("step", metavar="STEP_ID", help="the ai_agent step's id")
    _common(sub)


def _common(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--draft", action="store_true", help="change your draft of the flow")
    sub.add_argument("-m", "--message", metavar="TEXT", default="", help="why; kept with it")
    add_ws_options(sub)


def _save(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        item = ws.save_step_as_agent(
            args.flow, args.step, args.agent, draft=args.draft, message=args.message
        )
        flow = "draft" if args.draft else f"version {ws.get(args.flow).version}"
    print(f"wrote agent {item.path} as version {item.version}")
    print(f"step {args.step} of {args.flow} now links {item.path} ({flow})")
    return 0


def _unlink(args: argparse.Namespace) -> int:
    with open_workspace(args) as ws:
        item = ws.unlink_step(args.flow, args.step, draft=args.draft, message=args.message)
    where = "draft" if args.draft else f"version {item.version}"
    print(f"unlinked step {args.step} of {item.path} ({where})")
    return 0
