"""Embeddings: texts in, vectors out, from every provider that serves them.

`resolve_embedder("openai:text-embedding-3-small")` builds an
`EmbeddingModel`, whose `aembed(texts)` returns `Embeddings` (the vectors in
order, the model that made them, and their `Usage`, priced as chat calls
are). One adapter per wire format, each speaking HTTP through the shared
client (`tidemill.llm.http`), with the same credentials and typed errors as
the chat adapters of its vendor:

- `OpenAIEmbedder`: `/embeddings` of OpenAI and the compatible vendors
  (Mistral, Together, OpenRouter, vLLM, any base URL);
- `GeminiEmbedder`: the Gemini API's `batchEmbedContents`;
- `BedrockEmbedder`: Titan and Cohere embedding models through `InvokeModel`;
- `OllamaEmbedder`: Ollama's native `/api/embed`;
- `HashingEmbedder` (`"fake"`): offline and deterministic, for tests.

Who owns what: `_base` holds the interface, the result type and the HTTP
core (`HttpEmbedder`: batching, counting, pricing); one module per adapter;
`_resolve` turns spec strings into embedders.
"""

from tidemill.llm.embeddings._base import Batch, EmbeddingModel, Embeddings, HttpEmbedder, Vector
from tidemill.llm.embeddings._bedrock import BedrockEmbedder
from tidemill.llm.embeddings._gemini import GeminiEmbedder
from tidemill.llm.embeddings._hashing import HashingEmbedder
from tidemill.llm.embeddings._ollama import OllamaEmbedder
from tidemill.llm.embeddings._openai import OpenAIEmbedder
from tidemill.llm.embeddings._resolve import (
    DEFAULT_EMBEDDING_MODELS,
    EMBEDDING_PROVIDERS,
    resolve_embedder,
)

__all__ = [
    "DEFAULT_EMBEDDING_MODELS",
    "EMBEDDING_PROVIDERS",
    "Batch",
    "BedrockEmbedder",
    "EmbeddingModel",
    "Embeddings",
    "GeminiEmbedder",
    "HashingEmbedder",
    "HttpEmbedder",
    "OllamaEmbedder",
    "OpenAIEmbedder",
    "Vector",
    "resolve_embedder",
]
