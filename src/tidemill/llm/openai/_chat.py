"""`OpenAIChatModel`: OpenAI Chat Completions and every API that copies it.

One adapter serves `openai:` and the OpenAI-compatible vendors (`mistral:`,
`deepseek:`, `groq:`, `together:`, `openrouter:`, `ollama:`, `vllm:`,
`openai-compatible:`); a dialect from `tidemill.llm.openai._dialects` holds
each vendor's base URL, key variable and quirks.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import cast

import httpx
from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.llm._adapter import HttpCall, HttpModel
from tidemill.llm._credentials import Credentials
from tidemill.llm._failures import ErrorReporter, retyped
from tidemill.llm._json import JsonObject, dumps
from tidemill.llm._model import (
    ForcedTool,
    ModelRequest,
    ModelSettings,
    ModelStreamEvent,
    ToolChoice,
)
from tidemill.llm._options import Body, RequestFields
from tidemill.llm._retry import RetryPolicy
from tidemill.llm.openai._chat_stream import ChatStreamParser, parse_chat_completion
from tidemill.llm.openai._chat_wire import (
    ChatAssistantMessage,
    ChatContentPart,
    ChatFunction,
    ChatImagePart,
    ChatMessage,
    ChatRequest,
    ChatTool,
    ChatToolCall,
    ChatToolChoice,
    ChatUserMessage,
)
from tidemill.llm.openai._dialects import DIALECTS, OpenAIDialect, openai_headers
from tidemill.types import ImageRef, Message, ModelResponse, Role, ToolDefinition

__all__ = ["OpenAIChatModel", "build_chat_request"]


class OpenAIChatModel(HttpModel):
    """A model behind OpenAI's Chat Completions API or an OpenAI-compatible one.

    Args:
        model_name: The model id (`gpt-4o-mini`, `mistral-large-latest`, ...).
        provider: `openai` or a compatible vendor's name (`mistral`,
            `deepseek`, `groq`, `together`, `openrouter`, `ollama`, `vllm`,
            `openai-compatible`), or an `OpenAIDialect` for another server.
        api_key: The key; by default read from the vendor's variable (`OPENAI_API_KEY`, ...).
        base_url: The API root (`https://api.openai.com/v1`); needed for `openai-compatible`.
        organization: OpenAI organization id (`OPENAI_ORG_ID`).
        project: OpenAI project id (`OPENAI_PROJECT_ID`).
        headers: Extra headers for every request.
        credentials: All of the above in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds (default: 10 s connect, 600 s read).
        retry: The retry policy (default: 2 retries with backoff).
        settings: Default settings of every call (`temperature`, `max_tokens`, ...).
        reasoning_effort: For reasoning models: `minimal`, `low`, `medium` or `high`.

    Raises:
        ConfigurationError: For an unknown provider, or no API key where one is needed.

    Examples:
        >>> model = OpenAIChatModel("gpt-4o-mini", api_key="sk-test")
        >>> model.provider, model.model_name
        ('openai', 'gpt-4o-mini')
        >>> local = OpenAIChatModel("llama3.2", provider="ollama", base_url="http://gpu:11434/v1")
        >>> local.build_call(ModelRequest([]), stream=False).url
        'http://gpu:11434/v1/chat/completions'
    """

    supports_output_format = True

    def __init__(
        self,
        model_name: str,
        *,
        provider: str | OpenAIDialect = "openai",
        api_key: str | None = None,
        base_url: str | None = None,
        organization: str | None = None,
        project: str | None = None,
        headers: Mapping[str, str] | None = None,
        credentials: Credentials | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
        reasoning_effort: str | None = None,
    ) -> None:
        self.dialect = _dialect(provider)
        source = self.dialect.source
        resolved = source.resolve(
            credentials,
            api_key=api_key,
            base_url=base_url,
            organization=organization,
            project=project,
            headers=headers,
        )
        super().__init__(
            model_name,
            provider=self.dialect.name,
            credentials=resolved,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            settings=settings,
            auth_hint=source.auth_hint,
        )
        self.reasoning_effort = reasoning_effort
        self._errors = ErrorReporter(self.provider, resolved.secrets(), source.auth_hint)

    def build_call(self, request: ModelRequest, *, stream: bool) -> HttpCall:
        """Build the POST to `{base_url}/chat/completions`."""
        body = build_chat_request(
            self.model_name,
            request,
            dialect=self.dialect,
            settings=self.merged_settings(request),
            stream=stream,
        )
        if self.reasoning_effort is not None:  # the request's own, from its options, wins
            body.setdefault("reasoning_effort", self.reasoning_effort)
        return HttpCall(f"{self.credentials.base_url}/chat/completions", self._headers(), body)

    def parse_response(self, payload: JsonObject) -> ModelResponse:
        """Parse a whole Chat Completions response."""
        return parse_chat_completion(payload, self._errors)

    def stream_parser(self) -> ChatStreamParser:
        """A parser for one streamed response."""
        return ChatStreamParser(self._errors)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Make one call and return the whole response; see `HttpModel.request`."""
        with retyped(self.dialect.translate_error):
            return await super().request(request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        """Make one streamed call; see `HttpModel.stream`."""
        events = super().stream(request)
        async with aclosing(events):
            with retyped(self.dialect.translate_error):
                async for event in events:
                    yield event

    @property
    def request_fields(self) -> RequestFields:
        """What the API makes of each request field: every one is sent as it is."""
        return self.dialect.request_fields

    def describe(self) -> dict[str, JsonValue]:
        """Describe the model (never the key)."""
        return {**super().describe(), "api": "chat.completions"}

    def _headers(self) -> dict[str, str]:
        return openai_headers(self.credentials)


def build_chat_request(
    model: str,
    request: ModelRequest,
    *,
    dialect: OpenAIDialect | None = None,
    settings: ModelSettings | None = None,
    stream: bool = False,
) -> ChatRequest:
    """Build the Chat Completions body for `request`.

    An `output_format` becomes `response_format`: `{"type": "json_schema",
    "json_schema": {name, schema, strict}}` (the schema made strict when
    asked), or `{"type": "json_object"}` without a schema or for a vendor
    that only has JSON mode (DeepSeek). A `tool_choice` other than `auto`
    is sent beside the tools; the request's `options` go into the body as
    they are (`stream_options` beside the `include_usage` set here).

    Raises:
        UnsupportedOption: For an option that would overwrite a field the
            request sets already.

    Examples:
        >>> from tidemill.types import Message
        >>> build_chat_request("gpt-4o", ModelRequest([Message.user("Hi")]), stream=True)
        {'model': 'gpt-4o', 'messages': [{'role': 'user', 'content': 'Hi'}], 'stream': True, \
'stream_options': {'include_usage': True}}
    """
    dialect = dialect or DIALECTS["openai"]
    settings = request.settings if settings is None else settings
    body = ChatRequest(model=model, messages=_messages(request.messages, dialect))
    if request.tools:
        body["tools"] = [_tool(tool) for tool in request.tools]
        if request.tool_choice != "auto":
            body["tool_choice"] = _tool_choice(request.tool_choice)
    if request.output_format is not None:
        body["response_format"] = dialect.response_format(request.output_format)
    body["stream"] = stream
    if stream and dialect.stream_usage:
        body["stream_options"] = {"include_usage": True}
    if "temperature" in settings:
        body["temperature"] = settings["temperature"]
    if "top_p" in settings:
        body["top_p"] = settings["top_p"]
    if "max_tokens" in settings:
        body[dialect.max_tokens_field] = settings["max_tokens"]
    if "stop" in settings:
        body["stop"] = list(settings["stop"])
    if "seed" in settings:
        body[dialect.seed_field] = settings["seed"]
    if request.options:
        dialect.request_fields.apply(cast(Body, body), request.options)
    return body


def _tool_choice(choice: ToolChoice) -> ChatToolChoice:
    if isinstance(choice, ForcedTool):
        return {"type": "function", "function": {"name": choice.name}}
    return choice


def _messages(messages: Sequence[Message], dialect: OpenAIDialect) -> list[ChatMessage]:
    wire: list[ChatMessage] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            wire.append({"role": "system", "content": message.content})
        elif message.role is Role.USER:
            wire.append(_user(message, dialect))
        elif message.role is Role.ASSISTANT:
            wire.append(_assistant(message, dialect))
        else:
            wire.append(
                {
                    "role": "tool",
                    "tool_call_id": dialect.call_id(message.tool_call_id or ""),
                    "content": message.content,
                }
            )
    return wire


def _user(message: Message, dialect: OpenAIDialect) -> ChatUserMessage:
    content: str | list[ChatContentPart] = message.content
    if message.images:
        for image in message.images:
            dialect.check_image(image)
        parts: list[ChatContentPart] = []
        if message.content:
            parts.append({"type": "text", "text": message.content})
        parts += [_image(image) for image in message.images]
        content = parts
    wire = ChatUserMessage(role="user", content=content)
    if message.name:
        wire["name"] = message.name
    return wire


def _image(image: ImageRef) -> ChatImagePart:
    part = ChatImagePart(type="image_url", image_url={"url": image.url})
    if image.detail is not None:
        part["image_url"]["detail"] = image.detail
    return part


def _assistant(message: Message, dialect: OpenAIDialect) -> ChatAssistantMessage:
    calls: list[ChatToolCall] = [
        {
            "id": dialect.call_id(call.id),
            "type": "function",
            "function": {
                "name": call.name,
                "arguments": call.raw_arguments
                if call.raw_arguments is not None
                else dumps(call.arguments),
            },
        }
        for call in message.tool_calls
    ]
    # OpenAI wants `null`, not "", as the content of a turn that only calls tools.
    content = message.content if message.content or not calls else None
    wire = ChatAssistantMessage(role="assistant", content=content)
    if calls:
        wire["tool_calls"] = calls
    if message.name:
        wire["name"] = message.name
    dialect.add_assistant_fields(message, wire)
    return wire


def _tool(tool: ToolDefinition) -> ChatTool:
    if tool.description:
        function = ChatFunction(
            name=tool.name, description=tool.description, parameters=tool.parameters
        )
    else:
        function = ChatFunction(name=tool.name, parameters=tool.parameters)
    return ChatTool(type="function", function=function)


def _dialect(provider: str | OpenAIDialect) -> OpenAIDialect:
    if isinstance(provider, OpenAIDialect):
        return provider
    try:
        return DIALECTS[provider]
    except KeyError:
        raise ConfigurationError(
            f"{provider!r} is not an OpenAI-compatible provider.",
            hint=f"Use one of {', '.join(sorted(DIALECTS))}, or pass an OpenAIDialect.",
        ) from None
