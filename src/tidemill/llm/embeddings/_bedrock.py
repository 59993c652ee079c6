"""`BedrockEmbedder`: Amazon Titan and Cohere embedding models through `InvokeModel`.

`POST {endpoint}/model/{modelId}/invoke`, SigV4-signed (or with a Bedrock
API key as a bearer token), with the model's own body:

- Amazon Titan (`amazon.titan-embed-text-v2:0`, `...-v1`): one text per
  call, `{"inputText", "dimensions"?, "normalize"?}`, answered with
  `{"embedding": [...], "inputTextTokenCount"}`; a batch is sent as
  concurrent calls, at most `concurrency` at once.
- Cohere (`cohere.embed-english-v3`, `cohere.embed-multilingual-v3`, ...):
  up to 96 texts per call, `{"texts", "input_type"}`, answered with
  `{"embeddings": [[...]]}` and no token count in the body.

Region, endpoint and credentials are found as for `BedrockModel` (see
`tidemill.llm.bedrock._aws`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

import httpx
from pydantic import JsonValue

from tidemill.errors import ConfigurationError, ProviderError
from tidemill.llm._adapter import HttpCall
from tidemill.llm._credentials import Credentials
from tidemill.llm._json import JsonObject
from tidemill.llm._retry import RetryPolicy
from tidemill.llm.bedrock._adapter import translate_bedrock_error
from tidemill.llm.bedrock._aws import AWS_AUTH_HINT, key_secrets, resolve_bedrock_access
from tidemill.llm.embeddings._base import (
    Batch,
    Embeddings,
    HttpEmbedder,
    check_texts,
    float_vector,
    int_field,
    json_list,
)
from tidemill.llm.http._sigv4 import AwsKeys
from tidemill.types import Usage

__all__ = ["BedrockEmbedder", "embedding_family"]


def embedding_family(model_id: str) -> str:
    """`titan` or `cohere`, from a model id, inference profile id or ARN.

    Raises:
        ConfigurationError: For a model of neither family.

    Examples:
        >>> embedding_family("amazon.titan-embed-text-v2:0")
        'titan'
        >>> embedding_family("cohere.embed-english-v3")
        'cohere'
    """
    name = model_id.rsplit("/", 1)[-1]
    if "titan-embed" in name:
        return "titan"
    if "cohere.embed" in name:
        return "cohere"
    raise ConfigurationError(
        f"{model_id!r} is not a Bedrock embedding model Tidemill knows how to call.",
        hint="Use an Amazon Titan text embedding model (bedrock:amazon.titan-embed-text-v2:0) "
        "or a Cohere one (bedrock:cohere.embed-english-v3).",
        context={"model": model_id},
    )


class BedrockEmbedder(HttpEmbedder):
    """Embeddings from Amazon Bedrock: Titan Text Embeddings or Cohere Embed.

    Args:
        model_name: The model id, inference profile id or ARN.
        region: The AWS region; by default `AWS_REGION` or `AWS_DEFAULT_REGION`.
        access_key_id: The access key id; by default `AWS_ACCESS_KEY_ID`.
        secret_access_key: The secret key; by default `AWS_SECRET_ACCESS_KEY`.
        session_token: The session token of temporary credentials (`AWS_SESSION_TOKEN`).
        api_key: A Bedrock API key, sent as a bearer token instead of signing.
        profile: A profile of the shared AWS config files (needs botocore).
        base_url: The endpoint (default `https://bedrock-runtime.{region}.amazonaws.com`).
        dimensions: Titan v2's `dimensions` (256, 512 or 1024).
        input_type: Cohere's `input_type` (default `search_document`).
        concurrency: Titan calls in flight at once for one batch.
        headers: Extra headers for every request (not signed).
        credentials: Region, keys and endpoint in one object; the arguments above win.
        http_client: An `httpx.AsyncClient` to use and leave open.
        timeout: Per-request `httpx` limits in seconds.
        retry: The retry policy (default: 2 retries with backoff).

    Raises:
        ConfigurationError: For a model of neither family, or without a region or credentials.

    Examples:
        >>> model = BedrockEmbedder("amazon.titan-embed-text-v2:0", region="us-east-1",
        ...                         access_key_id="AKIDEXAMPLE", secret_access_key="secret")
        >>> model.build_call(["hi"]).url
        'https://bedrock-runtime.us-east-1.amazonaws.com/model/amazon.titan-embed-text-v2%3A0/invoke'
    """

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
        dimensions: int | None = None,
        input_type: str = "search_document",
        concurrency: int = 8,
        headers: Mapping[str, str] | None = None,
        credentials: Credentials | None = None,
        http_client: httpx.AsyncClient | None = None,
        timeout: httpx.Timeout | float | None = None,
        retry: RetryPolicy | None = None,
    ) -> None:
        self.family = embedding_family(model_name)
        if concurrency < 1:
            raise ConfigurationError(f"concurrency must be at least 1, not {concurrency}.")
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
            provider="bedrock",
            credentials=access.credentials,
            http_client=http_client,
            timeout=timeout,
            retry=retry,
            auth_hint=AWS_AUTH_HINT,
        )
        self.access = access
        self.dimensions = dimensions
        self.input_type = input_type
        self.concurrency = concurrency
        self.max_batch = 1 if self.family == "titan" else 96

    def build_call(self, texts: Sequence[str]) -> HttpCall:
        """The POST to `/model/{id}/invoke`, not yet signed."""
        body: dict[str, object]
        if self.family == "titan":
            body = {"inputText": texts[0]}
            if self.dimensions is not None:
                body["dimensions"] = self.dimensions
        else:
            body = {"texts": list(texts), "input_type": self.input_type}
        url = self.access.model_url(self.model_name, "invoke")
        return HttpCall(url, self.access.headers("application/json"), body)

    def parse_batch(self, payload: JsonObject) -> Batch:
        """Titan's `embedding` and `inputTextTokenCount`, or Cohere's `embeddings`."""
        if self.family == "titan":
            vector = float_vector(payload.get("embedding"), self.provider, "embedding")
            return Batch([vector], input_tokens=int_field(payload, "inputTextTokenCount"))
        rows = json_list(payload, "embeddings", self.provider)
        return Batch(
            [float_vector(row, self.provider, f"embeddings[{i}]") for i, row in enumerate(rows)]
        )

    async def aembed(self, texts: Sequence[str]) -> Embeddings:
        """Embed `texts`: Cohere in batches of 96, Titan one call per text, concurrently."""
        if self.family == "cohere":
            return await super().aembed(texts)
        found = check_texts(texts)
        gate = asyncio.Semaphore(self.concurrency)

        async def one(text: str) -> Embeddings:
            async with gate:
                return await super(BedrockEmbedder, self).aembed([text])

        parts = await asyncio.gather(*(one(text) for text in found))
        vectors = tuple(v for part in parts for v in part.vectors)
        return Embeddings(vectors, model=self.model_name, usage=Usage.total(p.usage for p in parts))

    async def prepared(self, call: HttpCall) -> HttpCall:
        """Sign one call; see `BedrockAccess.sign`."""
        return await self.access.sign(call, found=self._found)

    def translate_error(self, error: ProviderError) -> ProviderError:
        """Re-type Bedrock's errors (an over-long text is a plain 400 there)."""
        return translate_bedrock_error(error)

    def describe(self) -> dict[str, JsonValue]:
        """Describe the embedder (never the keys)."""
        return {**super().describe(), "api": "invoke", "family": self.family}

    def _found(self, keys: AwsKeys) -> None:
        self.http.add_secrets(key_secrets(keys))
