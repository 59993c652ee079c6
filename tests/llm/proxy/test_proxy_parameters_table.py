"""The parameter table of `docs/proxy/parameters.md` is the code's own mapping, and is true.

The "Request fields by vendor" table is rendered here from each adapter's
`request_fields` (the rules the proxy checks a request against and the
builders send options by) and compared with the page, so the page cannot
drift from the code: when a rule changes, this test prints the table to
paste. Every field of the official SDK's `CompletionCreateParams` is in
that table or in the page's table of fields the proxy reads itself, so a
field new to the SDK cannot go undocumented. And each cell is checked
against what the proxy does with a sample value: a **400** cell refuses
it, naming the field; an "as is" cell sends it unchanged; any other one
builds its vendor's request without an error.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import pytest
from bedrock_replay import ACCESS_KEY, SECRET_KEY, isolate_aws

from tidemill.llm import HttpModel, resolve_model
from tidemill.llm._options import request_fields
from tidemill.llm.proxy import InvalidRequest, parse_chat_request
from tidemill.llm.proxy._request import check_fields

PAGE = Path(__file__).resolve().parents[3] / "docs" / "proxy" / "parameters.md"
START, END = "<!-- request fields: start -->", "<!-- request fields: end -->"

COLUMNS: dict[str, list[str]] = {
    "OpenAI": ["openai:gpt-4o", "azure:prod-gpt4o"],
    "Responses": ["openai-responses:gpt-4.1-mini"],
    "Mistral": ["mistral:mistral-large-latest"],
    "DeepSeek": ["deepseek:deepseek-chat"],
    "compatible": [
        "groq:llama-3.3-70b-versatile",
        "together:meta-llama/Llama-3.3-70B-Instruct-Turbo",
        "openrouter:openai/gpt-4o",
        "ollama:llama3.2",
        "vllm:Qwen/Qwen2.5-7B-Instruct",
        "openai-compatible:local-model",
    ],
    "Anthropic": ["anthropic:claude-sonnet-4-5", "anthropic-vertex:claude-sonnet-4-5@20250929"],
    "Gemini": ["gemini:gemini-2.5-flash", "vertex:gemini-2.5-pro"],
    "Bedrock": ["bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0"],
}
"""Each column of the table, and the models it speaks for: all must render it alike."""

ROWS = [
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "tools",
    "tool_choice",
    "response_format",
    "parallel_tool_calls",
    "presence_penalty",
    "frequency_penalty",
    "logit_bias",
    "user",
    "safety_identifier",
    "metadata",
    "store",
    "service_tier",
    "reasoning_effort",
    "verbosity",
    "prediction",
    "web_search_options",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "moderation",
    "n",
    "logprobs",
    "top_logprobs",
    "modalities",
    "stream_options",
]
OTHER = "any other field"
"""The last row: a field no rule names (vLLM's `top_k`, OpenRouter's `provider`, ...)."""

TOOLS: list[Any] = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
]
SAMPLES: dict[str, list[Any]] = {
    "temperature": [0.2],
    "top_p": [0.9],
    "max_tokens": [100],
    "max_completion_tokens": [100],
    "stop": [["END"]],
    "seed": [7],
    "tools": [TOOLS],
    "tool_choice": ["none", "required", {"type": "function", "function": {"name": "get_weather"}}],
    "response_format": [{"type": "json_object"}],
    "parallel_tool_calls": [True, False],
    "presence_penalty": [0.5],
    "frequency_penalty": [0.5],
    "logit_bias": [{"50256": -100}],
    "user": ["ann-42"],
    "safety_identifier": ["ann-42"],
    "metadata": [{"run": "7"}],
    "store": [False, True],
    "service_tier": ["auto", "default", "flex", "scale"],
    "reasoning_effort": ["none", "minimal", "low", "high", "xhigh"],
    "verbosity": ["low"],
    "prediction": [{"type": "content", "content": "x"}],
    "web_search_options": [{}],
    "prompt_cache_key": ["tenant-1"],
    "prompt_cache_retention": ["24h"],
    "prompt_cache_options": [{"mode": "explicit"}],
    "moderation": [{"mode": "auto"}],
    "n": [1],
    "logprobs": [False, True],
    "top_logprobs": [0, 5],
    "modalities": [["text"]],
    "stream_options": [{"include_obfuscation": False}, {"include_obfuscation": True}],
    OTHER: [40],
}
"""Values for each field, valid Chat Completions values (some a vendor cannot take)."""

OTHER_NAME = "top_k"


@pytest.fixture(autouse=True)
def _no_aws_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


def build(spec: str) -> HttpModel:
    options: dict[str, Any] = {"api_key": "sk-test-key"}
    provider = spec.partition(":")[0]
    if provider == "bedrock":
        options = {
            "region": "us-east-1",
            "access_key_id": ACCESS_KEY,
            "secret_access_key": SECRET_KEY,
        }
    elif provider in ("vertex", "anthropic-vertex"):
        options = {"project": "acme", "location": "us-east5", "access_token": "ya29.test"}
    elif provider in ("azure", "openai-compatible", "ollama", "vllm"):
        options["base_url"] = "http://127.0.0.1:9/v1"
    model = resolve_model(spec, **options)
    assert isinstance(model, HttpModel)
    return model


def cell(spec: str, row: str) -> str:
    fields = request_fields(build(spec))
    assert fields is not None, spec
    return fields.describe(OTHER_NAME if row == OTHER else row)


def rendered() -> str:
    header = ["field", *COLUMNS]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for row in [*ROWS, OTHER]:
        name = row if row == OTHER else f"`{row}`"
        cells = [cell(specs[0], row) for specs in COLUMNS.values()]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    return "\n".join(lines)


def page_table() -> str:
    text = PAGE.read_text("utf-8")
    assert START in text and END in text, f"{PAGE} has lost its {START} markers"
    return text.split(START, 1)[1].split(END, 1)[0].strip()


def test_the_page_shows_the_code_s_own_mapping() -> None:
    expected = rendered()
    assert page_table() == expected, (
        "docs/proxy/parameters.md is out of date; paste this between its markers:\n\n" + expected
    )


@pytest.mark.parametrize("column", list(COLUMNS))
def test_each_model_of_a_column_maps_its_fields_alike(column: str) -> None:
    first, *others = COLUMNS[column]
    for spec in others:
        for row in [*ROWS, OTHER]:
            assert cell(spec, row) == cell(first, row), f"{spec} differs from {first} on {row}"


def test_every_field_of_the_sdk_is_on_the_page() -> None:
    from openai.types.chat import completion_create_params

    sdk_fields = set(typing.get_type_hints(completion_create_params.CompletionCreateParamsBase))
    first_cells = re.findall(r"^\| ([^|]+) \|", PAGE.read_text("utf-8"), re.MULTILINE)
    named = {name for first in first_cells for name in re.findall(r"`([a-z_]+)", first)}
    missing = sorted(sdk_fields - named)
    assert not missing, f"fields of the SDK the page does not list: {missing}"


def _outcome(spec: str, row: str, value: Any) -> tuple[str, dict[str, Any] | None, str]:
    """('refused', None, param) or ('sent', body, '') for one field of one value."""
    name = OTHER_NAME if row == OTHER else row
    body: dict[str, Any] = {"model": spec, "messages": [{"role": "user", "content": "Hi"}]}
    if name == "tool_choice":
        body["tools"] = TOOLS
    body[name] = value
    model = build(spec)
    try:
        parsed = parse_chat_request(body)
        check_fields(parsed, model)
    except InvalidRequest as error:
        return "refused", None, str(error.param)
    sent = dict(model.build_call(parsed.request, stream=False).body)
    return "sent", sent, ""


@pytest.mark.parametrize("row", [*ROWS, OTHER])
@pytest.mark.parametrize("column", list(COLUMNS))
def test_each_cell_says_what_the_proxy_does(column: str, row: str) -> None:
    for spec in COLUMNS[column]:
        words = cell(spec, row)
        name = OTHER_NAME if row == OTHER else row
        outcomes = [_outcome(spec, row, value) for value in SAMPLES[row]]
        for value, (kind, body, param) in zip(SAMPLES[row], outcomes, strict=True):
            if kind == "refused":
                assert param == name, (spec, row, value, param)
                assert words.startswith("**400**") or "**400**" in words, (spec, row, value)
            elif words == "as is":
                assert body is not None and body.get(name) == value, (spec, row, value)
        if words.startswith("**400**"):
            assert all(kind == "refused" for kind, _, _ in outcomes), (spec, row)
        else:
            assert any(kind == "sent" for kind, _, _ in outcomes), (spec, row)
