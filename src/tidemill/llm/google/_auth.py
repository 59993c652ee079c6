"""Google Cloud plumbing shared by `gemini:`, `vertex:` and `anthropic-vertex:`.

Two things every Google-hosted adapter needs: where a Vertex AI call goes
(project, location, a bearer token, the regional host) and how Google words
its failures. Google errors have one shape (`{"error": {"code", "message",
"status", "details"}}`) but say some things the shared error mapping cannot
know, such as a rejected API key arriving as a plain 400, so
`GoogleHttpModel` re-types them before they leave the adapter.
"""

from __future__ import annotations

import os
import re
from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from dataclasses import dataclass, replace

from tidemill.errors import (
    AuthenticationError,
    ContextWindowExceeded,
    MissingCredentialsError,
    ProviderError,
)
from tidemill.llm._adapter import HttpModel
from tidemill.llm._credentials import Credentials, trusts_url
from tidemill.llm._failures import retyped
from tidemill.llm._model import ModelRequest, ModelStreamEvent
from tidemill.types import ModelResponse

__all__ = [
    "VERTEX_AUTH_HINT",
    "GoogleHttpModel",
    "VertexSource",
    "translate_google_error",
    "vertex_host",
]

VERTEX_AUTH_HINT = (
    "Check the access token (access_token= or GOOGLE_OAUTH_ACCESS_TOKEN); "
    "`gcloud auth print-access-token` prints a fresh one, and tokens expire after an hour."
)
"""What to tell a user whose Vertex AI token was refused."""

# "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576)."
_GOOGLE_CONTEXT = re.compile(r"input token count.*exceeds the maximum", re.IGNORECASE)
_KEY_REASONS = ("API_KEY_INVALID", "API_KEY_SERVICE_BLOCKED", "API_KEY_HTTP_REFERRER_BLOCKED")


def vertex_host(location: str) -> str:
    """The Vertex AI API host of a location; `global` has no regional prefix.

    Examples:
        >>> vertex_host("europe-west4"), vertex_host("global")
        ('https://europe-west4-aiplatform.googleapis.com', 'https://aiplatform.googleapis.com')
    """
    if location == "global":
        return "https://aiplatform.googleapis.com"
    return f"https://{location}-aiplatform.googleapis.com"


@dataclass(frozen=True, slots=True)
class VertexSource:
    """Where a Vertex AI adapter finds its project, location and token.

    The resolved `Credentials` carry the token as `api_key`, the API host as
    `base_url`, the location as `region` and the Google Cloud project as
    `project`. No Google auth library is used: pass a token you obtained
    (`gcloud auth print-access-token`, a metadata server, workload identity).
    """

    provider: str
    """The provider's name, for messages."""
    default_location: str = "global"
    """The location when neither an argument nor `GOOGLE_CLOUD_LOCATION` gives one."""

    def resolve(
        self,
        credentials: Credentials | None = None,
        *,
        project: str | None = None,
        location: str | None = None,
        access_token: str | None = None,
        base_url: str | None = None,
        headers: Mapping[str, str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Credentials:
        """Combine arguments, `credentials` and the environment.

        Raises:
            ConfigurationError: Without a project or an access token, naming
                the variables to set.

        Examples:
            >>> creds = VertexSource("vertex").resolve(
            ...     project="acme", location="us-east5", access_token="ya29.x", environ={}
            ... )
            >>> creds.base_url, creds.project, creds.region
            ('https://us-east5-aiplatform.googleapis.com', 'acme', 'us-east5')
        """
        env = os.environ if environ is None else environ
        base = credentials or Credentials()
        project = (
            project
            or base.project
            or _env(env, "GOOGLE_CLOUD_PROJECT")
            or _env(env, "ANTHROPIC_VERTEX_PROJECT_ID")
        )
        location = (
            location
            or base.region
            or _env(env, "GOOGLE_CLOUD_LOCATION")
            or _env(env, "CLOUD_ML_REGION")
            or self.default_location
        )
        host = base_url or base.base_url or vertex_host(location)
        token = access_token or base.api_key
        if not token and trusts_url(host, vertex_host(location)):
            token = _env(env, "GOOGLE_OAUTH_ACCESS_TOKEN")  # only for Google's own host
        if not project:
            raise MissingCredentialsError(
                f"No Google Cloud project for the {self.provider} provider.",
                hint="Set GOOGLE_CLOUD_PROJECT, or pass project=.",
                context={"provider": self.provider, "env": "GOOGLE_CLOUD_PROJECT"},
            )
        if not token:
            raise MissingCredentialsError(
                f"No access token for the {self.provider} provider.",
                hint="Set GOOGLE_OAUTH_ACCESS_TOKEN (e.g. to `gcloud auth print-access-token`), "
                "or pass access_token=. The variable is sent only to Google's own host, "
                f"{vertex_host(location)}; another base_url needs access_token= with it.",
                context={"provider": self.provider, "env": "GOOGLE_OAUTH_ACCESS_TOKEN"},
            )
        return replace(
            base,
            api_key=token,
            base_url=host.rstrip("/"),
            project=project,
            region=location,
            headers={**base.headers, **(headers or {})},
        )


def translate_google_error(error: ProviderError) -> ProviderError:
    """Re-type a Google error the shared mapping left generic.

    A rejected API key comes back as HTTP 400 `INVALID_ARGUMENT` with reason
    `API_KEY_INVALID` (not 401), and an over-long prompt as a 400 whose
    message counts the input tokens; both get their own class here.
    """
    if isinstance(error, AuthenticationError | ContextWindowExceeded):
        return error
    text = f"{error.message} {error.body or ''}"
    if any(reason in text for reason in _KEY_REASONS):
        return AuthenticationError(
            error.message,
            provider=error.provider,
            status_code=error.status_code,
            body=error.body,
            code=error.code,
            hint="Check the API key (GEMINI_API_KEY, GOOGLE_API_KEY or api_key=).",
        )
    if error.status_code in (None, 400) and _GOOGLE_CONTEXT.search(text):
        return ContextWindowExceeded(
            error.message,
            provider=error.provider,
            status_code=error.status_code,
            body=error.body,
            code=error.code,
            hint="Shorten the conversation (drop or summarise old turns) or lower max_tokens.",
        )
    return error


class GoogleHttpModel(HttpModel):
    """An `HttpModel` whose failures pass through `translate_error` on their way out."""

    def translate_error(self, error: ProviderError) -> ProviderError:
        """Return the error to raise for `error` (by default, Google's re-typing)."""
        return translate_google_error(error)

    async def request(self, request: ModelRequest) -> ModelResponse:
        """Make one call and return the whole response; see `HttpModel.request`."""
        with retyped(self.translate_error):
            return await super().request(request)

    async def stream(self, request: ModelRequest) -> AsyncGenerator[ModelStreamEvent, None]:
        """Make one streamed call; see `HttpModel.stream`."""
        events = super().stream(request)
        async with aclosing(events):
            with retyped(self.translate_error):
                async for event in events:
                    yield event


def _env(environ: Mapping[str, str], name: str) -> str | None:
    value = environ.get(name, "").strip()
    return value or None
