"""What Gemini's `generateContent` makes of each Chat Completions request field.

`gemini_fields` is the table `GeminiModel.request_fields` (and Vertex AI's)
answers with: the penalties go to `generationConfig`, the reasoning effort
to `thinkingConfig` (a level for Gemini 3, a token budget before, as
Google's own OpenAI compatibility layer maps it:
https://ai.google.dev/gemini-api/docs/openai), and what the API has no
field for (an end-user id, metadata, token biases) is refused.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from pydantic import JsonValue

from tidemill.llm._options import (
    Body,
    FieldRule,
    RequestFields,
    sent_as,
    setting,
    translated,
    without_logprobs,
)

__all__ = ["THINKING_BUDGETS", "THINKING_LEVELS", "gemini_fields"]

API = "the Gemini API"

THINKING_LEVELS = ("minimal", "low", "medium", "high")
"""The `reasoning_effort` values Gemini 3 takes, as `thinkingLevel`."""

THINKING_BUDGETS = {"none": 0, "low": 1024, "medium": 8192, "high": 24576}
"""The thinking budget of each `reasoning_effort` before Gemini 3."""


@cache
def gemini_fields(*, gemini_3: bool) -> RequestFields:
    """The request fields of a Gemini model, of the Gemini 3 generation or an earlier one.

    Examples:
        >>> fields = gemini_fields(gemini_3=False)
        >>> fields.describe("presence_penalty"), fields.describe("user")
        ('`generationConfig.presencePenalty`', '**400**: the Gemini API takes no end-user id.')
    """
    rules: dict[str, FieldRule] = {
        **translated(API),
        "temperature": setting("`generationConfig.temperature`"),
        "top_p": setting("`generationConfig.topP`"),
        "max_tokens": setting("`generationConfig.maxOutputTokens`"),
        "max_completion_tokens": setting("`generationConfig.maxOutputTokens`"),
        "stop": setting("`generationConfig.stopSequences`"),
        "seed": setting("`generationConfig.seed`"),
        "tools": setting("`tools[].functionDeclarations`, the schema rewritten to Gemini's subset"),
        "tool_choice": setting(
            "`toolConfig.functionCallingConfig`: mode `NONE`, `ANY` for `required`, `ANY` "
            "with `allowedFunctionNames` for a named function"
        ),
        "response_format": setting(
            "`generationConfig.responseMimeType` and `responseSchema` (see below)"
        ),
        "presence_penalty": sent_as("generationConfig.presencePenalty", kind="a number"),
        "frequency_penalty": sent_as("generationConfig.frequencyPenalty", kind="a number"),
        "reasoning_effort": _effort(gemini_3),
        # Gemini has them, as per-token candidate lists without bytes, for some models only;
        # with no recorded answer to check a translation against, they are refused by name.
        **without_logprobs(
            f"{API}'s log probabilities (`responseLogprobs`, `logprobsResult`) are not "
            "translated into Chat Completions' form."
        ),
    }
    return RequestFields("gemini", rules, unknown=f"{API} has no such parameter.")


def _effort(gemini_3: bool) -> FieldRule:
    levels = ", ".join(f"`{level}`" for level in THINKING_LEVELS)
    budgets = ", ".join(f"`{name}` {budget}" for name, budget in THINKING_BUDGETS.items())
    becomes = (
        f"`generationConfig.thinkingConfig`: `thinkingLevel` for Gemini 3 ({levels}), "
        f"`thinkingBudget` before ({budgets}); other values **400**"
    )
    accepted: tuple[str, ...] = THINKING_LEVELS if gemini_3 else tuple(THINKING_BUDGETS)

    def check(value: JsonValue) -> str | None:
        if isinstance(value, str) and value in accepted:
            return None
        names = " or ".join(repr(name) for name in accepted)
        generation = "Gemini 3" if gemini_3 else "a Gemini model before 3"
        return f"{generation} takes {names}."

    def send(value: JsonValue, body: Body) -> None:
        config: dict[str, Any] = body.setdefault("generationConfig", {})
        thinking: dict[str, Any] = config.setdefault("thinkingConfig", {})
        # The request's effort replaces the model's own; Gemini refuses a level and a budget.
        thinking.pop("thinkingLevel", None)
        thinking.pop("thinkingBudget", None)
        if gemini_3:
            thinking["thinkingLevel"] = value
        else:
            thinking["thinkingBudget"] = THINKING_BUDGETS[str(value)]

    return FieldRule(becomes, send=send, check=check)
