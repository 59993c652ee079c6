"""What the Anthropic Messages API makes of each Chat Completions request field.

`anthropic_fields` is the table `AnthropicModel.request_fields` answers
with, for one model: the fields that map (an end-user id as
`metadata.user_id`, `parallel_tool_calls: false` as
`disable_parallel_tool_use`, a service tier, the reasoning effort as
`output_config.effort`) and the ones refused because the API has none (a
seed, penalties, token biases). Models that refuse sampling settings
(`rejects_sampling`) refuse `temperature` and `top_p` here too.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from pydantic import JsonValue

from tidemill.llm._options import (
    Body,
    FieldRule,
    RequestFields,
    check_kind,
    sent_as,
    setting,
    translated,
)

__all__ = ["EFFORTS", "anthropic_fields", "disable_parallel_calls", "rejects_sampling"]

API = "the Messages API"

EFFORTS = ("low", "medium", "high", "xhigh", "max")
"""The `output_config.effort` levels; OpenAI's `none` and `minimal` have no equivalent."""

_SAMPLING = "for models that refuse it (Claude Opus 4.7 and later, Claude 5 and later)"


def disable_parallel_calls(value: JsonValue, body: Body) -> None:
    """`parallel_tool_calls: false` as `disable_parallel_tool_use` on the tool choice.

    Nothing is sent for `true` (the default), without tools, or when no tool may be called.
    """
    if value is not False or "tools" not in body:
        return
    choice: dict[str, Any] = body.setdefault("tool_choice", {"type": "auto"})
    if choice.get("type") != "none":
        choice["disable_parallel_tool_use"] = True


@lru_cache(maxsize=64)  # one entry per model id: bounded, like the router's
def anthropic_fields(model: str, *, thinking: bool = False) -> RequestFields:
    """The request fields of one Claude model, with extended thinking on or off.

    Examples:
        >>> fields = anthropic_fields("claude-sonnet-4-5")
        >>> fields.describe("user"), fields.describe("seed")
        ('`metadata.user_id`', '**400**: the Messages API has no seed.')
        >>> anthropic_fields("claude-opus-4-7").refusal("temperature").context["param"]
        'temperature'
    """
    no_sampling = f"{model} takes no sampling settings." if rejects_sampling(model) else None
    rules: dict[str, FieldRule] = {
        **translated(API),
        "temperature": setting(
            f"`temperature`; **400** {_SAMPLING}",
            refused_because=no_sampling,
        ),
        "top_p": setting(
            f"`top_p`; **400** {_SAMPLING}",
            refused_because=no_sampling,
        ),
        "max_tokens": setting(_LIMIT),
        "max_completion_tokens": setting(_LIMIT),
        "stop": setting("`stop_sequences`"),
        "seed": setting("", refused_because=f"{API} has no seed."),
        "tools": setting("`tools` with `input_schema`"),
        "tool_choice": FieldRule(
            "`tool_choice`: `auto`, `none`, `any` for `required`, `tool` for a named function "
            "(with extended thinking, `auto` and `none` only)",
            check=_unforced if thinking else None,
            setting=True,
        ),
        "response_format": setting("a forced tool with the schema (see below)"),
        "parallel_tool_calls": FieldRule(
            "`false`: `tool_choice.disable_parallel_tool_use`; `true`: nothing sent (the default)",
            send=disable_parallel_calls,
            check=check_kind("a boolean"),
        ),
        "user": sent_as("metadata.user_id", kind="a string"),
        "safety_identifier": sent_as("metadata.user_id", kind="a string"),
        "metadata": FieldRule(
            "Anthropic's `metadata` takes only a user id (send `user`).", refused=True
        ),
        "service_tier": sent_as(
            "service_tier", values={"auto": "auto", "default": "standard_only"}
        ),
        "reasoning_effort": sent_as(
            "output_config.effort", values={effort: effort for effort in EFFORTS}
        ),
    }
    return RequestFields("anthropic", rules, unknown=f"{API} has no such parameter.")


def _unforced(choice: JsonValue) -> str | None:
    if choice in ("auto", "none"):
        return None
    return "with extended thinking on, Claude takes only `auto` or `none`."


_LIMIT = "`max_tokens`; when absent, 8192 (4096 for older Claude 3), since the API requires one"


# Claude generations from Opus 4.7 and the 5 family on refuse sampling settings
# ("temperature is deprecated for this model") even under anthropic-version
# 2023-06-01; the 2026-10-21 API version refuses them for every model.
_NO_SAMPLING = re.compile(r"claude-(opus-4-[7-9]|(opus|sonnet|haiku)-([5-9]|[1-9][0-9]))")


def rejects_sampling(model: str) -> bool:
    """Whether a Claude model refuses `temperature` and `top_p`.

    Examples:
        >>> rejects_sampling("claude-sonnet-4-5"), rejects_sampling("claude-sonnet-5-5")
        (False, True)
    """
    return _NO_SAMPLING.search(model) is not None
