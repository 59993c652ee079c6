"""Structured output through a forced tool call, for APIs without a JSON mode.

The Anthropic Messages API (version 2023-06-01) and Bedrock's Converse API
have no plain response format; their documented way to get JSON of a given
shape is a tool whose input schema is that shape, with `tool_choice` making
the model call it. The request builders add that tool (`output_tool`); the
model classes turn its call back into the answer's text here, so a caller
sees JSON text in `message.content` whichever provider answered:

- whole responses: the call's arguments become the content, the call is
  removed, and a response with no other call finishes with `stop`;
- streams: the call's argument fragments are passed on as `TextDelta`s
  (they are the JSON text, piece by piece), and `ResponseDone` carries the
  converted response.

Both APIs require a tool's input schema to be an object: a root `$ref`
into `$defs` (pydantic's schema of a recursive model) is inlined, a root
with `properties` but no `type` is taken for an object, and any other root
(an array, a string, ...) is refused with `ConfigurationError`.

When the request has tools of its own, the model is made to call *some* tool
(`any`): the output tool is how it answers, the others how it acts. Extended
thinking refuses forced tool use, so with thinking on the choice stays
`auto` and the prompt has to ask for the tool.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Literal

from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.llm._json import dumps
from tidemill.llm._model import ModelRequest, ModelStreamEvent, OutputFormat
from tidemill.llm._strict_schema import inline_root_ref
from tidemill.types import ModelResponse, ResponseDone, TextDelta, ToolDefinition

__all__ = ["forced_choice", "forced_text", "forced_text_stream", "output_tool"]

ForcedChoice = Literal["tool", "any", "auto"]
"""How hard the output tool is forced: that tool, some tool, or not at all."""


def output_tool(request: ModelRequest) -> ToolDefinition | None:
    """The tool that carries `request.output_format`, or `None` without one.

    The schema's root must be an object (a root `$ref` is inlined first).

    Raises:
        ConfigurationError: When one of the request's tools has the format's
            name, or the schema's root is not an object.

    Examples:
        >>> from tidemill.llm._model import OutputFormat
        >>> fmt = OutputFormat("city", {"type": "object", "properties": {}})
        >>> output_tool(ModelRequest([], output_format=fmt)).name
        'city'
    """
    output = request.output_format
    if output is None:
        return None
    if any(tool.name == output.name for tool in request.tools):
        raise ConfigurationError(
            f"The output format is named {output.name!r}, like one of the tools; the "
            "model could not tell the answer from a call to that tool.",
            hint="Give the OutputFormat another name.",
        )
    return ToolDefinition(
        name=output.name, description=_description(output), parameters=_object_schema(output)
    )


def _object_schema(output: OutputFormat) -> dict[str, JsonValue]:
    schema = inline_root_ref(output.object_schema())
    if "type" not in schema and "properties" in schema:
        schema = {"type": "object", **schema}
    kind = schema.get("type")
    if kind != "object":
        what = f"of type {kind!r}" if kind is not None else "without a 'type'"
        raise ConfigurationError(
            f"The root of the output format {output.name!r} is {what}, but Anthropic and "
            "Bedrock structured output goes through a tool whose input must be a JSON object.",
            hint='Wrap the value in an object, e.g. {"type": "object", "properties": '
            '{"value": <schema>}, "required": ["value"]}.',
        )
    return schema


def _description(output: OutputFormat) -> str:
    lead = output.description or "Give your final answer."
    return f"{lead} Call this tool with the answer as its input, and nothing else."


def forced_choice(request: ModelRequest, *, can_force: bool) -> ForcedChoice:
    """How to force the output tool: alone it is `tool`, among other tools `any`.

    `can_force` is false when the provider or model refuses forced tool use
    (Anthropic with extended thinking, Bedrock models without `toolChoice`).
    """
    if not can_force:
        return "auto"
    return "any" if request.tools else "tool"


def forced_text(response: ModelResponse, request: ModelRequest) -> ModelResponse:
    """`response` with the output tool's call turned into its text.

    Examples:
        >>> from tidemill.types import Message, ToolCall
        >>> fmt = OutputFormat("city", {"type": "object", "properties": {}})
        >>> call = ToolCall(id="t1", name="city", arguments={"name": "Lyon"})
        >>> answer = ModelResponse(message=Message.assistant("", tool_calls=(call,)),
        ...                        finish_reason="tool_calls")
        >>> done = forced_text(answer, ModelRequest([], output_format=fmt))
        >>> done.message.content, done.message.tool_calls, done.finish_reason
        ('{"name":"Lyon"}', (), 'stop')
    """
    output = request.output_format
    if output is None:
        return response
    calls = response.message.tool_calls
    answer = next((call for call in calls if call.name == output.name), None)
    if answer is None:
        return response
    text = answer.raw_arguments if answer.raw_arguments is not None else dumps(answer.arguments)
    others = tuple(call for call in calls if call.name != output.name)  # a repeat is dropped
    message = response.message.model_copy(update={"content": text, "tool_calls": others})
    finish = response.finish_reason
    if not others and finish == "tool_calls":
        finish = "stop"
    return response.model_copy(update={"message": message, "finish_reason": finish})


async def forced_text_stream(
    events: AsyncIterator[ModelStreamEvent], request: ModelRequest
) -> AsyncGenerator[ModelStreamEvent, None]:
    """Pass `events` on, the output tool's argument fragments as text deltas.

    The text deltas add up to the final `message.content`: text the model
    writes besides the output tool's call is held back until the response
    ends, and passed on only when the tool was not called (then it is the
    answer); the first call of the tool is the answer, as in `forced_text`.
    """
    output = request.output_format
    answer_index: int | None = None
    repeats: set[int] = set()
    held: list[ModelStreamEvent] = []
    streamed: list[str] = []
    async with aclosing(_aiter(events)) as stream:
        async for event in stream:
            if output is None:
                yield event
            elif event.type == "text":
                held.append(event)
            elif event.type == "tool_call_delta":
                if event.name == output.name and answer_index is None:
                    answer_index = event.index
                elif event.name == output.name and event.index != answer_index:
                    repeats.add(event.index)
                if event.index in repeats:
                    continue
                if event.index == answer_index:
                    if event.arguments_delta:
                        streamed.append(event.arguments_delta)
                        yield TextDelta(delta=event.arguments_delta)
                else:
                    yield event
            elif event.type == "response":
                done = forced_text(event.response, request)
                if answer_index is None:
                    for text in held:
                        yield text
                elif streamed:
                    message = done.message.model_copy(update={"content": "".join(streamed)})
                    done = done.model_copy(update={"message": message})
                elif done.message.content:
                    yield TextDelta(delta=done.message.content)
                yield ResponseDone(response=done)
            else:
                yield event


async def _aiter(
    events: AsyncIterator[ModelStreamEvent],
) -> AsyncGenerator[ModelStreamEvent, None]:
    try:
        async for event in events:
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
