"""`GeminiEmbedder`: the Gemini API's `batchEmbedContents`.

`POST {base_url}/models/{model}:batchEmbedContents` with one request per
text (`{"model": "models/{model}", "content": {"parts": [{"text"}]}}`,
plus `taskType` and `outputDimensionality` when set) answers
`{"embeddings": [{"values": [...]}]}`. The API reports no token count, so
each call is counted in `Usage.unreported_requests` (and priced as unknown).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import httpx

from tidemill.errors import ProviderError
from tidemill.llm._adapter import HttpCall
from tidemill.llm._credentials import Credentials
from tidemill.llm._json import JsonObject
from tidemill.llm._retry import RetryPolicy
from tidemill.llm.embeddings._base import Batch, HttpEmbedder, float_vector, json_list
from tidemill.llm.google._auth import translate_google_error
from tidemill.llm.google._gemini import (
    GEMINI_AUTH_HINT,
    gemini_auth_headers,
    gemini_url,
    resolve_gemini_credentials,
)

__all__ = ["GeminiEmbedder"]


class GeminiEmbedder(HttpEmbedder):
    """Embeddings from the Gemini API (`gemini-embedding-001`, `text-embedding-004`).

    Args:
        model_name: The model id.
        api_key: The key; by default `GEMINI_API_KEY`, then `GOOGLE_API_KEY`.
        base_url: The API root (default `https://generativelanguage.googleapis.com/v1beta`).
        task_type: Gemini's `taskType` (`RETRIEVAL_DOCUMENT`, `SEMANTIC_SIMILARITY`, ...).
        dimensions: `outputDimensionality`: ask for shorter vectors.
        headers: Extra headers for every request.
        credentials: All of the above in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds.
        retry: The retry policy (default: 2 retries with backoff).

    Raises:
        ConfigurationError: Without an API key.

    Examples:
        >>> model = GeminiEmbedder("gemini-embedding-001", api_key="AIza-test")
        >>> model.build_call(["hi"]).url
        'https://generativelanguage.googleapis.com/v1beta/models/gemini-embedding-001:batchEmbedContents'
    """

    max_batch = 100  # the API's limit of requests per batch

    def __init__(
        self,
        model_name: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        task_type: str | None = None,
        dimensions: int | None = None,
        headers: Mapping[str, str] | None = None,
        credentials: Credentials | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        resolved = resolve_gemini_credentials(
            credentials, api_key=api_key, base_url=base_url, headers=headers
        )
        super().__init__(
            model_name.removeprefix("models/"),
            provider="gemini",
            credentials=resolved,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            auth_hint=GEMINI_AUTH_HINT,
        )
        self.task_type = task_type
        self.dimensions = dimensions

    def build_call(self, texts: Sequence[str]) -> HttpCall:
        """The POST to `:batchEmbedContents`, the key in `x-goog-api-key` (never the URL)."""
        name = f"models/{self.model_name}"
        requests: list[dict[str, object]] = []
        for text in texts:
            one: dict[str, object] = {"model": name, "content": {"parts": [{"text": text}]}}
            if self.task_type is not None:
                one["taskType"] = self.task_type
            if self.dimensions is not None:
                one["outputDimensionality"] = self.dimensions
            requests.append(one)
        url = gemini_url(self.credentials, self.model_name, "batchEmbedContents")
        headers = {**gemini_auth_headers(self.credentials), **self.credentials.headers}
        return HttpCall(url, headers, {"requests": requests})

    def parse_batch(self, payload: JsonObject) -> Batch:
        """Read `embeddings[].values`; Gemini sends no token count."""
        rows = json_list(payload, "embeddings", self.provider)
        vectors = [
            float_vector(row.get("values") if isinstance(row, dict) else None,
                         self.provider, f"embeddings[{i}].values")
            for i, row in enumerate(rows)
        ]  # fmt: skip
        return Batch(vectors)

    def translate_error(self, error: ProviderError) -> ProviderError:
        """Re-type Google's errors (a bad key is a 400 there)."""
        return translate_google_error(error)
