"""JSON Schema rewritten for Gemini function declarations."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from tidemill.llm.google._schema import gemini_parameters, gemini_schema


def test_rejected_keywords_are_dropped_but_properties_keep_their_names() -> None:
    schema: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "Args",
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "title": {"type": "string", "title": "Title", "default": "x", "examples": ["y"]},
            "default": {"type": "integer", "minimum": 1, "exclusiveMaximum": 9},
            "additionalProperties": {"type": "boolean"},
        },
        "required": ["title", "default", "not-a-property"],
    }
    assert gemini_schema(schema) == {
        "type": "OBJECT",
        "properties": {
            "title": {"type": "STRING"},
            "default": {"type": "INTEGER", "minimum": 1},
            "additionalProperties": {"type": "BOOLEAN"},
        },
        "required": ["title", "default"],
    }


def test_refs_are_inlined_and_recursion_is_cut() -> None:
    schema: dict[str, Any] = {
        "$defs": {
            "Node": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                },
            },
            "Point": {"type": "object", "properties": {"x": {"type": "number"}}},
        },
        "type": "object",
        "properties": {
            "tree": {"$ref": "#/$defs/Node", "description": "The root."},
            "where": {"$ref": "#/definitions/Point"},
            "dangling": {"$ref": "#/$defs/Missing"},
        },
    }
    assert gemini_schema(schema) == {
        "type": "OBJECT",
        "properties": {
            "tree": {
                "type": "OBJECT",
                "description": "The root.",
                "properties": {
                    "name": {"type": "STRING"},
                    "children": {"type": "ARRAY", "items": {"type": "OBJECT"}},
                },
            },
            "where": {"type": "OBJECT", "properties": {"x": {"type": "NUMBER"}}},
            "dangling": {"type": "OBJECT"},
        },
    }


def test_nullable_unions_type_lists_and_consts() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "a": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "A."},
            "b": {"type": ["string", "null"], "format": "date-time"},
            "c": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
            "d": {"type": ["string", "integer"]},
            "e": {"const": "fixed"},
            "f": {"enum": [1, 2]},
            "g": {"enum": ["x", None]},
            "h": {"type": "string", "format": "uri"},
            "i": {"allOf": [{"$ref": "#/$defs/I"}], "description": "Wrapped."},
            "j": {"type": "null"},
        },
        "$defs": {"I": {"type": "integer", "format": "int64"}},
    }
    assert gemini_schema(schema)["properties"] == {
        "a": {"type": "INTEGER", "description": "A.", "nullable": True},
        "b": {"type": "STRING", "format": "date-time", "nullable": True},
        "c": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]},
        "d": {"anyOf": [{"type": "STRING"}, {"type": "INTEGER"}]},
        "e": {"type": "STRING", "enum": ["fixed"]},
        "f": {},
        "g": {"type": "STRING", "enum": ["x"], "nullable": True},
        "h": {"type": "STRING"},
        "i": {"type": "INTEGER", "format": "int64", "description": "Wrapped."},
        "j": {"type": "STRING", "nullable": True},
    }


def test_a_pydantic_model_schema() -> None:
    class Address(BaseModel):
        street: str
        zip: str | None = None

    class Order(BaseModel):
        """An order."""

        items: list[str] = Field(min_length=1)
        ship_to: Address
        speed: Literal["slow", "fast"] = "slow"
        notes: dict[str, str] = {}

    assert gemini_schema(Order.model_json_schema()) == {
        "type": "OBJECT",
        "description": "An order.",
        "properties": {
            "items": {"type": "ARRAY", "items": {"type": "STRING"}, "minItems": 1},
            "ship_to": {
                "type": "OBJECT",
                "properties": {
                    "street": {"type": "STRING"},
                    "zip": {"type": "STRING", "nullable": True},
                },
                "required": ["street"],
            },
            "speed": {"type": "STRING", "enum": ["slow", "fast"]},
            "notes": {"type": "OBJECT"},
        },
        "required": ["items", "ship_to"],
    }


def test_a_tool_without_arguments_declares_no_parameters() -> None:
    assert gemini_parameters({"type": "object", "properties": {}}) is None
    assert gemini_parameters({"type": "object", "additionalProperties": False}) is None
    assert gemini_parameters({"type": "object", "properties": {"q": {"type": "string"}}}) == {
        "type": "OBJECT",
        "properties": {"q": {"type": "STRING"}},
    }
