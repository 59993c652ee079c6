"""Captured message content, reshaped into the chat messages vendor UIs draw.

Spans record content in the GenAI conventions' `{role, parts}` shape
(`gen_ai.input.messages`, `gen_ai.output.messages`). Langfuse and LangSmith
draw a conversation from OpenAI-style chat messages (`{role, content,
tool_calls}`), so their tracers turn one into the other here. Only spans of a
tracer with `capture_content=True` carry content at all.
"""

from __future__ import annotations

import json

from pydantic import JsonValue

from tidemill.agents.tracing._base import AttributeValue

__all__ = ["ChatMessage", "answer_text", "chat_messages", "dumps", "last_user_text"]

ChatMessage = dict[str, JsonValue]
"""One OpenAI-style chat message: `{"role": ..., "content": ..., "tool_calls": [...]}`."""


def chat_messages(recorded: AttributeValue | None) -> list[ChatMessage]:
    """Messages recorded on a span (a JSON list of `{role, parts}`) as chat messages.

    Anything else (nothing recorded, text that is not such a list) gives `[]`.

    Examples:
        >>> chat_messages('[{"role":"user","parts":[{"type":"text","content":"Hi"}]}]')
        [{'role': 'user', 'content': 'Hi'}]
        >>> chat_messages(None)
        []
    """
    if not isinstance(recorded, str):
        return []
    try:
        shaped = json.loads(recorded)
    except ValueError:
        return []
    if not isinstance(shaped, list):
        return []
    return [_chat(message) for message in shaped if isinstance(message, dict)]


def last_user_text(messages: list[ChatMessage]) -> str | None:
    """The text of the last user message: what a run was asked."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) and content else None
    return None


def answer_text(messages: list[ChatMessage]) -> str | None:
    """The text of the first assistant message, if it has any (a tool-calling turn may not)."""
    for message in messages:
        if message.get("role") == "assistant":
            content = message.get("content")
            return content if isinstance(content, str) and content else None
    return None


def dumps(value: JsonValue) -> str:
    """Compact JSON, as span attributes carry it."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _chat(message: dict[str, JsonValue]) -> ChatMessage:
    parts = message.get("parts")
    texts: list[str] = []
    calls: list[JsonValue] = []
    for part in parts if isinstance(parts, list) else []:
        if not isinstance(part, dict):
            continue
        kind = part.get("type")
        if kind == "text":
            texts.append(str(part.get("content") or ""))
        elif kind == "tool_call":
            calls.append(
                {
                    "id": part.get("id"),
                    "type": "function",
                    "function": {
                        "name": part.get("name"),
                        "arguments": dumps(part.get("arguments")),
                    },
                }
            )
        elif kind == "tool_call_response":
            return {"role": "tool", "tool_call_id": part.get("id"), "content": part.get("result")}
    chat: ChatMessage = {"role": message.get("role"), "content": "".join(texts)}
    if calls:
        chat["tool_calls"] = calls
    return chat
