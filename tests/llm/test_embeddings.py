"""Embeddings: each vendor's request and answer over a real local HTTP server, usage and cost."""

from __future__ import annotations

import json
import math
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from bedrock_replay import ACCESS_KEY, BEARER, SECRET_KEY, isolate_aws
from llm_replay import NO_RETRY, ReplayServer, Reply

from tidemill.errors import (
    AuthenticationError,
    ConfigurationError,
    MissingCredentialsError,
    ProviderError,
    RateLimitError,
)
from tidemill.llm import EmbeddingModel, Embeddings, HashingEmbedder, resolve_embedder
from tidemill.llm._pricing import prices_available
from tidemill.llm.embeddings import (
    BedrockEmbedder,
    GeminiEmbedder,
    HttpEmbedder,
    OllamaEmbedder,
    OpenAIEmbedder,
)
from tidemill.llm.http._sigv4 import AwsKeys, sign_v4

KEY = "sk-embed-SECRET-0123456789abcdef"


@pytest.fixture(autouse=True)
def _clean_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_aws(monkeypatch, tmp_path)


@pytest.fixture(autouse=True)
async def opened(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[list[EmbeddingModel]]:
    """Every HTTP embedder a test builds, closed after it (their clients hold sockets)."""
    made: list[EmbeddingModel] = []
    real_init = HttpEmbedder.__init__

    def init(self: HttpEmbedder, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        made.append(self)

    monkeypatch.setattr(HttpEmbedder, "__init__", init)
    yield made
    for embedder in made:
        await embedder.aclose()


def reply(body: Any, status: int = 200) -> Reply:
    return Reply(json.dumps(body).encode(), status=status, content_type="application/json")


def cosine(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


# -- OpenAI and the compatible vendors ------------------------------------------------------


async def test_openai_sends_the_batch_and_reads_vectors_in_index_order(
    server: ReplayServer,
) -> None:
    server.replies.append(
        reply(
            {
                "object": "list",
                "data": [
                    {"object": "embedding", "index": 1, "embedding": [0.0, 1.0]},
                    {"object": "embedding", "index": 0, "embedding": [1.0, 0.0]},
                ],
                "model": "text-embedding-3-small",
                "usage": {"prompt_tokens": 1_000_000, "total_tokens": 1_000_000},
            }
        )
    )
    embedder = resolve_embedder(
        "openai:text-embedding-3-small",
        api_key=KEY,
        base_url=f"{server.url}/v1",
        dimensions=2,
        retry=NO_RETRY,
    )
    found = await embedder.aembed(["first", "second"])
    seen = server.seen[0]
    assert (seen.method, seen.path) == ("POST", "/v1/embeddings")
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.headers["content-type"] == "application/json"
    assert seen.body == {
        "model": "text-embedding-3-small",
        "input": ["first", "second"],
        "encoding_format": "float",
        "dimensions": 2,
    }
    assert found.vectors == ((1.0, 0.0), (0.0, 1.0))
    assert (found.model, found.dimensions, len(found)) == ("text-embedding-3-small", 2, 2)
    assert (found.usage.requests, found.usage.input_tokens) == (1, 1_000_000)
    if prices_available():
        assert found.usage.cost_usd == pytest.approx(0.02)  # $0.02 per million tokens
        assert found.usage.unpriced_requests == 0
    else:
        assert found.usage.unpriced_requests == 1


async def test_a_long_list_is_split_into_batches_and_usage_adds_up(server: ReplayServer) -> None:
    for n in range(3):
        server.replies.append(
            reply({"data": [{"index": 0, "embedding": [float(n), 1.0]}] * (2 if n < 2 else 1),
                   "usage": {"prompt_tokens": 5}})
        )  # fmt: skip
    embedder = OpenAIEmbedder(
        "text-embedding-3-small", api_key=KEY, base_url=server.url, retry=NO_RETRY
    )
    embedder.max_batch = 2
    found = await embedder.aembed(["a", "b", "c", "d", "e"])
    assert [s.body["input"] for s in server.seen] == [["a", "b"], ["c", "d"], ["e"]]
    assert len(found) == 5
    assert (found.usage.requests, found.usage.input_tokens) == (3, 15)


async def test_mistral_takes_its_key_from_its_variable_and_gets_no_encoding_format(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MISTRAL_API_KEY", "mistral-SECRET-key")
    monkeypatch.setenv("MISTRAL_BASE_URL", f"{server.url}/v1")
    server.replies.append(
        reply({"data": [{"index": 0, "embedding": [0.5, 0.5]}], "model": "mistral-embed",
               "usage": {"prompt_tokens": 3, "total_tokens": 3}})
    )  # fmt: skip
    embedder = resolve_embedder("mistral", retry=NO_RETRY)
    found = await embedder.aembed(["bonjour"])
    assert server.seen[0].path == "/v1/embeddings"
    assert server.seen[0].headers["authorization"] == "Bearer mistral-SECRET-key"
    assert server.seen[0].body == {"model": "mistral-embed", "input": ["bonjour"]}
    assert (embedder.provider, found.usage.input_tokens) == ("mistral", 3)


async def test_a_refused_key_is_an_authentication_error_without_the_key(
    server: ReplayServer,
) -> None:
    server.replies.append(
        reply(
            {"error": {"message": f"Incorrect API key provided: {KEY}.",
                       "type": "invalid_request_error", "code": "invalid_api_key"}},
            status=401,
        )
    )  # fmt: skip
    embedder = OpenAIEmbedder("text-embedding-3-small", api_key=KEY, base_url=server.url)
    with pytest.raises(AuthenticationError) as caught:
        await embedder.aembed(["x"])
    error = caught.value
    assert error.status_code == 401
    assert KEY not in str(error) and KEY not in (error.body or "")
    assert KEY not in repr(embedder) and KEY not in json.dumps(embedder.describe())


async def test_a_rate_limit_is_a_rate_limit_error_once_retries_are_spent(
    server: ReplayServer,
) -> None:
    server.replies.append(
        reply({"error": {"message": "Rate limit reached", "type": "requests"}}, status=429)
    )
    embedder = OpenAIEmbedder(
        "text-embedding-3-small", api_key=KEY, base_url=server.url, retry=NO_RETRY
    )
    with pytest.raises(RateLimitError):
        await embedder.aembed(["x"])


async def test_an_answer_with_too_few_vectors_is_a_provider_error(server: ReplayServer) -> None:
    server.replies.append(reply({"data": [{"index": 0, "embedding": [1.0]}]}))
    embedder = OpenAIEmbedder("m", api_key=KEY, base_url=server.url, retry=NO_RETRY)
    with pytest.raises(ProviderError, match="1 embedding"):
        await embedder.aembed(["a", "b"])


async def test_an_answer_without_vectors_is_a_provider_error(server: ReplayServer) -> None:
    server.replies.append(reply({"data": [{"index": 0, "embedding": "nope"}]}))
    embedder = OpenAIEmbedder("m", api_key=KEY, base_url=server.url, retry=NO_RETRY)
    with pytest.raises(ProviderError, match=r"data\[0\]\.embedding"):
        await embedder.aembed(["a"])


@pytest.mark.parametrize("provider", ["deepseek", "groq"])
def test_vendors_without_an_embeddings_api_are_refused(provider: str) -> None:
    with pytest.raises(ConfigurationError, match="cannot embed") as caught:
        resolve_embedder(f"{provider}:anything", api_key="k")
    assert caught.value.hint and "openai:" in caught.value.hint


def test_openai_without_a_key_names_the_variable() -> None:
    with pytest.raises(MissingCredentialsError, match="OPENAI_API_KEY"):
        resolve_embedder("openai")


# -- Gemini ------------------------------------------------------------------------------------


async def test_gemini_batch_embed_contents(server: ReplayServer) -> None:
    server.replies.append(reply({"embeddings": [{"values": [0.1, 0.2]}, {"values": [0.3, 0.4]}]}))
    embedder = resolve_embedder(
        "gemini:gemini-embedding-001",
        api_key="AIza-SECRET-key",
        base_url=f"{server.url}/v1beta",
        task_type="RETRIEVAL_DOCUMENT",
        dimensions=2,
        retry=NO_RETRY,
    )
    found = await embedder.aembed(["one", "two"])
    seen = server.seen[0]
    assert seen.path == "/v1beta/models/gemini-embedding-001:batchEmbedContents"
    assert seen.headers["x-goog-api-key"] == "AIza-SECRET-key"
    assert "key=" not in seen.path
    one = {"model": "models/gemini-embedding-001", "taskType": "RETRIEVAL_DOCUMENT",
           "outputDimensionality": 2}  # fmt: skip
    assert seen.body == {
        "requests": [
            {**one, "content": {"parts": [{"text": "one"}]}},
            {**one, "content": {"parts": [{"text": "two"}]}},
        ]
    }
    assert found.vectors == ((0.1, 0.2), (0.3, 0.4))
    # Gemini reports no token count: the call is counted, not priced as free.
    assert (found.usage.requests, found.usage.unreported_requests) == (1, 1)
    assert found.usage.unpriced_requests == 1


async def test_gemini_bad_key_is_an_authentication_error(server: ReplayServer) -> None:
    server.replies.append(
        reply(
            {"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",
                       "status": "INVALID_ARGUMENT",
                       "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
                                    "reason": "API_KEY_INVALID"}]}},
            status=400,
        )
    )  # fmt: skip
    embedder = GeminiEmbedder("gemini-embedding-001", api_key="AIza-bad", base_url=server.url)
    with pytest.raises(AuthenticationError):
        await embedder.aembed(["x"])


def test_gemini_without_a_key_names_the_variables() -> None:
    with pytest.raises(MissingCredentialsError, match="gemini"):
        GeminiEmbedder("gemini-embedding-001")


# -- Bedrock -----------------------------------------------------------------------------------


async def test_bedrock_titan_signs_one_call_per_text(server: ReplayServer) -> None:
    server.replies += [
        reply({"embedding": [1.0, 0.0], "inputTextTokenCount": 400_000}),
        reply({"embedding": [0.0, 1.0], "inputTextTokenCount": 600_000}),
    ]
    embedder = BedrockEmbedder(
        "amazon.titan-embed-text-v2:0",
        region="us-east-1",
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        base_url=server.url,
        dimensions=256,
        concurrency=1,
        retry=NO_RETRY,
    )
    found = await embedder.aembed(["alpha", "beta"])
    assert [s.path for s in server.seen] == ["/model/amazon.titan-embed-text-v2%3A0/invoke"] * 2
    assert [s.body for s in server.seen] == [
        {"inputText": "alpha", "dimensions": 256},
        {"inputText": "beta", "dimensions": 256},
    ]
    seen = server.seen[0]
    stamp = seen.headers["x-amz-date"]
    expected = sign_v4(
        "POST",
        f"{server.url}/model/amazon.titan-embed-text-v2%3A0/invoke",
        body=json.dumps(seen.body, separators=(",", ":"), ensure_ascii=False).encode(),
        keys=AwsKeys(ACCESS_KEY, SECRET_KEY),
        region="us-east-1",
        service="bedrock",
        now=datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC),
    )
    assert seen.headers["authorization"] == expected["authorization"]
    assert found.vectors == ((1.0, 0.0), (0.0, 1.0))
    assert (found.usage.requests, found.usage.input_tokens) == (2, 1_000_000)
    if prices_available():
        assert found.usage.cost_usd == pytest.approx(0.02)


async def test_bedrock_cohere_sends_the_batch_with_a_bearer_key(server: ReplayServer) -> None:
    server.replies.append(
        reply({"id": "e1", "response_type": "embeddings_floats", "texts": ["a", "b"],
               "embeddings": [[0.1, 0.9], [0.9, 0.1]]})
    )  # fmt: skip
    embedder = resolve_embedder(
        "bedrock:cohere.embed-english-v3",
        region="eu-west-1",
        api_key=BEARER,
        base_url=server.url,
        retry=NO_RETRY,
    )
    found = await embedder.aembed(["a", "b"])
    seen = server.seen[0]
    assert seen.path == "/model/cohere.embed-english-v3/invoke"
    assert seen.headers["authorization"] == f"Bearer {BEARER}"
    assert seen.body == {"texts": ["a", "b"], "input_type": "search_document"}
    assert found.vectors == ((0.1, 0.9), (0.9, 0.1))
    assert found.usage.unreported_requests == 1


async def test_bedrock_errors_are_typed_and_scrubbed(server: ReplayServer) -> None:
    server.replies.append(
        reply({"message": f"The security token included in the request is invalid {SECRET_KEY}"},
              status=403)
    )  # fmt: skip
    embedder = BedrockEmbedder(
        "amazon.titan-embed-text-v2:0",
        region="us-east-1",
        access_key_id=ACCESS_KEY,
        secret_access_key=SECRET_KEY,
        base_url=server.url,
        retry=NO_RETRY,
    )
    with pytest.raises(AuthenticationError) as caught:
        await embedder.aembed(["x"])
    assert SECRET_KEY not in str(caught.value) and SECRET_KEY not in (caught.value.body or "")


def test_bedrock_refuses_a_model_that_is_not_an_embedding_model() -> None:
    with pytest.raises(ConfigurationError, match="not a Bedrock embedding model"):
        BedrockEmbedder("anthropic.claude-3-haiku", region="us-east-1", api_key=BEARER)


# -- Ollama ------------------------------------------------------------------------------------


async def test_ollama_native_embed(server: ReplayServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_BASE_URL", f"{server.url}/v1")  # the chat root: /v1 is dropped
    server.replies.append(
        reply({"model": "nomic-embed-text", "embeddings": [[0.25, 0.75]],
               "total_duration": 1, "load_duration": 1, "prompt_eval_count": 4})
    )  # fmt: skip
    embedder = resolve_embedder("ollama:nomic-embed-text", retry=NO_RETRY)
    found = await embedder.aembed(["hello there"])
    seen = server.seen[0]
    assert seen.path == "/api/embed"
    assert "authorization" not in seen.headers
    assert seen.body == {"model": "nomic-embed-text", "input": ["hello there"]}
    assert (found.vectors, found.usage.input_tokens) == (((0.25, 0.75),), 4)
    assert found.usage.unpriced_requests == 1  # a local server has no list price


async def test_ollama_unknown_model_is_a_provider_error(server: ReplayServer) -> None:
    server.replies.append(reply({"error": 'model "nope" not found, try pulling it first'}, 404))
    embedder = OllamaEmbedder("nope", base_url=server.url, retry=NO_RETRY)
    with pytest.raises(ProviderError, match="not found") as caught:
        await embedder.aembed(["x"])
    assert caught.value.status_code == 404


# -- the offline embedder and the resolver -----------------------------------------------------


async def test_hashing_embedder_puts_similar_texts_near_each_other() -> None:
    fake = resolve_embedder("fake", dimensions=512)
    found = await fake.aembed(
        ["What is the capital of France?", "Paris is the capital of France.", "Sort a list."]
    )
    question, answer, other = found.vectors
    assert cosine(question, answer) > cosine(question, other)
    assert all(math.isclose(cosine(v, v), 1.0) for v in found.vectors)
    again = await HashingEmbedder(dimensions=512).aembed(["What is the capital of France?"])
    assert again.vectors[0] == question
    assert (found.usage.cost_usd, found.usage.unpriced_requests) == (0.0, 0)


async def test_no_text_means_no_call() -> None:
    found = await resolve_embedder("fake").aembed([])
    assert found == Embeddings((), model="hashing-256", usage=found.usage)
    assert found.usage.requests == 0


@pytest.mark.parametrize(
    ("texts", "words"),
    [("one string", "not one string"), (["ok", "  "], "Text 1 to embed is empty"),
     (["ok", 3], "Text 1 to embed is a int")],
)  # fmt: skip
async def test_bad_input_is_refused_before_any_call(texts: Any, words: str) -> None:
    with pytest.raises(ConfigurationError, match=words):
        await resolve_embedder("fake").aembed(texts)


def test_resolver_suggests_close_names_and_options() -> None:
    with pytest.raises(ConfigurationError) as provider:
        resolve_embedder("gemni:x")
    assert provider.value.hint and "'gemini'" in provider.value.hint
    with pytest.raises(ConfigurationError) as option:
        resolve_embedder("openai", api_key="k", dimension=3)
    assert option.value.hint and "'dimensions'" in option.value.hint
    with pytest.raises(ConfigurationError, match="no default"):
        resolve_embedder("ollama")
    with pytest.raises(ConfigurationError, match="also given"):
        resolve_embedder("openai:a", model="b", api_key="k")
    assert resolve_embedder("ollama", model="all-minilm").model_name == "all-minilm"


def test_resolver_passes_an_embedder_through_and_refuses_other_objects() -> None:
    fake = HashingEmbedder()
    assert resolve_embedder(fake) is fake
    with pytest.raises(ConfigurationError, match="already built"):
        resolve_embedder(fake, dimensions=3)
    with pytest.raises(ConfigurationError, match="Cannot use int"):
        resolve_embedder(3)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="at least 8"):
        HashingEmbedder(dimensions=2)
    assert isinstance(fake, EmbeddingModel)


@pytest.mark.parametrize("name", ["tidemill.llm.embeddings", "tidemill.agents.memory"])
def test_every_public_name_is_exported(name: str) -> None:
    import importlib
    import types

    module = importlib.import_module(name)
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, types.ModuleType)
        and str(getattr(value, "__module__", name)).startswith(name)
        and attr != "annotations"
    }
    assert public <= set(module.__all__)
    assert all(hasattr(module, symbol) for symbol in module.__all__)


async def test_openai_organization_and_project_headers(
    server: ReplayServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_ORG_ID", "org-1")
    monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-1")
    server.replies.append(reply({"data": [{"index": 0, "embedding": [1.0]}]}))
    embedder = OpenAIEmbedder("m", api_key=KEY, base_url=server.url, headers={"x-team": "a"})
    found = await embedder.aembed(["x"])
    headers = server.seen[0].headers
    assert (headers["openai-organization"], headers["openai-project"]) == ("org-1", "proj-1")
    assert headers["x-team"] == "a"
    assert found.usage.unreported_requests == 1  # no `usage` in the answer
    assert embedder.describe() == {
        "provider": "openai", "model": "m", "base_url": server.url, "api": "embeddings",
    }  # fmt: skip


async def test_ollama_options_and_a_cloud_key(server: ReplayServer) -> None:
    server.replies.append(reply({"model": "m", "embeddings": [[1.0, 0.0]]}))
    embedder = OllamaEmbedder(
        "m", base_url=server.url, api_key="ollama-SECRET", dimensions=2, truncate=False
    )
    await embedder.aembed(["x"])
    seen = server.seen[0]
    assert seen.body == {"model": "m", "input": ["x"], "dimensions": 2, "truncate": False}
    assert seen.headers["authorization"] == "Bearer ollama-SECRET"


def test_an_empty_model_id_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="No embedding model id") as caught:
        OpenAIEmbedder(" ", api_key=KEY)
    assert caught.value.hint == "Write it as 'openai:<model id>'."


@pytest.mark.parametrize("provider", ["anthropic", "azure", "vertex", "openai-responses"])
def test_chat_providers_without_an_embedding_adapter_say_so(provider: str) -> None:
    with pytest.raises(ConfigurationError, match="has no embedding model here") as caught:
        resolve_embedder(f"{provider}:x")
    assert caught.value.hint and "gemini:" in caught.value.hint
