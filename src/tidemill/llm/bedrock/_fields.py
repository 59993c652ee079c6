"""What Bedrock's Converse API makes of each Chat Completions request field.

`bedrock_fields` is the table `BedrockModel.request_fields` answers with,
for one model: `metadata` becomes `requestMetadata` (the key-value pairs
Bedrock's invocation logs are filtered by), the service tier
`serviceTier.type`, the reasoning effort `outputConfig.effort`; a forced
tool choice needs a model that takes `toolChoice` (`takes_tool_choice`);
what Converse has no field for (a seed, penalties, an end-user id) is refused.
"""

from __future__ import annotations

import re
from functools import lru_cache

from pydantic import JsonValue

from tidemill.llm._options import (
    FieldRule,
    RequestFields,
    sent_as,
    setting,
    translated,
)

__all__ = ["EFFORTS", "bedrock_fields", "takes_tool_choice"]

API = "the Converse API"

EFFORTS = ("low", "medium", "high", "xhigh", "max")
"""The `outputConfig.effort` levels; OpenAI's `none` and `minimal` have no equivalent."""

_TOOL_CHOICE = re.compile(r"(^|[.:/])(anthropic\.claude|amazon\.nova)")


def takes_tool_choice(model_id: str) -> bool:
    """Whether a Bedrock model takes a forcing `toolChoice` (`any` or `tool`).

    Bedrock documents forced tool choice for Anthropic Claude and Amazon Nova
    models; others are sent the output tool without forcing.

    Examples:
        >>> takes_tool_choice("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
        True
        >>> takes_tool_choice("meta.llama3-70b-instruct-v1:0")
        False
    """
    return _TOOL_CHOICE.search(model_id) is not None


def cannot_force(model_id: str, *, thinking: bool) -> str | None:
    """Why `model_id` cannot be made to call a tool, or `None` when it can."""
    if thinking:
        return "with extended thinking on, the model takes no forced tool choice."
    if not takes_tool_choice(model_id):
        return (
            f"{model_id} takes no forcing toolChoice (Bedrock has it for Anthropic Claude "
            "and Amazon Nova models)."
        )
    return None


@lru_cache(maxsize=64)  # one entry per model id: bounded, like the router's
def bedrock_fields(model_id: str, *, thinking: bool = False) -> RequestFields:
    """The request fields of one Bedrock model, with extended thinking on or off.

    Examples:
        >>> fields = bedrock_fields("us.amazon.nova-micro-v1:0")
        >>> fields.describe("metadata"), fields.describe("seed")
        ('`requestMetadata`', '**400**: the Converse API has no seed.')
    """
    why = cannot_force(model_id, thinking=thinking)

    def unforced(choice: JsonValue) -> str | None:
        return None if choice in ("auto", "none") else why

    rules: dict[str, FieldRule] = {
        **translated(API),
        "temperature": setting("`inferenceConfig.temperature`"),
        "top_p": setting("`inferenceConfig.topP`"),
        "max_tokens": setting("`inferenceConfig.maxTokens`"),
        "max_completion_tokens": setting("`inferenceConfig.maxTokens`"),
        "stop": setting("`inferenceConfig.stopSequences`"),
        "seed": setting("", refused_because=f"{API} has no seed."),
        "tools": setting("`toolConfig.tools` as `toolSpec`s"),
        "tool_choice": FieldRule(
            "`toolConfig.toolChoice`: `any` for `required`, `tool` for a named function "
            "(Claude and Nova models, without extended thinking); `none`: no tools are sent",
            check=unforced if why else None,
            setting=True,
        ),
        "response_format": setting("a tool with the schema (see below)"),
        "metadata": sent_as("requestMetadata", kind="an object"),
        "service_tier": sent_as(
            "serviceTier.type",
            values={"auto": None, "default": "default", "flex": "flex", "priority": "priority"},
        ),
        "reasoning_effort": sent_as(
            "outputConfig.effort", values={effort: effort for effort in EFFORTS}
        ),
        "user": FieldRule(
            f"{API} takes no end-user id (send it in `metadata`, as `requestMetadata`).",
            refused=True,
        ),
        "safety_identifier": FieldRule(
            f"{API} takes no end-user id (send it in `metadata`, as `requestMetadata`).",
            refused=True,
        ),
    }
    return RequestFields("bedrock", rules, unknown=f"{API} has no such parameter.")
