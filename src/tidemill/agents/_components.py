"""`Components`: how a builder turns a name, a factory or an object into a component.

A builder method such as `.memory(spec, **config)` takes three kinds of
`spec`. An object of the right kind is used as it is. A factory (a class,
or any callable that is not itself such an object) is called with the
options. A name is looked up in this order:

1. the names bound on this builder with `AgentBuilder.bind(name, factory)`;
2. Tidemill's own names (`"window"`, `"sqlite"`, `"openai:gpt-4o"`, ...);
3. the entry points of installed plugins, in the group of the component's
   kind (`tidemill.memories`, ...), read only when the name is none of
   Tidemill's own, so plugins cost nothing until one is asked for.

Nothing here is global: the bindings belong to one builder, and entry
points are read from the installed packages each time they are needed.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Generic, TypeVar

from tidemill.errors import ConfigurationError

__all__ = ["GROUPS", "Components", "Slot"]

T = TypeVar("T")

GROUPS: dict[str, str] = {
    "model": "tidemill.models",
    "memory": "tidemill.memories",
    "guardrail": "tidemill.guardrails",
    "tracer": "tidemill.tracers",
    "checkpointer": "tidemill.checkpointers",
    "tool": "tidemill.tools",
    "MCP client": "tidemill.mcp_clients",
}
"""The entry point group a plugin registers each kind of component under."""


@dataclass(frozen=True, slots=True)
class Slot(Generic[T]):
    """One kind of component a builder method fills.

    Args:
        noun: What the component is called in messages (`"memory"`).
        accepts: Whether an object already is such a component.
        builtin: Tidemill's own resolver: `builtin(spec, **config)`.
        factories: Whether a callable that is not a component is a factory
            (`False` for tools, where a plain function is the tool itself).
        model_suffix: Whether `"name:rest"` names `name` with `model="rest"`,
            as model specs do.
        article: `"a"` or `"an"`, as the noun takes.
    """

    noun: str
    accepts: Callable[[object], bool]
    builtin: Callable[..., T]
    factories: bool = True
    model_suffix: bool = False
    article: str = "a"

    @property
    def group(self) -> str:
        """The entry point group of plugins for this kind."""
        return GROUPS[self.noun]


@dataclass(frozen=True, slots=True)
class Made(Generic[T]):
    """A component, and whether the builder made it (and so must close it)."""

    component: T
    owned: bool


class Components:
    """The names one builder binds, and the resolution of specs into components.

    Examples:
        >>> from tidemill.agents.memory import WindowMemory, resolve_memory
        >>> slot = Slot("memory", lambda x: isinstance(x, WindowMemory), resolve_memory)
        >>> components = Components()
        >>> components.bind("short", lambda: WindowMemory(size=2))
        >>> components.make(slot, "short", {}).component.describe()
        {'kind': 'window', 'size': 2}
        >>> components.make(slot, WindowMemory, {"size": 3}).component.describe()
        {'kind': 'window', 'size': 3}
    """

    def __init__(self) -> None:
        self._bound: dict[str, object] = {}

    def bind(self, name: str, factory: object) -> None:
        """Make `name` resolve to `factory`: a callable returning the component, or a tool.

        Raises:
            ConfigurationError: For an empty name, or a name bound already.
        """
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(
                f"A bound name must be a non-empty string, not {name!r}.",
                hint="Write it as bind('mycorp', factory).",
            )
        if name in self._bound:
            raise ConfigurationError(
                f"The name {name!r} is bound already on this builder.",
                hint="Bind each name once; use another name for a second component.",
            )
        if not callable(factory):
            raise ConfigurationError(
                f"Cannot bind {name!r} to {type(factory).__name__}: it is not callable.",
                hint="Bind a factory (a class or function returning the component) or a tool.",
            )
        self._bound[name] = factory

    def make(self, slot: Slot[T], spec: object, config: dict[str, Any]) -> Made[T]:
        """Resolve `spec` with its options into a component of `slot`'s kind.

        Raises:
            ConfigurationError: For an unknown name, bad options, or a factory
                that returns something of the wrong kind.
        """
        if isinstance(spec, str):
            return self._named(slot, spec, config)
        if slot.factories and callable(spec) and (isinstance(spec, type) or not slot.accepts(spec)):
            return Made(self._call(slot, spec, config, label=_label(spec)), owned=True)
        return Made(slot.builtin(spec, **config), owned=spec is None)

    def names(self) -> list[str]:
        """The names bound on this builder, sorted."""
        return sorted(self._bound)

    def _named(self, slot: Slot[T], spec: str, config: dict[str, Any]) -> Made[T]:
        name, split = _split(slot, spec, config)
        if spec in self._bound:
            return Made(self._produce(slot, self._bound[spec], config, label=repr(spec)), True)
        if name in self._bound:
            return Made(self._produce(slot, self._bound[name], split, label=repr(name)), True)
        try:
            return Made(slot.builtin(spec, **config), owned=True)
        except ConfigurationError as exc:
            plugin = _entry_point(slot.group, name)
            if plugin is None:
                close = difflib.get_close_matches(name, self._bound, n=1)
                if close:
                    exc.hint = f"Did you mean {close[0]!r}, bound on this builder? " + (
                        exc.hint or ""
                    )
                raise
        return Made(self._produce(slot, _load(plugin, slot), split, label=repr(name)), True)

    def _produce(self, slot: Slot[T], bound: object, config: dict[str, Any], *, label: str) -> T:
        if not slot.factories:  # the bound object is the component itself (a tool)
            return slot.builtin(bound)
        return self._call(slot, bound, config, label=label)

    def _call(self, slot: Slot[T], factory: object, config: dict[str, Any], *, label: str) -> T:
        if not callable(factory):  # pragma: no cover - bind() and _load() check
            raise ConfigurationError(f"The {slot.noun} factory {label} is not callable.")
        try:
            inspect.signature(factory).bind(**config)
        except TypeError as exc:
            raise ConfigurationError(
                f"Bad option for the {slot.noun} factory {label}: {exc}",
                hint="Pass only the keyword arguments the factory takes.",
                context={"options": sorted(config)},
            ) from None
        except ValueError:  # no signature to check (some builtins); call it anyway
            pass
        made = factory(**config)
        if not slot.accepts(made):
            raise ConfigurationError(
                f"The {slot.noun} factory {label} returned {type(made).__name__}, "
                f"which is not {slot.article} {slot.noun}.",
                hint=f"Return {slot.article} {slot.noun} object from the factory.",
            )
        return slot.builtin(made)


def _split(slot: Slot[Any], spec: str, config: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The name a spec looks up, and the options with `model=` taken from `name:model`."""
    if not slot.model_suffix:
        return spec, config
    name, sep, rest = spec.partition(":")
    if not sep or not rest:
        return spec, config
    return name, {"model": rest, **config}


def _entry_point(group: str, name: str) -> EntryPoint | None:
    for point in entry_points(group=group):
        if point.name == name:
            return point
    return None


def _load(point: EntryPoint, slot: Slot[Any]) -> object:
    """The object an entry point names, or a ConfigurationError naming the plugin."""
    package = point.dist.name if point.dist is not None else "an installed package"
    try:
        loaded: object = point.load()
    except Exception as exc:
        raise ConfigurationError(
            f"The {slot.noun} plugin {point.name!r} from {package} could not be loaded: "
            f"{type(exc).__name__}: {exc}",
            hint=f"Its entry point is {point.value!r} in the {slot.group!r} group; "
            "reinstall or fix that package.",
            context={"plugin": point.name, "group": slot.group, "value": point.value},
        ) from exc
    if not callable(loaded):
        raise ConfigurationError(
            f"The {slot.noun} plugin {point.name!r} from {package} is not callable.",
            hint=f"Its entry point {point.value!r} must name a factory (a class or function).",
        )
    return loaded


def _label(factory: object) -> str:
    return getattr(factory, "__qualname__", None) or type(factory).__name__
