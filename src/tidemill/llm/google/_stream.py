"""Parsing Gemini `generateContent` responses, whole or streamed, into Tidemill types.

`streamGenerateContent?alt=sse` sends data-only events, each a complete
`GenerateContentResponse` holding the parts produced since the previous
one; a whole response is read as a stream of one such chunk. Per part:

- `thought: true` text is reasoning (consecutive thought parts join into one
  `Reasoning`); `text` is the answer;
- `thoughtSignature` is kept exactly as sent: on a function call in
  `ToolCall.signature`, on a thought in its `Reasoning.signature`, and on
  answer text as a text-less `Reasoning` carrying only the signature, so
  each goes back where it came from on the next turn;
- `functionCall` becomes a `ToolCall`. Gemini gives no call ids, so each
  call gets a stable generated one (`GENERATED_ID_PREFIX`), which is not
  sent back to Gemini. Vertex AI may stream a call's arguments
  (`streamFunctionCallArguments`): an opening part with the name and
  `willContinue`, `partialArgs` parts addressed by JSON path, and an empty
  `functionCall` that closes it;
- `usageMetadata` is cumulative: each chunk repeats the totals so far, so
  the last value seen wins and nothing is summed;
- `finishReason` `STOP` is said also when the turn ends in function calls
  (it becomes `tool_calls`); `MALFORMED_FUNCTION_CALL` becomes
  `MalformedToolCall`, so the agent can ask again; an `error` object inside
  a 200 stream becomes a `ProviderError`.

The stream has no terminal event: it is complete once a chunk with a
finish reason (or a prompt block) has arrived.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import JsonValue

from tidemill.errors import MalformedToolCall
from tidemill.llm._adapter import Delta
from tidemill.llm._assembly import ReasoningBuffer, ResponseBuilder, ToolCallBuffer
from tidemill.llm._failures import ErrorReporter
from tidemill.llm._json import (
    JsonObject,
    dumps,
    get_int,
    get_list,
    get_object,
    get_str,
    iter_objects,
    loads_object,
)
from tidemill.llm.http._sse import ServerSentEvent
from tidemill.types import (
    FinishReason,
    ModelResponse,
    ReasoningDelta,
    TextDelta,
    ToolCall,
    ToolCallDelta,
    Usage,
    new_call_id,
)

__all__ = [
    "GENERATED_ID_PREFIX",
    "GeminiStreamParser",
    "is_generated_id",
    "parse_gemini_usage",
    "parse_generate_content",
]

GENERATED_ID_PREFIX = "gemini-call-"
"""Call ids made up here start with this; they are never sent to Gemini."""

_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
}
_MALFORMED = frozenset({"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"})
_PATH_TOKEN = re.compile(r"\.([A-Za-z_][\w-]*)|\[(\d+)\]|\['([^']*)'\]|\[\"([^\"]*)\"\]")


def is_generated_id(call_id: str) -> bool:
    """Whether `call_id` was made up by this parser rather than given by Gemini."""
    return call_id.startswith(GENERATED_ID_PREFIX)


def parse_gemini_usage(usage: JsonObject, previous: Usage | None = None) -> Usage:
    """Read `usageMetadata`; fields it lacks keep their `previous` values.

    `promptTokenCount` already counts cached tokens; `candidatesTokenCount`
    leaves out the thinking tokens, which `Usage.output_tokens` includes.

    Examples:
        >>> usage = parse_gemini_usage({"promptTokenCount": 30, "cachedContentTokenCount": 20,
        ...                             "candidatesTokenCount": 5, "thoughtsTokenCount": 40})
        >>> usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.reasoning_tokens
        (30, 45, 20, 40)
    """
    before = previous or Usage(requests=1)
    prompt = get_int(usage, "promptTokenCount")
    tool_prompt = get_int(usage, "toolUsePromptTokenCount")
    candidates = get_int(usage, "candidatesTokenCount")
    thoughts = get_int(usage, "thoughtsTokenCount")
    cached = get_int(usage, "cachedContentTokenCount")
    if prompt is None and tool_prompt is None:
        input_tokens = before.input_tokens
    else:
        input_tokens = (prompt or 0) + (tool_prompt or 0)
    reasoning = before.reasoning_tokens if thoughts is None else thoughts
    if candidates is None and thoughts is None:
        output_tokens = before.output_tokens
    else:
        output_tokens = (candidates or 0) + reasoning
    return Usage(
        requests=1,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cache_read_tokens=before.cache_read_tokens if cached is None else cached,
        reasoning_tokens=reasoning,
    )


@dataclass(slots=True)
class SignedCallBuffer(ToolCallBuffer):
    """A tool call being assembled, with its thought signature and streamed arguments."""

    signature: str | None = None
    args: dict[str, JsonValue] = field(default_factory=dict)
    continuing: set[str] = field(default_factory=set)
    """JSON paths whose string value the next partial argument extends."""

    def build(self) -> ToolCall:
        """Return the finished call, signature included."""
        call = ToolCallBuffer.build(self)
        if self.signature is None:
            return call
        return call.model_copy(update={"signature": self.signature})


class GeminiStreamParser:
    """Turns a Gemini event stream into stream events and a `ModelResponse`.

    Args:
        errors: Builds the typed errors (provider name, secrets to scrub).
    """

    def __init__(self, errors: ErrorReporter) -> None:
        self._errors = errors
        self._builder = ResponseBuilder(errors.provider)
        self._thinking: ReasoningBuffer | None = None
        self._open: SignedCallBuffer | None = None
        self._finished = False

    @property
    def done(self) -> bool:
        """Always `False`: Gemini has no end event, so the body is read to its end."""
        return False

    def feed(self, event: ServerSentEvent) -> list[Delta]:
        """Take one server-sent event; return the deltas it carries.

        Raises:
            ProviderError: For an error object, or data that is not a JSON object.
            MalformedToolCall: When Gemini reports a malformed function call.
        """
        data = event.data.strip()
        if not data or data == "[DONE]":
            return []
        chunk = loads_object(data)
        if chunk is None:
            raise self._errors.broken(
                f"{self._errors.provider} sent a stream event that is not a JSON object.",
                body=data,
            )
        return self.add_chunk(chunk)

    def add_chunk(self, chunk: JsonObject) -> list[Delta]:
        """Take one decoded `GenerateContentResponse`."""
        if "error" in chunk:
            raise self._errors.from_payload(chunk, body=dumps(chunk))
        builder = self._builder
        builder.response_id = builder.response_id or get_str(chunk, "responseId")
        builder.model = builder.model or get_str(chunk, "modelVersion")
        usage = get_object(chunk, "usageMetadata")
        if usage:
            builder.usage = parse_gemini_usage(usage, builder.usage)
        candidates = [
            candidate
            for candidate in iter_objects(get_list(chunk, "candidates"))
            if get_int(candidate, "index") in (None, 0)
        ]
        if not candidates and get_str(get_object(chunk, "promptFeedback"), "blockReason"):
            builder.finish_reason = "content_filter"
            self._finished = True
        deltas: list[Delta] = []
        for candidate in candidates[:1]:
            for part in iter_objects(get_list(get_object(candidate, "content"), "parts")):
                deltas += self._part(part)
            deltas += self._finish(candidate)
        return deltas

    def finish(self) -> ModelResponse:
        """Return the response; raise if the stream ended before a finish reason.

        Raises:
            ProviderError: When the stream was cut short.
            MalformedToolCall: When a tool call has no name.
        """
        if not self._finished:
            raise self._errors.broken(
                f"The {self._errors.provider} stream ended before its finish reason; "
                "the answer is incomplete."
            )
        return self.build()

    def build(self) -> ModelResponse:
        """Return what was assembled, without checking the stream's end."""
        self._close_call()
        return self._builder.build()

    # -- parts ---------------------------------------------------------------------------

    def _part(self, part: JsonObject) -> list[Delta]:
        signature = get_str(part, "thoughtSignature") or None
        call = part.get("functionCall")
        if isinstance(call, dict):
            return self._call(call, signature)
        text = get_str(part, "text") or ""
        if part.get("thought") is True:
            return self._think(text, signature)
        self._thinking = None
        deltas: list[Delta] = []
        if text:
            self._builder.text.append(text)
            deltas.append(TextDelta(delta=text))
        if signature:
            # A signature on answer text: kept as a text-less Reasoning, returned with the text.
            buffer = ReasoningBuffer(self._errors.provider, signature=signature)
            self._builder.reasoning.append(buffer)
            deltas.append(ReasoningDelta(signature=signature))
        return deltas

    def _think(self, text: str, signature: str | None) -> list[Delta]:
        buffer = self._thinking
        if buffer is None or buffer.signature is not None:
            buffer = self._thinking = ReasoningBuffer(self._errors.provider)
            self._builder.reasoning.append(buffer)
        deltas: list[Delta] = []
        if text:
            buffer.parts.append(text)
            deltas.append(ReasoningDelta(delta=text))
        if signature:
            buffer.signature = signature
            deltas.append(ReasoningDelta(signature=signature))
        return deltas

    def _call(self, call: JsonObject, signature: str | None) -> list[Delta]:
        self._thinking = None
        name = get_str(call, "name") or None
        partial = list(iter_objects(get_list(call, "partialArgs")))
        args = call.get("args")
        more = call.get("willContinue") is True
        deltas: list[Delta] = []
        buffer = self._open
        if buffer is not None and name is not None:
            deltas += self._close_call()  # a new call begins while one is still open
            buffer = None
        if buffer is None:
            if name is None and not partial and not isinstance(args, dict):
                return deltas  # the empty part that closes a call already closed
            buffer = self._start_call(get_str(call, "id") or None, name)
            deltas.append(
                ToolCallDelta(index=self._slot(buffer), call_id=buffer.call_id, name=name)
            )
        if signature:
            buffer.signature = signature
        if isinstance(args, dict):
            buffer.args.update(args)
        for argument in partial:
            _apply_partial(buffer, argument)
        self._open = buffer
        if not more:
            deltas += self._close_call()
        return deltas

    def _start_call(self, call_id: str | None, name: str | None) -> SignedCallBuffer:
        calls = self._builder.tool_calls
        if call_id is None:
            stem = self._builder.response_id or new_call_id().removeprefix("call_")
            call_id = f"{GENERATED_ID_PREFIX}{stem}-{len(calls)}"
        buffer = SignedCallBuffer(call_id=call_id, name=name)
        calls.append(buffer)
        return buffer

    def _slot(self, buffer: SignedCallBuffer) -> int:
        return next(i for i, b in enumerate(self._builder.tool_calls) if b is buffer)

    def _close_call(self) -> list[Delta]:
        buffer, self._open = self._open, None
        if buffer is None or buffer.parts:
            return []
        text = dumps(buffer.args)
        buffer.parts.append(text)
        return [ToolCallDelta(index=self._slot(buffer), arguments_delta=text)]

    def _finish(self, candidate: JsonObject) -> list[Delta]:
        reason = get_str(candidate, "finishReason")
        if reason is None:
            return []
        if reason in _MALFORMED:
            detail = get_str(candidate, "finishMessage") or reason
            raise MalformedToolCall(
                f"{self._errors.provider} could not parse the model's function call: {detail}",
                feedback=(
                    "Your last function call was malformed and could not be run. "
                    "Call the function again with arguments that follow its schema exactly."
                ),
            )
        self._builder.finish_reason = _FINISH.get(reason, "unknown")
        self._finished = True
        return self._close_call()


def _apply_partial(buffer: SignedCallBuffer, argument: JsonObject) -> None:
    """Set one streamed argument value at its JSON path (`$.a.b[0]`)."""
    path = get_str(argument, "jsonPath")
    if path is None:
        return
    value: JsonValue
    if isinstance(argument.get("stringValue"), str):
        text = get_str(argument, "stringValue") or ""
        current = _get_path(buffer.args, path)
        value = current + text if path in buffer.continuing and isinstance(current, str) else text
    elif isinstance(argument.get("numberValue"), int | float):
        number = argument["numberValue"]
        value = number if isinstance(number, int | float) else None
    elif isinstance(argument.get("boolValue"), bool):
        value = argument["boolValue"] is True
    elif "nullValue" in argument:
        value = None
    else:
        return
    if not _set_path(buffer.args, path, value):
        return
    if argument.get("willContinue") is True:
        buffer.continuing.add(path)
    else:
        buffer.continuing.discard(path)


def _tokens(path: str) -> list[str | int] | None:
    if not path.startswith("$"):
        return None
    tokens: list[str | int] = []
    position = 1
    while position < len(path):
        match = _PATH_TOKEN.match(path, position)
        if match is None:
            return None
        name, index, single, double = match.groups()
        if index is not None:
            tokens.append(int(index))
        else:
            tokens.append(name if name is not None else single if single is not None else double)
        position = match.end()
    return tokens or None


def _get_path(root: dict[str, JsonValue], path: str) -> JsonValue:
    node: JsonValue = root
    for token in _tokens(path) or []:
        if isinstance(token, int) and isinstance(node, list) and token < len(node):
            node = node[token]
        elif isinstance(token, str) and isinstance(node, dict):
            node = node.get(token)
        else:
            return None
    return node


def _set_path(root: dict[str, JsonValue], path: str, value: JsonValue) -> bool:
    tokens = _tokens(path)
    if tokens is None:
        return False
    node: JsonValue = root
    for token, following in zip(tokens, [*tokens[1:], None], strict=True):
        fresh: JsonValue = value if following is None else [] if isinstance(following, int) else {}
        if isinstance(token, str) and isinstance(node, dict):
            if following is None or not isinstance(node.get(token), list | dict):
                node[token] = fresh
            node = node[token]
        elif isinstance(token, int) and isinstance(node, list) and token <= 10_000:
            node.extend([None] * (token + 1 - len(node)))
            if following is None or not isinstance(node[token], list | dict):
                node[token] = fresh
            node = node[token]
        else:
            return False
    return True


def parse_generate_content(payload: JsonObject, errors: ErrorReporter) -> ModelResponse:
    """Parse a whole (non-streamed) `generateContent` response.

    Raises:
        ProviderError: When the body is an error, or has neither candidates nor a block reason.
        MalformedToolCall: When Gemini reports a malformed function call.
    """
    parser = GeminiStreamParser(errors)
    blocked = get_str(get_object(payload, "promptFeedback"), "blockReason")
    if not get_list(payload, "candidates") and "error" not in payload and not blocked:
        raise errors.broken(
            f"The {errors.provider} response has no candidates.", body=dumps(payload)
        )
    parser.add_chunk(payload)
    return parser.build()
