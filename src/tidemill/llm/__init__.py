"""The provider layer: one `Model` interface over every LLM vendor.

This version ships the offline `ScriptedModel`; spec strings for the real
providers parse, and their adapters come with the provider layer.
"""

from tidemill.llm._model import Model, ModelRequest, ModelSettings, ModelStreamEvent
from tidemill.llm._scripted import Answer, Handler, ScriptedModel
from tidemill.llm._spec import KNOWN_PROVIDERS, ModelSpec, parse_model_spec, resolve_model

__all__ = [
    "KNOWN_PROVIDERS",
    "Answer",
    "Handler",
    "Model",
    "ModelRequest",
    "ModelSettings",
    "ModelSpec",
    "ModelStreamEvent",
    "ScriptedModel",
    "parse_model_spec",
    "resolve_model",
]
