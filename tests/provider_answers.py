"""Minimal whole answers of the OpenAI Chat and Anthropic Messages APIs, for tests that
need a provider to say something and do not care what."""

from __future__ import annotations

from typing import Any

OPENAI_ANSWER: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-mini",
    "choices": [
        {"index": 0, "message": {"role": "assistant", "content": "A"}, "finish_reason": "stop"}
    ],
    "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
}
"""An OpenAI chat completion answering "A"."""

ANTHROPIC_ANSWER: dict[str, Any] = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [{"type": "text", "text": "B"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 3, "output_tokens": 1},
}
"""An Anthropic message answering "B"."""
