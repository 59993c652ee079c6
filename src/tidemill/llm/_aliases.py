"""`ModelAliases`: names that stand for models, as the proxy and the engine's workers read them.

The proxy (`ModelRouter`) looks up the `model` of each request here; a worker
started with `--model-alias` looks up the model each AI step names. Both
follow the same rule: a name's own alias, else the `*` alias, else no alias.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from tidemill.errors import ConfigurationError
from tidemill.llm._model import Model
from tidemill.llm._spec import parse_model_spec

__all__ = ["EVERY_MODEL", "ModelAliases"]

EVERY_MODEL = "*"
"""The alias name that stands for every name without an alias of its own."""


class ModelAliases(Mapping[str, str | Model]):
    """Names mapped to the spec string (or `Model` object) that serves them.

    `*` stands for every name that has no alias of its own, so
    `{"*": "fake"}` serves every model offline. Use it wherever a model is
    named by someone else (a client of the proxy, a flow's step) and you
    decide what serves it.

    Args:
        aliases: `{name: spec or Model}`, or `(name, spec)` pairs; a later
            pair for the same name wins.

    Raises:
        ConfigurationError: For an empty name or spec, or a target that is
            neither a string nor a `Model`.

    Examples:
        >>> aliases = ModelAliases({"openai:gpt-4o-mini": "fake", "*": "ollama:llama3.2"})
        >>> aliases.target("openai:gpt-4o-mini"), aliases.target("anthropic:claude-sonnet-4-5")
        ('fake', 'ollama:llama3.2')
        >>> ModelAliases({"fast": "openai:gpt-4o-mini"}).target("slow") is None
        True
    """

    def __init__(
        self, aliases: Mapping[str, str | Model] | Iterable[tuple[str, str | Model]] = ()
    ) -> None:
        pairs = aliases.items() if isinstance(aliases, Mapping) else aliases
        self._targets: dict[str, str | Model] = {}
        for name, target in pairs:
            if not isinstance(name, str) or not name.strip():
                raise ConfigurationError(
                    f"A model alias needs a name, not {name!r}.",
                    hint="Write each alias as NAME=SPEC, e.g. claude=anthropic:claude-sonnet-4-5.",
                )
            if isinstance(target, str) and target.strip():
                self._targets[name.strip()] = target.strip()
            elif isinstance(target, Model):
                self._targets[name.strip()] = target
            else:
                raise ConfigurationError(
                    f"The model alias {name!r} names no model: {target!r}.",
                    hint="Give a spec string ('openai:gpt-4o-mini', 'fake') or a Model object.",
                )

    def target(self, name: str) -> str | Model | None:
        """What serves `name`: its own alias, else the `*` alias, else None (no alias)."""
        found = self._targets.get(name)
        if found is None:
            found = self._targets.get(EVERY_MODEL)
        return found

    def names(self) -> list[str]:
        """The names with an alias of their own, sorted (`*` is not one)."""
        return sorted(name for name in self._targets if name != EVERY_MODEL)

    def check(self) -> None:
        """Read every target spec string, so a typo fails now and not on first use.

        Raises:
            ConfigurationError: For a target that is no spec string, naming
                the alias and the closest providers.

        Examples:
            >>> ModelAliases({"fast": "opnai:gpt-4o-mini"}).check()
            Traceback (most recent call last):
            ...
            tidemill.errors.ConfigurationError: The model alias 'fast': Unknown model ...
        """
        for name, target in self._targets.items():
            if isinstance(target, str):
                try:
                    parse_model_spec(target)
                except ConfigurationError as exc:
                    raise ConfigurationError(
                        f"The model alias {name!r}: {exc.message}",
                        hint=exc.hint,
                        context={"alias": name, **exc.context},
                    ) from None

    def __getitem__(self, name: str) -> str | Model:
        return self._targets[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __len__(self) -> int:
        return len(self._targets)

    def __repr__(self) -> str:
        return f"ModelAliases({self._targets!r})"
