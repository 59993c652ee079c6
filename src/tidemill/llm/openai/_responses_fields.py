"""What the OpenAI Responses API makes of each Chat Completions request field.

Most fields have the same name and meaning in both of OpenAI's APIs and are
sent as they are (`user`, `metadata`, `service_tier`, `parallel_tool_calls`,
the prompt cache fields); `reasoning_effort` becomes `reasoning.effort` and
`verbosity` `text.verbosity`; `store` replaces the model's own; `logprobs`
asks for them with an `include` entry (`top_logprobs` too, sent as it is).
What the Responses API dropped from Chat Completions (stop sequences, a
seed, the penalties, token biases, predicted outputs) is refused.
"""

from __future__ import annotations

from functools import cache

from pydantic import JsonValue

from tidemill.llm._options import (
    Body,
    FieldRule,
    RequestFields,
    as_is,
    check_kind,
    refused,
    sent_as,
    setting,
    translated,
)

__all__ = ["LOGPROBS_INCLUDE", "responses_fields"]

API = "the Responses API"

_AS_IS = (
    "user",
    "safety_identifier",
    "metadata",
    "service_tier",
    "parallel_tool_calls",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "moderation",
    "stream_options",
)


def _store(value: JsonValue, body: Body) -> None:
    body["store"] = value  # the request's own choice over the model's default


LOGPROBS_INCLUDE = "message.output_text.logprobs"
"""The `include` entry that asks the Responses API for the log probabilities of the text."""


def _include_logprobs(body: Body) -> None:
    include = body.setdefault("include", [])
    if LOGPROBS_INCLUDE not in include:
        include.append(LOGPROBS_INCLUDE)


def _logprobs(value: JsonValue, body: Body) -> None:
    if value is True:
        _include_logprobs(body)


def _top_logprobs(value: JsonValue, body: Body) -> None:
    # Alternatives come with the log probabilities, so asking for them asks for those too.
    body["top_logprobs"] = value
    _include_logprobs(body)


def _effort(value: JsonValue, body: Body) -> None:
    reasoning = body.setdefault("reasoning", {})
    reasoning["effort"] = value  # the request's own effort over the model's default


@cache
def responses_fields() -> RequestFields:
    """The request fields of the Responses API.

    Examples:
        >>> fields = responses_fields()
        >>> fields.describe("reasoning_effort"), fields.describe("stop")
        ('`reasoning.effort`', '**400**: the Responses API has no stop sequences.')
    """
    rules: dict[str, FieldRule] = {
        **translated(API),
        **{name: as_is(name) for name in _AS_IS},
        "temperature": setting("as is"),
        "top_p": setting("as is"),
        "max_tokens": setting("`max_output_tokens`"),
        "max_completion_tokens": setting("`max_output_tokens`"),
        "stop": setting("", refused_because=f"{API} has no stop sequences."),
        "seed": setting("", refused_because=f"{API} has no seed."),
        "tools": setting("`tools` (flat `function` items, `strict: false`)"),
        "tool_choice": setting("`tool_choice` (a named function as `{type, name}`)"),
        "response_format": setting("`text.format`"),
        "store": FieldRule(
            "as is, over the model's own `store=`", send=_store, check=check_kind("a boolean")
        ),
        "reasoning_effort": FieldRule(
            "`reasoning.effort`", send=_effort, check=check_kind("a string")
        ),
        "verbosity": sent_as("text.verbosity", kind="a string"),
        "web_search_options": refused(f"{API} takes web search as a tool, not as options."),
        "logprobs": FieldRule(
            f"`true`: `include` `{LOGPROBS_INCLUDE}`; `false`: nothing sent",
            send=_logprobs,
            check=check_kind("a boolean"),
        ),
        "top_logprobs": FieldRule(
            f"as is, with `include` `{LOGPROBS_INCLUDE}`",
            send=_top_logprobs,
            check=check_kind("an integer"),
        ),
    }
    return RequestFields("openai-responses", rules, unknown=f"{API} has no such parameter.")
