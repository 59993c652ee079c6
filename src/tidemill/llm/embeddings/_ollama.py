"""`OllamaEmbedder`: a local (or cloud) Ollama server's native `/api/embed`.

`POST {host}/api/embed` with `{"model", "input": [texts]}` answers
`{"model", "embeddings": [[...]], "prompt_eval_count"}`. The host is the
server's root: `OLLAMA_BASE_URL` is read as for chat, and a trailing `/v1`
(the OpenAI-compatible root chat uses) is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import httpx

from tidemill.llm._adapter import HttpCall
from tidemill.llm._credentials import Credentials
from tidemill.llm._json import JsonObject
from tidemill.llm._retry import RetryPolicy
from tidemill.llm.embeddings._base import Batch, HttpEmbedder, float_vector, int_field, json_list
from tidemill.llm.openai._dialects import DIALECTS

__all__ = ["OllamaEmbedder"]


class OllamaEmbedder(HttpEmbedder):
    """Embeddings from an Ollama server (`nomic-embed-text`, `mxbai-embed-large`, ...).

    Args:
        model_name: A model the server has pulled.
        base_url: The server (default `http://localhost:11434`, or `OLLAMA_BASE_URL`).
        api_key: For Ollama's cloud (`OLLAMA_API_KEY`); a local server needs none.
        dimensions: Ask for shorter vectors, where the model supports it.
        truncate: Whether the server may cut texts longer than the model's context.
        headers: Extra headers for every request.
        credentials: All of the above in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds.
        retry: The retry policy (default: 2 retries with backoff).

    Examples:
        >>> model = OllamaEmbedder("nomic-embed-text", base_url="http://gpu:11434/v1")
        >>> model.build_call(["hi"]).url
        'http://gpu:11434/api/embed'
    """

    def __init__(
        self,
        model_name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dimensions: int | None = None,
        truncate: bool | None = None,
        headers: Mapping[str, str] | None = None,
        credentials: Credentials | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        source = DIALECTS["ollama"].source
        resolved = source.resolve(credentials, api_key=api_key, base_url=base_url, headers=headers)
        super().__init__(
            model_name,
            provider="ollama",
            credentials=resolved,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            auth_hint=source.auth_hint,
        )
        self.dimensions = dimensions
        self.truncate = truncate

    @property
    def host(self) -> str:
        """The server's root URL, without the `/v1` of its OpenAI-compatible API."""
        return (self.credentials.base_url or "").removesuffix("/v1")

    def build_call(self, texts: Sequence[str]) -> HttpCall:
        """The POST to `{host}/api/embed`."""
        body: dict[str, object] = {"model": self.model_name, "input": list(texts)}
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        if self.truncate is not None:
            body["truncate"] = self.truncate
        headers = dict(self.credentials.headers)
        if self.credentials.api_key:
            headers["authorization"] = f"Bearer {self.credentials.api_key}"
        return HttpCall(f"{self.host}/api/embed", headers, body)

    def parse_batch(self, payload: JsonObject) -> Batch:
        """Read `embeddings` and `prompt_eval_count`."""
        rows = json_list(payload, "embeddings", self.provider)
        model = payload.get("model")
        return Batch(
            [float_vector(row, self.provider, f"embeddings[{i}]") for i, row in enumerate(rows)],
            model=model if isinstance(model, str) else None,
            input_tokens=int_field(payload, "prompt_eval_count"),
        )
