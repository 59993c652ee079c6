"""`BedrockModel`: any Amazon Bedrock model through the Converse API, over plain httpx.

`POST {endpoint}/model/{modelId}/converse` answers with JSON and
`.../converse-stream` with an AWS event stream (decoded by
`tidemill.llm.http._eventstream`), parsed by `_stream`. Requests are
SigV4-signed with the keys `_aws` finds (`BedrockAccess.sign`), or carry a
Bedrock API key as a bearer token; no AWS SDK is involved in the call itself.

The model id may be a foundation model (`anthropic.claude-sonnet-4-5-20250929-v1:0`),
a cross-region inference profile (`us.anthropic...`, `global.anthropic...`) or
an ARN; it is percent-encoded into the path (`:` becomes `%3A`, `/` `%2F`).
"""

from __future__ import annotations

import mimetypes
import re
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Literal, cast

import httpx
from pydantic import JsonValue

from tidemill.errors import ConfigurationError, ContextWindowExceeded, ProviderError
from tidemill.llm._adapter import HttpCall, HttpModel
from tidemill.llm._credentials import Credentials
from tidemill.llm._failures import ErrorReporter, retyped
from tidemill.llm._forced_output import forced_text, forced_text_stream, output_tool
from tidemill.llm._json import JsonObject
from tidemill.llm._model import ModelRequest, ModelSettings, ModelStreamEvent
from tidemill.llm._options import Body, RequestFields
from tidemill.llm._retry import RetryPolicy
from tidemill.llm._tool_choice import plan_tool_choice
from tidemill.llm.bedrock._aws import (
    AWS_AUTH_HINT,
    SIGNING_NAME,
    BearerToken,
    key_secrets,
    resolve_bedrock_access,
)
from tidemill.llm.bedrock._fields import bedrock_fields, takes_tool_choice
from tidemill.llm.bedrock._stream import PROVIDER, ConverseStreamParser, parse_converse
from tidemill.llm.bedrock._wire import (
    ConverseContentBlock,
    ConverseImage,
    ConverseInferenceConfig,
    ConverseMessage,
    ConverseReasoningContent,
    ConverseRequest,
    ConverseTool,
    ConverseToolChoice,
    ConverseToolConfig,
    ConverseToolSpec,
    ImageFormat,
)
from tidemill.llm.http._eventstream import EventStreamDecoder
from tidemill.llm.http._sigv4 import AwsKeys
from tidemill.types import (
    ImageRef,
    Message,
    ModelResponse,
    Reasoning,
    ResponseDone,
    Role,
    ToolDefinition,
)

__all__ = [
    "EMPTY_TOOL_RESULT",
    "SIGNING_NAME",
    "BedrockModel",
    "build_converse_request",
    "takes_tool_choice",
]

EMPTY_TOOL_RESULT = "(empty)"
"""What an empty tool result is sent as: Bedrock refuses a blank text block."""

EVENT_STREAM = "application/vnd.amazon.eventstream"

_FORMATS: dict[str, ImageFormat] = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/jpg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
# How Bedrock (and the models behind it) word "the prompt is too long" in a 400.
_CONTEXT = re.compile(
    r"too long|too many input tokens|exceeds? (the )?(context|maximum input)"
    r"|context (limit|window)|input length",
    re.IGNORECASE,
)


class BedrockModel(HttpModel):
    """A model on Amazon Bedrock, called through the Converse API.

    Credentials come from the arguments, the environment, or (with
    `pip install 'tidemill[bedrock]'`) botocore's chain of profiles and
    roles; see `tidemill.llm.bedrock._aws`.

    Args:
        model_name: The model id, inference profile id or ARN.
        region: The AWS region; by default `AWS_REGION` or `AWS_DEFAULT_REGION`.
        access_key_id: The access key id; by default `AWS_ACCESS_KEY_ID`.
        secret_access_key: The secret key; by default `AWS_SECRET_ACCESS_KEY`.
        session_token: The session token of temporary credentials (`AWS_SESSION_TOKEN`).
        api_key: A Bedrock API key, sent as a bearer token instead of signing;
            by default `AWS_BEARER_TOKEN_BEDROCK`.
        profile: A profile of the shared AWS config files (needs botocore).
        base_url: The endpoint (default `https://bedrock-runtime.{region}.amazonaws.com`,
            or `AWS_ENDPOINT_URL_BEDROCK_RUNTIME`).
        headers: Extra headers for every request (not signed).
        credentials: Region, keys and endpoint in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds (default: 10 s connect, 600 s read).
        retry: The retry policy (default: 2 retries with backoff).
        settings: Default settings of every call (`temperature`, `max_tokens`, ...).
        thinking_budget: Turn on Claude's extended thinking with this many tokens.
        additional_model_request_fields: Model-specific fields sent as
            `additionalModelRequestFields` (merged with the thinking setting).

    Raises:
        ConfigurationError: Without a model id, a region or credentials, naming
            what to set (credentials botocore's chain should find are looked
            for on the first call, which raises when there are none).

    Examples:
        >>> model = BedrockModel("us.amazon.nova-micro-v1:0", region="us-east-1",
        ...                      access_key_id="AKIDEXAMPLE", secret_access_key="secret")
        >>> model.build_call(ModelRequest([]), stream=True).url
        'https://bedrock-runtime.us-east-1.amazonaws.com/model/us.amazon.nova-micro-v1%3A0/converse-stream'
    """

    supports_output_format = True

    def __init__(
        self,
        model_name: str,
        *,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
        api_key: str | None = None,
        profile: str | None = None,
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        credentials: Credentials | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
        thinking_budget: int | None = None,
        additional_model_request_fields: Mapping[str, JsonValue] | None = None,
    ) -> None:
        if not model_name.strip():
            raise ConfigurationError(
                f"The bedrock model id {model_name!r} is empty: Bedrock names no model "
                "in the URL then, and there is no default.",
                hint="Give the model id, inference profile id or ARN: "
                "'bedrock:<model id>' (e.g. 'bedrock:us.amazon.nova-micro-v1:0') or "
                "BedrockModel('<model id>').",
                context={"provider": PROVIDER},
            )
        access = resolve_bedrock_access(
            credentials,
            region=region,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            session_token=session_token,
            api_key=api_key,
            profile=profile,
            base_url=base_url,
            headers=headers,
        )
        super().__init__(
            model_name,
            provider=PROVIDER,
            credentials=access.credentials,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            settings=settings,
            auth_hint=AWS_AUTH_HINT,
        )
        self.access = access
        self.thinking_budget = thinking_budget
        self.additional_model_request_fields = dict(additional_model_request_fields or {})
        self._errors = ErrorReporter(PROVIDER, access.credentials.secrets(), AWS_AUTH_HINT)

    @property
    def region(self) -> str:
        """The AWS region calls are signed for."""
        return self.access.region

    def build_call(self, request: ModelRequest, *, stream: bool) -> HttpCall:
        """Build the POST to `/model/{id}/converse` (or `converse-stream`), not yet signed.

        With a bearer token the call is complete; with access keys, `signed`
        adds the signature (the request and stream methods do that).
        """
        body = build_converse_request(
            request,
            settings=self.merged_settings(request),
            thinking_budget=self.thinking_budget,
            additional_fields=self.additional_model_request_fields,
            force_tools=takes_tool_choice(self.model_name),
            fields=self.request_fields,
        )
        operation = "converse-stream" if stream else "converse"
        url = self.access.model_url(self.model_name, operation)
        headers = self.access.headers(EVENT_STREAM if stream else "application/json")
        return HttpCall(url, headers, body)

    async def signed(self, call: HttpCall) -> HttpCall:
        """Return `call` with its SigV4 headers; see `BedrockAccess.sign`.

        Raises:
            ConfigurationError: `MissingCredentialsError` when botocore's chain
                finds no keys (remembered for a while: see `BotocoreKeys`).
        """
        return await self.access.sign(call, found=self._found)

    def _found(self, keys: AwsKeys) -> None:
        if keys.secret_access_key not in self._errors.secrets:  # new keys: scrub them
            self._scrub(keys)

    @property
    def request_fields(self) -> RequestFields:
        """What Converse makes of each request field, for this model."""
        return bedrock_fields(self.model_name, thinking=self.thinking_budget is not None)

    def _scrub(self, keys: AwsKeys) -> None:
        """Scrub keys botocore found from errors too, as keys given up front are."""
        found = key_secrets(keys)
        self.http.add_secrets(found)
        self._errors = ErrorReporter(PROVIDER, (*self._errors.secrets, *found), AWS_AUTH_HINT)

    def parse_response(self, payload: JsonObject) -> ModelResponse:
        """Parse a whole Converse response."""
        return parse_converse(payload, self._errors, self.model_name)

    def stream_parser(self) -> ConverseStreamParser:
        """A parser for one streamed response."""
        return ConverseStreamParser(self._errors, self.model_name)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Make one Converse call and return the whole response.

        Raises:
            ProviderError: Or a subclass, when Bedrock refuses or fails the call.
            MalformedToolCall: When a tool call in the answer is malformed.
        """
        with retyped(translate_bedrock_error):
            call = await self.signed(self.build_call(request, stream=False))
            timeout = self.merged_settings(request).get("timeout")
            payload = await self.http.post_json(
                call.url, call.body, headers=call.headers, time_limit=timeout
            )
            return forced_text(self.priced(self.parse_response(payload)), request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        """Make one ConverseStream call, yielding deltas and `ResponseDone` last.

        Raises:
            ProviderError: Or a subclass, when the call fails, the stream carries
                an exception, is corrupted, or ends before its `metadata` event.
        """
        events = self._events(request)
        if request.output_format is not None:
            events = forced_text_stream(events, request)
        async with aclosing(events):
            with retyped(translate_bedrock_error):
                async for event in events:
                    yield event

    async def _events(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        call = await self.signed(self.build_call(request, stream=True))
        timeout = self.merged_settings(request).get("timeout")
        parser = self.stream_parser()
        decoder = EventStreamDecoder(self.provider)
        chunks = self.http.post_stream(
            call.url, call.body, headers=call.headers, time_limit=timeout
        )
        async with aclosing(chunks):
            async for chunk in chunks:
                for message in decoder.feed(chunk):
                    for delta in parser.feed(message):
                        yield delta
                    if parser.done:
                        break
                if parser.done:
                    break
            else:
                decoder.close()
        yield ResponseDone(response=self.priced(parser.finish()))

    def describe(self) -> dict[str, JsonValue]:
        """Describe the model (never the keys)."""
        auth = "bearer" if isinstance(self.access.auth, BearerToken) else "sigv4"
        return {**super().describe(), "api": "converse", "region": self.region, "auth": auth}


def translate_bedrock_error(error: ProviderError) -> ProviderError:
    """Re-type a Bedrock 400 whose message says the prompt was too long.

    Bedrock passes on the model's own wording ("input length and `max_tokens`
    exceed context limit", "too many input tokens"), which the shared
    mapping does not all know.
    """
    if type(error) is not ProviderError or error.status_code not in (None, 400):
        return error
    if not _CONTEXT.search(error.message):
        return error
    return ContextWindowExceeded(
        error.message,
        provider=error.provider,
        status_code=error.status_code,
        body=error.body,
        code=error.code,
        hint="Shorten the conversation (drop or summarise old turns) or lower max_tokens.",
    )


# -- the request body ------------------------------------------------------------------------


def build_converse_request(
    request: ModelRequest,
    *,
    settings: ModelSettings | None = None,
    thinking_budget: int | None = None,
    additional_fields: Mapping[str, JsonValue] | None = None,
    force_tools: bool = True,
    fields: RequestFields | None = None,
) -> ConverseRequest:
    """Build the Converse body for `request`.

    System messages become `system` blocks. Bedrock wants the conversation
    to alternate between user and assistant, so consecutive turns of one
    role are merged and the results of one round of tool calls go back
    together as `toolResult` blocks of one user turn. Reasoning Bedrock
    produced goes back as it came (text with its signature, or the
    redacted content); unsigned reasoning and other providers' are dropped.
    `seed` has no Converse equivalent and is left out.

    Converse has no JSON response mode, so an `output_format` becomes a tool
    with its schema, forced with `toolChoice` (`{"tool": {"name": ...}}`
    alone, `{"any": {}}` beside the request's own tools). With thinking on,
    or `force_tools=False` (models that refuse a forcing `toolChoice`), it is
    left to the model's choice. `BedrockModel` turns the call back into text.
    The request's own `tool_choice` becomes `{"any": {}}` (`required`) or
    `{"tool": ...}` (a `ForcedTool`); Converse has no `none`, so with `none`
    the request's tools are not sent. Its `options` are sent as `fields`
    (`bedrock_fields`) says: `metadata` as `requestMetadata`, ...

    Raises:
        ConfigurationError: For an image given by an `http(s)` URL, which
            Bedrock cannot fetch (use a `data:` URL or an `s3://` URI).
        UnsupportedOption: For an option Converse has no equivalent for, or a
            forced tool choice the model cannot take.

    Examples:
        >>> from tidemill.types import Message
        >>> build_converse_request(ModelRequest([Message.system("Be brief."), Message.user("Hi")]))
        {'messages': [{'role': 'user', 'content': [{'text': 'Hi'}]}], \
'system': [{'text': 'Be brief.'}]}
    """
    settings = request.settings if settings is None else settings
    body = ConverseRequest(messages=_messages(request.messages))
    system = [m.content for m in request.messages if m.role is Role.SYSTEM and m.content]
    if system:
        body["system"] = [{"text": text} for text in system]
    config = _inference_config(settings)
    if config:
        body["inferenceConfig"] = config
    plan = plan_tool_choice(
        request,
        output_tool(request),
        provider=PROVIDER,
        can_force=force_tools and thinking_budget is None,
        cannot_force=(
            "with extended thinking on, the model takes no forced tool choice."
            if thinking_budget is not None
            else "this model takes no forcing toolChoice (Bedrock has it for Anthropic "
            "Claude and Amazon Nova models)."
        ),
        has_none=False,
    )
    if plan.tools:
        tool_config = ConverseToolConfig(tools=[_tool(tool) for tool in plan.tools])
        if plan.kind in ("any", "tool"):
            tool_config["toolChoice"] = _tool_choice(plan.kind, plan.name or "")
        body["toolConfig"] = tool_config
    extra: dict[str, JsonValue] = dict(additional_fields or {})
    if thinking_budget is not None:
        extra["thinking"] = {"type": "enabled", "budget_tokens": thinking_budget}
    if extra:
        body["additionalModelRequestFields"] = extra
    if request.options:
        fields = fields or bedrock_fields("", thinking=thinking_budget is not None)
        fields.apply(cast(Body, body), request.options)
    return body


def _inference_config(settings: ModelSettings) -> ConverseInferenceConfig:
    config = ConverseInferenceConfig()
    if "max_tokens" in settings:
        config["maxTokens"] = settings["max_tokens"]
    if "temperature" in settings:
        config["temperature"] = settings["temperature"]
    if "top_p" in settings:
        config["topP"] = settings["top_p"]
    if "stop" in settings:
        config["stopSequences"] = list(settings["stop"])
    return config


def _messages(messages: Sequence[Message]) -> list[ConverseMessage]:
    turns: list[ConverseMessage] = []
    for message in messages:
        role: Literal["user", "assistant"]
        if message.role is Role.SYSTEM:
            continue
        if message.role is Role.ASSISTANT:
            role, blocks = "assistant", _assistant_blocks(message)
        elif message.role is Role.TOOL:
            role, blocks = "user", [_tool_result(message)]
        else:
            role = "user"
            blocks = [{"image": _image(image)} for image in message.images]
            if message.content:
                blocks.append({"text": message.content})
        if not blocks:
            continue  # Bedrock refuses a message without content
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _assistant_blocks(message: Message) -> list[ConverseContentBlock]:
    blocks: list[ConverseContentBlock] = [
        {"reasoningContent": content}
        for reasoning in message.reasoning
        if (content := _reasoning(reasoning)) is not None
    ]
    if message.content:
        blocks.append({"text": message.content})
    for call in message.tool_calls:
        arguments = call.arguments if call.raw_arguments is None else {}
        blocks.append({"toolUse": {"toolUseId": call.id, "name": call.name, "input": arguments}})
    return blocks


def _reasoning(reasoning: Reasoning) -> ConverseReasoningContent | None:
    """Bedrock's own reasoning, sent back verbatim; unsigned or foreign reasoning is dropped."""
    if reasoning.provider not in (None, PROVIDER):
        return None
    if reasoning.redacted_data:
        return {"redactedContent": reasoning.redacted_data}
    if reasoning.signature:
        return {"reasoningText": {"text": reasoning.text, "signature": reasoning.signature}}
    return None


def _tool_result(message: Message) -> ConverseContentBlock:
    return {
        "toolResult": {
            "toolUseId": message.tool_call_id or "",
            "content": [{"text": message.content or EMPTY_TOOL_RESULT}],
            "status": "error" if message.is_error else "success",
        }
    }


def _image(image: ImageRef) -> ConverseImage:
    if image.url.startswith("data:"):
        header, _, data = image.url.partition(",")
        media_type = header[len("data:") :].split(";")[0] or image.media_type or ""
        if header.endswith(";base64"):
            return {"format": _format(media_type, image.url), "source": {"bytes": data}}
    if image.url.startswith("s3://"):
        media_type = image.media_type or mimetypes.guess_type(image.url)[0] or ""
        return {
            "format": _format(media_type, image.url),
            "source": {"s3Location": {"uri": image.url}},
        }
    raise ConfigurationError(
        f"Bedrock cannot fetch the image at {image.url[:80]!r}.",
        hint="Pass the image inline as a base64 data: URL, or as an s3:// URI.",
    )


def _format(media_type: str, url: str) -> ImageFormat:
    found = _FORMATS.get(media_type.lower())
    if found is None:
        raise ConfigurationError(
            f"Bedrock does not take images of type {media_type or 'unknown'!r} ({url[:60]!r}).",
            hint="Use a PNG, JPEG, GIF or WebP image, and say its media type.",
        )
    return found


def _tool(tool: ToolDefinition) -> ConverseTool:
    spec = ConverseToolSpec(name=tool.name, inputSchema={"json": tool.parameters})
    if tool.description:
        spec["description"] = tool.description
    return {"toolSpec": spec}


def _tool_choice(choice: str, name: str) -> ConverseToolChoice:
    if choice == "tool":
        return {"tool": {"name": name}}
    return {"any": {}}
