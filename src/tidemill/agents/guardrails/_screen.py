"""Applying a runtime's guardrail: to a run's input, to an answer, to a streamed answer.

`AgentRuntime`'s loop and `GraphRuntime`'s nodes screen what the user sends
and what the model answers in the same way; these functions are that way.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from contextlib import aclosing

from tidemill.agents.guardrails._base import Guardrail
from tidemill.agents.guardrails._stream import guard_stream
from tidemill.llm import Model, ModelRequest, ModelStreamEvent
from tidemill.types import Message, ModelResponse, ResponseDone, TextDelta

__all__ = ["screen_input", "screen_response", "screened_stream"]


def screen_input(guardrail: Guardrail | None, messages: tuple[Message, ...]) -> tuple[Message, ...]:
    """A run's input as the input guardrail lets it through: unchanged or redacted.

    Raises:
        GuardrailViolation: The guardrail blocks the input.
    """
    if guardrail is None:
        return messages
    checked = guardrail.check_input(messages)
    checked.raise_if_blocked()
    return tuple(checked.messages or messages)


def screen_response(guardrail: Guardrail | None, response: ModelResponse) -> ModelResponse:
    """An answer as the output guardrail lets it through: unchanged or redacted.

    Raises:
        GuardrailViolation: The guardrail blocks the answer.
    """
    if guardrail is None or not response.message.content:
        return response
    checked = guardrail.check_output(response.message.content)
    checked.raise_if_blocked()
    if checked.action != "redact" or checked.text is None:
        return response
    message = response.message.model_copy(update={"content": checked.text})
    return response.model_copy(update={"message": message})


async def screened_stream(
    model: Model, request: ModelRequest, guardrail: Guardrail | None
) -> AsyncGenerator[ModelStreamEvent, None]:
    """The model's stream, its text passed through the output guardrail as it arrives.

    Raises:
        GuardrailViolation: The guardrail blocks the answer.
    """
    guard = guard_stream(guardrail) if guardrail is not None else None
    async with aclosing(model.stream(request)) as chunks:
        async for chunk in chunks:
            if chunk.type == "response":
                if guard is not None and (tail := guard.flush()):
                    yield TextDelta(delta=tail)
                yield ResponseDone(response=screen_response(guardrail, chunk.response))
            elif chunk.type == "text" and guard is not None:
                if released := guard.feed(chunk.delta):
                    yield TextDelta(delta=released)
            else:
                yield chunk
