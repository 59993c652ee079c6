"""`AnthropicVertexModel`: Claude through Vertex AI.

The body is the Anthropic Messages body with two changes — the model moves
from the body into the URL, and `anthropic_version: "vertex-2023-10-16"`
is added — and the answers (whole or streamed) are Anthropic's, so the
builder and the parsers are the Anthropic adapter's. The call goes to
`.../projects/{project}/locations/{location}/publishers/anthropic/models/
{model}:rawPredict` (`:streamRawPredict` for streams) with a bearer token.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping, Sequence

import httpx
from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.llm._adapter import HttpCall
from tidemill.llm._credentials import Credentials
from tidemill.llm._failures import ErrorReporter
from tidemill.llm._forced_output import forced_text, forced_text_stream
from tidemill.llm._json import JsonObject
from tidemill.llm._model import ModelRequest, ModelSettings, ModelStreamEvent
from tidemill.llm._options import RequestFields
from tidemill.llm._retry import RetryPolicy
from tidemill.llm.anthropic._adapter import build_messages_request, default_max_tokens
from tidemill.llm.anthropic._fields import anthropic_fields
from tidemill.llm.anthropic._stream import MessagesStreamParser, parse_message
from tidemill.llm.google._auth import VERTEX_AUTH_HINT, GoogleHttpModel, VertexSource
from tidemill.types import ModelResponse

__all__ = ["VERTEX_ANTHROPIC_VERSION", "AnthropicVertexModel"]

VERTEX_ANTHROPIC_VERSION = "vertex-2023-10-16"
"""The `anthropic_version` Vertex AI requires in the body."""

PROVIDER = "anthropic-vertex"
_SOURCE = VertexSource(PROVIDER)


class AnthropicVertexModel(GoogleHttpModel):
    """A Claude model on Vertex AI (Model Garden).

    Args:
        model_name: The Vertex model id, with its version (`claude-sonnet-4-5@20250929`).
        project: The Google Cloud project; by default `GOOGLE_CLOUD_PROJECT`
            (or `ANTHROPIC_VERTEX_PROJECT_ID`).
        location: The region or `global`; by default `GOOGLE_CLOUD_LOCATION`
            (or `CLOUD_ML_REGION`), else `global`.
        access_token: The bearer token; by default `GOOGLE_OAUTH_ACCESS_TOKEN`.
        api_key: Another name for `access_token`.
        base_url: The API host (default: the location's `aiplatform.googleapis.com` host).
        headers: Extra headers for every request.
        credentials: All of the above in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds (default: 10 s connect, 600 s read).
        retry: The retry policy (default: 2 retries with backoff).
        settings: Default settings of every call (`temperature`, `max_tokens`, ...).
        max_tokens: The `max_tokens` when the settings give none (the API requires one).
        thinking_budget: Turn on extended thinking with this many tokens (at least 1024).
        betas: Beta features to enable, sent as the `anthropic-beta` header.

    Raises:
        ConfigurationError: Without a project or a token, or with a thinking
            budget not below `max_tokens`.

    Examples:
        >>> model = AnthropicVertexModel("claude-sonnet-4-5@20250929", project="acme",
        ...                              location="us-east5", access_token="ya29.test")
        >>> call = model.build_call(ModelRequest([]), stream=True)
        >>> call.url
        'https://us-east5-aiplatform.googleapis.com/v1/projects/acme/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict'
        >>> call.body["anthropic_version"], "model" in call.body
        ('vertex-2023-10-16', False)
    """

    supports_output_format = True

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
        max_tokens: int | None = None,
        thinking_budget: int | None = None,
        betas: Sequence[str] = (),
    ) -> None:
        resolved = _SOURCE.resolve(
            credentials,
            project=project,
            location=location,
            access_token=access_token or api_key,
            base_url=base_url,
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
            auth_hint=VERTEX_AUTH_HINT,
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
        self._errors = ErrorReporter(PROVIDER, resolved.secrets(), VERTEX_AUTH_HINT)

    @property
    def project(self) -> str:
        """The Google Cloud project calls are made in."""
        return self.credentials.project or ""

    @property
    def location(self) -> str:
        """The Vertex AI location (`us-east5`, `global`, ...)."""
        return self.credentials.region or ""

    def build_call(self, request: ModelRequest, *, stream: bool) -> HttpCall:
        """Build the POST to `:rawPredict` or `:streamRawPredict`."""
        messages = build_messages_request(
            self.model_name,
            request,
            settings=self.merged_settings(request),
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
            stream=stream,
        )
        # Vertex validates the body strictly: the model is in the URL, never in the body.
        body: dict[str, object] = {"anthropic_version": VERTEX_ANTHROPIC_VERSION}
        body.update((key, value) for key, value in messages.items() if key != "model")
        method = "streamRawPredict" if stream else "rawPredict"
        url = (
            f"{self.credentials.base_url}/v1/projects/{self.project}/locations/{self.location}"
            f"/publishers/anthropic/models/{self.model_name}:{method}"
        )
        headers = {"authorization": f"Bearer {self.credentials.api_key}"}
        if self.betas:
            headers["anthropic-beta"] = ",".join(self.betas)
        headers.update(self.credentials.headers)
        return HttpCall(url, headers, body)

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
        """Describe the model (never the token)."""
        return {
            **super().describe(),
            "api": "messages",
            "project": self.project,
            "location": self.location,
            "thinking_budget": self.thinking_budget,
        }
