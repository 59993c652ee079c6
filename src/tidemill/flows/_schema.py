"""The JSON Schema of flow files, for editors and other tools."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from tidemill.flows._node import ID_PATTERN

__all__ = ["SCHEMA_DIALECT", "SCHEMA_TITLE", "flow_json_schema"]

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema version of the flow schema."""

SCHEMA_TITLE = "Tidemill flow"
"""The flow schema's title."""

_SHORTHANDS: dict[str, dict[str, Any]] = {
    "script": {"type": "string", "description": "Inline code: short for {code: ...}."},
    "flow": {"type": "string", "description": "A flow file: short for {path: ...}."},
    "identity": {"const": True, "description": "Same as identity: {}."},
}


def _first_paragraphs(schema: Any) -> None:
    """Keep only the summary of each model's description (drop docstring examples)."""
    if isinstance(schema, dict):
        description = schema.get("description")
        if isinstance(description, str) and "\n\n" in description:
            schema["description"] = description.split("\n\n", 1)[0]
        for value in schema.values():
            _first_paragraphs(value)
    elif isinstance(schema, list):
        for value in schema:
            _first_paragraphs(value)


def flow_json_schema(flow_model: type[BaseModel]) -> dict[str, Any]:
    """Return the JSON Schema of flow files (`Flow.json_schema`), given the `Flow` model.

    It is pydantic's schema of `Flow` with the shorthands added: `script:
    "code"`, `flow: file.yaml`, `identity: true` (and `identity:`, which
    is null), and durations as strings.

    Examples:
        >>> from tidemill.flows import Flow
        >>> schema = flow_json_schema(Flow)
        >>> schema["title"], schema["$defs"]["Step"]["properties"]["id"]["pattern"]
        ('Tidemill flow', '^[A-Za-z_][A-Za-z0-9_-]*$')
    """
    schema = flow_model.model_json_schema()
    _first_paragraphs(schema)
    step = schema["$defs"]["Step"]["properties"]
    for kind, shorthand in _SHORTHANDS.items():
        step[kind]["anyOf"].insert(-1, shorthand)
    step["id"]["pattern"] = ID_PATTERN
    return {
        "$schema": SCHEMA_DIALECT,
        "title": SCHEMA_TITLE,
        "description": "A Tidemill flow: steps to run, in YAML or JSON.",
        **schema,
    }
