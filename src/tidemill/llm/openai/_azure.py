"""`AzureOpenAIModel`: OpenAI models deployed on Azure OpenAI.

Azure speaks OpenAI's Chat Completions format, so the body and the parser
are `OpenAIChatModel`'s; only the address and the auth differ. A call goes
to the deployment's URL, `{endpoint}/openai/deployments/{deployment}/chat/
completions?api-version=...`, with the key in an `api-key` header (or a
Microsoft Entra ID token as a bearer token).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import quote, urlencode

import httpx
from pydantic import JsonValue

from tidemill.errors import ConfigurationError, MissingCredentialsError
from tidemill.llm._adapter import HttpCall
from tidemill.llm._credentials import Credentials, CredentialSource, trusts_url
from tidemill.llm._model import ModelRequest, ModelSettings
from tidemill.llm._retry import RetryPolicy
from tidemill.llm.openai._chat import OpenAIChatModel
from tidemill.llm.openai._dialects import OpenAIDialect

__all__ = ["AZURE_API_VERSION", "AzureDialect", "AzureOpenAIModel"]

AZURE_API_VERSION = "2024-10-21"
"""The `api-version` used when neither `api_version=` nor `OPENAI_API_VERSION` gives one."""


class AzureDialect(OpenAIDialect):
    """Azure OpenAI: OpenAI's format, Azure's credentials."""

    name = "azure"
    source = CredentialSource(
        "azure",
        "AZURE_OPENAI_API_KEY",
        None,
        base_url_env="AZURE_OPENAI_ENDPOINT",
        key_required=False,  # an Entra ID token may stand in for the key
    )


class AzureOpenAIModel(OpenAIChatModel):
    """A model deployment on Azure OpenAI.

    Args:
        deployment: The deployment name (what `azure:<name>` names), not the model id.
        api_key: The key; by default `AZURE_OPENAI_API_KEY`.
        base_url: The resource endpoint, `https://<resource>.openai.azure.com`;
            by default `AZURE_OPENAI_ENDPOINT`.
        api_version: The API version; by default `OPENAI_API_VERSION`, else `2024-10-21`.
        azure_ad_token: A Microsoft Entra ID token, sent instead of a key;
            by default `AZURE_OPENAI_AD_TOKEN`.
        headers: Extra headers for every request.
        credentials: Key, endpoint and headers in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds (default: 10 s connect, 600 s read).
        retry: The retry policy (default: 2 retries with backoff).
        settings: Default settings of every call (`temperature`, `max_tokens`, ...).
        reasoning_effort: For reasoning deployments: `low`, `medium` or `high`.

    Raises:
        ConfigurationError: Without an endpoint, or with neither a key nor a token.

    Examples:
        >>> model = AzureOpenAIModel("prod-gpt4o", api_key="k",
        ...                          base_url="https://acme.openai.azure.com")
        >>> model.build_call(ModelRequest([]), stream=False).url
        'https://acme.openai.azure.com/openai/deployments/prod-gpt4o/chat/completions?api-version=2024-10-21'
    """

    def __init__(
        self,
        deployment: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        api_version: str | None = None,
        azure_ad_token: str | None = None,
        headers: Mapping[str, str] | None = None,
        credentials: Credentials | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
        settings: ModelSettings | None = None,
        reasoning_effort: str | None = None,
    ) -> None:
        endpoint = (
            base_url
            or (credentials.base_url if credentials else None)
            or _env("AZURE_OPENAI_ENDPOINT")
        )
        if not endpoint:
            raise ConfigurationError(
                "No Azure OpenAI endpoint.",
                hint="Set AZURE_OPENAI_ENDPOINT to https://<resource>.openai.azure.com, "
                "or pass base_url=.",
                context={"provider": "azure", "env": "AZURE_OPENAI_ENDPOINT"},
            )
        key = api_key or (credentials.api_key if credentials else None)
        self.azure_ad_token = azure_ad_token
        if not key and not azure_ad_token and trusts_url(endpoint, _env("AZURE_OPENAI_ENDPOINT")):
            # The environment's secrets go only to the environment's endpoint.
            self.azure_ad_token = _env("AZURE_OPENAI_AD_TOKEN")
            key = _env("AZURE_OPENAI_API_KEY")
        if not key and not self.azure_ad_token:
            raise MissingCredentialsError(
                f"No API key for the azure provider at {endpoint}.",
                hint="Pass api_key= (or azure_ad_token=); AZURE_OPENAI_API_KEY and "
                "AZURE_OPENAI_AD_TOKEN are used only with the endpoint AZURE_OPENAI_ENDPOINT "
                "names.",
                context={"provider": "azure", "env": "AZURE_OPENAI_API_KEY"},
            )
        super().__init__(
            deployment,
            provider=AzureDialect(),
            # A token is held as the key, so errors scrub it like one.
            api_key=self.azure_ad_token or key,
            base_url=endpoint.rstrip("/").removesuffix("/openai"),
            headers=headers,
            credentials=credentials,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            settings=settings,
            reasoning_effort=reasoning_effort,
        )
        self.api_version = api_version or _env("OPENAI_API_VERSION") or AZURE_API_VERSION

    @property
    def deployment(self) -> str:
        """The deployment name calls go to."""
        return self.model_name

    def build_call(self, request: ModelRequest, *, stream: bool) -> HttpCall:
        """Build the POST to the deployment's `chat/completions`."""
        body = super().build_call(request, stream=stream).body
        url = (
            f"{self.credentials.base_url}/openai/deployments/{quote(self.deployment, safe='')}"
            f"/chat/completions?{urlencode({'api-version': self.api_version})}"
        )
        headers: dict[str, str] = {}
        if self.azure_ad_token:
            headers["authorization"] = f"Bearer {self.azure_ad_token}"
        elif self.credentials.api_key:
            headers["api-key"] = self.credentials.api_key
        headers.update(self.credentials.headers)
        return HttpCall(url, headers, body)

    def describe(self) -> dict[str, JsonValue]:
        """Describe the deployment (never the key)."""
        return {**super().describe(), "api_version": self.api_version}


def _env(name: str) -> str | None:
    value = os.environ.get(name, "").strip()
    return value or None
