"""`script_metadata`: a workspace script's summary, description and input schema."""

from __future__ import annotations

import pytest

from tidemill.errors import ConfigurationError
from tidemill.workspace._scripts import ScriptMetadata, script_metadata

_SCRIPT = '''"""Send a reply to a ticket.

Posts the text as a public comment.
  Idempotent on the ticket id.
"""

from typing import Literal


def helper():
    return 1


def main(
    ticket_id: int,
    text: str,
    *,
    tone: Literal["calm", "warm"] = "calm",
    cc: list[str] | None = None,
):
    """Reply.

    Args:
        ticket_id: The ticket to answer.
    """
    return {"ok": True}
'''


def test_summary_description_and_schema() -> None:
    meta = script_metadata(_SCRIPT, path="f/support/reply")
    assert isinstance(meta, ScriptMetadata)
    assert meta.summary == "Send a reply to a ticket."
    assert meta.description == "Posts the text as a public comment.\n  Idempotent on the ticket id."
    assert meta.schema == {
        "type": "object",
        "properties": {
            "ticket_id": {"type": "integer", "description": "The ticket to answer."},
            "text": {"type": "string"},
            "tone": {"enum": ["calm", "warm"], "default": "calm"},
            "cc": {
                "anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}],
                "default": None,
            },
        },
        "required": ["ticket_id", "text"],
        "additionalProperties": False,
    }


def test_no_docstring_gives_empty_texts_and_kwargs_open_the_schema() -> None:
    meta = script_metadata("async def main(x, **rest):\n    return x\n", path="u/ann/echo")
    assert (meta.summary, meta.description) == ("", "")
    assert meta.schema["required"] == ["x"]
    assert meta.schema["additionalProperties"] is True


def test_a_one_line_docstring_has_no_description() -> None:
    meta = script_metadata('"""Only a summary."""\ndef main(): ...\n', path="u/ann/one")
    assert (meta.summary, meta.description) == ("Only a summary.", "")
    assert meta.schema == {"type": "object", "properties": {}, "additionalProperties": False}


def test_the_schema_is_a_copy_the_caller_may_change() -> None:
    code = "def main(a: int): ...\n"
    first = script_metadata(code, path="u/ann/a")
    first.schema["properties"]["a"]["type"] = "string"
    assert script_metadata(code, path="u/ann/a").schema["properties"]["a"] == {"type": "integer"}


def test_no_main_names_the_path() -> None:
    with pytest.raises(ConfigurationError) as caught:
        script_metadata('"""Helpers."""\ndef helper(): ...\n', path="f/ops/helpers")
    assert "f/ops/helpers" in caught.value.message
    assert "main()" in caught.value.message
    assert caught.value.context["path"] == "f/ops/helpers"


def test_a_nested_main_is_not_a_top_level_main() -> None:
    with pytest.raises(ConfigurationError, match="must define a top-level function main"):
        script_metadata("class A:\n    def main(self): ...\n", path="f/ops/nested")


def test_a_syntax_error_names_the_path_and_the_line() -> None:
    code = '"""Broken."""\n\ndef main(x):\n    return (x\n\n'
    with pytest.raises(ConfigurationError) as caught:
        script_metadata(code, path="f/ops/broken")
    message = caught.value.message
    assert message.startswith("Script f/ops/broken, line 4: syntax error")
    assert caught.value.context == {"path": "f/ops/broken", "line": 4}


def test_a_null_byte_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="f/ops/nul"):
        script_metadata("def main(): ...\n\x00", path="f/ops/nul")


@pytest.mark.parametrize("signature", ["a, /, b", "*args", "a, *rest"])
def test_parameters_inputs_cannot_name_are_refused_with_the_line(signature: str) -> None:
    code = f'"""Doc."""\n\n\ndef main({signature}):\n    return 1\n'
    with pytest.raises(ConfigurationError) as caught:
        script_metadata(code, path="u/bob/positional")
    message = caught.value.message
    assert message.startswith("Script u/bob/positional, line 4: main(")
    assert "positional-only parameters or *args" in message
