"""A Tidemill `ModelResponse` written back as an OpenAI `chat.completion` object.

An answer whose upstream reported no usage has no `usage` (`reported`):
OpenAI's own answers may leave it out, and zeros would read as a free call.
Its `logprobs` are the upstream's own (`ModelResponse.logprobs`), `null`
unless the client asked for them.
"""

from __future__ import annotations

import secrets
import time

from tidemill.llm._json import dumps
from tidemill.llm.proxy._wire import (
    CompletionBody,
    CompletionMessage,
    CompletionUsage,
    OpenAIFinishReason,
    ResponseToolCall,
)
from tidemill.types import FinishReason, ModelResponse, ToolCall, Usage

__all__ = [
    "completion_body",
    "completion_id",
    "finish_reason",
    "now",
    "reported",
    "tool_call_arguments",
    "usage_body",
]

_FINISH: dict[FinishReason, OpenAIFinishReason] = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "length": "length",
    "content_filter": "content_filter",
    # A response that finished has no error; an unknown reason reads best as a plain stop.
    "error": "stop",
    "unknown": "stop",
}


def completion_id() -> str:
    """A fresh `chatcmpl-` id for one answer (every chunk of a stream shares it)."""
    return "chatcmpl-" + secrets.token_hex(12)


def now() -> int:
    """The `created` timestamp: whole seconds since the epoch."""
    return int(time.time())


def finish_reason(reason: FinishReason) -> OpenAIFinishReason:
    """Map a Tidemill finish reason to OpenAI's.

    Examples:
        >>> finish_reason("tool_calls"), finish_reason("unknown")
        ('tool_calls', 'stop')
    """
    return _FINISH[reason]


def reported(usage: Usage) -> bool:
    """Whether the upstream reported `usage` (its counts are not just unknown).

    Examples:
        >>> reported(Usage(requests=1, input_tokens=3)), reported(Usage(requests=1,
        ...                                                              unreported_requests=1))
        (True, False)
    """
    return usage.unreported_requests == 0


def usage_body(usage: Usage) -> CompletionUsage:
    """Write a `Usage` as OpenAI's `usage` object.

    Examples:
        >>> usage_body(Usage(input_tokens=12, output_tokens=5, cache_read_tokens=4))
        {'prompt_tokens': 12, 'completion_tokens': 5, 'total_tokens': 17, \
'prompt_tokens_details': {'cached_tokens': 4}, 'completion_tokens_details': {'reasoning_tokens': 0}}
    """
    return {
        "prompt_tokens": usage.input_tokens,
        "completion_tokens": usage.output_tokens,
        "total_tokens": usage.total_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    }


def tool_call_arguments(call: ToolCall) -> str:
    """A call's arguments as the JSON text OpenAI sends (the raw text when it was not JSON)."""
    return call.raw_arguments if call.raw_arguments is not None else dumps(call.arguments)


def completion_body(
    response: ModelResponse, *, model: str, response_id: str, created: int
) -> CompletionBody:
    """Write a whole response as a `chat.completion` object.

    Args:
        response: What the model answered.
        model: The model name to report: the one the client asked for.
        response_id: The `chatcmpl-` id.
        created: The Unix timestamp.

    Examples:
        >>> from tidemill.types import Message
        >>> body = completion_body(
        ...     ModelResponse(message=Message.assistant("Hi!"), usage=Usage(input_tokens=3,
        ...                   output_tokens=1)),
        ...     model="gpt-4o-mini", response_id="chatcmpl-1", created=0)
        >>> body["choices"][0]["message"], body["choices"][0]["finish_reason"]
        ({'role': 'assistant', 'content': 'Hi!', 'refusal': None}, 'stop')
    """
    message = response.message
    calls: list[ResponseToolCall] = [
        {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": tool_call_arguments(call)},
        }
        for call in message.tool_calls
    ]
    # OpenAI sends `null`, not "", as the content of a turn that only calls tools.
    content = message.content if message.content or not calls else None
    wire = CompletionMessage(role="assistant", content=content, refusal=None)
    if calls:
        wire["tool_calls"] = calls
    thinking = "".join(reasoning.text for reasoning in message.reasoning)
    if thinking:
        wire["reasoning_content"] = thinking
    body: CompletionBody = {
        "id": response_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": wire,
                "finish_reason": finish_reason(response.finish_reason),
                "logprobs": response.logprobs,
            }
        ],
        "system_fingerprint": None,
    }
    if reported(response.usage):
        body["usage"] = usage_body(response.usage)
    return body
