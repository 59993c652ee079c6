"""The kinds of component an `AgentBuilder` fills, each as a `Slot` of `_components`.

Each slot pairs what counts as a component of its kind with Tidemill's own
resolver for it (`resolve_model`, `resolve_memory`, ...), so that the
builder resolves every method's spec the same way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from tidemill.agents._components import Slot
from tidemill.agents.checkpoint import Checkpointer, resolve_checkpointer
from tidemill.agents.guardrails import Guardrail, resolve_guardrail
from tidemill.agents.memory import Memory, resolve_memory
from tidemill.agents.tracing import Tracer, resolve_tracer
from tidemill.errors import ConfigurationError
from tidemill.llm import Model, resolve_model
from tidemill.tools import Tool

__all__ = [
    "CHECKPOINTER",
    "DEFAULT_MODEL_VARIABLE",
    "GUARDRAIL",
    "MEMORY",
    "MODEL",
    "TOOL",
    "TRACER",
    "default_model_spec",
]

DEFAULT_MODEL_VARIABLE = "TIDEMILL_DEFAULT_MODEL"
"""The environment variable naming the model of an agent whose `.llm()` was never called."""


def default_model_spec() -> str:
    """The model spec in `TIDEMILL_DEFAULT_MODEL`.

    Raises:
        ConfigurationError: When the variable is unset or empty.
    """
    spec = os.environ.get(DEFAULT_MODEL_VARIABLE, "").strip()
    if not spec:
        raise ConfigurationError(
            "The agent has no model.",
            hint="Choose one with .llm('provider:model'), or .llm('fake') offline, or set "
            f"{DEFAULT_MODEL_VARIABLE} (e.g. {DEFAULT_MODEL_VARIABLE}=openai:gpt-4o-mini).",
        )
    return spec


def _model(spec: object = None, /, **config: Any) -> Model:
    if isinstance(spec, str | Model):
        return resolve_model(spec, **config)
    if isinstance(spec, Sequence) and spec:
        return resolve_model(list(spec), **config)
    raise ConfigurationError(
        f"Cannot use {type(spec).__name__} as a model.",
        hint="Pass 'provider:model' ('openai:gpt-4o-mini'), 'fake', a Model, a list of "
        "them to fall back through, or a factory returning a Model.",
    )


def _tool(spec: object, /) -> object:
    if isinstance(spec, str):
        raise ConfigurationError(
            f"No tool is named {spec!r}.",
            hint=f"Bind one on the builder with .bind({spec!r}, my_tool), or install a "
            "plugin with an entry point of that name in the 'tidemill.tools' group.",
        )
    return spec


def _is_tool(value: object) -> bool:
    return isinstance(value, Tool) or callable(value)


MODEL: Slot[Model] = Slot("model", lambda x: isinstance(x, Model), _model, model_suffix=True)
MEMORY: Slot[Memory] = Slot("memory", lambda x: isinstance(x, Memory), resolve_memory)
GUARDRAIL: Slot[Guardrail] = Slot(
    "guardrail", lambda x: isinstance(x, Guardrail), resolve_guardrail
)
TRACER: Slot[Tracer] = Slot("tracer", lambda x: isinstance(x, Tracer), resolve_tracer)
CHECKPOINTER: Slot[Checkpointer] = Slot(
    "checkpointer", lambda x: isinstance(x, Checkpointer), resolve_checkpointer
)
TOOL: Slot[object] = Slot("tool", _is_tool, _tool, factories=False)
