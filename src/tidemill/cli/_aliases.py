"""`--model-alias MODEL=SPEC` for `tidemill run` and `tidemill worker`: AI steps on other models.

The option is the proxy's (`tidemill proxy --model-alias`), read by the same
code (`ModelAliases`, through the engine's `aliased_models`): MODEL is the
model spec as a step writes it, `*` every model, and SPEC what serves it;
`fake` is the offline model, so `--model-alias '*=fake'` runs an AI flow
with no API key.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tidemill.cli._proxy import parse_alias
from tidemill.errors import ConfigurationError

if TYPE_CHECKING:
    from tidemill.engine import ModelResolver

__all__ = ["add_model_alias_option", "parse_model_alias", "with_model_aliases"]

_HELP = (
    "run the AI steps that name MODEL on SPEC instead (repeatable); MODEL * stands for every "
    "model without an alias of its own, and SPEC fake is the offline model, which answers "
    "the prompt back, or the simplest value of an output_schema: --model-alias '*=fake' runs "
    "a flow with no API key"
)


def parse_model_alias(text: str) -> tuple[str, str]:
    """Read `MODEL=SPEC`, both sides model specs (MODEL may be `*`).

    Raises:
        argparse.ArgumentTypeError: Without an `=`, or with a side that is no
            model spec (naming the closest providers).

    Examples:
        >>> parse_model_alias("openai:gpt-4o-mini=fake")
        ('openai:gpt-4o-mini', 'fake')
        >>> parse_model_alias("*=ollama:llama3.2")
        ('*', 'ollama:llama3.2')
    """
    from tidemill.llm import EVERY_MODEL, parse_model_spec

    name, spec = parse_alias(text)
    for side in (spec,) if name == EVERY_MODEL else (name, spec):
        try:
            parse_model_spec(side)
        except ConfigurationError as exc:
            hint = f" {exc.hint}" if exc.hint else ""
            raise argparse.ArgumentTypeError(f"{text!r}: {exc.message}{hint}") from None
    return name, spec


def add_model_alias_option(parser: argparse.ArgumentParser) -> None:
    """Add `--model-alias MODEL=SPEC` (repeatable) to a command; it lands in `model_aliases`."""
    parser.add_argument(
        "--model-alias",
        dest="model_aliases",
        metavar="MODEL=SPEC",
        type=parse_model_alias,
        action="append",
        default=[],
        help=_HELP,
    )


def with_model_aliases(resolve: ModelResolver, aliases: Sequence[tuple[str, str]]) -> ModelResolver:
    """`resolve` with `aliases` looked up first; `resolve` itself when there are none.

    Examples:
        >>> from tidemill.engine import ModelChoice, default_models
        >>> offline = with_model_aliases(default_models, [("*", "fake")])
        >>> offline(ModelChoice("anthropic:claude-sonnet-4-5")).provider
        'scripted'
    """
    from tidemill.engine import aliased_models

    return aliased_models(resolve, aliases)
