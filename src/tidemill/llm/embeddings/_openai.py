"""`OpenAIEmbedder`: OpenAI's `/embeddings`, and the compatible vendors that serve it.

`POST {base_url}/embeddings` with `{"model", "input": [texts]}` answers
`{"data": [{"index", "embedding"}], "model", "usage": {"prompt_tokens"}}`.
Mistral, Together, OpenRouter, vLLM, Ollama (at `/v1`) and any custom base
URL take the same request; each vendor's key variable and base URL come
from its chat dialect (`tidemill.llm.openai._dialects`), so one setting
serves both. DeepSeek and Groq have no embeddings endpoint and are refused.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import httpx
from pydantic import JsonValue

from tidemill.errors import ConfigurationError
from tidemill.llm._adapter import HttpCall
from tidemill.llm._credentials import Credentials
from tidemill.llm._json import JsonObject
from tidemill.llm._retry import RetryPolicy
from tidemill.llm.embeddings._base import (
    Batch,
    HttpEmbedder,
    float_vector,
    int_field,
    json_list,
    no_embedding,
)
from tidemill.llm.openai._dialects import DIALECTS, openai_headers

__all__ = ["NO_EMBEDDINGS", "OpenAIEmbedder"]

NO_EMBEDDINGS: Mapping[str, str] = {
    "deepseek": "DeepSeek's API serves chat models only",
    "groq": "Groq's API serves no embedding models",
}
"""OpenAI-compatible chat vendors without an embeddings endpoint, and why."""


class OpenAIEmbedder(HttpEmbedder):
    """Embeddings from OpenAI, or from an OpenAI-compatible server.

    Args:
        model_name: The model id (`text-embedding-3-small`, `mistral-embed`, ...).
        provider: `openai`, or `mistral`, `together`, `openrouter`, `ollama`,
            `vllm`, `openai-compatible`.
        api_key: The key; by default the vendor's variable (`OPENAI_API_KEY`, ...).
        base_url: The API root (`https://api.openai.com/v1`); needed for `openai-compatible`.
        dimensions: Ask for shorter vectors (OpenAI's `text-embedding-3-*` take it).
        headers: Extra headers for every request.
        credentials: All of the above in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds.
        retry: The retry policy (default: 2 retries with backoff).

    Raises:
        ConfigurationError: For a vendor without embeddings, or no API key where one is needed.

    Examples:
        >>> model = OpenAIEmbedder("text-embedding-3-small", api_key="sk-test")
        >>> call = model.build_call(["hello"])
        >>> call.url, call.body["input"]
        ('https://api.openai.com/v1/embeddings', ['hello'])
    """

    max_batch = 2048  # OpenAI's documented limit of inputs per request

    def __init__(
        self,
        model_name: str,
        *,
        provider: str = "openai",
        api_key: str | None = None,
        base_url: str | None = None,
        dimensions: int | None = None,
        headers: Mapping[str, str] | None = None,
        credentials: Credentials | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        if provider in NO_EMBEDDINGS:
            raise ConfigurationError(
                f"The {provider!r} provider cannot embed: {NO_EMBEDDINGS[provider]}.",
                hint="Use openai:, gemini:, bedrock:, mistral:, together:, ollama: or "
                "'fake' (offline) for embeddings.",
                context={"provider": provider},
            )
        dialect = DIALECTS.get(provider)
        if dialect is None:
            raise ConfigurationError(
                f"{provider!r} is not an OpenAI-compatible provider.",
                hint=f"Use one of {', '.join(sorted(set(DIALECTS) - set(NO_EMBEDDINGS)))}.",
            )
        source = dialect.source
        resolved = source.resolve(credentials, api_key=api_key, base_url=base_url, headers=headers)
        super().__init__(
            model_name,
            provider=dialect.name,
            credentials=resolved,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            auth_hint=source.auth_hint,
        )
        self.dimensions = dimensions

    def build_call(self, texts: Sequence[str]) -> HttpCall:
        """The POST to `{base_url}/embeddings`."""
        body: dict[str, object] = {"model": self.model_name, "input": list(texts)}
        if self.provider == "openai":
            body["encoding_format"] = "float"  # the default; others may refuse the field
        if self.dimensions is not None:
            body["dimensions"] = self.dimensions
        url = f"{self.credentials.base_url}/embeddings"
        return HttpCall(url, openai_headers(self.credentials), body)

    def parse_batch(self, payload: JsonObject) -> Batch:
        """Read `data[].embedding` (put back in `index` order) and `usage.prompt_tokens`."""
        items = json_list(payload, "data", self.provider)
        ranked: list[tuple[int, tuple[float, ...]]] = []
        for position, item in enumerate(items):
            where = f"data[{position}].embedding"
            if not isinstance(item, dict):
                raise no_embedding(self.provider, where)
            index = item.get("index", position)
            ranked.append(
                (index if isinstance(index, int) else position,
                 float_vector(item.get("embedding"), self.provider, where))
            )  # fmt: skip
        ranked.sort(key=lambda pair: pair[0])
        model = payload.get("model")
        return Batch(
            [vector for _, vector in ranked],
            model=model if isinstance(model, str) else None,
            input_tokens=int_field(payload.get("usage"), "prompt_tokens"),
        )

    def describe(self) -> dict[str, JsonValue]:
        """Describe the embedder (never the key)."""
        return {**super().describe(), "api": "embeddings"}
