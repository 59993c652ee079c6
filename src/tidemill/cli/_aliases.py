"""How `tidemill run` and `tidemill worker` choose the models of AI steps.

`--model-alias MODEL=SPEC` is the proxy's option (`tidemill proxy
--model-alias`), read by the same code (`ModelAliases`, through the engine's
`aliased_models`): MODEL is the model spec as a step writes it, `*` every
model, and SPEC what serves it; `fake` is the offline model, so
`--model-alias '*=fake'` runs an AI flow with no API key.

`--models MODULE:FUNCTION` hands every AI step's model to a function of the
user's, a `ModelResolver` (`ModelChoice` in, `Model` out): a scripted model
for a test, a model behind a gateway of one's own. Aliases apply first.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tidemill.cli._proxy import parse_alias
from tidemill.errors import ConfigurationError

if TYPE_CHECKING:
    from tidemill.engine import ModelResolver

__all__ = [
    "ModelOptions",
    "add_model_alias_option",
    "load_resolver",
    "parse_model_alias",
    "with_model_aliases",
]

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
    """Add `--model-alias MODEL=SPEC` (repeatable) and `--models MODULE:FUNCTION` to a command.

    They land in `model_aliases` and `models`; `ModelOptions.of` reads both.
    """
    parser.add_argument(
        "--models",
        metavar="MODULE:FUNCTION",
        type=_resolver_reference,
        default=None,
        help="build every AI step's model with FUNCTION of MODULE (importable from here), "
        "called with the step's ModelChoice; --model-alias applies first",
    )
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


def _resolver_reference(text: str) -> str:
    """`--models`: checked when the command line is read, before anything is stored."""
    try:
        load_resolver(text)
    except ConfigurationError as exc:
        hint = f" {exc.hint}" if exc.hint else ""
        message = exc.message.removeprefix("--models ")
        raise argparse.ArgumentTypeError(f"{message}{hint}") from None
    return text


def load_resolver(reference: str) -> ModelResolver:
    """Import the `ModelResolver` named `MODULE:FUNCTION`.

    Raises:
        ConfigurationError: The reference is not `MODULE:FUNCTION`, the module
            cannot be imported, or it has no such callable.

    Examples:
        >>> load_resolver("tidemill.engine:default_models").__name__
        'default_models'
        >>> load_resolver("tidemill.engine")
        Traceback (most recent call last):
        ...
        tidemill.errors.ConfigurationError: --models takes MODULE:FUNCTION, not 'tidemill.engi...
    """
    module_name, sep, name = reference.partition(":")
    if not sep or not module_name.strip() or not name.strip():
        raise ConfigurationError(
            f"--models takes MODULE:FUNCTION, not {reference!r}.",
            hint="Name a function that takes a ModelChoice and returns a Model, "
            "as --models my_models:resolve.",
        )
    if os.getcwd() not in sys.path:  # as `python -m` would: modules of the directory it runs in
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name.strip())
    except ImportError as exc:
        raise ConfigurationError(
            f"--models {reference}: the module {module_name!r} cannot be imported ({exc}).",
            hint="Run the command in the module's directory, or add it to PYTHONPATH.",
        ) from None
    resolver: Any = getattr(module, name.strip(), None)
    if not callable(resolver):
        raise ConfigurationError(
            f"--models {reference}: {module_name!r} has no function {name!r}.",
            hint="Name a function that takes a ModelChoice and returns a Model.",
        )
    return resolver  # type: ignore[no-any-return]


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """A command's `--models` and `--model-alias`, to apply to a worker's resolver.

    Examples:
        >>> from tidemill.engine import ModelChoice, default_models
        >>> options = ModelOptions(aliases=(("*", "fake"),))
        >>> options.apply(default_models)(ModelChoice("openai:gpt-4o")).provider
        'scripted'
    """

    aliases: tuple[tuple[str, str], ...] = ()
    """`--model-alias` pairs, in order."""
    resolver: str | None = None
    """`--models MODULE:FUNCTION`, or None for the worker's own models."""

    @classmethod
    def of(cls, args: argparse.Namespace) -> ModelOptions:
        """The options a command was given (none when it has no such options)."""
        return cls(tuple(getattr(args, "model_aliases", ())), getattr(args, "models", None))

    def apply(self, resolve: ModelResolver) -> ModelResolver:
        """`resolve`, or the `--models` function, behind the aliases.

        Raises:
            ConfigurationError: See `load_resolver`.
        """
        base = load_resolver(self.resolver) if self.resolver is not None else resolve
        return with_model_aliases(base, self.aliases)
