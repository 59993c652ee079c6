"""`GeminiModel` and `VertexGeminiModel`: Gemini through Google's two front doors.

Both speak `generateContent` with the same body; they differ in where the
call goes and how it is authorised:

- `gemini:` — the Gemini API (`generativelanguage.googleapis.com`), an API
  key in `x-goog-api-key` (`GEMINI_API_KEY` or `GOOGLE_API_KEY`);
- `vertex:` — Vertex AI (`{location}-aiplatform.googleapis.com/v1/projects/
  {project}/locations/{location}/publishers/google/models/{model}`), a
  bearer token (`GOOGLE_OAUTH_ACCESS_TOKEN`).

The request builder here and the parser in `_stream` are shared;
each subclass only says where to send the call and with which headers.
"""

from __future__ import annotations

import mimetypes
import os
import re
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from typing import Literal, cast
from urllib.parse import quote

import httpx
from pydantic import JsonValue

from tidemill.errors import MissingCredentialsError
from tidemill.llm._adapter import HttpCall
from tidemill.llm._credentials import Credentials, CredentialSource, trusts_url
from tidemill.llm._failures import ErrorReporter
from tidemill.llm._json import JsonObject
from tidemill.llm._model import ForcedTool, ModelRequest, ModelSettings, ToolChoice
from tidemill.llm._options import Body, RequestFields
from tidemill.llm._retry import RetryPolicy
from tidemill.llm.google._auth import VERTEX_AUTH_HINT, GoogleHttpModel, VertexSource
from tidemill.llm.google._fields import gemini_fields
from tidemill.llm.google._schema import gemini_parameters, gemini_schema
from tidemill.llm.google._stream import (
    GeminiStreamParser,
    is_generated_id,
    parse_generate_content,
)
from tidemill.llm.google._wire import (
    GeminiContent,
    GeminiFunctionCall,
    GeminiFunctionCallingConfig,
    GeminiFunctionDeclaration,
    GeminiFunctionResponse,
    GeminiGenerationConfig,
    GeminiPart,
    GeminiRequest,
    GeminiThinkingConfig,
)
from tidemill.types import ImageRef, Message, ModelResponse, Role, ToolDefinition

__all__ = [
    "GEMINI_AUTH_HINT",
    "GEMINI_SOURCE",
    "SKIP_SIGNATURE",
    "GeminiModel",
    "VertexGeminiModel",
    "build_generate_content_request",
    "gemini_auth_headers",
    "gemini_url",
    "resolve_gemini_credentials",
]

GEMINI_SOURCE = CredentialSource(
    "gemini",
    "GEMINI_API_KEY",
    "https://generativelanguage.googleapis.com/v1beta",
    base_url_env="GEMINI_BASE_URL",
)
"""Where the Gemini API key and base URL come from (`GOOGLE_API_KEY` is read too)."""

GEMINI_AUTH_HINT = "Check the API key (GEMINI_API_KEY, GOOGLE_API_KEY or api_key=)."
"""What to tell a user whose Gemini API key was refused."""

SKIP_SIGNATURE = "skip_thought_signature_validator"
"""Google's documented stand-in signature, for Gemini 3 function calls that have none.

A history written by another model (or stored before signatures were
kept) has unsigned calls, which Gemini 3 refuses with a 400:
https://ai.google.dev/gemini-api/docs/thought-signatures
"""

_GEMINI_3 = re.compile(r"(^|/)gemini-3")
_OWN_PROVIDERS = frozenset({"gemini", "vertex"})


def resolve_gemini_credentials(
    credentials: Credentials | None = None,
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> Credentials:
    """The Gemini API's key and base URL, for chat (`GeminiModel`) and embeddings alike.

    The key is the argument, then `credentials`, then `GEMINI_API_KEY`, then
    `GOOGLE_API_KEY`.

    Raises:
        ConfigurationError: `MissingCredentialsError` without an API key.
    """
    key = api_key or (credentials.api_key if credentials else None)
    url = base_url or (credentials.base_url if credentials else None)
    env_url = os.environ.get("GEMINI_BASE_URL", "").strip() or None
    if not key and (url is None or trusts_url(url, env_url, GEMINI_SOURCE.default_base_url)):
        # The environment's key goes only to Google's API or GEMINI_BASE_URL.
        key = (
            os.environ.get("GEMINI_API_KEY", "").strip()
            or os.environ.get("GOOGLE_API_KEY", "").strip()
        )
    if not key:
        where = f" at {url}" if url else ""
        raise MissingCredentialsError(
            f"No API key for the gemini provider{where}.",
            hint="Set GEMINI_API_KEY (or GOOGLE_API_KEY), or pass api_key=; the variables "
            "are sent only to Google's API or the URL GEMINI_BASE_URL names.",
            context={"provider": "gemini", "env": "GEMINI_API_KEY"},
        )
    return GEMINI_SOURCE.resolve(credentials, api_key=key, base_url=base_url, headers=headers)


def gemini_url(credentials: Credentials, model_name: str, method: str) -> str:
    """`{base_url}/models/{model}:{method}` of the Gemini API, the model id percent-encoded.

    Examples:
        >>> gemini_url(Credentials(base_url="https://host/v1beta"), "m-1", "generateContent")
        'https://host/v1beta/models/m-1:generateContent'
    """
    return f"{credentials.base_url}/models/{quote(model_name, safe='')}:{method}"


def gemini_auth_headers(credentials: Credentials) -> dict[str, str]:
    """The API key as `x-goog-api-key` (never in the URL, where logs would keep it)."""
    return {"x-goog-api-key": credentials.api_key or ""}


class _GeminiBase(GoogleHttpModel):
    """What both Gemini front doors share: the body, the parsers, the options."""

    supports_output_format = True

    def __init__(
        self,
        model_name: str,
        *,
        provider: str,
        credentials: Credentials,
        auth_hint: str,
        http_client: httpx.AsyncClient | None,
        timeout: httpx.Timeout | float | None,
        retry: RetryPolicy | None,
        settings: ModelSettings | None,
        thinking_budget: int | None,
        thinking_level: str | None,
        include_thoughts: bool | None,
    ) -> None:
        super().__init__(
            model_name.removeprefix("models/"),
            provider=provider,
            credentials=credentials,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            settings=settings,
            auth_hint=auth_hint,
        )
        self.thinking_budget = thinking_budget
        self.thinking_level = thinking_level
        self.include_thoughts = include_thoughts
        self._errors = ErrorReporter(provider, credentials.secrets(), auth_hint)

    @abstractmethod
    def endpoint(self, method: Literal["generateContent", "streamGenerateContent"]) -> str:
        """The URL of `method` for this model (without query string)."""

    @abstractmethod
    def auth_headers(self) -> dict[str, str]:
        """The headers that authorise a call."""

    def build_call(self, request: ModelRequest, *, stream: bool) -> HttpCall:
        """Build the POST to `:generateContent` or `:streamGenerateContent?alt=sse`."""
        thinking = GeminiThinkingConfig()
        if self.thinking_budget is not None:
            thinking["thinkingBudget"] = self.thinking_budget
        if self.thinking_level is not None:
            thinking["thinkingLevel"] = self.thinking_level
        if self.include_thoughts is not None:
            thinking["includeThoughts"] = self.include_thoughts
        gemini_3 = bool(_GEMINI_3.search(self.model_name))
        body = build_generate_content_request(
            request,
            settings=self.merged_settings(request),
            thinking=thinking or None,
            sign_unsigned_calls=gemini_3,
            output_with_tools=gemini_3,
            fields=gemini_fields(gemini_3=gemini_3),
        )
        if stream:
            url = self.endpoint("streamGenerateContent") + "?alt=sse"
        else:
            url = self.endpoint("generateContent")
        headers = {**self.auth_headers(), **self.credentials.headers}
        return HttpCall(url, headers, body)

    @property
    def request_fields(self) -> RequestFields:
        """What `generateContent` makes of each request field, for this model."""
        return gemini_fields(gemini_3=bool(_GEMINI_3.search(self.model_name)))

    def parse_response(self, payload: JsonObject) -> ModelResponse:
        """Parse a whole `generateContent` response."""
        return parse_generate_content(payload, self._errors)

    def stream_parser(self) -> GeminiStreamParser:
        """A parser for one streamed response."""
        return GeminiStreamParser(self._errors)

    def describe(self) -> dict[str, JsonValue]:
        """Describe the model (never the key)."""
        return {**super().describe(), "api": "generateContent"}


class GeminiModel(_GeminiBase):
    """A Gemini model behind the Gemini API (Google AI Studio keys).

    Args:
        model_name: The model id (`gemini-2.5-flash`, `gemini-3-pro-preview`, ...).
        api_key: The key; by default `GEMINI_API_KEY`, then `GOOGLE_API_KEY`.
        base_url: The API root (default `https://generativelanguage.googleapis.com/v1beta`).
        headers: Extra headers for every request.
        credentials: All of the above in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds (default: 10 s connect, 600 s read).
        retry: The retry policy (default: 2 retries with backoff).
        settings: Default settings of every call (`temperature`, `max_tokens`, ...).
        thinking_budget: Thinking tokens allowed (Gemini 2.5; 0 turns thinking off, -1 dynamic).
        thinking_level: `low` or `high` thinking (Gemini 3).
        include_thoughts: Ask for thought summaries, which arrive as `Reasoning`.

    Raises:
        ConfigurationError: Without an API key.

    Examples:
        >>> model = GeminiModel("gemini-2.5-flash", api_key="AIza-test")
        >>> model.build_call(ModelRequest([]), stream=True).url
        'https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse'
    """

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
        thinking_budget: int | None = None,
        thinking_level: str | None = None,
        include_thoughts: bool | None = None,
    ) -> None:
        resolved = resolve_gemini_credentials(
            credentials, api_key=api_key, base_url=base_url, headers=headers
        )
        super().__init__(
            model_name,
            provider="gemini",
            credentials=resolved,
            auth_hint=GEMINI_AUTH_HINT,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            settings=settings,
            thinking_budget=thinking_budget,
            thinking_level=thinking_level,
            include_thoughts=include_thoughts,
        )

    def endpoint(self, method: Literal["generateContent", "streamGenerateContent"]) -> str:
        """`{base_url}/models/{model}:{method}`."""
        return gemini_url(self.credentials, self.model_name, method)

    def auth_headers(self) -> dict[str, str]:
        """The API key, as `x-goog-api-key` (never in the URL, where logs would keep it)."""
        return gemini_auth_headers(self.credentials)


VERTEX_SOURCE = VertexSource("vertex")


class VertexGeminiModel(_GeminiBase):
    """A Gemini model behind Vertex AI.

    Tidemill takes an OAuth access token rather than running Google's auth
    flow: pass one (`gcloud auth print-access-token`, a metadata server) and
    replace the model when it expires.

    Args:
        model_name: The model id (`gemini-2.5-pro`, ...).
        project: The Google Cloud project; by default `GOOGLE_CLOUD_PROJECT`.
        location: The region or `global`; by default `GOOGLE_CLOUD_LOCATION`, else `global`.
        access_token: The bearer token; by default `GOOGLE_OAUTH_ACCESS_TOKEN`.
        api_key: Another name for `access_token`.
        base_url: The API host (default: the location's `aiplatform.googleapis.com` host).
        headers: Extra headers for every request.
        credentials: All of the above in one object (`api_key` the token,
            `region` the location, `project` the project); the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds (default: 10 s connect, 600 s read).
        retry: The retry policy (default: 2 retries with backoff).
        settings: Default settings of every call (`temperature`, `max_tokens`, ...).
        thinking_budget: Thinking tokens allowed (Gemini 2.5).
        thinking_level: `low` or `high` thinking (Gemini 3).
        include_thoughts: Ask for thought summaries, which arrive as `Reasoning`.

    Raises:
        ConfigurationError: Without a project or a token.

    Examples:
        >>> model = VertexGeminiModel("gemini-2.5-pro", project="acme", location="us-central1",
        ...                           access_token="ya29.test")
        >>> model.build_call(ModelRequest([]), stream=False).url
        'https://us-central1-aiplatform.googleapis.com/v1/projects/acme/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent'
    """

    def __init__(
        self,
        model_name: str,
        *,
        project: str | None = None,
        location: str | None = None,
        access_token: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        credentials: Credentials | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
        thinking_budget: int | None = None,
        thinking_level: str | None = None,
        include_thoughts: bool | None = None,
    ) -> None:
        resolved = VERTEX_SOURCE.resolve(
            credentials,
            project=project,
            location=location,
            access_token=access_token or api_key,
            base_url=base_url,
            headers=headers,
        )
        super().__init__(
            model_name,
            provider="vertex",
            credentials=resolved,
            auth_hint=VERTEX_AUTH_HINT,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            settings=settings,
            thinking_budget=thinking_budget,
            thinking_level=thinking_level,
            include_thoughts=include_thoughts,
        )

    @property
    def project(self) -> str:
        """The Google Cloud project calls are made in."""
        return self.credentials.project or ""

    @property
    def location(self) -> str:
        """The Vertex AI location (`us-central1`, `global`, ...)."""
        return self.credentials.region or ""

    def endpoint(self, method: Literal["generateContent", "streamGenerateContent"]) -> str:
        """`{host}/v1/projects/{project}/locations/{location}/publishers/google/models/{model}`."""
        return (
            f"{self.credentials.base_url}/v1/projects/{self.project}/locations/{self.location}"
            f"/publishers/google/models/{quote(self.model_name, safe='')}:{method}"
        )

    def auth_headers(self) -> dict[str, str]:
        """The access token as a bearer token."""
        return {"authorization": f"Bearer {self.credentials.api_key}"}

    def describe(self) -> dict[str, JsonValue]:
        """Describe the model (never the token)."""
        return {**super().describe(), "project": self.project, "location": self.location}


# -- the request body ------------------------------------------------------------------------


def build_generate_content_request(
    request: ModelRequest,
    *,
    settings: ModelSettings | None = None,
    thinking: GeminiThinkingConfig | None = None,
    sign_unsigned_calls: bool = False,
    output_with_tools: bool = False,
    fields: RequestFields | None = None,
) -> GeminiRequest:
    """Build the `generateContent` body for `request`.

    System messages become `systemInstruction`; the assistant is the `model`
    role; tool results become `functionResponse` parts of a user turn, named
    after their call; consecutive turns of one role are merged.

    Args:
        request: The conversation, tools and settings.
        settings: The settings to apply (default: the request's own).
        thinking: The `thinkingConfig`, if any.
        sign_unsigned_calls: Give the first call of a model turn without any
            signature the stand-in `SKIP_SIGNATURE` (Gemini 3 requires one).
        output_with_tools: Send the `output_format` even when the request has
            tools. Gemini before 3 refuses a JSON response MIME type together
            with function calling ("Function calling with a response mime type:
            'application/json' is unsupported"), so by default a request with
            tools goes without it and only the prompt asks for the shape.
        fields: What the request's `options` become (default: those of a
            model before Gemini 3, `gemini_fields`).

    A `tool_choice` becomes `toolConfig.functionCallingConfig`: mode `NONE`,
    `ANY`, or `ANY` with the one name in `allowedFunctionNames`.

    Raises:
        UnsupportedOption: For an option the API has no equivalent for.

    An `output_format` becomes `generationConfig.responseMimeType:
    "application/json"` and `responseSchema`, the schema rewritten for Gemini
    by `gemini_schema` (unsupported keywords removed); without a schema, only
    the MIME type (JSON mode).

    Examples:
        >>> from tidemill.types import Message
        >>> build_generate_content_request(ModelRequest([Message.system("Be brief."),
        ...                                              Message.user("Hi")]))
        {'contents': [{'role': 'user', 'parts': [{'text': 'Hi'}]}], \
'systemInstruction': {'parts': [{'text': 'Be brief.'}]}}
    """
    settings = request.settings if settings is None else settings
    body = GeminiRequest(contents=_contents(request.messages, sign_unsigned_calls))
    system = [m.content for m in request.messages if m.role is Role.SYSTEM and m.content]
    if system:
        body["systemInstruction"] = {"parts": [{"text": "\n\n".join(system)}]}
    declarations = [_declaration(tool) for tool in request.tools]
    if declarations:
        body["tools"] = [{"functionDeclarations": declarations}]
        if request.tool_choice != "auto":
            body["toolConfig"] = {"functionCallingConfig": _calling(request.tool_choice)}
    config = _generation_config(settings)
    output = request.output_format
    if output is not None and (output_with_tools or not declarations):
        config["responseMimeType"] = "application/json"
        if output.schema is not None:
            config["responseSchema"] = gemini_schema(output.schema)
    if thinking:
        config["thinkingConfig"] = thinking
    if config:
        body["generationConfig"] = config
    if request.options:
        fields = fields or gemini_fields(gemini_3=False)
        fields.apply(cast(Body, body), request.options)
    return body


def _calling(choice: ToolChoice) -> GeminiFunctionCallingConfig:
    if isinstance(choice, ForcedTool):
        return {"mode": "ANY", "allowedFunctionNames": [choice.name]}
    return {"mode": "NONE" if choice == "none" else "ANY"}


def _generation_config(settings: ModelSettings) -> GeminiGenerationConfig:
    config = GeminiGenerationConfig()
    if "temperature" in settings:
        config["temperature"] = settings["temperature"]
    if "top_p" in settings:
        config["topP"] = settings["top_p"]
    if "max_tokens" in settings:
        config["maxOutputTokens"] = settings["max_tokens"]
    if "stop" in settings:
        config["stopSequences"] = list(settings["stop"])
    if "seed" in settings:
        config["seed"] = settings["seed"]
    return config


def _contents(messages: Sequence[Message], sign_unsigned_calls: bool) -> list[GeminiContent]:
    turns: list[GeminiContent] = []
    names = _call_names(messages)
    for message in messages:
        role: Literal["user", "model"]
        if message.role is Role.SYSTEM:
            continue
        if message.role is Role.ASSISTANT:
            role, parts = "model", _model_parts(message, sign_unsigned_calls)
        elif message.role is Role.TOOL:
            role, parts = "user", [_function_response(message, names)]
        else:
            role = "user"
            parts = [{"text": message.content}] if message.content else []
            parts += [_image(image) for image in message.images]
        if not parts:
            continue  # Gemini refuses a turn without parts
        if turns and turns[-1]["role"] == role:
            turns[-1]["parts"].extend(parts)
        else:
            turns.append({"role": role, "parts": parts})
    return turns


def _call_names(messages: Sequence[Message]) -> dict[str, str]:
    """Each call id of the history → its tool name, to name a result that lacks one."""
    return {call.id: call.name for m in messages for call in m.tool_calls}


def _model_parts(message: Message, sign_unsigned_calls: bool) -> list[GeminiPart]:
    parts: list[GeminiPart] = []
    text_signature: str | None = None
    for reasoning in message.reasoning:
        if reasoning.provider not in (None, *_OWN_PROVIDERS) or not reasoning.signature:
            continue  # unsigned thought summaries are not read back; others' are not ours
        if reasoning.text:
            parts.append(
                {"text": reasoning.text, "thought": True, "thoughtSignature": reasoning.signature}
            )
        else:
            text_signature = reasoning.signature
    if message.content or text_signature:
        text: GeminiPart = {"text": message.content}
        if text_signature:
            text["thoughtSignature"] = text_signature
        parts.append(text)
    unsigned = not any(call.signature for call in message.tool_calls)
    for position, call in enumerate(message.tool_calls):
        function = GeminiFunctionCall(
            name=call.name, args=call.arguments if call.raw_arguments is None else {}
        )
        if not is_generated_id(call.id):
            function["id"] = call.id
        part: GeminiPart = {"functionCall": function}
        signature = call.signature
        if signature is None and sign_unsigned_calls and unsigned and position == 0:
            signature = SKIP_SIGNATURE
        if signature:
            part["thoughtSignature"] = signature
        parts.append(part)
    return parts


def _function_response(message: Message, names: Mapping[str, str]) -> GeminiPart:
    call_id = message.tool_call_id or ""
    key = "error" if message.is_error else "result"
    response = GeminiFunctionResponse(
        name=message.name or names.get(call_id, ""), response={key: message.content}
    )
    if call_id and not is_generated_id(call_id):
        response["id"] = call_id
    return {"functionResponse": response}


def _image(image: ImageRef) -> GeminiPart:
    if image.url.startswith("data:"):
        header, _, data = image.url.partition(",")
        media_type = header[len("data:") :].split(";")[0] or image.media_type or "image/png"
        if header.endswith(";base64"):
            return {"inlineData": {"mimeType": media_type, "data": data}}
    media_type = image.media_type or mimetypes.guess_type(image.url)[0] or "image/jpeg"
    return {"fileData": {"mimeType": media_type, "fileUri": image.url}}


def _declaration(tool: ToolDefinition) -> GeminiFunctionDeclaration:
    declaration = GeminiFunctionDeclaration(name=tool.name)
    if tool.description:
        declaration["description"] = tool.description
    parameters = gemini_parameters(tool.parameters)
    if parameters is not None:
        declaration["parameters"] = parameters
    return declaration
