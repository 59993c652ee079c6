"""The JSON Schema of flow files: the committed copy is current, and examples fit it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tidemill.flows import Flow

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "schemas" / "flow.schema.json"
EXAMPLES = Path(__file__).parent / "examples"
EXAMPLE_FILES = sorted(p for p in EXAMPLES.iterdir() if p.suffix in {".yaml", ".json"})
REGENERATE = (
    '.venv/bin/python -c "import json; from tidemill.flows import Flow; '
    "open('schemas/flow.schema.json', 'w').write("
    "json.dumps(Flow.json_schema(), indent=2, sort_keys=True) + '\\n')\""
)


def validator() -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(Flow.json_schema())


def schema_errors(document: Any) -> list[str]:
    return [error.message for error in validator().iter_errors(document)]


def test_the_committed_schema_file_is_current() -> None:
    expected = json.dumps(Flow.json_schema(), indent=2, sort_keys=True) + "\n"
    assert SCHEMA_FILE.read_text() == expected, f"Regenerate it with: {REGENERATE}"


def test_the_schema_is_a_valid_2020_12_schema() -> None:
    schema = Flow.json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["title"] == "Tidemill flow"
    jsonschema.Draft202012Validator.check_schema(schema)


def test_descriptions_are_summaries_without_doctests() -> None:
    assert ">>>" not in SCHEMA_FILE.read_text()


@pytest.mark.parametrize("path", EXAMPLE_FILES, ids=lambda p: p.name)
def test_every_example_file_fits_the_schema(path: Path) -> None:
    document = yaml.safe_load(path.read_text())
    assert schema_errors(document) == []
    flow = Flow.load(path)
    assert schema_errors(flow.model_dump(mode="json")) == []


def test_there_are_examples() -> None:
    assert {p.name for p in EXAMPLE_FILES} >= {"triage.yaml", "child.yaml", "refund.json"}


@pytest.mark.parametrize(
    "step",
    [
        {"id": "a", "script": "def main(): pass"},
        {"id": "a", "flow": "child.yaml"},
        {"id": "a", "identity": None},
        {"id": "a", "identity": True},
        {"id": "a", "identity": {}, "timeout": "30s"},
        {"id": "a", "identity": {}, "timeout": 1.5},
        {"id": "a", "approval": {"timeout": "3d"}},
        {"id": "a", "for_each": {"items": {"expr": "x"}, "steps": [{"id": "b", "identity": {}}]}},
    ],
)
def test_the_schema_accepts_the_shorthands(step: dict[str, Any]) -> None:
    assert schema_errors({"steps": [step]}) == []


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"steps": [{"id": "a", "scriptt": "x"}]}, "'scriptt' was unexpected"),
        ({"steps": [{"id": "1a", "identity": {}}]}, "does not match"),
        ({"steps": [{"id": "a", "identity": {}, "timeout": "soon"}]}, "soon"),
        ({"steps": [{"id": "a", "identity": False}]}, "False"),
        ({"steps": []}, "should be non-empty"),
        ({"steps": [{"id": "a", "identity": {}}], "concurrency": {"limit": 0}}, "limit"),
    ],
)
def test_the_schema_refuses_mistakes(document: dict[str, Any], fragment: str) -> None:
    errors = schema_errors(document)
    assert errors
    assert any(fragment in error for error in errors), errors
