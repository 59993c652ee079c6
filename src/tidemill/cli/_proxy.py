"""`tidemill proxy`: serve the OpenAI-compatible proxy with uvicorn.

Everything is read and checked before the server starts: the aliases and
their own upstreams (`--alias-base-url`, `--alias-key-env`), the proxy's key
(`--api-key-file`, `$TIDEMILL_PROXY_API_KEY` or `--api-key`), the CORS
origins and the file prefixes; a setup that would fail every request stops
the command with exit status 2. The proxy writes its own access line per
request (`tidemill.llm.proxy.access`), so uvicorn's, which would show query
strings, is off.
"""

from __future__ import annotations

import argparse
import copy
import os
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tidemill.errors import ConfigurationError, MissingDependencyError

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
  tidemill proxy --model-alias local=openai-compatible:llama \\
      --alias-base-url local=http://10.0.0.5:8000/v1 --alias-key-env local=LOCAL_LLM_KEY
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


def _pair(what: str) -> Callable[[str], tuple[str, str]]:
    """A parser of `NAME=<what>` option values."""

    def parse(text: str) -> tuple[str, str]:
        name, sep, value = text.partition("=")
        if not sep or not name.strip() or not value.strip():
            raise argparse.ArgumentTypeError(f"expected NAME={what}, not {text!r}")
        return name.strip(), value.strip()

    return parse


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number of seconds, not {text!r}")
    return value


def _count(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return int(text)


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
        "--alias-base-url",
        dest="alias_base_urls",
        metavar="NAME=URL",
        type=_pair("URL"),
        action="append",
        default=[],
        help="send the requests of alias NAME to URL, its own OpenAI-compatible server "
        "(repeatable)",
    )
    parser.add_argument(
        "--alias-key-env",
        dest="alias_key_envs",
        metavar="NAME=VAR",
        type=_pair("VAR"),
        action="append",
        default=[],
        help="send the key in the environment variable VAR with the requests of alias NAME "
        "(repeatable)",
    )
    keys = parser.add_mutually_exclusive_group()
    keys.add_argument(
        "--api-key-file",
        metavar="PATH",
        default=None,
        help="require clients to send the key in this file as a bearer token",
    )
    keys.add_argument(
        "--api-key",
        default=None,
        help=f"the same, with the key itself (default: ${API_KEY_ENV}); it shows in the "
        "process list, so prefer the file or the variable",
    )
    parser.add_argument(
        "--cors-origin",
        dest="cors_origins",
        metavar="ORIGIN",
        action="append",
        default=[],
        help="let web pages from ORIGIN (https://app.example, or *) call the proxy (repeatable; "
        "none by default)",
    )
    parser.add_argument(
        "--allow-file-prefix",
        dest="file_prefixes",
        metavar="PREFIX",
        action="append",
        default=[],
        help="let clients send images stored under PREFIX (s3://bucket, gs://bucket/folder/), "
        "which upstreams read with the proxy's credentials (repeatable; none by default)",
    )
    parser.add_argument(
        "--read-timeout",
        type=_positive,
        default=60.0,
        metavar="SECONDS",
        help="answer 408 to a client whose request body takes longer (default: %(default)s)",
    )
    parser.add_argument(
        "--max-body-bytes",
        type=_count,
        default=32 * 1024 * 1024,
        metavar="BYTES",
        help="answer 413 to a larger request body (default: %(default)s, 32 MiB)",
    )
    parser.add_argument(
        "--max-messages",
        type=_count,
        default=100_000,
        metavar="N",
        help="answer 400 to a request with more messages (default: %(default)s)",
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
        help="do not log a line per request (at --log-level info, each request logs one, "
        "with its model, tokens, cost and latency)",
    )
    return run


def run(args: argparse.Namespace) -> int:
    """Serve the proxy until interrupted.

    Raises:
        MissingDependencyError: Without the `proxy` extra.
        ConfigurationError: For an alias or model whose spec cannot be read
            or that could serve no request, an alias option for no alias, an
            unreadable key file, a bad origin or file prefix.
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
    router = ModelRouter(
        aliases=aliases,
        models=args.models,
        alias_options=_alias_options(aliases, args.alias_base_urls, args.alias_key_envs),
        allow_unlisted=not args.only_listed,
    )
    router.check()  # an alias that would fail every request fails now
    app = create_app(
        router,
        keepalive=args.keepalive,
        api_key=_api_key(args.api_key_file, args.api_key),
        read_timeout=args.read_timeout,
        max_body_bytes=args.max_body_bytes,
        max_messages=args.max_messages,
        cors_origins=args.cors_origins,
        allow_file_prefixes=args.file_prefixes,
        access_log=args.access_log,
    )
    from tidemill.llm.proxy._framing import http_protocol

    # uvicorn parses HTTP with httptools and runs on uvloop when they are installed (the
    # proxy extra brings both; uvloop is not on Windows). Its protocol answers a request it
    # cannot parse in OpenAI's error shape; no websockets: an upgrade is plain HTTP here.
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        http=http_protocol(),
        ws="none",
        log_level=args.log_level,
        log_config=_log_config(args.log_level),
        access_log=False,  # the proxy's own line has no query string, and says more
        lifespan="on",
    )
    return 0


def _alias_options(
    aliases: Collection[str], base_urls: list[tuple[str, str]], key_envs: list[tuple[str, str]]
) -> dict[str, dict[str, Any]]:
    """`--alias-base-url` and `--alias-key-env`, as the router's options per alias.

    Raises:
        ConfigurationError: For a name with no `--model-alias`, a base URL that
            is not an http(s) URL, or a key variable that is not set.
    """
    options: dict[str, dict[str, Any]] = {}
    for flag, pairs in (("--alias-base-url", base_urls), ("--alias-key-env", key_envs)):
        for name, _ in pairs:
            if name not in aliases:
                raise ConfigurationError(
                    f"{flag} names {name!r}, which is not an alias.",
                    hint=f"Define it with --model-alias {name}=SPEC.",
                )
    for name, url in base_urls:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(
                f"The base URL of the alias {name!r} must be an http(s) URL, not {url!r}.",
                hint=f"Write it as --alias-base-url {name}=http://host:port/v1.",
            )
        options.setdefault(name, {})["base_url"] = url
    for name, variable in key_envs:
        key = os.environ.get(variable, "").strip()
        if not key:
            raise ConfigurationError(
                f"The key of the alias {name!r} is to come from {variable}, which is not set.",
                hint=f"Set {variable} where the proxy runs, or leave out --alias-key-env.",
            )
        options.setdefault(name, {})["api_key"] = key
    return options


def _api_key(path: str | None, given: str | None) -> str | None:
    """The key clients must send: from the file, else `--api-key`, else the variable.

    Raises:
        ConfigurationError: For a key file that cannot be read or is empty.
    """
    if path is None:
        return given or os.environ.get(API_KEY_ENV, "").strip() or None
    try:
        key = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise ConfigurationError(
            f"Cannot read the proxy's key from --api-key-file {path}: {reason}.",
            hint="Give a file that holds the key on one line.",
        ) from None
    if not key:
        raise ConfigurationError(
            f"The --api-key-file {path} is empty.", hint="Write the key into it, on one line."
        )
    return key


def _log_config(level: str) -> dict[str, Any]:
    """The logging setup of uvicorn, with the proxy's loggers printed beside its own."""
    from uvicorn.config import LOGGING_CONFIG

    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["tidemill.llm.proxy"] = {
        "handlers": ["default"],
        "level": level.upper(),
        "propagate": False,
    }
    return config
