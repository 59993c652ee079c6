"""`ScriptedModel`: a model that answers from a script, for tests and demos."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence

from pydantic import JsonValue

from tidemill.errors import ConfigurationError, ScriptExhausted
from tidemill.llm._model import Model, ModelRequest, ModelStreamEvent
from tidemill.llm._offline import offline_answer
from tidemill.types import (
    Message,
    ModelResponse,
    ResponseDone,
    Role,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
)
from tidemill.types._build import validator

__all__ = ["Answer", "Handler", "ScriptedModel"]

Answer = str | Message | ModelResponse
"""What a script entry or handler may give: text, an assistant message, or a full response."""

Handler = Callable[[ModelRequest], Answer | Awaitable[Answer]]
"""A function that answers each request, sync or async."""

_PLAIN = (str, Message, ModelResponse)
"""The `Answer` types: anything else a handler returns is awaited."""

# Built for every answer (see `tidemill.types._build`).
_new_usage = validator(Usage)
_new_response = validator(ModelResponse)


class ScriptedModel(Model):
    """A model that plays back a script, offline and deterministic.

    Turn `i` answers with `responses[i]` as text and `tool_calls[i]` as the
    calls; or a `handler` answers every request. Every request is kept in
    `requests`, so tests can assert what the model was sent. Usage is
    estimated at four characters a token.

    The turn a request gets is the further of two counts: the requests this
    model has answered, and the assistant turns in the conversation it is
    sent. Within one process the first leads, so one model answering several
    runs of a thread, several threads or several flow steps takes the script
    in turn; a thread resumed by a new model (in another process, after an
    approval or a crash) has its own turns counted, and continues where it
    was instead of starting the script over. The next request gets the turn
    after the one just answered.

    With neither a script nor a handler it answers each request with
    `offline_answer`: the last user message, or, when the request asks for
    JSON of a schema, the simplest value the schema accepts.

    Args:
        responses: The text of each turn.
        tool_calls: The tool calls of each turn (`[]` for none).
        handler: Answers each request instead of a script. It may return
            text, a `Message` (with `tool_calls` to call tools) or a whole
            `ModelResponse`; deciding from `request.messages` keeps it right
            for a thread resumed in another process.
        strict: Raise `ScriptExhausted` when asked for more turns than
            scripted (with no script, on every request). Otherwise the last
            text is repeated, with no tool calls.
        model_name: The name it reports.
        record: Keep every request in `requests`. Turn it off for long
            benchmark loops and servers, where the kept transcripts add up.

    Examples:
        >>> import asyncio
        >>> from tidemill.types import Message
        >>> model = ScriptedModel(["Hello!"], strict=True)
        >>> reply = asyncio.run(model.request(ModelRequest([Message.user("Hi")])))
        >>> reply.message.content, len(model.requests)
        ('Hello!', 1)
        >>> asyncio.run(model.request(ModelRequest([Message.user("Again")])))
        Traceback (most recent call last):
        ...
        tidemill.errors.ScriptExhausted: The scripted model was called 2 time(s) but ...

        A conversation that already holds assistant turns continues the script:

        >>> resumed = ScriptedModel(["first", "second"])
        >>> history = [Message.user("Hi"), Message.assistant("first"), Message.user("And?")]
        >>> asyncio.run(resumed.request(ModelRequest(history))).message.content
        'second'

        With no script, it echoes:

        >>> echo = ScriptedModel().request(ModelRequest([Message.user("tide")]))
        >>> asyncio.run(echo).message.content
        'tide'
    """

    provider = "scripted"
    supports_output_format = True
    """Takes an `output_format` (kept in `requests` for tests); with no script it answers
    a value of its schema, otherwise it answers from the script."""

    def __init__(
        self,
        responses: Sequence[Answer] = (),
        *,
        tool_calls: Sequence[Sequence[ToolCall]] = (),
        handler: Handler | None = None,
        strict: bool = False,
        model_name: str = "scripted",
        record: bool = True,
    ) -> None:
        if handler is not None and (responses or tool_calls):
            raise ConfigurationError(
                "A scripted model takes a script or a handler, not both.",
                hint="Move the scripted answers into the handler.",
            )
        self.responses = list(responses)
        self.tool_calls = [tuple(calls) for calls in tool_calls]
        self.handler = handler
        self.strict = strict
        self.model_name = model_name
        self.record = record
        self.requests: list[ModelRequest] = []
        """Every request received, in order (when `record` is on)."""
        self._turn = 0
        # Running input-token and assistant-turn counts, so counting stays O(new messages).
        self._counted = 0
        self._counted_tokens = 0
        self._counted_turns = 0
        self._last_counted: Message | None = None

    @property
    def turns(self) -> int:
        """How many turns the script holds."""
        return max(len(self.responses), len(self.tool_calls))

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Answer from the script or the handler."""
        if self.record:
            self.requests.append(request)
        tokens, turns = self._tally(request.messages)
        if self.handler is not None:
            answer = self.handler(request)
            if not isinstance(answer, _PLAIN):
                answer = await answer
            return self._response(answer, (), tokens)
        turn = max(self._turn, turns)
        self._turn = turn + 1
        if turn >= self.turns:
            if self.strict:
                raise ScriptExhausted(self.turns)
            if not self.turns:
                return self._response(offline_answer(request), (), tokens)
            last = self.responses[-1] if self.responses else ""
            return self._response(last, (), tokens)
        text = self.responses[turn] if turn < len(self.responses) else ""
        calls = self.tool_calls[turn] if turn < len(self.tool_calls) else ()
        return self._response(text, calls, tokens)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        """Answer as `request` does, streaming the text word by word."""
        response = await self.request(request)
        text = response.message.content
        start = 0
        while start < len(text):
            end = text.find(" ", start + 1)
            end = len(text) if end < 0 else end
            yield TextDelta(delta=text[start:end])
            start = end
        for index, call in enumerate(response.message.tool_calls):
            yield ToolCallDelta(
                index=index,
                call_id=call.id,
                name=call.name,
                arguments_delta=call.raw_arguments
                if call.raw_arguments is not None
                else json.dumps(call.arguments),
            )
        yield ResponseDone(response=response)

    def describe(self) -> dict[str, JsonValue]:
        """Describe the model and the script's length."""
        return {**super().describe(), "turns": self.turns}

    def _response(self, answer: Answer, calls: Sequence[ToolCall], tokens: int) -> ModelResponse:
        if isinstance(answer, ModelResponse):
            return answer
        message = (
            answer
            if isinstance(answer, Message)
            else Message.assistant(answer, tool_calls=tuple(calls))
        )
        usage = _new_usage(
            {"requests": 1, "input_tokens": tokens, "output_tokens": _estimate(message)}
        )
        return _new_response(
            {
                "message": message,
                "usage": usage,
                "finish_reason": "tool_calls" if message.tool_calls else "stop",
                "model": self.model_name,
                "provider": self.provider,
            }
        )

    def _tally(self, messages: Sequence[Message]) -> tuple[int, int]:
        """The input-token estimate and the assistant turns of `messages`.

        Counted from where the last conversation ended when this one extends
        it, so a long loop costs O(new messages) a request.
        """
        known = self._counted
        if not (0 < known <= len(messages) and messages[known - 1] is self._last_counted):
            known, self._counted_tokens, self._counted_turns = 0, 0, 0
        for message in messages[known:]:
            self._counted_tokens += _estimate(message)
            if message.role is Role.ASSISTANT:
                self._counted_turns += 1
        self._counted = len(messages)
        self._last_counted = messages[-1] if messages else None
        return self._counted_tokens, self._counted_turns


def _estimate(message: Message) -> int:
    # Four characters a token; a tool call counts as its name and 16 characters
    # of arguments, so estimating stays cheap in long benchmark loops.
    size = len(message.content)
    for call in message.tool_calls:
        size += len(call.name) + 16
    return max(1, (size + 3) // 4)
