"""`OpenAIResponsesModel`: OpenAI models through the Responses API (`POST /v1/responses`).

Tidemill keeps the whole conversation itself, so by default nothing is
stored at OpenAI (`store: false`) and reasoning comes back encrypted
(`include: ["reasoning.encrypted_content"]`): each reasoning item is kept
as `Reasoning(id=..., redacted_data=...)` and sent back as an input item on
the next turn, which lets reasoning models carry their thinking across
tool calls without server-side state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import cast

import httpx
from pydantic import JsonValue

from tidemill.llm._adapter import HttpCall, HttpModel
from tidemill.llm._credentials import Credentials, CredentialSource
from tidemill.llm._failures import ErrorReporter
from tidemill.llm._json import JsonObject, dumps
from tidemill.llm._model import ForcedTool, ModelRequest, ModelSettings, OutputFormat
from tidemill.llm._options import Body, RequestFields
from tidemill.llm._retry import RetryPolicy
from tidemill.llm._strict_schema import openai_schema
from tidemill.llm.openai._dialects import openai_headers
from tidemill.llm.openai._responses_fields import responses_fields
from tidemill.llm.openai._responses_stream import (
    PROVIDER,
    ResponsesStreamParser,
    parse_response_object,
)
from tidemill.llm.openai._responses_wire import (
    ResponsesContentPart,
    ResponsesFunctionTool,
    ResponsesInputItem,
    ResponsesReasoningItem,
    ResponsesReasoningParam,
    ResponsesRequest,
    ResponsesTextFormat,
)
from tidemill.types import Message, ModelResponse, Reasoning, Role, ToolDefinition

__all__ = ["RESPONSES_SOURCE", "OpenAIResponsesModel", "build_responses_request"]

RESPONSES_SOURCE = CredentialSource(
    PROVIDER,
    "OPENAI_API_KEY",
    "https://api.openai.com/v1",
    base_url_env="OPENAI_BASE_URL",
    organization_env="OPENAI_ORG_ID",
    project_env="OPENAI_PROJECT_ID",
)
"""The same key and base URL as `openai:`."""

_ENCRYPTED_REASONING = "reasoning.encrypted_content"


class OpenAIResponsesModel(HttpModel):
    """An OpenAI model behind the Responses API.

    Use it for OpenAI's reasoning models in tool-calling loops: their
    reasoning survives from one call to the next, which Chat Completions
    cannot do.

    Args:
        model_name: The model id (`gpt-5`, `o4-mini`, `gpt-4.1`, ...).
        api_key: The key; by default `OPENAI_API_KEY`.
        base_url: The API root (default `https://api.openai.com/v1`, or `OPENAI_BASE_URL`).
        organization: OpenAI organization id (`OPENAI_ORG_ID`).
        project: OpenAI project id (`OPENAI_PROJECT_ID`).
        headers: Extra headers for every request.
        credentials: All of the above in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds (default: 10 s connect, 600 s read).
        retry: The retry policy (default: 2 retries with backoff).
        settings: Default settings of every call (`temperature`, `max_tokens`, ...);
            `stop` and `seed` have no Responses equivalent and are left out.
        reasoning_effort: For reasoning models: `minimal`, `low`, `medium` or `high`.
        reasoning_summary: Ask for reasoning summaries: `auto`, `concise` or `detailed`.
        store: Let OpenAI store responses. Off by default; then reasoning is
            requested encrypted so it can be sent back.

    Raises:
        ConfigurationError: Without an API key.

    Examples:
        >>> model = OpenAIResponsesModel("gpt-5", api_key="sk-test", reasoning_effort="low")
        >>> call = model.build_call(ModelRequest([]), stream=True)
        >>> call.url, call.body["store"], call.body["include"]
        ('https://api.openai.com/v1/responses', False, ['reasoning.encrypted_content'])
    """

    supports_output_format = True

    def __init__(
        self,
        model_name: str,
        *,
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
        reasoning_summary: str | None = None,
        store: bool = False,
    ) -> None:
        resolved = RESPONSES_SOURCE.resolve(
            credentials,
            api_key=api_key,
            base_url=base_url,
            organization=organization,
            project=project,
            headers=headers,
        )
        super().__init__(
            model_name,
            provider=PROVIDER,
            credentials=resolved,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            settings=settings,
            auth_hint=RESPONSES_SOURCE.auth_hint,
        )
        self.reasoning_effort = reasoning_effort
        self.reasoning_summary = reasoning_summary
        self.store = store
        self._errors = ErrorReporter(PROVIDER, resolved.secrets(), RESPONSES_SOURCE.auth_hint)

    def build_call(self, request: ModelRequest, *, stream: bool) -> HttpCall:
        """Build the POST to `{base_url}/responses`."""
        reasoning = ResponsesReasoningParam()
        if self.reasoning_effort is not None:
            reasoning["effort"] = self.reasoning_effort
        if self.reasoning_summary is not None:
            reasoning["summary"] = self.reasoning_summary
        body = build_responses_request(
            self.model_name,
            request,
            settings=self.merged_settings(request),
            reasoning=reasoning or None,
            store=self.store,
            stream=stream,
        )
        url = f"{self.credentials.base_url}/responses"
        return HttpCall(url, openai_headers(self.credentials), body)

    def parse_response(self, payload: JsonObject) -> ModelResponse:
        """Parse a whole Response object."""
        return parse_response_object(payload, self._errors)

    def stream_parser(self) -> ResponsesStreamParser:
        """A parser for one streamed response."""
        return ResponsesStreamParser(self._errors)

    @property
    def request_fields(self) -> RequestFields:
        """What the Responses API makes of each request field."""
        return responses_fields()

    def describe(self) -> dict[str, JsonValue]:
        """Describe the model (never the key)."""
        return {**super().describe(), "api": "responses", "store": self.store}


def build_responses_request(
    model: str,
    request: ModelRequest,
    *,
    settings: ModelSettings | None = None,
    reasoning: ResponsesReasoningParam | None = None,
    store: bool = False,
    stream: bool = False,
) -> ResponsesRequest:
    """Build the Responses body for `request`.

    Messages become input items in order: system and user messages as
    messages, an assistant turn as its reasoning items, its text and its
    `function_call`s, a tool result as a `function_call_output`. An
    `output_format` becomes `text.format`: `{"type": "json_schema", name,
    schema, strict}` (the schema made strict when asked), or
    `{"type": "json_object"}` without a schema.

    Examples:
        >>> from tidemill.types import Message
        >>> build_responses_request("gpt-4.1", ModelRequest([Message.user("Hi")]), store=True)
        {'model': 'gpt-4.1', 'input': [{'role': 'user', 'content': 'Hi'}], 'stream': False, \
'store': True}
    """
    settings = request.settings if settings is None else settings
    body = ResponsesRequest(model=model, input=_items(request.messages, store=store))
    if request.tools:
        body["tools"] = [_tool(tool) for tool in request.tools]
    if request.output_format is not None:
        body["text"] = {"format": _text_format(request.output_format)}
    body["stream"] = stream
    body["store"] = store
    if not store:
        body["include"] = [_ENCRYPTED_REASONING]
    if reasoning:
        body["reasoning"] = reasoning
    if "temperature" in settings:
        body["temperature"] = settings["temperature"]
    if "top_p" in settings:
        body["top_p"] = settings["top_p"]
    if "max_tokens" in settings:
        body["max_output_tokens"] = settings["max_tokens"]
    wire = cast(Body, body)
    if request.tools and request.tool_choice != "auto":
        choice = request.tool_choice
        wire["tool_choice"] = (
            {"type": "function", "name": choice.name} if isinstance(choice, ForcedTool) else choice
        )
    if request.options:  # as `responses_fields` says: most as they are
        responses_fields().apply(wire, request.options)
    return body


def _items(messages: Sequence[Message], *, store: bool) -> list[ResponsesInputItem]:
    items: list[ResponsesInputItem] = []
    for message in messages:
        if message.role is Role.SYSTEM:
            items.append({"role": "system", "content": message.content})
        elif message.role is Role.USER:
            items.append({"role": "user", "content": _user_content(message)})
        elif message.role is Role.ASSISTANT:
            items += _reasoning_items(message.reasoning, store=store)
            if message.content:
                items.append({"role": "assistant", "content": message.content})
            for call in message.tool_calls:
                arguments = (
                    call.raw_arguments if call.raw_arguments is not None else dumps(call.arguments)
                )
                items.append(
                    {
                        "type": "function_call",
                        "call_id": call.id,
                        "name": call.name,
                        "arguments": arguments,
                    }
                )
        else:
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.tool_call_id or "",
                    "output": message.content,
                }
            )
    return items


def _user_content(message: Message) -> str | list[ResponsesContentPart]:
    if not message.images:
        return message.content
    parts: list[ResponsesContentPart] = []
    if message.content:
        parts.append({"type": "input_text", "text": message.content})
    for image in message.images:
        detail = image.detail or "auto"
        parts.append({"type": "input_image", "image_url": image.url, "detail": detail})
    return parts


def _reasoning_items(
    reasoning: Sequence[Reasoning], *, store: bool
) -> list[ResponsesReasoningItem]:
    """Our own reasoning, one item per id, its summary parts in order.

    Without `store` an item can only be sent back with its encrypted
    content; one that has none (or another provider's reasoning) is left out.
    """
    items: list[ResponsesReasoningItem] = []
    for piece in reasoning:
        if piece.provider not in (None, PROVIDER) or not piece.id:
            continue
        if items and items[-1]["id"] == piece.id:
            item = items[-1]
        else:
            item = {"type": "reasoning", "id": piece.id, "summary": []}
            items.append(item)
        if piece.text:
            item["summary"].append({"type": "summary_text", "text": piece.text})
        if piece.redacted_data and "encrypted_content" not in item:
            item["encrypted_content"] = piece.redacted_data
    return [item for item in items if store or "encrypted_content" in item]


def _tool(tool: ToolDefinition) -> ResponsesFunctionTool:
    function = ResponsesFunctionTool(
        type="function", name=tool.name, parameters=tool.parameters, strict=False
    )
    if tool.description:
        function["description"] = tool.description
    return function


def _text_format(output: OutputFormat) -> ResponsesTextFormat:
    if output.schema is None:
        return {"type": "json_object"}
    schema = openai_schema(output.schema, strict=output.strict)
    if output.description:
        return {
            "type": "json_schema",
            "name": output.name,
            "description": output.description,
            "schema": schema,
            "strict": output.strict,
        }
    return {"type": "json_schema", "name": output.name, "schema": schema, "strict": output.strict}
