"""`tidemill proxy`: serve the OpenAI-compatible proxy with uvicorn."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

from tidemill.errors import MissingDependencyError

__all__ = ["API_KEY_ENV", "parse_alias", "register", "run"]

API_KEY_ENV = "TIDEMILL_PROXY_API_KEY"
"""The environment variable holding the key clients must send, when one is required."""

_EPILOG = """\
Name models in requests as provider:model (anthropic:claude-sonnet-4-5,
mistral:mistral-large-latest, gpt-4o-mini) or by an alias. Upstream keys
come from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY, ...).

examples:
  tidemill proxy --port 4000 --model-alias claude=anthropic:claude-sonnet-4-5
  then point any OpenAI client at http://127.0.0.1:4000/v1
  tidemill proxy --model-alias test=fake   (offline: echoes the last user message)
"""


def parse_alias(text: str) -> tuple[str, str]:
    """Read `NAME=SPEC`.

    Raises:
        argparse.ArgumentTypeError: Without an `=`, or with an empty side.

    Examples:
        >>> parse_alias("claude=anthropic:claude-sonnet-4-5")
        ('claude', 'anthropic:claude-sonnet-4-5')
    """
    name, sep, spec = text.partition("=")
    if not sep or not name.strip() or not spec.strip():
        raise argparse.ArgumentTypeError(
            f"expected NAME=SPEC, e.g. claude=anthropic:claude-sonnet-4-5, not {text!r}"
        )
    return name.strip(), spec.strip()


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text!r}")
    return value


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> Callable[[argparse.Namespace], int]:
    """Add the `proxy` command; return the function that runs it."""
    parser = subparsers.add_parser(
        "proxy",
        help="serve any model behind an OpenAI-compatible API",
        description="Serve an OpenAI-compatible Chat Completions API over every Tidemill\n"
        "model adapter. Needs the proxy extra: pip install 'tidemill[proxy]'",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: %(default)s)"
    )
    parser.add_argument(
        "--port", type=int, default=4000, help="port to bind (default: %(default)s)"
    )
    parser.add_argument(
        "--model-alias",
        dest="aliases",
        metavar="NAME=SPEC",
        type=parse_alias,
        action="append",
        default=[],
        help="let clients call SPEC by NAME (repeatable); NAME * stands for every name "
        "without an alias of its own, and SPEC fake is the offline model, which echoes",
    )
    parser.add_argument(
        "--model",
        dest="models",
        metavar="SPEC",
        action="append",
        default=[],
        help="list SPEC at /v1/models (repeatable; aliases are listed too)",
    )
    parser.add_argument(
        "--only-listed",
        action="store_true",
        help="serve only aliases and --model names, not any provider:model",
    )
    parser.add_argument(
        "--keepalive",
        type=_positive,
        default=15.0,
        metavar="SECONDS",
        help="send an SSE keep-alive comment after this much upstream silence "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"require clients to send this key as a bearer token (default: ${API_KEY_ENV})",
    )
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["critical", "error", "warning", "info", "debug"],
        help="uvicorn's log level (default: %(default)s)",
    )
    parser.add_argument(
        "--no-access-log",
        dest="access_log",
        action="store_false",
        help="do not log a line per request (at --log-level info, each request logs one)",
    )
    return run


def run(args: argparse.Namespace) -> int:
    """Serve the proxy until interrupted.

    Raises:
        MissingDependencyError: Without the `proxy` extra.
        ConfigurationError: For an alias or model whose spec cannot be read.
    """
    try:
        import uvicorn
    except ImportError as exc:
        raise MissingDependencyError(
            "uvicorn", extra="proxy", feature="The `tidemill proxy` command"
        ) from exc
    from tidemill.llm import ModelAliases, parse_model_spec
    from tidemill.llm.proxy import ModelRouter, create_app

    aliases = ModelAliases(args.aliases)
    aliases.check()  # a typo fails now, with the closest names, not on first use
    for spec in args.models:
        parse_model_spec(spec)
    router = ModelRouter(aliases=aliases, models=args.models, allow_unlisted=not args.only_listed)
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    app = create_app(router, keepalive=args.keepalive, api_key=api_key)
    # uvicorn parses HTTP with httptools and runs on uvloop when they are installed (the
    # proxy extra brings both; uvloop is not on Windows).
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        access_log=args.access_log,
        lifespan="on",
    )
    return 0
