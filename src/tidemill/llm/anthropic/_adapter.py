"""`AnthropicModel`: Claude through the Anthropic Messages API."""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import Literal, cast

import httpx
from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.llm._adapter import HttpCall, HttpModel
from tidemill.llm._credentials import Credentials, CredentialSource
from tidemill.llm._failures import ErrorReporter
from tidemill.llm._forced_output import forced_text, forced_text_stream, output_tool
from tidemill.llm._json import JsonObject
from tidemill.llm._model import ModelRequest, ModelSettings, ModelStreamEvent
from tidemill.llm._options import Body, RequestFields
from tidemill.llm._retry import RetryPolicy
from tidemill.llm._tool_choice import ChoiceKind, plan_tool_choice
from tidemill.llm.anthropic._fields import anthropic_fields, rejects_sampling
from tidemill.llm.anthropic._stream import PROVIDER, MessagesStreamParser, parse_message
from tidemill.llm.anthropic._wire import (
    ContentBlock,
    ImageBlock,
    MessageParam,
    MessagesRequest,
    ToolChoiceParam,
    ToolParam,
    ToolResultBlock,
)
from tidemill.types import ImageRef, Message, ModelResponse, Reasoning, Role, ToolDefinition

__all__ = [
    "ANTHROPIC_SOURCE",
    "API_VERSION",
    "AnthropicModel",
    "build_messages_request",
    "rejects_sampling",
]

_log = logging.getLogger("tidemill.llm")

API_VERSION = "2023-06-01"
"""The `anthropic-version` header sent with every request."""

ANTHROPIC_SOURCE = CredentialSource(
    PROVIDER,
    "ANTHROPIC_API_KEY",
    "https://api.anthropic.com",
    base_url_env="ANTHROPIC_BASE_URL",
)
"""Where the Anthropic key and base URL come from."""


def default_max_tokens(model: str) -> int:
    """The `max_tokens` sent when the settings give none (the API requires one).

    Examples:
        >>> default_max_tokens("claude-sonnet-4-5"), default_max_tokens("claude-3-haiku-20240307")
        (8192, 4096)
    """
    old = model.startswith("claude-3-") and not model.startswith(("claude-3-5", "claude-3-7"))
    return 4096 if old else 8192


class AnthropicModel(HttpModel):
    """A Claude model behind the Anthropic Messages API.

    Args:
        model_name: The model id (`claude-sonnet-4-5`, ...).
        api_key: The key; by default `ANTHROPIC_API_KEY`.
        base_url: The API root (default `https://api.anthropic.com`, or `ANTHROPIC_BASE_URL`).
        headers: Extra headers for every request.
        credentials: All of the above in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds (default: 10 s connect, 600 s read).
        retry: The retry policy (default: 2 retries with backoff).
        settings: Default settings of every call (`temperature`, `max_tokens`, ...).
        max_tokens: The `max_tokens` when the settings give none (Anthropic requires one);
            by default 8192, or 4096 for the Claude 3 models that allow no more.
        thinking_budget: Turn on extended thinking with this many tokens (at least 1024).
        betas: Beta features to enable, sent as the `anthropic-beta` header.

    Raises:
        ConfigurationError: Without an API key, or with a thinking budget not
            below `max_tokens`.

    Examples:
        >>> model = AnthropicModel("claude-sonnet-4-5", api_key="sk-ant-test", thinking_budget=2048)
        >>> model.provider, model.max_tokens
        ('anthropic', 8192)
    """

    supports_output_format = True

    def __init__(
        self,
        model_name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        credentials: Credentials | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
        max_tokens: int | None = None,
        thinking_budget: int | None = None,
        betas: Sequence[str] = (),
    ) -> None:
        resolved = ANTHROPIC_SOURCE.resolve(
            credentials, api_key=api_key, base_url=base_url, headers=headers
        )
        super().__init__(
            model_name,
            provider=PROVIDER,
            credentials=resolved,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            settings=settings,
            auth_hint=ANTHROPIC_SOURCE.auth_hint,
        )
        self.max_tokens = max_tokens or default_max_tokens(model_name)
        if thinking_budget is not None and thinking_budget >= self.max_tokens:
            raise ConfigurationError(
                f"The thinking budget ({thinking_budget}) must be below max_tokens "
                f"({self.max_tokens}).",
                hint=f"Pass max_tokens={thinking_budget + 4096} or a smaller thinking_budget.",
            )
        self.thinking_budget = thinking_budget
        self.betas = tuple(betas)
        self._errors = ErrorReporter(PROVIDER, resolved.secrets(), ANTHROPIC_SOURCE.auth_hint)

    def build_call(self, request: ModelRequest, *, stream: bool) -> HttpCall:
        """Build the POST to `{base_url}/v1/messages`."""
        body = build_messages_request(
            self.model_name,
            request,
            settings=self.merged_settings(request),
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
            stream=stream,
        )
        headers = {"anthropic-version": API_VERSION}
        if self.credentials.api_key:
            headers["x-api-key"] = self.credentials.api_key
        if self.betas:
            headers["anthropic-beta"] = ",".join(self.betas)
        headers.update(self.credentials.headers)
        return HttpCall(f"{self.credentials.base_url}/v1/messages", headers, body)

    def parse_response(self, payload: JsonObject) -> ModelResponse:
        """Parse a whole Messages response."""
        return parse_message(payload, self._errors)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Make one call; an `output_format`'s forced tool call comes back as the text."""
        return forced_text(await super().request(request), request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        """Make one streamed call; the forced output tool's arguments stream as text."""
        async for event in forced_text_stream(super().stream(request), request):
            yield event

    def stream_parser(self) -> MessagesStreamParser:
        """A parser for one streamed response."""
        return MessagesStreamParser(self._errors)

    @property
    def request_fields(self) -> RequestFields:
        """What the Messages API makes of each request field, for this model."""
        return anthropic_fields(self.model_name, thinking=self.thinking_budget is not None)

    def describe(self) -> dict[str, JsonValue]:
        """Describe the model (never the key)."""
        return {**super().describe(), "api": "messages", "thinking_budget": self.thinking_budget}


def build_messages_request(
    model: str,
    request: ModelRequest,
    *,
    settings: ModelSettings | None = None,
    max_tokens: int | None = None,
    thinking_budget: int | None = None,
    stream: bool = False,
) -> MessagesRequest:
    """Build the Messages body for `request`.

    System messages go to the top-level `system`; tool results become
    `tool_result` blocks of a user turn, and consecutive turns of one role
    are merged, as the API requires. `seed` has no Anthropic equivalent and
    is left out.

    An `output_format` becomes a tool with its schema (`output_tool`) and a
    `tool_choice` that forces it: `{"type": "tool", "name": ...}` alone,
    `{"type": "any"}` beside the request's own tools, and `auto` with
    extended thinking, which refuses forced tool use. `AnthropicModel` turns
    the call back into the answer's text. The request's own `tool_choice`
    becomes `none`, `any` (`required`) or `tool` (a `ForcedTool`), as
    `plan_tool_choice` settles it with the output tool, and its `options`
    are sent as `anthropic_fields` says (`user` as `metadata.user_id`, ...).

    Raises:
        UnsupportedOption: For an option the API has no equivalent for, or a
            forced tool choice with extended thinking.

    Examples:
        >>> from tidemill.types import Message
        >>> build_messages_request("claude-sonnet-4-5", ModelRequest([Message.user("Hi")]))
        {'model': 'claude-sonnet-4-5', 'max_tokens': 8192, \
'messages': [{'role': 'user', 'content': 'Hi'}], 'stream': False}
    """
    settings = request.settings if settings is None else settings
    limit = settings.get("max_tokens") or max_tokens or default_max_tokens(model)
    body = MessagesRequest(model=model, max_tokens=limit, messages=[])
    system = [m.content for m in request.messages if m.role is Role.SYSTEM and m.content]
    if system:
        body["system"] = "\n\n".join(system)
    body["messages"] = _messages(request.messages)
    plan = plan_tool_choice(
        request,
        output_tool(request),
        provider=PROVIDER,
        can_force=thinking_budget is None,
        cannot_force="with extended thinking on, Claude takes only `auto` or `none`.",
    )
    if plan.tools:
        body["tools"] = [_tool(tool) for tool in plan.tools]
    if plan.kind != "auto" or request.output_format is not None:
        body["tool_choice"] = _tool_choice(plan.kind, plan.name)
    body["stream"] = stream
    if thinking_budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    sampling = [name for name in ("temperature", "top_p") if name in settings]
    if sampling and rejects_sampling(model):
        _log.warning("%s does not take %s; left out of the request.", model, " or ".join(sampling))
    else:
        if "temperature" in settings:
            body["temperature"] = settings["temperature"]
        if "top_p" in settings:
            body["top_p"] = settings["top_p"]
    if "stop" in settings:
        body["stop_sequences"] = list(settings["stop"])
    if request.options:
        fields = anthropic_fields(model, thinking=thinking_budget is not None)
        fields.apply(cast(Body, body), request.options)
    return body


def _messages(messages: Sequence[Message]) -> list[MessageParam]:
    turns: list[tuple[Literal["user", "assistant"], list[ContentBlock]]] = []
    for message in messages:
        role: Literal["user", "assistant"]
        if message.role is Role.SYSTEM:
            continue
        if message.role is Role.ASSISTANT:
            role, blocks = "assistant", _assistant_blocks(message)
        elif message.role is Role.TOOL:
            role = "user"
            result = ToolResultBlock(
                type="tool_result", tool_use_id=message.tool_call_id or "", content=message.content
            )
            if message.is_error:
                result["is_error"] = True
            blocks = [result]
        else:
            role = "user"
            blocks = [_image(image) for image in message.images]
            if message.content:
                blocks.append({"type": "text", "text": message.content})
        if not blocks:
            continue  # the API refuses empty turns
        if turns and turns[-1][0] == role:
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))
    return [{"role": role, "content": _collapse(blocks)} for role, blocks in turns]


def _collapse(blocks: list[ContentBlock]) -> str | list[ContentBlock]:
    """A turn of one text block is sent as a plain string."""
    if len(blocks) == 1 and blocks[0]["type"] == "text":
        return blocks[0]["text"]
    return blocks


def _assistant_blocks(message: Message) -> list[ContentBlock]:
    blocks: list[ContentBlock] = [
        block for reasoning in message.reasoning if (block := _thinking(reasoning)) is not None
    ]
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments}
        )
    return blocks


def _thinking(reasoning: Reasoning) -> ContentBlock | None:
    """Anthropic's own thinking, sent back verbatim; other providers' is dropped."""
    if reasoning.provider not in (None, PROVIDER):
        return None
    if reasoning.redacted_data:
        return {"type": "redacted_thinking", "data": reasoning.redacted_data}
    if reasoning.signature:
        return {"type": "thinking", "thinking": reasoning.text, "signature": reasoning.signature}
    return None  # unsigned thinking is refused by the API


def _image(image: ImageRef) -> ImageBlock:
    if image.url.startswith("data:"):
        header, _, data = image.url.partition(",")
        media_type = header[len("data:") :].split(";")[0] or image.media_type or "image/png"
        if header.endswith(";base64"):
            return {
                "type": "image",
                "source": {"type": "base64", "media_type": media_type, "data": data},
            }
    return {"type": "image", "source": {"type": "url", "url": image.url}}


def _tool(tool: ToolDefinition) -> ToolParam:
    if tool.description:
        return ToolParam(name=tool.name, description=tool.description, input_schema=tool.parameters)
    return ToolParam(name=tool.name, input_schema=tool.parameters)


def _tool_choice(kind: ChoiceKind, name: str | None) -> ToolChoiceParam:
    if kind == "tool":
        return {"type": "tool", "name": name or ""}
    return {"type": kind}
